"""Machine profiles and the dollar cost of runs, checked by hand."""

from __future__ import annotations

import dataclasses
import datetime
import math

import pytest

from suite.pricing import (
    AWS_PROFILES,
    MachineProfile,
    cost_per_epoch,
    cost_summary,
    cost_to_target,
    epochs_to_target,
    get_profile,
    run_cost_usd,
)
from suite.errors import ConfigError
from suite.registry import MACHINES

P3 = 3.06  # p3.2xlarge, $/h


def test_aws_profiles_are_registered_with_their_prices():
    expected = {"p3.2xlarge": 3.06, "p3.8xlarge": 12.24, "p3.16xlarge": 24.48, "g5.xlarge": 1.006,
                "p4d.24xlarge": 21.957642}
    for name, price in expected.items():
        profile = MACHINES.get(name)
        assert profile.name == name
        assert profile.hourly_usd == pytest.approx(price)
        assert profile.region == "us-east-1"
        assert "aws.amazon.com" in profile.price_source
        datetime.date.fromisoformat(profile.price_date)
        assert profile.gpus >= 1 and profile.gpu_model
    assert {p.name for p in AWS_PROFILES} == set(expected)
    # the P4d price changed in June 2025: the profile says so and gives the earlier price
    notes = MACHINES.get("p4d.24xlarge").notes
    assert "2025" in notes and "32.7726" in notes


def test_profile_shapes():
    p3 = MACHINES.get("p3.2xlarge")
    assert (p3.cpus, p3.memory_gib, p3.gpus) == (8, 61, 1)
    assert MACHINES.get("p3.8xlarge").gpus == 4
    assert MACHINES.get("p3.16xlarge").gpus == 8
    assert MACHINES.get("p4d.24xlarge").gpus == 8


def test_local_profile_is_user_priced():
    local = MACHINES.get("local")
    assert local.hourly_usd is None
    assert local.region is None
    assert local.cpus >= 1
    assert run_cost_usd("local", 3600) is None
    assert cost_per_epoch("local", [10.0]) is None
    assert run_cost_usd("local", 1800, hourly_usd=0.5) == pytest.approx(0.25)


def test_profiles_are_frozen_and_checked():
    profile = MACHINES.get("p3.2xlarge")
    with pytest.raises(dataclasses.FrozenInstanceError):
        profile.hourly_usd = 1.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="hourly_usd"):
        MachineProfile("bad", -1.0, "x", "2026-01-01", 1, 1.0, 0, None, None, "")
    assert profile.to_dict()["hourly_usd"] == P3


def test_run_cost_by_hand():
    p3 = get_profile("p3.2xlarge")
    assert run_cost_usd(p3, 30.0) == pytest.approx(30 / 3600 * P3)
    assert run_cost_usd("p3.2xlarge", 3 * 10.0) == pytest.approx(3 * 10 / 3600 * P3)
    assert run_cost_usd("p3.2xlarge", 0.0) == 0.0
    # an explicit hourly price overrides the profile's
    assert run_cost_usd("p3.2xlarge", 3600, hourly_usd=1.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="seconds"):
        run_cost_usd("p3.2xlarge", -1.0)
    with pytest.raises(ValueError, match="seconds"):
        run_cost_usd("p3.2xlarge", math.nan)


def test_unknown_profile_names_the_known_ones():
    with pytest.raises(ConfigError, match="unknown machine profile 'p9.huge'.*p3.2xlarge"):
        run_cost_usd("p9.huge", 1.0)


def test_cost_per_epoch_by_hand():
    assert cost_per_epoch("p3.2xlarge", [10.0, 10.0, 10.0]) == pytest.approx(10 / 3600 * P3)
    assert cost_per_epoch("p3.2xlarge", [10.0, 20.0, 30.0]) == pytest.approx(20 / 3600 * P3)
    assert cost_per_epoch("p3.2xlarge", []) is None
    # the epochs together cost the run's training time
    epochs = [10.0, 10.0, 10.0]
    assert cost_per_epoch("p3.2xlarge", epochs) * len(epochs) == pytest.approx(3 * 10 / 3600 * P3)


def test_cost_to_target_reached_at_the_second_validation():
    epoch_times = [10.0, 20.0, 30.0, 40.0]
    curve = [(0, 0.50), (1, 0.70), (2, 0.80), (3, 0.75)]
    assert epochs_to_target(curve, 0.70) == 2
    assert cost_to_target("p3.2xlarge", epoch_times, curve, 0.70) == pytest.approx((10 + 20) / 3600 * P3)
    assert cost_to_target("p3.2xlarge", epoch_times, curve, 0.79) == pytest.approx((10 + 20 + 30) / 3600 * P3)


def test_cost_to_target_with_sparse_validation():
    # evaluation.every = 2: validations after epochs 1 and 3 (numbered from 0)
    epoch_times = [10.0, 10.0, 10.0, 10.0]
    curve = [(1, 0.6), (3, 0.9)]
    assert cost_to_target("p3.2xlarge", epoch_times, curve, 0.85) == pytest.approx(40 / 3600 * P3)


def test_cost_to_target_never_reached_or_no_target():
    epoch_times = [10.0, 10.0]
    curve = [(0, 0.5), (1, 0.6)]
    assert cost_to_target("p3.2xlarge", epoch_times, curve, 0.9) is None
    assert cost_to_target("p3.2xlarge", epoch_times, curve, None) is None
    assert cost_to_target("p3.2xlarge", epoch_times, [], 0.1) is None
    # a missing or NaN metric never reaches the target
    assert cost_to_target("p3.2xlarge", epoch_times, [(0, None), (1, math.nan)], 0.0) is None
    # the target reached, but no price known
    assert cost_to_target("local", epoch_times, curve, 0.5) is None
    assert cost_to_target("local", epoch_times, curve, 0.5, hourly_usd=3.6) == pytest.approx(0.01)


def test_cost_to_target_rejects_a_curve_beyond_the_epochs():
    with pytest.raises(ValueError, match="epoch 4"):
        cost_to_target("p3.2xlarge", [1.0], [(4, 0.9)], 0.5)


def test_cost_summary_for_the_runner():
    summary = cost_summary("p3.2xlarge", None, 40.0, [10.0, 10.0, 10.0], [(0, 0.5), (1, 0.8), (2, 0.9)], 0.8)
    profile = MACHINES.get("p3.2xlarge")
    assert summary == {
        "profile": "p3.2xlarge",
        "hourly_usd": P3,
        "price_source": profile.price_source,
        "price_date": profile.price_date,
        "run": pytest.approx(40 / 3600 * P3),
        "per_epoch": pytest.approx(10 / 3600 * P3),
        "to_target": pytest.approx(20 / 3600 * P3),
        "target": 0.8,
        "epochs_to_target": 2,
    }


def test_cost_summary_local_with_and_without_price():
    unpriced = cost_summary("local", None, 100.0, [50.0], [(0, 0.9)], 0.5)
    assert unpriced["hourly_usd"] is None
    assert unpriced["run"] is None and unpriced["per_epoch"] is None and unpriced["to_target"] is None
    assert unpriced["epochs_to_target"] == 1  # reached, just not priced

    priced = cost_summary("local", 0.72, 100.0, [50.0], [(0, 0.9)], 0.5)
    assert priced["hourly_usd"] == 0.72
    assert priced["price_source"] == "machine.hourly_usd"
    assert priced["price_date"] is None
    assert priced["run"] == pytest.approx(100 / 3600 * 0.72)
    assert priced["per_epoch"] == pytest.approx(50 / 3600 * 0.72)
    assert priced["to_target"] == pytest.approx(50 / 3600 * 0.72)


def test_cost_summary_without_target_or_epochs():
    summary = cost_summary("g5.xlarge", None, 36.0, [], [], None)
    assert summary["run"] == pytest.approx(0.01 * 1.006)
    assert summary["per_epoch"] is None
    assert summary["to_target"] is None and summary["epochs_to_target"] is None


def test_time_to_target_counts_the_training_epochs_before_the_first_validation_at_the_target():
    from suite.pricing import time_to_target

    curve = [(0, 0.5), (1, None), (2, 0.71), (3, 0.69), (4, 0.8)]
    times = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert time_to_target(times, curve, 0.7) == {"target": 0.7, "reached": True, "epochs": 3, "train_s": 6.0}
    assert time_to_target(times, curve, 0.5)["train_s"] == 1.0  # reached at the first validation
    assert time_to_target(times, curve, 0.9) == {"target": 0.9, "reached": False, "epochs": None, "train_s": None}
    assert time_to_target(times, curve, None) is None
    assert time_to_target(times[:2], curve, 0.7)["reached"] is False  # no time recorded for that epoch
