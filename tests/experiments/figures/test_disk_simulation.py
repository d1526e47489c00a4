"""The disk simulator's validation figure (experiments/figures/disk_simulation.py): its claim in each outcome, the
rows it counts, and a job without recorded runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from experiments.common import JobFailed
from suite.stats import HOLDS, INCONCLUSIVE

FAILS = "does not hold"


def write_table(folder: Path, errors: list[float], task: str = "node_classification") -> Path:
    """``disk_simulation.csv`` as :func:`experiments.measure.disk_simulation.validate_recorded` writes it: one
    predicted run per error (measured 1 s), a calibration run (no prediction, a note) and two seeds per
    configuration."""
    rows = [{"task": task, "run_id": f"run-{i}", "policy": "sequential", "num_partitions": 16,
             "buffer_capacity": 4 + i // 2, "seed": i % 2, "measured_epoch_s": 1.0, "predicted_epoch_s": 1.0 + error,
             "error": error, "bytes_equal": True, "run_to_run": 0.02, "states_per_s": 1e5,
             "calibration_run": "cal-0", "note": None} for i, error in enumerate(errors)]
    rows.append({"task": task, "run_id": "cal-0", "policy": "sequential", "num_partitions": 16, "buffer_capacity": 4,
                 "seed": 0, "measured_epoch_s": 1.0, "predicted_epoch_s": None, "error": None,
                 "bytes_equal": None, "run_to_run": None, "states_per_s": None, "calibration_run": None,
                 "note": "calibration run"})
    pd.DataFrame(rows).to_csv(folder / "disk_simulation.csv", index=False)
    return folder


@pytest.mark.parametrize("errors, verdict", [
    pytest.param([0.01, -0.02, 0.015, -0.01, 0.0, 0.02, -0.015, 0.01, 0.005, -0.005], HOLDS, id="within-the-goals"),
    pytest.param([0.3, 0.5, 0.4, 0.35, 0.6, 0.45, 0.3, 0.5], FAILS, id="thirty-percent-too-slow"),
    pytest.param([0.03, -0.04, 0.05, -0.06, 0.07, -0.03, 0.04, -0.05, 0.06, -0.12], INCONCLUSIVE,
                 id="median-and-p90-straddle"),
    pytest.param([0.01, -0.01, 0.0], INCONCLUSIVE, id="too-few-runs"),
])
def test_disk_simulator_claim_for_each_outcome(tmp_path, errors, verdict):
    from experiments.figures.disk_simulation import disk_simulator_predicts

    finding = disk_simulator_predicts.evaluate(write_table(tmp_path, errors))
    assert finding.verdict == verdict
    assert f"node classification ({len(errors)} runs)" in finding.measured  # the calibration run is not counted


def test_claim_counts_bytes_and_is_not_testable_without_the_table(tmp_path):
    from experiments.figures.disk_simulation import disk_simulator_predicts

    assert disk_simulator_predicts.evaluate(tmp_path).verdict == "not testable here"
    finding = disk_simulator_predicts.evaluate(write_table(tmp_path, [0.01] * 8))
    assert "planned bytes equal the recorded bytes in 8 of 8" in finding.measured


def test_job_without_recorded_runs_says_what_to_run_first(tmp_path):
    from experiments.figures.disk_simulation import run

    (tmp_path / "disk").mkdir()
    with pytest.raises(JobFailed, match="run the disk_nc and disk_lp jobs first") as failed:
        run(runs=[tmp_path / "disk", tmp_path / "missing"], results=tmp_path / "results")
    assert failed.value.status == 2 and not (tmp_path / "results").exists()


def test_plot_draws_one_panel_per_task(tmp_path):
    from experiments.figures.disk_simulation import plot_disk_simulation

    write_table(tmp_path, [0.05, -0.05] * 4)
    png = plot_disk_simulation(tmp_path / "disk_simulation.csv", tmp_path / "disk_simulation.png")
    assert png.stat().st_size > 10_000
