"""The work-depth and async-GNN experiment scripts in quick mode (tables and figures from the CSVs)."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.figures import async_gnn, work_depth


@pytest.mark.slow
def test_work_depth_quick(tmp_path):
    paths = work_depth.run(**vars(work_depth.parse_args(["--quick", "--out-dir", str(tmp_path), "--data-dir",
                                                         str(tmp_path / "none")])))
    fit = pd.read_csv(paths["fit"])
    assert fit["passed"].all()
    table = pd.read_csv(paths["table"])
    assert {"model", "forward_work", "iteration_depth_value", "git_sha", "seed"} <= set(table.columns)
    assert paths["figure"].stat().st_size > 1000


@pytest.mark.slow
def test_async_quick(tmp_path):
    paths = async_gnn.run(**vars(async_gnn.parse_args(["--quick", "--out-dir", str(tmp_path)])))
    modes = pd.read_csv(paths["modes"])
    assert list(modes["mode"]) == ["sync-sync", "async-sync", "sync-async", "async-async"]
    assert (modes["makespan_s"] <= modes["makespan_s"].iloc[0] + 1e-12).all()
    accuracy = pd.read_csv(paths["accuracy"])
    assert set(accuracy["staleness_bound"]) == {0, 2} and (accuracy["test_accuracy"] > 0.5).all()
    assert paths["tradeoff"].stat().st_size > 1000 and paths["gantt"].stat().st_size > 1000
