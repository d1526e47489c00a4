"""Pipelined vs in-memory training (MariusGNN's pipeline): epoch time, utilization, efficiency, async accuracy.

Usage::

    python experiments/pipeline.py [--quick | --smoke] [--out out/pipeline] [--results out/results] [--data-dir data]
        [--no-run] [--no-plot]

Runs two grids through the harness (finished runs are not repeated), then tabulates and plots the records:

- ``experiments/specs/pipeline_speed.yaml``: ``in_memory`` and ``pipelined`` (sync; 1 loader / bound 2; 2 loaders /
  bound 8; Marius's defaults: 4 loaders, 2 transfer workers, queues of 4, bound 16; 2 loader *processes* / bound
  8) on ``arxiv-like`` and ``products-like``, 3-layer GraphSAGE, fanouts 15,10,5, batch 1000, both samplers; two
  epochs of the first ``limit_batches`` batches, the second (warm) epoch reported; and the peer ``pyg``
  (:mod:`systems.pyg_baseline`: PyG's NeighborLoader and GraphSAGE in PyG's loop), run once per dataset (its
  runs are recorded with ``sampler.name: pyg``, the sampler it really uses, whatever the grid's sampler axis says)
  or, where PyG cannot sample, a ``skipped`` row with the reason;
- ``experiments/specs/pipeline_accuracy.yaml``: sync vs async (bound 16; compute in admission order, and out of order)
  pipelined training on ``arxiv-like``, two full epochs, three seeds; test accuracy.

Outputs: ``out/results/pipeline_speed.csv`` (one row per run: epoch time, ratio to in-memory on the same dataset and
sampler (for ``pyg``, to in-memory with DENSE; ``ratio_baseline`` names it), per-stage busy time, compute utilization = compute busy time / epoch time, pipeline efficiency = epoch
time / busy time per worker of the busiest stage, bottleneck stage, staleness), ``out/results/pipeline_accuracy.csv``
and ``out/results/pipeline_speed.png``. ``--quick`` runs both grids on ``arxiv-like`` only, shrunk to 50,000 nodes,
with 6 batches per epoch (speed: 12 runs, both samplers) and 2 epochs x 3 seeds (accuracy) into
``out/pipeline-quick``; ``--smoke`` on the ``tiny`` preset
with 3 batches (seconds; for the tests, its numbers mean nothing).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pandas as pd

from experiments.common import REPO_ROOT, RESULTS, SPECS, add_common_options, check_failed, cli
from suite.grid import expand_grid, failures, run_grid
from suite.load import load_columns
from suite.stats import difference_interval, mean_interval
from suite.results import export, load_epochs, load_runs

SPEED_GRID = SPECS / "pipeline_speed.yaml"
ACCURACY_GRID = SPECS / "pipeline_accuracy.yaml"
PipelineMode = Literal["quick", "full", "smoke"]
"""The common modes, and ``smoke``: the tiny preset, 3 batches (seconds; the numbers mean nothing)."""
# Per mode: overrides of every run, of the speed grid's runs, of the accuracy grid's runs.
MODES = {
    "full": ((), (), ()),
    "quick": (("dataset.params={num_nodes: 50000}",), ("training.limit_batches=6", "dataset.preset=arxiv-like"),
              ("training.epochs=2", "evaluation.every=2")),
    "smoke": (("dataset.preset=tiny", "training.batch_size=20"), ("training.limit_batches=3",),
              ("training.epochs=1", "evaluation.every=1", "seed=0")),
}
STAGES = ("sample", "gather", "load", "transfer", "compute")


def configuration(system: str, options: dict) -> str:
    """A short label of a system configuration: ``in_memory``, ``sync``, ``4T 2X q4/4 b16`` (T: loader threads,
    P: loader processes, X: transfer workers, q: host/device queue sizes, b: staleness bound; ``ooo``: compute
    out of admission order)."""
    if system != "pipelined":
        return system
    if options.get("sync"):
        return "sync"
    kind = "P" if options.get("loader_workers") == "process" else "T"
    order = "" if options.get("in_order_compute", True) else " ooo"
    return (f"{options.get('batch_loader_threads', 4)}{kind} {options.get('batch_transfer_threads', 2)}X "
            f"q{options.get('batch_host_queue_size', 4)}/{options.get('batch_device_queue_size', 4)} "
            f"b{options.get('staleness_bound', 16)}{order}")


def configuration_order(label: str) -> tuple:
    """Sort key of configuration labels: in-memory, sync, then thread loaders, then processes, by bound; peers
    (``pyg``) last."""
    if label in ("in_memory", "sync"):
        return (0, label != "in_memory", 0)
    if len(label.split()) < 4:  # a peer system
        return (2, label)
    bound = int(label.split()[3].removeprefix("b"))
    return (1, "P" in label.split()[0], bound, "ooo" in label)


def _plain(value):
    """Option values as read back from a table (pandas turns ints into floats next to missing values)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _run_configuration(runs: pd.DataFrame) -> pd.Series:
    options = runs.filter(like="config.system.options.")
    return pd.Series([
        configuration(system, {k.removeprefix("config.system.options."): _plain(v)
                               for k, v in row.items() if pd.notna(v)})
        for system, (_, row) in zip(runs["system"], options.iterrows())
    ], index=runs.index)


def speed_table(out: str | Path) -> pd.DataFrame:
    """One row per speed run: its warm (last) epoch's time, busy times, utilization, efficiency and ratios."""
    runs = load_runs(out, include_incomplete=False)
    runs = runs[runs["status"] == "completed"].copy()
    runs["configuration"] = _run_configuration(runs)
    epochs = load_epochs(out)
    last = epochs.sort_values("epoch").groupby("run_dir").tail(1).set_index("run_dir")
    rows = []
    for _, run in runs.iterrows():
        epoch = last.loc[run["run_dir"]]
        busy = {stage: epoch.get(f"stage_busy_s.{stage}") for stage in STAGES}
        time_s = float(epoch["epoch_time_s"])
        rows.append({
            "dataset": run["dataset"], "sampler": run["sampler"], "system": run["system"],
            "configuration": run["configuration"], "epoch_time_s": time_s, "examples": int(epoch["examples"]),
            "examples_per_s": epoch["examples"] / time_s,
            **{f"busy_{stage}_s": value for stage, value in busy.items() if pd.notna(value)},
            "compute_utilization": busy["compute"] / time_s,
            "pipeline_efficiency": epoch.get("pipeline_efficiency"),
            "bottleneck_stage": epoch.get("bottleneck_stage"),
            "staleness_mean": epoch.get("staleness_mean"), "staleness_max": epoch.get("staleness_max"),
            "device": run.get("device"), **load_columns(run.to_dict()),
            "run_id": run["run_id"], "seed": run["seed"], "git_sha": run.get("versions.git_sha"),
        })
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    baseline = table[table["system"] == "in_memory"].set_index(["dataset", "sampler", "seed"])["epoch_time_s"]
    known = {(dataset, sampler) for dataset, sampler, _ in baseline.index}
    # a peer's own sampler has no in-memory run of the suite: its ratio is against in-memory with DENSE
    table["ratio_baseline"] = [f"in_memory/{row.sampler if (row.dataset, row.sampler) in known else 'dense'}"
                               for row in table.itertuples()]
    table["time_ratio_vs_in_memory"] = [  # against the in-memory run of the same dataset, sampler and seed
        row.epoch_time_s / baseline.get((row.dataset, row.ratio_baseline.split("/")[1], row.seed), float("nan"))
        for row in table.itertuples()
    ]
    table["status"], table["reason"] = "ok", ""
    return sort_speed_table(table)


def sort_speed_table(table: pd.DataFrame) -> pd.DataFrame:
    """Rows by dataset, sampler (the suite's, then peers'), configuration."""
    samplers = {"naive": 0, "dense": 1}
    return table.sort_values(["dataset", "sampler", "configuration"], key=lambda c: c.map(configuration_order) if
                             c.name == "configuration" else c.map(lambda v: (samplers.get(v, 2), v))
                             if c.name == "sampler" else c).reset_index(drop=True)


def skipped_rows(skipped) -> pd.DataFrame:
    """One ``skipped`` row (with the reason) per speed-grid run whose peer is missing here."""
    return pd.DataFrame([{"dataset": spec.dataset.preset or spec.dataset.name, "sampler": spec.sampler.name,
                          "system": spec.system.name, "configuration": configuration(spec.system.name,
                                                                                     spec.system.options),
                          "status": "skipped", "reason": reason, "seed": spec.seed} for spec, reason in skipped])


def accuracy_table(out: str | Path) -> pd.DataFrame:
    """One row per accuracy run: configuration, seed, test and valid accuracy, mean staleness, epoch time."""
    runs = load_runs(out, include_incomplete=False)
    runs = runs[runs["status"] == "completed"].copy()
    runs["configuration"] = _run_configuration(runs)
    columns = {"dataset": "dataset", "sampler": "sampler", "configuration": "configuration", "seed": "seed",
               "metrics.test.accuracy": "test_accuracy", "metrics.valid.accuracy": "valid_accuracy",
               "staleness.mean": "staleness_mean", "staleness.max": "staleness_max", "train_time_s": "train_time_s",
               "run_id": "run_id"}
    return runs[[c for c in columns if c in runs]].rename(columns=columns).sort_values(
        ["configuration", "seed"]).reset_index(drop=True)


def accuracy_summary(accuracy: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and configuration: seeds, mean test accuracy with its 95 % t interval over seeds, and the
    difference to sync paired by seed (``minus_sync``) with its interval (:mod:`suite.stats`)."""
    rows = []
    for dataset, table in accuracy.groupby("dataset", sort=False):
        wide = table.pivot_table(index="seed", columns="configuration", values="test_accuracy", aggfunc="first")
        for configuration in sorted(wide.columns, key=configuration_order):
            mean = mean_interval(wide[configuration])
            row = {"dataset": dataset, "configuration": configuration, "seeds": mean.n,
                   "test_accuracy": mean.estimate, "test_accuracy_ci_low": mean.low,
                   "test_accuracy_ci_high": mean.high}
            if "sync" in wide and configuration != "sync":
                both = wide[["sync", configuration]].dropna()
                gap = difference_interval(list(both[configuration]), list(both["sync"]))
                row.update(minus_sync=gap.estimate, minus_sync_ci_low=gap.low, minus_sync_ci_high=gap.high)
            rows.append(row)
    return pd.DataFrame(rows)


def grid_specs(grid: Path, mode: str, data_dir: Path | None = None) -> tuple[list, list]:
    """The runnable specs of ``grid`` in ``mode`` and ``[(spec, reason)]`` of those whose peer is missing here.

    A ``pyg`` system spec gets ``sampler.name: pyg`` (the sampler it really uses), so the grid's sampler axis does
    not run it twice.
    """
    from experiments.peers import split_runnable

    common, speed, accuracy = MODES[mode]
    overrides = [*common, *(speed if grid == SPEED_GRID else accuracy)]
    if data_dir is not None:
        overrides.append(f"dataset.cache_dir={data_dir}")
    specs, seen = [], set()
    for spec in expand_grid(grid, overrides):
        if spec.system.name == "pyg":
            spec = spec.model_copy(update={"sampler": spec.sampler.model_copy(update={"name": "pyg"})})
        if spec.run_id not in seen:
            seen.add(spec.run_id)
            specs.append(spec)
    return split_runnable(specs)


def run_grids(out: Path, mode: str, progress: bool, data_dir: Path | None = None,
              rerun_baselines: bool = False) -> list[dict]:
    """Run both grids in ``mode`` (skipping finished runs); return the summaries of failed runs.

    With ``rerun_baselines``, the speed grid's ``in_memory`` runs are run again after its other runs (their
    folders overwritten), so that a baseline measured while the machine was busier than for the pipelined runs
    (a shared machine) can be measured again under the same conditions as the last runs.
    """
    summaries = []
    for grid in (SPEED_GRID, ACCURACY_GRID):
        specs, _ = grid_specs(grid, mode, data_dir)
        summaries += run_grid(specs, out / grid.stem, progress=progress)
        if rerun_baselines and grid == SPEED_GRID:
            baselines = [spec for spec in specs if spec.system.name == "in_memory"]
            summaries += run_grid(baselines, out / grid.stem, progress=progress, overwrite=True)
    return failures(summaries)


def default_runs(mode: PipelineMode) -> Path:
    """Where the runs of ``mode`` go by default: ``out/pipeline``, or ``out/pipeline-<mode>``."""
    return REPO_ROOT / ("out/pipeline" if mode == "full" else f"out/pipeline-{mode}")


def run(*, mode: PipelineMode = "full", runs: Path | None = None, results: Path = RESULTS, data: Path | None = None,
        execute: bool = True, rerun_baselines: bool = False, plot: bool = True, quiet: bool = False) -> None:
    """Run both grids of ``mode`` into ``runs`` (default :func:`default_runs`; ``execute=False``: only tabulate
    what is recorded), then write the tables and the figure into ``results``. ``data``: the dataset cache (default:
    the grids' own). Raises :class:`JobFailed` when runs failed (each named on stderr)."""
    out = runs or default_runs(mode)
    if execute:
        check_failed(run_grids(out, mode, progress=not quiet, data_dir=data, rerun_baselines=rerun_baselines))
    speed = speed_table(out / SPEED_GRID.stem)
    _, skipped = grid_specs(SPEED_GRID, mode, data)
    if skipped:
        for spec, reason in skipped:
            print(f"skipped: {spec.run_id}: {reason}", file=sys.stderr)
        speed = sort_speed_table(pd.concat([speed, skipped_rows(skipped)], ignore_index=True))
    accuracy = accuracy_table(out / ACCURACY_GRID.stem)
    export(speed, results / "pipeline_speed.csv")
    export(accuracy, results / "pipeline_accuracy.csv")
    export(accuracy_summary(accuracy), results / "pipeline_accuracy_summary.csv")
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(speed[["dataset", "sampler", "configuration", "epoch_time_s", "time_ratio_vs_in_memory",
                     "compute_utilization", "pipeline_efficiency", "bottleneck_stage", "staleness_max"]]
              .to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(accuracy.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if plot:
        from experiments.figures import plot_pipeline_speed

        png = plot_pipeline_speed(results / "pipeline_speed.csv", results / "pipeline_speed.png")
        print(f"wrote {png}")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_options(parser, quick="arxiv-like shrunk to 50,000 nodes, 6 batches per epoch (minutes)",
                       runs=("--out",), runs_help="runs folder (default out/pipeline, or out/pipeline-quick)",
                       results=("--results",), data=("--data-dir",), data_default=None, plot=True, quiet=True,
                       no_run="only tabulate and plot what is recorded")
    parser.add_argument("--smoke", dest="mode", action="store_const", const="smoke",
                        help="the tiny preset, 3 batches (seconds; the numbers mean nothing)")
    parser.add_argument("--rerun-baselines", action="store_true",
                        help="run the in-memory baselines again after the pipelined runs (overwriting them)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "pipeline")


if __name__ == "__main__":
    sys.exit(main())
