"""Multi-hop neighbourhood samplers and the structures they produce.

Importing this package registers the built-in samplers in :data:`suite.registry.SAMPLERS`:

- ``naive``: :class:`~systems.sampling.naive.NaiveSampler`, layer-wise blocks with DGL semantics.
"""

from systems.sampling.base import LayerBlock, SampledSubgraph, Sampler, SamplingGraph
from systems.sampling.naive import NaiveSampler

__all__ = ["LayerBlock", "NaiveSampler", "SampledSubgraph", "Sampler", "SamplingGraph"]
