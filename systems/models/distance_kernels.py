"""L1 distances of every query to every candidate with a hand-written backward (TransE's scores).

``torch.cdist(q, c, p=1)`` computes the ``(C, B, K)`` distances ``sum_j |q_bj - c_kj|`` of batched queries and
candidates, but its backward (``_cdist_backward``) is a generic kernel several times slower than the forward, and
on FB15k-237 it took half of a TransE epoch (the forward another quarter). The gradients are

    d/d q_bj = sum_k G_bk sign(q_bj - c_kj),    d/d c_kj = -sum_b G_bk sign(q_bj - c_kj)

for the upstream gradient ``G`` of the distances (``sign(0) = 0``, as torch's). :func:`l1_distances` computes the
forward and both gradients in compiled loops (numba) that never materialize the ``(B, K, d)`` differences: per
query row and coordinate ``j``, one pass over the candidates' ``j``-th coordinates (stored transposed, ``(d, K)``,
so that the pass is contiguous and vectorizes). Values equal ``torch.cdist``'s up to the order of the sums
(tests compare values and gradients).

Without numba, off the CPU or for other dtypes, it is ``torch.cdist`` itself.
"""

from __future__ import annotations

import torch

from systems.models.row_kernels import NUMBA_AVAILABLE, numba

_BLOCK = 1024
"""Candidates per block of the compiled loops: a block of one coordinate and the block of a query's output row
(4 KiB each) stay in the L1 cache while the loop runs over the query's coordinates."""

if NUMBA_AVAILABLE:

    @numba.njit(nogil=True, cache=True, fastmath=True)
    def _l1_forward_kernel(queries, candidates_t, out):  # pragma: no cover - compiled
        count = candidates_t.shape[2]
        for c in range(queries.shape[0]):
            for low in range(0, count, _BLOCK):
                high = min(low + _BLOCK, count)
                for b in range(queries.shape[1]):
                    row = out[c, b, low:high]
                    row[:] = 0.0
                    for j in range(queries.shape[2]):
                        value = queries[c, b, j]
                        column = candidates_t[c, j, low:high]
                        for k in range(high - low):
                            row[k] += abs(value - column[k])

    @numba.njit(nogil=True, cache=True, fastmath=True)
    def _l1_backward_kernel(queries, candidates_t, grad, grad_queries, grad_candidates_t):  # pragma: no cover
        count = candidates_t.shape[2]
        grad_queries[:] = 0.0
        for c in range(queries.shape[0]):
            for low in range(0, count, _BLOCK):
                high = min(low + _BLOCK, count)
                for b in range(queries.shape[1]):
                    upstream = grad[c, b, low:high]
                    for j in range(queries.shape[2]):
                        value = queries[c, b, j]
                        column = candidates_t[c, j, low:high]
                        target = grad_candidates_t[c, j, low:high]
                        total = numba.float32(0.0)
                        for k in range(high - low):
                            difference = value - column[k]
                            weighted = upstream[k] if difference > 0 else (
                                -upstream[k] if difference < 0 else numba.float32(0.0))
                            total += weighted
                            target[k] -= weighted
                        grad_queries[c, b, j] += total


def _compiled(queries: torch.Tensor, candidates: torch.Tensor) -> bool:
    return (NUMBA_AVAILABLE and queries.device.type == "cpu" and candidates.device.type == "cpu"
            and queries.dtype == candidates.dtype == torch.float32)


class _L1Distances(torch.autograd.Function):
    @staticmethod
    def forward(ctx, queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        queries = queries.detach().contiguous()
        candidates_t = candidates.detach().transpose(1, 2).contiguous()
        out = queries.new_empty(queries.shape[0], queries.shape[1], candidates.shape[1])
        _l1_forward_kernel(queries.numpy(), candidates_t.numpy(), out.numpy())
        ctx.save_for_backward(queries, candidates_t)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        queries, candidates_t = ctx.saved_tensors
        grad_queries = torch.empty_like(queries)
        grad_candidates_t = torch.zeros_like(candidates_t)
        _l1_backward_kernel(queries.numpy(), candidates_t.numpy(), grad.contiguous().numpy(), grad_queries.numpy(),
                            grad_candidates_t.numpy())
        return grad_queries, grad_candidates_t.transpose(1, 2)


def l1_distances(queries: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """``torch.cdist(queries, candidates, p=1)`` for ``(C, B, d)`` and ``(C, K, d)`` tensors: ``(C, B, K)``
    distances, differentiable in both, with the compiled forward and backward of the module docstring."""
    if not _compiled(queries, candidates):
        return torch.cdist(queries, candidates, p=1.0)
    return _L1Distances.apply(queries, candidates)


__all__ = ["l1_distances"]
