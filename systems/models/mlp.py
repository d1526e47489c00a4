"""A features-only MLP baseline: reads the roots' features and ignores the sampled neighbourhood."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from suite.config import ModelSpec
from systems.models.encoder import check_layers, layer_dims, root_rows
from systems.sampling.sampler import SampledSubgraph


class MLP(nn.Module):
    """``num_layers`` linear layers with ReLU and dropout between them, over the roots' own features.

    It takes the same ``(x, sample)`` input as the graph encoders, so one harness compares them.

    Args:
        in_dim: input feature width.
        hidden_dim: width of the hidden layers.
        out_dim: output width (number of classes).
        num_layers: number of linear layers.
        dropout: dropout probability between layers.
    """

    uses_neighbours = False
    input_dropout = 0.0
    """Dropout probability on the roots' input rows (``model.input_dropout``)."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in layer_dims(in_dim, hidden_dim, out_dim, num_layers))
        self.dropout = dropout

    def forward(self, x: torch.Tensor, sample: SampledSubgraph) -> torch.Tensor:
        """Logits ``[len(sample.roots), out_dim]`` from the roots' rows of ``x`` (features of ``input_nodes``)."""
        x = F.dropout(root_rows(x, sample), p=self.input_dropout, training=self.training)
        last = len(self.lins) - 1
        for layer, lin in enumerate(self.lins):
            x = lin(x)
            if layer < last:
                x = F.dropout(F.relu(x), p=self.dropout, training=self.training)
        return x


def build_mlp(spec: ModelSpec, in_dim: int, out_dim: int) -> MLP:
    """Build :class:`MLP` from ``spec`` (``num_layers``, ``hidden_dim``, ``dropout``; the rest is ignored)."""
    check_layers(spec)
    return MLP(in_dim, spec.hidden_dim, out_dim, spec.num_layers, spec.dropout)


__all__ = ["MLP", "build_mlp"]
