"""Where a DENSE/naive accuracy gap comes from: train with each sampler, test every model with each sampler.

Usage::

    python experiments/measure/dense_vs_naive_eval.py [experiments/specs/quickstart.yaml] [--seeds 0 1 2]
        [--eval-fanouts 10,10 25,25 -1,-1] [--csv out/dense_vs_naive_eval.csv]

For every seed and training sampler (``naive``, ``dense``), one model is trained in the in-memory system with the
run spec's settings, then its test accuracy is measured with both samplers at every ``--eval-fanouts`` (with all
neighbours, ``-1,...``, the two samplers give the same predictions, so one column suffices). Rows: training
sampler x seed, then the mean per training sampler; columns: ``<eval sampler> <fanouts>``.

A gap that shows in the columns (same model, evaluated two ways) comes from evaluation sampling; one that shows
in the rows (all-neighbour column), from training.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import pandas as pd
import torch

from suite.config import RunSpec, apply_overrides, read_yaml, spec_from_dict
from suite.datasets import open_dataset
from suite.recorder import Recorder
from systems.in_memory import InMemorySystem

SAMPLER_NAMES = ("naive", "dense")


def parse_fanouts(text: str) -> tuple[int, ...]:
    """``"10,10"`` -> ``(10, 10)``."""
    return tuple(int(part) for part in text.split(","))


def eval_columns(fanouts: list[tuple[int, ...]]) -> list[tuple[str, str, tuple[int, ...]]]:
    """``(column, sampler, fanouts)`` per evaluation; all-neighbour fanouts get one ``all`` column."""
    columns = []
    for layer_fanouts in fanouts:
        label = ",".join(map(str, layer_fanouts))
        if all(f == -1 for f in layer_fanouts):
            columns.append(("all", "naive", layer_fanouts))
        else:
            columns.extend((f"{name} {label}", name, layer_fanouts) for name in SAMPLER_NAMES)
    return columns


def train_and_test(spec: RunSpec, columns: list[tuple[str, str, tuple[int, ...]]], out: Path) -> dict[str, float]:
    """Train one model with ``spec``; its test accuracy per evaluation column."""
    store = open_dataset(spec.dataset)
    recorder = Recorder(out, spec)
    system = InMemorySystem(spec, store, torch.device("cpu"), recorder)
    try:
        system.setup()
        for epoch in range(spec.training.epochs):
            system.train_epoch(epoch)
        accuracies = {}
        for column, sampler, fanouts in columns:
            system.task.set_eval_sampler(sampler, fanouts)
            accuracies[column] = system.evaluate("test")["accuracy"]
        return accuracies
    finally:
        system.teardown()
        recorder.close()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: print the table (and write it as CSV with ``--csv``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="experiments/specs/quickstart.yaml", type=Path, help="run spec YAML")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eval-fanouts", type=parse_fanouts, nargs="+", help="default: the spec's training "
                        "fanouts, 25 per layer, and all neighbours")
    parser.add_argument("--csv", type=Path, help="also write the table as CSV")
    args = parser.parse_args(argv)
    base = read_yaml(args.config)
    probe = spec_from_dict(base, str(args.config))
    layers = probe.model.num_layers
    fanouts = args.eval_fanouts or [probe.model.fanouts, (25,) * layers, (-1,) * layers]
    columns = eval_columns(fanouts)
    rows = []
    with tempfile.TemporaryDirectory() as records:
        for train_sampler in SAMPLER_NAMES:
            for seed in args.seeds:
                spec = spec_from_dict(apply_overrides(base, [f"seed={seed}", f"sampler.name={train_sampler}"]),
                                      str(args.config))
                row = {"train sampler": train_sampler, "seed": str(seed)}
                row.update(train_and_test(spec, columns, Path(records)))
                rows.append(row)
                print(row, flush=True)
    table = pd.DataFrame(rows).set_index(["train sampler", "seed"])
    means = table.groupby(level="train sampler").mean()
    means.index = pd.MultiIndex.from_tuples([(name, "mean") for name in means.index], names=table.index.names)
    table = pd.concat([table, means]).sort_index(level="train sampler", sort_remaining=False)
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))
    if args.csv:
        table.to_csv(args.csv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
