"""Encoders over sampled neighbourhoods, declared in the ``models`` table of :mod:`systems.plugins` (looked up in
:data:`suite.registry.MODELS`).

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

Link prediction adds edge decoders (:mod:`systems.models.decoders`, the ``decoders`` table, :data:`suite.registry.DECODERS`:
``distmult``, ``complex``, ``dot``, ``transe``, ``transe_l2``) and learnable node embeddings outside the model
(:class:`~systems.models.embeddings.EmbeddingTable`, sparse Adagrad).

The package imports none of its modules: import what you need from the module that defines it, so that a
run imports only the plugins its spec names.
"""
