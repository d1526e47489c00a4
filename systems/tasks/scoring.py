"""The softmax loss of chunked negatives as one autograd function: scores, loss and gradients without copies.

:func:`chunked_softmax_loss` computes what ``F.cross_entropy(cat([positive, chunked_scores(...)]), 0)`` computes
(the mean over the positives of ``logsumexp([p_i, s_i1, ..., s_iK]) - p_i``), but owns its forward and backward:

- forward: one matrix product per chunk writes the ``(B, K)`` scores; torch's fused softmax over them and two row
  maxima give each row's log-sum-exp with the positive folded in (the loss), and the softmax probabilities of the
  negatives, which are all the backward needs (no concatenation of the positive column, no ``log_softmax``
  buffer, no one-hot target, and no ``exp_``: torch's elementwise exponential is several times slower than the
  softmax kernel's, and 15x slower again on the very negative shifted scores of a trained model);
- backward: the gradient of the scores is the probabilities times the upstream gradient over ``B``, so the
  gradients of the queries and of the negatives are two more matrix products per chunk of the saved
  probabilities, and that of the positive scores is ``(p_i - 1) * g / B``.

The three products are the whole cost of the loss (``3 B K d`` multiply-adds per side); the rest is five passes
over the scores. Results equal the composition of torch's own operators up to floating-point rounding
(tests compare both).

:func:`all_entities_softmax_loss` does the same for 1vsAll training (every entity a candidate of every query),
blocked over the queries so that its memory stays bounded whatever the number of entities, with the gradients
computed block by block in the forward pass.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from systems.models.row_kernels import add_rows


_LOOP_CHUNKS = 64
"""Up to this many chunks, each chunk's products are one ``mm`` on row slices (no padding; ``bmm`` of a single
batch parallelizes worse: 2 threads gave 1.0x-1.6x here); more chunks go through one padded ``bmm``."""


def _bounds(count: int, chunks: int, chunk_size: int) -> list[tuple[int, int]]:
    return [(c * chunk_size, min((c + 1) * chunk_size, count)) for c in range(chunks)]


def _scores(queries: torch.Tensor, negatives: torch.Tensor, chunk_size: int,
            dtype: torch.dtype | None = None) -> torch.Tensor:
    """``(B, K)`` scores of every query against its chunk's negatives; with ``dtype`` (bfloat16) the products take
    inputs rounded to it and give scores rounded to it, returned in the inputs' dtype."""
    if dtype is not None and dtype != queries.dtype:
        return _scores(queries.to(dtype), negatives.to(dtype), chunk_size).to(queries.dtype)
    count, (chunks, num, dim) = queries.shape[0], negatives.shape
    if chunks > _LOOP_CHUNKS:
        padded = F.pad(queries, (0, 0, 0, chunks * chunk_size - count)).view(chunks, chunk_size, dim)
        return torch.bmm(padded, negatives.transpose(1, 2)).view(chunks * chunk_size, num)[:count]
    out = queries.new_empty(count, num)
    for c, (low, high) in enumerate(_bounds(count, chunks, chunk_size)):
        torch.mm(queries[low:high], negatives[c].T, out=out[low:high])
    return out


def _gradients(probabilities: torch.Tensor, queries: torch.Tensor, negatives: torch.Tensor, chunk_size: int,
               want_queries: bool, want_negatives: bool, dtype: torch.dtype | None = None
               ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``(P @ N_c per chunk, P_c^T @ Q_c per chunk)``: the gradients of queries and negatives for score
    gradients ``probabilities`` (unscaled), the products computed in ``dtype`` (None: the inputs') and returned in
    the inputs'."""
    if dtype is not None and dtype != queries.dtype:
        result = queries.dtype
        grad_q, grad_n = _gradients(probabilities.to(dtype), queries.to(dtype), negatives.to(dtype), chunk_size,
                                    want_queries, want_negatives)
        return (grad_q.to(result) if grad_q is not None else None, grad_n.to(result) if grad_n is not None else None)
    count, (chunks, num, dim) = queries.shape[0], negatives.shape
    if chunks > _LOOP_CHUNKS:
        pad = chunks * chunk_size - count
        padded_p = F.pad(probabilities, (0, 0, 0, pad)).view(chunks, chunk_size, num)
        grad_q = torch.bmm(padded_p, negatives).view(-1, dim)[:count] if want_queries else None
        grad_n = (torch.bmm(padded_p.transpose(1, 2), F.pad(queries, (0, 0, 0, pad)).view(chunks, chunk_size, dim))
                  if want_negatives else None)
        return grad_q, grad_n
    grad_q = queries.new_empty(count, dim) if want_queries else None
    grad_n = negatives.new_empty(chunks, num, dim) if want_negatives else None
    for c, (low, high) in enumerate(_bounds(count, chunks, chunk_size)):
        if want_queries:
            torch.mm(probabilities[low:high], negatives[c], out=grad_q[low:high])
        if want_negatives:
            torch.mm(probabilities[low:high].T, queries[low:high], out=grad_n[c])
    return grad_q, grad_n


def _softmax_with_positive(scores: torch.Tensor, positive: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For rows ``[positive_i, scores_i1..iK]``: the mean cross-entropy with the positive as the class, the
    negatives' softmax probabilities ``(B, K)`` and the positives' ``(B,)``.

    From torch's fused softmax of the scores alone (its exponential is several times faster than ``exp_``, which
    slows down by 15x on very negative inputs): the scores' own log-sum-exp is their maximum minus the log of the
    largest probability (>= 1/K, so no precision is lost), combined with the positive by ``logaddexp``.
    """
    top = scores.amax(dim=1)
    probabilities = torch.softmax(scores, dim=1)
    own = top - probabilities.amax(dim=1).log_()
    total = torch.logaddexp(own, positive)
    loss = (total - positive).mean()  # log-sum-exp minus the positive, averaged
    probabilities.mul_(torch.exp(own - total).unsqueeze(1))  # the negatives' share of the full softmax
    return loss, probabilities, torch.exp(positive - total)


class _ChunkedSoftmaxLoss(torch.autograd.Function):
    """See :func:`chunked_softmax_loss`."""

    @staticmethod
    def forward(ctx, queries: torch.Tensor, negatives: torch.Tensor, positive: torch.Tensor,
                chunk_size: int, gradient_dtype: torch.dtype | None, score_dtype: torch.dtype | None = None
                ) -> torch.Tensor:
        chunks = negatives.shape[0]
        count = queries.shape[0]
        if chunks * chunk_size < count:
            raise ValueError(f"{chunks} chunks of {chunk_size} cannot hold {count} queries")
        loss, probabilities, positive_probability = _softmax_with_positive(
            _scores(queries, negatives, chunk_size, score_dtype), positive)
        ctx.chunk_size, ctx.gradient_dtype = chunk_size, gradient_dtype
        ctx.save_for_backward(queries, negatives, probabilities, positive_probability)
        return loss

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        queries, negatives, probabilities, positive_probability = ctx.saved_tensors
        scale = grad / positive_probability.shape[0]
        grad_queries, grad_negatives = _gradients(probabilities, queries, negatives, ctx.chunk_size,
                                                  ctx.needs_input_grad[0], ctx.needs_input_grad[1],
                                                  ctx.gradient_dtype)
        grad_positive = (positive_probability - 1.0).mul_(scale) if ctx.needs_input_grad[2] else None
        return (grad_queries.mul_(scale) if grad_queries is not None else None,
                grad_negatives.mul_(scale) if grad_negatives is not None else None, grad_positive, None, None, None)


class _DistMultSoftmaxLoss(torch.autograd.Function):
    """See :func:`distmult_softmax_loss`."""

    @staticmethod
    def forward(ctx, z: torch.Tensor, relations: torch.Tensor, src: torch.Tensor, tail_rel: torch.Tensor,
                head_rel: torch.Tensor, dst: torch.Tensor, tail_neg: torch.Tensor, head_neg: torch.Tensor,
                chunk_size: int, gradient_dtype: torch.dtype | None, score_dtype: torch.dtype | None = None
                ) -> torch.Tensor:
        chunks, num = tail_neg.shape
        if chunks * chunk_size < len(src):
            raise ValueError(f"{chunks} chunks of {chunk_size} cannot hold {len(src)} queries")
        heads, tails = z.index_select(0, src), z.index_select(0, dst)
        tail_r, head_r = relations.index_select(0, tail_rel), relations.index_select(0, head_rel)
        tail_q, head_q = heads * tail_r, tails * head_r
        tail_n = z.index_select(0, tail_neg.reshape(-1)).view(chunks, num, -1)
        head_n = z.index_select(0, head_neg.reshape(-1)).view(chunks, num, -1)
        tail_loss, tail_p, tail_pp = _softmax_with_positive(_scores(tail_q, tail_n, chunk_size, score_dtype),
                                                            (tail_q * tails).sum(dim=1))
        head_loss, head_p, head_pp = _softmax_with_positive(_scores(head_q, head_n, chunk_size, score_dtype),
                                                            (head_q * heads).sum(dim=1))
        ctx.chunk_size, ctx.gradient_dtype, ctx.shapes = chunk_size, gradient_dtype, (z.shape, relations.shape)
        ctx.save_for_backward(src, dst, tail_rel, head_rel, tail_neg, head_neg, heads, tails, tail_r, head_r,
                              tail_q, head_q, tail_n, head_n, tail_p, head_p, tail_pp, head_pp)
        return (tail_loss + head_loss) / 2

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (src, dst, tail_rel, head_rel, tail_neg, head_neg, heads, tails, tail_r, head_r, tail_q, head_q, tail_n,
         head_n, tail_p, head_p, tail_pp, head_pp) = ctx.saved_tensors
        scale = grad / (2 * len(src))
        grad_tail_pos = (tail_pp - 1.0).mul_(scale).unsqueeze(1)  # d loss / d positive score, per side
        grad_head_pos = (head_pp - 1.0).mul_(scale).unsqueeze(1)
        tail_gq, tail_gn = _gradients(tail_p, tail_q, tail_n, ctx.chunk_size, True, True, ctx.gradient_dtype)
        head_gq, head_gn = _gradients(head_p, head_q, head_n, ctx.chunk_size, True, True, ctx.gradient_dtype)
        tail_gq = tail_gq.mul_(scale).addcmul_(grad_tail_pos, tails)  # + the positive's <q, t> through q
        head_gq = head_gq.mul_(scale).addcmul_(grad_head_pos, heads)
        grad_heads = (tail_gq * tail_r).addcmul_(grad_head_pos, head_q)  # q_t = h r; <q_h, h>
        grad_tails = (head_gq * head_r).addcmul_(grad_tail_pos, tail_q)
        (z_shape, relations_shape), dim = ctx.shapes, heads.shape[1]
        grad_z = add_rows(heads.new_zeros(z_shape), (src, dst, tail_neg.reshape(-1), head_neg.reshape(-1)),
                          (grad_heads, grad_tails, tail_gn.mul_(scale).view(-1, dim),
                           head_gn.mul_(scale).view(-1, dim)))
        grad_relations = add_rows(heads.new_zeros(relations_shape), (tail_rel, head_rel),
                                  (tail_gq * heads, head_gq * tails))
        return grad_z, grad_relations, None, None, None, None, None, None, None, None, None


def distmult_softmax_loss(z: torch.Tensor, relations: torch.Tensor, src: torch.Tensor, tail_rel: torch.Tensor,
                          head_rel: torch.Tensor, dst: torch.Tensor, tail_neg: torch.Tensor, head_neg: torch.Tensor,
                          chunk_size: int, gradient_precision: str = "float32",
                          score_precision: str = "float32") -> torch.Tensor:
    """DistMult's softmax loss of chunked negatives on both sides, forward and backward in one function.

    Equals ``(chunked_softmax_loss(h * r_t, z[tail_neg], <h * r_t, t>) + chunked_softmax_loss(t * r_h,
    z[head_neg], <t * r_h, h>)) / 2`` with ``h = z[src]``, ``t = z[dst]``, ``r_t = relations[tail_rel]``, ``r_h =
    relations[head_rel]``, but without autograd's bookkeeping: the gathers, products and their gradients are
    written out once (about 30 operators per batch instead of about 100), and the gradients of ``z`` and
    ``relations`` are accumulated row by row in one pass each
    (:func:`systems.models.row_kernels.add_rows`). The matrix products and the softmax are
    :func:`chunked_softmax_loss`'s.

    Args:
        z: ``(U, d)`` representations of the batch's nodes.
        relations: ``(R, d)`` DistMult's relation diagonals.
        src, dst: ``(B,)`` rows of ``z`` of the positives' heads and tails.
        tail_rel, head_rel: ``(B,)`` the relation rows of the tail queries and of the head queries (the same, or
            the inverse relations').
        tail_neg, head_neg: ``(C, K)`` rows of ``z`` of each chunk's negatives.
        chunk_size, gradient_precision, score_precision: as :func:`chunked_softmax_loss`.
    """
    return _DistMultSoftmaxLoss.apply(z, relations, src, tail_rel, head_rel, dst, tail_neg, head_neg, chunk_size,
                                      GRADIENT_DTYPES[gradient_precision], GRADIENT_DTYPES[score_precision])


GRADIENT_DTYPES = {"float32": None, "bfloat16": torch.bfloat16}
"""``training.gradient_precision`` -> the dtype of the backward's two matrix products (None: the inputs'); the same
for ``training.score_precision`` and the forward's score products."""


def chunked_softmax_loss(queries: torch.Tensor, negatives: torch.Tensor, positive: torch.Tensor,
                         chunk_size: int, gradient_precision: str = "float32",
                         score_precision: str = "float32") -> torch.Tensor:
    """Mean over the queries of the cross-entropy of each positive score against its chunk's negative scores.

    Args:
        queries: ``(B, d)``; query ``i`` belongs to chunk ``i // chunk_size``.
        negatives: ``(C, K, d)`` the embeddings of each chunk's negatives, ``C = ceil(B / chunk_size)``.
        positive: ``(B,)`` the positive scores (class 0 of each row's ``K + 1``).
        chunk_size: queries per chunk.
        gradient_precision: ``float32``, or ``bfloat16``: the backward's two matrix products (two thirds of the
            loss's arithmetic) take bfloat16 inputs (rounded from float32: about 0.4 % relative error per
            gradient entry; CPUs with AVX512-BF16 or AMX run them about 2x faster), accumulate in float32 and
            return float32.
        score_precision: ``float32``, or ``bfloat16``: the forward's score products take bfloat16 inputs and give
            bfloat16 scores (mixed-precision training's rounding; about 2x faster with AVX512-BF16), converted to
            float32 for the softmax and the loss; the positive scores stay float32.

    Returns:
        The scalar loss, differentiable in all three tensors.
    """
    return _ChunkedSoftmaxLoss.apply(queries, negatives, positive, chunk_size, GRADIENT_DTYPES[gradient_precision],
                                     GRADIENT_DTYPES[score_precision])


_ALL_ENTITY_BLOCK_ELEMENTS = 1 << 22
"""Scores materialized at once by :func:`all_entities_softmax_loss` (16 MiB of float32): the queries are taken in
blocks of ``max(1, this // num_candidates)`` rows."""


def _all_entities_block(queries: torch.Tensor, candidates: torch.Tensor, targets: torch.Tensor,
                        product_candidates: torch.Tensor, want_queries: bool, want_candidates: bool,
                        grad_candidates: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One block of query rows: ``(sum of the rows' losses, their queries' gradient)``; adds the candidates'
    gradient into ``grad_candidates``. Gradients are of the summed (not averaged) loss."""
    scores = queries @ candidates.T
    top = scores.amax(dim=1)
    target_scores = scores.gather(1, targets.unsqueeze(1)).squeeze(1)
    probabilities = torch.softmax(scores, dim=1)
    del scores
    # log-sum-exp minus the target's score, as (max - target) - log(largest probability): the difference of the two
    # large scores first (exact for equal ones), and the largest probability is >= 1/N (no underflow)
    loss = ((top - target_scores) - probabilities.amax(dim=1).log_()).sum()
    if not (want_queries or want_candidates):
        return loss, None
    rows = torch.arange(len(targets), device=targets.device)
    probabilities[rows, targets] -= 1.0  # d loss / d scores: softmax minus the one-hot target
    dtype = product_candidates.dtype
    gradient = probabilities.to(dtype) if dtype != probabilities.dtype else probabilities
    grad_queries = (gradient @ product_candidates).to(queries.dtype) if want_queries else None
    if want_candidates:
        grad_candidates.add_((gradient.T @ queries.to(dtype)).to(grad_candidates.dtype))
    return loss, grad_queries


class _AllEntitiesSoftmaxLoss(torch.autograd.Function):
    """See :func:`all_entities_softmax_loss`."""

    @staticmethod
    def forward(ctx, queries: torch.Tensor, candidates: torch.Tensor, targets: torch.Tensor,
                gradient_dtype: torch.dtype | None, block_elements: int) -> torch.Tensor:
        want_queries, want_candidates = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        product_candidates = candidates.to(gradient_dtype) if gradient_dtype is not None else candidates
        grad_queries = torch.empty_like(queries) if want_queries else None
        grad_candidates = torch.zeros_like(candidates) if want_candidates else None
        rows = max(1, block_elements // max(1, candidates.shape[0]))
        loss = queries.new_zeros(())
        for low in range(0, queries.shape[0], rows):
            high = min(low + rows, queries.shape[0])
            block_loss, block_grad = _all_entities_block(queries[low:high], candidates, targets[low:high],
                                                         product_candidates, want_queries, want_candidates,
                                                         grad_candidates)
            loss = loss + block_loss
            if want_queries:
                grad_queries[low:high] = block_grad
        ctx.save_for_backward(grad_queries, grad_candidates)
        ctx.count = queries.shape[0]
        return loss / max(1, queries.shape[0])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad_queries, grad_candidates = ctx.saved_tensors
        scale = grad / max(1, ctx.count)
        return (grad_queries * scale if grad_queries is not None else None,
                grad_candidates * scale if grad_candidates is not None else None, None, None, None)


def all_entities_softmax_loss(queries: torch.Tensor, candidates: torch.Tensor, targets: torch.Tensor,
                              gradient_precision: str = "float32",
                              block_elements: int = _ALL_ENTITY_BLOCK_ELEMENTS) -> torch.Tensor:
    """``F.cross_entropy(queries @ candidates.T, targets)`` (1vsAll), blocked over the queries, with the gradients
    computed in the forward pass.

    Each block of query rows is scored against every candidate (``block_elements`` scores at most: bounded
    memory whatever the number of entities), its softmax gives the loss (log-sum-exp minus the target's score)
    and, with the target's probability decreased by one, the gradient of the scores; the two gradient products
    (``G @ C`` for the queries, ``G^T @ Q`` accumulated for the candidates) follow at once, so the scores are never
    kept for a backward pass and there is no ``log_softmax`` buffer, one-hot target or zero-filled ``(B, N)``
    gradient of ``nll_loss``. The backward only scales the saved gradients by the upstream gradient.

    Args:
        queries: ``(B, d)``.
        candidates: ``(N, d)`` every entity's representation (row = entity id).
        targets: ``(B,)`` the true entity of each query.
        gradient_precision: ``float32``, or ``bfloat16``: the two gradient products take bfloat16 inputs
            (accumulated in float32, returned in float32); scores and loss stay float32.
        block_elements: scores per block (tests use small blocks).
    """
    return _AllEntitiesSoftmaxLoss.apply(queries, candidates, targets, GRADIENT_DTYPES[gradient_precision],
                                         block_elements)


__all__ = ["GRADIENT_DTYPES", "all_entities_softmax_loss", "chunked_softmax_loss", "distmult_softmax_loss"]
