"""Edge decoders of link prediction: DistMult, ComplEx and dot product, with their relation embeddings.

They are declared in the ``decoders`` table of :mod:`systems.plugins` (:data:`suite.registry.DECODERS`) as ``distmult``,
``complex``, ``dot``, ``transe``, ``transe_l1`` and ``transe_l2``; each entry is a builder ``build(num_relations: int, dim: int, inverse_relations: bool = False) -> Decoder``.

Every decoder scores a triple ``(h, r, t)`` as a dot product of a *query* with a candidate embedding, in both
directions:

    score(h, r, t) = <tail_query(h, r), t> = <head_query(t, r), h>

so ranking all tails of ``(h, r, ?)`` is one matrix product ``tail_query(h, r) @ Z^T`` and scoring a chunk of
shared negatives is one batched product (Marius's chunked scoring).

- DistMult (Yang et al., 2015): ``score = sum_i h_i r_i t_i``; ``tail_query = h * r``, ``head_query = t * r``.
- ComplEx (Trouillon et al., 2016): embeddings are complex vectors stored as ``[real | imaginary]`` halves
  (``dim`` must be even); ``score = Re(sum_i h_i r_i conj(t_i))``; ``tail_query = h * r``,
  ``head_query = t * conj(r)`` (complex products).
- Dot: ``score = <h, t>``; no relation parameters (untyped graphs).
- TransE (Bordes et al., 2013): ``score = -||h + r - t||_p`` (``transe``: L1, ``transe_l2``: L2);
  ``tail_query = h + r``, ``head_query = t - r``, and a candidate's score is the negated distance to the query
  rather than a dot product (:attr:`Decoder.dot_product` is False: scores go through :meth:`Decoder.pairwise`,
  ``torch.cdist`` or, for L1, :func:`~systems.models.distance_kernels.l1_distances`, and the losses through autograd instead of the hand-written dot-product backward).

With ``inverse_relations`` (Marius's inverse edges; "reciprocal" relations in Lacroix et al., 2018), head queries
use a second, separate embedding per relation (``r^-1``, rows ``num_relations..2*num_relations-1``): the model
then scores ``(h, r, t)`` as ``<tail_query(h, r), t>`` when predicting tails and as ``<head_query(t, r^-1), h>``
when predicting heads, each direction with its own parameters.

Relation embeddings start at the identity of the relation operator (DistMult: ones; ComplEx: ``1 + 0i``;
TransE: zeros), so an untrained decoder scores like the dot product (TransE: the negated distance) of the
embeddings.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from suite.errors import ConfigError
from suite.registry import DECODERS
from systems.models.distance_kernels import l1_distances
from systems.models.row_kernels import gather_rows


class Decoder(nn.Module):
    """Base class: scores of triples as dot products of a relation-dependent query with the other endpoint.

    Args:
        num_relations: relation types.
        dim: embedding width.
    """

    dot_product = True
    """Whether ``score = <query, candidate>`` (the fused softmax losses and matrix-product scoring rely on it)."""
    relation_dropout = 0.0
    """Dropout rate on the relation embeddings in training (:meth:`relation_table`; ``model.relation_dropout``)."""

    def __init__(self, num_relations: int, dim: int, inverse_relations: bool = False):
        super().__init__()
        self.num_relations = num_relations
        self.dim = dim
        self.inverse_relations = inverse_relations

    def relation_rows(self) -> int:
        """Rows of the relation table: one per relation, twice as many with inverse relations."""
        return self.num_relations * (2 if self.inverse_relations else 1)

    def relation_table(self) -> torch.Tensor:
        """The relation embeddings scores use: in training with ``relation_dropout`` > 0, the table after dropout
        (LibKGE's relation-embedder dropout; a fresh mask on every call), otherwise the table itself."""
        if self.training and self.relation_dropout > 0:
            return F.dropout(self.relations, self.relation_dropout, training=True)
        return self.relations

    def relation_rows_of(self, relations: torch.Tensor) -> torch.Tensor:
        """The rows of :meth:`relation_table` for ``relations`` (any shape), through ``index_select`` with a
        one-pass backward (:func:`systems.models.row_kernels.gather_rows`), several times cheaper than advanced
        indexing's accumulating ``index_put_``."""
        return gather_rows(self.relation_table(), relations)

    def inverse(self, relations: torch.Tensor) -> torch.Tensor:
        """The relation rows head queries use: ``r`` itself, or ``r + num_relations`` with inverse relations."""
        return relations + self.num_relations if self.inverse_relations else relations

    def tail_query(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``(B, dim)`` queries ``q`` with ``score(h, r, t) = <q, t>``."""
        raise NotImplementedError

    def head_query(self, tails: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``(B, dim)`` queries ``q`` with ``score(h, r, t) = <q, h>``."""
        raise NotImplementedError

    def pair_scores(self, queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """Scores of aligned pairs: ``(..., d) x (..., d) -> (...)``."""
        return (queries * candidates).sum(dim=-1)

    def pairwise(self, queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """Scores of every query against every candidate of the same batch: ``(C, B, d) x (C, K, d) -> (C, B, K)``."""
        return torch.bmm(queries, candidates.transpose(1, 2))

    def all_scores(self, queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(B, d) x (N, d) -> (B, N)``: every query against every candidate (ranking, all-entity training)."""
        return queries @ candidates.T if self.dot_product else self.pairwise(queries[None], candidates[None])[0]

    def batched_scores(self, queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``(B, d) x (B, K, d) -> (B, K)``: each query against its own candidates."""
        return self.pairwise(queries.unsqueeze(1), candidates).squeeze(1)

    def chunk_scores(self, queries: torch.Tensor, negatives: torch.Tensor, chunk_size: int) -> torch.Tensor:
        """``(B, d) x (C, K, d) -> (B, K)``: query ``i`` against the negatives of chunk ``i // chunk_size``."""
        chunks, _, dim = negatives.shape
        count = queries.shape[0]
        if chunks * chunk_size < count:
            raise ValueError(f"{chunks} chunks of {chunk_size} cannot hold {count} queries")
        padded = torch.nn.functional.pad(queries, (0, 0, 0, chunks * chunk_size - count))
        scores = self.pairwise(padded.view(chunks, chunk_size, dim), negatives)
        return scores.reshape(chunks * chunk_size, -1)[:count]

    def forward(self, heads: torch.Tensor, relations: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        """``(B,)`` scores of the triples ``(heads[b], relations[b], tails[b])`` (embeddings and relation ids), as
        tail predictions."""
        return self.pair_scores(self.tail_query(heads, relations), tails)


class DistMult(Decoder):
    """DistMult: ``score = sum_i h_i r_i t_i`` (symmetric in ``h`` and ``t``)."""

    def __init__(self, num_relations: int, dim: int, inverse_relations: bool = False):
        super().__init__(num_relations, dim, inverse_relations)
        self.relations = nn.Parameter(torch.ones(self.relation_rows(), dim))

    def tail_query(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``h * r``."""
        return heads * self.relation_rows_of(relations)

    def head_query(self, tails: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``t * r`` (``t * r^-1`` with inverse relations)."""
        return tails * self.relation_rows_of(self.inverse(relations))


class ComplEx(Decoder):
    """ComplEx: ``score = Re(sum_i h_i r_i conj(t_i))``, complex vectors stored as ``[real | imaginary]``."""

    def __init__(self, num_relations: int, dim: int, inverse_relations: bool = False):
        if dim % 2:
            raise ConfigError(f"model.embedding_dim: ComplEx needs an even width (real and imaginary halves), "
                              f"got {dim}")
        super().__init__(num_relations, dim, inverse_relations)
        initial = torch.zeros(self.relation_rows(), dim)
        initial[:, : dim // 2] = 1.0
        self.relations = nn.Parameter(initial)

    def _multiply(self, x: torch.Tensor, relations: torch.Tensor, conjugate: bool) -> torch.Tensor:
        half = self.dim // 2
        rel = self.relation_rows_of(relations)
        x_re, x_im = x[..., :half], x[..., half:]
        r_re, r_im = rel[..., :half], rel[..., half:]
        if conjugate:
            r_im = -r_im
        return torch.cat([x_re * r_re - x_im * r_im, x_re * r_im + x_im * r_re], dim=-1)

    def tail_query(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``h * r`` (complex): ``<h r, t>_real = Re(h r conj(t))``."""
        return self._multiply(heads, relations, conjugate=False)

    def head_query(self, tails: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``t * conj(r)`` (complex): ``<t conj(r), h>_real = Re(h r conj(t))`` (``r^-1`` with inverse relations)."""
        return self._multiply(tails, self.inverse(relations), conjugate=True)


class Dot(Decoder):
    """Dot product ``<h, t>``; relation types are ignored."""

    def tail_query(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``h``."""
        return heads

    def head_query(self, tails: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``t``."""
        return tails


class TransE(Decoder):
    """TransE: ``score = -||h + r - t||_p`` with ``p`` = :attr:`norm` (1 or 2)."""

    dot_product = False
    norm = 1

    def __init__(self, num_relations: int, dim: int, inverse_relations: bool = False):
        super().__init__(num_relations, dim, inverse_relations)
        self.relations = nn.Parameter(torch.zeros(self.relation_rows(), dim))

    def tail_query(self, heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``h + r``."""
        return heads + self.relation_rows_of(relations)

    def head_query(self, tails: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        """``t - r`` (``t + r^-1`` with inverse relations: the tail query of the inverse triple)."""
        if self.inverse_relations:
            return tails + self.relation_rows_of(self.inverse(relations))
        return tails - self.relation_rows_of(relations)

    def pair_scores(self, queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``-||q - c||_p``."""
        return -torch.linalg.vector_norm(queries - candidates, ord=self.norm, dim=-1)

    def pairwise(self, queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``-cdist(q, c, p)`` (distances computed without materializing the differences; L1 through
        :func:`systems.models.distance_kernels.l1_distances`, whose backward is several times cheaper)."""
        if self.norm == 1:
            return -l1_distances(queries, candidates)
        return -torch.cdist(queries, candidates, p=float(self.norm))


class TransEL2(TransE):
    """TransE with the Euclidean distance."""

    norm = 2




def build_decoder(name: str, num_relations: int, dim: int, inverse_relations: bool = False,
                  relation_dropout: float = 0.0) -> Decoder:
    """The registered decoder ``name`` (ConfigError naming the field and the known ones if unknown), with dropout
    of rate ``relation_dropout`` on its relation embeddings in training."""
    if name not in DECODERS:
        raise ConfigError(f"model.decoder: unknown decoder {name!r} (known: {', '.join(DECODERS.names())})")
    decoder = DECODERS.get(name)(num_relations, dim, inverse_relations)
    if relation_dropout > 0 and not hasattr(decoder, "relations"):
        raise ConfigError(f"model.relation_dropout: decoder {name!r} has no relation embeddings to drop (leave it 0)")
    decoder.relation_dropout = relation_dropout
    return decoder


__all__ = ["ComplEx", "Decoder", "DistMult", "Dot", "TransE", "TransEL2", "build_decoder"]
