"""``beta`` (Marius's Buffer-aware Edge Traversal Algorithm) and ``comet`` (MariusGNN: BETA over random logical
partitions), their swap formulas, and the BETA walk they share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from suite.errors import ConfigError
from systems.disk.plan import BufferPlan
from systems.disk.policies.policy import (PartitionPolicy, PolicySpec, Walk, build_plan, logical_sizes,
                                        random_groups, require_task, single_partitions)


def beta_swaps(p: int, c: int) -> int:
    """Partition swaps of one BETA epoch (initial fill not counted): ``(p-c) + (x+1)((p-c) - x(c-1)/2)``."""
    if c >= p:
        return 0
    if c < 2:
        raise ConfigError(f"policy.capacity: BETA needs a capacity of at least 2 partitions (got {c})")
    x = (p - c) // (c - 1)
    return (p - c) + (x + 1) * (p - c) - (x + 1) * x * (c - 1) // 2


def swap_lower_bound(p: int, c: int) -> int:
    """Lower bound on swaps of any ordering covering all pairs: ``ceil((p(p-1)/2 - c(c-1)/2) / (c-1))``."""
    if c >= p:
        return 0
    return -(-(p * (p - 1) // 2 - c * (c - 1) // 2) // (c - 1))


def beta_walk(n: int, capacity: int, rng: np.random.Generator | None) -> Walk:
    """BETA over ``n`` units with ``capacity`` slots as loads ``(offsets, slots, units)``.

    Marius's ``getBetaOrderingHelper`` with slots kept in place: a random permutation fills the buffer; each
    phase picks a random cycling slot, cycles it through the shuffled units on disk (the evicted unit goes
    back to disk), then replaces the other slots one per state by not-yet-done units (the replaced fixed
    units are done: they have met every unit). ``rng=None`` gives the canonical order (identity
    permutation, slot ``capacity - 1`` cycles, fixed slots replaced in slot order), handy for hand checks.
    """
    if n <= capacity:
        return (np.array([0, n], dtype=np.int64), np.arange(n, dtype=np.int32), np.arange(n, dtype=np.int32))
    if capacity < 2:
        raise ConfigError(f"policy.capacity: BETA needs at least 2 slots (got {capacity})")
    perm = _permutation(n, rng)
    slots = perm[:capacity].copy()
    on_disk = perm[capacity:].copy()
    load_slots = [np.arange(capacity, dtype=np.int32)]
    load_units = [slots.copy()]
    while len(on_disk):
        on_disk = _beta_phase(slots, on_disk, rng, load_slots, load_units)
    units_all = np.concatenate(load_units)
    offsets = np.concatenate([[0], np.arange(capacity, len(units_all) + 1)]).astype(np.int64)
    return offsets, np.concatenate(load_slots), units_all


def _permutation(n: int, rng: np.random.Generator | None) -> np.ndarray:
    """A random permutation of ``0 .. n-1`` (the identity without ``rng``), int32."""
    return np.arange(n, dtype=np.int32) if rng is None else rng.permutation(n).astype(np.int32)


def _shuffled(a: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    return a if rng is None else a[rng.permutation(len(a))]


def _beta_phase(slots: np.ndarray, on_disk: np.ndarray, rng: np.random.Generator | None,
                load_slots: list[np.ndarray], load_units: list[np.ndarray]) -> np.ndarray:
    """One BETA phase: cycle a slot through the units on disk, then replace the fixed slots by units not yet
    done. Appends the loads, updates ``slots`` in place and returns the units still on disk."""
    capacity = len(slots)
    order = _permutation(capacity, rng)
    cycling = order[-1]
    on_disk = _shuffled(on_disk, rng)
    load_slots.append(np.full(len(on_disk), cycling, dtype=np.int32))
    load_units.append(on_disk.copy())
    evicted_first = slots[cycling]
    slots[cycling] = on_disk[-1]
    on_disk = _shuffled(np.concatenate([[evicted_first], on_disk[:-1]]).astype(np.int32), rng)
    m = min(capacity - 1, len(on_disk))
    fixed = order[:m]
    load_slots.append(fixed.copy())
    load_units.append(on_disk[:m].copy())
    slots[fixed] = on_disk[:m]
    return on_disk[m:]


@dataclass(frozen=True)
class BetaOrdering(PartitionPolicy):
    """The BETA walk over units of partitions; a subclass says what a unit is and how buckets are assigned.
    ``randomize=False``: the canonical walk (and units), hand-checkable."""

    assignment: ClassVar[str] = "first"

    randomize: bool = True

    def units(self, spec: PolicySpec) -> tuple[int, int]:  # pragma: no cover - abstract
        """``(units, unit_capacity)``: how many units the walk covers and how many the buffer holds."""
        raise NotImplementedError

    def groups(self, spec: PolicySpec, rng: np.random.Generator | None) -> np.ndarray:  # pragma: no cover
        """The physical partitions of every unit, ``(units, partitions per unit)``; drawn after the walk."""
        raise NotImplementedError

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        """BETA over :meth:`units`, then :meth:`groups`; buckets by :attr:`assignment`."""
        require_task(spec, self.name, self.tasks)
        walk_rng = rng if self.randomize else None
        units, unit_capacity = self.units(spec)
        walk = beta_walk(units, unit_capacity, walk_rng)
        return build_plan(self.name, spec, self.groups(spec, walk_rng), min(units, unit_capacity), spec.capacity,
                          walk, self.assignment, rng)


@dataclass(frozen=True)
class BetaPolicy(BetaOrdering):
    """Marius's BETA ordering over the physical partitions, greedy (``"first"``) bucket assignment."""

    label: ClassVar[str] = "BETA"  # how figures name it

    name: ClassVar[str] = "beta"

    def units(self, spec: PolicySpec) -> tuple[int, int]:
        """Every partition is a unit."""
        return spec.num_partitions, spec.capacity

    def groups(self, spec: PolicySpec, rng: np.random.Generator | None) -> np.ndarray:
        """One partition per unit."""
        return single_partitions(spec.num_partitions)


@dataclass(frozen=True)
class CometPolicy(BetaOrdering):
    """MariusGNN's COMET: BETA over fresh random logical partitions, uniformly random bucket assignment."""

    label: ClassVar[str] = "COMET"  # how figures name it

    name: ClassVar[str] = "comet"
    assignment: ClassVar[str] = "uniform"

    def units(self, spec: PolicySpec) -> tuple[int, int]:
        """Logical partitions of ``fine_to_coarse_ratio`` physical ones (checked to divide ``p`` and ``c``)."""
        logical, logical_capacity, _ = logical_sizes(spec, self.name)
        return logical, logical_capacity

    def groups(self, spec: PolicySpec, rng: np.random.Generator | None) -> np.ndarray:
        """A random permutation of the partitions cut into logical partitions (in order without ``rng``)."""
        return random_groups(spec.num_partitions, spec.fine_to_coarse_ratio, rng)


__all__ = ["BetaOrdering", "BetaPolicy", "CometPolicy", "beta_swaps", "beta_walk", "swap_lower_bound"]
