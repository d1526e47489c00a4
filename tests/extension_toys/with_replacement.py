"""A toy sampler: the naive layer-wise sampler, always drawing neighbours with replacement (MariusGNN's rule,
whatever ``sampler.replace`` says)."""

from __future__ import annotations

from collections.abc import Sequence

from systems.sampling.naive import NaiveSampler
from systems.sampling.sampler import SamplingGraph


class WithReplacementSampler(NaiveSampler):
    """Naive sampling with replacement."""

    label = "naive with replacement (toy)"
    marker = "*"
    variants = {}

    def __init__(self, graph: SamplingGraph, fanouts: Sequence[int], *, replace: bool = False,
                 backend: str = "auto") -> None:
        super().__init__(graph, fanouts, replace=True, backend=backend)
