"""The link-prediction specs validate, and experiments/figures/link_prediction_grid.py tabulates recorded runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch

from experiments.figures import link_prediction_grid
from suite.config import load_spec
from suite.grid import expand_grid
from suite.runner import run_spec

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments" / "specs"


@pytest.mark.parametrize("name", ["fb15k237_distmult", "fb15k237_complex", "fb15k237_graphsage_distmult",
                                  "link_prediction_synthetic"])
def test_specs_validate(name: str) -> None:
    spec = load_spec(EXPERIMENTS / f"{name}.yaml")
    assert spec.training.task == "link_prediction" and spec.model.decoder in ("distmult", "complex")


def test_pipelined_grid_is_sync_vs_bound_8() -> None:
    specs = expand_grid(EXPERIMENTS / "link_prediction_pipelined.yaml")
    assert [s.system.options for s in specs] == [{"sync": True}, {"staleness_bound": 8}]
    assert {s.model.decoder for s in specs} == {"distmult"} and {s.system.name for s in specs} == {"pipelined"}


def test_table_of_recorded_runs(tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        base = load_spec(EXPERIMENTS / "link_prediction_synthetic.yaml",
                         [f"dataset.cache_dir={tmp_path / 'data'}", "dataset.params.num_nodes=400",
                          "dataset.params.num_classes=4", "training.epochs=1", "training.batch_size=256"])
        for overrides in ({}, {"system": {"name": "pipelined", "options": {"staleness_bound": 4}}}):
            spec = base.model_copy(update={key: base.system.model_copy(update=value)
                                           for key, value in overrides.items()})
            run_spec(spec, tmp_path / "runs")
    finally:
        torch.set_num_threads(threads)
    link_prediction_grid.main(["--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "lp.csv")])
    table = pd.read_csv(tmp_path / "lp.csv")
    assert sorted(table["system"]) == ["in_memory", "pipelined"]
    assert table["test_mrr"].between(0, 1).all() and (table["test_mrr"] >= table["test_unfiltered_mrr"]).all()
    pipelined = table[table["system"] == "pipelined"].iloc[0]
    assert 0 <= pipelined["embedding_staleness_max"] < 4
