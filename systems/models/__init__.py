"""Encoders over sampled neighbourhoods; importing this package registers them in :data:`suite.registry.MODELS`.

Every entry is a builder ``build(spec: ModelSpec, in_dim: int, out_dim: int) -> torch.nn.Module`` whose module
is called as ``model(x, sample) -> logits [num_roots, out_dim]`` (see :mod:`systems.models.base`):

- ``graphsage``: :class:`~systems.models.graphsage.GraphSAGE` (PyG ``SAGEConv`` per sampled block);
- ``gcn``: :class:`~systems.models.gcn.GCN` (mean over a node and its neighbours, the GraphSAGE-GCN variant);
- ``gat``: :class:`~systems.models.gat.GAT` (PyG ``GATConv`` per block, 4 concatenated heads in hidden layers);
- ``mlp``: :class:`~systems.models.mlp.MLP` (the roots' features only).
"""

from __future__ import annotations

from torch import nn

from suite.config import ModelSpec
from suite.registry import MODELS
from systems.models.base import ModelBuilder, root_rows
from systems.models.gat import GAT, build_gat
from systems.models.gcn import GCN, build_gcn
from systems.models.graphsage import GraphSAGE, build_graphsage
from systems.models.mlp import MLP, build_mlp


def build_model(spec: ModelSpec, in_dim: int, out_dim: int) -> nn.Module:
    """Build the registered model ``spec.encoder`` (raises ConfigError naming the known ones if unknown)."""
    return MODELS.get(spec.encoder)(spec, in_dim, out_dim)


__all__ = ["GAT", "GCN", "GraphSAGE", "MLP", "ModelBuilder", "build_gat", "build_gcn", "build_graphsage", "build_mlp",
           "build_model", "root_rows"]
