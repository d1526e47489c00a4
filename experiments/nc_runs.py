"""Node-classification runs against in-memory training, shared by the jobs that compare an out-of-core system
with it: the disk figure (:mod:`experiments.figures.disk_nc`) and the feature cache against the partition buffer
(:mod:`experiments.figures.cache_vs_buffer`).

:func:`run_isolated` runs each spec in its own process; :func:`run_table` is one row per recorded run (warm epochs'
means, final accuracies, foreign load, time to target: :func:`with_time_to_target`); :func:`summary_table` one row
per dataset and configuration (means over seeds with 95 % intervals, ratios and accuracy differences to in-memory
paired by seed, time to target against in-memory's).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from suite.load import load_columns, measured_under_load
from suite.results import load_epochs, load_runs
from suite.stats import Interval, difference_interval, mean_interval, ratio_interval

TARGET_MARGIN = 0.01
"""Time to target: the target is the in-memory run's final validation accuracy (same dataset and seed) minus this."""


def shared_root(spec):
    """A real dataset's relative ``../shared/datasets/<name>`` root made the project's shared folder (from any
    working directory)."""
    from suite.datasets import shared_datasets_dir

    root = spec.dataset.root
    if root is None or Path(root).is_absolute():
        return spec
    return spec.model_copy(update={"dataset": spec.dataset.model_copy(
        update={"root": str(shared_datasets_dir() / Path(root).name)})})


def run_isolated(specs, out: Path, rerun_under_load: bool = False) -> list[dict]:
    """Run each spec not yet complete in its own process (``python -m suite run``), so that every run's peak RSS
    and start are its own; with ``rerun_under_load``, also redo a complete run measured under foreign load. Return
    the summaries.

    The processes are forked from a server that has imported torch, PyG and the other heavy libraries once
    (:func:`suite.forked.forked_runner`): each starts as a fresh interpreter would after those imports, without
    paying about 5 s of imports a run (on 2 cores that was more than the runs of the quick disk figure took)."""
    from suite.forked import forked_runner
    from suite.recorder import is_complete, read_summary

    runner = None
    summaries = []
    for spec in specs:
        run_dir = out / spec.run_id
        loaded = rerun_under_load and is_complete(run_dir) and \
            bool(((read_summary(run_dir) or {}).get("machine_load") or {}).get("under_load"))
        if not is_complete(run_dir) or loaded:
            runner = runner or forked_runner()
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
                handle.write(spec.to_yaml())
            done = runner(["run", handle.name, "--out", str(Path(out).resolve()), "--quiet",
                           *(["--overwrite"] if loaded else [])], dict(os.environ))
            Path(handle.name).unlink()
            sys.stdout.write(done.stdout)
            sys.stderr.write(done.stderr)
        summaries.append(read_summary(run_dir) or {"run_id": spec.run_id, "status": "failed",
                                                     "error": "the run's process left no summary"})
    return summaries


def run_options(run: pd.Series) -> dict:
    """The system options a recorded run ran with (its ``config.yaml``)."""
    from suite.config import read_yaml

    return dict(read_yaml(Path(run["run_dir"]) / "config.yaml")["system"].get("options") or {})


def run_table(out: Path, label: Callable[[str, dict], str]) -> pd.DataFrame:
    """One row per completed run under ``out``: its ``configuration`` (``label(system, options)``), the warm epochs'
    means (epoch time, IO wait, bytes, seconds in the reader, the load stage's gather seconds, bandwidth), the final
    test accuracy, peak RSS, the thread budget and the foreign load, and its time to target
    (:func:`with_time_to_target`)."""
    from suite.recorder import read_summary

    runs = load_runs(out, include_incomplete=False)
    runs = runs[runs["status"] == "completed"]
    epochs = load_epochs(out)
    rows = []
    for _, run in runs.iterrows():
        options = run_options(run)
        mine = epochs[epochs["run_dir"] == run["run_dir"]].sort_values("epoch")
        warm = mine[mine["epoch"] > 0] if len(mine) > 1 else mine
        time_s = float(warm["epoch_time_s"].mean())
        column = lambda name: float(warm[name].fillna(0).mean()) if name in warm else 0.0  # noqa: E731
        read_s = column("io_read_s")
        summary = read_summary(Path(run["run_dir"])) or {}
        curve = [(int(point["epoch"]), point.get("accuracy"))
                 for point in (summary.get("metrics") or {}).get("valid_curve") or []]
        times = [float(t) for t in summary.get("epoch_time_s") or mine["epoch_time_s"]]
        rows.append({
            "dataset": run["dataset"], "configuration": label(run["system"], options),
            "system": run["system"], "seed": int(run["seed"]), "policy": options.get("policy"),
            "num_partitions": options.get("num_partitions"), "buffer_capacity": options.get("buffer_capacity"),
            "prefetch": options.get("prefetch", True), "warm_epochs": len(warm), "epoch_time_s": time_s,
            "states": column("states"), "partitions_read": column("partitions_read"),
            "io_read_bytes": column("io_read_bytes"), "disk_read_bytes": column("disk_read_bytes"),
            "io_wait_s": column("io_wait_s"), "io_wait_fraction": column("io_wait_s") / time_s if time_s else None,
            "io_read_s": read_s, "load_gather_s": column("load_gather_s"),
            "prepare_s": column("prepare_s"),
            "read_bandwidth_bytes_per_s": column("io_read_bytes") / read_s if read_s > 0 else None,
            "test_accuracy": pd.to_numeric(run.get("metrics.test.accuracy"), errors="coerce"),
            "epochs": len(times), "train_time_s": sum(times),
            "valid_accuracy": _last_value(curve), "valid_curve": json.dumps(curve),
            "epoch_times_s": json.dumps(times),
            "peak_rss_bytes": run.get("peak_rss_bytes"),
            "compute_threads": run.get("threads.compute"), **load_columns(run.to_dict()),
            "run_id": run["run_id"], "run_dir": run["run_dir"], "git_sha": run.get("versions.git_sha"),
        })
    return with_time_to_target(pd.DataFrame(rows))


def _last_value(curve: list[tuple[int, float | None]]) -> float:
    values = [value for _, value in sorted(curve) if value is not None and math.isfinite(value)]
    return float(values[-1]) if values else math.nan


def with_time_to_target(runs: pd.DataFrame, margin: float = TARGET_MARGIN) -> pd.DataFrame:
    """``runs`` (:func:`run_table`'s rows) with each run's time to target, MLPerf style: the target is the final
    validation accuracy of the in-memory run of the same dataset and seed minus ``margin``; ``reached_target``,
    ``epochs_to_target`` and ``time_to_target_s`` (the training seconds of the epochs up to the first validation
    at or above it, evaluation excluded: :func:`suite.pricing.time_to_target`) from the run's recorded validation
    after every epoch and epoch times. A run that never reaches it within its epochs has ``reached_target`` False
    and NaN time; one without an in-memory run of its seed (or without validations) has no target (NaN)."""
    from suite.pricing import time_to_target

    runs = runs.copy()
    memory = runs[runs["system"] == "in_memory"].set_index(["dataset", "seed"])["valid_accuracy"]
    columns = {"target": [], "reached_target": [], "epochs_to_target": [], "time_to_target_s": []}
    for _, run in runs.iterrows():
        reference = memory.get((run["dataset"], run["seed"]), math.nan)
        curve = [(int(e), v) for e, v in json.loads(run["valid_curve"])]
        found = time_to_target(json.loads(run["epoch_times_s"]), curve, reference - margin) \
            if math.isfinite(reference) and curve else None
        columns["target"].append(reference - margin if found else math.nan)
        columns["reached_target"].append(found["reached"] if found else None)
        columns["epochs_to_target"].append(found["epochs"] if found and found["reached"] else math.nan)
        columns["time_to_target_s"].append(found["train_s"] if found and found["reached"] else math.nan)
    return runs.assign(**columns) if len(runs) else runs


def _time_to_targetinterval_columns(group: pd.DataFrame, base: pd.DataFrame) -> dict:
    """A configuration's time to target against in-memory, paired by seed: how many seeds had a target and
    reached it, the mean epochs and seconds to it, the ratio of times (paired log t over the seeds where both
    reached it and neither was measured under load) and, for the seeds that never reached it (timed runs only),
    the largest lower bound of their ratio (their whole training time over in-memory's time to target)."""
    targeted = group[group["reached_target"].notna() & group["seed"].isin(base.index)]
    reached = targeted[targeted["reached_target"].astype(bool)]
    missed = targeted[~targeted["reached_target"].astype(bool)]
    memory_time = lambda seeds: [base.loc[s, "time_to_target_s"] for s in seeds]  # noqa: E731
    quiet = lambda rows: rows[rows["quiet"] & rows["seed"].map(lambda s: bool(base.loc[s, "quiet"]))]  # noqa: E731
    timed = quiet(reached)
    ratio = ratio_interval(list(timed["time_to_target_s"]), memory_time(timed["seed"]))
    timed_missed = quiet(missed)
    bounds = [t / m for t, m in zip(timed_missed["train_time_s"], memory_time(timed_missed["seed"]))]
    return {"target_seeds": len(targeted), "target_reached": len(reached),
            "epochs_to_target": reached["epochs_to_target"].astype(float).mean(),
            **interval_columns("time_to_target_s", mean_interval(timed["time_to_target_s"].astype(float))),
            **interval_columns("time_to_target_ratio_vs_in_memory", ratio), "time_to_target_pairs": ratio.n,
            "unreached_ratio_bound": max(bounds) if bounds else math.nan}


def interval_columns(name: str, interval: Interval) -> dict[str, float]:
    """``name``, ``name_ci_low``, ``name_ci_high`` of an interval, as the tables store it."""
    return {name: interval.estimate, f"{name}_ci_low": interval.low, f"{name}_ci_high": interval.high}


def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: means over seeds with 95 % t intervals; the epoch-time ratio (paired log t) and the
    accuracy difference (paired t) to in-memory, paired by seed. Timings come only from runs not measured under
    foreign load (``timed_runs`` of ``seeds``); accuracy from every run."""
    flagged = runs["under_load"].map(measured_under_load).astype(bool)
    runs = runs.assign(quiet=~flagged)
    if "reached_target" not in runs:
        runs = runs.assign(reached_target=None, time_to_target_s=math.nan, epochs_to_target=math.nan)
    rows = []
    for (dataset, label), group in runs.groupby(["dataset", "configuration"], sort=False):
        base = runs[(runs["system"] == "in_memory") & (runs["dataset"] == dataset)].set_index("seed")
        quiet = group[group["quiet"]]
        paired = quiet[quiet["seed"].map(lambda s: s in base.index and bool(base.loc[s, "quiet"])).astype(bool)]
        ratio = ratio_interval(list(paired["epoch_time_s"]), [base.loc[s, "epoch_time_s"] for s in paired["seed"]])
        both = group[group["seed"].isin(base.index)]
        gap = difference_interval(list(both["test_accuracy"]), [base.loc[s, "test_accuracy"] for s in both["seed"]])
        first = group.iloc[0]
        partitions, capacity = first["num_partitions"], first["buffer_capacity"]
        rows.append({
            "dataset": dataset, "configuration": label, "system": first["system"], "status": "ok",
            "reason": "", "policy": first["policy"], "num_partitions": partitions,
            "buffer_capacity": capacity, "c_over_p": capacity / partitions if pd.notna(partitions) else math.nan,
            "prefetch": first["prefetch"], "seeds": len(group),
            "epochs": int(group["epochs"].min()) if "epochs" in group else math.nan,
            "timed_runs": len(quiet), "warm_epochs": int(group["warm_epochs"].min()),
            **interval_columns("epoch_time_s", mean_interval(quiet["epoch_time_s"])),
            **interval_columns("time_ratio_vs_in_memory", ratio),
            "io_wait_s": quiet["io_wait_s"].mean(),
            **interval_columns("io_wait_fraction", mean_interval(quiet["io_wait_fraction"].astype(float))),
            "states": first["states"], "partitions_read": group["partitions_read"].mean(),
            "io_read_bytes": group["io_read_bytes"].mean(), "disk_read_bytes": group["disk_read_bytes"].mean(),
            "prepare_s": group["prepare_s"].mean(),
            "read_bandwidth_bytes_per_s": quiet["read_bandwidth_bytes_per_s"].astype(float).mean(),
            **interval_columns("test_accuracy", mean_interval(group["test_accuracy"].astype(float))),
            **interval_columns("accuracy_gap_vs_in_memory", gap),
            **interval_columns("valid_accuracy", mean_interval(group["valid_accuracy"].astype(float)
                                                      if "valid_accuracy" in group else [])),
            **_time_to_targetinterval_columns(group, base),
            "peak_rss_bytes": group["peak_rss_bytes"].max(), "compute_threads": first["compute_threads"],
            "foreign_cores": group["foreign_cores"].astype(float).max(),
            "under_load": bool(flagged[group.index].all()), "git_sha": first["git_sha"],
        })
    order = {"pipelined": 0, "in_memory": 1, "disk": 2}  # the suite's systems, then peers
    return pd.DataFrame(rows).sort_values(
        ["dataset", "system", "configuration"],
        key=lambda c: c.map(lambda v: (order.get(v, 3), v)) if c.name == "system"
        else c, kind="stable").reset_index(drop=True)


__all__ = ["TARGET_MARGIN", "interval_columns", "run_isolated", "run_options", "run_table", "shared_root",
           "summary_table", "with_time_to_target"]
