"""The DENSE sampler: exact layouts checked by hand, sampling once per node, fanouts, models, seeds, uniformity."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest
import torch
from scipy import stats
from torch_geometric.nn import SAGEConv

from suite.registry import SAMPLERS
from systems.models.graphsage import GraphSAGE
from systems.sampling import kernels
from systems.sampling.dense import DenseSampler, DenseSubgraph
from systems.sampling.naive import NaiveSampler
from systems.sampling.sampler import LayerBlock, SamplingGraph
from systems.sampling.dense import shuffle_plan
from tests.support.graphs import graph_from_lists
from tests.support.sampling import TINY, directed_store, gen, hub_graph, random_graph

BACKENDS = ["numba", "torch"] if kernels.NUMBA_AVAILABLE else ["torch"]


def dense(graph: SamplingGraph, fanouts, backend: str, replace: bool = False) -> DenseSampler:
    return DenseSampler(graph, fanouts, replace=replace, backend=backend)


def node_neighbours(sample: DenseSubgraph) -> dict[int, list[int]]:
    """Global id -> global ids of its sampled neighbours (in order), for every node whose neighbours were sampled."""
    sampled = sample.node_ids[sample.hop_offsets[1]:].tolist() if sample.num_hops else []
    nbrs = sample.node_ids[sample.nbrs].tolist()
    offsets = sample.nbr_offsets.tolist()
    return {v: nbrs[offsets[i]:offsets[i + 1]] for i, v in enumerate(sampled)}


def block_edges(block: LayerBlock) -> list[tuple[int, int]]:
    """A block's edges as sorted ``(neighbour, destination)`` global pairs."""
    src = block.src_nodes[block.edge_index[0]]
    dst = block.src_nodes[block.dst_start + block.edge_index[1]]
    return sorted(zip(src.tolist(), dst.tolist()))


def assert_well_formed(sample: DenseSubgraph, roots: torch.Tensor, fanouts) -> None:
    """Invariants of the DENSE layout, its deltas and its derived blocks."""
    num_hops, n = len(fanouts), len(sample.node_ids)
    assert isinstance(sample, DenseSubgraph) and sample.num_hops == num_hops
    assert torch.equal(sample.roots, roots) and torch.equal(sample.node_ids[sample.root_start:], roots)
    assert sample.root_start == n - len(roots) == sample.hop_offsets[-1] and sample.hop_offsets[0] == 0
    assert len(torch.unique(sample.node_ids)) == n
    assert torch.equal(sample.input_nodes, sample.node_ids)
    # unique_nodes_per_hop = sizes of roots, delta_1 .. delta_K; hop_offsets are their suffix sums.
    sizes = sample.unique_nodes_per_hop
    assert len(sizes) == num_hops + 1 and sizes[0] == len(roots) and sum(sizes) == n
    assert list(sample.hop_offsets) == [n - sum(sizes[: num_hops - i + 1]) for i in range(num_hops + 1)]
    assert sample.one_hop_calls == n - sizes[-1]
    assert sample.num_sampled_edges == sample.edges.shape[1] == int(sample.nbr_offsets[-1])
    assert sample.edges.dtype == torch.int64
    if not num_hops:
        assert sample.blocks == () and sample.num_sampled_edges == 0
        return
    base = sample.hop_offsets[1]
    assert len(sample.nbr_offsets) == n - base + 1 and int(sample.nbr_offsets[0]) == 0
    counts = sample.nbr_offsets[1:] - sample.nbr_offsets[:-1]
    assert torch.equal(sample.edge_dst, torch.repeat_interleave(torch.arange(n - base), counts))
    # The neighbours of delta_{k-1} lie in delta_k or closer to the roots; every delta_k node is one of them.
    for hop in range(1, num_hops + 1):
        frontier = range(sample.hop_offsets[num_hops - hop + 1], sample.hop_offsets[num_hops - hop + 2]
                         if hop > 1 else n)
        edges = slice(int(sample.nbr_offsets[frontier.start - base]), int(sample.nbr_offsets[frontier.stop - base]))
        found = sample.nbrs[edges]
        assert bool((found >= sample.hop_offsets[num_hops - hop]).all()) if len(found) else True
        delta = set(range(sample.hop_offsets[num_hops - hop], sample.hop_offsets[num_hops - hop + 1]))
        assert delta <= set(found.tolist())
    # Blocks: layer l maps rows node_ids[h_{l-1}:] to node_ids[h_l:] over the lists of node_ids[h_l:].
    lists = node_neighbours(sample)
    for layer, block in enumerate(sample.blocks, start=1):
        src_start, dst_start = sample.hop_offsets[layer - 1], sample.hop_offsets[layer]
        assert torch.equal(block.src_nodes, sample.node_ids[src_start:])
        assert block.num_dst == n - dst_start and block.dst_start == dst_start - src_start
        assert block.edge_index.dtype == torch.int64
        # With truncation, layer l keeps the first layer_fanouts[l - 1] entries of every list (-1: all).
        cap = sample.layer_fanouts[layer - 1] if sample.layer_fanouts else -1
        keep = slice(None) if cap == -1 else slice(cap)
        expected = sorted((u, v) for v in sample.node_ids[dst_start:].tolist() for u in lists[v][keep])
        assert block_edges(block) == expected
    assert torch.equal(sample.blocks[-1].dst_rows(sample.blocks[-1].src_nodes), roots)


def test_registered_as_dense():
    assert SAMPLERS.get("dense") is DenseSampler


# ------------------------------------------------------------------ layouts by hand
@pytest.mark.parametrize("backend", BACKENDS)
def test_layout_by_hand_one_root_three_hops(backend):
    # TINY: 0: [1, 2]   1: [0, 2, 3]   2: [0]   3: []   4: [3]
    # Hop 1 samples root 0: neighbours 1, 2 (new; discovery order 1, 2, laid out reversed: delta_1 = [2, 1]).
    # Hop 2 samples delta_1 in layout order: 2 -> [0] (seen), 1 -> [0, 2, 3] (3 new): delta_2 = [3].
    # Hop 3 samples 3: no neighbours; delta_3 = []. Node 0 (hops 0, 2) and 2 (hops 1, 2) are sampled once.
    sample = dense(graph_from_lists(TINY), (-1, -1, -1), backend).sample(torch.tensor([0]), gen())
    assert sample.node_ids.tolist() == [3, 2, 1, 0]
    assert sample.hop_offsets == (0, 0, 1, 3)  # [d3|d2|d1|T], [d2|d1|T], [d1|T], [T]
    assert sample.nbr_offsets.tolist() == [0, 0, 1, 4, 6]  # lists of 3, 2, 1, 0
    assert sample.nbrs.tolist() == [3, 3, 1, 0, 2, 1]  # 2: [0]; 1: [0, 2, 3]; 0: [1, 2] (as local rows)
    assert sample.edge_dst.tolist() == [1, 2, 2, 2, 3, 3]
    assert sample.unique_nodes_per_hop == (1, 2, 1, 0) and sample.one_hop_calls == 4
    assert sample.num_sampled_edges == 6 and sample.root_start == 3
    b1, b2, b3 = sample.blocks
    assert b1.src_nodes.tolist() == [3, 2, 1, 0] and (b1.num_dst, b1.dst_start) == (4, 0)
    assert b1.edge_index.tolist() == [[3, 3, 1, 0, 2, 1], [1, 2, 2, 2, 3, 3]]
    assert b2.src_nodes.tolist() == [3, 2, 1, 0] and (b2.num_dst, b2.dst_start) == (3, 1)
    assert b2.edge_index.tolist() == [[3, 3, 1, 0, 2, 1], [0, 1, 1, 1, 2, 2]]
    assert b3.src_nodes.tolist() == [2, 1, 0] and (b3.num_dst, b3.dst_start) == (1, 2)
    assert b3.edge_index.tolist() == [[1, 0], [0, 0]]
    assert_well_formed(sample, torch.tensor([0]), (-1, -1, -1))
    # The naive sampler re-samples 0, 1, 2 at hop 2 and 0, 1, 2, 3 at hop 3: 14 edges, 8 one-hop calls.
    naive = NaiveSampler(graph_from_lists(TINY), (-1, -1, -1)).sample(torch.tensor([0]), gen())
    assert naive.num_sampled_edges == 14


@pytest.mark.parametrize("backend", BACKENDS)
def test_layout_by_hand_two_roots(backend):
    # Roots [4, 1]. Hop 1 visits 4 -> [3] (new), 1 -> [0, 2, 3] (0, 2 new; 3 again: one node, two edges).
    # Discovery 3, 0, 2 -> delta_1 = [2, 0, 3]. Hop 2 visits 2 -> [0], 0 -> [1, 2], 3 -> []: nothing new.
    sample = dense(graph_from_lists(TINY), (-1, -1), backend).sample(torch.tensor([4, 1]), gen())
    assert sample.node_ids.tolist() == [2, 0, 3, 4, 1]
    assert sample.hop_offsets == (0, 0, 3)
    assert sample.nbr_offsets.tolist() == [0, 1, 3, 3, 4, 7]
    assert sample.nbrs.tolist() == [1, 4, 0, 2, 1, 0, 2]
    assert sample.edge_dst.tolist() == [0, 1, 1, 3, 4, 4, 4]
    assert sample.unique_nodes_per_hop == (2, 3, 0) and sample.one_hop_calls == 5
    b1, b2 = sample.blocks
    assert (b1.num_dst, b1.dst_start) == (5, 0) and b1.edge_index.tolist() == sample.edges.tolist()
    assert b2.src_nodes.tolist() == [2, 0, 3, 4, 1] and (b2.num_dst, b2.dst_start) == (2, 3)
    assert b2.edge_index.tolist() == [[2, 1, 0, 2], [0, 1, 1, 1]]
    assert_well_formed(sample, torch.tensor([4, 1]), (-1, -1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_fanouts_gives_roots_only(backend):
    sample = dense(graph_from_lists(TINY), (), backend).sample(torch.tensor([2, 0]), gen())
    assert sample.node_ids.tolist() == [2, 0] and sample.hop_offsets == (0,)
    assert sample.blocks == () and sample.num_sampled_edges == 0 and sample.one_hop_calls == 0
    assert sample.unique_nodes_per_hop == (2,) and sample.input_nodes.tolist() == [2, 0]
    assert_well_formed(sample, torch.tensor([2, 0]), ())


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_roots(backend):
    sample = dense(graph_from_lists(TINY), (2, 2), backend).sample(torch.tensor([], dtype=torch.int64), gen())
    assert sample.num_sampled_edges == 0 and len(sample.node_ids) == 0
    assert sample.unique_nodes_per_hop == (0, 0, 0)


# ------------------------------------------------------------------ sampling
@pytest.mark.parametrize("backend", BACKENDS)
def test_each_node_sampled_once(backend):
    """one_hop_calls = unique nodes outside delta_K; each sampled node has exactly one neighbour list."""
    graph, _ = random_graph(seed=4)
    roots = torch.tensor([3, 8, 21])
    fanouts = (-1, -1, -1)
    sample = dense(graph, fanouts, backend).sample(roots, gen())
    sampled = sample.node_ids[sample.hop_offsets[1]:].tolist()
    assert len(set(sampled)) == len(sampled) == sample.one_hop_calls
    assert sample.one_hop_calls == len(sample.node_ids) - sample.unique_nodes_per_hop[-1]
    # With all neighbours, the union of the nodes is the 3-hop ball; the naive sampler's frontiers overlap.
    ball, frontier = set(roots.tolist()), set(roots.tolist())
    for _ in range(3):
        frontier = {u for v in frontier for u in graph.indices[graph.indptr[v]:graph.indptr[v + 1]].tolist()} - ball
        ball |= frontier
    assert set(sample.node_ids.tolist()) == ball
    naive = NaiveSampler(graph, fanouts).sample(roots, gen())
    naive_calls = sum(block.num_dst for block in naive.blocks)
    assert naive_calls > sample.one_hop_calls
    assert sample.num_sampled_edges == sum(int(graph.degrees(torch.tensor([v]))) for v in sampled)
    assert sample.num_sampled_edges < naive.num_sampled_edges
    assert_well_formed(sample, roots, fanouts)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("replace", [False, True])
def test_sampled_edges_exist_and_fanouts_respected(backend, replace):
    graph, edges = random_graph(seed=1)
    fanouts = (4, 3, 2)  # hop 1: 4 per root, hop 2: 3 per delta_1 node, hop 3: 2 per delta_2 node
    roots = torch.tensor([0, 9, 33, 41, 2])
    sample = dense(graph, fanouts, backend, replace).sample(roots, gen(3))
    assert_well_formed(sample, roots, fanouts)
    lists = node_neighbours(sample)
    for hop, fanout in enumerate(fanouts, start=1):
        # delta_{hop-1} lies at node_ids[h_{K-hop+1}:h_{K-hop+2}] (the roots for hop 1).
        start = sample.hop_offsets[len(fanouts) - hop + 1]
        stop = sample.hop_offsets[len(fanouts) - hop + 2] if hop > 1 else len(sample.node_ids)
        for v in sample.node_ids[start:stop].tolist():
            got = lists[v]
            assert {(u, v) for u in got} <= edges
            assert len(got) == min(int(graph.degrees(torch.tensor([v]))), fanout)
            if not replace:
                assert len(set(got)) == len(got)


@pytest.mark.parametrize("backend", BACKENDS)
def test_with_replacement_repeats_are_one_node(backend):
    graph = graph_from_lists([[1, 2, 3], [], [], []])
    sampler = dense(graph, (2,), backend, replace=True)
    samples = [sampler.sample(torch.tensor([0]), gen(seed)) for seed in range(60)]
    repeated = [s for s in samples if len(set(node_neighbours(s)[0])) == 1]
    assert repeated  # both draws on one neighbour happen; it is then one node with two edges
    for s in repeated:
        assert s.num_sampled_edges == 2 and s.unique_nodes_per_hop == (1, 1)
        assert s.nbrs[0] == s.nbrs[1]


@pytest.mark.parametrize("replace", [False, True])
def test_backends_identical(replace):
    if not kernels.NUMBA_AVAILABLE:
        pytest.skip("numba not installed")
    graph, _ = random_graph(num_nodes=200, max_degree=30, seed=5)
    roots = torch.tensor([7, 150, 3, 42, 99, 0])
    for fanouts in [(5, 3, 2), (-1, 4), (10, -1, 1)]:
        a = dense(graph, fanouts, "numba", replace).sample(roots, gen(8))
        b = dense(graph, fanouts, "torch", replace).sample(roots, gen(8))
        assert torch.equal(a.node_ids, b.node_ids) and torch.equal(a.edges, b.edges)
        assert torch.equal(a.nbr_offsets, b.nbr_offsets) and a.hop_offsets == b.hop_offsets


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_seed_same_sample_different_seed_differs(backend):
    graph, _ = random_graph(seed=2)
    sampler = dense(graph, (5, 5), backend)
    roots = torch.arange(0, 60, 7)
    first, again, other = (sampler.sample(roots, gen(s)) for s in (11, 11, 12))
    assert torch.equal(first.node_ids, again.node_ids) and torch.equal(first.edges, again.edges)
    assert not (torch.equal(first.node_ids, other.node_ids) and torch.equal(first.edges, other.edges))


def test_independent_of_thread_count():
    graph, _ = random_graph(num_nodes=300, max_degree=40, seed=6)
    sampler = DenseSampler(graph, (6, 4, 3))
    roots = torch.arange(0, 300, 11)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = sampler.sample(roots, gen(4))
        torch.set_num_threads(max(2, threads))
        many = sampler.sample(roots, gen(4))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one.node_ids, many.node_ids) and torch.equal(one.edges, many.edges)


def test_concurrent_calls_match_sequential_ones():
    graph, _ = random_graph(num_nodes=300, max_degree=40, seed=7)
    sampler = DenseSampler(graph, (5, 5, 5))
    batches = [torch.arange(start, 300, 13) for start in range(12)]
    expected = [sampler.sample(roots, gen(i)) for i, roots in enumerate(batches)]
    results: dict[int, DenseSubgraph] = {}

    def work(indices: range) -> None:
        for i in indices:
            results[i] = sampler.sample(batches[i], gen(i))

    workers = [threading.Thread(target=work, args=(range(k, 12, 4),)) for k in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for i, sample in enumerate(expected):
        assert torch.equal(results[i].node_ids, sample.node_ids) and torch.equal(results[i].edges, sample.edges)


@pytest.mark.parametrize("backend", BACKENDS)
def test_slots_reset_after_every_batch(backend):
    # 2000 nodes: a batch touches a few nodes (slots reset one by one) or most of them (array cleared at once).
    graph, _ = random_graph(num_nodes=2000, max_degree=8, seed=9)
    for fanouts, num_roots in [((2,), 3), ((8, 8, 8, 8), 200)]:
        sampler = dense(graph, fanouts, backend)
        for seed in range(3):
            sample = sampler.sample(torch.arange(num_roots) * 7, gen(seed))
            assert [int(w.slot.count_nonzero()) for w in sampler._workspaces.idle] == [0]
        touched = len(sample.node_ids)
        assert (touched * 8 > graph.num_nodes) == (num_roots == 200)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_roots_rejected_and_sampler_still_clean(backend):
    graph, _ = random_graph(seed=3)
    sampler = dense(graph, (3, 3), backend)
    with pytest.raises(ValueError, match="unique"):
        sampler.sample(torch.tensor([5, 9, 5]), gen())
    with pytest.raises(ValueError, match="node ids"):
        sampler.sample(torch.tensor([5, 60]), gen())
    after = sampler.sample(torch.tensor([5, 9]), gen(1))
    fresh = dense(graph, (3, 3), backend).sample(torch.tensor([5, 9]), gen(1))
    assert torch.equal(after.node_ids, fresh.node_ids) and torch.equal(after.edges, fresh.edges)


@pytest.mark.parametrize("fanouts", [(0,), (-2, 3)])
def test_invalid_fanouts_and_backend_rejected(fanouts):
    with pytest.raises(ValueError, match="fanouts"):
        DenseSampler(graph_from_lists(TINY), fanouts)
    with pytest.raises(ValueError, match="backend"):
        DenseSampler(graph_from_lists(TINY), (2,), backend="cuda")


def test_to_device_keeps_the_subclass():
    sample = DenseSampler(graph_from_lists(TINY), (-1, -1)).sample(torch.tensor([0, 4]), gen())
    moved = sample.to(torch.device("cpu"))
    assert isinstance(moved, DenseSubgraph) and moved.hop_offsets == sample.hop_offsets
    assert torch.equal(moved.edges, sample.edges) and torch.equal(moved.roots, sample.roots)
    for a, b in zip(moved.blocks, sample.blocks):
        assert torch.equal(a.edge_index, b.edge_index) and (a.num_dst, a.dst_start) == (b.num_dst, b.dst_start)


# ------------------------------------------------------------------ uniformity
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("replace", [False, True])
def test_neighbour_frequencies_uniform(backend, replace):
    degree, fanout, batches = 20, 5, 600
    sampler, generator = dense(hub_graph(degree), (fanout,), backend, replace), gen(6)
    counts = np.zeros(degree, dtype=np.int64)
    for _ in range(batches):
        sample = sampler.sample(torch.tensor([0]), generator)
        drawn = sample.node_ids[sample.nbrs].numpy()
        assert len(drawn) == fanout
        if not replace:
            assert len(set(drawn.tolist())) == fanout
        counts += np.bincount(drawn - 1, minlength=degree)
    assert counts.sum() == batches * fanout
    assert stats.chisquare(counts).pvalue > 1e-3


def test_subsets_uniform_without_replacement():
    """Every 2-subset of 6 neighbours is equally likely (not only the marginals)."""
    sampler, generator = DenseSampler(hub_graph(6), (2,)), gen(7)
    subsets = Counter(tuple(sorted(sampler.sample(torch.tensor([0]), generator).node_ids[:2].tolist()))
                      for _ in range(1500))
    assert len(subsets) == 15
    assert stats.chisquare(list(subsets.values())).pvalue > 1e-3


# ------------------------------------------------------------------ directions
@pytest.mark.parametrize("direction, expected", [
    ("in", [0, 2]),        # sources of 1's in-edges (0->1, 2->1)
    ("out", [0, 3]),       # destinations of 1's out-edges (1->3, 1->0)
    ("both", [0, 0, 2, 3]),  # the union, with multiplicity
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_directions(tmp_path, direction, expected, backend):
    graph = SamplingGraph.from_store(directed_store(tmp_path / "g"), direction)
    sample = dense(graph, (-1,), backend).sample(torch.tensor([1]), gen())
    assert sorted(node_neighbours(sample)[1]) == expected
    assert_well_formed(sample, torch.tensor([1]), (-1,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_direction_two_hops_in(tmp_path, backend):
    graph = SamplingGraph.from_store(directed_store(tmp_path / "g"), "in")
    sample = dense(graph, (-1, -1), backend).sample(torch.tensor([1]), gen())
    # Hop 1: in-neighbours of 1: 0, 2. Hop 2: of 0: 3, 1 (3 new); of 2: none. 1 is not sampled again.
    lists = node_neighbours(sample)
    assert sorted(lists[1]) == [0, 2] and sorted(lists[0]) == [1, 3] and lists[2] == []
    assert set(lists) == {0, 1, 2} and sample.unique_nodes_per_hop == (1, 2, 1)


# ------------------------------------------------------------------ models
def full_graph_sage(model: GraphSAGE, x: torch.Tensor, graph: SamplingGraph) -> torch.Tensor:
    """The same GraphSAGE layers applied to the whole graph (messages from every neighbour), PyG style."""
    dst = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.indptr[1:] - graph.indptr[:-1])
    edge_index = torch.stack([graph.indices, dst])
    for layer, conv in enumerate(model.convs):
        assert isinstance(conv, SAGEConv)
        x = conv(x, edge_index)
        if layer < len(model.convs) - 1:
            x = torch.relu(x)
    return x


@pytest.mark.parametrize("aggregation", ["mean", "max", "sum"])
@pytest.mark.parametrize("seed", [0, 1])
def test_graphsage_over_dense_equals_full_graph_and_naive(aggregation, seed):
    torch.manual_seed(seed)
    graph, _ = random_graph(num_nodes=80, max_degree=6, seed=10 + seed)
    x = torch.randn(graph.num_nodes, 7)
    model = GraphSAGE(7, 16, 5, num_layers=3, aggregation=aggregation).eval()
    roots = torch.tensor([4, 77, 12, 30, 51])
    fanouts = (-1, -1, -1)
    with torch.no_grad():
        full = full_graph_sage(model, x, graph)[roots]
        for backend in BACKENDS:
            sample = dense(graph, fanouts, backend).sample(roots, gen())
            assert_well_formed(sample, roots, fanouts)
            out = model(x[sample.input_nodes], sample)
            torch.testing.assert_close(out, full, atol=1e-5, rtol=1e-5)
        naive = NaiveSampler(graph, fanouts).sample(roots, gen())
        torch.testing.assert_close(out, model(x[naive.input_nodes], naive), atol=1e-5, rtol=1e-5)


def test_blocks_are_built_on_first_access():
    sample = DenseSampler(graph_from_lists(TINY), (-1, -1, -1)).sample(torch.tensor([0]), gen())
    blocks = sample.blocks
    assert len(blocks) == 3 and repr(blocks).endswith("[False, False, False])")
    assert blocks[0].edge_index is sample.edges  # layer 1 is the edge list itself
    assert blocks[-1] is blocks[2] and blocks[1:] == (blocks[1], blocks[2])
    assert [b.num_dst for b in reversed(blocks)] == [1, 3, 4]
    with pytest.raises(IndexError):
        blocks[3]


# ------------------------------------------------------------------ truncation (layer l: its own fanout)
def test_shuffle_plan_by_hand():
    # (15, 10, 5): roots are destinations at layers of fanouts 15, 10, 5 -> lists of more than 5 shuffled over
    # their first 10 entries; delta_1 (fanouts 10, 5) -> over 5; delta_2 (5) is never cut.
    assert [shuffle_plan((15, 10, 5), hop) for hop in range(3)] == [(5, 10), (5, 5), (-1, 0)]
    assert [shuffle_plan((20, 20, 20), hop) for hop in range(3)] == [(-1, 0)] * 3  # equal fanouts: no cut
    assert [shuffle_plan((-1, -1), hop) for hop in range(2)] == [(-1, 0)] * 2  # all neighbours everywhere
    assert [shuffle_plan((5, 10, 15), hop) for hop in range(3)] == [(-1, 0)] * 3  # growing: nothing to cut
    assert [shuffle_plan((-1, 4), hop) for hop in range(2)] == [(4, 4), (-1, 0)]  # all, then 4 at layer 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_truncated_blocks_by_hand(backend):
    # Root 0 has neighbours 1, 2, 3; node 1 has 4, 5, 6; 2 and 3 have 0. Fanouts (-1, 2): the root takes all its
    # 3 neighbours (hop 1), then delta_1 = {1, 2, 3} takes up to 2 each (hop 2). Layer 1 (fanout 2, the outer
    # one) cuts the root's list to its first 2 entries; layer 2 (fanout -1) uses all 3.
    graph = graph_from_lists([[1, 2, 3], [4, 5, 6], [0], [0], [], [], []])
    sample = dense(graph, (-1, 2), backend).sample(torch.tensor([0]), gen(3))
    assert sample.layer_fanouts == (2, -1) and sample.num_sampled_edges == 3 + 2 + 1 + 1
    lists = node_neighbours(sample)
    assert sorted(lists[0]) == [1, 2, 3] and len(lists[1]) == 2 and set(lists[1]) <= {4, 5, 6}
    assert lists[2] == [0] and lists[3] == [0]
    layer1, layer2 = (block_edges(b) for b in sample.blocks)
    assert layer2 == sorted((u, 0) for u in lists[0])  # all 3
    assert layer1 == sorted([(u, 0) for u in lists[0][:2]] + [(u, 1) for u in lists[1]] + [(0, 2), (0, 3)])
    assert_well_formed(sample, torch.tensor([0]), (-1, 2))
    # Without truncation every layer uses the whole lists (and nothing is shuffled).
    whole = DenseSampler(graph, (-1, 2), backend=backend, truncate=False).sample(torch.tensor([0]), gen(3))
    assert whole.layer_fanouts is None and node_neighbours(whole)[0] == [1, 2, 3]
    assert len(whole.blocks[0].edge_index[0]) == 3 + 2 + 1 + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_truncated_layers_use_at_most_their_fanout(backend):
    graph, edges = random_graph(num_nodes=200, max_degree=30, seed=5)
    fanouts = (8, 4, 2)
    roots = torch.tensor([7, 150, 3, 42, 99, 0])
    sample = dense(graph, fanouts, backend).sample(roots, gen(2))
    assert_well_formed(sample, roots, fanouts)
    lists = node_neighbours(sample)
    for layer, block in enumerate(sample.blocks, start=1):
        cap = fanouts[len(fanouts) - layer]
        per_dst = torch.bincount(block.edge_index[1], minlength=block.num_dst).tolist()
        dst = block.src_nodes[block.dst_start:].tolist()
        assert per_dst == [min(cap, len(lists[v])) for v in dst]
        assert set(block_edges(block)) <= edges


@pytest.mark.parametrize("degree", [3, 6])
def test_truncated_prefixes_are_uniform_subsets(degree):
    """Root of degree 6 (capped: 4 drawn) or 3 (all taken): the 2 entries layer 1 keeps are a uniform 2-subset.

    One backend (the fast one): test_backends_identical shows that both give the same samples."""
    sampler, generator = dense(hub_graph(degree), (4, 2), BACKENDS[0]), gen(11)
    pairs = Counter()
    for _ in range(1500):
        sample = sampler.sample(torch.tensor([0]), generator)
        outer = sample.blocks[0]
        kept = outer.src_nodes[outer.edge_index[0][outer.edge_index[1] == outer.num_dst - 1]]
        pairs[tuple(sorted(kept.tolist()))] += 1
    assert len(pairs) == degree * (degree - 1) // 2 and all(len(set(p)) == 2 for p in pairs)
    assert stats.chisquare(list(pairs.values())).pvalue > 1e-3


def test_shuffle_keeps_the_sampled_set():
    # The shuffle reorders each list; the set sampled per node is the one the same draws give without it.
    graph, _ = random_graph(num_nodes=200, max_degree=30, seed=8)
    roots = torch.tensor([1, 2, 3, 50, 120])
    cut = DenseSampler(graph, (9,)).sample(roots, gen(4))  # one hop: nothing to cut, nothing shuffled
    plain = DenseSampler(graph, (9,), truncate=False).sample(roots, gen(4))
    assert torch.equal(cut.edges, plain.edges)
    two = node_neighbours(DenseSampler(graph, (9, 3)).sample(roots, gen(4)))
    one = node_neighbours(DenseSampler(graph, (9, 3), truncate=False).sample(roots, gen(4)))
    for v in roots.tolist():
        assert sorted(two[v]) == sorted(one[v])


@pytest.mark.parametrize("fanouts", [(8, 4, 2), (-1, 3), (3, 3, 3), (2, 5)])
def test_layer_edges_compiled_and_torch_agree(fanouts):
    if not kernels.NUMBA_AVAILABLE:
        pytest.skip("numba not installed")
    from systems.sampling.dense import _layer_edges_torch, layer_edges

    graph, _ = random_graph(num_nodes=200, max_degree=30, seed=12)
    sample = DenseSampler(graph, fanouts).sample(torch.tensor([5, 17, 90, 130]), gen(1))
    h = sample.hop_offsets
    for layer in range(1, len(fanouts) + 1):
        for cap in (-1, 1, 2):
            if cap != -1 and layer == len(fanouts):
                continue
            node_first = h[layer + 1] - h[1] if cap != -1 else 0
            args = (sample.edges, sample.nbr_offsets, sample.layer_edge_starts[layer - 1], node_first, cap,
                    h[layer - 1], h[layer] - h[1])
            assert torch.equal(layer_edges(*args), _layer_edges_torch(*args))
