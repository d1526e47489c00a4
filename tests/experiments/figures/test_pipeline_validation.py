"""The pipeline simulator's validation (experiments/figures/pipeline_validation.py): predictions with and without a
contention table, and the leave-one-out cross-check."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulators.contention_model import Contention, ContentionTable

SLOW = ContentionTable({(True, 1): {"compute": 0.5, "load": 0.8}, (True, 2): {"compute": 0.25, "load": 0.5},
                        (False, 3): {"load": 0.9}})


def _measured_table(run_dir, epochs):
    """A measured table like experiments/figures/pipeline_speed.py's: the sync run and three 'other' runs (the same folder)."""
    import pandas as pd

    rows = [{"system": "pipelined", "dataset": "d", "sampler": "s", "configuration": "sync", "run_dir": run_dir,
             "run_id": "sync", "epoch_time_s": 1.0, "compute_utilization": 0.9, "bottleneck_stage": "compute",
             "staleness_max": 0}]
    rows += [{**rows[0], "configuration": f"c{i}", "run_id": f"r{i}", "epoch_time_s": epoch}
             for i, epoch in enumerate(epochs)]
    return pd.DataFrame(rows)


def test_validation_predicts_with_and_without_the_table_and_says_which(sync_pipelined_run):
    from experiments.figures.pipeline_validation import predict

    _, run_dir = sync_pipelined_run
    measured = _measured_table(run_dir, [1.0, 1.0, 1.0])
    contention = Contention(tables={"thread": SLOW}, cores=1, compute_cores=1, provenance={"measured_at": "t"})
    table = predict(measured, 1, {Path(run_dir).name: contention})
    assert len(table) == 3 and table["contention"].str.contains("microbenchmark").all()
    assert {"predicted_epoch_time_s_max_min", "epoch_time_error_max_min"} <= set(table.columns)
    plain = predict(measured, 1)
    assert (plain["contention"] == "none (max-min sharing only)").all()
    assert plain["predicted_epoch_time_s"].tolist() == plain["predicted_epoch_time_s_max_min"].tolist()


def test_contention_is_measured_once_per_workload_and_shared_by_its_seeds(sync_pipelined_run, tmp_path,
                                                                           monkeypatch):
    import shutil

    import pandas as pd

    from experiments.figures import pipeline_validation

    _, run_dir = sync_pipelined_run
    rows = []
    for sampler in ("naive", "dense"):
        for seed in (0, 1):  # each seed's sync run is a calibration run of its own folder
            calibration = tmp_path / f"sync-{sampler}-s{seed}"
            shutil.copytree(run_dir, calibration)
            base = {"system": "pipelined", "dataset": "d", "sampler": sampler, "seed": seed, "run_id": calibration.name}
            rows += [{**base, "configuration": "sync", "run_dir": str(calibration)},
                     {**base, "configuration": "other", "run_dir": str(calibration)}]
    measured_for = []

    def benchmark(calibration_dir, **options):  # the microbenchmark: tests/experiments/measure/test_contention.py
        measured_for.append(Path(calibration_dir).name)
        return Contention(tables={"thread": SLOW}, cores=1, compute_cores=1, provenance={"run": calibration_dir})

    monkeypatch.setattr(pipeline_validation, "measure_for_run", benchmark)
    tables = pipeline_validation.measure_contention_tables(pd.DataFrame(rows))
    assert measured_for == ["sync-dense-s0", "sync-naive-s0"]
    assert set(tables) == {"sync-dense-s0", "sync-dense-s1", "sync-naive-s0", "sync-naive-s1"}
    assert tables["sync-naive-s1"] is tables["sync-naive-s0"] and tables["sync-dense-s1"] is tables["sync-dense-s0"]
    assert tables["sync-naive-s0"] is not tables["sync-dense-s0"]


def test_leave_one_out_never_uses_the_predicted_run(sync_pipelined_run):
    from experiments.figures.pipeline_validation import predict_leave_one_out

    _, run_dir = sync_pipelined_run
    grid = (1.0, 0.5, 0.25)
    normal = predict_leave_one_out(_measured_table(run_dir, [1.0, 1.2, 0.9]), 1, grid)
    # Run r0's measurement changed wildly: the factor chosen for r0 (from r1 and r2) does not change.
    changed = predict_leave_one_out(_measured_table(run_dir, [1000.0, 1.2, 0.9]), 1, grid)
    assert normal["contention"].str.startswith("leave-one-out").all()
    assert changed.loc[0, "contention"] == normal.loc[0, "contention"]
    assert changed.loc[0, "predicted_epoch_time_s"] == normal.loc[0, "predicted_epoch_time_s"]


def test_validation_compares_every_stage_of_every_predicted_run(sync_pipelined_run):
    from experiments.figures.pipeline_validation import predict_with_stages

    _, run_dir = sync_pipelined_run
    table, stages = predict_with_stages(_measured_table(run_dir, [1.0, 1.0]), 1)
    assert len(stages) == 2 * 3 and set(stages["stage"]) == {"load", "transfer", "compute"}
    # the run itself measured (the same folder): its measured busy time is its recorded warm epoch's
    assert (stages["measured_busy_s"] > 0).any() and stages["simulated_busy_s"].notna().all()
    assert table["repeats"].tolist() == [1, 1] and table["run_to_run_deviation"].isna().all()


# ---------------------------------------------------------------------------------------------- the diagnosis
TWO_BATCHES = [  # load then compute; batch 1 waits 0.5 s for compute while batch 0 computes
    {"admitted": 0.0, "load_start": 0.0, "load_end": 1.0, "compute_start": 1.0, "compute_end": 3.0},
    {"admitted": 0.0, "load_start": 0.25, "load_end": 2.5, "compute_start": 3.0, "compute_end": 5.0},
]


def test_stage_times_by_hand():
    from experiments.figures.pipeline_validation import stage_times

    times = stage_times(TWO_BATCHES, ("load", "compute"))
    assert times == {"load": {"busy": 3.25, "wait": 0.25}, "compute": {"busy": 4.0, "wait": 0.5}}


def test_stage_diagnosis_by_hand():
    from experiments.figures.pipeline_validation import stage_diagnosis

    # two simulator seeds: compute 10 % and 30 % slower, no waits; their mean is compared
    def scaled(factor):
        return [{**b, "load_start": b["load_start"], "compute_end": b["compute_start"] + factor * 2.0}
                for b in TWO_BATCHES]

    rows = {r["stage"]: r for r in stage_diagnosis(TWO_BATCHES, [scaled(1.1), scaled(1.3)], epoch_time_s=5.0)
            if r["stage"] in ("compute",)}
    compute = rows["compute"]
    assert compute["measured_busy_s"] == 4.0 and compute["simulated_busy_s"] == pytest.approx(4.8)
    assert compute["busy_error"] == pytest.approx(0.2)
    assert compute["wait_error_of_epoch"] == pytest.approx(0.0)  # same starts: the same waits


def test_stage_bias_separates_the_mean_from_the_spread():
    import pandas as pd

    from experiments.figures.pipeline_validation import stage_bias

    stages = pd.DataFrame({"stage": ["compute"] * 3 + ["load"] * 3, "busy_error": [0.1, 0.2, 0.3, -0.1, 0.1, 0.0],
                           "wait_error_of_epoch": [0.0, 0.0, 0.0, 0.01, 0.03, 0.02]})
    bias = stage_bias(stages).set_index("stage")
    assert bias.loc["compute", "busy_bias"] == pytest.approx(0.2)
    assert bias.loc["compute", "busy_spread"] == pytest.approx(0.1)
    assert bias.loc["load", "busy_bias"] == pytest.approx(0.0) and bias.loc["load", "busy_spread"] == pytest.approx(0.1)
    assert bias.loc["load", "wait_bias_of_epoch"] == pytest.approx(0.02)


def test_run_to_run_deviation_by_hand():
    import pandas as pd

    from experiments.figures.pipeline_validation import run_to_run_deviation

    table = pd.DataFrame({"dataset": "d", "sampler": ["s", "s", "s", "t"], "configuration": ["a", "a", "b", "a"],
                          "measured_epoch_time_s": [9.0, 11.0, 4.0, 7.0]})
    repeats, deviation = run_to_run_deviation(table)
    assert repeats.tolist() == [2, 2, 1, 1]
    assert deviation[:2].tolist() == pytest.approx([0.1, 0.1]) and deviation[2:].isna().all()


def test_error_summary_by_hand():
    from experiments.figures.pipeline_validation import error_summary

    summary = error_summary([0.1, -0.1, 0.2, 0.0, float("nan")])
    assert summary["median_abs"].estimate == pytest.approx(0.1)
    assert summary["bias"].estimate == pytest.approx(0.05)
    assert summary["p90_abs"].estimate == pytest.approx(0.17)  # |e| = 0, .1, .1, .2: 90th percentile
    assert summary["spread"].n == 4


@pytest.mark.parametrize("errors, points, verdict", [
    pytest.param([0.02, -0.03, 0.04, 0.01, -0.02, 0.015, -0.01, 0.0], [1.0] * 8, "holds", id="all-goals-met"),
    pytest.param([0.035, 0.04, 0.045, 0.04, 0.038, 0.042, 0.036, 0.044], [1.0] * 8, "does not hold",
                 id="small-but-biased"),
    pytest.param([0.01, -0.01] * 15 + [0.2, -0.2] * 6, [1.0] * 42, "does not hold", id="p90-too-wide"),
    pytest.param([0.03, -0.04, 0.05, -0.06, 0.07, -0.03, 0.04, -0.05, 0.06, -0.12], [1.0] * 10, "inconclusive",
                 id="median-and-p90-straddle"),
    pytest.param([0.02, -0.03, 0.04, 0.01, -0.02, 0.015, -0.01, 0.0], [10.0, 12.0] * 4, "does not hold",
                 id="utilization-off"),
    pytest.param([0.01, -0.01], [1.0, 1.0], "inconclusive", id="too-few-runs"),
])
def test_simulator_verdict_for_each_outcome(errors, points, verdict):
    from experiments.figures.pipeline_validation import error_summary, simulator_verdict
    from suite.stats import bootstrap_interval

    assert simulator_verdict(error_summary(errors), bootstrap_interval(points), min_n=3) == verdict


def test_configuration_table_by_hand():
    import pandas as pd

    from experiments.figures.pipeline_validation import configuration_table, run_to_run_deviation

    # configuration a: measured 9 and 11 (mean 10), predicted 10.5 and 11.5 (mean 11): errors of the runs +1/6 and
    # +1/22, of the means +0.1; b: one run, measured 4, predicted 3
    table = pd.DataFrame({"dataset": "d", "sampler": "s", "configuration": ["a", "a", "b"], "seed": [0, 1, 0],
                          "measured_epoch_time_s": [9.0, 11.0, 4.0], "predicted_epoch_time_s": [10.5, 11.5, 3.0]})
    table["epoch_time_error"] = (table["predicted_epoch_time_s"] - table["measured_epoch_time_s"]) \
        / table["measured_epoch_time_s"]
    table["repeats"], table["run_to_run_deviation"] = run_to_run_deviation(table)
    stages = pd.DataFrame({"dataset": "d", "sampler": "s", "configuration": ["a", "a", "a", "b"],
                           "stage": ["compute", "compute", "load", "compute"], "busy_error": [0.1, 0.3, -0.2, 0.5]})
    rows = configuration_table(table, stages).set_index("configuration")
    assert rows.loc["a", "repeats"] == 2 and rows.loc["b", "repeats"] == 1
    assert rows.loc["a", "error_of_means"] == pytest.approx(0.1)
    assert rows.loc["a", "mean_signed_error"] == pytest.approx((1 / 6 + 1 / 22) / 2)
    assert rows.loc["a", "run_to_run_deviation"] == pytest.approx(0.1)
    assert rows.loc["b", "error_of_means"] == pytest.approx(-0.25) and pd.isna(rows.loc["b", "run_to_run_deviation"])
    assert rows.loc["a", "busy_error_compute"] == pytest.approx(0.2)
    assert rows.loc["a", "busy_error_load"] == pytest.approx(-0.2) and pd.isna(rows.loc["b", "busy_error_load"])
