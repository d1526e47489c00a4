"""Validate the pipeline simulator: calibrate on one measured run, predict other configurations, compare.

Usage::

    python -m experiments.figures.pipeline_validation [--quick] [--runs out/pipeline/pipeline_speed]
        [--results out/results] [--seeds 3] [--speed-batches 100000] [--contention measure|none|loo|FILE] [--no-plot]

Reads the runs of ``experiments/specs/pipeline_speed.yaml`` (run ``python -m experiments.figures.pipeline_speed`` first; with
``--quick``, those of ``python -m experiments.figures.pipeline_speed --quick`` in ``out/pipeline-quick/pipeline_speed``, with
shorter contention measurements: about a minute). A missing runs folder is a one-line error saying what to run. For every
dataset x sampler, the ``sync`` run is the calibration (its warm epoch's per-batch stage times, without overlap,
are the stages' work; :mod:`simulators.calibrate`); each *other* pipelined configuration of that dataset and
sampler (worker counts, queue sizes, staleness bounds, loader threads or processes) is simulated from it, with
the machine's cores shared by loaders and compute, over as many batches as its measured warm epoch, averaged over
``--seeds`` draws, and compared with its measurement. No run is ever predicted from its own calibration.

Contention (what oversubscribing the cores costs beyond sharing them, :mod:`simulators.contention_model`): with
``--contention measure`` (the default) a microbenchmark measures it on this machine for each calibration run's
workload (its sampler, model and batch shape on a synthetic graph of its dataset's shape; loaders as threads and as
processes), before any prediction and without reading any predicted run; ``--contention FILE`` reuses the tables of
an earlier measurement (the ``pipeline_validation_contention.json`` this script writes); ``--contention none``
shares the cores max-min fairly and nothing more; ``--contention loo`` (a cross-check, not a calibration) fits
one slowdown factor for every oversubscribed job, for each predicted run, on the *other* predicted runs only
(leave-one-out). Every row is predicted both ways: ``predicted_*`` with the contention model, ``*_max_min``
without it; the column ``contention`` says where the model comes from.

Outputs: ``out/results/pipeline_validation.csv`` (one row per predicted run: measured and predicted epoch time and
compute utilization, relative and absolute errors, with and without contention),
``out/results/pipeline_validation.png``,
``out/results/pipeline_validation_contention.json`` (the contention tables with their provenance: machine, date, load
of other processes meanwhile, every raw time), ``out/results/pipeline_validation_summary.json`` and, on stdout, the
median absolute errors (with 95 % bootstrap intervals over the held-out runs) and the simulator's speed (one epoch
of ``--speed-batches`` batches of the calibrated model with its contention table, timed here).

``out/results/pipeline_projection.csv``: the simulator's *projection* (not a measurement) of each dataset x sampler on
an accelerator machine (``--projection-profile``, default ``p3.2xlarge``: one V100, 4 cores), calibrated on the
measured sync run: the synchronous schedule and Marius's default pipeline, epoch time and compute utilization over
``--projection-seeds`` simulator seeds with 95 % intervals. It stands in for the pipeline-utilization claim on a
machine without a GPU (``experiments/report.py``).
"""

from __future__ import annotations

import argparse
import math
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

from experiments.common import REPO_ROOT, RESULTS, Figure, JobFailed, Mode, Paths, Plot, add_common_options, cli
from experiments.compare import TableSpec
from experiments.style import caption, marker_of, flagged_under_load, load_note, plain_log_ticks, save_figure, styled
from experiments.report import Estimate, Finding, claim, load_exclusions, percent, split_under_load
from experiments.measure.contention import measure_for_run
from experiments.pipeline_runs import speed_table
from simulators.calibrate import calibrate, model_for, summary_of
from simulators.contention_model import Contention, UniformSlowdown
from simulators.pipeline_model import simulate
from suite.config import read_yaml, spec_from_dict
from suite.io import atomic_write_json, strict_json_dumps
from suite.results import export
from suite.stats import below, bootstrap_interval, combine, mean_interval, ratio_interval
from systems.pipelined import PipelineOptions


def _options(run_dir: str) -> PipelineOptions:
    spec = spec_from_dict(read_yaml(Path(run_dir) / "config.yaml"))
    return PipelineOptions.model_validate(spec.system.options).effective()


def _groups(measured: pd.DataFrame):
    """(dataset, sampler, calibration run folder, the group's other pipelined runs) per dataset x sampler."""
    pipelined = measured[measured["system"] == "pipelined"]
    for (dataset, sampler), group in pipelined.groupby(["dataset", "sampler"]):
        sync = group[group["configuration"] == "sync"]
        if not sync.empty:
            yield dataset, sampler, sync.iloc[0]["run_dir"], group[group["configuration"] != "sync"]


def measure_contention_tables(measured: pd.DataFrame, **options) -> dict[str, Contention]:
    """Per calibration run (by its folder name): the contention microbenchmark of its workload, on this machine,
    with as many loaders as the group's configurations use. Reads only the calibration runs."""
    tables = {}
    for dataset, sampler, calibration_dir, others in _groups(measured):
        loaders = max(_options(run_dir).batch_loader_threads for run_dir in others["run_dir"])
        print(f"measuring contention for {dataset}/{sampler} ({Path(calibration_dir).name}), up to {loaders} "
              "loaders ...", flush=True)
        name = Path(calibration_dir).name
        try:
            tables[name] = measure_for_run(calibration_dir, max_loaders=loaders, **options)
        except RuntimeError as err:  # e.g. a forked loader process crashed: measure the thread loaders only
            print(f"contention for {dataset}/{sampler}: {str(err)[:300]}; measuring loader threads only "
                  "(process loaders then get max-min sharing)", file=sys.stderr, flush=True)
            try:
                tables[name] = measure_for_run(calibration_dir, max_loaders=loaders, loader_kinds=("thread",),
                                               **options)
            except RuntimeError as again:
                print(f"contention for {dataset}/{sampler}: {str(again)[:300]}; predicting it with max-min "
                      "sharing only", file=sys.stderr, flush=True)
            FAILED_CONTENTION[name] = str(err)[:300]
    return tables


FAILED_CONTENTION: dict[str, str] = {}
"""Calibration runs whose full contention benchmark failed in this process (name -> error), for the summary."""


def _predict_one(model, batches: int, seeds: int) -> tuple[float, float, list[dict]]:
    predictions = [summary_of(simulate(model, batches, seed=seed)) for seed in range(seeds)]
    return (float(np.mean([p["epoch_time_s"] for p in predictions])),
            float(np.mean([p["compute_utilization"] for p in predictions])), predictions)


def predict(measured: pd.DataFrame, seeds: int, contention: dict[str, Contention] | None = None,
            source: str = "none (max-min sharing only)") -> pd.DataFrame:
    """Per dataset x sampler: calibrate on the sync run (with its contention table, if any), predict every other
    pipelined run of the group, with the contention table and without it (``*_max_min``)."""
    rows = []
    for dataset, sampler, calibration_dir, others in _groups(measured):
        table = (contention or {}).get(Path(calibration_dir).name)
        calibration = calibrate(calibration_dir, contention=table)
        plain = calibrate(calibration_dir)
        for run in others.itertuples():
            options = _options(run.run_dir)
            batches = len(calibrate(run.run_dir).services["load"])  # only the batch count of the predicted run
            epoch, utilization, predictions = _predict_one(model_for(options, calibration), batches, seeds)
            epoch_mm, utilization_mm, _ = _predict_one(model_for(options, plain), batches, seeds)
            rows.append({
                "dataset": dataset, "sampler": sampler, "configuration": run.configuration,
                "calibrated_on": "sync", "batches": batches,
                "measured_epoch_time_s": run.epoch_time_s, "predicted_epoch_time_s": epoch,
                "epoch_time_error": (epoch - run.epoch_time_s) / run.epoch_time_s,
                "measured_compute_utilization": run.compute_utilization,
                "predicted_compute_utilization": utilization,
                "utilization_error_points": 100 * (utilization - run.compute_utilization),
                "predicted_bottleneck": predictions[0]["bottleneck_stage"],
                "measured_bottleneck": run.bottleneck_stage,
                "predicted_staleness_max": max(p["staleness_max"] for p in predictions),
                "measured_staleness_max": run.staleness_max, "run_id": run.run_id,
                "calibration_run": Path(calibration_dir).name,
                "contention": (table.describe() + f" ({options.loader_workers} loaders)") if table else source,
                "predicted_epoch_time_s_max_min": epoch_mm,
                "epoch_time_error_max_min": (epoch_mm - run.epoch_time_s) / run.epoch_time_s,
                "predicted_compute_utilization_max_min": utilization_mm,
                "utilization_error_points_max_min": 100 * (utilization_mm - run.compute_utilization),
                "foreign_cores": getattr(run, "foreign_cores", float("nan")),
                "under_load": getattr(run, "under_load", None),
            })
    return pd.DataFrame(rows)


LOO_GRID = tuple(round(1.0 - 0.025 * i, 3) for i in range(29))  # 1.0 (neutral) down to 0.3


def predict_leave_one_out(measured: pd.DataFrame, seeds: int, grid: Sequence[float] = LOO_GRID) -> pd.DataFrame:
    """Like :func:`predict`, with one slowdown factor for every oversubscribed CPU job (:class:`UniformSlowdown`)
    chosen, for each predicted run, from ``grid`` to minimise the median absolute epoch-time error over the
    *other* predicted runs (all groups): the run predicted never enters its own factor (leave-one-out)."""
    table = predict(measured, seeds)
    cases = []
    for _, _, calibration_dir, others in _groups(measured):
        plain = calibrate(calibration_dir)
        for run in others.itertuples():
            model = model_for(_options(run.run_dir), plain)
            batches = len(calibrate(run.run_dir).services["load"])
            outcomes = {f: _predict_one(dataclasses.replace(model, contention=UniformSlowdown(f)), batches, seeds)
                        for f in grid}
            cases.append((run.run_id, run.epoch_time_s, outcomes))
    errors = {run_id: {f: abs(o[0] - epoch) / epoch for f, o in outcomes.items()} for run_id, epoch, outcomes in cases}
    for run_id, epoch, outcomes in cases:
        rest = [r for r in errors if r != run_id]
        # the factor with the smallest median error on the other runs (ties: the one nearer to neutral)
        chosen = min(grid, key=lambda f: (float(np.median([errors[r][f] for r in rest])), -f))
        predicted_epoch, utilization, predictions = outcomes[chosen]
        row = table.index[table["run_id"] == run_id][0]
        table.loc[row, ["predicted_epoch_time_s", "epoch_time_error", "predicted_compute_utilization",
                        "utilization_error_points"]] = [
            predicted_epoch, (predicted_epoch - epoch) / epoch, utilization,
            100 * (utilization - table.loc[row, "measured_compute_utilization"])]
        table.loc[row, "contention"] = (f"leave-one-out: factor {chosen:.3f} fitted on the {len(rest)} other "
                                        "held-out runs (median |epoch time error|), never on this run")
    return table


PROJECTION_PROFILE = "p3.2xlarge"
"""The machine profile (:data:`simulators.calibrate.HARDWARE`) on which the claims that need an accelerator are
projected: one V100 and 4 cores, as MariusGNN's single-GPU AWS machines."""


def project(measured: pd.DataFrame, profile: str = PROJECTION_PROFILE, seeds: int = 5) -> pd.DataFrame:
    """The simulator's projection of every dataset x sampler on ``profile``: calibrated on the measured sync run
    (its per-batch load times; compute and transfer priced on the profile's GPU,
    :func:`simulators.calibrate.model_for`),
    the synchronous schedule and Marius's default pipeline, each simulated with ``seeds`` seeds; one row per
    configuration with the mean epoch time, compute utilization and (pipelined) epoch / sync, each with a 95 % t
    interval over the seeds (the simulator's randomness only: the calibration's uncertainty is not in it).
    A projection, not a measurement."""
    from simulators.calibrate import HARDWARE
    from suite.recorder import read_summary

    hardware = HARDWARE[profile]
    rows = []
    for dataset, sampler, calibration_dir, _ in _groups(measured):
        calibration = calibrate(calibration_dir)
        feature_dim = int(((read_summary(calibration_dir) or {}).get("dataset_info") or {}).get("feature_dim") or 0)
        sync_times = None
        for label, options in (("sync", PipelineOptions(sync=True)), ("4T 2X q4/4 b16", PipelineOptions())):
            model = model_for(options.effective(), calibration, hardware, feature_dim=feature_dim)
            runs = [summary_of(simulate(model, calibration.num_batches, seed=seed)) for seed in range(seeds)]
            times = [r["epoch_time_s"] for r in runs]
            epoch, utilization = mean_interval(times), mean_interval([r["compute_utilization"] for r in runs])
            row = {"dataset": dataset, "sampler": sampler, "profile": profile, "configuration": label,
                   "seeds": seeds, "batches": calibration.num_batches, "epoch_time_s": epoch.estimate,
                   "epoch_time_s_ci_low": epoch.low, "epoch_time_s_ci_high": epoch.high,
                   "compute_utilization": utilization.estimate, "compute_utilization_ci_low": utilization.low,
                   "compute_utilization_ci_high": utilization.high, "calibration_run": Path(calibration_dir).name,
                   "hardware": hardware.source, "kind": "projection (simulator)"}
            if sync_times is None:
                sync_times = times
            else:
                ratio = ratio_interval(times, sync_times)
                row.update(time_ratio_vs_sync=ratio.estimate, time_ratio_vs_sync_ci_low=ratio.low,
                           time_ratio_vs_sync_ci_high=ratio.high)
            rows.append(row)
    return pd.DataFrame(rows)


def simulator_speed(measured: pd.DataFrame, batches: int, contention: dict[str, Contention] | None = None) -> dict:
    """Wall time of simulating one epoch of ``batches`` batches with Marius's default options (and the first
    calibration run's contention table, if any)."""
    sync = measured[(measured["system"] == "pipelined") & (measured["configuration"] == "sync")]
    run_dir = sync.iloc[0]["run_dir"]
    model = model_for(PipelineOptions().effective(),
                      calibrate(run_dir, contention=(contention or {}).get(Path(run_dir).name)))
    from suite.load import LoadMonitor, load_columns

    with LoadMonitor() as monitor:
        started = time.perf_counter()
        trace = simulate(model, batches, seed=0)
        wall = time.perf_counter() - started
    return {"batches": batches, "wall_s": wall, "simulated_epoch_s": trace.wall_s, **load_columns(monitor.result)}


DEFAULTS = {"runs": REPO_ROOT / "out" / "pipeline" / "pipeline_speed", "seeds": 3, "speed_batches": 100_000,
            "contention_window": 1.0, "contention_repeats": 2}
QUICK_DEFAULTS = {**DEFAULTS, "runs": REPO_ROOT / "out" / "pipeline-quick" / "pipeline_speed", "seeds": 2,
                  "speed_batches": 20_000, "contention_window": 0.3, "contention_repeats": 1}
"""Options left out on the command line, without and with ``--quick`` (the settings ``gnnsuite reproduce --quick``
uses)."""


def _has_runs(folder: Path) -> bool:
    return folder.is_dir() and any((run / "summary.json").is_file() for run in folder.iterdir())


def run(*, mode: Mode = "full", runs: Path | None = None, results: Path = RESULTS, seeds: int | None = None,
        speed_batches: int | None = None, contention: str = "measure", contention_window: float | None = None,
        contention_repeats: int | None = None, projection_profile: str = PROJECTION_PROFILE,
        projection_seeds: int = 5, plot: bool = True) -> dict:
    """Predict every recorded run of the speed grid in ``runs`` from its calibration run and compare (the module
    docstring); write the tables, the summary and the figure into ``results``; return the summary. Options left
    ``None`` take :data:`DEFAULTS` (``quick`` mode: :data:`QUICK_DEFAULTS`). Raises :class:`JobFailed` (status 2)
    when ``runs`` holds no recorded run, saying what to run first."""
    given = {"runs": runs, "seeds": seeds, "speed_batches": speed_batches, "contention_window": contention_window,
             "contention_repeats": contention_repeats}
    defaults = QUICK_DEFAULTS if mode == "quick" else DEFAULTS
    runs, seeds, speed_batches, contention_window, contention_repeats = (
        defaults[name] if value is None else value for name, value in given.items())
    if not _has_runs(runs):
        first = "python -m experiments.figures.pipeline_speed" + (" --quick" if mode == "quick" else "")
        raise JobFailed(f"error: {runs}: no recorded runs of the speed grid; run `{first}` first"
                        + ("" if mode == "quick" else
                           " (or `--quick` after `python -m experiments.figures.pipeline_speed --quick`)"),
                        status=2)
    contention_option = contention  # the option; `tables`: the contention tables
    measured = speed_table(runs)
    measured["run_dir"] = [str(runs / run_id) for run_id in measured["run_id"]]
    tables: dict[str, Contention] = {}
    if contention_option == "measure":
        tables = measure_contention_tables(measured, window_s=contention_window,
                                           repeats=contention_repeats)
        source = "measured here by experiments.measure.contention (microbenchmark of each calibration run's workload)"
        if FAILED_CONTENTION:
            source += f"; loader processes not measured (the benchmark failed) for {', '.join(FAILED_CONTENTION)}"
    elif contention_option == "loo":
        source = ("leave-one-out: one slowdown factor for every oversubscribed CPU job, fitted for each predicted "
                  "run on the other predicted runs only")
    elif contention_option != "none":
        stored = json.loads(Path(contention_option).read_text())
        tables = {name: Contention.from_dict(data) for name, data in stored["tables"].items()}
        source = stored.get("source") or "stored microbenchmark tables (simulators.contention_model)"
        source = source.split(" [read from ")[0] + f" [read from {contention_option}]"
    else:
        source = "none (max-min sharing only)"
    results.mkdir(parents=True, exist_ok=True)
    tables_file = results / "pipeline_validation_contention.json"
    if tables and not (tables_file.exists() and Path(contention_option).resolve() == tables_file.resolve()):
        atomic_write_json(tables_file, {"source": source, "tables": {k: c.to_dict() for k, c in tables.items()}})
    if contention_option == "loo":
        table = predict_leave_one_out(measured, seeds)
    else:
        table = predict(measured, seeds, tables, source)
    export(table, results / "pipeline_validation.csv")
    export(project(measured, projection_profile, projection_seeds),
           results / "pipeline_projection.csv")
    speed = simulator_speed(measured, speed_batches, tables) if speed_batches else None
    time_error = bootstrap_interval(table["epoch_time_error"].abs())
    points = bootstrap_interval(table["utilization_error_points"].abs())
    summary = {
        "predictions": len(table),
        "median_abs_epoch_time_error": time_error.estimate,
        "median_abs_epoch_time_error_ci": [time_error.low, time_error.high],
        "median_abs_utilization_error_points": points.estimate,
        "median_abs_utilization_error_points_ci": [points.low, points.high],
        "contention": {
            "source": source,
            "how": ("per calibration run, measured by a microbenchmark of that run's sampler, model and batch "
                    "shape on the machine (simulators.contention_model): slowdown factors beyond max-min sharing of "
                    "compute and load beside k busy loaders (threads or processes), and the time a loader process "
                    "spends per batch over a load in a thread; no parameter is fitted on any predicted run")
                   if tables else source,
            "tables_file": "pipeline_validation_contention.json" if tables else None,
            "other_processes_cores": {k: c.provenance.get("other_processes_cores") for k, c in tables.items()},
            "failed": dict(FAILED_CONTENTION),
        },
        "median_abs_epoch_time_error_max_min": float(table["epoch_time_error_max_min"].abs().median()),
        "median_abs_utilization_error_points_max_min":
            float(table["utilization_error_points_max_min"].abs().median()),
        "simulator_speed": speed,
    }
    atomic_write_json(results / "pipeline_validation_summary.json", summary)
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(table[["dataset", "sampler", "configuration", "measured_epoch_time_s", "predicted_epoch_time_s",
                     "epoch_time_error", "epoch_time_error_max_min", "measured_compute_utilization",
                     "predicted_compute_utilization", "utilization_error_points",
                     "utilization_error_points_max_min"]].to_string(index=False,
                                                                     float_format=lambda v: f"{v:.3f}"))
    print(strict_json_dumps(summary, indent=2))
    if plot:

        png = plot_pipeline_validation(results / "pipeline_validation.csv",
                                       results / "pipeline_validation.png")
        print(f"wrote {png}")
    return summary




def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, quick="read the runs of `pipeline.py --quick` (out/pipeline-quick/pipeline_speed); "
                       "shorter contention measurements and simulator speed test (about a minute)",
                       runs=("--runs",), runs_help="the speed grid's runs (default out/pipeline/pipeline_speed, "
                       "with --quick out/pipeline-quick/pipeline_speed)", results=("--results",), plot=True)
    parser.add_argument("--seeds", type=int)
    parser.add_argument("--speed-batches", type=int)
    parser.add_argument("--contention", default="measure", metavar="measure|none|loo|FILE",
                        help="contention tables: measure them here (default), none (max-min sharing only), "
                             "a pipeline_validation_contention.json written before, or loo (one slowdown factor "
                             "fitted leave-one-out on the other predicted runs)")
    parser.add_argument("--contention-window", type=float,
                        help="seconds each contention state is measured (--contention measure; 1, quick 0.3)")
    parser.add_argument("--contention-repeats", type=int,
                        help="measurements of every contention state; the factors are their medians")
    parser.add_argument("--projection-profile", default=PROJECTION_PROFILE,
                        help="machine profile of the accelerator projection (pipeline_projection.csv)")
    parser.add_argument("--projection-seeds", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "pipeline_validation")


# ---------------------------------------------------------------------------------------------- the figure
def plot_pipeline_validation(csv_path: str | Path, out_png: str | Path) -> Path:
    """Simulator validation (``experiments/figures/pipeline_validation.py``): predicted vs measured epoch time (left,
    with the +-10 % band; log axes with plain ticks only when the times span more than a factor of 10) and compute
    utilization (right, +-5 points, axes zoomed to the data), one marker per held-out run.

    Reads only ``csv_path``.
    """
    table = pd.read_csv(csv_path)
    palette = ("tab:blue", "tab:orange", "tab:green", "tab:red")
    colors = dict(zip(dict.fromkeys(table["dataset"]), palette))
    with styled():
        fig, (time_ax, util_ax) = plt.subplots(1, 2, figsize=(11.0, 5.0), layout="constrained")
        for (dataset, sampler), rows in table.groupby(["dataset", "sampler"], sort=False):
            loaded = flagged_under_load(rows)
            style = {"marker": marker_of("SAMPLERS", sampler), "color": colors[dataset], "linestyle": "none",
                     "label": f"{dataset}, {sampler}"}
            time_ax.plot(rows["measured_epoch_time_s"], rows["predicted_epoch_time_s"], **style)
            util_ax.plot(rows["measured_compute_utilization"], rows["predicted_compute_utilization"], **style)
            if loaded.any():
                time_ax.plot(rows[loaded]["measured_epoch_time_s"], rows[loaded]["predicted_epoch_time_s"], "o",
                             markerfacecolor="none", markeredgecolor="k", markersize=11)
        low = min(table["measured_epoch_time_s"].min(), table["predicted_epoch_time_s"].min()) * 0.85
        high = max(table["measured_epoch_time_s"].max(), table["predicted_epoch_time_s"].max()) * 1.15
        line = np.array([low, high])
        time_ax.plot(line, line, "k-", linewidth=0.8)
        time_ax.fill_between(line, line * 0.9, line * 1.1, color="0.5", alpha=0.2, label="+-10 %")
        if high / low > 10:  # a wide range: log axes, with plain numbers (never 2 x 10^0)
            time_ax.set_xscale("log")
            time_ax.set_yscale("log")
            plain_log_ticks(time_ax)
        time_ax.set_xlim(low, high)
        time_ax.set_ylim(low, high)
        time_ax.set_aspect("equal", adjustable="box")
        time_ax.set_xlabel("measured epoch time (s)")
        time_ax.set_ylabel("predicted epoch time (s)")
        error = table["epoch_time_error"].abs().median()
        time_ax.set_title(f"epoch time: median |error| {100 * error:.1f} %")
        measured, predicted = table["measured_compute_utilization"], table["predicted_compute_utilization"]
        lo = max(0.0, math.floor(20 * min(measured.min(), predicted.min()) - 1) / 20)
        hi = min(1.0, math.ceil(20 * max(measured.max(), predicted.max()) + 0.5) / 20)
        grid = np.array([lo, hi])
        util_ax.plot(grid, grid, "k-", linewidth=0.8)
        util_ax.fill_between(grid, grid - 0.05, grid + 0.05, color="0.5", alpha=0.2, label="+-5 points")
        util_ax.set_xlim(lo, hi)
        util_ax.set_ylim(lo, hi)
        util_ax.set_xlabel("measured compute utilization")
        util_ax.set_ylabel("predicted compute utilization")
        points = table["utilization_error_points"].abs().median()
        util_ax.set_title(f"compute utilization: median |error| {points:.1f} points (axes zoomed to the data)")
        for ax in (time_ax, util_ax):
            ax.legend(loc="upper left")
        fig.suptitle(f"Pipeline simulator calibrated on each group's sync run, {len(table)} held-out runs")
        caption(fig, "none in the paper: the suite's validation of its pipeline simulator (SimPy) against the "
                     "measured pipeline of MariusGNN's design", Path(csv_path).name,
                "none per point (one measured warm epoch each; predictions are means over simulator seeds); the "
                "median errors' 95 % bootstrap intervals are in REPORT.md",
                load_note(table, lambda r: f"{r['dataset']}/{r['sampler']} {r['configuration']}"))
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- the claims
MIN_HELD_OUT = 3
"""Held-out runs (measured without load) the simulator claim needs before it can hold or fail."""


@claim("simulator-predicts", "The pipeline simulator predicts the real pipeline (epoch time within 10 %, "
       "compute utilization within 5 points)", ("pipeline_validation.csv",))
def simulator_predicts(results: Path) -> Finding:
    table = pd.read_csv(results / "pipeline_validation.csv")
    used, loaded = split_under_load(table)
    time_error = bootstrap_interval(used["epoch_time_error"].abs())
    points = bootstrap_interval(used["utilization_error_points"].abs())
    estimates = (Estimate("median |epoch time error|", time_error, "< 0.10"),
                 Estimate("median |utilization error| (points)", points, "< 5"))
    verdict = combine([below(time_error, 0.10, min_n=MIN_HELD_OUT), below(points, 5.0, min_n=MIN_HELD_OUT)])
    reason = f"{len(used)} held-out run(s); the claim needs {MIN_HELD_OUT}" if len(used) < MIN_HELD_OUT else ""
    measured = (f"median absolute error (bootstrap 95 % interval over {len(used)} held-out runs): epoch time "
                f"{percent(time_error)}, compute utilization {points.format(1)} points")
    summary_path = results / "pipeline_validation_summary.json"
    if summary_path.exists():
        speed = json.loads(summary_path.read_text()).get("simulator_speed") or {}
        if speed:
            measured += f"; {speed.get('batches', 0):,} batches simulated in {speed.get('wall_s', math.nan):.1f} s"
    excluded = load_exclusions(loaded, lambda r: f"{r['dataset']}/{r['sampler']} {r['configuration']}")
    return Finding(measured, "calibrated on each dataset x sampler's sync run, never on the predicted run",
                   verdict, estimates, reason=reason, excluded=excluded)


# ---------------------------------------------------------------------------------------------- the job
def _reproduce(mode: Mode, paths: Paths) -> None:
    # quick: shorter contention windows, one repeat, a shorter simulator speed test: about a minute
    run(mode=mode, runs=paths.runs / "pipeline" / "pipeline_speed", results=paths.results)


FIGURE = Figure(
    "pipeline_validation", "pipeline simulator: predicted vs measured epoch time and utilization; its projection "
    "on a GPU machine profile", _reproduce,
    ("pipeline_validation.csv", "pipeline_validation.png", "pipeline_validation_summary.json",
     "pipeline_validation_contention.json", "pipeline_projection.csv"),
    "about 12 minutes after the pipeline job (a contention microbenchmark of each calibration run's workload)",
    __name__, plots=(Plot("pipeline_validation", plot_pipeline_validation, "pipeline_validation.csv"),),
    claims=(simulator_predicts,),
    tables={"pipeline_validation.csv": TableSpec(("dataset", "sampler", "configuration")),
            "pipeline_projection.csv": TableSpec(("dataset", "sampler", "profile", "configuration"))})
"""The simulator-validation figure, registered in :data:`experiments.plugins.FIGURES`."""


if __name__ == "__main__":
    sys.exit(main())
