"""KvsAll training (``training.negatives: kvsall``; LibKGE's KvsAll, PyKEEN's LCWA with binary cross-entropy).

The training examples are the distinct *queries* of the training split: every ``(h, r, ?)`` with a known tail
(side 0) and every ``(?, r, t)`` with a known head (side 1). A query is scored against every entity and trained
with binary cross-entropy towards its multi-hot target: 1 for each true answer of the query in the training
split, 0 for every other entity (the query entity itself included), optionally label-smoothed to
``(1 - eps) * y + eps / num_entities``. The loss of a batch is the sum over entities, averaged over queries.

The answers are built once, vectorized, as a CSR over the queries (:class:`QueryAnswers`): queries sorted by
side, entity and relation; the answers of query ``q`` are ``answers[indptr[q]:indptr[q + 1]]``, sorted and
without repeats.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from systems.models.decoders import Decoder
from systems.models.row_kernels import gather_rows

TAIL_SIDE, HEAD_SIDE = 0, 1


@dataclass(frozen=True)
class QueryAnswers:
    """The distinct training queries and their true answers (a CSR over the queries).

    Attributes:
        queries: ``(Q, 3)`` int64 ``(entity, relation, side)``; side 0: ``(entity, relation, ?)`` asks for tails,
            side 1: ``(?, relation, entity)`` asks for heads.
        indptr: ``(Q + 1,)`` int64 offsets into ``answers``.
        answers: the true answers of every query, in query order.
    """

    queries: torch.Tensor
    indptr: torch.Tensor
    answers: torch.Tensor

    def __len__(self) -> int:
        return len(self.queries)

    def answer_pairs(self, query_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(rows, entities)``: for row ``i`` of ``query_ids``, one pair per true answer of that query."""
        starts = self.indptr[query_ids]
        counts = self.indptr[query_ids + 1] - starts
        total = int(counts.sum())
        rows = torch.repeat_interleave(torch.arange(len(query_ids)), counts)
        offsets = torch.arange(total) - torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts)
        return rows, self.answers[torch.repeat_interleave(starts, counts) + offsets]


def _one_side(entity: torch.Tensor, rel: torch.Tensor, answer: torch.Tensor, num_relations: int,
              side: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(queries, answer counts, answers)`` of one side: triples grouped by ``(entity, rel)``, answers sorted
    and deduplicated (two stable sorts instead of one key over three columns, which could overflow int64)."""
    key = entity * num_relations + rel
    order = torch.argsort(answer, stable=True)
    order = order[torch.argsort(key[order], stable=True)]
    key, answer = key[order], answer[order]
    keep = torch.ones(len(key), dtype=torch.bool)
    keep[1:] = (key[1:] != key[:-1]) | (answer[1:] != answer[:-1])
    key, answer = key[keep], answer[keep]
    distinct, counts = torch.unique_consecutive(key, return_counts=True)
    queries = torch.stack([distinct // num_relations, distinct % num_relations,
                           torch.full_like(distinct, side)], dim=1)
    return queries, counts, answer


def build_query_answers(train_edges: torch.Tensor, num_relations: int) -> QueryAnswers:
    """The KvsAll queries of training triples ``(k, 3)`` ``(src, rel, dst)``: tail queries, then head queries.

    Args:
        train_edges: the training triples (repeated triples count once).
        num_relations: relation ids lie in ``[0, num_relations)``.
    """
    edges = train_edges.to(torch.int64)
    src, rel, dst = edges.unbind(1)
    tails = _one_side(src, rel, dst, num_relations, TAIL_SIDE)
    heads = _one_side(dst, rel, src, num_relations, HEAD_SIDE)
    counts = torch.cat([tails[1], heads[1]])
    indptr = torch.zeros(len(counts) + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=indptr[1:])
    return QueryAnswers(torch.cat([tails[0], heads[0]]), indptr, torch.cat([tails[2], heads[2]]))


def kvsall_targets(num_queries: int, num_entities: int, answer_rows: torch.Tensor, answer_entities: torch.Tensor,
                   label_smoothing: float = 0.0, device: torch.device | None = None) -> torch.Tensor:
    """``(B, N)`` float targets: 1 at every ``(row, answer)`` pair, else 0; label-smoothed when ``eps > 0``."""
    targets = torch.zeros(num_queries, num_entities, device=device)
    targets[answer_rows, answer_entities] = 1.0
    if label_smoothing > 0:
        targets = targets * (1.0 - label_smoothing) + label_smoothing / num_entities
    return targets


def kvsall_loss(decoder: Decoder, z: torch.Tensor, entity: torch.Tensor, rel: torch.Tensor, side: torch.Tensor,
                answer_rows: torch.Tensor, answer_entities: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Binary cross-entropy of each query's scores over all entities (rows of ``z``, row = entity id) against
    its multi-hot target; summed over entities, averaged over the ``B`` queries.

    Args:
        decoder: the triple scorer (tail queries through ``tail_query``, head queries through ``head_query``).
        z: ``(N, d)`` representations of all entities.
        entity, rel, side: ``(B,)`` the queries (see :class:`QueryAnswers`).
        answer_rows, answer_entities: the true answers as ``(query row, entity)`` pairs.
        label_smoothing: ``eps`` in ``[0, 1)``.
    """
    embedded = gather_rows(z, entity)
    asks_tail = (side == TAIL_SIDE).unsqueeze(1)
    queries = torch.where(asks_tail, decoder.tail_query(embedded, rel), decoder.head_query(embedded, rel))
    scores = decoder.all_scores(queries, z)
    targets = kvsall_targets(len(entity), len(z), answer_rows, answer_entities, label_smoothing, z.device)
    return F.binary_cross_entropy_with_logits(scores, targets, reduction="sum") / max(1, len(entity))


__all__ = ["HEAD_SIDE", "TAIL_SIDE", "QueryAnswers", "build_query_answers", "kvsall_loss", "kvsall_targets"]
