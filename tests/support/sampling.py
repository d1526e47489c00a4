"""Sampler test helpers: a hand-checked tiny graph, random and hub graphs, a directed store, generators, and a
DENSE-like layout built by hand from a layer-wise sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from suite.data import create_store
from suite.data.csr import EdgeChunk, write_csrs
from suite.data.store import GraphStore
from systems.sampling.sampler import SamplingGraph
from systems.sampling.sampler import LayerBlock, SampledSubgraph
from tests.support.graphs import graph_from_lists


# Neighbour lists of a tiny graph (checked by hand in tests/systems/sampling/test_naive.py).
#   0: [1, 2]    1: [0, 2, 3]    2: [0]    3: []    4: [3]
TINY = [[1, 2], [0, 2, 3], [0], [], [3]]


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_graph(num_nodes: int = 60, max_degree: int = 15, seed: int = 0) -> tuple[SamplingGraph, set]:
    """A random graph without repeated neighbours; returns it and its edge set ``{(neighbour, node)}``."""
    rng = np.random.default_rng(seed)
    lists = [sorted(rng.choice(num_nodes, size=rng.integers(0, max_degree + 1), replace=False).tolist())
             for _ in range(num_nodes)]
    edges = {(u, v) for v, row in enumerate(lists) for u in row}
    return graph_from_lists(lists), edges


def hub_graph(degree: int) -> SamplingGraph:
    """Node 0 has neighbours 1..degree; nothing else has neighbours."""
    return graph_from_lists([list(range(1, degree + 1))] + [[] for _ in range(degree)])


# ------------------------------------------------------------------ directions
def directed_store(path: Path) -> GraphStore:
    """Directed edges 0->1, 2->1, 1->3, 3->0, 1->0."""
    src, dst = np.array([0, 2, 1, 3, 1]), np.array([1, 1, 3, 0, 0])
    with create_store(path) as writer:
        num_edges = write_csrs(writer, [EdgeChunk(src, dst)], 4)
        writer.finalize(name="directed", num_nodes=4, num_edges=num_edges, directed=True)
    return GraphStore.open(path)


def destinations_last(sample: SampledSubgraph, generator: torch.Generator | None = None) -> SampledSubgraph:
    """The same blocks relabelled into DENSE's layout: every block's destinations are its last input rows.

    Input rows of the outermost block become ``[new_K | ... | new_1 | roots]`` (``new_k``: the rows a naive block
    adds to its destinations), so every block's destinations are the input rows of the next block, last, in
    the next block's row order, and the roots come last, in order. With ``generator``, the new rows of every
    block and the columns of every ``edge_index`` are shuffled too (the layout must not depend on either order).

    Args:
        sample: a layer-wise sample (``dst_start == 0`` in every block, as the naive sampler's).
        generator: optional source of the shuffles.

    Returns:
        A sample with the same node set and edges, ``dst_start = len(src_nodes) - num_dst`` per block and
        ``root_start = len(input_nodes) - len(roots)``.
    """
    assert all(block.dst_start == 0 for block in sample.blocks)
    dst_order = torch.arange(len(sample.roots))  # new destination position -> old destination row
    blocks: list[LayerBlock] = []
    for block in reversed(sample.blocks):
        num_src, num_dst = len(block.src_nodes), block.num_dst
        new_rows = torch.arange(num_dst, num_src)
        if generator is not None:
            new_rows = new_rows[torch.randperm(len(new_rows), generator=generator)]
        order = torch.cat([new_rows, dst_order])  # new input row -> old input row
        position = torch.empty_like(order)
        position[order] = torch.arange(num_src)
        src, dst = block.edge_index
        edge_index = torch.stack([position[src], position[dst] - (num_src - num_dst)])
        if generator is not None:
            edge_index = edge_index[:, torch.randperm(edge_index.shape[1], generator=generator)]
        blocks.append(LayerBlock(block.src_nodes[order], num_dst, edge_index, num_src - num_dst))
        dst_order = order
    blocks.reverse()
    return SampledSubgraph(sample.roots, tuple(blocks), sample.num_sampled_edges,
                           len(blocks[0].src_nodes) - len(sample.roots) if blocks else 0)


__all__ = ["TINY", "destinations_last", "directed_store", "gen", "hub_graph", "random_graph"]
