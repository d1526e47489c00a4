"""Multi-hop neighbourhood samplers and the structures they produce.

Importing this package registers the built-in samplers in :data:`suite.registry.SAMPLERS`:

- ``naive``: :class:`~systems.sampling.naive.NaiveSampler`, layer-wise blocks with DGL semantics;
- ``dense``: :class:`~systems.sampling.dense.DenseSampler`, DENSE (each node's neighbours sampled once per batch).
"""

from systems.sampling.base import LayerBlock, SampledSubgraph, Sampler, SamplingGraph
from systems.sampling.naive import NaiveSampler
from systems.sampling.dense import DenseSampler, DenseSubgraph

__all__ = ["DenseSampler", "DenseSubgraph", "LayerBlock", "NaiveSampler", "SampledSubgraph", "Sampler", "SamplingGraph"]
