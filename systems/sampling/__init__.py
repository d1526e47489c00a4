"""Multi-hop neighbourhood samplers and the structures they produce.

Importing this package registers the built-in samplers in :data:`suite.registry.SAMPLERS`:

- ``naive``: :class:`~systems.sampling.naive.NaiveSampler`, layer-wise blocks with DGL semantics;
- ``dense``: :class:`~systems.sampling.dense.DenseSampler`, DENSE (each node's neighbours sampled once per batch);
- ``pyg``: :class:`~systems.sampling.pyg.PygSampler`, PyG's C++ neighbour sampler (pyg-lib or torch-sparse, when
  installed) behind the same contract, as layer-wise blocks.
"""

from systems.sampling.sampler import LayerBlock, SampledSubgraph, Sampler, SamplingGraph
from systems.sampling.naive import NaiveSampler
from systems.sampling.dense import DenseSampler, DenseSubgraph
from systems.sampling.pyg import PygSampler

__all__ = ["DenseSampler", "DenseSubgraph", "LayerBlock", "NaiveSampler", "PygSampler", "SampledSubgraph", "Sampler", "SamplingGraph"]
