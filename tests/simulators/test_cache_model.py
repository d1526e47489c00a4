"""The cache simulator against measured runs: the feature-cache system records its lookups on a small planted-partition
store (800-byte rows, so rows straddle 4 KiB blocks), the simulator replays the trace under the same policy, budget,
merge gap and window, and every training epoch's and evaluation's hits, misses, rows, extents and bytes read equal the
run's records exactly; replays under other budgets behave as caches must."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simulators.cache_model import compare_budgets, main, simulate_cache
from suite.errors import ConfigError
from suite.recorder import read_records
from systems.feature_cache.feature_cache_system import FeatureCacheSystem
from systems.feature_cache.trace import TRACE_FILE, CacheTrace
from tests.support.graphs import planted_partition, write_node_store
from tests.support.in_memory import make_spec
from tests.support.systems import run_class

MEASURED = ("cache_hits", "cache_misses", "rows_read", "extents", "io_read_bytes")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    graph = planted_partition(num_nodes=600, num_classes=3, feature_dim=200, seed=1)
    return write_node_store(tmp_path_factory.mktemp("cache-model") / "store", graph.src, graph.dst, graph.features,
                            graph.labels, graph.splits, name="planted-wide")


def traced_run(store, out, options):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        spec = make_spec(system={"name": "feature_cache", "device": "cpu",
                                 "options": {"compute_threads": 1, "record_trace": True, **options}},
                         training={"epochs": 2, "batch_size": 64}, evaluation={"every": 1})
        outcome, recorder = run_class(FeatureCacheSystem, spec, store, out)
    finally:
        torch.set_num_threads(threads)
    return outcome, read_records(recorder.run_dir), CacheTrace.load(recorder.run_dir / TRACE_FILE)


@pytest.mark.parametrize("options", [
    {"policy": "belady", "cache_fraction": 0.2, "lookahead_batches": 3, "merge_gap_bytes": 0},
    {"policy": "s3fifo", "cache_fraction": 0.3},
    {"policy": "lru", "cache_fraction": 0.15, "merge_gap_bytes": 4096, "prefetch": False},
    {"policy": "static_degree", "cache_fraction": 0.25},
    {"policy": "none", "merge_gap_bytes": 0},
], ids=lambda o: o["policy"])
def test_the_replayed_trace_gives_the_measured_hits_and_bytes_exactly(store, tmp_path, options):
    outcome, records, trace = traced_run(store, tmp_path, options)
    epochs = [r for r in records if r["kind"] == "epoch"]
    passes = [r for r in records if r["kind"] == "pass_io"]
    assert len(epochs) == 2 and len(passes) == 3  # valid after each epoch, test at the end
    simulation = simulate_cache(trace)
    assert trace.segments == ("train:0", "eval:valid:1", "train:1", "eval:valid:2", "eval:test:2")
    for epoch, record in enumerate(epochs):
        simulated = simulation.segments[f"train:{epoch}"].as_dict()
        assert {key: simulated[key] for key in MEASURED} == {key: record[key] for key in MEASURED}
    for record, name in zip(passes, [name for name in trace.segments if name.startswith("eval:")], strict=True):
        assert record["pass"] == name.split(":")[1]
        simulated = simulation.segments[name].as_dict()
        assert {key: simulated[key] for key in MEASURED} == {key: record[key] for key in MEASURED}
    assert simulation.total().io_read_bytes == outcome.io_read_bytes
    assert epochs[0]["io_read_bytes"] > 0


def test_replays_under_other_budgets_and_policies_behave_as_a_cache_must(store, tmp_path):
    _, _, trace = traced_run(store, tmp_path, {"policy": "s3fifo", "cache_fraction": 0.25, "merge_gap_bytes": 0})
    rows = compare_budgets(trace, ["none", "lru", "s3fifo", "belady", "static_degree"], [0, 60, 300, 600])
    by = {(r["policy"], r["budget_rows"]): r for r in rows}
    assert by[("none", 0)]["train_hit_rate"] == 0.0
    assert all(by[("none", 0)]["train_bytes_per_epoch"] == by[(policy, 0)]["train_bytes_per_epoch"]
               for policy in ("lru", "s3fifo", "belady", "static_degree"))  # no slots: every policy reads all
    # LRU is a stack algorithm: a bigger cache holds what a smaller one holds, so it misses (and reads) less
    hits = [by[("lru", c)]["train_hit_rate"] for c in (0, 60, 300, 600)]
    bytes_read = [by[("lru", c)]["train_bytes_per_epoch"] for c in (0, 60, 300, 600)]
    assert hits == sorted(hits) and bytes_read == sorted(bytes_read, reverse=True) and hits[1] < hits[2]
    assert by[("static_degree", 600)]["train_hit_rate"] == 1.0  # every row pinned: read once, before epoch 0
    assert by[("static_degree", 600)]["train_bytes_per_epoch"] * 2 == trace.file_size


def test_a_bad_policy_or_trace_file_is_a_one_line_error(store, tmp_path, capsys):
    _, _, trace = traced_run(store, tmp_path, {"policy": "lru", "cache_fraction": 0.1})
    with pytest.raises(ConfigError, match="policy: unknown cache policy 'fifo'"):
        simulate_cache(trace, policy="fifo")
    bad = tmp_path / "bad.npz"
    np.savez(bad, rows=np.arange(3))
    assert main([str(bad)]) == 2
    assert "bad.npz: not a cache trace" in capsys.readouterr().err
