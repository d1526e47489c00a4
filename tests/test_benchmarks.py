"""The asv benchmarks import and run: every benchmark's setup and one call, on a tiny graph (seconds)."""

from __future__ import annotations

import itertools
import math

import pytest

from benchmarks import bench_sampling
from suite.graph.synthetic import PRESETS


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
