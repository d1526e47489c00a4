"""R-GCN (Schlichtkrull et al., 2018) over sampled blocks, on PyG's ``RGCNConv`` / ``FastRGCNConv``.

Registered as ``rgcn`` (:class:`BlockRGCNConv`: PyG's ``RGCNConv`` -- its parameters, initialization and
semantics -- with a forward computed per edge instead of per relation over all nodes) and ``rgcn_fast`` (PyG's
``FastRGCNConv`` as it is: one weight matrix gathered per edge, ``E x in x out`` floats, for small samples).

Why not ``RGCNConv.forward`` itself: it loops over all ``R`` relation types and aggregates each over every
destination (``O(R * N * d)`` work and autograd nodes per layer); with FB15k-237's 474 types (inverses included) a
1-layer block of a few hundred edges took 30 s forward and backward here. :class:`BlockRGCNConv` transforms the
sampled edges only: one product per relation type present in the block (with ``num_bases``, the relations'
matrices ``W_r = sum_b c_rb W_b`` are formed first, one ``R x B`` by ``B x (in * out)`` product: transforming every
source row by every basis and combining ``edges x bases x out`` messages per edge instead took 80 % of an R-GCN
epoch on FB15k-237), divided by the per ``(destination, relation)`` counts for ``mean``, summed into the
destinations. Equal to ``RGCNConv.forward`` up
to rounding (tested); ``max`` aggregation falls back to PyG's forward.
Each layer is ``h_v' = W_0 h_v + sum_r mean_{u in N_r(v)} W_r h_u`` over the block's typed edges (bipartite input
``(x_src, x_dst)``: the root weight ``W_0`` reads the destinations' own rows), ReLU and dropout between layers;
``model.num_bases`` decomposes the ``W_r`` over that many bases; ``model.aggregation`` (``mean``, ``sum``, ``max``)
is per relation, as in PyG.

Typed edges. Samplers return neighbours, not edge positions, so the relation of a sampled edge ``u -> v`` is read
from the graph by :class:`RelationLookup`: the typed neighbour lists of the sampling direction, sorted by
``(v, u)``. An edge ``u -> v`` seen through the in-lists has relation ``r``; through the out-lists (``sampler.direction``
``out`` or ``both``) it is the reverse edge and gets ``r + R`` (R-GCN's inverse relations; the encoder thus has
``2R`` relation types). When ``(u, v)`` has ``c`` parallel edges, the ``k``-th sampled copy (in block order) takes
the ``(k mod c)``-th of them, so a block with all neighbours gets exactly the graph's typed edges in both layouts
(naive and DENSE); a sample that kept only some copies takes the first ones. The task attaches the lookup after
building the model (:func:`attach_relations`). The disk system's in-buffer graph is over buffer rows, not global
ids: it carries the relation types of its neighbour lists, and the system attaches that state's lookup
(:meth:`RelationLookup.from_graph`) whenever it enters a state.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from suite.config import ModelSpec
from suite.errors import ConfigError, DataError
from suite.registry import MODELS
from systems.models.encoder import BlockStack, check_layers, check_normalization, layer_dims, set_input_dropout
from systems.sampling.sampler import LayerBlock, SamplingGraph

_AGGREGATIONS = {"mean": "mean", "sum": "add", "max": "max"}


class RelationLookup:
    """The relation type of sampled edges ``u -> v`` from their global endpoints (see the module docstring).

    Args:
        rows, cols, types: the typed neighbour lists: ``cols[i]`` is a neighbour of ``rows[i]`` through an edge
            of type ``types[i]``, in neighbour-list order.
        num_nodes: node count (keys are ``row * num_nodes + col``).
        num_types: relation types the encoder sees (``2R``).
    """

    def __init__(self, rows: torch.Tensor, cols: torch.Tensor, types: torch.Tensor, num_nodes: int, num_types: int):
        keys = rows.to(torch.int64) * num_nodes + cols.to(torch.int64)
        self.keys, order = torch.sort(keys, stable=True)
        self.types = types.to(torch.int64)[order]
        self.num_nodes = num_nodes
        self.num_types = num_types

    @classmethod
    def from_store(cls, store, direction: str = "in") -> "RelationLookup":
        """The lookup of ``store``'s typed CSRs for ``sampler.direction`` (``in``, ``out`` or ``both``)."""
        relations = store.num_relations
        parts = []
        for kind, shift in (("in", 0), ("out", relations)):
            if direction not in (kind, "both"):
                continue
            csr = store.csr(kind)
            rows = torch.repeat_interleave(torch.arange(store.num_nodes), csr.degrees())
            types = csr.relations.to(torch.int64) if csr.relations is not None else torch.zeros(len(rows),
                                                                                               dtype=torch.int64)
            parts.append((rows, csr.indices.to(torch.int64), types + shift))
        if not parts:
            raise ValueError(f"direction must be 'in', 'out' or 'both', got {direction!r}")
        rows, cols, types = (torch.cat(column) for column in zip(*parts))
        return cls(rows, cols, types, store.num_nodes, 2 * relations)

    @classmethod
    def from_graph(cls, graph: SamplingGraph, num_types: int) -> "RelationLookup":
        """The lookup of a typed sampling graph (``graph.relations`` aligned with its neighbour lists, already
        shifted by ``R`` for out-neighbours), e.g. the disk system's in-buffer graph over buffer rows."""
        if graph.relations is None:
            raise ValueError("RelationLookup.from_graph: the graph carries no relation types")
        rows = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.indptr.diff())
        return cls(rows, graph.indices, graph.relations, graph.num_nodes, num_types)

    def to(self, device: torch.device) -> "RelationLookup":
        """The lookup with its tables on ``device`` (a no-op when they are there)."""
        if self.keys.device == torch.device(device):
            return self
        moved = object.__new__(RelationLookup)
        moved.keys, moved.types = self.keys.to(device), self.types.to(device)
        moved.num_nodes, moved.num_types = self.num_nodes, self.num_types
        return moved

    def edge_types(self, block: LayerBlock) -> torch.Tensor:
        """``(e,)`` relation types of ``block.edge_index``'s edges."""
        src, dst = block.edge_index
        keys = block.src_nodes[dst + block.dst_start] * self.num_nodes + block.src_nodes[src]
        first = torch.searchsorted(self.keys, keys)
        count = torch.searchsorted(self.keys, keys, right=True) - first
        if bool((count == 0).any()):
            bad = int(torch.nonzero(count == 0)[0])
            raise DataError(f"rgcn: sampled edge {int(block.src_nodes[src[bad]])} -> "
                            f"{int(block.src_nodes[dst[bad] + block.dst_start])} is not in the typed graph")
        # occurrence rank of each edge among the block's edges with the same key, in block order
        sorted_keys, order = torch.sort(keys, stable=True)
        start = torch.ones_like(sorted_keys, dtype=torch.bool)
        start[1:] = sorted_keys[1:] != sorted_keys[:-1]
        positions = torch.arange(len(keys), device=keys.device)
        group_start = torch.cummax(torch.where(start, positions, torch.zeros_like(positions)), 0).values
        rank = torch.empty_like(positions)
        rank[order] = positions - group_start
        return self.types[first + rank % count]


def _rgcn_conv_class():
    from torch_geometric.nn import RGCNConv

    class BlockRGCNConv(RGCNConv):
        """``RGCNConv`` whose forward touches only the sampled edges (see the module docstring)."""

        def forward(self, x, edge_index, edge_type):  # type: ignore[override]
            if self.aggr not in ("mean", "add") or not isinstance(x, tuple) or self.num_blocks is not None:
                return super().forward(x, edge_index, edge_type)
            x_src, x_dst = x
            src, dst = edge_index
            counts = None
            if self.aggr == "mean":  # |N_r(v)| of each edge's destination and relation
                _, group, sizes = torch.unique(dst * self.num_relations + edge_type, return_inverse=True,
                                               return_counts=True)
                counts = sizes[group].unsqueeze(1).to(x_src.dtype)
            weight = self.weight
            if self.num_bases is not None:  # W_r = sum_b comp_rb W_b, once for all relations (R x B x in x out)
                bases, in_dim, out_dim = weight.shape
                weight = (self.comp @ weight.reshape(bases, in_dim * out_dim)).view(-1, in_dim, out_dim)
            out = self._relation_messages(x_src, src, dst, edge_type, counts, x_dst.shape[0], weight)
            if self.root is not None:
                out = out + x_dst @ self.root
            if self.bias is not None:
                out = out + self.bias
            return out

        def _relation_messages(self, x_src, src, dst, edge_type, counts, num_dst, weight):
            """``sum_{u -r-> v} W_r x_u / |N_r(v)|`` (``weight``: the ``(R, in, out)`` ``W_r``): one product per
            relation type present in the block."""
            out_dim = self.out_channels
            order = torch.argsort(edge_type)
            per_relation = torch.bincount(edge_type, minlength=self.num_relations).tolist()
            sources = x_src[src[order]].split(per_relation)
            weights = weight.unbind(0)  # one backward node for all slices (indexing would make R)
            pieces = [part @ weights[relation] for relation, part in enumerate(sources) if len(part)]
            if not pieces:
                return x_src.new_zeros(num_dst, out_dim)
            messages = x_src.new_empty(len(src), out_dim).index_copy(0, order, torch.cat(pieces))
            if counts is not None:
                messages = messages / counts
            return x_src.new_zeros(num_dst, out_dim).index_add(0, dst, messages)

    return BlockRGCNConv


class RGCN(BlockStack):
    """A stack of bipartite ``RGCNConv`` (or ``FastRGCNConv``) layers, one per sampled block.

    Args:
        in_dim, hidden_dim, out_dim, num_layers, dropout: as the other encoders.
        num_relations: relation types of the edges (``2R`` with inverse relations).
        num_bases: basis decomposition (None: full matrices).
        aggregation: ``mean``, ``sum`` or ``max`` (per relation).
        fast: use ``FastRGCNConv``.
    """

    uses_relations = True

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, num_relations: int,
                 dropout: float = 0.5, num_bases: int | None = None, aggregation: str = "mean", fast: bool = False):
        super().__init__(dropout, F.relu)
        from torch_geometric.nn import FastRGCNConv

        conv = FastRGCNConv if fast else _rgcn_conv_class()
        self.num_relations = num_relations
        self.convs = nn.ModuleList(conv(a, b, num_relations, num_bases=num_bases, aggr=_AGGREGATIONS[aggregation])
                                   for a, b in layer_dims(in_dim, hidden_dim, out_dim, num_layers))
        self.relation_lookup: RelationLookup | None = None

    def apply_layer(self, conv: nn.Module, x: torch.Tensor, block: LayerBlock) -> torch.Tensor:
        """The typed convolution of the block's edges (types from :attr:`relation_lookup`)."""
        if self.relation_lookup is None:
            raise RuntimeError("RGCN: no relation lookup attached (systems.models.rgcn.attach_relations)")
        lookup = self.relation_lookup = self.relation_lookup.to(x.device)
        return conv((x, block.dst_rows(x)), block.edge_index, lookup.edge_types(block))


def _builder(fast: bool):
    def build(spec: ModelSpec, in_dim: int, out_dim: int, *, num_relations: int = 2) -> RGCN:
        check_layers(spec)
        name = "rgcn_fast" if fast else "rgcn"
        if spec.num_bases is not None and spec.num_bases > num_relations:
            raise ConfigError(f"model.num_bases: {name} has {num_relations} relation types (with inverses); "
                              f"{spec.num_bases} bases is more than that")
        return RGCN(in_dim, spec.hidden_dim, out_dim, spec.num_layers, num_relations, spec.dropout,
                    spec.num_bases, spec.aggregation, fast)

    build.needs_relations = True
    build.__doc__ = (f"Build :class:`RGCN` ({'FastRGCNConv' if fast else 'RGCNConv'}) from ``spec``; "
                     f"``num_relations`` = twice the store's (inverse relations).")
    return build


build_rgcn = _builder(fast=False)
build_fast_rgcn = _builder(fast=True)


def build_encoder(spec: ModelSpec, in_dim: int, out_dim: int, store) -> nn.Module:
    """Build the registered encoder ``spec.encoder``; one that reads relation types (``needs_relations``) gets
    twice the store's relation count."""
    builder = MODELS.get(spec.encoder)
    if getattr(builder, "needs_relations", False):
        model = builder(spec, in_dim, out_dim, num_relations=2 * store.num_relations)
    else:
        model = builder(spec, in_dim, out_dim)
    return set_input_dropout(check_normalization(model, spec), spec)


def relation_modules(model: nn.Module | None) -> list[nn.Module]:
    """The modules of ``model`` that read relation types (``uses_relations``), e.g. an R-GCN encoder inside a
    link-prediction model."""
    return [] if model is None else [m for m in model.modules() if getattr(m, "uses_relations", False)]


def attach_lookup(model: nn.Module | None, lookup: RelationLookup | None) -> None:
    """Give every module of ``model`` that reads relation types the lookup ``lookup``."""
    for module in relation_modules(model):
        module.relation_lookup = lookup


def attach_relations(encoder: nn.Module, store, direction: str) -> None:
    """Give an encoder that reads relation types (``uses_relations``) the lookup of ``store`` for the sampling
    ``direction``; other encoders are left as they are."""
    if getattr(encoder, "uses_relations", False):
        encoder.relation_lookup = RelationLookup.from_store(store, direction)


__all__ = ["RGCN", "RelationLookup", "attach_lookup", "attach_relations", "build_encoder", "build_fast_rgcn",
           "build_rgcn", "relation_modules"]
