"""Multi-hop neighbourhood samplers and the structures they produce.

The built-in samplers, declared in the ``samplers`` table of :mod:`systems.plugins` (:data:`suite.registry.SAMPLERS`):

- ``naive``: :class:`~systems.sampling.naive.NaiveSampler`, layer-wise blocks with DGL semantics;
- ``dense``: :class:`~systems.sampling.dense.DenseSampler`, DENSE (each node's neighbours sampled once per batch);
- ``pyg``: :class:`~systems.sampling.pyg.PygSampler`, PyG's C++ neighbour sampler (pyg-lib or torch-sparse, when
  installed) behind the same contract, as layer-wise blocks.

The package imports none of its modules: import what you need from the module that defines it, so that a
run imports only the plugins its spec names.
"""
