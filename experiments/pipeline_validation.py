"""Validate the pipeline simulator: calibrate on one measured run, predict other configurations, compare.

Usage::

    python experiments/pipeline_validation.py [--runs out/pipeline/pipeline_speed] [--results results]
        [--seeds 3] [--speed-batches 100000] [--no-plot]

Reads the runs of ``experiments/pipeline_speed.yaml`` (run ``python experiments/pipeline.py`` first). For every
dataset x sampler, the ``sync`` run is the calibration (its warm epoch's per-batch stage times, without overlap,
are the stages' work; :mod:`simulators.calibrate`); each *other* pipelined configuration of that dataset and
sampler (worker counts, queue sizes, staleness bounds, loader threads or processes) is simulated from it, with
the machine's cores shared by loaders and compute, over as many batches as its measured warm epoch, averaged over
``--seeds`` draws, and compared with its measurement. No run is ever predicted from its own calibration.

Outputs: ``results/pipeline_validation.csv`` (one row per predicted run: measured and predicted epoch time and
compute utilization, relative and absolute errors), ``results/pipeline_validation.png`` and, on stdout, the
median absolute errors and the simulator's speed (one epoch of ``--speed-batches`` batches of the calibrated
model, timed here).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from experiments.pipeline import speed_table  # noqa: E402
from simulators.calibrate import calibrate, model_for, summary_of  # noqa: E402
from simulators.pipeline import simulate  # noqa: E402
from suite.config import read_yaml, spec_from_dict  # noqa: E402
from suite.io import atomic_write_json  # noqa: E402
from suite.results import export  # noqa: E402
from systems.pipelined import PipelineOptions  # noqa: E402


def _options(run_dir: str) -> PipelineOptions:
    spec = spec_from_dict(read_yaml(Path(run_dir) / "config.yaml"))
    return PipelineOptions.model_validate(spec.system.options).effective()


def predict(measured: pd.DataFrame, seeds: int) -> pd.DataFrame:
    """Per dataset x sampler: calibrate on the sync run, predict every other pipelined run of the group."""
    rows = []
    pipelined = measured[measured["system"] == "pipelined"]
    for (dataset, sampler), group in pipelined.groupby(["dataset", "sampler"]):
        sync = group[group["configuration"] == "sync"]
        if sync.empty:
            continue
        calibration_dir = sync.iloc[0]["run_dir"]
        calibration = calibrate(calibration_dir)
        for run in group[group["configuration"] != "sync"].itertuples():
            model = model_for(_options(run.run_dir), calibration)
            batches = len(calibrate(run.run_dir).services["load"])
            predictions = [summary_of(simulate(model, batches, seed=seed)) for seed in range(seeds)]
            epoch = float(np.mean([p["epoch_time_s"] for p in predictions]))
            utilization = float(np.mean([p["compute_utilization"] for p in predictions]))
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
            })
    return pd.DataFrame(rows)


def simulator_speed(measured: pd.DataFrame, batches: int) -> dict:
    """Wall time of simulating one epoch of ``batches`` batches with Marius's default options."""
    sync = measured[(measured["system"] == "pipelined") & (measured["configuration"] == "sync")]
    model = model_for(PipelineOptions().effective(), calibrate(sync.iloc[0]["run_dir"]))
    started = time.perf_counter()
    trace = simulate(model, batches, seed=0)
    return {"batches": batches, "wall_s": time.perf_counter() - started, "simulated_epoch_s": trace.wall_s}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=REPO_ROOT / "out" / "pipeline" / "pipeline_speed")
    parser.add_argument("--results", type=Path, default=REPO_ROOT / "results")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--speed-batches", type=int, default=100_000)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    measured = speed_table(args.runs)
    measured["run_dir"] = [str(args.runs / run_id) for run_id in measured["run_id"]]
    table = predict(measured, args.seeds)
    export(table, args.results / "pipeline_validation.csv")
    speed = simulator_speed(measured, args.speed_batches) if args.speed_batches else None
    summary = {
        "predictions": len(table),
        "median_abs_epoch_time_error": float(table["epoch_time_error"].abs().median()),
        "median_abs_utilization_error_points": float(table["utilization_error_points"].abs().median()),
        "simulator_speed": speed,
    }
    atomic_write_json(args.results / "pipeline_validation_summary.json", summary)
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(table[["dataset", "sampler", "configuration", "measured_epoch_time_s", "predicted_epoch_time_s",
                     "epoch_time_error", "measured_compute_utilization", "predicted_compute_utilization",
                     "utilization_error_points"]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(json.dumps(summary, indent=2))
    if not args.no_plot:
        from experiments.figures import plot_pipeline_validation

        png = plot_pipeline_validation(args.results / "pipeline_validation.csv",
                                       args.results / "pipeline_validation.png")
        print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
