"""Test accuracy of DENSE against the naive sampler, per dataset and seed, from the runs of the two grids.

Usage::

    gnnsuite grid experiments/specs/dense_vs_naive_cora.yaml --out out/dense_vs_naive
    gnnsuite grid experiments/specs/dense_vs_naive_arxiv.yaml --out out/dense_vs_naive
    python experiments/measure/dense_vs_naive.py out/dense_vs_naive [--tolerance 0.01] [--csv out/dense_vs_naive.csv]

Prints one table per dataset (rows: seeds, then the mean; columns: the samplers and ``dense - naive``) and exits
with status 1 when a dataset's mean accuracies differ by more than ``--tolerance`` (default one point).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from suite.results import load_runs

METRIC = "metrics.test.accuracy"


def accuracy_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy per ``(dataset, seed)`` row and sampler column, with each dataset's mean as seed ``mean``."""
    completed = runs[runs["status"] == "completed"]
    per_seed = completed.pivot_table(index=["dataset", "seed"], columns="sampler", values=METRIC, aggfunc="first")
    means = per_seed.groupby(level="dataset").mean()
    means.index = pd.MultiIndex.from_tuples([(dataset, "mean") for dataset in means.index], names=per_seed.index.names)
    per_seed.index = per_seed.index.set_levels(per_seed.index.levels[1].astype(str), level=1)
    table = pd.concat([per_seed, means]).sort_index(level="dataset", sort_remaining=False)
    if {"naive", "dense"} <= set(table.columns):
        table["dense - naive"] = table["dense"] - table["naive"]
    return table


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="results folder of the two grids")
    parser.add_argument("--tolerance", type=float, default=0.01, help="largest allowed |mean difference|")
    parser.add_argument("--csv", type=Path, help="also write the table as CSV")
    args = parser.parse_args(argv)
    table = accuracy_table(load_runs(args.runs, include_incomplete=False))
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    if args.csv:
        table.to_csv(args.csv)
    if "dense - naive" not in table.columns:
        print("missing runs of one of the samplers")
        return 1
    gaps = table.xs("mean", level="seed")["dense - naive"].abs()
    too_far = gaps[gaps > args.tolerance]
    for dataset, gap in too_far.items():
        print(f"{dataset}: mean accuracies differ by {gap:.4f} > {args.tolerance}")
    return 1 if len(too_far) else 0


if __name__ == "__main__":
    raise SystemExit(main())
