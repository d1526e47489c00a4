"""Measure how long opening a GraphStore takes and how much memory it costs, in a fresh process.

Usage::

    python experiments/measure/store_open.py STORE [STORE ...] [--repeats 5] [--csv out/results/store_open.csv]

For each store, a fresh Python process imports the suite, then times ``GraphStore.open`` plus handing out
zero-copy tensors of every file, and reports the resident-set growth. Median over repeats; the page cache is
not dropped (opening reads only headers and metadata, so it does not matter).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd

_PROBE = r"""
import json, sys, time, psutil
from suite.data import GraphStore
process = psutil.Process()
rss_before = process.memory_info().rss
started = time.perf_counter()
store = GraphStore.open(sys.argv[1])
tensors = [store.tensor(key) for key in store.metadata["files"]]
elapsed = time.perf_counter() - started
print(json.dumps({"open_s": elapsed, "rss_growth_bytes": process.memory_info().rss - rss_before,
                  "store_bytes": sum(e["bytes"] for e in store.metadata["files"].values()),
                  "num_nodes": store.num_nodes, "num_edges": store.num_edges}))
"""


def measure(store: Path, repeats: int) -> dict:
    """Median open time and RSS growth of ``store`` over ``repeats`` fresh processes."""
    from suite.load import LoadMonitor, load_columns

    with LoadMonitor() as monitor:  # the probes are children waited for: their CPU time is ours, not foreign
        runs = [json.loads(subprocess.check_output([sys.executable, "-c", _PROBE, str(store)], text=True))
                for _ in range(repeats)]
    return {
        "store": str(store),
        "store_bytes": runs[0]["store_bytes"],
        "num_nodes": runs[0]["num_nodes"],
        "num_edges": runs[0]["num_edges"],
        "open_s_median": statistics.median(r["open_s"] for r in runs),
        "rss_growth_bytes_median": statistics.median(r["rss_growth_bytes"] for r in runs),
        "repeats": repeats,
        **load_columns(monitor.result),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--csv", type=Path, help="also write the table as CSV (atomically)")
    args = parser.parse_args(argv)
    table = pd.DataFrame([measure(store, args.repeats) for store in args.stores])
    print(table.to_string(index=False))
    if args.csv:
        from experiments.common import write_csv

        write_csv(table, args.csv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
