"""BETA vs COMET vs random partition-buffer IO per epoch at Hyperlink-2012 scale (simulated).

Every row prices one epoch of one policy's plan (the same plan objects the disk system executes:
:mod:`systems.disk.policies`) with :mod:`simulators.buffer_model`: link prediction with learnable embeddings on
Hyperlink-2012 (3.5B nodes, 128B edges; 100-d float32 embeddings + Adagrad state = 800 bytes per node; edges
on disk as int64 ``(src, rel, dst)``, 24 bytes, each bucket read once per epoch by the state it is assigned
to). Assumed machine (columns ``read_bw``, ``write_bw``, ``edges_per_s``, ``shared_disk``): one NVMe SSD at
3 GB/s read and 2 GB/s write serving reads and writes in FIFO order, and 5M training edges/s of compute.
Epoch times are estimates of this model, not measurements; swaps and bytes are exact for the plan.

Usage::

    python experiments/buffer_io.py [--csv out/results/buffer_io.csv] [--png out/results/buffer_io.png] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments.common import RESULTS, Mode, add_common_options, cli, write_csv
from simulators.buffer_model import HYPERLINK_2012, compare_policies

DEFAULT_CSV = RESULTS / "buffer_io.csv"
DEFAULT_PNG = RESULTS / "buffer_io.png"
READ_BW, WRITE_BW, EDGES_PER_S = 3e9, 2e9, 5e6

# (p, c, logical partitions l for COMET)
SETTINGS: tuple[tuple[int, int, tuple[int, ...]], ...] = (
    (1024, 64, (64, 128)),
    (1024, 128, (64, 128)),
    (4096, 512, (256, 512)),
    (8192, 1024, (512, 1024)),
)
QUICK_SETTINGS: tuple[tuple[int, int, tuple[int, ...]], ...] = ((256, 32, (16, 32)), (1024, 128, (64,)))


def simulate(settings: Sequence[tuple[int, int, Sequence[int]]], seed: int = 0) -> pd.DataFrame:
    """Simulate BETA and random once per ``(p, c)`` and COMET once per ``(p, c, l)``; one row each."""
    rows = []
    for p, c, logicals in settings:
        disk = HYPERLINK_2012.disk_model(p, read_bandwidth=READ_BW, write_bandwidth=WRITE_BW,
                                         compute_per_example_s=1.0 / EDGES_PER_S)
        runs = [("beta", 1), ("random", 1)] + [("comet", p // l) for l in logicals]
        for policy, ratio in runs:
            started = time.perf_counter()
            (row,) = compare_policies([policy], p, c, disk, ratio=ratio, seed=seed)
            row["wall_s"] = time.perf_counter() - started
            row.update(read_bw=READ_BW, write_bw=WRITE_BW, edges_per_s=EDGES_PER_S, shared_disk=True,
                       nodes=HYPERLINK_2012.num_nodes, edges=HYPERLINK_2012.num_edges, seed=seed)
            rows.append(row)
            print(f"p={p} c={c} {policy:7s} l={row['logical_partitions']:5d} swaps={row['swaps']:8d} "
                  f"read={row['bytes_read'] / 1e12:7.2f} TB written={row['bytes_written'] / 1e12:7.2f} TB "
                  f"epoch={row['epoch_time_prefetch_s'] / 3600:6.2f} h (serial {row['epoch_time_serial_s'] / 3600:6.2f} h) "
                  f"[{row['wall_s']:.1f} s]", flush=True)
    table = pd.DataFrame(rows)
    beta = table[table["policy"] == "beta"].set_index(["num_partitions", "capacity"])["bytes_read"]
    table["read_vs_beta"] = [row.bytes_read / beta[(row.num_partitions, row.capacity)] for row in table.itertuples()]
    return table


def run(*, mode: Mode = "full", csv: Path = DEFAULT_CSV, png: Path | None = DEFAULT_PNG, seed: int = 0
        ) -> pd.DataFrame:
    """Simulate the settings of ``mode``, write the table to ``csv`` and its figure to ``png`` (none: no figure)."""
    table = simulate(QUICK_SETTINGS if mode == "quick" else SETTINGS, seed=seed)
    write_csv(table, csv)
    print(f"wrote {csv} ({len(table)} rows)")
    if png is not None:
        from experiments.figures import plot_buffer_io

        print(f"wrote {plot_buffer_io(csv, png)}")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``run`` with the flags' values."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--png", type=Path, default=DEFAULT_PNG)
    add_common_options(parser, quick="small settings (seconds)", seed=0, plot=True)
    args = parser.parse_args(argv)
    return cli(run, dict(mode=args.mode, csv=args.csv, png=args.png if args.plot else None, seed=args.seed),
               "buffer_io")


if __name__ == "__main__":
    sys.exit(main())
