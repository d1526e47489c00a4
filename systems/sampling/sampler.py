"""Sampler contract and the structures samplers produce.

A sampler is built once per run from the graph (``SamplerClass(graph, fanouts, replace=...)``; the direction is
chosen when the :class:`SamplingGraph` is loaded) and called per mini-batch: ``sample(roots, generator) -> SampledSubgraph``. Randomness comes only from the
explicit ``torch.Generator``: the same generator state gives the same sample.

Two layouts implement :class:`SampledSubgraph`:

- layer-wise blocks (:class:`LayerBlock`, the naive sampler, DGL semantics): one bipartite block per layer;
- DENSE (issue 4): one node list with per-hop deltas.

Models consume either through ``SampledSubgraph``'s fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from suite.config import ALL_NEIGHBOURS
from suite.data import CSR, GraphStore


@dataclass(frozen=True)
class LayerBlock:
    """One layer of message passing, as a bipartite graph from source nodes to destination nodes.

    Attributes:
        src_nodes: global ids of the block's input rows; the destinations are the ``num_dst`` consecutive input
            rows from ``dst_start`` (the naive layout puts them first, ``dst_start = 0``; DENSE puts them last).
            A layer's output rows are exactly its destinations, in order.
        num_dst: number of destination nodes.
        edge_index: ``(2, e)`` int64 local ids: row 0 indexes ``src_nodes``, row 1 indexes the destinations
            (0 is the first destination).
        dst_start: index of the first destination among the input rows.
    """

    src_nodes: torch.Tensor
    num_dst: int
    edge_index: torch.Tensor
    dst_start: int = 0

    def dst_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The rows of ``x`` (indexed like ``src_nodes``) that are the destinations (a view)."""
        return x[self.dst_start : self.dst_start + self.num_dst]

    def to(self, device: torch.device, non_blocking: bool = False) -> "LayerBlock":
        """The block on ``device``."""
        return LayerBlock(self.src_nodes.to(device, non_blocking=non_blocking), self.num_dst,
                          self.edge_index.to(device, non_blocking=non_blocking), self.dst_start)


@dataclass(frozen=True)
class SampledSubgraph:
    """A multi-hop sample around ``roots``.

    Attributes:
        roots: global ids of the mini-batch's roots.
        blocks: layer-wise blocks, outermost layer first: ``blocks[0]`` reads the input features of
            ``blocks[0].src_nodes``; the last block's destinations are the roots, in order. Empty for models that
            use no neighbours.
        num_sampled_edges: edges sampled in total (the throughput unit ``sampled edges/s``).
        root_start: index of the first root among the input rows; the roots are consecutive from there, in
            order (0 in the layer-wise layout, ``len(input_nodes) - len(roots)`` in DENSE's).
    """

    roots: torch.Tensor
    blocks: tuple[LayerBlock, ...]
    num_sampled_edges: int
    root_start: int = 0

    @property
    def input_nodes(self) -> torch.Tensor:
        """Global ids whose features the model reads (``blocks[0].src_nodes``, or the roots without blocks)."""
        return self.blocks[0].src_nodes if self.blocks else self.roots

    def to(self, device: torch.device, non_blocking: bool = False) -> "SampledSubgraph":
        """The sample on ``device``."""
        return SampledSubgraph(self.roots.to(device, non_blocking=non_blocking),
                               tuple(b.to(device, non_blocking) for b in self.blocks), self.num_sampled_edges,
                               self.root_start)


class SamplingGraph:
    """The neighbour lists samplers read: in-memory CSR tensors for one direction (``in``, ``out`` or ``both``).

    ``in``: a node's neighbours are the sources of its in-edges (messages flow along edges); ``out``: the
    destinations of its out-edges; ``both``: the union (concatenated lists). ``relations``, when given, is the
    relation type of each entry of ``indices`` (samplers ignore it; relation-aware encoders look types up in it).
    """

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, relations: torch.Tensor | None = None):
        self.indptr = indptr.to(torch.int64)
        self.indices = indices.to(torch.int64)
        self.num_nodes = len(indptr) - 1
        if relations is not None and len(relations) != len(self.indices):
            raise ValueError(f"relations: {len(relations)} types for {len(self.indices)} neighbours")
        self.relations = relations.to(torch.int64) if relations is not None else None

    @classmethod
    def from_store(cls, store: GraphStore, direction: str = "in") -> "SamplingGraph":
        """Load the CSR(s) of ``direction`` from a store into memory."""
        if direction in ("in", "out"):
            csr = store.csr(direction)
            return cls(csr.indptr.clone(), csr.indices.clone())
        if direction == "both":
            return cls.union(store.csr("in"), store.csr("out"))
        raise ValueError(f"direction must be 'in', 'out' or 'both', got {direction!r}")

    @classmethod
    def union(cls, first: CSR, second: CSR) -> "SamplingGraph":
        """Concatenate two CSRs row by row (neighbours of ``first`` then of ``second``)."""
        deg_a, deg_b = first.degrees(), second.degrees()
        indptr = torch.zeros(len(deg_a) + 1, dtype=torch.int64)
        torch.cumsum(deg_a + deg_b, 0, out=indptr[1:])
        rows_a = torch.repeat_interleave(torch.arange(len(deg_a)), deg_a)
        rows_b = torch.repeat_interleave(torch.arange(len(deg_b)), deg_b)
        pos_a = indptr[rows_a] + torch.arange(len(rows_a)) - first.indptr[rows_a]
        pos_b = indptr[rows_b] + deg_a[rows_b] + torch.arange(len(rows_b)) - second.indptr[rows_b]
        indices = torch.empty(int(indptr[-1]), dtype=torch.int64)
        indices[pos_a] = first.indices.to(torch.int64)
        indices[pos_b] = second.indices.to(torch.int64)
        return cls(indptr, indices)

    def degrees(self, nodes: torch.Tensor) -> torch.Tensor:
        """Degrees of ``nodes``."""
        return self.indptr[nodes + 1] - self.indptr[nodes]


@dataclass(frozen=True)
class SampleCounts:
    """What one sampled batch is counted as (benchmarks read it after the clock stops).

    Attributes:
        sampled_edges: edges sampled in total.
        unique_nodes_per_hop: ``[roots, delta_1, ..., delta_K]``, the nodes first reached at each hop (for a
            layer-wise sampler, the growth of its frontier).
        one_hop_calls: nodes whose neighbour lists were sampled, over all hops.
    """

    sampled_edges: int
    unique_nodes_per_hop: list[int]
    one_hop_calls: int


class Sampler:
    """Base of every registered sampler: ``SamplerClass(graph, fanouts, replace=...)``, then ``sample(roots,
    generator)`` per mini-batch.

    A subclass sets ``label`` and ``marker`` (how figures draw it) and implements :meth:`sample`. What a benchmark
    (the sampling figure, ``experiments/figures/sampling.py``) needs beyond that has defaults here, those of a
    layer-wise sampler (its blocks counted as such, its whole frontier sampled again at every hop); a sampler
    overrides what differs.
    """

    label: ClassVar[str] = ""
    """How figures name it (empty: its registered name)."""
    marker: ClassVar[str] = ""
    """Its marker in figures (empty: the next free one)."""
    variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    """Constructor options a benchmark also runs it with, by suffix: ``{"torch": {"backend": "torch"}}`` adds the
    row ``<name>-torch``."""

    def sample(self, roots: torch.Tensor, generator: torch.Generator) -> SampledSubgraph:
        """Sample the multi-hop neighbourhood of ``roots`` (fanouts outermost last; -1 = all neighbours)."""
        raise NotImplementedError

    @classmethod
    def missing_reason(cls) -> str | None:
        """Why this sampler cannot run here (a package not installed), or None when it can."""
        return None

    @classmethod
    def implementation(cls) -> str:
        """What implements it, as benchmarks record it (its module; the instance's ``backend`` is added)."""
        return cls.__module__

    def timed_sample(self, roots: torch.Tensor, seed: int) -> Any:
        """One call as a benchmark times it: the sample of ``roots`` from a generator seeded with ``seed``."""
        return self.sample(roots, torch.Generator().manual_seed(seed))

    @classmethod
    def counts(cls, output: Any) -> SampleCounts:
        """The counts of one output of :meth:`timed_sample`: for layer-wise blocks, the frontier's growth per hop,
        every frontier node counted at every hop."""
        hops = list(reversed(output.blocks))  # innermost (destinations = roots) first
        frontier = [len(output.roots)] + [len(block.src_nodes) for block in hops]
        deltas = [frontier[0]] + [b - a for a, b in zip(frontier, frontier[1:])]
        return SampleCounts(int(output.num_sampled_edges), deltas, sum(int(block.num_dst) for block in hops))

    @staticmethod
    def nodes_to_sample_next(counts: SampleCounts) -> int:
        """From the counts at K - 1 layers, the nodes whose neighbours hop K samples (a memory estimate): a
        layer-wise sampler's whole frontier (an upper bound for any sampler)."""
        return sum(counts.unique_nodes_per_hop)


class RootsOnly(Sampler):
    """The sample of a model that reads no neighbours (``uses_neighbours = False``): the roots alone, no blocks,
    nothing drawn; it needs no graph (the disk system builds none for such a model)."""

    label = "roots only"

    def sample(self, roots: torch.Tensor, generator: torch.Generator) -> SampledSubgraph:
        """The roots, without hops (``generator`` is left untouched)."""
        return SampledSubgraph(roots, (), 0)


def checked_fanouts(fanouts: Sequence[int]) -> tuple[int, ...]:
    """``fanouts`` as a tuple of ints, each > 0 or -1 (all neighbours).

    Raises:
        ValueError: a fanout of 0 or below -1.
    """
    fanouts = tuple(int(f) for f in fanouts)
    if any(f == 0 or f < ALL_NEIGHBOURS for f in fanouts):
        raise ValueError(f"fanouts must be > 0 or -1 (all neighbours), got {list(fanouts)}")
    return fanouts

