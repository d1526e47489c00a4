"""The naive layer-wise neighbourhood sampler (DGL semantics), the baseline that DENSE improves on.

Starting from the roots, every hop samples up to ``fanout`` neighbours of *every* node of the current frontier,
even of nodes already sampled at an earlier hop, and builds one bipartite :class:`LayerBlock` per hop: its
destinations are the frontier, its sources the frontier followed by the newly reached nodes (deduplicated and
relabelled per block). The sources of one hop are the frontier of the next. Blocks are returned outermost first,
so the last block's destinations are the roots, in order.

Per node, with ``deg`` neighbours and fanout ``f``:

- ``f == -1`` or ``deg <= f``: all neighbours are taken (with or without replacement);
- with replacement and ``deg > f``: ``f`` independent uniform positions in ``[0, deg)`` (MariusGNN's
  ``randint % deg``), repeats possible;
- without replacement and ``deg > f``: ``f`` distinct neighbours, every ``f``-subset equally likely
  (Floyd's algorithm, vectorized over the nodes: ``f`` steps of tensor operations, whatever the degrees).

Everything is vectorized over nodes and edges (one Python loop per hop and, without replacement, per fanout
step). All randomness comes from the ``torch.Generator`` passed to :meth:`NaiveSampler.sample`: one key per hop,
expanded into per-draw numbers by a counter-based hash (:mod:`systems.sampling.kernels`). The one-hop sample has
two implementations with identical results, tensor operations (``backend="torch"``) and a compiled numba pass
(``"numba"``, the default when numba is installed), shared with the DENSE sampler. With numba, the per-block
relabelling also runs compiled, on a reusable slot array of ``num_nodes`` int32 per concurrent call (the same
deduplication as DENSE's, so the two samplers differ only in what they sample), with the result of
:func:`relabel`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from suite.config import ALL_NEIGHBOURS
from systems.sampling import kernels
from systems.sampling.sampler import LayerBlock, SampledSubgraph, Sampler, SamplingGraph, checked_fanouts


def _segment_offsets(counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For segments of ``counts`` elements: the segment of every element and its offset within the segment."""
    total = int(counts.sum())
    segment = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts, output_size=total)
    starts = torch.cumsum(counts, 0) - counts
    offset = torch.arange(total, device=counts.device) - starts[segment]
    return segment, offset


def _floyd_positions(degrees: torch.Tensor, fanout: int, key: int) -> torch.Tensor:
    """``(len(degrees), fanout)`` distinct positions in ``[0, degree)`` per row, a uniform ``fanout``-subset.

    Floyd's algorithm, one step per column for all rows at once: for ``j = deg - fanout + i``, draw ``t`` in
    ``[0, j]``; keep ``t`` unless already chosen, else take ``j`` (never chosen before, as all earlier picks are
    ``< j``). Row ``c``'s step ``i`` uses random number ``c * fanout + i`` of ``key``. Requires
    ``degrees >= fanout``.
    """
    chosen = torch.empty((len(degrees), fanout), dtype=torch.int64, device=degrees.device)
    row_base = torch.arange(len(degrees), device=degrees.device) * fanout
    for step in range(fanout):
        upper = degrees - fanout + step  # j: inclusive upper bound of this step's draw
        draw = kernels.uniform_below(key, row_base + step, upper + 1)
        seen = (chosen[:, :step] == draw.unsqueeze(1)).any(dim=1)
        chosen[:, step] = torch.where(seen, upper, draw)
    return chosen


def sample_neighbours(
    graph: SamplingGraph, nodes: torch.Tensor, fanout: int, replace: bool, generator: torch.Generator,
    backend: str = "auto", shuffle_above: int = -1, shuffle_len: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one hop: up to ``fanout`` neighbours of every node of ``nodes``.

    Args:
        graph: the neighbour lists.
        nodes: global ids (duplicates allowed; each occurrence is sampled independently).
        fanout: neighbours per node, or -1 for all.
        replace: with replacement when ``degree > fanout`` (else distinct neighbours).
        generator: the source of randomness: one key per hop that draws (see :mod:`systems.sampling.kernels`).
        backend: ``"torch"`` (tensor operations), ``"numba"`` (one compiled pass, same result) or ``"auto"``.
        shuffle_above, shuffle_len: DENSE's reordering of the samples of more than ``shuffle_above`` neighbours
            (:func:`systems.sampling.kernels.shuffle_key`); -1 (the naive sampler): none.

    Returns:
        ``(segment, neighbours)``: for every sampled edge, the index into ``nodes`` of its destination and the
        global id of the neighbour, grouped by ``segment`` in increasing order.
    """
    nodes = nodes.to(torch.int64)
    if kernels.resolve_backend(backend) == "numba" and nodes.device.type == "cpu":
        return kernels.sample_hop(graph.indptr, graph.indices, nodes.contiguous(), fanout, replace, generator,
                                  shuffle_above, shuffle_len)
    degrees = graph.degrees(nodes)
    starts = graph.indptr[nodes]
    if fanout == ALL_NEIGHBOURS:
        capped = torch.zeros_like(degrees, dtype=torch.bool)
    else:
        capped = degrees > fanout
    counts = torch.where(capped, torch.full_like(degrees, max(fanout, 0)), degrees)
    segment, offset = _segment_offsets(counts)
    positions = starts[segment] + offset  # all-neighbour rows: their neighbours in order
    capped_rows = capped.nonzero().view(-1)
    shuffled_rows = (counts > shuffle_above).nonzero().view(-1) if shuffle_above >= 0 else capped_rows[:0]
    key = kernels.draw_key(generator) if len(capped_rows) or len(shuffled_rows) else 0
    if len(capped_rows):
        capped_edges = capped[segment].nonzero().view(-1)
        if replace:
            # Capped edges: `fanout` consecutive slots per capped row, rows in increasing order, so the e-th
            # capped edge is draw e % fanout of capped row e // fanout: random number e.
            numbers = torch.arange(len(capped_edges), device=nodes.device)
            local = kernels.uniform_below(key, numbers, degrees[segment[capped_edges]])
        else:
            local = _floyd_positions(degrees[capped_rows], fanout, key).view(-1)
        positions[capped_edges] = starts[segment[capped_edges]] + local
    if len(shuffled_rows):
        _partial_shuffle(positions, torch.cumsum(counts, 0) - counts, counts, shuffled_rows, shuffle_len,
                         kernels.shuffle_key(key))
    return segment, torch.index_select(graph.indices, 0, positions)


def _partial_shuffle(positions: torch.Tensor, first: torch.Tensor, counts: torch.Tensor, rows: torch.Tensor,
                     length: int, key: int) -> None:
    """In place, the partial Fisher-Yates shuffle of :func:`systems.sampling.kernels.shuffle_key` for the segments
    ``rows`` (segment ``r``: ``positions[first[r]:first[r] + counts[r]]``), vectorized over the segments: step
    ``j`` swaps entry ``j`` of every segment still shuffling with a random later entry."""
    first, counts = first[rows], counts[rows]
    steps = torch.clamp(counts - 1, max=length)
    base = torch.arange(len(rows), device=positions.device) * length
    for j in range(int(steps.max()) if len(rows) else 0):
        active = (steps > j).nonzero().view(-1)
        count = counts[active]
        here = first[active] + j
        there = here + kernels.uniform_below(key, base[active] + j, count - j)
        mine, theirs = positions[here], positions[there]
        positions[there] = mine
        positions[here] = theirs


def relabel(dst_nodes: torch.Tensor, neighbours: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Local ids of one block: ``dst_nodes`` (unique) first, then new neighbours in order of first appearance.

    Args:
        dst_nodes: the block's destinations, unique global ids.
        neighbours: global ids of sampled neighbours (any order, repeats allowed).

    Returns:
        ``(src_nodes, local)``: the block's source nodes (global ids, ``src_nodes[:len(dst_nodes)] == dst_nodes``)
        and the local id in ``src_nodes`` of every entry of ``neighbours``.
    """
    combined = torch.cat([dst_nodes, neighbours])
    unique, inverse = torch.unique(combined, return_inverse=True)
    position = torch.arange(len(combined), device=combined.device)
    first = torch.full((len(unique),), len(combined), dtype=torch.int64, device=combined.device)
    first.scatter_reduce_(0, inverse, position, reduce="amin")
    order = torch.argsort(first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(order), device=order.device)
    return unique[order], rank[inverse[len(dst_nodes):]]


class NaiveSampler(Sampler):
    """Layer-wise sampler with DGL semantics: every frontier node is re-sampled at every hop.

    Args:
        graph: neighbour lists (one direction, from :meth:`SamplingGraph.from_store`).
        fanouts: neighbours per node per hop; ``fanouts[0]`` is the first hop from the roots (the innermost layer),
            ``fanouts[-1]`` the outermost; -1 = all neighbours. Empty: no blocks (the roots only).
        replace: sample with replacement when a node's degree exceeds the fanout (MariusGNN) instead of
            choosing distinct neighbours.
        backend: one-hop sampling code: ``"numba"``, ``"torch"`` or ``"auto"`` (see
            :func:`systems.sampling.kernels.resolve_backend`); both give identical samples.

    Example::

        sampler = NaiveSampler(SamplingGraph.from_store(store, "in"), (25, 10))
        sample = sampler.sample(torch.tensor([0, 5]), torch.Generator().manual_seed(0))
    """

    label = "naive (layer-wise, DGL-style)"
    """How figures name it."""
    marker = "o"
    """Its marker in figures."""
    variants = {"torch": {"backend": "torch"}}
    """The sampling figure also runs its tensor-operations backend (``naive-torch``)."""

    def __init__(self, graph: SamplingGraph, fanouts: Sequence[int], *, replace: bool = False,
                 backend: str = "auto") -> None:
        fanouts = checked_fanouts(fanouts)
        self.graph = graph
        self.fanouts = fanouts
        self.replace = replace
        self.backend = kernels.resolve_backend(backend)
        self._workspaces = kernels.WorkspacePool(graph.num_nodes) if self.backend == "numba" else None

    def sample(self, roots: torch.Tensor, generator: torch.Generator) -> SampledSubgraph:
        """Sample the multi-hop neighbourhood of ``roots`` (unique global ids).

        Args:
            roots: the mini-batch's nodes; they are the last block's destinations, in this order.
            generator: the only source of randomness (same state, same sample).

        Returns:
            The blocks, outermost first, and the number of sampled edges.
        """
        roots = roots.to(torch.int64)
        frontier = roots
        blocks: list[LayerBlock] = []
        if self._workspaces is not None and self.fanouts:
            # Compiled: sample and relabel with a reusable slot array (a failed call drops its workspace).
            frontier = frontier.to("cpu").contiguous()  # ids checked by the first hop, before any slot is written
            workspace = self._workspaces.acquire()
            for fanout in self.fanouts:
                src_nodes, edge_index = kernels.naive_hop(self.graph.indptr, self.graph.indices, frontier, fanout,
                                                          self.replace, generator, workspace)
                blocks.append(LayerBlock(src_nodes, len(frontier), edge_index))
                frontier = src_nodes
            self._workspaces.release(workspace)
        else:
            for fanout in self.fanouts:
                segment, neighbours = sample_neighbours(self.graph, frontier, fanout, self.replace, generator,
                                                        "torch")
                src_nodes, local = relabel(frontier, neighbours)
                blocks.append(LayerBlock(src_nodes, len(frontier), torch.stack([local, segment])))
                frontier = src_nodes
        blocks.reverse()
        return SampledSubgraph(roots, tuple(blocks), sum(b.edge_index.shape[1] for b in blocks))


__all__ = ["NaiveSampler", "relabel", "sample_neighbours"]
