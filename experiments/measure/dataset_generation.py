"""Measure synthetic dataset generation: wall time, peak memory and output size, one fresh process per run.

Usage::

    python experiments/measure/dataset_generation.py [SPEC ...] [--workdir /tmp/gnnsuite-gen] [--repeats 1]
        [--csv out/results/dataset_generation.csv] [--append] [--keep] [--verify]

Each SPEC is ``PRESET[,field=value...]`` (see :func:`suite.data.synthetic.config_from_spec`), e.g.
``livejournal-like`` or ``arxiv-like,num_nodes=1000000,avg_degree=20``. Every run generates the store in a fresh
child process (so imports and earlier runs do not pollute the numbers) under ``--workdir``, which should be
outside the repository; the parent reads the child's own peak resident set size from ``os.wait4`` (the kernel's
``ru_maxrss`` of that child alone, not the maximum over all children). ``gen_s`` is the time of
:func:`~suite.data.synthetic.generate` inside the child (what a user waits for, minus interpreter start-up);
``process_s`` is the whole child. Stores are deleted after measuring unless ``--keep``. The table is printed and
written atomically as CSV.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from experiments.common import REPO_ROOT, RESULTS, write_csv
DEFAULT_SPECS = ("arxiv-like,name=synthetic-1m-20m,num_nodes=1000000,avg_degree=20", "livejournal-like")
DEFAULT_CSV = RESULTS / "dataset_generation.csv"

_CHILD = r"""
import json, sys, time
from suite.data.synthetic import config_from_spec, generate
config = config_from_spec(sys.argv[1])
sizes = {k: int(v) for k, v in json.loads(sys.argv[4]).items() if v}
started = time.perf_counter()
store = generate(config, sys.argv[2], overwrite=True, **sizes)
elapsed = time.perf_counter() - started
if sys.argv[3] == "1":
    store.verify()
info = store.info()
print(json.dumps({"gen_s": elapsed, "num_nodes": store.num_nodes, "num_edges": store.num_edges,
                  "directed": store.directed, "feature_dim": store.feature_dim,
                  "store_bytes": info["bytes"], "train_edges": info.get("train_edges"),
                  "labeled_nodes": info.get("labeled_nodes")}))
"""


def folder_bytes(path: Path) -> int:
    """Total size of the regular files under ``path``."""
    return sum(file.stat().st_size for file in path.rglob("*") if file.is_file())


def run_child(spec: str, out: Path, verify: bool, sizes: dict[str, int]) -> dict:
    """Generate ``spec`` into ``out`` in a fresh process; return its report plus ``peak_rss_bytes`` and
    ``process_s`` (read from ``os.wait4``, i.e. that child alone)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryFile("w+") as stdout:
        started = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-c", _CHILD, spec, str(out), "1" if verify else "0",
                                  json.dumps(sizes)],
                                 stdout=stdout, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        process_s = time.perf_counter() - started
        stdout.seek(0)
        text = stdout.read()
    if child.returncode != 0:
        raise RuntimeError(f"generation of {spec!r} failed with exit code {child.returncode}")
    report = json.loads(text.strip().splitlines()[-1])
    report.update(peak_rss_bytes=usage.ru_maxrss * 1024, process_s=process_s, store_bytes_on_disk=folder_bytes(out))
    return report


def measure(spec: str, workdir: Path, repeats: int, keep: bool, verify: bool,
            sizes: dict[str, int]) -> dict:
    """Median numbers of ``repeats`` generations of ``spec``; ``sizes`` are chunk size arguments of
    :func:`~suite.data.synthetic.generate`."""
    from suite.load import LoadMonitor, load_columns

    out = workdir / spec.split(",")[0]
    runs = []
    monitor = LoadMonitor().start()  # the generators are children waited for: their CPU time is ours
    try:
        for _ in range(repeats):
            runs.append(run_child(spec, out, verify, sizes))
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)
    load = load_columns(monitor.stop())
    first = runs[0]
    gen_s = statistics.median(r["gen_s"] for r in runs)
    return {
        "spec": spec,
        "num_nodes": first["num_nodes"],
        "num_edges": first["num_edges"],
        "directed": first["directed"],
        "feature_dim": first["feature_dim"],
        "train_edges": first["train_edges"],
        "labeled_nodes": first["labeled_nodes"],
        "gen_s": round(gen_s, 2),
        "process_s": round(statistics.median(r["process_s"] for r in runs), 2),
        "stored_edges_per_s": round(first["num_edges"] / gen_s),
        "peak_rss_mib": round(max(r["peak_rss_bytes"] for r in runs) / 2**20, 1),
        "store_bytes": first["store_bytes_on_disk"],
        "repeats": repeats, **load,
        "chunk_edges": sizes["chunk_edges"],
        "max_bucket_edges": sizes["max_bucket_edges"],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": _dt.date.today().isoformat(),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="*", default=list(DEFAULT_SPECS),
                        help="PRESET[,field=value...] (default: %(default)s)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "gnnsuite-gen",
                        help="where stores are generated (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per spec; medians are reported")
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="output table (default: %(default)s)")
    parser.add_argument("--append", action="store_true", help="add rows to an existing CSV instead of replacing it")
    parser.add_argument("--keep", action="store_true", help="keep the generated stores")
    parser.add_argument("--verify", action="store_true", help="also run GraphStore.verify() in the child")
    parser.add_argument("--chunk-edges", type=int, help="generate(chunk_edges=...) (default: its default)")
    parser.add_argument("--max-bucket-edges", type=int, help="generate(max_bucket_edges=...) (default: its default)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")

    from suite.data import csr, synthetic
    from suite.data.synthetic import config_from_spec
    from suite.io import strict_json_dumps

    sizes = {"chunk_edges": args.chunk_edges or csr.DEFAULT_CHUNK_EDGES,
             "max_bucket_edges": args.max_bucket_edges or synthetic.MAX_BUCKET_EDGES}

    for spec in args.specs:
        config_from_spec(spec)  # fail fast on a bad spec, before any long run
    rows = []
    for spec in args.specs:
        rows.append(measure(spec, args.workdir, args.repeats, args.keep, args.verify, sizes))
        print(strict_json_dumps(rows[-1]), flush=True)
    table = pd.DataFrame(rows)
    if args.append and args.csv.exists():
        table = pd.concat([pd.read_csv(args.csv), table], ignore_index=True)
    print(table.to_string(index=False))
    write_csv(table, args.csv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
