"""The naive layer-wise sampler: exact neighbourhoods checked by hand, fanouts, re-sampling, seeds, uniformity."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
import torch
from scipy import stats

from suite.registry import SAMPLERS
from systems.sampling.naive import NaiveSampler
from systems.sampling.sampler import LayerBlock, SampledSubgraph, SamplingGraph
from systems.sampling.naive import relabel, sample_neighbours
from tests.support.graphs import graph_from_lists
from tests.support.sampling import TINY, directed_store, gen, hub_graph, random_graph


def global_edges(block: LayerBlock) -> list[tuple[int, int]]:
    """The block's edges as sorted ``(neighbour, destination)`` global-id pairs (with repeats)."""
    src = block.src_nodes[block.edge_index[0]]
    dst = block.src_nodes[block.edge_index[1]]
    return sorted(zip(src.tolist(), dst.tolist()))


def assert_well_formed(sample: SampledSubgraph, roots: torch.Tensor) -> None:
    """Layout invariants of layer-wise blocks."""
    assert torch.equal(sample.roots, roots)
    assert torch.equal(sample.blocks[-1].src_nodes[: sample.blocks[-1].num_dst], roots)
    for outer, inner in zip(sample.blocks[:-1], sample.blocks[1:]):
        # The outer block's destinations are the inner block's sources.
        assert torch.equal(outer.src_nodes[: outer.num_dst], inner.src_nodes)
    for block in sample.blocks:
        assert len(torch.unique(block.src_nodes)) == len(block.src_nodes)
        assert block.edge_index.dtype == torch.int64
        if block.edge_index.numel():
            assert int(block.edge_index[0].max()) < len(block.src_nodes)
            assert int(block.edge_index[1].max()) < block.num_dst
    assert sample.num_sampled_edges == sum(b.edge_index.shape[1] for b in sample.blocks)


def test_registered_as_naive():
    assert SAMPLERS.get("naive") is NaiveSampler


def test_all_neighbours_two_hops_by_hand():
    sample = NaiveSampler(graph_from_lists(TINY), (-1, -1)).sample(torch.tensor([0]), gen())
    inner, outer = sample.blocks[1], sample.blocks[0]
    # Hop 1 from root 0: its neighbours 1, 2.
    assert inner.src_nodes.tolist() == [0, 1, 2] and inner.num_dst == 1
    assert inner.edge_index.tolist() == [[1, 2], [0, 0]]
    # Hop 2: every frontier node 0, 1, 2 is sampled (0 again), new node 3 appended.
    assert outer.src_nodes.tolist() == [0, 1, 2, 3] and outer.num_dst == 3
    assert global_edges(outer) == sorted([(1, 0), (2, 0), (0, 1), (2, 1), (3, 1), (0, 2)])
    assert sample.num_sampled_edges == 2 + 6
    assert torch.equal(sample.input_nodes, torch.tensor([0, 1, 2, 3]))
    assert_well_formed(sample, torch.tensor([0]))


def test_frontier_resampled_at_every_hop():
    # Root 0 is sampled at hops 1, 2 and 3; 1 and 2 at hops 2 and 3; 3 (no neighbours) at hop 3.
    # Hop 1: deg(0) = 2. Hop 2: deg(0)+deg(1)+deg(2) = 2+3+1 = 6. Hop 3: 6 + deg(3) = 6. Total 14.
    sample = NaiveSampler(graph_from_lists(TINY), (-1, -1, -1)).sample(torch.tensor([0]), gen())
    assert [b.edge_index.shape[1] for b in sample.blocks] == [6, 6, 2]
    assert sample.num_sampled_edges == 14
    # The outermost block repeats hop 2's edges of nodes 0, 1, 2.
    assert global_edges(sample.blocks[0]) == global_edges(sample.blocks[1])


def test_roots_order_and_multiple_roots():
    roots = torch.tensor([4, 1])
    sample = NaiveSampler(graph_from_lists(TINY), (-1,)).sample(roots, gen())
    (block,) = sample.blocks
    # Destinations first (4, 1), then new neighbours in order of first appearance: 3 (of 4), then 0, 2 (of 1).
    assert block.src_nodes.tolist() == [4, 1, 3, 0, 2]
    assert global_edges(block) == sorted([(3, 4), (0, 1), (2, 1), (3, 1)])
    assert_well_formed(sample, roots)


def test_no_fanouts_gives_roots_only():
    sample = NaiveSampler(graph_from_lists(TINY), ()).sample(torch.tensor([2, 0]), gen())
    assert sample.blocks == () and sample.num_sampled_edges == 0
    assert sample.input_nodes.tolist() == [2, 0]


def test_empty_roots():
    sample = NaiveSampler(graph_from_lists(TINY), (2, 2)).sample(torch.tensor([], dtype=torch.int64), gen())
    assert sample.num_sampled_edges == 0
    assert all(len(b.src_nodes) == 0 for b in sample.blocks)


@pytest.mark.parametrize("fanouts", [(0,), (-2, 3)])
def test_invalid_fanouts_rejected(fanouts):
    with pytest.raises(ValueError, match="fanouts"):
        NaiveSampler(graph_from_lists(TINY), fanouts)


def test_relabel_dst_first_then_first_appearance():
    src_nodes, local = relabel(torch.tensor([7, 3]), torch.tensor([5, 3, 9, 5, 7]))
    assert src_nodes.tolist() == [7, 3, 5, 9]
    assert local.tolist() == [2, 1, 3, 2, 0]


def khop_edges(graph: SamplingGraph, roots: list[int], hops: int) -> list[list[tuple[int, int]]]:
    """Reference (Python loops): per hop from the roots, the edges of every frontier node; outermost first."""
    frontier, per_hop = list(roots), []
    for _ in range(hops):
        hop, seen = [], list(frontier)
        for v in frontier:
            for u in graph.indices[graph.indptr[v]: graph.indptr[v + 1]].tolist():
                hop.append((u, v))
                if u not in seen:
                    seen.append(u)
        per_hop.append(sorted(hop))
        frontier = seen
    return per_hop[::-1]


@pytest.mark.parametrize("replace", [False, True])
def test_all_neighbours_equals_exact_khop(replace):
    graph, _ = random_graph()
    roots = [5, 17, 3]
    sample = NaiveSampler(graph, (-1, -1, -1), replace=replace).sample(torch.tensor(roots), gen())
    assert [global_edges(b) for b in sample.blocks] == khop_edges(graph, roots, 3)
    assert_well_formed(sample, torch.tensor(roots))


@pytest.mark.parametrize("replace", [False, True])
def test_sampled_edges_exist_and_fanouts_respected(replace):
    graph, edges = random_graph(seed=1)
    fanouts = (4, 3)  # hop 1: 4 per root, hop 2: 3 per frontier node
    roots = torch.tensor([0, 9, 33, 41, 2])
    sample = NaiveSampler(graph, fanouts, replace=replace).sample(roots, gen(3))
    assert_well_formed(sample, roots)
    for block, fanout in zip(sample.blocks, fanouts[::-1]):
        pairs = global_edges(block)
        assert set(pairs) <= edges
        per_dst = Counter(dst for _, dst in pairs)
        dst_nodes = block.src_nodes[: block.num_dst]
        expected = torch.clamp(graph.degrees(dst_nodes), max=fanout)
        assert [per_dst.get(v, 0) for v in dst_nodes.tolist()] == expected.tolist()
        if not replace:
            assert len(set(pairs)) == len(pairs)  # distinct neighbours per node


def test_with_replacement_repeats_neighbours():
    graph = graph_from_lists([list(range(1, 4)), [], [], []])  # node 0 has 3 neighbours
    sample = NaiveSampler(graph, (2,), replace=True)
    pairs = [global_edges(sample.sample(torch.tensor([0]), gen(seed)).blocks[0]) for seed in range(50)]
    assert any(p[0] == p[1] for p in pairs)  # two draws of the same neighbour happen
    assert all(len(p) == 2 for p in pairs)


def test_same_seed_same_sample_different_seed_differs():
    graph, _ = random_graph(seed=2)
    sampler = NaiveSampler(graph, (5, 5))
    roots = torch.arange(0, 60, 7)
    first, again, other = (sampler.sample(roots, gen(s)) for s in (11, 11, 12))
    for a, b in zip(first.blocks, again.blocks):
        assert torch.equal(a.src_nodes, b.src_nodes) and torch.equal(a.edge_index, b.edge_index)
    assert any(not torch.equal(a.edge_index, b.edge_index) or not torch.equal(a.src_nodes, b.src_nodes)
               for a, b in zip(first.blocks, other.blocks))


def test_generator_state_advances():
    graph, _ = random_graph(seed=2)
    sampler, generator = NaiveSampler(graph, (5,)), gen(0)
    first = sampler.sample(torch.tensor([1, 2, 3]), generator)
    second = sampler.sample(torch.tensor([1, 2, 3]), generator)
    assert not torch.equal(first.blocks[0].src_nodes, second.blocks[0].src_nodes) or not torch.equal(
        first.blocks[0].edge_index, second.blocks[0].edge_index)


# ------------------------------------------------------------------ uniformity
HUB_DEGREE, HUB_FANOUT, DRAWS = 20, 5, 4000


@pytest.mark.parametrize("replace", [False, True])
def test_neighbour_frequencies_uniform(replace):
    graph = hub_graph(HUB_DEGREE)
    segment, neighbours = sample_neighbours(graph, torch.zeros(DRAWS, dtype=torch.int64), HUB_FANOUT, replace,
                                            gen(5))
    assert torch.equal(torch.bincount(segment), torch.full((DRAWS,), HUB_FANOUT))
    counts = torch.bincount(neighbours - 1, minlength=HUB_DEGREE).numpy()
    assert counts.sum() == DRAWS * HUB_FANOUT
    assert stats.chisquare(counts).pvalue > 1e-3
    if not replace:
        rows = neighbours.view(DRAWS, HUB_FANOUT)
        assert all(len(set(row)) == HUB_FANOUT for row in rows.tolist())


@pytest.mark.parametrize("replace", [False, True])
def test_neighbour_frequencies_uniform_through_sampler(replace):
    sampler, generator = NaiveSampler(hub_graph(HUB_DEGREE), (HUB_FANOUT,), replace=replace), gen(6)
    counts = np.zeros(HUB_DEGREE, dtype=np.int64)
    for _ in range(400):
        block = sampler.sample(torch.tensor([0]), generator).blocks[0]
        counts += np.bincount(block.src_nodes[block.edge_index[0]].numpy() - 1, minlength=HUB_DEGREE)
    assert counts.sum() == 400 * HUB_FANOUT
    assert stats.chisquare(counts).pvalue > 1e-3


def test_subsets_uniform_without_replacement():
    """Every 2-subset of 6 neighbours is equally likely (not only the marginals)."""
    graph = hub_graph(6)
    _, neighbours = sample_neighbours(graph, torch.zeros(6000, dtype=torch.int64), 2, False, gen(7))
    subsets = Counter(tuple(sorted(pair)) for pair in neighbours.view(-1, 2).tolist())
    assert set(subsets) == set(itertools.combinations(range(1, 7), 2))
    assert stats.chisquare(list(subsets.values())).pvalue > 1e-3


def test_ordered_pairs_uniform_with_replacement():
    """With replacement, the two draws of a node are independent and uniform (36 ordered pairs)."""
    graph = hub_graph(6)
    _, neighbours = sample_neighbours(graph, torch.zeros(7200, dtype=torch.int64), 2, True, gen(8))
    pairs = Counter(tuple(pair) for pair in neighbours.view(-1, 2).tolist())
    assert len(pairs) == 36
    assert stats.chisquare(list(pairs.values())).pvalue > 1e-3


def test_mixed_degrees_in_one_hop():
    """Rows below, at and above the fanout in one call: all / all / fanout distinct."""
    graph = graph_from_lists([[1, 2], [0, 2, 3], [0, 1, 3, 4, 5, 6, 7], [], [], [], [], []])
    segment, neighbours = sample_neighbours(graph, torch.tensor([0, 1, 2, 3]), 3, False, gen(9))
    assert torch.bincount(segment, minlength=4).tolist() == [2, 3, 3, 0]
    assert neighbours[:5].tolist() == [1, 2, 0, 2, 3]
    assert len(set(neighbours[5:].tolist())) == 3 and set(neighbours[5:].tolist()) <= {0, 1, 3, 4, 5, 6, 7}


@pytest.mark.parametrize("direction, expected", [
    ("in", [(0, 1), (2, 1)]),                      # sources of 1's in-edges
    ("out", [(0, 1), (3, 1)]),                     # destinations of 1's out-edges
    ("both", [(0, 1), (0, 1), (2, 1), (3, 1)]),    # the union, with multiplicity
])
def test_directions(tmp_path, direction, expected):
    graph = SamplingGraph.from_store(directed_store(tmp_path / "g"), direction)
    sample = NaiveSampler(graph, (-1,)).sample(torch.tensor([1]), gen())
    assert global_edges(sample.blocks[0]) == expected


def test_direction_two_hops_in(tmp_path):
    graph = SamplingGraph.from_store(directed_store(tmp_path / "g"), "in")
    sample = NaiveSampler(graph, (-1, -1)).sample(torch.tensor([1]), gen())
    # Hop 1: 0->1, 2->1. Hop 2: in-neighbours of 1 (0, 2), of 0 (3, 1), of 2 (none).
    assert global_edges(sample.blocks[0]) == sorted([(0, 1), (2, 1), (3, 0), (1, 0)])
