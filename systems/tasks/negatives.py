"""Negative sampling for link-prediction training, as Marius does it: chunked, uniform and by degree.

The ``B`` positive edges of a batch are split into ``C`` chunks of ``ceil(B / C)`` consecutive edges (the last
may be shorter). Every chunk draws one set of ``K`` corrupting nodes per side: *tail* negatives replace the
destinations of its positives, *head* negatives their sources, and every positive of the chunk is scored
against the same ``K`` (one batched matrix product per side instead of ``B * K`` gathers).

Of each set, ``round(K * degree_fraction)`` nodes are drawn by degree: the corrupted endpoint of a uniformly
random training edge (so with probability proportional to in-degree for tails, out-degree for heads, in the
training edges); the other ones uniformly from all nodes. Both with replacement, from an explicit generator.
Training negatives are not filtered (a sampled negative may be a true edge, as in Marius).

A disk system's partition buffer draws them from the nodes it holds and the edges among them
(``nodes`` of :class:`NegativeSampler`). :meth:`NegativeSampler.within` gives a system that holds every node the
same distribution over a node subset (:func:`node_subset`): uniform ones from the subset, by-degree ones from the
training edges with both endpoints in it (``training.negatives.subset_fraction``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.nn import functional as F


@dataclass(frozen=True)
class ChunkedNegatives:
    """The negatives of one batch.

    Attributes:
        tails: ``(C, K)`` global ids replacing the destinations of the positives of each chunk.
        heads: ``(C, K)`` global ids replacing their sources.
        chunk_size: positives per chunk (``ceil(B / C)``); positive ``i`` belongs to chunk ``i // chunk_size``.
    """

    tails: torch.Tensor
    heads: torch.Tensor
    chunk_size: int


def chunking(num_positives: int, num_chunks: int) -> tuple[int, int]:
    """``(chunks, chunk_size)`` of ``num_positives`` split into at most ``num_chunks`` chunks of equal size."""
    if num_positives <= 0:
        return 0, 1
    chunk_size = math.ceil(num_positives / min(num_chunks, num_positives))
    return math.ceil(num_positives / chunk_size), chunk_size


class NegativeSampler:
    """Draws chunked negatives, uniformly and by degree.

    Args:
        num_nodes: nodes to draw from uniformly.
        heads: ``(m,)`` sources of the training edges (head negatives by degree are drawn from them).
        tails: ``(m,)`` destinations of the training edges (tail negatives by degree).
        num_chunks: chunks per batch.
        negatives_per_positive: ``K``, negatives per chunk and side.
        degree_fraction: fraction of the ``K`` drawn by degree.
        nodes: the ids uniform negatives are drawn from (default ``range(num_nodes)``; a partition buffer passes
            the nodes it holds, and ``num_nodes`` must be their count).
    """

    def __init__(self, num_nodes: int, heads: torch.Tensor, tails: torch.Tensor, num_chunks: int,
                 negatives_per_positive: int, degree_fraction: float, nodes: torch.Tensor | None = None):
        if nodes is not None and len(nodes) != num_nodes:
            raise ValueError(f"nodes: {len(nodes)} ids for num_nodes={num_nodes}")
        self.num_nodes = num_nodes
        self.nodes = nodes
        self.heads = heads.to(torch.int64)
        self.tails = tails.to(torch.int64)
        self.num_chunks = num_chunks
        self.num_negatives = negatives_per_positive
        self.num_by_degree = round(negatives_per_positive * degree_fraction) if len(self.heads) else 0

    def _side(self, endpoints: torch.Tensor, chunks: int, generator: torch.Generator) -> torch.Tensor:
        uniform = torch.randint(self.num_nodes, (chunks, self.num_negatives - self.num_by_degree),
                                generator=generator)
        if self.nodes is not None:
            uniform = self.nodes[uniform]
        if self.num_by_degree == 0:
            return uniform
        edges = torch.randint(len(endpoints), (chunks, self.num_by_degree), generator=generator)
        return torch.cat([uniform, endpoints[edges]], dim=1)

    def within(self, subset: torch.Tensor) -> "NegativeSampler":
        """This sampler restricted to the node ids ``subset`` (distinct): uniform negatives from ``subset``, the
        by-degree ones from the training edges whose endpoints are both in it (as a partition buffer holding
        ``subset`` draws them); with no such edge, all of them uniform. Only for a sampler over all nodes."""
        if self.nodes is not None:
            raise ValueError("within: the sampler is already restricted to a node subset")
        heads, tails = self.heads, self.tails
        if self.num_by_degree:
            member = torch.zeros(self.num_nodes, dtype=torch.bool)
            member[subset] = True
            inside = member[heads] & member[tails]
            heads, tails = heads[inside], tails[inside]
        return NegativeSampler(len(subset), heads, tails, self.num_chunks, self.num_negatives,
                               self.num_by_degree / self.num_negatives, nodes=subset)

    def sample(self, num_positives: int, generator: torch.Generator) -> ChunkedNegatives:
        """The negatives of a batch of ``num_positives`` positive edges."""
        chunks, chunk_size = chunking(num_positives, self.num_chunks)
        tails = self._side(self.tails, chunks, generator)
        heads = self._side(self.heads, chunks, generator)
        return ChunkedNegatives(tails, heads, chunk_size)


def node_subset(num_nodes: int, fraction: float, generator: torch.Generator) -> torch.Tensor:
    """``round(fraction * num_nodes)`` (at least 1) distinct node ids drawn uniformly without replacement, sorted."""
    size = max(1, round(fraction * num_nodes))
    return torch.randperm(num_nodes, generator=generator)[:size].sort().values


def chunked_scores(queries: torch.Tensor, negatives: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """Scores of every query against its chunk's negatives: ``(B, K)``, one batched matrix product.

    Args:
        queries: ``(B, d)``; query ``i`` belongs to chunk ``i // chunk_size``.
        negatives: ``(C, K, d)`` the embeddings of each chunk's negatives, ``C = ceil(B / chunk_size)``.
        chunk_size: queries per chunk.
    """
    chunks, _, dim = negatives.shape
    count = queries.shape[0]
    if chunks * chunk_size < count:
        raise ValueError(f"{chunks} chunks of {chunk_size} cannot hold {count} queries")
    padded = F.pad(queries, (0, 0, 0, chunks * chunk_size - count))
    scores = torch.bmm(padded.view(chunks, chunk_size, dim), negatives.transpose(1, 2))
    return scores.reshape(chunks * chunk_size, -1)[:count]


__all__ = ["ChunkedNegatives", "NegativeSampler", "chunked_scores", "chunking", "node_subset"]
