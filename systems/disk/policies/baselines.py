"""Baseline policies: ``random`` (all pairs of random half-buffer groups, in random order) and ``in_memory``
(one state holding every partition)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from suite.errors import ConfigError
from suite.registry import POLICIES
from systems.disk.plan import BufferPlan
from systems.disk.policies.policy import (PartitionPolicy, PolicySpec, build_plan, require_task, single_partitions,
                                        single_state, walk_from_unit_slots)


def padded_random_groups(p: int, g: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """``(g, width)`` int32: a random permutation of the ``p`` partitions split into ``g`` nearly equal groups
    (of at most ``width``), ``-1``-padded."""
    perm = rng.permutation(p).astype(np.int32)
    groups = np.full((g, width), -1, dtype=np.int32)
    for a, members in enumerate(np.array_split(perm, g)):
        groups[a, :len(members)] = members
    return groups


def random_pair_states(g: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The two-slot contents visiting every pair of ``g`` groups once, pairs in random order; a group already
    in the buffer keeps its slot, the new ones go to the free slots (in random order when both are new)."""
    a, b = np.triu_indices(g, k=1)
    order = rng.permutation(len(a))
    states = []
    slots = np.full(2, -1, dtype=np.int32)
    for x, y in zip(a[order], b[order]):
        slots = _next_pair_slots(slots, {int(x), int(y)}, rng)
        states.append(slots)
    return states


def _next_pair_slots(slots: np.ndarray, wanted: set[int], rng: np.random.Generator) -> np.ndarray:
    keep = [s for s in range(2) if slots[s] in wanted]
    new = sorted(wanted - {int(slots[s]) for s in keep})
    if rng.random() < 0.5:
        new.reverse()
    free = [s for s in range(2) if s not in keep]
    nxt = slots.copy()
    nxt[free] = new
    return nxt


@POLICIES.register("random")
@dataclass(frozen=True)
class RandomPolicy(PartitionPolicy):
    """Naive baseline: all pairs of random half-buffer groups, in random order; uniform bucket assignment."""

    name: ClassVar[str] = "random"

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        """Groups of ``h = c // 2`` partitions, every pair of groups one state."""
        require_task(spec, self.name, self.tasks)
        p, c = spec.num_partitions, spec.capacity
        if p <= c:
            return build_plan(self.name, spec, single_partitions(p), p, c, single_state(p), "uniform", rng)
        if c < 2:
            raise ConfigError(f"policy.capacity: random needs at least 2 slots (got {c})")
        h = c // 2
        g = -(-p // h)
        groups = padded_random_groups(p, g, h, rng)
        walk = walk_from_unit_slots(random_pair_states(g, rng), 2)
        return build_plan(self.name, spec, groups, 2, c, walk, "uniform", rng)


@POLICIES.register("in_memory")
@dataclass(frozen=True)
class InMemoryPolicy(PartitionPolicy):
    """Everything in memory: one state holding all ``p`` partitions (capacity ``p``)."""

    name: ClassVar[str] = "in_memory"

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        """One state, ``"first"`` assignment."""
        require_task(spec, self.name, self.tasks)
        p = spec.num_partitions
        return build_plan(self.name, spec, single_partitions(p), p, p, single_state(p), "first", rng)


__all__ = ["InMemoryPolicy", "RandomPolicy", "padded_random_groups", "random_pair_states"]
