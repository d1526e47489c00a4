"""GAT over sampled blocks, on PyG's :class:`~torch_geometric.nn.GATConv` with bipartite input ``(x_src, x_dst)``.

Shape: every hidden layer has ``model.heads`` (default :data:`HIDDEN_HEADS` = 4) attention heads of width
``hidden_dim / heads``, concatenated (so a hidden layer is ``hidden_dim`` wide; ``hidden_dim`` must be divisible by
``heads``); the output layer has one head. ELU and dropout
(``model.dropout``) between layers, as in Velickovic et al.; no dropout on the attention coefficients.

Self-loops: each destination attends to itself and to its sampled neighbours, as PyG's full-graph ``GATConv``
(``add_self_loops=True``: self-loop edges of the graph are dropped and one per node added). ``GATConv`` cannot do
this itself on a block, because it adds the edges ``(i, i)`` in local ids, which are the self-loops only when the
destinations are the first input rows; so the convolutions are built with ``add_self_loops=False`` and
:func:`block_edges_with_self_loops` adds ``(dst_start + i, i)`` after removing sampled edges whose two ends are the
same node, in both layouts. With all neighbours, the layer thus equals ``GATConv`` on the whole graph with the
same weights.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import GATConv

from suite.config import ModelSpec
from suite.errors import ConfigError
from suite.registry import MODELS
from systems.models.encoder import BlockStack, check_layers, layer_dims
from systems.sampling.sampler import LayerBlock

HIDDEN_HEADS = 4
"""Attention heads of every hidden layer (concatenated); the output layer has one."""


def block_edges_with_self_loops(block: LayerBlock) -> torch.Tensor:
    """``block.edge_index`` without self-loop edges, plus one edge from every destination's input row to it.

    A sampled edge is a self-loop when its source row and its destination hold the same global id.

    Returns:
        ``(2, e')`` int64 local ids (row 0 into the input rows, row 1 into the destinations).
    """
    src, dst = block.edge_index
    keep = block.src_nodes[src] != block.src_nodes[dst + block.dst_start]
    own = torch.arange(block.num_dst, device=src.device)
    loops = torch.stack([own + block.dst_start, own])
    return torch.cat([block.edge_index[:, keep], loops], dim=1)


class GAT(BlockStack):
    """A stack of bipartite ``GATConv`` layers, one per sampled block (see the module docstring for the shape).

    Args:
        in_dim: input feature width.
        hidden_dim: width of the hidden layers (all heads together; divisible by ``heads``).
        out_dim: output width (number of classes).
        num_layers: number of layers (= number of blocks a sample must hold).
        dropout: feature dropout probability between layers.
        heads: attention heads of the hidden layers (concatenated).
        attention_dropout: dropout probability of the attention coefficients.
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                 heads: int = HIDDEN_HEADS, attention_dropout: float = 0.0):
        super().__init__(dropout, F.elu)
        if num_layers > 1 and hidden_dim % heads:
            raise ValueError(f"hidden_dim {hidden_dim} is not divisible by the {heads} heads")
        dims = layer_dims(in_dim, hidden_dim, out_dim, num_layers)
        last = num_layers - 1
        self.convs = nn.ModuleList(
            GATConv(a, b, heads=1, dropout=attention_dropout, add_self_loops=False) if layer == last
            else GATConv(a, b // heads, heads=heads, dropout=attention_dropout, add_self_loops=False)
            for layer, (a, b) in enumerate(dims)
        )

    def apply_layer(self, conv: nn.Module, x: torch.Tensor, block: LayerBlock) -> torch.Tensor:
        """``GATConv`` on the block, with one self edge per destination (see the module docstring)."""
        edges = block_edges_with_self_loops(block)
        return conv((x, block.dst_rows(x)), edges, size=(x.shape[0], block.num_dst))


@MODELS.register("gat")
def build_gat(spec: ModelSpec, in_dim: int, out_dim: int) -> GAT:
    """Build :class:`GAT` from ``spec`` (``num_layers``, ``hidden_dim``, ``heads``, ``dropout``).

    Raises:
        ConfigError: ``num_layers < 1``, ``hidden_dim`` not divisible by ``heads`` (with more than one
            layer), or ``aggregation`` other than ``mean`` (attention decides the weights).
    """
    check_layers(spec)
    if spec.num_layers > 1 and spec.hidden_dim % spec.heads:
        raise ConfigError(f"model.hidden_dim: gat splits it over model.heads={spec.heads} heads; {spec.hidden_dim} "
                          f"is not divisible by {spec.heads}")
    if spec.aggregation != "mean":
        raise ConfigError(f"model.aggregation: gat weighs neighbours by attention; got {spec.aggregation!r}")
    return GAT(in_dim, spec.hidden_dim, out_dim, spec.num_layers, spec.dropout, heads=spec.heads)


__all__ = ["GAT", "HIDDEN_HEADS", "block_edges_with_self_loops", "build_gat"]
