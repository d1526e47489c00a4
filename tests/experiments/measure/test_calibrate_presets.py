"""The calibrated presets land a features-only MLP and GraphSAGE near their real graphs' accuracies (issue 30),
and the calibration script's root search finds what it is asked to."""

from __future__ import annotations

import math

import pytest

from experiments.measure import calibrate_presets as calibration
from suite.data.synthetic import PRESETS, realized_homophily

TEST_NODES = {"arxiv-like": 20_000, "products-like": 60_000, "papers-like-s": 25_000}
"""At most the calibration's sizes (REDUCED_NODES): arxiv-like and papers-like-s at half, to keep the default check
within tens of seconds; products-like at its calibration size, as its 8 % training share leaves too few training
nodes below it (GraphSAGE 0.725 at 30,000 nodes)."""
TOLERANCE = 0.05
"""The calibration meets each target within 0.03 on the mean of seeds 0-2 at REDUCED_NODES; here one seed at up to
half that size adds the seed-to-seed spread (sample sd 0.01 to 0.02 at the calibration sizes; seed 0, the one
searched on, lies below the mean by about one sd) and the size effect (< 0.01: the MLP on arxiv-like moved 0.005
from 20,000 to 60,000 nodes)."""


@pytest.mark.parametrize("preset", [
    "arxiv-like",
    pytest.param("products-like", marks=pytest.mark.slow),
    pytest.param("papers-like-s", marks=pytest.mark.slow),
])
def test_preset_lands_both_accuracies_near_its_targets(preset, tmp_path):
    overrides = calibration.reduced_overrides(preset, TEST_NODES[preset])
    result = calibration.measure(preset, overrides, seeds=[0], out=tmp_path)
    targets = calibration.TARGETS[preset]
    assert result.mlp[0] == pytest.approx(targets.mlp, abs=TOLERANCE)
    assert result.graphsage[0] == pytest.approx(targets.graphsage, abs=TOLERANCE)


@pytest.mark.slow  # generates the full-size arxiv-like graph (10 s)
def test_reduced_size_keeps_the_preset_but_the_node_count():
    arxiv = PRESETS.get("arxiv-like")
    overrides = calibration.reduced_overrides("arxiv-like", 10_000)
    # all labeled: enough test nodes at any size that matters; the signal as it is, the homophily raised so that
    # the smaller graph keeps the full one's edge homophily (it loses more same-class edges as repeats)
    assert set(overrides) == {"num_nodes", "signal", "homophily"} and overrides["signal"] == arxiv.signal
    assert overrides["homophily"] > arxiv.homophily
    assert realized_homophily(arxiv.replace(**overrides)) == pytest.approx(realized_homophily(arxiv), abs=0.002)
    assert calibration.full_size_homophily("arxiv-like", overrides) == pytest.approx(arxiv.homophily, abs=0.002)
    papers = PRESETS.get("papers-like-s")
    overrides = calibration.reduced_overrides("papers-like-s", 50_000)
    reduced = papers.replace(**overrides)
    assert reduced.num_nodes * reduced.label_rate == pytest.approx(papers.num_nodes * papers.label_rate)
    assert (reduced.avg_degree, reduced.train_fraction, reduced.class_skew) == \
        (papers.avg_degree, papers.train_fraction, papers.class_skew)
    assert calibration.reduced_overrides("papers-like-s", 1_000)["label_rate"] == 1.0  # capped
    # products-like trains on 8 %: the reduced graph keeps MIN_TRAIN_NODES training nodes, the rest split as before
    products = PRESETS.get("products-like")
    reduced = products.replace(**calibration.reduced_overrides("products-like", 60_000))
    assert reduced.num_nodes * reduced.train_fraction == pytest.approx(calibration.MIN_TRAIN_NODES, rel=1e-4)
    assert reduced.valid_fraction / reduced.test_fraction == pytest.approx(
        products.valid_fraction / products.test_fraction, rel=1e-3)
    small = products.replace(**calibration.reduced_overrides("products-like", 10_000))
    assert small.train_fraction == calibration.MAX_TRAIN_SHARE


def test_epochs_give_the_training_steps():
    overrides = {"num_nodes": 20_000}
    train = 20_000 * PRESETS.get("arxiv-like").train_fraction
    epochs = calibration.epochs_for("arxiv-like", overrides)
    assert epochs == math.ceil(calibration.TRAINING_STEPS / math.ceil(train / calibration.BATCH_SIZE))
    assert calibration.epochs_for("arxiv-like", {"num_nodes": 10**6}) == calibration.MIN_EPOCHS


def test_find_knob_meets_the_target_of_an_increasing_function():
    calls = []

    def accuracy(x: float) -> float:
        calls.append(x)
        return 1 - math.exp(-x)  # concave: plain regula falsi would creep from one side

    value, reached, history = calibration.find_knob(accuracy, 0.1, 5.0, 0.7, tolerance=0.001, max_steps=12)
    assert reached == pytest.approx(0.7, abs=0.001)
    assert value == pytest.approx(-math.log(0.3), abs=0.01)
    assert [x for x, _ in history] == calls and len(calls) < 12


def test_find_knob_refuses_a_target_outside_the_bracket():
    with pytest.raises(ValueError, match="outside"):
        calibration.find_knob(lambda x: x, 0.2, 0.4, 0.9, tolerance=0.01)


def test_missed_targets_are_named():
    targets = calibration.TARGETS["arxiv-like"]
    near = calibration.Measurement("arxiv-like", {"num_nodes": 1}, (0, 1), mlp=(targets.mlp - 0.02,) * 2,
                                   graphsage=(targets.graphsage + 0.05, targets.graphsage + 0.03))
    assert near.misses() == ["graphsage"]
    assert near.mean("graphsage") == pytest.approx(targets.graphsage + 0.04)
