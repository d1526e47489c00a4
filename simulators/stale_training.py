"""Training with bounded-staleness neighbour representations: the accuracy side of asynchronous GNN pipelines.

The nodes are cut into P partitions (as the asynchronous pipeline simulator's partitions). A full-graph GCN (PyG
``GCNConv`` layers) is trained so that, from the second layer on, each partition sees its *own* nodes' inputs
fresh, but its neighbours in other partitions through a table of historical embeddings (as in PipeGCN and other
asynchronous/partition-parallel GNN training): the table holds every node's layer inputs as computed by some
earlier iteration and is refreshed every ``s`` iterations with the values computed by the previous iteration.
So a value read from another partition is 1 to ``s`` iterations old (the *staleness bound*); ``s = 0`` is
synchronous training (every read fresh, exact full-graph GCN). No gradient flows through the table (the
gradient of a partition's embeddings from other partitions is dropped, as in historical-embedding methods).

Mixed fresh/stale aggregation is one ``GCNConv`` call (a sparse-dense product) on ``[H; H_hist]`` (2n rows)
with a sparse ``n x 2n`` adjacency whose edges from another partition point at the historical rows, with the
symmetric normalization of the whole graph. Evaluation is
exact (synchronous full-graph inference); the test accuracy is taken at the best validation accuracy.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


@dataclasses.dataclass(frozen=True)
class StaleTrainingConfig:
    """One training run.

    Attributes:
        staleness: s, the refresh period of the historical table = the bound on the staleness (0: synchronous).
        num_partitions: P.
        num_layers: GCN layers.
        hidden: hidden width.
        iterations: full-graph training iterations (optimizer steps).
        learning_rate: Adam step size.
        weight_decay: L2 penalty.
        dropout: dropout on the hidden layers' inputs.
        eval_every: evaluate (valid and test) every this many iterations (and after the last).
        seed: seed of the partition, the weights and the dropout.
    """

    staleness: int = 0
    num_partitions: int = 8
    num_layers: int = 2
    hidden: int = 64
    iterations: int = 200
    learning_rate: float = 0.01
    weight_decay: float = 5e-4
    dropout: float = 0.5
    eval_every: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        if self.staleness < 0 or self.num_partitions < 1 or self.num_layers < 1 or self.iterations < 1:
            raise ValueError(f"invalid config {self}")


def random_partition(num_nodes: int, num_partitions: int, generator: torch.Generator) -> torch.Tensor:
    """A balanced random assignment of nodes to partitions (int64 partition per node)."""
    assignment = torch.empty(num_nodes, dtype=torch.int64)
    assignment[torch.randperm(num_nodes, generator=generator)] = torch.arange(num_nodes) % num_partitions
    return assignment


def gcn_edges(edge_index: torch.Tensor, num_nodes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Edges with self-loops and the symmetric GCN normalization of the whole graph (PyG's ``gcn_norm``)."""
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    edge_index, weight = gcn_norm(edge_index, None, num_nodes, add_self_loops=True)
    return edge_index, weight


class StaleGCN(nn.Module):
    """A GCN whose layers >= 1 read other partitions' inputs from a historical table (see the module docstring).

    Args:
        in_dim: input features.
        hidden: hidden width.
        out_dim: classes.
        num_layers: layers.
        dropout: dropout on the hidden layers' inputs.
    """

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float):
        super().__init__()
        from torch_geometric.nn import GCNConv

        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.convs = nn.ModuleList(GCNConv(a, b, normalize=False, add_self_loops=False, cached=False)
                                   for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, x: torch.Tensor, adjacency: tuple[torch.Tensor, torch.Tensor],
                mixed: tuple[torch.Tensor, torch.Tensor] | None = None,
                history: list[torch.Tensor | None] | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits and each layer's input (fresh, as computed now).

        Args:
            x: features.
            adjacency: normalized ``A_hat``, ``n x n`` (destination x source), as :func:`sparse_adjacencies` gives.
            mixed: ``[A_same | A_cross]``, ``n x 2n`` (same form): edges within a partition read the fresh
                rows, edges across partitions the historical rows (``n + source``).
            history: per layer, the historical inputs (None: fresh everywhere, i.e. synchronous).

        Returns:
            ``(logits, inputs)`` with ``inputs[l]`` the input of layer l (``inputs[0]`` is ``x``).
        """
        h, inputs = x, []
        for layer, conv in enumerate(self.convs):
            inputs.append(h)
            if layer > 0:  # no dropout on the raw features (on CPU it costs more than the whole layer)
                h = F.dropout(h, self.dropout, self.training)
            stale = history[layer] if history is not None and layer > 0 else None
            if stale is not None:
                h = torch.cat([h, F.dropout(stale, self.dropout, self.training)])
            h = _gcn_layer(conv, h, adjacency if stale is None else mixed)
            if layer < len(self.convs) - 1:
                h = F.relu(h)
        return h, inputs


class _SpMM(torch.autograd.Function):
    """``A @ x`` with a precomputed transpose for the backward (torch's own backward re-sorts A every call)."""

    @staticmethod
    def forward(ctx, matrix: torch.Tensor, transposed: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        ctx.transposed = transposed
        return torch.sparse.mm(matrix, x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return None, None, torch.sparse.mm(ctx.transposed, grad)


def _gcn_layer(conv: nn.Module, h: torch.Tensor, adjacency: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``GCNConv``'s computation with its own parameters, ``A_hat (h W) + b``, the propagation as a sparse-dense
    product (equal to ``conv(h, A_hat)``; see the tests)."""
    out = _SpMM.apply(adjacency[0], adjacency[1], conv.lin(h))
    return out if conv.bias is None else out + conv.bias


def sparse_adjacencies(edge_index: torch.Tensor, num_nodes: int, cross: torch.Tensor | None = None):
    """``A_hat`` (``n x n``) and, given the per-edge ``cross`` flags of :func:`gcn_edges`' edges, the mixed
    ``n x 2n`` adjacency whose cross-partition edges point at the historical rows (None without ``cross``); each
    as a pair (sparse CSR matrix, its transpose)."""
    edge_index, weight = gcn_edges(edge_index, num_nodes)
    src, dst = edge_index

    def csr(columns: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        with warnings.catch_warnings():  # "sparse CSR support is in beta": the products used here are stable
            warnings.simplefilter("ignore", UserWarning)
            coo = torch.sparse_coo_tensor(torch.stack([dst, columns]), weight, (num_nodes, width)).coalesce()
            return coo.to_sparse_csr(), coo.t().coalesce().to_sparse_csr()

    if cross is None:
        return csr(src, num_nodes), None
    return csr(src, num_nodes), csr(torch.where(cross, src + num_nodes, src), 2 * num_nodes)


def _accuracy(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> float:
    return float((logits[mask].argmax(dim=1) == labels[mask]).float().mean())


def train_stale(data: Any, config: StaleTrainingConfig) -> dict[str, Any]:
    """Train a GCN with a staleness bound on a PyG ``Data`` (``x``, ``y``, ``edge_index``, split masks).

    Args:
        data: the graph (``suite.data.pyg_export.to_pyg_data``).
        config: the run.

    Returns:
        ``test_accuracy`` (at the best validation accuracy), ``best_valid_accuracy``, ``best_iteration``,
        ``final_test_accuracy``, ``mean_staleness`` / ``max_staleness`` of the reads from other partitions
        (iterations; 0 when synchronous), ``cross_edge_fraction``, ``train_s``, and the ``curve`` (iteration,
        loss, valid and test accuracy at each evaluation).
    """
    generator = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)  # dropout draws from the global generator
    num_nodes = int(data.num_nodes)
    edge_index, _ = gcn_edges(data.edge_index, num_nodes)
    assignment = random_partition(num_nodes, config.num_partitions, generator)
    cross = assignment[edge_index[0]] != assignment[edge_index[1]]
    adjacency, mixed = sparse_adjacencies(data.edge_index, num_nodes, cross)
    labels = data.y
    num_classes = int(labels.max()) + 1
    model = StaleGCN(data.x.shape[1], config.hidden, num_classes, config.num_layers, config.dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    history: list[torch.Tensor | None] | None = None
    latest: list[torch.Tensor] = []
    ages: list[int] = []
    refreshed_from = 0
    best = {"valid": -1.0, "test": 0.0, "iteration": -1}
    curve = []
    started = time.perf_counter()
    for t in range(config.iterations):
        if config.staleness > 0 and t >= 1 and (t - 1) % config.staleness == 0:
            history = [h.detach() for h in latest]  # computed by iteration t - 1
            refreshed_from = t - 1
        if history is not None:
            ages.append(t - refreshed_from)
        model.train()
        optimizer.zero_grad()
        logits, inputs = model(data.x, adjacency, mixed, history)
        latest = inputs
        loss = F.cross_entropy(logits[data.train_mask], labels[data.train_mask])
        loss.backward()
        optimizer.step()
        if (t + 1) % config.eval_every == 0 or t == config.iterations - 1:
            model.eval()
            with torch.no_grad():
                exact, _ = model(data.x, adjacency)
            valid, test = _accuracy(exact, labels, data.val_mask), _accuracy(exact, labels, data.test_mask)
            curve.append({"iteration": t + 1, "loss": float(loss.detach()), "valid_accuracy": valid, "test_accuracy": test})
            if valid > best["valid"]:
                best = {"valid": valid, "test": test, "iteration": t + 1}
    return {"test_accuracy": best["test"], "best_valid_accuracy": best["valid"], "best_iteration": best["iteration"],
            "final_test_accuracy": curve[-1]["test_accuracy"],
            "mean_staleness": float(sum(ages) / len(ages)) if ages else 0.0, "max_staleness": max(ages, default=0),
            "cross_edge_fraction": float(cross.float().mean()), "train_s": time.perf_counter() - started,
            "curve": curve}


__all__ = ["StaleGCN", "StaleTrainingConfig", "gcn_edges", "random_partition", "sparse_adjacencies", "train_stale"]
