"""The asv benchmarks import and run: every benchmark's setup and one call, on a tiny graph (seconds)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch

from benchmarks import bench_sampling
from suite.data.synthetic import PRESETS


@pytest.fixture(scope="module")
def tiny_graph():
    """The tiny preset's in-neighbour CSR, in place of the benchmark graph of ``setup_cache``."""
    return bench_sampling.make_graph(PRESETS.get("tiny").replace(num_relations=1, valid_edge_fraction=0.0,
                                                                 test_edge_fraction=0.0))


def benchmark_methods(cls: type) -> list[str]:
    return [name for name in dir(cls) if name.startswith(("time_", "track_"))]


def test_parameters_cover_both_samplers_and_layers():
    assert bench_sampling.Sampling.params == [["naive", "dense"], [1, 2, 3]]
    assert bench_sampling.Sampling.param_names == ["sampler", "num_layers"]
    assert set(benchmark_methods(bench_sampling.Sampling)) == {"time_sample", "track_sampled_edges_per_s"}
    assert bench_sampling.Sampling.track_sampled_edges_per_s.unit == "edges/s"
    assert len(bench_sampling.FANOUTS) >= max(bench_sampling.NUM_LAYERS)


@pytest.mark.parametrize("params", list(itertools.product(*bench_sampling.Sampling.params)))
def test_every_benchmark_runs(tiny_graph, params):
    bench = bench_sampling.Sampling()
    bench.setup(tiny_graph, *params)
    for name in benchmark_methods(bench_sampling.Sampling):
        result = getattr(bench, name)(tiny_graph, *params)
        if name.startswith("track_"):
            assert isinstance(result, float) and math.isfinite(result) and result > 0
        else:
            assert result is None


# --------------------------------------------------------------------------------- policies, store IO, simulators
def run_benchmark(cls: type, cache, params: tuple, instance_attributes: dict | None = None) -> dict[str, object]:
    """Run ``cls``'s setup, every ``time_*``/``track_*`` method once and its teardown, like asv does for one
    parameter combination; returns the ``track_*`` results by name."""
    bench = cls()
    for name, value in (instance_attributes or {}).items():
        setattr(bench, name, value)
    args = ((cache,) if cache is not None else ()) + tuple(params)
    tracked = {}
    for name in benchmark_methods(cls):
        if hasattr(bench, "setup"):
            bench.setup(*args)  # asv re-runs setup before every timed call
        try:
            result = getattr(bench, name)(*args)
        finally:
            if hasattr(bench, "teardown"):
                bench.teardown(*args)
        if name.startswith("track_"):
            assert isinstance(result, (int, float)) and math.isfinite(result) and result > 0, (name, result)
            tracked[name] = result
        else:
            assert result is None
    return tracked


def test_policy_benchmarks_declare_their_parameters():
    from benchmarks import bench_policies

    cls = bench_policies.PlanGeneration
    assert cls.params == [["beta", "comet"], [256, 512, 1024]] and cls.param_names == ["policy", "num_partitions"]
    assert set(benchmark_methods(cls)) == {"time_make_plan", "time_bucket_assignment", "track_swaps",
                                           "track_swaps_over_lower_bound"}


@pytest.mark.parametrize("policy", ["beta", "comet"])
def test_policy_benchmarks_run(policy):
    from benchmarks import bench_policies
    from systems.disk.policies import beta_swaps

    tracked = run_benchmark(bench_policies.PlanGeneration, None, (policy, 256))
    if policy == "beta":
        assert tracked["track_swaps"] == beta_swaps(256, 32)
    assert tracked["track_swaps_over_lower_bound"] >= 1.0


def test_store_io_benchmarks_run(tmp_path, monkeypatch):
    from benchmarks import bench_store_io

    monkeypatch.chdir(tmp_path)  # asv runs setup_cache in its own working folder
    path = bench_store_io.make_partition_file(tmp_path, 1 << 20)
    assert (tmp_path / bench_store_io.PARTITION_FILE).stat().st_size == bench_store_io.NUM_PARTITIONS << 20
    cls = bench_store_io.PartitionRead
    assert cls.param_names == ["partition_mib", "page_cache"] and cls.params[1] == ["evicted", "warm"]
    for page_cache in cls.params[1]:
        tracked = run_benchmark(cls, path, (1, page_cache))
        assert tracked["track_read_mb_per_s"] > 0
    small = PRESETS.get("tiny").replace(name="bench-store-test")
    monkeypatch.setattr(bench_store_io, "STORE_GRAPH", small)
    store = bench_store_io.StoreOpen().setup_cache()
    assert Path(store).parent == tmp_path
    assert run_benchmark(bench_store_io.StoreOpen, store, ())["track_store_mb"] > 0


def test_simulator_benchmarks_run():
    from benchmarks import bench_simulators

    assert bench_simulators.NUM_BATCHES == 10_000
    pipeline = bench_simulators.PipelineSimulation
    assert pipeline.param_names == ["cpu_cores", "staleness_bound"]
    for params in itertools.product(*pipeline.params):
        tracked = run_benchmark(pipeline, None, params, {"num_batches": 50})
        assert tracked["track_simulated_epoch_s"] > 0
    buffer = bench_simulators.BufferSimulation
    assert buffer.param_names == ["policy", "num_partitions"] and max(buffer.params[1]) >= 4096
    for policy in buffer.params[0]:
        assert run_benchmark(buffer, None, (policy, 64))["track_bytes_read_tb"] > 0


def test_disk_graph_benchmarks_run():
    from benchmarks import bench_disk_graph

    cls = bench_disk_graph.InBufferCsr
    assert cls.param_names == ["capacity", "direction", "typed"]
    cache = bench_disk_graph.make_buckets(num_nodes=2_000, avg_degree=5)
    for params in itertools.product(*cls.params):
        assert run_benchmark(cls, cache, params)["track_edges_per_s"] > 0


def test_link_prediction_benchmarks_run():
    from benchmarks import bench_link_prediction as bench

    assert bench.AllEntitySoftmax.params == [["autograd", "blocked", "blocked_bf16"]]
    for variant in bench.AllEntitySoftmax.params[0]:
        run_benchmark(bench.AllEntitySoftmax, None, (variant,), {"num_queries": 6, "num_entities": 9, "dim": 4})
    tiny_batch = {"num_rows": 20, "num_positives": 6, "num_negatives": 5, "num_relations": 3, "dim": 4}
    for variant in bench.SampledDistMultSoftmax.params[0]:
        run_benchmark(bench.SampledDistMultSoftmax, None, (variant,), tiny_batch)
    tiny_shapes = {"chunked": (2, 3, 5), "all_entities": (1, 3, 9)}
    for params in itertools.product(*bench.TransEDistances.params):
        run_benchmark(bench.TransEDistances, None, params, {"shapes": tiny_shapes, "dim": 4})
    tiny_block = {"num_dst": 5, "num_src": 12, "fanout": 3, "num_relations": 4, "num_bases": 2, "dim": 4}
    for variant in bench.RGCNLayer.params[0]:
        run_benchmark(bench.RGCNLayer, None, (variant,), tiny_block)
    for variant in bench.FilteredRanking.params[0]:
        run_benchmark(bench.FilteredRanking, None, (variant,), {"num_queries": 6, "num_entities": 9,
                                                                 "known_per_query": 3})


def test_ranking_benchmark_variants_give_the_same_ranks():
    from benchmarks import bench_link_prediction as bench

    ranking = bench.FilteredRanking()
    ranking.num_queries, ranking.num_entities, ranking.known_per_query = 7, 11, 4
    ranking.setup("int32_once")
    ranking.scores = ranking.scores.round(decimals=0)  # ties, which the two counts must treat alike
    for variant in ("int32_once", "compiled_once"):
        for before, after in zip(ranking.ranks("int64_twice"), ranking.ranks(variant)):
            torch.testing.assert_close(after, before)


def test_link_prediction_benchmark_variants_compute_the_same():
    from benchmarks import bench_link_prediction as bench

    layer = bench.RGCNLayer()
    for name, value in {"num_dst": 5, "num_src": 12, "fanout": 3, "num_relations": 4, "num_bases": 2,
                        "dim": 4}.items():
        setattr(layer, name, value)
    layer.setup("relation_matrices")
    x_dst = layer.x[: layer.num_dst]
    before = bench.per_edge_bases(layer.conv, layer.x, x_dst, layer.edge_index, layer.edge_type)
    after = layer.conv((layer.x, x_dst), layer.edge_index, layer.edge_type)
    torch.testing.assert_close(after, before)


def test_graphsage_benchmark_runs_and_both_variants_compute_the_same_layer():
    from benchmarks import bench_models as bench

    assert bench.GraphSAGELayer.params == [["edge_list", "sparse_product"], [128, 8415]]
    tiny = {"num_src": 12, "num_dst": 5, "fanout": 3, "out_dim": 2}
    for variant in bench.GraphSAGELayer.params[0]:
        run_benchmark(bench.GraphSAGELayer, None, (variant, 4), tiny)
    layer = bench.GraphSAGELayer()
    for name, value in tiny.items():
        setattr(layer, name, value)
    layer.setup("edge_list", 4)
    torch.testing.assert_close(layer.forward("sparse_product"), layer.forward("edge_list"))
