"""The disk-system epoch simulator validated on the disk experiments' own runs (issue 33, item 3).

Reads the run folders the ``disk_nc`` and ``disk_lp`` jobs recorded (no run is made): per dataset x task x encoder
the simulator (:mod:`simulators.disk_epoch_model`) is calibrated on the group's designated runs (the rule, fixed in
advance, is :func:`experiments.measure.disk_simulation.designated_calibration`'s) and predicts the warm epoch time of
every other disk run of the group (other seeds, policies, ``p`` and ``c``, prefetch off, the pipelined variant) from
its policy's plans and its store's sizes only (:func:`experiments.measure.disk_simulation.validate_recorded`).

Usage::

    python -m experiments.figures.disk_simulation [--runs DIR [DIR ...]] [--results DIR] [--no-plot]

Outputs: ``disk_simulation.csv`` (one row per disk run: measured and predicted warm epoch time, signed error,
planned and recorded bytes, the run-to-run deviation of its configuration's seeds, the calibration runs; the
calibration runs themselves and runs that could not be predicted keep a ``note``), ``disk_simulation_summary.csv``
(per task, over both and per group: median and 90th-percentile absolute error, mean signed error, 95 % bootstrap
intervals, beside the runs' own run-to-run spread and the simulator's speed), ``disk_simulation_costs.csv`` (the
fitted costs per group) and ``disk_simulation.png``; the claim ``disk-simulator-predicts``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from experiments.common import (RESULTS, Figure, JobFailed, Mode, Paths, Plot, add_common_options, cli, has_runs,
                                provenance)
from experiments.measure.disk_simulation import FULL_COMPUTE_RANK, validate_recorded
from experiments.compare import TableSpec
from experiments.report import Finding, claim, epoch_time_error_estimates, epoch_time_error_verdict, percent
from experiments.style import caption, save_figure, styled
from suite.results import export
from suite.stats import bootstrap_interval, error_summary

MIN_PREDICTED = 8
"""Predicted runs the claim needs before it decides anything."""
RUN_FOLDERS = ("disk", "disk_lp")
"""The folders (under a reproduction's ``runs``) of the jobs whose disk runs are predicted."""


def run(*, runs: Sequence[Path], results: Path = RESULTS, plot: bool = True) -> pd.DataFrame:
    """Validate the simulator on the disk runs recorded under ``runs`` (folders without runs are skipped); write
    the tables and the figure into ``results``; return the summary. Raises :class:`JobFailed` (status 2) when no
    folder holds a recorded run, saying which jobs to run first."""
    present = [Path(folder) for folder in runs if has_runs(Path(folder))]
    if not present:
        raise JobFailed(f"error: no recorded runs under {', '.join(str(f) for f in runs)}: run the disk_nc and "
                        "disk_lp jobs first", status=2)
    table, summary, costs = validate_recorded(present)
    # the simulation's commit (the recorded runs keep their own in their summaries): the REPORT's provenance reads it
    sha = provenance("git_sha")["git_sha"]
    table, summary, costs = (frame.assign(git_sha=sha) for frame in (table, summary, costs))
    results.mkdir(parents=True, exist_ok=True)
    export(table, results / "disk_simulation.csv")
    export(summary, results / "disk_simulation_summary.csv")
    export(costs, results / "disk_simulation_costs.csv")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary[["task", "runs", "median_abs_error", "p90_abs_error", "mean_error",
                       "median_abs_run_to_run"]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if plot:
        print(f"wrote {plot_disk_simulation(results / 'disk_simulation.csv', results / 'disk_simulation.png')}")
    return summary


def predicted_runs(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``disk_simulation.csv`` that carry a prediction (not the calibration runs, not the notes)."""
    return table[table["predicted_epoch_s"].notna() & table["error"].notna()]


def _describe(label: str, rows: pd.DataFrame) -> str:
    errors = error_summary(rows["error"])
    text = (f"{label} ({len(rows)} runs): median absolute {percent(errors['median_abs'])}, 90th percentile "
            f"{percent(errors['p90_abs'])}, mean signed {percent(errors['bias'])}")
    spread = rows["run_to_run"].abs().dropna() if "run_to_run" in rows else pd.Series(dtype=float)
    if len(spread) >= 2:
        text += f" (the runs' own run-to-run deviation: median {percent(bootstrap_interval(spread))})"
    return text


@claim("disk-simulator-predicts", "The disk-system simulator predicts a disk run's epoch time from its policy's "
       "plan, its store's sizes and the read and compute costs fitted on designated calibration runs (issue 33: "
       "median absolute error <= 5 %, 90th percentile <= 10 %, mean signed error within +-3 %)",
       ("disk_simulation.csv",))
def disk_simulator_predicts(results: Path) -> Finding:
    table = pd.read_csv(results / "disk_simulation.csv")
    used = predicted_runs(table)
    errors = error_summary(used["error"])
    parts = [_describe(task.replace("_", " "), rows) for task, rows in used.groupby("task", sort=True)]
    measured = "; ".join(parts) if parts else "no predicted run"
    if len(used) and "bytes_equal" in used:
        measured += f"; planned bytes equal the recorded bytes in {int(used['bytes_equal'].sum())} of {len(used)}"
    if "states_per_s" in used and used["states_per_s"].notna().any():
        measured += f"; {used['states_per_s'].median():,.0f} states simulated per second"
    ranks = used["calibration_compute_rank"] if "calibration_compute_rank" in used else pd.Series(dtype=float)
    deficient = int((ranks < FULL_COMPUTE_RANK).sum())
    if deficient:
        measured += (f"; {deficient} run(s) predicted from a calibration whose compute costs it cannot tell apart "
                     "(rank-deficient)")
    reason = f"{len(used)} predicted run(s); the claim needs {MIN_PREDICTED}" if len(used) < MIN_PREDICTED else ""
    calibrations = sorted(set(name.strip() for names in table.get("calibration_run", pd.Series(dtype=str)).dropna()
                              for name in str(names).split("+")))
    setting = ("disk runs of the disk_nc and disk_lp jobs, all tasks together; per dataset x task x encoder "
               f"calibrated on its designated run(s) ({len(calibrations)} in all, never predicted), every other disk "
               "run predicted from its plan and store sizes; warm epochs")
    return Finding(measured, setting, epoch_time_error_verdict(errors, MIN_PREDICTED),
                   epoch_time_error_estimates(errors), reason=reason)


# ---------------------------------------------------------------------------------------------- the figure
def plot_disk_simulation(csv_path: str | Path, out_png: str | Path) -> Path:
    """Predicted against measured warm epoch time of every predicted disk run, one panel per task, with the
    +-10 % band (log axes). Reads only ``csv_path``."""
    table = predicted_runs(pd.read_csv(csv_path))
    tasks = sorted(table["task"].unique()) or ["(none)"]
    with styled():
        fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 5.0), layout="constrained",
                                 squeeze=False)
        for ax, task in zip(axes[0], tasks):
            rows = table[table["task"] == task]
            for policy, group in rows.groupby("policy", sort=True):
                ax.plot(group["measured_epoch_s"], group["predicted_epoch_s"], "o", label=str(policy))
            if len(rows):
                low = min(rows["measured_epoch_s"].min(), rows["predicted_epoch_s"].min()) * 0.8
                high = max(rows["measured_epoch_s"].max(), rows["predicted_epoch_s"].max()) * 1.25
                line = np.array([low, high])
                ax.plot(line, line, "k-", linewidth=0.8)
                ax.fill_between(line, line * 0.9, line * 1.1, color="0.5", alpha=0.2, label="+-10 %")
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.legend(title="policy")
            ax.set_title(task.replace("_", " "))
            ax.set_xlabel("measured warm epoch time (s)")
            ax.set_ylabel("predicted (s)")
        fig.suptitle(f"Disk-system simulator on the disk experiments' runs, {len(table)} predicted runs")
        caption(fig, "no paper figure: the suite's disk-system simulator (issue 33) against its own runs",
                f"{Path(csv_path).name} (each group calibrated on its designated runs, which are never predicted)",
                "none: one point per run")
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- the job
def _reproduce(mode: Mode, paths: Paths) -> None:
    run(runs=[paths.runs / name for name in RUN_FOLDERS], results=paths.results)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, results=("--results",), plot=True)
    parser.add_argument("--runs", nargs="+", type=Path, default=[Path("out/disk"), Path("out/disk-lp")],
                        help="folders of recorded disk runs (default: %(default)s)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "disk_simulation")


FIGURE = Figure(
    "disk_simulation", "disk-system simulator: predicted vs measured epoch time of the disk experiments' runs",
    _reproduce, ("disk_simulation.csv", "disk_simulation_summary.csv", "disk_simulation_costs.csv",
                 "disk_simulation.png"),
    "under a minute after the disk_nc and disk_lp jobs (reads their runs; trains nothing)", __name__,
    plots=(Plot("disk_simulation", plot_disk_simulation, "disk_simulation.csv"),),
    claims=(disk_simulator_predicts,),
    tables={"disk_simulation.csv": TableSpec(("task", "run_id"))})
"""The disk-simulator figure, registered in :data:`experiments.plugins.FIGURES`."""


if __name__ == "__main__":
    sys.exit(main())
