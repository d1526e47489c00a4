"""A toy partition-buffer policy (link prediction): the partitions in order, cut into groups of half the buffer;
every pair of groups is one buffer state, pairs in lexicographic order; each bucket goes to a uniformly random
state holding both of its partitions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from systems.disk.plan import BufferPlan
from systems.disk.policies.policy import PartitionPolicy, PolicySpec, build_plan, require_task, walk_from_unit_slots


@dataclass(frozen=True)
class OrderedPairsPolicy(PartitionPolicy):
    """Every pair of in-order half-buffer groups, in lexicographic order."""

    name: ClassVar[str] = "ordered_pairs"
    tasks: ClassVar[frozenset[str]] = frozenset({"link_prediction"})

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        """Groups of ``c // 2`` consecutive partitions (``p`` must be a multiple of it), each pair one state."""
        require_task(spec, self.name, self.tasks)
        half = spec.capacity // 2
        groups = np.arange(spec.num_partitions, dtype=np.int32).reshape(-1, half)
        pairs = [np.array([a, b], dtype=np.int32) for a in range(len(groups)) for b in range(a + 1, len(groups))]
        return build_plan(self.name, spec, groups, 2, spec.capacity, walk_from_unit_slots(pairs, 2), "uniform", rng)
