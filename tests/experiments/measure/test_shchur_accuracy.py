"""The Shchur accuracy table (experiments/measure/shchur_accuracy.py): grouping, mean and interval, the published
value and the 0.02 goal, checked by hand on made-up summaries; the grid file expands to 5 splits x 2 seeds."""

from __future__ import annotations

import math

import pytest

from experiments.measure.shchur_accuracy import DEFAULT_GRID, selected, table_rows
from suite.grid import expand_grid


def summary(graph: str, encoder: str, test: float, valid: float, status: str = "completed") -> dict:
    return {"status": status, "dataset": graph, "model": encoder, "restored_best": {"valid": valid},
            "metrics": {"test": {"accuracy": test}, "valid_curve": [{"epoch": 0, "accuracy": valid}]}}


def test_rows_hold_the_mean_its_interval_and_the_distance_to_the_published_value():
    summaries = [summary("coauthor-cs", "gcn", 0.90, 0.91), summary("coauthor-cs", "gcn", 0.88, 0.93),
                 summary("coauthor-cs", "gcn", 0.10, 0.10, status="failed"),
                 summary("amazon-computers", "graphsage", 0.79, 0.80)]
    rows = {(row["graph"], row["encoder"]): row for row in table_rows(summaries)}
    cs = rows[("coauthor-cs", "gcn")]
    assert cs["runs"] == 2 and cs["test"] == pytest.approx(0.89) and cs["valid"] == pytest.approx(0.92)
    # t interval of two values: mean +- t(0.975, 1) * sd / sqrt(2) = 0.89 +- 12.706 * 0.01
    assert cs["low"] == pytest.approx(0.89 - 12.7062 * 0.01, abs=1e-4)
    assert cs["difference"] == pytest.approx(-0.02) and cs["within"] is True
    amazon = rows[("amazon-computers", "graphsage")]
    assert amazon["difference"] == pytest.approx(-0.03) and amazon["within"] is False
    assert math.isnan(amazon["low"])  # one run: no interval


def test_the_grid_is_three_graphs_two_encoders_five_splits_two_seeds():
    specs = expand_grid(DEFAULT_GRID)
    assert len(specs) == 60 and len({spec.run_id for spec in specs}) == 60
    assert {spec.dataset.name for spec in specs} == {"amazon-computers", "coauthor-cs", "coauthor-physics"}
    assert all(spec.evaluation.restore_best for spec in specs)
    # chosen on validation: Amazon's binary features raw, the Coauthor counts row-normalised
    assert {(spec.dataset.name, spec.dataset.feature_normalization) for spec in specs} == {
        ("amazon-computers", "none"), ("coauthor-cs", "row"), ("coauthor-physics", "row")}
    chosen = selected(specs, ["coauthor-cs"], ["gcn"], [0, 1], [0])
    assert [(spec.dataset.split.seed, spec.seed) for spec in chosen] == [(0, 0), (1, 0)]
