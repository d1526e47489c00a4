"""Learnable node embeddings held outside the model, updated sparsely with Adagrad (the Marius way).

The table and its Adagrad state (the running sum of squared gradients, one row per node) live side by side in
host memory. A training batch *gathers* the rows it needs when it is loaded, the compute stage differentiates
the loss with respect to those gathered rows only, and the ``update`` stage applies Adagrad to exactly those rows
and writes them back. So loading and updating are pipeline stages of their own, and the rows a batch computes
with may miss the updates of the batches in flight before it (their *staleness*, bounded by the pipeline).

The update equals ``torch.optim.Adagrad`` (``lr_decay = 0``, ``weight_decay = 0``, ``initial_accumulator_value
= 0``) applied to the whole table with a gradient that is zero outside the batch's rows: rows without gradient
keep their value and their state.
"""

from __future__ import annotations

import torch

from systems.models.row_kernels import adagrad_rows


class EmbeddingTable:
    """A ``(num_nodes, dim)`` float32 table and its Adagrad state, with row gathers and sparse Adagrad updates.

    Args:
        num_nodes: rows.
        dim: width.
        init_scale: standard deviation of the normal initialization.
        learning_rate: Adagrad learning rate.
        generator: the initialization's randomness.
        eps: Adagrad's epsilon (torch's default).
        shared: place table, state and the update counter in shared memory (for forked loader processes, which
            must see the updates).

    Attributes:
        weight: the table.
        state: the sum of squared gradients of every entry.
        updates: ``(1,)`` int64, number of :meth:`adagrad_update` calls so far (the version of the table).
    """

    def __init__(self, num_nodes: int, dim: int, init_scale: float, learning_rate: float,
                 generator: torch.Generator, eps: float = 1e-10, shared: bool = False):
        self.weight = torch.randn(num_nodes, dim, generator=generator).mul_(init_scale)
        self.state = torch.zeros(num_nodes, dim)
        self.updates = torch.zeros(1, dtype=torch.int64)
        self.learning_rate = learning_rate
        self.eps = eps
        if shared:
            for tensor in (self.weight, self.state, self.updates):
                tensor.share_memory_()

    @classmethod
    def wrap(cls, weight: torch.Tensor, state: torch.Tensor, learning_rate: float,
             eps: float = 1e-10) -> "EmbeddingTable":
        """A table over existing ``weight`` and ``state`` tensors (views allowed, e.g. the two halves of the rows
        of a partition buffer): gathers read them and updates write into them in place."""
        if weight.shape != state.shape:
            raise ValueError(f"weight {tuple(weight.shape)} and state {tuple(state.shape)} differ in shape")
        table = cls.__new__(cls)
        table.weight, table.state = weight, state
        table.updates = torch.zeros(1, dtype=torch.int64)
        table.learning_rate, table.eps = learning_rate, eps
        return table

    @property
    def version(self) -> int:
        """Updates applied so far."""
        return int(self.updates[0])

    def gather(self, nodes: torch.Tensor, pin: bool = False) -> torch.Tensor:
        """A copy of the rows ``nodes`` (page-locked when ``pin``)."""
        if not pin:
            return self.weight.index_select(0, nodes)
        out = torch.empty((len(nodes), self.weight.shape[1]), dtype=self.weight.dtype, pin_memory=True)
        return torch.index_select(self.weight, 0, nodes, out=out)

    def adagrad_update(self, nodes: torch.Tensor, grad: torch.Tensor, unique: bool = False) -> None:
        """Apply Adagrad to the rows ``nodes`` with their gradient rows ``grad`` (duplicate ids are summed first).

        ``state[v] += g_v^2``; ``weight[v] -= lr * g_v / (sqrt(state[v]) + eps)``; one compiled pass over the
        rows where numba is installed (:func:`systems.models.row_kernels.adagrad_rows`, the same float32
        arithmetic as torch's operators).

        Args:
            nodes: ``(k,)`` row ids.
            grad: ``(k, d)`` their gradient rows.
            unique: the caller guarantees ``nodes`` are distinct (e.g. a sample's input nodes): no deduplication.
        """
        grad = grad.to(self.weight.device, self.weight.dtype).contiguous()
        nodes = nodes.to(self.weight.device, torch.int64).contiguous()
        if not unique:
            nodes, inverse = torch.unique(nodes, return_inverse=True)  # sorted, each row once
            grad = torch.zeros(len(nodes), grad.shape[1], dtype=grad.dtype).index_add_(0, inverse, grad)
        adagrad_rows(self.weight, self.state, nodes, grad, self.learning_rate, self.eps)
        self.updates += 1


__all__ = ["EmbeddingTable"]
