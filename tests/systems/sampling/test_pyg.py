"""The ``pyg`` sampler: PyG's own C++ sampling (torch-sparse or pyg-lib) turned into the suite's layer-wise blocks.

Runs only where PyG can sample (the peer wheels installed: ``make peers``); elsewhere every test is skipped with
the reason, except the one that checks the error a missing backend gives.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from suite.config import ModelSpec
from suite.errors import ConfigError
from suite.registry import SAMPLERS
from systems.models.encoder import build_model
from systems.sampling.naive import NaiveSampler
from systems.sampling.sampler import SampledSubgraph
from systems.sampling import pyg as pyg_sampling
from systems.sampling.pyg import PygSampler
from tests.support.graphs import graph_from_lists, in_graph

MISSING = pyg_sampling.missing_reason()
needs_pyg = pytest.mark.skipif(MISSING is not None, reason=f"pyg sampler: {MISSING}")

# Neighbour lists of a tiny graph (checked by hand below).
#   0: [1, 2]    1: [0, 2, 3]    2: [0]    3: []    4: [3]
TINY = [[1, 2], [0, 2, 3], [0], [], [3]]


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def global_edges(block) -> list[tuple[int, int]]:
    """The block's edges as sorted ``(neighbour, destination)`` global-id pairs (with repeats)."""
    src, dst = block.src_nodes[block.edge_index[0]], block.src_nodes[block.edge_index[1]]
    return sorted(zip(src.tolist(), dst.tolist()))


def assert_layer_wise(sample: SampledSubgraph, roots: torch.Tensor) -> None:
    """The layer-wise layout: destinations first, each layer's destinations are the next layer's sources."""
    assert torch.equal(sample.roots, roots) and sample.root_start == 0
    assert torch.equal(sample.blocks[-1].src_nodes[: sample.blocks[-1].num_dst], roots)
    for outer, inner in zip(sample.blocks[:-1], sample.blocks[1:]):
        assert torch.equal(outer.src_nodes[: outer.num_dst], inner.src_nodes)
    for block in sample.blocks:
        assert block.dst_start == 0 and len(torch.unique(block.src_nodes)) == len(block.src_nodes)
        if block.edge_index.numel():
            assert int(block.edge_index[0].max()) < len(block.src_nodes)
            assert int(block.edge_index[1].max()) < block.num_dst


def test_registered_as_pyg():
    assert SAMPLERS.get("pyg") is PygSampler


def test_missing_backend_is_a_config_error_naming_the_field(monkeypatch):
    monkeypatch.setattr(pyg_sampling, "pyg_backend", lambda: None)
    with pytest.raises(ConfigError, match=r"^sampler\.name: 'pyg' needs .*pyg-lib/torch-sparse not installed"):
        PygSampler(graph_from_lists(TINY), (2,))


@needs_pyg
def test_all_neighbours_two_hops_by_hand():
    sample = PygSampler(graph_from_lists(TINY), (-1, -1)).sample(torch.tensor([0]), gen())
    assert_layer_wise(sample, torch.tensor([0]))
    outer, inner = sample.blocks
    # hop 1 from root 0: neighbours 1, 2; hop 2 samples only the new nodes 1 and 2 (each once): 1 -> 0, 2, 3 and
    # 2 -> 0; node 3 is reached at hop 2 and never sampled.
    assert inner.src_nodes.tolist() == [0, 1, 2] and inner.num_dst == 1
    assert global_edges(inner) == [(1, 0), (2, 0)]
    assert outer.src_nodes.tolist() == [0, 1, 2, 3] and outer.num_dst == 3
    assert global_edges(outer) == [(0, 1), (0, 2), (1, 0), (2, 0), (2, 1), (3, 1)]
    assert sample.num_sampled_edges == 6  # every edge once: the outer block holds them all


@needs_pyg
def test_no_fanouts_gives_roots_only():
    sample = PygSampler(graph_from_lists(TINY), ()).sample(torch.tensor([4, 1]), gen())
    assert sample.blocks == () and sample.roots.tolist() == [4, 1] and sample.num_sampled_edges == 0


@needs_pyg
@pytest.mark.parametrize("replace", [False, True])
def test_fanouts_respected_and_edges_exist(replace):
    edge_index = torch.randint(0, 60, (2, 600), generator=gen(3))
    graph = in_graph(edge_index, 60)
    sampler = PygSampler(graph, (4, 3), replace=replace)
    roots = torch.tensor([5, 17, 42])
    sample = sampler.sample(roots, gen(1))
    assert_layer_wise(sample, roots)
    neighbours = {v: Counter(graph.indices[graph.indptr[v]:graph.indptr[v + 1]].tolist()) for v in range(60)}
    outer, inner = sample.blocks
    per_destination = Counter(dst for _, dst in global_edges(outer))
    for node, count in per_destination.items():
        degree = sum(neighbours[node].values())
        fanout = 4 if node in roots.tolist() else 3
        assert count == (fanout if replace else min(fanout, degree))
    for src, dst in global_edges(outer):
        assert neighbours[dst][src] > 0
    if not replace:  # distinct positions of the neighbour list
        for node in per_destination:
            drawn = Counter(src for src, dst in global_edges(outer) if dst == node)
            assert all(drawn[v] <= neighbours[node][v] for v in drawn)


@needs_pyg
def test_same_generator_same_sample_and_global_generator_untouched():
    graph = in_graph(torch.randint(0, 200, (2, 3000), generator=gen(5)), 200)
    sampler = PygSampler(graph, (5, 5))
    roots = torch.arange(0, 200, 9)
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    first, again = sampler.sample(roots, gen(7)), sampler.sample(roots, gen(7))
    assert torch.equal(torch.random.get_rng_state(), before)
    other = sampler.sample(roots, gen(8))
    for a, b in zip(first.blocks, again.blocks):
        assert torch.equal(a.src_nodes, b.src_nodes) and torch.equal(a.edge_index, b.edge_index)
    assert not all(torch.equal(a.edge_index, b.edge_index) and torch.equal(a.src_nodes, b.src_nodes)
                   for a, b in zip(first.blocks, other.blocks))


@needs_pyg
@pytest.mark.parametrize("seed", range(3))
def test_graphsage_over_pyg_equals_naive_with_all_neighbours(seed):
    generator = gen(seed)
    num_nodes = 50
    graph = in_graph(torch.randint(0, num_nodes, (2, 200), generator=generator), num_nodes)
    x = torch.randn(num_nodes, 8, generator=generator)
    roots = torch.randperm(num_nodes, generator=generator)[:6]
    torch.manual_seed(seed)
    spec = ModelSpec(encoder="graphsage", num_layers=3, hidden_dim=16, fanouts=(-1, -1, -1))
    model = build_model(spec, 8, 3).eval()
    naive = NaiveSampler(graph, spec.fanouts).sample(roots, gen())
    pyg = PygSampler(graph, spec.fanouts).sample(roots, gen())
    assert_layer_wise(pyg, roots)
    with torch.no_grad():
        torch.testing.assert_close(model(x[pyg.input_nodes], pyg), model(x[naive.input_nodes], naive),
                                   atol=1e-5, rtol=1e-5)
    # PyG samples each node once (as DENSE): fewer sampled edges than the naive sampler's re-sampling
    assert pyg.num_sampled_edges <= naive.num_sampled_edges


@needs_pyg
def test_blocks_from_counts_equal_blocks_from_edge_order():
    # pyg-lib reports nodes and edges per hop; torch-sparse does not: both constructions give the same blocks
    graph = in_graph(torch.randint(0, 80, (2, 500), generator=gen(2)), 80)
    out = PygSampler(graph, (3, 2, 2)).sample_pyg(torch.tensor([1, 2, 3]), gen(4))
    within = pyg_sampling.nodes_per_hop(out.row, out.col, 3, 3)
    ends = [0] + pyg_sampling.hop_edge_ends(out.col, within[:3])
    counts = [within[0]] + [b - a for a, b in zip(within, within[1:])]
    by_counts = pyg_sampling.blocks_from_pyg(out.node, out.row, out.col, 3, 3, counts,
                                             [b - a for a, b in zip(ends, ends[1:])])
    by_order = pyg_sampling.blocks_from_pyg(out.node, out.row, out.col, 3, 3)
    for a, b in zip(by_counts, by_order):
        assert torch.equal(a.src_nodes, b.src_nodes) and a.num_dst == b.num_dst
        assert torch.equal(a.edge_index, b.edge_index)
