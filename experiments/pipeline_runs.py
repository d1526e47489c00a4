"""Tables of pipelined runs, shared by the jobs that read them: the pipeline speed job
(:mod:`experiments.figures.pipeline_speed`), its simulator validation (:mod:`experiments.figures.pipeline_validation`), the cost job
(:mod:`experiments.figures.cost`) and the accelerator measurement (:mod:`experiments.measure.pipeline_cuda`).

A configuration label (:func:`configuration`) names a system configuration in a few characters; :func:`speed_table`
is one row per recorded speed run (warm epoch time, busy times, utilization, efficiency, ratio to in-memory).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite.load import load_columns
from suite.results import load_epochs, load_runs

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


def run_configuration(runs: pd.DataFrame) -> pd.Series:
    options = runs.filter(like="config.system.options.")
    return pd.Series([
        configuration(system, {k.removeprefix("config.system.options."): _plain(v)
                               for k, v in row.items() if pd.notna(v)})
        for system, (_, row) in zip(runs["system"], options.iterrows())
    ], index=runs.index)


def measured_epochs(epochs: pd.DataFrame, which: str = "last") -> pd.DataFrame:
    """Per run (indexed by ``run_dir``): the epoch a speed table reads, from :func:`suite.results.load_epochs`'s
    rows. ``"last"``: the run's last (warm) epoch. ``"warm"``: every epoch but the first (the only one, if that is
    all there is), averaged (times, examples, busy times, efficiency, mean staleness), the largest staleness and the
    last epoch's bottleneck; ``measured_epochs`` counts them. Averaging evens out the epoch-to-epoch variation of
    short epochs (a dozen batches), what a simulator is judged against."""
    epochs = epochs.sort_values("epoch")
    grouped = epochs.groupby("run_dir")
    if which == "last":
        return grouped.tail(1).set_index("run_dir").assign(measured_epochs=1)
    if which != "warm":
        raise ValueError(f"which: {which!r} is not 'last' or 'warm'")
    warm = epochs[(epochs["epoch"] > grouped["epoch"].transform("min")) | (grouped["epoch"].transform("count") == 1)]
    by_run = warm.groupby("run_dir")
    averaged = [c for c in ("epoch_time_s", "examples", "pipeline_efficiency", "staleness_mean",
                            *(f"stage_busy_s.{stage}" for stage in STAGES)) if c in warm]
    table = by_run[averaged].mean()
    for column, how in (("staleness_max", "max"), ("bottleneck_stage", "last")):
        if column in warm:
            table[column] = by_run[column].agg(how)
    table["measured_epochs"] = by_run.size()
    return table


def speed_table(out: str | Path, epochs: str = "last") -> pd.DataFrame:
    """One row per speed run: its warm epoch's time, busy times, utilization, efficiency and ratios; ``epochs``:
    which epoch, the last or the mean of every warm one (:func:`measured_epochs`)."""
    runs = load_runs(out, include_incomplete=False)
    runs = runs[runs["status"] == "completed"].copy()
    runs["configuration"] = run_configuration(runs)
    measured = measured_epochs(load_epochs(out), epochs)
    rows = []
    for _, run in runs.iterrows():
        epoch = measured.loc[run["run_dir"]]
        busy = {stage: epoch.get(f"stage_busy_s.{stage}") for stage in STAGES}
        time_s = float(epoch["epoch_time_s"])
        rows.append({
            "dataset": run["dataset"], "sampler": run["sampler"], "system": run["system"],
            "configuration": run["configuration"], "epoch_time_s": time_s, "examples": int(epoch["examples"]),
            "examples_per_s": epoch["examples"] / time_s,
            **({"measured_epochs": int(epoch["measured_epochs"])} if epochs == "warm" else {}),
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


__all__ = ["STAGES", "configuration", "configuration_order", "run_configuration", "sort_speed_table", "speed_table"]
