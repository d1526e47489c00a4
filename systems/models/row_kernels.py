"""Compiled (numba) row kernels of link prediction's embedding path: sparse Adagrad and row gathers' gradients.

Per training batch, link prediction gathers a few thousand embedding rows (:func:`gather_rows`) and applies Adagrad
to them (:func:`adagrad_rows`). With torch's own operators each is a chain of small operators (a unique, index
selects and copies, an ``index_add_`` that materializes an expanded index), and on 2 cores that chain cost more
than a tenth of an epoch; here each is one pass over the rows, releasing the GIL (``nogil``) so that a pipeline's
other stages keep running.

- :func:`adagrad_rows`: ``state[v] += g^2``, ``weight[v] += -lr * (g / (sqrt(state[v]) + eps))`` for every row
  ``v`` of ``nodes`` (distinct ids), in float32 with torch's operations in torch's order, equal to
  :meth:`~systems.models.embeddings.EmbeddingTable.adagrad_update`'s torch path up to one rounding per step
  (torch's vectorized ``addcmul_`` and ``index_add_`` fuse their multiply-adds);
- :func:`gather_rows`: ``table.index_select(0, index)`` whose backward adds the gradient rows into a zero table
  with one pass (an ``index_add_``), in index order, as torch's CPU ``index_add_`` does.

numba is optional: without it (or off the CPU, or for other dtypes) both fall back to torch's operators.
"""

from __future__ import annotations

import math

import torch

try:
    import numba

    NUMBA_AVAILABLE = True
except ImportError:  # pragma: no cover - exercised when numba is absent
    numba = None
    NUMBA_AVAILABLE = False


if NUMBA_AVAILABLE:
    import numpy as np

    @numba.njit(nogil=True, cache=True)
    def _adagrad_kernel(weight, state, nodes, grad, lr, eps):  # pragma: no cover - compiled
        minus_lr = np.float32(-lr)
        epsilon = np.float32(eps)
        for i in range(nodes.shape[0]):
            v = nodes[i]
            for j in range(weight.shape[1]):
                g = grad[i, j]
                s = state[v, j] + g * g
                state[v, j] = s
                weight[v, j] = weight[v, j] + minus_lr * (g / (np.float32(math.sqrt(s)) + epsilon))

    @numba.njit(nogil=True, cache=True)
    def _add_rows_kernel(out, index, rows):  # pragma: no cover - compiled
        for i in range(index.shape[0]):
            v = index[i]
            for j in range(rows.shape[1]):
                out[v, j] += rows[i, j]


def _compiled(*tensors: torch.Tensor) -> bool:
    """Whether the compiled kernels take these tensors: numba, all on the CPU (any strides: numba reads numpy
    views of strided tensors, e.g. the weight and state halves of a partition buffer's rows)."""
    return NUMBA_AVAILABLE and all(t.device.type == "cpu" for t in tensors)


def adagrad_rows(weight: torch.Tensor, state: torch.Tensor, nodes: torch.Tensor, grad: torch.Tensor,
                 learning_rate: float, eps: float) -> None:
    """Adagrad on the rows ``nodes`` (distinct ids) of ``weight`` and its state, in place.

    Args:
        weight, state: ``(n, d)`` float32 tables (views allowed).
        nodes: ``(k,)`` int64 distinct row ids.
        grad: ``(k, d)`` float32 gradient rows, in the order of ``nodes``.
        learning_rate, eps: Adagrad's.
    """
    if _compiled(weight, state, nodes, grad) and weight.dtype == state.dtype == grad.dtype == torch.float32:
        _adagrad_kernel(weight.detach().numpy(), state.numpy(), nodes.to(torch.int64).numpy(), grad.numpy(),
                        learning_rate, eps)
        return
    rows = state.index_select(0, nodes).addcmul_(grad, grad)
    state.index_copy_(0, nodes, rows)
    weight.index_add_(0, nodes, grad / rows.sqrt_().add_(eps), alpha=-learning_rate)


def add_rows(out: torch.Tensor, indexes, sources) -> torch.Tensor:
    """``out.index_add_(0, index, rows)`` for every ``(index, rows)`` of ``indexes`` and ``sources``, in that order
    (one compiled pass each where numba is installed); returns ``out``."""
    compiled = _compiled(out) and out.dtype == torch.float32 and out.is_contiguous()
    for index, rows in zip(indexes, sources):
        if compiled and rows.dtype == torch.float32 and rows.device.type == "cpu" and index.device.type == "cpu":
            _add_rows_kernel(out.numpy(), index.contiguous().numpy(), rows.contiguous().numpy())
        else:
            out.index_add_(0, index, rows)
    return out


class _GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.rows = table.shape[0]
        return table.index_select(0, index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (index,) = ctx.saved_tensors
        return add_rows(grad.new_zeros(ctx.rows, grad.shape[1]), (index,), (grad,)), None


def gather_rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``table[index]`` for a 2-D ``table`` and an index of any shape (``(*index.shape, d)``), differentiable in
    ``table`` with a one-pass backward (module docstring)."""
    flat = index.reshape(-1)
    if not table.requires_grad:
        return table.index_select(0, flat).view(*index.shape, table.shape[-1])
    return _GatherRows.apply(table, flat.contiguous()).view(*index.shape, table.shape[-1])


__all__ = ["NUMBA_AVAILABLE", "adagrad_rows", "add_rows", "gather_rows"]
