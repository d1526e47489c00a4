"""Sampler throughput: the naive layer-wise sampler against DENSE, per number of layers.

One synthetic power-law graph (the suite's Chung-Lu generator, :data:`GRAPH`) is generated once per benchmark
run in ``setup_cache``; every benchmark samples a fixed batch of :data:`BATCH_SIZE` random roots with the first
``num_layers`` entries of :data:`FANOUTS`, without replacement, in the ``in`` direction.

- ``time_sample``: seconds per batch (asv's own repeats and statistics);
- ``track_sampled_edges_per_s``: sampled edges per second over :data:`TRACK_BATCHES` batches (the throughput
  unit of the suite and of MariusGNN's sampling figures).

``setup`` samples one batch first, so that neither benchmark times JIT compilation (the numba kernels compile
on first use in every benchmark process) or first allocations. Sampled edges are what each sampler reports
(``num_sampled_edges``): DENSE samples each node's neighbours once per batch, so it needs fewer edges than the
naive sampler for the same fanouts; compare ``time_sample`` for the cost of one batch.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import suite.plugins  # noqa: F401  (registers the built-in samplers)
from suite.graph.synthetic import SyntheticConfig, generate
from suite.registry import SAMPLERS
from systems.sampling.sampler import Sampler, SamplingGraph

GRAPH = SyntheticConfig(name="bench-power-law", num_nodes=100_000, avg_degree=12.0, power_law_exponent=2.5,
                        max_degree=5_000, num_classes=10, feature_dim=0, label_rate=0.0, seed=0)
"""The benchmark graph: 100k nodes, ~1.2M stored edges (undirected), degrees ~ k**-2.5 capped at 5,000."""

FANOUTS = (15, 10, 5)
"""Neighbours per hop, from the roots outwards; ``num_layers`` takes the first entries."""

BATCH_SIZE = 1000
TRACK_BATCHES = 5
SAMPLERS_BENCHED = ("naive", "dense")
NUM_LAYERS = (1, 2, 3)


def make_graph(config: SyntheticConfig = GRAPH) -> tuple[np.ndarray, np.ndarray]:
    """Generate ``config`` in a temporary store and return its in-neighbour CSR ``(indptr, indices)``."""
    with tempfile.TemporaryDirectory() as folder:
        store = generate(config, Path(folder) / "graph")
        csr = store.csr("in")  # memory-mapped: copied out before the folder goes
        return csr.indptr.to(torch.int64).numpy().copy(), csr.indices.to(torch.int64).numpy().copy()


def make_sampler(graph: tuple[np.ndarray, np.ndarray], name: str, num_layers: int) -> Sampler:
    """The registered sampler ``name`` over ``graph`` with the first ``num_layers`` :data:`FANOUTS`."""
    indptr, indices = graph
    sampling_graph = SamplingGraph(torch.from_numpy(indptr), torch.from_numpy(indices))
    return SAMPLERS.get(name)(sampling_graph, FANOUTS[:num_layers], replace=False)


def batch_roots(num_nodes: int, size: int = BATCH_SIZE, seed: int = 0) -> torch.Tensor:
    """``min(size, num_nodes)`` distinct random roots, the same for every sampler."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randperm(num_nodes, generator=generator)[:size]


class Sampling:
    """Per-batch cost of multi-hop sampling, ``sampler`` x ``num_layers``."""

    params = [list(SAMPLERS_BENCHED), list(NUM_LAYERS)]
    param_names = ["sampler", "num_layers"]
    timeout = 300.0

    def setup_cache(self) -> tuple[np.ndarray, np.ndarray]:
        """The benchmark graph, generated once for all parameters (a few seconds)."""
        return make_graph()

    def setup(self, graph: tuple[np.ndarray, np.ndarray], sampler: str, num_layers: int) -> None:
        """Build the sampler, the roots and a seeded generator; sample once (JIT compilation, first allocations)."""
        self.sampler = make_sampler(graph, sampler, num_layers)
        self.roots = batch_roots(len(graph[0]) - 1)
        self.generator = torch.Generator().manual_seed(0)
        self.sampler.sample(self.roots, self.generator)

    def time_sample(self, graph: tuple[np.ndarray, np.ndarray], sampler: str, num_layers: int) -> None:
        """Sample one batch."""
        self.sampler.sample(self.roots, self.generator)

    def track_sampled_edges_per_s(self, graph: tuple[np.ndarray, np.ndarray], sampler: str,
                                  num_layers: int) -> float:
        """Sampled edges per second over :data:`TRACK_BATCHES` batches (after the warm-up batch of ``setup``)."""
        edges = 0
        started = time.perf_counter()
        for _ in range(TRACK_BATCHES):
            edges += self.sampler.sample(self.roots, self.generator).num_sampled_edges
        return edges / (time.perf_counter() - started)

    track_sampled_edges_per_s.unit = "edges/s"
