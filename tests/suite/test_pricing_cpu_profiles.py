"""The CPU-only price profile (m6a.large) that prices runs measured on a machine without a GPU."""

from __future__ import annotations

import datetime

import pytest

from suite.pricing import AWS_PROFILES, CPU_PROFILES, cost_summary, run_cost_usd
from suite.registry import MACHINES


def test_m6a_large_is_registered_with_its_price_and_shape():
    profile = MACHINES.get("m6a.large")
    assert profile in CPU_PROFILES and profile not in AWS_PROFILES
    assert profile.hourly_usd == pytest.approx(0.0864)
    assert (profile.cpus, profile.memory_gib, profile.gpus, profile.gpu_model) == (2, 8, 0, None)
    assert profile.region == "us-east-1" and "aws.amazon.com" in profile.price_source
    datetime.date.fromisoformat(profile.price_date)
    assert "AMD EPYC" in profile.notes


def test_pricing_local_runs_as_m6a_large_by_hand():
    # 25 minutes at $0.0864/h = $0.036; a run summary says the price came from the spec
    assert run_cost_usd("m6a.large", 1500) == pytest.approx(0.036)
    assert run_cost_usd("local", 1500, hourly_usd=MACHINES.get("m6a.large").hourly_usd) == pytest.approx(0.036)
    summary = cost_summary("local", 0.0864, 1500.0, [600.0, 600.0], [(0, 0.4), (1, 0.7)], 0.6)
    assert summary["per_epoch"] == pytest.approx(0.0144)       # 600 s at $0.0864/h
    assert summary["to_target"] == pytest.approx(0.0288)       # both epochs
    assert summary["price_source"] == "machine.hourly_usd"
