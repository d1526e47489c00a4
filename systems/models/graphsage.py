"""GraphSAGE over layer-wise sampled blocks, on PyG's :class:`~torch_geometric.nn.SAGEConv`.

A mean or sum aggregation over wide input rows runs as a sparse-dense product of the block's adjacency with the
rows (:mod:`systems.models.sparse_aggregation` says when, and why); the layer's weights, root weight and
normalization stay PyG's own (:class:`BlockSAGEConv` changes only how that aggregation is computed).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import SAGEConv

from suite.config import ModelSpec
from systems.models.encoder import BlockStack, check_layers, layer_dims
from systems.models.sparse_aggregation import block_adjacency, uses_sparse_product
from systems.sampling.sampler import LayerBlock


class BlockSAGEConv(SAGEConv):
    """PyG's ``SAGEConv`` whose aggregation over a sparse adjacency (:func:`block_adjacency`) counts repeated edges
    as the edge-list path does: sum = adjacency @ rows; mean = that over each destination's number of edges."""

    def message_and_aggregate(self, adj_t: torch.Tensor, x) -> torch.Tensor:  # type: ignore[override]
        rows = x[0] if isinstance(x, tuple) else x
        total = torch.sparse.mm(adj_t, rows)
        if self.aggr == "sum":
            return total
        edges = torch.sparse.mm(adj_t, torch.ones(rows.shape[0], 1, dtype=rows.dtype, device=rows.device))
        return total / edges.clamp(min=1)


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
            BlockSAGEConv(width_in, width_out, aggr=aggregation)
            for width_in, width_out in layer_dims(in_dim, hidden_dim, out_dim, num_layers)
        )

    def apply_layer(self, conv: nn.Module, x: torch.Tensor, block: LayerBlock) -> torch.Tensor:
        """``SAGEConv`` on the bipartite block (all input rows -> destination rows): a linear aggregation of wide
        rows as a sparse-dense product (:func:`~systems.models.sparse_aggregation.uses_sparse_product`), any other
        over the edge list."""
        if uses_sparse_product(conv.aggr, x.shape[1], x.dtype):
            return conv((x, block.dst_rows(x)), block_adjacency(block, x.shape[0], x.dtype))
        return conv((x, block.dst_rows(x)), block.edge_index, size=(x.shape[0], block.num_dst))


def build_graphsage(spec: ModelSpec, in_dim: int, out_dim: int) -> GraphSAGE:
    """Build :class:`GraphSAGE` from ``spec`` (``num_layers``, ``hidden_dim``, ``aggregation``, ``dropout``)."""
    check_layers(spec)
    return GraphSAGE(in_dim, spec.hidden_dim, out_dim, spec.num_layers, spec.aggregation, spec.dropout)


__all__ = ["BlockSAGEConv", "GraphSAGE", "build_graphsage"]
