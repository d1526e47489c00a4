"""Validation of the disk-system epoch simulator (issue 33, item 3): predicted against measured epoch times of real
disk node-classification and link-prediction runs.

Usage::

    python -m experiments.measure.disk_simulation [--runs DIR] [--out DIR] [--tasks nc lp] [--no-run]

Runs (through the harness, finished runs skipped) per task a calibration grid and a held-out grid:
``experiments/specs/disk_simulation_{nc,lp}_calibration.yaml`` (one run) and ``disk_simulation_{nc,lp}.yaml``
(8 configurations: two policies x prefetch on/off x two ``p`` at ``c = 4``, each run twice, ``-r0`` and ``-r1``).
The simulator (:mod:`simulators.disk_epoch_model`) is calibrated on the calibration run's ``state`` and ``epoch``
records and the work of its plans, then predicts every held-out run from its plans and its store's sizes only.

Per held-out run: the measured and predicted mean warm epoch time (epochs 1 on; epoch 0 fills the buffer and warms
up), the signed relative error, the bytes the plan says are read against the bytes the run recorded, the
simulation's speed, and the *replay* error: the same prediction with the costs fitted on the run's own records
(what is left when the load on the machine during the calibration run and during this run is the same: the
model's own error apart from the drift of the machine's speed between runs), and the *load-conditioned* error:
the prediction with the costs slowed by the ratio of the cores other processes left to the calibration run and to
this run (processor sharing, :func:`simulators.disk_epoch_model.load_factor`; the harness records the foreign load
of every epoch; nothing is fitted), and the *previous-run* error: calibrated instead on the run recorded just before
(another configuration, or the calibration run for the first; made under nearly the same load). Summary per task and over both: median and 90th-percentile absolute error and the mean signed
error, each with a 95 % bootstrap interval (:func:`suite.stats.bootstrap_interval`), next to the measured runs'
own run-to-run spread (the relative difference of a configuration's two runs' warm epoch times, halved: each run's
deviation from the pair's mean). Writes ``disk_simulation_runs.csv``, ``disk_simulation_summary.csv`` and
``disk_simulation_costs.csv`` into ``--out`` (default ``out/results``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.common import REPO_ROOT, SPECS
from simulators.disk_epoch_model import (DiskCosts, PassWork, StoreSizes, calibrate, load_factor, plan_work,
                                         predict)
from suite.config import RunSpec, load_spec
from suite.errors import ConfigError, SuiteError
from suite.recorder import read_records
from suite.stats import bootstrap_interval

TASKS = {"nc": "disk_simulation_nc", "lp": "disk_simulation_lp"}
WARM_FROM = 1
EDGE_BYTES = 24  # int64 (src, rel, dst) per edge in the bucket file
ADAGRAD_COPIES = 1  # optimizer state stored beside each embedding
MACHINE_CORES = float(os.cpu_count() or 1)


@dataclass(frozen=True)
class RunInputs:
    """What the simulator needs of one recorded run: its spec, the work of its passes and its records."""

    run_dir: Path
    spec: RunSpec
    work: list[PassWork]
    states: list[dict[str, Any]]
    epochs: list[dict[str, Any]]

    @property
    def options(self):
        from systems.disk.disk_system import DiskOptions

        return DiskOptions.model_validate(self.spec.system.options)

    @property
    def keeps_resident(self) -> bool:
        """Node classification keeps partitions resident from one pass to the next; link prediction does not."""
        return self.spec.training.task != "link_prediction"


# ---------------------------------------------------------------------------------------------- plans and sizes
def partitioned(spec: RunSpec):
    """The run's partitioned store (the disk system's cached copy)."""
    from suite.datasets import open_dataset
    from systems.disk.disk_system import DiskOptions, partitioned_store

    options = DiskOptions.model_validate(spec.system.options)
    return partitioned_store(open_dataset(spec.dataset), options.num_partitions, options.order,
                             options.order_seed(spec.seed))


def run_plans(spec: RunSpec, pstore) -> list:
    """The plans of the run's training epochs, from the policy API (what the disk system executes)."""
    import torch

    from systems.disk.disk_system import DiskOptions
    from systems.disk.policies import PolicySpec, make_plan
    from systems.tasks.node_classification import labeled

    options = DiskOptions.model_validate(spec.system.options)
    common = dict(num_partitions=options.num_partitions, capacity=options.buffer_capacity,
                  fine_to_coarse_ratio=options.fine_to_coarse_ratio)
    if spec.training.task == "link_prediction":
        policy_spec = PolicySpec(task="link_prediction", **common)
    else:
        offsets = np.asarray(pstore.array("partition_offsets"))
        train = labeled(pstore.split("train").to(torch.int64), pstore.labels.to(torch.int64)).numpy()
        policy_spec = PolicySpec(task="node_classification", train_partitions=np.searchsorted(offsets, train, "right") - 1,
                                 **common)
    return [make_plan(options.policy, policy_spec, seed=spec.seed, epoch=e) for e in range(spec.training.epochs)]


def store_sizes(spec: RunSpec, pstore) -> StoreSizes:
    """Bytes of every partition (features; or embeddings + Adagrad state) and edges of every bucket."""
    from suite.data.partition import PartitionLayout
    from systems.disk.disk_system import DiskOptions

    options = DiskOptions.model_validate(spec.system.options)
    rows = np.diff(np.asarray(pstore.array("partition_offsets"))).astype(np.float64)
    if spec.training.task == "link_prediction":
        row_bytes = spec.model.embedding_dim * 4 * (1 + ADAGRAD_COPIES)
    else:
        row_bytes = pstore.feature_dim * np.dtype(pstore.metadata["files"]["features"]["dtype"]).itemsize
    return StoreSizes(partition_bytes=rows * row_bytes,
                      bucket_edges=PartitionLayout.from_store(pstore).bucket_sizes().numpy(),
                      edge_bytes=EDGE_BYTES, coalesce_rows=options.coalesce_bytes // EDGE_BYTES,
                      learnable=spec.training.task == "link_prediction")


def spec_work(spec: RunSpec) -> list[PassWork]:
    """The work of every training pass of a disk run spec, from its plans and its partitioned store's sizes (the
    store is partitioned, and cached, if no run did it yet)."""
    if spec.system.name != "disk":
        raise ConfigError(f"system.name: {spec.system.name!r}; the simulation is of the disk system")
    pstore = partitioned(spec)
    return plan_work(run_plans(spec, pstore), store_sizes(spec, pstore), spec.training.batch_size,
                     keeps_resident=spec.training.task != "link_prediction")


def load_run(run_dir: Path) -> RunInputs:
    """A recorded disk run's spec, the work of its plans and its ``state`` / ``epoch`` records."""
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: no config.yaml (not a recorded run)")
    spec = load_spec(run_dir / "config.yaml")
    records = read_records(run_dir)
    return RunInputs(run_dir, spec, spec_work(spec), [r for r in records if r.get("kind") == "state"],
                     [r for r in records if r.get("kind") == "epoch"])


# ---------------------------------------------------------------------------------------------- validation
def calibrate_on(run: RunInputs) -> DiskCosts:
    """The costs fitted on a calibration run."""
    return calibrate(run.states, run.epochs, run.work, prefetch=run.options.prefetch, warm_from=WARM_FROM)


def foreign_cores(run: RunInputs) -> float:
    """Mean cores other processes used during the run's warm epochs (recorded per epoch by the harness)."""
    values = [float(r["foreign_cores"]) for r in run.epochs
              if int(r["epoch"]) >= WARM_FROM and r.get("foreign_cores") is not None]
    return float(np.mean(values)) if values else float("nan")


def compare(run: RunInputs, costs: DiskCosts, calibration_foreign_cores: float | None = None,
            cores: float = MACHINE_CORES) -> dict[str, Any]:
    """One held-out run: measured and predicted mean warm epoch time, error, bytes, simulation speed; with the
    calibration run's foreign load, also the prediction for this run's own foreign load (``load_error``)."""
    options = run.options
    prediction = predict(run.work, costs, prefetch=options.prefetch, keeps_resident=run.keeps_resident)
    measured = {int(r["epoch"]): float(r["epoch_time_s"]) for r in run.epochs}
    warm = [e for e in sorted(measured) if e >= WARM_FROM]
    if not warm:
        raise ConfigError(f"{run.run_dir}: no warm epoch recorded (epochs from {WARM_FROM} on)")
    measured_s = float(np.mean([measured[e] for e in warm]))
    predicted_s = float(np.mean(prediction.epoch_time_s[warm]))
    recorded_bytes = sum(float(r.get("io_read_bytes", 0)) for r in run.epochs if int(r["epoch"]) in warm)
    planned_bytes = sum(float(run.work[e].read_bytes.sum()) for e in warm)
    load = {}
    if calibration_foreign_cores is not None:
        factor = load_factor(calibration_foreign_cores, foreign_cores(run), cores)
        loaded = predict(run.work, costs.slowed(factor), prefetch=options.prefetch, keeps_resident=run.keeps_resident)
        loaded_s = float(np.mean(loaded.epoch_time_s[warm]))
        load = {"load_factor": factor, "load_predicted_epoch_s": loaded_s, "load_error": loaded_s / measured_s - 1.0}
    return {
        "task": run.spec.training.task, "run_id": run.run_dir.name, "name": run.spec.name,
        "policy": options.policy, "num_partitions": options.num_partitions, "buffer_capacity": options.buffer_capacity,
        "prefetch": options.prefetch, "warm_epochs": len(warm), "measured_epoch_s": measured_s,
        "predicted_epoch_s": predicted_s, "predicted_serial_epoch_s": float(np.mean(prediction.serial_s[warm])),
        "error": predicted_s / measured_s - 1.0, "planned_read_bytes": planned_bytes,
        "recorded_read_bytes": recorded_bytes, "states": prediction.states, "simulation_s": prediction.simulation_s,
        "states_per_s": prediction.states_per_s,
        "batches_per_s": float(sum(w.batches.sum() for w in run.work)) / prediction.simulation_s,
        "foreign_cores": foreign_cores(run), **load,
    }


def started_at(run: RunInputs) -> float:
    """Wall-clock time of the run's first epoch record (runs made one after another are ordered by it)."""
    return min((float(r["time"]) for r in run.epochs if "time" in r), default=math.inf)


def config_key(row: pd.Series) -> tuple:
    """A held-out configuration (the repeats -r0, -r1 share it)."""
    return (row["task"], row["policy"], row["num_partitions"], row["buffer_capacity"], row["prefetch"])


def run_to_run_spread(runs: pd.DataFrame) -> pd.Series:
    """Per run, its relative deviation from the mean warm epoch time of its configuration's runs (NaN alone)."""
    keys = runs.apply(config_key, axis=1)
    mean = runs.groupby(keys)["measured_epoch_s"].transform("mean")
    count = runs.groupby(keys)["measured_epoch_s"].transform("count")
    return (runs["measured_epoch_s"] / mean - 1.0).where(count > 1)


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Median and 90th-percentile absolute error and mean signed error (95 % bootstrap intervals), with the
    run-to-run spread, per task and over both."""
    rows = []
    for task, group in [*runs.groupby("task"), ("all", runs)]:
        errors = group["error"].to_numpy()
        spread = group["run_to_run"].dropna().abs().to_numpy()
        row = {"task": task, "runs": len(group)}
        for name, values, statistic in (
                ("median_abs_error", np.abs(errors), np.median),
                ("p90_abs_error", np.abs(errors), lambda x, axis=None: np.percentile(x, 90, axis=axis)),
                ("mean_error", errors, np.mean),
                ("median_abs_load_error", np.abs(group["load_error"].to_numpy()), np.median),
                ("p90_abs_load_error", np.abs(group["load_error"].to_numpy()),
                 lambda x, axis=None: np.percentile(x, 90, axis=axis)),
                ("mean_load_error", group["load_error"].to_numpy(), np.mean),
                ("median_abs_replay_error", np.abs(group["replay_error"].to_numpy()), np.median),
                ("median_abs_previous_run_error", np.abs(group["previous_run_error"].to_numpy()), np.median),
                ("p90_abs_previous_run_error", np.abs(group["previous_run_error"].to_numpy()),
                 lambda x, axis=None: np.percentile(x, 90, axis=axis)),
                ("mean_previous_run_error", group["previous_run_error"].to_numpy(), np.mean),
                ("median_abs_run_to_run", spread, np.median),
                ("p90_abs_run_to_run", spread, lambda x, axis=None: np.percentile(x, 90, axis=axis))):
            interval = bootstrap_interval(values, statistic)
            row.update({name: interval.estimate, f"{name}_ci_low": interval.low, f"{name}_ci_high": interval.high})
        row["batches_per_s"] = float(group["batches_per_s"].median())
        rows.append(row)
    return pd.DataFrame(rows)


def validate(runs_root: Path, tasks: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Calibrate per task on its calibration run, predict its held-out runs; ``(runs, summary, costs)``."""
    from suite.grid import expand_grid

    rows, costs_rows = [], []
    for task in tasks:
        calibration = expand_grid(SPECS / f"{TASKS[task]}_calibration.yaml")[0]
        calibration_run = load_run(runs_root / calibration.run_id)
        costs, load = calibrate_on(calibration_run), foreign_cores(calibration_run)
        costs_rows.append({"task": task, "calibration_run": calibration.run_id, "foreign_cores": load,
                           **costs.as_dict()})
        held_out = sorted((load_run(runs_root / spec.run_id) for spec in expand_grid(SPECS / f"{TASKS[task]}.yaml")),
                          key=started_at)
        previous = calibration_run
        for run in held_out:
            rows.append({**compare(run, costs, load), "replay_error": compare(run, calibrate_on(run))["error"],
                         "previous_run_error": compare(run, calibrate_on(previous))["error"]})
            previous = run
    runs = pd.DataFrame(rows)
    runs["run_to_run"] = run_to_run_spread(runs)
    return runs, summarize(runs), pd.DataFrame(costs_rows)


def run_grids(runs_root: Path, tasks: Sequence[str]) -> None:
    """Run the calibration and held-out grids of ``tasks`` (finished runs are skipped)."""
    from suite.grid import expand_grid, failures, run_grid

    for task in tasks:
        for grid in (f"{TASKS[task]}_calibration.yaml", f"{TASKS[task]}.yaml"):
            results = run_grid(expand_grid(SPECS / grid), runs_root, progress=False)
            failed = failures(results)
            if failed:
                raise ConfigError(f"{grid}: {len(failed)} runs failed (first: {failed[0]})")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the grids (unless ``--no-run``), validate, write the tables and print the summary."""
    parser = argparse.ArgumentParser(prog="python -m experiments.measure.disk_simulation",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=REPO_ROOT / "out" / "runs", help="run folder (default out/runs)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "out" / "results",
                        help="tables folder (default out/results)")
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=sorted(TASKS))
    parser.add_argument("--no-run", action="store_true", help="validate the runs already recorded")
    args = parser.parse_args(argv)
    try:
        if not args.no_run:
            run_grids(args.runs, args.tasks)
        runs, summary, costs = validate(args.runs, args.tasks)
    except SuiteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name, table in (("runs", runs), ("summary", summary), ("costs", costs)):
        table.to_csv(args.out / f"disk_simulation_{name}.csv", index=False)
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.precision", 4):
        print(runs[["task", "policy", "num_partitions", "prefetch", "name", "measured_epoch_s", "predicted_epoch_s",
                    "error", "load_error", "previous_run_error", "replay_error", "run_to_run", "planned_read_bytes", "recorded_read_bytes", "foreign_cores"]]
              .to_string(index=False))
        print(summary.T.to_string(header=False))
        print(costs.T.to_string(header=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
