"""GraphSAGE over layer-wise sampled blocks, on PyG's :class:`~torch_geometric.nn.SAGEConv`."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import SAGEConv

from suite.config import ModelSpec
from suite.registry import MODELS
from systems.models.encoder import BlockStack, check_layers, layer_dims
from systems.sampling.sampler import LayerBlock


class GraphSAGE(BlockStack):
    """A stack of ``SAGEConv`` layers, one per sampled block; ReLU and dropout between layers, none at the end.

    Args:
        in_dim: input feature width.
        hidden_dim: width of the hidden layers.
        out_dim: output width (number of classes).
        num_layers: number of layers (= number of blocks a sample must hold).
        aggregation: neighbour aggregation of every layer: ``mean``, ``max`` or ``sum``.
        dropout: dropout probability between layers.
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, aggregation: str = "mean",
                 dropout: float = 0.5):
        super().__init__(dropout, F.relu)
        self.convs = nn.ModuleList(
            SAGEConv(width_in, width_out, aggr=aggregation)
            for width_in, width_out in layer_dims(in_dim, hidden_dim, out_dim, num_layers)
        )

    def apply_layer(self, conv: nn.Module, x: torch.Tensor, block: LayerBlock) -> torch.Tensor:
        """``SAGEConv`` on the bipartite block (all input rows -> destination rows)."""
        return conv((x, block.dst_rows(x)), block.edge_index, size=(x.shape[0], block.num_dst))


@MODELS.register("graphsage")
def build_graphsage(spec: ModelSpec, in_dim: int, out_dim: int) -> GraphSAGE:
    """Build :class:`GraphSAGE` from ``spec`` (``num_layers``, ``hidden_dim``, ``aggregation``, ``dropout``)."""
    check_layers(spec)
    return GraphSAGE(in_dim, spec.hidden_dim, out_dim, spec.num_layers, spec.aggregation, spec.dropout)


__all__ = ["GraphSAGE", "build_graphsage"]
