"""Dollar cost per epoch and to a target validation accuracy, per machine profile: measured here, and projected by
the pipeline simulator on cloud GPU machines.

Usage::

    python -m experiments.figures.cost [--runs RUNS_DIR ...] [--csv out/results/cost.csv] [--png out/results/cost.png]
        [--price-local-as m6a.large] [--target-margin 0.01] [--target DATASET=VALUE ...]
        [--profiles p3.2xlarge,g5.xlarge,...] [--no-plot]

Reads recorded runs only (``--runs``, repeatable; default: the quick reproduction's pipeline-accuracy and disk runs,
``out/reproduce-quick/pipeline/pipeline_accuracy`` and ``out/reproduce-quick/disk``); trains nothing. One row per
(dataset, configuration, machine profile, measured|simulated):

- **measured**: every completed run that recorded its training epochs, priced on the ``local`` profile at the
  hourly price of a comparable cloud instance (``--price-local-as``, default ``m6a.large``: 2 vCPUs of an AMD EPYC,
  like the 2-core AMD EPYC machine the reference results are measured on; its price, source and date are in
  :mod:`suite.pricing` and in every row). ``fits_priced_memory`` says whether the run's peak RSS fits that instance.
- **simulated**: per dataset, the pipeline simulator (:mod:`simulators.calibrate`) is calibrated on the measured
  synchronous run (``pipelined`` with ``sync: true``: the in-memory baseline's schedule, with per-batch records),
  and every measured in-memory run of that dataset with the same model, sampler and batch size (the sync run
  itself, the pipelined ones, an ``in_memory`` one as sync) is projected on each cloud GPU profile of
  :data:`suite.pricing.AWS_PROFILES` whose GPU the simulator knows (:data:`simulators.calibrate.HARDWARE`, matched by
  GPU model): compute and transfer priced from FLOPs and bytes on that GPU, loading as measured here with
  vCPUs / 2 cores per machine. A profile with g > 1 GPUs is priced as **data-parallel** training: every GPU runs
  ceil(B / g) of the epoch's B batches with its share of the cores (vCPUs / 2 / g); the gradient all-reduce is not
  modelled and the epochs to the target are the measured ones, so the projection is a lower bound of the cost of
  multi-GPU training (favourable to it). Simulated epochs use the measured run's seed, like ``gnnsuite simulate``.

Epochs to the target come from the recorded validation curve (``metrics.valid_curve``: only the validations the
run recorded, so an epoch count is at most the run's epochs) and are those of the measured run for its simulated
rows. The target is per dataset: the final validation metric of the dataset's in-memory reference run minus
``--target-margin`` (default 0.01, as the disk node-classification experiment's time to target) (its ``in_memory`` run, else its ``pipelined`` sync run), rounded down to
three decimals, or ``--target DATASET=VALUE``; every row says which (``target_rule``). Cost to target prices the
training time of the epochs up to that validation (evaluation excluded, as :func:`suite.pricing.cost_to_target`).

Outputs: the table (``--csv``, written atomically) and its figure (``--png``, drawn from the CSV alone by
:func:`plot_cost`). Bad input (no runs, an unknown profile, a bad target) is a one-line error
and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import matplotlib.pyplot as plt

from experiments.common import REPO_ROOT, RESULTS, Figure, Mode, Paths, Plot, add_common_options
from experiments.compare import TableSpec
from experiments.style import COLORS, MARIUSGNN, caption, load_note, save_figure, styled
from experiments.report import (Estimate, FAILS, Finding, INCONCLUSIVE, MIN_SEEDS, NOT_TESTABLE, claim,
                                load_exclusions, split_under_load)
from suite.pricing import cost_per_epoch, cost_to_target, epochs_to_target, get_profile
from suite.errors import ConfigError, DataError, SuiteError
from suite.load import load_columns, measured_under_load
from suite.stats import Interval, below, combine, ratio_interval

DEFAULT_RUNS = (REPO_ROOT / "out" / "reproduce-quick" / "pipeline" / "pipeline_accuracy",
                REPO_ROOT / "out" / "reproduce-quick" / "disk")
DEFAULT_PRICE_LOCAL_AS = "m6a.large"
DEFAULT_TARGET_MARGIN = 0.01
COLUMNS = (
    "dataset", "configuration", "system", "kind", "mode", "profile", "priced_as", "gpus", "hourly_usd", "epochs",
    "epoch_time_s", "cost_per_epoch_usd", "valid_metric", "final_valid", "target", "epochs_to_target",
    "time_to_target_s", "cost_to_target_usd", "target_rule", "hardware", "calibrated_from", "run_id",
    "peak_rss_bytes", "fits_priced_memory", "measured_on", "price_source", "price_date", "epoch_times_s",
    "foreign_cores", "under_load", "seed",
)


# ---------------------------------------------------------------------------------------------- pricing
def price_row(epoch_times: Sequence[float], valid_curve: Iterable[tuple[int, float | None]], target: float | None,
              hourly_usd: float) -> dict[str, Any]:
    """The cost columns of one row: mean epoch time, $/epoch, epochs, time and $ to ``target``.

    Args:
        epoch_times: seconds of every training epoch (measured or simulated), epoch 0 first.
        valid_curve: ``(epoch, metric)`` of every recorded validation (epochs numbered from 0).
        target: the validation metric to reach (``None``: no target).
        hourly_usd: the price per hour.

    Returns:
        ``epochs``, ``epoch_time_s``, ``cost_per_epoch_usd``, ``epochs_to_target``, ``time_to_target_s``,
        ``cost_to_target_usd`` (NaN where the target is absent or never reached).
    """
    times = [float(t) for t in epoch_times]
    curve = list(valid_curve)
    nan = float("nan")
    reached = None if target is None else epochs_to_target(curve, target)
    to_target = None if target is None else cost_to_target("local", times, curve, target, hourly_usd)
    per_epoch = cost_per_epoch("local", times, hourly_usd)
    return {
        "epochs": len(times),
        "epoch_time_s": sum(times) / len(times) if times else nan,
        "cost_per_epoch_usd": nan if per_epoch is None else per_epoch,
        "epochs_to_target": nan if reached is None else reached,
        "time_to_target_s": nan if reached is None else sum(times[:reached]),
        "cost_to_target_usd": nan if to_target is None else to_target,
    }


def target_value(reference_metric: float, margin: float) -> float:
    """``reference_metric`` minus ``margin``, rounded down to three decimals (a target one can state)."""
    if not (0 <= margin < 1):
        raise ConfigError(f"--target-margin: expected a number in [0, 1), got {margin!r}")
    return math.floor((reference_metric - margin) * 1000 + 1e-9) / 1000


# ---------------------------------------------------------------------------------------------- recorded runs
@dataclasses.dataclass(frozen=True)
class Run:
    """What the cost table needs of one recorded run."""

    run_dir: Path
    run_id: str
    config: dict[str, Any]
    summary: dict[str, Any]

    @property
    def system(self) -> str:
        return str(self.config.get("system", {}).get("name"))

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.config.get("system", {}).get("options") or {})

    @property
    def dataset(self) -> str:
        dataset = self.config.get("dataset", {})
        return str(self.summary.get("dataset") or dataset.get("preset") or dataset.get("name"))

    @property
    def epoch_times(self) -> list[float]:
        return [float(t) for t in self.summary.get("epoch_time_s") or []]

    @property
    def metric(self) -> str:
        return str((self.summary.get("metrics") or {}).get("main") or "accuracy")

    @property
    def valid_curve(self) -> list[tuple[int, float | None]]:
        points = (self.summary.get("metrics") or {}).get("valid_curve") or []
        return [(int(p["epoch"]), p.get(self.metric)) for p in points]

    @property
    def final_valid(self) -> float:
        values = [v for _, v in sorted(self.valid_curve) if v is not None]
        return float(values[-1]) if values else float("nan")

    @property
    def is_sync(self) -> bool:
        return self.system == "pipelined" and bool(self.options.get("sync"))

    @property
    def kind(self) -> str:
        """``disk`` for the disk system, ``in-memory`` otherwise (the pipelined system trains from memory too)."""
        return "disk" if self.system == "disk" else "in-memory"

    @property
    def configuration(self) -> str:
        if self.system == "disk":
            o = self.options
            return (f"disk {o.get('policy')} p{o.get('num_partitions')} c{o.get('buffer_capacity')}"
                    + ("" if o.get("prefetch", True) else " no-prefetch")
                    + (" pipelined" if o.get("pipeline") else ""))
        from experiments.pipeline_runs import configuration

        return configuration(self.system, self.options)

    def workload(self) -> tuple:
        """What must match for one run's calibration to project another: data, model, sampler, batch size."""
        dataset = {k: v for k, v in self.config.get("dataset", {}).items() if k != "cache_dir"}
        return (repr(sorted(dataset.items())), repr(self.config.get("model")), repr(self.config.get("sampler")),
                (self.config.get("training") or {}).get("batch_size"))


def load_runs(folders: Sequence[str | Path]) -> list[Run]:
    """The completed, measured (not simulated) runs under ``folders`` that recorded training epochs.

    A missing folder is reported on stderr and skipped; ``DataError`` when no run is found at all.
    """
    from suite.config import read_yaml
    from suite.recorder import read_summary
    from suite.results import run_dirs

    runs, missing = [], []
    for folder in folders:
        if not Path(folder).is_dir():
            missing.append(str(folder))
            print(f"cost: {folder}: no such runs folder, skipped", file=sys.stderr)
            continue
        for run_dir in run_dirs(folder):
            summary = read_summary(run_dir) or {}
            if summary.get("status") != "completed" or summary.get("simulated") or not summary.get("epoch_time_s"):
                continue
            config = read_yaml(run_dir / "config.yaml") if (run_dir / "config.yaml").exists() else {}
            runs.append(Run(run_dir, str(summary.get("run_id") or run_dir.name), config, summary))
    if not runs:
        where = ", ".join(str(f) for f in folders) or "(none given)"
        raise DataError(f"--runs: no completed measured run under {where}"
                        + (" (run the pipeline and disk_nc experiments first)" if missing else ""))
    return runs


def targets(runs: Sequence[Run], margin: float, given: dict[str, float]) -> dict[str, tuple[float, str]]:
    """Per dataset, the target and the rule that set it (``given`` first, else the reference's final validation
    metric minus ``margin``)."""
    result: dict[str, tuple[float, str]] = {}
    for dataset in sorted({run.dataset for run in runs}):
        if dataset in given:
            result[dataset] = (given[dataset], f"--target {dataset}={given[dataset]}")
            continue
        mine = [run for run in runs if run.dataset == dataset and not math.isnan(run.final_valid)]
        reference = ([r for r in mine if r.system == "in_memory"] or [r for r in mine if r.is_sync] or [None])[0]
        if reference is not None:
            result[dataset] = (target_value(reference.final_valid, margin),
                               f"final valid {reference.metric} {reference.final_valid:.4f} - {margin:g} of "
                               f"{reference.configuration} ({reference.run_id}), rounded down")
    return result


# ---------------------------------------------------------------------------------------------- projection
def gpu_hardware(profile_name: str):
    """The simulator's figures for one GPU of ``profile_name`` (a registered machine profile), or None.

    GPU figures (peak FLOP/s, efficiency, PCIe) come from the :data:`simulators.calibrate.HARDWARE` entry whose
    machine profile has the same GPU model; the cores are the profile's vCPUs / 2 (as in ``HARDWARE``) divided
    among its GPUs.
    """
    from simulators.calibrate import HARDWARE
    from suite.registry import MACHINES

    profile = get_profile(profile_name)
    if not profile.gpus:
        return None
    for name, hardware in HARDWARE.items():
        if name in MACHINES and hardware.gpu_tflops and get_profile(name).gpu_model == profile.gpu_model:
            cores = profile.cpus / 2 / profile.gpus
            label = profile.name + (f" (1 of {profile.gpus} GPUs)" if profile.gpus > 1 else "")
            return dataclasses.replace(
                hardware, name=label, cpu_cores=cores,
                source=f"GPU figures of {name}: {hardware.source}; {cores:g} cores per GPU = {profile.cpus} vCPUs "
                       f"/ 2 / {profile.gpus} GPU(s)")
    return None


def default_profiles() -> list[str]:
    """The cloud GPU profiles the simulator can project on (registered, with a GPU it knows)."""
    from suite.pricing import AWS_PROFILES

    return [p.name for p in AWS_PROFILES if gpu_hardware(p.name) is not None]


def _projection_spec(run: Run):
    """The run's spec as the ``pipelined`` system (an ``in_memory`` run is the synchronous pipeline)."""
    from suite.config import spec_from_dict

    spec = spec_from_dict(run.config, source=str(run.run_dir / "config.yaml"))
    if run.system == "in_memory":
        spec = spec.model_copy(update={"system": spec.system.model_copy(
            update={"name": "pipelined", "options": {"sync": True}})})
    return spec


def project(calibration, feature_dim: int, run: Run, hardware, batches: int) -> list[float]:
    """Simulated epoch times of ``run``'s configuration on one GPU of ``hardware``, ``batches`` per epoch, as many
    epochs as the run recorded (seed: the run's, plus the epoch, as ``gnnsuite simulate``)."""
    from simulators.calibrate import model_for, summary_of
    from simulators.pipeline_model import simulate
    from suite.config import validate_system_options

    spec = _projection_spec(run)
    options = validate_system_options(spec, str(run.run_dir / "config.yaml")).effective()
    model = model_for(options, calibration, hardware, feature_dim=feature_dim)
    return [summary_of(simulate(model, batches, seed=spec.seed + epoch, epoch=epoch))["epoch_time_s"]
            for epoch in range(len(run.epoch_times))]


def _batches(run: Run, default: int) -> int:
    from simulators.calibrate import warm_epoch_batches

    try:
        return len(warm_epoch_batches(run.run_dir))
    except DataError:
        return default


# ---------------------------------------------------------------------------------------------- the table
def cost_table(runs: Sequence[Run], *, price_local_as: str = DEFAULT_PRICE_LOCAL_AS,
               target_margin: float = DEFAULT_TARGET_MARGIN, given_targets: dict[str, float] | None = None,
               profiles: Sequence[str] | None = None) -> pd.DataFrame:
    """The tidy cost table of ``runs`` (see the module's docstring), sorted by dataset, kind, configuration, mode."""
    from simulators.calibrate import calibrate

    priced = get_profile(price_local_as)
    if priced.hourly_usd is None:
        raise ConfigError(f"--price-local-as: profile {price_local_as!r} has no hourly price")
    profiles = list(default_profiles() if profiles is None else profiles)
    hardware = {}
    for name in profiles:
        hardware[name] = gpu_hardware(name)
        if hardware[name] is None:
            raise ConfigError(f"--profiles: {name!r} has no GPU the simulator knows (projectable: "
                              f"{', '.join(default_profiles())})")
    goal = targets(runs, target_margin, given_targets or {})
    rows = []
    for run in runs:
        target, rule = goal.get(run.dataset, (None, "no in-memory reference run with a validation"))
        rss = run.summary.get("peak_rss_bytes")
        machine = run.summary.get("machine") or {}
        rows.append({
            "dataset": run.dataset, "configuration": run.configuration, "system": run.system, "kind": run.kind,
            "mode": "measured", "profile": "local", "priced_as": priced.name, "gpus": 0,
            "hourly_usd": priced.hourly_usd, "valid_metric": run.metric, "final_valid": run.final_valid,
            "target": target, "target_rule": rule, "run_id": run.run_id, "peak_rss_bytes": rss,
            "fits_priced_memory": None if rss is None else bool(rss <= priced.memory_gib * 2**30),
            "measured_on": f"{machine.get('cpu_model')}, {machine.get('cpu_cores')} cores",
            "price_source": f"{priced.name}: {priced.price_source}", "price_date": priced.price_date,
            "epoch_times_s": run.epoch_times, **load_columns(run.summary), "seed": run.summary.get("seed"),
            **price_row(run.epoch_times, run.valid_curve, target, priced.hourly_usd),
        })
    calibrations = {}
    for run in sorted(runs, key=lambda r: r.run_id):
        if run.is_sync and run.dataset not in calibrations:
            try:
                calibrations[run.dataset] = (run, calibrate(run.run_dir))
            except DataError as err:  # a sync run without batch records cannot calibrate
                print(f"cost: {run.run_id}: not a calibration run ({err})", file=sys.stderr)
    for dataset, (reference, calibration) in calibrations.items():
        feature_dim = (reference.summary.get("dataset_info") or {}).get("feature_dim")
        if feature_dim is None:
            print(f"cost: {reference.run_id}: no dataset_info.feature_dim recorded; no projection of {dataset}",
                  file=sys.stderr)
            continue
        target, rule = goal.get(dataset, (None, "no in-memory reference run with a validation"))
        for run in runs:
            if run.dataset != dataset or run.system not in ("pipelined", "in_memory") or \
                    run.workload() != reference.workload():
                continue
            batches = _batches(run, calibration.num_batches)
            for name in profiles:
                profile = get_profile(name)
                per_gpu = -(-batches // profile.gpus)
                times = project(calibration, int(feature_dim), run, hardware[name], per_gpu)
                rows.append({
                    "dataset": dataset, "configuration": run.configuration, "system": run.system,
                    "kind": run.kind, "mode": "simulated", "profile": name, "priced_as": name,
                    "gpus": profile.gpus, "hourly_usd": profile.hourly_usd, "valid_metric": run.metric,
                    "final_valid": run.final_valid, "target": target, "target_rule": rule,
                    "hardware": hardware[name].source + (
                        f"; data-parallel: {per_gpu} of {batches} batches per GPU, all-reduce not modelled"
                        if profile.gpus > 1 else ""),
                    "calibrated_from": reference.run_id, "run_id": run.run_id,
                    "price_source": profile.price_source, "price_date": profile.price_date, "epoch_times_s": times,
                    "seed": run.summary.get("seed"),
                    **price_row(times, run.valid_curve, target, profile.hourly_usd),
                })
    table = pd.DataFrame(rows).reindex(columns=list(COLUMNS))
    order = {"measured": 0, "simulated": 1}
    return table.sort_values(["dataset", "kind", "configuration", "mode", "gpus", "hourly_usd"],
                             key=lambda c: c.map(order) if c.name == "mode" else c).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------- command line
def _parse_targets(items: Sequence[str]) -> dict[str, float]:
    given = {}
    for item in items:
        dataset, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not sep or not dataset or not math.isfinite(number):
            raise ConfigError(f"--target: expected DATASET=VALUE with a number, got {item!r}")
        given[dataset] = number
    return given


def run(*, runs: Sequence[Path] = DEFAULT_RUNS, csv: Path = RESULTS / "cost.csv",
        png: Path | None = RESULTS / "cost.png", price_local_as: str = DEFAULT_PRICE_LOCAL_AS,
        target_margin: float = DEFAULT_TARGET_MARGIN, targets: Mapping[str, float] | None = None,
        profiles: Sequence[str] | None = None) -> pd.DataFrame:
    """Price the recorded runs in ``runs`` (:func:`cost_table`), write the table to ``csv`` and its figure to ``png``
    (none: no figure); return the table. Raises :class:`suite.errors.SuiteError` (one line) on bad options or runs."""
    from suite.results import export

    if not 0 <= target_margin < 1:
        raise ConfigError(f"--target-margin: expected a number in [0, 1), got {target_margin!r}")
    table = cost_table(load_runs(runs), price_local_as=price_local_as, target_margin=target_margin,
                       given_targets=dict(targets or {}), profiles=profiles)
    export(table, csv)
    if png is not None:

        plot_cost(csv, png)
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 24):
        print(table[["dataset", "configuration", "mode", "profile", "gpus", "epoch_time_s", "cost_per_epoch_usd",
                     "target", "epochs_to_target", "cost_to_target_usd"]].to_string(index=False))
    print(f"wrote {csv}" + ("" if png is None else f" and {png}"))
    return table


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: exit status 2 with one line on stderr on bad options or runs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--runs", type=Path, action="append",
                        help="folder of recorded runs (repeatable; default: the quick reproduction's pipeline "
                             "accuracy and disk runs)")
    add_common_options(parser, plot=True)
    parser.add_argument("--csv", type=Path, default=RESULTS / "cost.csv")
    parser.add_argument("--png", type=Path, default=RESULTS / "cost.png")
    parser.add_argument("--price-local-as", default=DEFAULT_PRICE_LOCAL_AS,
                        help="machine profile whose hourly price prices the runs measured here (default m6a.large)")
    parser.add_argument("--target-margin", type=float, default=DEFAULT_TARGET_MARGIN,
                        help="target = the in-memory reference's final validation metric minus this")
    parser.add_argument("--target", action="append", default=[], metavar="DATASET=VALUE",
                        help="an explicit target for one dataset (repeatable)")
    parser.add_argument("--profiles", help="comma-separated cloud GPU profiles to project on (default: all known)")
    args = parser.parse_args(argv)
    try:
        run(runs=args.runs or DEFAULT_RUNS, csv=args.csv, png=args.png if args.plot else None,
            price_local_as=args.price_local_as, target_margin=args.target_margin,
            targets=_parse_targets(args.target),
            profiles=[p.strip() for p in args.profiles.split(",") if p.strip()] if args.profiles else None)
    except SuiteError as err:
        print(f"cost: error: {err}", file=sys.stderr)
        return 2
    return 0


# ---------------------------------------------------------------------------------------------- the figure
_COST_COLUMNS = ("dataset", "configuration", "mode", "profile", "priced_as", "gpus", "hourly_usd",
                 "cost_per_epoch_usd", "cost_to_target_usd", "target", "valid_metric")


def plot_cost(csv_path: str | Path, out_png: str | Path) -> Path:
    """Dollar cost per machine profile (``experiments/figures/cost.py``): per dataset, USD per epoch beside USD to the
    target validation metric, per configuration (log y), one bar per profile: measured here (priced as a comparable
    instance, grey) and projected by the simulator on cloud GPU machines (coloured; multi-GPU: data-parallel).
    A configuration that never reached the target is marked "not reached".

    Reads only ``csv_path``; ``DataError`` (one line) when a column is missing.
    """
    from suite.errors import DataError

    table = pd.read_csv(csv_path)
    missing = [c for c in _COST_COLUMNS if c not in table.columns]
    if missing or table.empty:
        raise DataError(f"{csv_path}: not a cost table ({'no rows' if table.empty else 'no column ' + missing[0]})")
    table["series"] = [
        f"measured here, priced as {r.priced_as} ({r.hourly_usd:g} USD/h)" if r.mode == "measured" else
        f"PROJECTED {r.profile}" + (f" ({int(r.gpus)} GPUs, data-parallel)" if r.gpus > 1 else " (1 GPU)")
        + f", {r.hourly_usd:g} USD/h" for r in table.itertuples()]
    if "under_load" not in table:
        table["under_load"] = False
    table["under_load"] = table["under_load"].map(measured_under_load).astype(bool)
    keys = ["dataset", "configuration", "series", "mode", "gpus", "hourly_usd", "target", "valid_metric"]
    seeds = int(table.groupby(keys, dropna=False).size().max())
    table = table.groupby(keys, dropna=False, sort=False, as_index=False).agg(  # a bar per configuration: seed mean
        cost_per_epoch_usd=("cost_per_epoch_usd", "mean"), cost_to_target_usd=("cost_to_target_usd", "mean"),
        under_load=("under_load", "any"))
    series = list(dict.fromkeys(table.sort_values(["mode", "gpus", "hourly_usd"])["series"]))
    simulated = [name for name in series if name.startswith("PROJECTED")]
    cmap = plt.get_cmap("viridis")
    color = {name: cmap(0.1 + 0.8 * simulated.index(name) / max(1, len(simulated) - 1)) if name in simulated
             else COLORS["in_memory"] for name in series}
    datasets = list(dict.fromkeys(table["dataset"]))
    with styled():
        fig, axes = plt.subplots(len(datasets), 2, figsize=(14.0, 4.8 * len(datasets)), squeeze=False,
                                 layout="constrained")
        for row, dataset in enumerate(datasets):
            rows = table[table["dataset"] == dataset]
            configurations = list(dict.fromkeys(rows["configuration"]))
            first = rows.iloc[0]
            for ax, column, label in ((axes[row][0], "cost_per_epoch_usd", "cost per epoch"),
                                      (axes[row][1], "cost_to_target_usd", "cost to target")):
                labelled: set[str] = set()
                for i, configuration in enumerate(configurations):
                    bars = rows[rows["configuration"] == configuration]
                    names = [name for name in series if name in set(bars["series"])]
                    width = 0.8 / len(names)
                    for offset, name in enumerate(names):
                        bar = bars[bars["series"] == name].iloc[0]
                        x = i + (offset - (len(names) - 1) / 2) * width
                        ax.bar([x], [bar[column]], width, color=color[name],
                               label=None if name in labelled else name,
                               hatch="xx" if measured_under_load(bar.get("under_load")) else None)
                        labelled.add(name)
                        if column == "cost_to_target_usd" and pd.isna(bar[column]) and pd.notna(bar["target"]):
                            ax.annotate("not reached", (x, 0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                                        textcoords="offset points", rotation=90, ha="center", va="bottom",
                                        fontsize=6)
                ax.set_yscale("log")
                values = rows[column][rows[column] > 0]
                if len(values):  # bars from well below the smallest, room above the largest for the notes
                    ax.set_ylim(values.min() / 3, values.max() * 3)
                ax.set_xticks(range(len(configurations)))
                ax.set_xticklabels(configurations, rotation=20, ha="right")
                ax.grid(True, axis="y", which="both", alpha=0.25)
                ax.set_ylabel(f"{label} (USD)")
                target = (f"target valid {first['valid_metric']} {first['target']:.3f}" if pd.notna(first["target"])
                          else "no target")
                ax.set_title(f"{dataset}: {label}" + (f" ({target})" if column == "cost_to_target_usd" else ""))
            if not (rows["mode"] == "simulated").any():
                axes[row][0].text(0.5, 0.97, "no simulated projection: no measured pipelined sync run of this "
                                  "workload to calibrate the simulator on", transform=axes[row][0].transAxes,
                                  ha="center", va="top", fontsize=7, style="italic")
            axes[row][1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.suptitle("Training cost per machine profile: measured on this machine, PROJECTED by the pipeline "
                     "simulator (calibrated on the measured sync run) on cloud GPU machines")
        caption(fig, f"{MARIUSGNN}, its cost comparison (disk-based single-machine training vs in-memory multi-GPU "
                     "training)", Path(csv_path).name,
                f"none drawn (bars: means over up to {seeds} seed(s); the cost ratio's 95 % interval over epoch "
                "times is in REPORT.md)",
                load_note(table, lambda r: f"{r['dataset']} {r['configuration']}"))
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- the claims
def _by_seed(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with one row per seed (a run recorded twice counts once: its first row); a table without a seed
    column is one seed per row."""
    rows = rows if "seed" in rows else rows.assign(seed=range(len(rows)))
    return rows.drop_duplicates("seed").sort_values("seed")


def _cheapest(rows: pd.DataFrame, keys: list[str], column: str) -> pd.DataFrame | None:
    """Of the configurations (grouped by ``keys``) whose every seed has a ``column`` value, the one of the lowest
    mean over its seeds: its rows, one per seed; None when no configuration has one on every seed."""
    best = None
    for _, group in rows.groupby(keys, sort=True):
        group = _by_seed(group)
        if group[column].notna().all() and (best is None or group[column].mean() < best[column].mean()):
            best = group
    return best


def cost_to_target_verdict(disk: pd.DataFrame, gpu: pd.DataFrame) -> tuple:
    """disk-cost on one dataset, decided from the costs to target of every seed (an epoch's cost decides nothing:
    a disk configuration that is cheap per epoch by doing less work must not pass; no seed is picked over another).

    - the baseline: of the multi-GPU projections (configuration x profile) that reached the target on every seed,
      the one of the lowest mean cost to target (none: inconclusive, nothing to compare against);
    - of the disk configurations that reached the target on every seed, the one of the lowest mean cost to target,
      against the baseline: Welch's log t interval of the ratio over the seeds of both (at least
      :data:`~experiments.report.MIN_SEEDS` each): holds below 1, does not hold at or above 1, else inconclusive;
    - no disk configuration reached it on every seed: a seed that never did is bounded below by its whole training
      (every epoch it ran); the configuration of the lowest mean bound does not hold when its interval lies at or
      above 1, else is inconclusive (the epoch cap stopped it first).

    Returns ``(verdict, what, ratio, disk rows, baseline rows, column)``, the rows one per seed; ``column`` is
    ``cost_to_target_usd``, or ``bound`` for the lower bounds.
    """
    bounded = disk.assign(bound=disk["cost_to_target_usd"].fillna(disk["cost_per_epoch_usd"] * disk["epochs"]))
    rows = _cheapest(bounded, ["configuration"], "bound")
    baseline = _cheapest(gpu, ["configuration", "profile"], "cost_to_target_usd")
    if baseline is None or rows is None:  # nothing to compare against, or no disk cost at all
        nan = Interval(math.nan, math.nan, math.nan, 0, "")
        what = "(no multi-GPU projection reached the target on every seed)" if baseline is None else \
            "(no cost recorded on every seed)"
        return INCONCLUSIVE, what, nan, rows if rows is not None else _by_seed(bounded.head(1)), \
            baseline if baseline is not None else _by_seed(gpu.head(1)), "bound"
    reached = _cheapest(disk, ["configuration"], "cost_to_target_usd")
    if reached is not None:
        ratio = ratio_interval(list(reached["cost_to_target_usd"]), list(baseline["cost_to_target_usd"]),
                               paired=False)
        return below(ratio, 1.0, min_n=MIN_SEEDS), "to target", ratio, reached, baseline, "cost_to_target_usd"
    ratio = ratio_interval(list(rows["bound"]), list(baseline["cost_to_target_usd"]), paired=False)
    verdict = FAILS if below(ratio, 1.0, min_n=MIN_SEEDS) == FAILS else INCONCLUSIVE
    return verdict, f"at least (a seed that never reached the target: all its {int(rows['epochs'].max())} " \
        "epochs)", ratio, rows, baseline, "bound"


@claim("disk-cost", "Disk-based training costs a fraction of in-memory multi-GPU training (MariusGNN: a disk-based "
       "run on one machine at a fraction of the cost of in-memory training on multi-GPU machines)", ("cost.csv",))
def disk_cost(results: Path) -> Finding:
    table = pd.read_csv(results / "cost.csv")
    disk_all = table[(table["mode"] == "measured") & (table["kind"] == "disk")]
    disk, loaded = split_under_load(disk_all)
    if disk.empty:
        return Finding("cost.csv has no measured disk-based run without load", "", NOT_TESTABLE,
                       reason="no disk run", excluded=load_exclusions(loaded, lambda r: r["configuration"]))
    multi = table[(table["mode"] == "simulated") & (table["kind"] == "in-memory") & (table["gpus"] > 1)]
    parts, settings, verdicts, estimates, missing = [], [], [], [], []
    for dataset, disk_rows in disk.groupby("dataset", sort=True):
        gpu_rows = multi[multi["dataset"] == dataset]
        if gpu_rows.empty:
            projected = sorted(set(multi["dataset"]))
            missing.append(f"no in-memory multi-GPU projection on {dataset} (the disk runs' dataset): the simulator "
                           "is calibrated on a measured pipelined sync run with batch records of the same workload, "
                           f"and cost.csv projects {', '.join(projected) if projected else 'no dataset'} (a "
                           "pipelined sync: true run beside the disk runs would give it)")
            continue
        verdict, what, ratio, disk_best, gpu_best, column = cost_to_target_verdict(disk_rows, gpu_rows)
        kind = "to target" if column == "cost_to_target_usd" else "at least (never reached)"
        estimates.append(Estimate(f"{dataset} disk / multi-GPU cost {kind}", ratio, "< 1"))
        verdicts.append(verdict)
        disk_first, gpu_first = disk_best.iloc[0], gpu_best.iloc[0]
        parts.append(f"{dataset}: {disk_first['configuration']} {disk_best[column].mean():.6f} USD {what} (mean "
                     f"of {len(disk_best)} seeds) vs PROJECTED {gpu_first['configuration']} on "
                     f"{gpu_first['profile']} ({int(gpu_first['gpus'])} GPUs) "
                     f"{gpu_best['cost_to_target_usd'].mean():.6f} USD to target (mean of {len(gpu_best)}): "
                     f"x{ratio}")
        settings.append(f"{dataset}: disk measured here, priced as {disk_first['priced_as']} "
                        f"({disk_first['hourly_usd']:g} USD/h); multi-GPU in-memory is a simulator projection "
                        "(data-parallel, all-reduce not modelled: a lower bound); per side the configuration of "
                        f"the lowest mean cost to target; interval over seeds (>= {MIN_SEEDS} each)")
    if not verdicts:
        return Finding("; ".join(missing), "", NOT_TESTABLE, reason="; ".join(missing))
    return Finding("; ".join(parts + missing), "; ".join(settings), combine(verdicts), tuple(estimates),
                   excluded=load_exclusions(loaded, lambda r: r["configuration"]))


# ---------------------------------------------------------------------------------------------- the job
def _reproduce(mode: Mode, paths: Paths) -> None:
    run(runs=(paths.runs / "pipeline" / "pipeline_accuracy", paths.runs / "disk"), csv=paths.results / "cost.csv",
        png=paths.results / "cost.png")


FIGURE = Figure(
    "cost", "cost per epoch and to a target accuracy per machine profile: measured here, projected by the "
    "simulator on cloud GPU machines", _reproduce, ("cost.csv", "cost.png"),
    "about 1 minute after the pipeline and disk_nc jobs (reads their runs; trains nothing)", __name__,
    plots=(Plot("cost", plot_cost, "cost.csv"),), claims=(disk_cost,),
    tables={"cost.csv": TableSpec(("dataset", "configuration", "mode", "profile"))})
"""The cost figure, registered in :data:`experiments.plugins.FIGURES`."""


__all__ = ["Run", "cost_table", "default_profiles", "gpu_hardware", "load_runs", "price_row", "project", "run",
           "target_value", "targets"]

if __name__ == "__main__":
    sys.exit(main())
