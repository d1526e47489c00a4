"""GCN over sampled blocks: the GraphSAGE-GCN variant (mean over the neighbours and the node itself).

PyG's ``GCNConv`` needs a square (non-bipartite) graph, so sampled blocks use this layer instead. For a
destination ``v`` with sampled neighbour multiset ``N(v)`` (an edge sampled twice counts twice; a self-loop edge
in the graph counts as a neighbour, on top of the self term), one layer computes::

    out_v = W * (x_v + sum_{u in N(v)} x_u) / (|N(v)| + 1) + b

which is Hamilton et al.'s "GCN" aggregator (GraphSAGE paper, eq. 2) and Kipf & Welling's GCN with the
*random-walk* (row) normalization ``D^-1 (A + I)`` in place of the symmetric ``D^-1/2 (A + I) D^-1/2``. The
symmetric form needs the source nodes' degrees, which a sampled block does not define consistently (a source's
degree in the block depends on which destinations happened to sample it), whereas the row normalization depends
on the destination's own sample only. With all neighbours, ``|N(v)|`` is ``v``'s degree in the sampled
direction, and the layer equals the full-graph ``W * D^-1 (A + I) x + b`` with ``D = diag(deg + 1)``.

``model.gcn_normalization: symmetric`` gives Kipf & Welling's ``D^-1/2 (A + I) D^-1/2`` instead::

    out_v = W * (x_v / (d_v + 1) + sum_{u in N(v)} x_u / sqrt((d_u + 1) (d_v + 1))) + b

with ``d`` the nodes' degrees in the graph the blocks are sampled from (the sampling direction's CSR, attached by
the task as ``node_degree``: the whole graph in memory, a buffer state's graph on disk), not their degrees in the
block, so a source's weight does not depend on which destinations sampled it. With all neighbours it is the
full-graph GCN of Kipf & Welling (and Shchur et al.); with sampled neighbours, the common approximation that keeps
the full graph's normalization.

The linear map is applied before the aggregation when it narrows the rows and after it otherwise (the result
is the same, up to rounding); the aggregation is a ``index_add_`` over the block's edges.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from suite.config import ModelSpec
from suite.errors import ConfigError
from systems.models.encoder import BlockStack, check_layers, layer_dims
from systems.sampling.sampler import LayerBlock


def mean_with_self(x: torch.Tensor, block: LayerBlock) -> torch.Tensor:
    """``(x_v + sum_{u in N(v)} x_u) / (|N(v)| + 1)`` for every destination ``v`` of ``block``.

    Args:
        x: rows indexed like ``block.src_nodes``.
        block: the sampled block (destinations at ``block.dst_start``).

    Returns:
        ``[block.num_dst, x.shape[1]]`` rows, one per destination, in order.
    """
    src, dst = block.edge_index
    total = block.dst_rows(x).clone()
    total.index_add_(0, dst, x.index_select(0, src))
    counts = torch.bincount(dst, minlength=block.num_dst).to(x.dtype) + 1
    return total / counts.unsqueeze(1)


def symmetric_mean(x: torch.Tensor, block: LayerBlock, degree: torch.Tensor) -> torch.Tensor:
    """``x_v / (d_v + 1) + sum_{u in N(v)} x_u / sqrt((d_u + 1) (d_v + 1))`` for every destination ``v`` of
    ``block``, ``d`` indexed by the block's node ids (``degree[block.src_nodes]``).

    Args:
        x: rows indexed like ``block.src_nodes``.
        block: the sampled block (destinations at ``block.dst_start``).
        degree: every node's degree in the graph sampled from, by node id.
    """
    src, dst = block.edge_index
    scale = (degree.index_select(0, block.src_nodes).to(x.dtype) + 1).rsqrt()
    dst_scale = scale[block.dst_start: block.dst_start + block.num_dst]
    total = block.dst_rows(x) * (dst_scale * dst_scale).unsqueeze(1)
    weight = (scale.index_select(0, src) * dst_scale.index_select(0, dst)).unsqueeze(1)
    return total.index_add(0, dst, x.index_select(0, src) * weight)


class GCNLayer(nn.Module):
    """One GraphSAGE-GCN layer: ``W * mean(x_v, x_N(v)) + b`` (see the module docstring).

    Args:
        in_dim: input width.
        out_dim: output width.
    """

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot-uniform weights (as PyG's GCNConv) and a zero bias."""
        nn.init.xavier_uniform_(self.lin.weight)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, block: LayerBlock, degree: torch.Tensor | None = None) -> torch.Tensor:
        """``[block.num_dst, out_dim]`` from ``x`` indexed like ``block.src_nodes`` (``degree``: the symmetric
        normalization with these node degrees; None: the row normalization)."""
        def aggregate(rows: torch.Tensor) -> torch.Tensor:
            return mean_with_self(rows, block) if degree is None else symmetric_mean(rows, block, degree)

        if self.lin.out_features < self.lin.in_features:
            return aggregate(self.lin(x)) + self.bias
        return self.lin(aggregate(x)) + self.bias


class GCN(BlockStack):
    """A stack of :class:`GCNLayer`, one per sampled block; ReLU and dropout between layers, none at the end.

    Args:
        in_dim: input feature width.
        hidden_dim: width of the hidden layers.
        out_dim: output width (number of classes).
        num_layers: number of layers (= number of blocks a sample must hold).
        dropout: dropout probability between layers.
        normalization: ``row`` or ``symmetric`` (see the module docstring); a symmetric GCN reads the degrees the
            task attaches (``node_degree``, :func:`systems.models.encoder.attach_degrees`) and fails without them.
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float = 0.5,
                 normalization: str = "row"):
        super().__init__(dropout, F.relu)
        self.convs = nn.ModuleList(GCNLayer(a, b) for a, b in layer_dims(in_dim, hidden_dim, out_dim, num_layers))
        self.uses_degrees = normalization == "symmetric"
        self.node_degree: torch.Tensor | None = None

    def apply_layer(self, conv: nn.Module, x: torch.Tensor, block: LayerBlock) -> torch.Tensor:
        """One :class:`GCNLayer` on the block."""
        if not self.uses_degrees:
            return conv(x, block)
        if self.node_degree is None:
            raise RuntimeError("a symmetric GCN needs the sampled graph's degrees (attach_degrees) before it runs")
        return conv(x, block, self.node_degree)


def build_gcn(spec: ModelSpec, in_dim: int, out_dim: int) -> GCN:
    """Build :class:`GCN` from ``spec`` (``num_layers``, ``hidden_dim``, ``dropout``).

    Raises:
        ConfigError: ``num_layers < 1``, or ``aggregation`` other than ``mean`` (the layer always averages over the
            node and its neighbours).
    """
    check_layers(spec)
    if spec.aggregation != "mean":
        raise ConfigError(f"model.aggregation: gcn averages over a node and its neighbours; got {spec.aggregation!r}")
    return GCN(in_dim, spec.hidden_dim, out_dim, spec.num_layers, spec.dropout, spec.gcn_normalization)


__all__ = ["GCN", "GCNLayer", "build_gcn", "mean_with_self", "symmetric_mean"]
