"""The pipeline simulator's validation (experiments/figures/pipeline_validation.py): predictions with and without a
contention table, and the leave-one-out cross-check."""

from __future__ import annotations

from pathlib import Path

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
