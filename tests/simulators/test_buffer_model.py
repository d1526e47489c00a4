"""Buffer/IO simulator: byte accounting on hand-checked plans, prefetch model vs SimPy, scale, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulators.buffer_model import (
    HYPERLINK_2012,
    DiskModel,
    StateCosts,
    compare_policies,
    epoch_time_prefetch,
    epoch_time_serial,
    main,
    simulate,
    simulate_prefetch_simpy,
    state_costs,
)
from suite.errors import ConfigError
from systems.disk.policies import PolicySpec, beta_swaps, make_plan


def test_beta_p4_c2_bytes_and_times_by_hand():
    """States (0,1) (0,2) (0,3) (1,3) (1,2) (3,2); partitions of 10 bytes; 1 edge/bucket of 1 byte."""
    plan = make_plan("beta", PolicySpec(4, 2), randomize=False)
    disk = DiskModel(partition_bytes=10, learnable=True, bucket_edges=1, edge_bytes=1, read_bandwidth=10,
                     write_bandwidth=5, compute_per_example_s=1.0)
    result = simulate(plan, disk)
    assert result.swaps == 5 and result.partitions_loaded == 7 and result.partitions_written == 7
    assert result.fill_bytes == 20 and result.swap_read_bytes == 50 and result.edge_bytes == 16
    assert result.eviction_write_bytes == 50 and result.flush_bytes == 20
    assert result.bytes_read == 86 and result.bytes_written == 70
    costs, _ = state_costs(plan, disk)
    examples = np.array([4, 3, 3, 2, 2, 2])  # buckets per state (1 edge each)
    assert np.allclose(costs.compute, examples)
    assert np.allclose(costs.read, (np.array([20, 10, 10, 10, 10, 10]) + examples) / 10)
    assert np.allclose(costs.write, np.array([0, 10, 10, 10, 10, 10]) / 5)
    assert costs.flush == 4
    assert result.epoch_time_serial_s == pytest.approx(8.6 + 10 + 16 + 4)
    assert result.epoch_time_prefetch_s < result.epoch_time_serial_s
    # features (read-only) are never written
    frozen = simulate(plan, DiskModel(partition_bytes=10, learnable=False, read_bandwidth=10, write_bandwidth=5))
    assert frozen.bytes_written == 0 and frozen.partitions_written == 0 and frozen.bytes_read == 70


def test_bytes_follow_the_transitions_for_unequal_partitions():
    """What a disk system executing the plan would read and write, summed transition by transition."""
    rng = np.random.default_rng(0)
    for name, r in (("beta", 1), ("comet", 2), ("random", 1)):
        plan = make_plan(name, PolicySpec(12, 4, fine_to_coarse_ratio=r), seed=4)
        sizes = rng.integers(1, 1000, 12).astype(float)
        read = written = 0.0
        for t in plan.iter_transitions():
            read += sizes[t.partitions_loaded].sum()
            written += sizes[t.partitions_evicted].sum()
        written += sizes[plan.state(plan.num_states - 1)].sum()
        result = simulate(plan, DiskModel(partition_bytes=sizes, edge_reads="none"))
        assert result.bytes_read == pytest.approx(read) and result.bytes_written == pytest.approx(written)
        assert result.swap_read_bytes == pytest.approx(read - sizes[plan.state(0)].sum())


def test_resident_edges_read_each_in_buffer_bucket_on_arrival():
    plan = make_plan("beta", PolicySpec(4, 2), randomize=False)
    scalar = simulate(plan, DiskModel(partition_bytes=0, bucket_edges=1, edge_bytes=1, edge_reads="resident"))
    assert scalar.edge_bytes == 4 + 5 * 3  # fill: 2x2 buckets; each swap: 2^2 - 1^2 new buckets
    matrix = simulate(plan, DiskModel(partition_bytes=0, bucket_edges=np.ones((4, 4)), edge_bytes=1,
                                      edge_reads="resident"))
    assert matrix.edge_bytes == scalar.edge_bytes


@pytest.mark.parametrize("shared", [True, False])
def test_prefetch_recurrence_equals_simpy(shared):
    rng = np.random.default_rng(1 if shared else 2)
    for _ in range(20):
        S = int(rng.integers(1, 40))
        costs = StateCosts(rng.random(S), rng.random(S) * 2, rng.random(S) * 1.5, float(rng.random()))
        assert epoch_time_prefetch(costs, shared) == pytest.approx(simulate_prefetch_simpy(costs, shared), abs=1e-9)
        assert epoch_time_prefetch(costs, shared) <= epoch_time_serial(costs) + 1e-12


def test_prefetch_hides_io_behind_compute():
    S = 10
    io_bound = StateCosts(np.full(S, 1.0), np.zeros(S), np.full(S, 0.1), 0.0)
    compute_bound = StateCosts(np.full(S, 0.1), np.zeros(S), np.full(S, 1.0), 0.0)
    assert epoch_time_prefetch(io_bound) == pytest.approx(S * 1.0 + 0.1)
    assert epoch_time_prefetch(compute_bound) == pytest.approx(0.1 + S * 1.0)


def test_node_classification_counts_training_nodes():
    parts = np.random.default_rng(0).integers(0, 8, 100)
    plan = make_plan("dispersed", PolicySpec(8, 4, task="node_classification", fine_to_coarse_ratio=2,
                                             train_partitions=parts), seed=1)
    result = simulate(plan, DiskModel(partition_bytes=5, learnable=False, compute_per_example_s=0.5))
    assert result.compute_time_s == pytest.approx(50.0)
    assert result.bytes_written == 0 and result.edge_bytes == 0


def test_compare_policies_small_scale():
    rows = compare_policies(["beta", "comet", "random"], 64, 8, HYPERLINK_2012.disk_model(64), ratio=2)
    by = {row["policy"]: row for row in rows}
    assert by["beta"]["swaps"] == beta_swaps(64, 8)
    assert by["comet"]["logical_partitions"] == 32
    assert by["random"]["bytes_read"] > by["beta"]["bytes_read"]
    total_edges_bytes = HYPERLINK_2012.num_edges * HYPERLINK_2012.edge_bytes
    for row in rows:
        assert row["edge_bytes"] == pytest.approx(total_edges_bytes)  # every bucket read once


def test_bad_disk_model():
    with pytest.raises(ConfigError, match="disk.edge_reads"):
        DiskModel(partition_bytes=1, edge_reads="some")
    with pytest.raises(ConfigError, match="disk.read_bandwidth"):
        DiskModel(partition_bytes=1, read_bandwidth=0)


def test_cli(capsys):
    assert main(["-p", "64", "-c", "8", "--policy", "beta", "comet", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["policy"] for row in rows] == ["beta", "comet"] and rows[0]["swaps"] == beta_swaps(64, 8)
    assert main(["-p", "64", "-c", "8", "--policy", "beta"]) == 0
    assert "beta" in capsys.readouterr().out
    assert main(["-p", "64", "-c", "8", "-l", "5"]) == 2
    assert "--logical" in capsys.readouterr().err


@pytest.mark.slow
def test_hyperlink_scale_in_seconds():
    import time

    started = time.perf_counter()
    rows = compare_policies(["beta", "comet", "random"], 8192, 1024, HYPERLINK_2012.disk_model(8192), ratio=16)
    assert time.perf_counter() - started < 60
    assert rows[0]["swaps"] == beta_swaps(8192, 1024)
