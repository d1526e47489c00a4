"""The feature-cache system against the in-memory one on a planted-partition store: the same batches, seed for seed
(roots, samples, feature rows), the same losses and test accuracy bit for bit (one compute thread each), with and
without the background load stage; its IO and cache measures are recorded and add up; bad options fail clearly."""

from __future__ import annotations

import math

import pytest
import torch

from suite.config import validate_system_options
from suite.errors import ConfigError
from suite.recorder import Recorder, read_records
from systems.feature_cache.feature_cache_system import FeatureCacheSystem, LookAhead
from systems.in_memory import InMemorySystem
from tests.support.in_memory import make_spec
from tests.support.systems import run_class

pytestmark = pytest.mark.usefixtures("one_thread")


def spec_of(system: str, options: dict | None = None, epochs: int = 2, seed: int = 0):
    return make_spec(system={"name": system, "device": "cpu", "options": {"compute_threads": 1, **(options or {})}},
                     training={"epochs": epochs, "batch_size": 64}, evaluation={"every": epochs},
                     seed=seed)


def test_batches_equal_the_in_memory_systems_seed_for_seed(easy_store, tmp_path):
    memory_spec = spec_of("in_memory")
    cached_spec = spec_of("feature_cache", {"policy": "belady", "cache_fraction": 0.2, "lookahead_batches": 3})
    memory = InMemorySystem(memory_spec, easy_store, torch.device("cpu"), Recorder(tmp_path, memory_spec, open=False))
    cached = FeatureCacheSystem(cached_spec, easy_store, torch.device("cpu"), Recorder(tmp_path, cached_spec,
                                                                                      open=False))
    memory.setup()
    cached.setup()
    try:
        for epoch in (0, 1):
            expected, got = memory.task.plan_epoch(epoch), cached.plan(epoch)
            assert len(expected) == len(got) > 1
            ahead = LookAhead(cached.task, got, 3)
            for mine, theirs in zip(expected, got):
                assert torch.equal(mine.roots, theirs.roots)
                memory.task.sample(mine)
                memory.task.gather(mine)
                cached._load(theirs, ahead, wanted=True)
                assert torch.equal(mine.sample.input_nodes, theirs.sample.input_nodes)
                for a, b in zip(mine.sample.blocks, theirs.sample.blocks, strict=True):
                    assert torch.equal(a.src_nodes, b.src_nodes) and torch.equal(a.edge_index, b.edge_index)
                assert torch.equal(mine.x, theirs.x) and torch.equal(mine.y, theirs.y)
    finally:
        cached.teardown()
        memory.teardown()


@pytest.mark.parametrize("options", [
    {"policy": "belady", "cache_fraction": 0.25, "lookahead_batches": 4},
    {"policy": "s3fifo", "cache_bytes": 20_000},
    {"policy": "lru", "prefetch": False},
    {"policy": "static_degree", "cache_fraction": 0.5},
    {"policy": "none", "direct_io": False, "merge_gap_bytes": 4096},
    {"policy": "s3fifo", "pack": True, "merge_gap_bytes": 0},
    {"policy": "belady", "pack": True, "prefetch": False, "lookahead_batches": 3},
], ids=lambda o: o["policy"] + ("-packed" if o.get("pack") else ""))
def test_training_gives_the_in_memory_losses_and_test_accuracy_bit_for_bit(easy_store, tmp_path, options):
    expected, _ = run_class(InMemorySystem, spec_of("in_memory"), easy_store, tmp_path / "memory")
    outcome, recorder = run_class(FeatureCacheSystem, spec_of("feature_cache", options), easy_store, tmp_path / "cache")
    assert [e.loss for e in outcome.epochs] == [e.loss for e in expected.epochs]
    assert outcome.test_metrics == expected.test_metrics and outcome.test_metrics["accuracy"] > 0.6
    assert outcome.valid_metrics == expected.valid_metrics
    epochs = [r for r in read_records(recorder.run_dir) if r["kind"] == "epoch"]
    summary = outcome.summary_extra["feature_cache"]
    row_bytes = easy_store.feature_dim * 4
    for record in epochs:
        assert record["policy"] == options["policy"]
        assert record["rows_read"] == record["cache_misses"] + record["fill_rows"]
        assert record["io_read_bytes"] >= record["rows_read"] * row_bytes
        assert math.isclose(record["hit_rate"], record["cache_hits"] / (record["cache_hits"] + record["cache_misses"]))
    total = sum(r["io_read_bytes"] + r.get("pack_read_bytes", 0) for r in epochs)
    assert outcome.io_read_bytes == total + summary["evaluation"]["io_read_bytes"]
    if options.get("pack"):  # each batch's distinct rows written once, in one stretch; the files gone after
        for record in epochs:
            assert record["pack_write_bytes"] >= record["packed_rows"] * row_bytes > 0
            assert record["pack_s"] > 0 and record["pack_read_bytes"] > 0
            assert record["extents"] == math.ceil(len(easy_store.split("train")) / 64)  # one read per batch
        assert summary["pack"]["pack_write_bytes"] == sum(r["pack_write_bytes"] for r in epochs)
        assert not (recorder.run_dir / "packed").exists()
    assert summary["train"]["cache_hits"] == sum(r["cache_hits"] for r in epochs)
    if options["policy"] == "none":
        assert summary["train"]["cache_hits"] == 0 and not summary["direct_io"]
    else:
        assert summary["train"]["hit_rate"] > 0 and summary["direct_io"]
        assert summary["cache_rows"] > 0
    passes = [r for r in read_records(recorder.run_dir) if r["kind"] == "pass_io"]
    assert {r["pass"] for r in passes} == {"valid", "test"}


def test_the_budget_is_cache_bytes_or_a_fraction_of_the_table(easy_store, tmp_path):
    row_bytes = easy_store.feature_dim * 4
    for options, rows in [({"cache_bytes": 10 * row_bytes + 1}, 10), ({"cache_fraction": 0.1}, 60), ({}, 150),
                          ({"cache_fraction": 1.0}, 600), ({"cache_bytes": 10**9}, 600)]:
        spec = spec_of("feature_cache", {"policy": "lru", **options})
        system = FeatureCacheSystem(spec, easy_store, torch.device("cpu"), Recorder(tmp_path, spec, open=False))
        system.setup()
        try:
            assert system.cache.capacity == rows, options
        finally:
            system.teardown()


@pytest.mark.parametrize("options, message", [
    ({"policy": "fifo"}, "system.options.policy: .*unknown cache policy 'fifo'"),
    ({"cache_bytes": 100, "cache_fraction": 0.5}, "system.options.cache_bytes: .*not both"),
    ({"cache_fraction": 1.5}, "system.options.cache_fraction"),
    ({"lookahead_batches": 0}, "system.options.lookahead_batches"),
    ({"cache_size": 3}, "system.options.cache_size"),
])
def test_bad_options_are_one_line_errors_naming_the_option(options, message):
    with pytest.raises(ConfigError, match=message):
        validate_system_options(spec_of("feature_cache", options))


def test_link_prediction_is_refused_by_name(tiny, tmp_path):
    spec = make_spec(system={"name": "feature_cache", "device": "cpu"}, training={"task": "link_prediction"})
    with pytest.raises(ConfigError, match="training.task: the feature_cache system runs node_classification only"):
        FeatureCacheSystem(spec, tiny, torch.device("cpu"), Recorder(tmp_path, spec, open=False))
