"""The softmax loss of chunked negatives as one autograd function: scores, loss and gradients without copies.

:func:`chunked_softmax_loss` computes what ``F.cross_entropy(cat([positive, chunked_scores(...)]), 0)`` computes
(the mean over the positives of ``logsumexp([p_i, s_i1, ..., s_iK]) - p_i``), but owns its forward and backward:

- forward: one batched matrix product writes the ``(C, chunk, K)`` scores; a log-sum-exp per row (with the
  positive folded in) gives the loss; the scores are then turned *in place* into the softmax probabilities, which
  are all the backward needs (no concatenation of the positive column, no separate ``log_softmax`` buffer, no
  one-hot target);
- backward: the gradient of the scores is the probabilities times the upstream gradient over ``B``, so the
  gradients of the queries and of the negatives are two more batched matrix products of the saved probabilities,
  and that of the positive scores is ``(p_i - 1) * g / B``.

The three batched products are the whole cost of the loss (``3 B K d`` multiply-adds per side); the rest is a few
elementwise passes over the scores (one exponential each). Results equal the composition of torch's own operators up to floating-point rounding
(tests compare both).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


class _ChunkedSoftmaxLoss(torch.autograd.Function):
    """See :func:`chunked_softmax_loss`."""

    @staticmethod
    def forward(ctx, queries: torch.Tensor, negatives: torch.Tensor, positive: torch.Tensor,
                chunk_size: int) -> torch.Tensor:
        chunks, _, dim = negatives.shape
        count = queries.shape[0]
        if chunks * chunk_size < count:
            raise ValueError(f"{chunks} chunks of {chunk_size} cannot hold {count} queries")
        padded = queries if chunks * chunk_size == count else F.pad(queries, (0, 0, 0, chunks * chunk_size - count))
        padded = padded.view(chunks, chunk_size, dim)
        scores = torch.bmm(padded, negatives.transpose(1, 2))  # (C, chunk, K)
        flat = scores.view(chunks * chunk_size, -1)
        rows = flat[:count]
        # softmax of [positive, scores] per row, the scores' part in place: shift by the row maximum, exponentiate
        # once, normalize by the row sum (the positive's term included)
        top = torch.maximum(rows.amax(dim=1), positive)
        rows.sub_(top.unsqueeze(1)).exp_()
        positive_exp = torch.exp(positive - top)
        normalizer = rows.sum(dim=1).add_(positive_exp)
        loss = (top + normalizer.log() - positive).mean()  # log-sum-exp minus the positive, averaged
        rows.mul_(normalizer.reciprocal().unsqueeze(1))  # the negatives' probabilities
        flat[count:] = 0.0  # padding rows carry no gradient
        ctx.save_for_backward(padded, negatives, scores, positive_exp.div_(normalizer))
        return loss

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        padded, negatives, probabilities, positive_probability = ctx.saved_tensors
        count = positive_probability.shape[0]
        scale = grad / count
        grad_queries = grad_negatives = grad_positive = None
        if ctx.needs_input_grad[0]:
            grad_queries = torch.bmm(probabilities, negatives).view(-1, negatives.shape[2])[:count].mul_(scale)
        if ctx.needs_input_grad[1]:
            grad_negatives = torch.bmm(probabilities.transpose(1, 2), padded).mul_(scale)
        if ctx.needs_input_grad[2]:
            grad_positive = (positive_probability - 1.0).mul_(scale)
        return grad_queries, grad_negatives, grad_positive, None


def chunked_softmax_loss(queries: torch.Tensor, negatives: torch.Tensor, positive: torch.Tensor,
                         chunk_size: int) -> torch.Tensor:
    """Mean over the queries of the cross-entropy of each positive score against its chunk's negative scores.

    Args:
        queries: ``(B, d)``; query ``i`` belongs to chunk ``i // chunk_size``.
        negatives: ``(C, K, d)`` the embeddings of each chunk's negatives, ``C = ceil(B / chunk_size)``.
        positive: ``(B,)`` the positive scores (class 0 of each row's ``K + 1``).
        chunk_size: queries per chunk.

    Returns:
        The scalar loss, differentiable in all three tensors.
    """
    return _ChunkedSoftmaxLoss.apply(queries, negatives, positive, chunk_size)


__all__ = ["chunked_softmax_loss"]
