"""Encoders over sampled neighbourhoods; importing this package registers them in :data:`suite.registry.MODELS`.

Every entry is a builder ``build(spec: ModelSpec, in_dim: int, out_dim: int) -> torch.nn.Module`` whose module
is called as ``model(x, sample) -> logits [num_roots, out_dim]`` (see :mod:`systems.models.encoder`):

- ``graphsage``: :class:`~systems.models.graphsage.GraphSAGE` (PyG ``SAGEConv`` per sampled block);
- ``gcn``: :class:`~systems.models.gcn.GCN` (mean over a node and its neighbours, the GraphSAGE-GCN variant);
- ``gat``: :class:`~systems.models.gat.GAT` (PyG ``GATConv`` per block, ``model.heads`` concatenated heads in
  hidden layers);
- ``rgcn``, ``rgcn_fast``: :class:`~systems.models.rgcn.RGCN` (PyG ``RGCNConv`` / ``FastRGCNConv`` over typed
  edges, inverse relations for reverse edges);
- ``mlp``: :class:`~systems.models.mlp.MLP` (the roots' features only);
- ``shallow``: :class:`~systems.models.shallow.Shallow` (link prediction: the roots' own embedding rows).

Link prediction adds edge decoders (:mod:`systems.models.decoders`, registered in :data:`suite.registry.DECODERS`:
``distmult``, ``complex``, ``dot``, ``transe``, ``transe_l2``) and learnable node embeddings outside the model
(:class:`~systems.models.embeddings.EmbeddingTable`, sparse Adagrad).
"""

from __future__ import annotations

from torch import nn

from suite.config import ModelSpec
from suite.registry import MODELS
from systems.models.encoder import ModelBuilder, root_rows
from systems.models.gat import GAT, build_gat
from systems.models.gcn import GCN, build_gcn
from systems.models.graphsage import GraphSAGE, build_graphsage
from systems.models.mlp import MLP, build_mlp
from systems.models.rgcn import RGCN, RelationLookup, build_fast_rgcn, build_rgcn
from systems.models.shallow import Shallow, build_shallow
from systems.models.decoders import ComplEx, Decoder, DistMult, Dot, build_decoder
from systems.models.embeddings import EmbeddingTable


def build_model(spec: ModelSpec, in_dim: int, out_dim: int) -> nn.Module:
    """Build the registered model ``spec.encoder`` (raises ConfigError naming the known ones if unknown)."""
    return MODELS.get(spec.encoder)(spec, in_dim, out_dim)


__all__ = ["GAT", "GCN", "ComplEx", "Decoder", "DistMult", "Dot", "EmbeddingTable", "GraphSAGE", "MLP", "ModelBuilder", "RGCN", "RelationLookup", "build_fast_rgcn", "build_rgcn",
           "Shallow", "build_decoder", "build_gat", "build_gcn", "build_graphsage", "build_mlp", "build_model",
           "build_shallow", "root_rows"]
