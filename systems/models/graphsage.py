"""GraphSAGE over layer-wise sampled blocks, on PyG's :class:`~torch_geometric.nn.SAGEConv`."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import SAGEConv

from suite.config import ModelSpec
from suite.registry import MODELS
from systems.models.base import check_layers, layer_dims
from systems.sampling.base import SampledSubgraph


class GraphSAGE(nn.Module):
    """A stack of ``SAGEConv`` layers, one per sampled block; ReLU and dropout between layers, none at the end.

    Args:
        in_dim: input feature width.
        hidden_dim: width of the hidden layers.
        out_dim: output width (number of classes).
        num_layers: number of layers (= number of blocks a sample must hold).
        aggregation: neighbour aggregation of every layer: ``mean``, ``max`` or ``sum``.
        dropout: dropout probability between layers.
    """

    uses_neighbours = True

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, aggregation: str = "mean",
                 dropout: float = 0.5):
        super().__init__()
        self.convs = nn.ModuleList(
            SAGEConv(width_in, width_out, aggr=aggregation)
            for width_in, width_out in layer_dims(in_dim, hidden_dim, out_dim, num_layers)
        )
        self.dropout = dropout

    def forward(self, x: torch.Tensor, sample: SampledSubgraph) -> torch.Tensor:
        """Logits ``[len(sample.roots), out_dim]`` from the features ``x`` of ``sample.input_nodes``."""
        if len(sample.blocks) != len(self.convs):
            raise ValueError(f"GraphSAGE has {len(self.convs)} layers but the sample has {len(sample.blocks)} blocks")
        last = len(self.convs) - 1
        for layer, (conv, block) in enumerate(zip(self.convs, sample.blocks)):
            x = conv((x, block.dst_rows(x)), block.edge_index, size=(x.shape[0], block.num_dst))
            if layer < last:
                x = F.dropout(F.relu(x), p=self.dropout, training=self.training)
        return x

    def reset_parameters(self) -> None:
        """Re-initialize every layer."""
        for conv in self.convs:
            conv.reset_parameters()


@MODELS.register("graphsage")
def build_graphsage(spec: ModelSpec, in_dim: int, out_dim: int) -> GraphSAGE:
    """Build :class:`GraphSAGE` from ``spec`` (``num_layers``, ``hidden_dim``, ``aggregation``, ``dropout``)."""
    check_layers(spec)
    return GraphSAGE(in_dim, spec.hidden_dim, out_dim, spec.num_layers, spec.aggregation, spec.dropout)


__all__ = ["GraphSAGE", "build_graphsage"]
