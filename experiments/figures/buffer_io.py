"""BETA vs COMET vs random partition-buffer IO per epoch at Hyperlink-2012 scale (simulated).

Every row prices one epoch of one policy's plan (the same plan objects the disk system executes:
:mod:`systems.disk.policies`) with :mod:`simulators.buffer_model`: link prediction with learnable embeddings on
Hyperlink-2012 (3.5B nodes, 128B edges; 100-d float32 embeddings + Adagrad state = 800 bytes per node; edges
on disk as int64 ``(src, rel, dst)``, 24 bytes, each bucket read once per epoch by the state it is assigned
to). Assumed machine (columns ``read_bw``, ``write_bw``, ``edges_per_s``, ``shared_disk``): one NVMe SSD at
3 GB/s read and 2 GB/s write serving reads and writes in FIFO order, and 5M training edges/s of compute.
Epoch times are estimates of this model, not measurements; swaps and bytes are exact for the plan.

Usage::

    python -m experiments.figures.buffer_io [--csv out/results/buffer_io.csv] [--png out/results/buffer_io.png] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import matplotlib.pyplot as plt

from experiments.common import RESULTS, Figure, Mode, Paths, Plot, add_common_options, cli, write_csv
from experiments.compare import TableSpec
from experiments.style import MARIUSGNN, caption, color_of, display_label, save_figure, styled
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


# ---------------------------------------------------------------------------------------------- the figure
def plot_buffer_io(csv_path: str | Path, out_png: str | Path) -> Path:
    """Partition-buffer IO at Hyperlink-2012 scale (``experiments/figures/buffer_io.py``, simulated): TB read per epoch
    (top) and the modelled epoch time with prefetch (bottom) per (p, c), one bar per policy, COMET once per
    number of logical partitions (written under its bar)."""
    table = pd.read_csv(csv_path)
    labels = {policy: display_label("POLICIES", policy) for policy in dict.fromkeys(table["policy"])}
    configs = list(dict.fromkeys(zip(table["num_partitions"], table["capacity"])))
    per_config = max(len(table[(table["num_partitions"] == p) & (table["capacity"] == c)]) for p, c in configs)
    width = 0.8 / per_config
    with styled():
        fig, axes = plt.subplots(2, 1, figsize=(max(7.5, 2.6 * len(configs)), 7.5), layout="constrained",
                                 sharex=True)
        labelled: set[str] = set()
        for x, (p, c) in enumerate(configs):
            rows = table[(table["num_partitions"] == p) & (table["capacity"] == c)].copy()
            rows["rank"] = rows["policy"].map(labels)  # by display name: BETA, COMET, random
            rows = rows.sort_values(["rank", "logical_partitions"])
            for i, row in enumerate(rows.itertuples()):
                position = x + (i - (len(rows) - 1) / 2) * width
                label = None if row.policy in labelled else labels[row.policy]
                labelled.add(row.policy)
                color = color_of(row.policy)
                axes[0].bar(position, row.bytes_read / 1e12, width, color=color, label=label)
                axes[1].bar(position, row.epoch_time_prefetch_s / 3600, width, color=color)
                if row.policy == "comet":
                    axes[0].annotate(f"{row.logical_partitions}\nlogical", (position, row.bytes_read / 1e12),
                                     ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
        axes[0].set_ylabel("TB read per epoch")
        axes[1].set_ylabel("epoch time with prefetch (h, model)")
        axes[1].set_xticks(range(len(configs)), [f"p = {p}, c = {c}" for p, c in configs])
        axes[1].set_xlabel("physical partitions p, buffer capacity c (partitions)")
        axes[0].legend(loc="upper left", title="policy (COMET: number of logical partitions above its bar)")
        top = axes[0].get_ylim()[1]
        axes[0].set_ylim(0, top * 1.15)
        fig.suptitle("Partition-buffer IO per epoch on Hyperlink-2012 (3.5B nodes, 128B edges), simulated")
        caption(fig, f"{MARIUSGNN}, its partition-buffer IO analysis (BETA vs COMET IO per epoch at "
                     "Hyperlink-2012 scale)",
                f"{Path(csv_path).name} (swaps and bytes exact for each plan; times from the disk model: "
                "3 GB/s read, 2 GB/s write, 5M edges/s)", "none: deterministic simulation of one plan per policy")
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- the job
def _reproduce(mode: Mode, paths: Paths) -> None:
    run(mode=mode, csv=paths.results / "buffer_io.csv", png=paths.results / "buffer_io.png")


FIGURE = Figure(
    "buffer_io", "partition-buffer IO at Hyperlink-2012 scale: BETA vs COMET vs random (simulated)", _reproduce,
    ("buffer_io.csv", "buffer_io.png"), "about 1 minute", __name__,
    plots=(Plot("buffer_io", plot_buffer_io, "buffer_io.csv"),),
    tables={"buffer_io.csv": TableSpec(("policy", "num_partitions", "capacity", "logical_partitions"),
                                       exact=("swaps", "bytes_read", "bytes_written", "epoch_time_prefetch_s"))})
"""The buffer-IO figure, registered in :data:`experiments.plugins.FIGURES`."""


if __name__ == "__main__":
    sys.exit(main())
