"""Node-classification policies of MariusGNN: ``sequential`` (training partitions stay, the other slots get a fresh
random draw every epoch, as MariusGNN's ``getSequentialNodePartitionOrdering``), its variant ``sequential_rotation``
(the other slots rotate through a seeded permutation across epochs) and ``dispersed`` (one pass of logical
partitions, nodes to random states)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from suite.errors import ConfigError
from systems.disk.plan import BufferPlan
from systems.disk.policies.policy import (PartitionPolicy, PolicySpec, build_plan, logical_sizes, random_groups,
                                        require_task, single_partitions, single_state)


@dataclass(frozen=True)
class SequentialPolicy(PartitionPolicy):
    """Node classification: the training partitions plus a fresh random draw of the others, one state per epoch.

    MariusGNN's ``getSequentialNodePartitionOrdering`` (``src/cpp/src/data/ordering.cpp``): one buffer state,
    partitions ``0 .. t-1`` (``t`` = the last partition holding a training node, plus one) followed by the first
    ``c - t`` entries of a random permutation of partitions ``t .. p-1``, drawn at every epoch; every training node
    in that state. Deliberate differences: the pinned partitions are those holding a training node (the same as
    ``0 .. t-1`` under the ``train-first`` / ``labeled-first`` orders MariusGNN assumes, and still correct under
    any other order, where MariusGNN's prefix could exceed the buffer); the drawn partitions are listed in
    ascending order (slot order does not change what a state holds); a node's partition is the store's
    (``array_split`` sizes) rather than ``node // ceil(n / p)``.
    """

    name: ClassVar[str] = "sequential"
    tasks: ClassVar[frozenset[str]] = frozenset({"node_classification"})

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        """One state: the training partitions, then the epoch's fill of the free slots (:meth:`fill`)."""
        require_task(spec, self.name, self.tasks)
        p, c = spec.num_partitions, spec.capacity
        train = np.unique(spec.train_partitions)
        if len(train) > c:
            raise ConfigError(f"policy.capacity: {self.name} keeps the {len(train)} partitions holding training "
                              f"nodes in the buffer, more than its capacity {c} (use 'dispersed' or a "
                              "train-first node order)")
        others = np.setdiff1d(np.arange(p), train)
        fill = self.fill(others, min(c, p) - len(train), spec)
        members = np.concatenate([train, fill]).astype(np.int32)
        n = len(members)
        walk = (np.array([0, n], dtype=np.int64), np.arange(n, dtype=np.int32), members)
        return build_plan(self.name, spec, single_partitions(p), min(p, c), c, walk, "first", rng)

    def fill(self, others: np.ndarray, width: int, spec: PolicySpec) -> np.ndarray:
        """The partitions of ``others`` in the free slots: :func:`random_fill`."""
        return random_fill(others, width, spec.seed, spec.epoch, spec.resident)


@dataclass(frozen=True)
class RotatingSequentialPolicy(SequentialPolicy):
    """``sequential`` whose free slots rotate through one seeded permutation of the other partitions, so that over
    epochs every partition is visited in turn (the suite's earlier ``sequential``)."""

    name: ClassVar[str] = "sequential_rotation"

    def fill(self, others: np.ndarray, width: int, spec: PolicySpec) -> np.ndarray:
        """The partitions of ``others`` in the free slots: :func:`rotation_window`."""
        return rotation_window(others, width, spec.seed, spec.epoch, spec.resident)


@dataclass(frozen=True)
class NeighborhoodSequentialPolicy(SequentialPolicy):
    """``sequential`` that also keeps the first partitions after the training ones: half of the free slots
    (rounded up) hold partitions ``t, t + 1, ...`` in every epoch, the other half a fresh random draw of the rest.
    Under the ``neighborhood-first`` node order those partitions hold the training nodes' in-neighbours, so a
    training node's first hop is sampled from (nearly) all of its neighbours rather than from the share a random
    fill happens to hold; its second hop still comes from the buffer."""

    name: ClassVar[str] = "sequential_neighborhood"

    def fill(self, others: np.ndarray, width: int, spec: PolicySpec) -> np.ndarray:
        """The first ``ceil(width / 2)`` of ``others`` (ascending), then :func:`random_fill` of the rest."""
        if width <= 0 or not len(others):
            return np.empty(0, dtype=np.int64)
        pinned = np.sort(others)[:(width + 1) // 2]
        rest = random_fill(np.setdiff1d(others, pinned), width - len(pinned), spec.seed, spec.epoch,
                           spec.resident)
        return np.concatenate([pinned, rest]).astype(np.int64)


def _kept_first(others: np.ndarray, resident: np.ndarray | None) -> np.ndarray:
    """The partitions of ``others`` already in the buffer (``resident``), ascending."""
    return np.intersect1d(others, resident) if resident is not None else np.empty(0, dtype=np.int64)


def random_fill(others: np.ndarray, width: int, seed: int, epoch: int,
                resident: np.ndarray | None = None) -> np.ndarray:
    """The ``width`` partitions of ``others`` that fill the free slots in ``epoch``: partitions in ``resident``
    first (ascending: a pass that finds them in the buffer reads nothing for them), then a uniform draw without
    replacement from the rest, fresh in every epoch (``default_rng((seed, epoch))``)."""
    if width <= 0 or not len(others):
        return np.empty(0, dtype=np.int64)
    kept = _kept_first(others, resident)
    rest = np.setdiff1d(others, kept)
    drawn = np.random.default_rng((seed, epoch)).permutation(rest)[:max(width - len(kept), 0)]
    return np.concatenate([kept, np.sort(drawn)])[:width].astype(np.int64)


def rotation_window(others: np.ndarray, width: int, seed: int, epoch: int,
                    resident: np.ndarray | None = None) -> np.ndarray:
    """The ``width`` partitions of ``others`` that fill the free slots in ``epoch``: partitions in ``resident``
    first (ascending), then the rotation's window (a permutation of ``others`` from ``default_rng(seed)``,
    entries ``epoch * width ...`` cyclically) until ``width`` are chosen."""
    if width <= 0 or not len(others):
        return np.empty(0, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(others)
    window = order[(epoch * width + np.arange(len(others))) % len(others)]
    kept = _kept_first(others, resident)
    rest = window[~np.isin(window, kept)]
    return np.concatenate([kept, rest])[:width].astype(np.int64)


@dataclass(frozen=True)
class DispersedPolicy(PartitionPolicy):
    """Node classification: one pass of logical partitions through the buffer; nodes to random states.

    MariusGNN's ``getDispersedNodePartitionOrdering`` (``ordering.cpp``; the ``getDiagOrdering`` that later versions
    call for DISPERSED builds the same states with ``getDispersedOrderingHelper``): ``l = p / r`` coarse partitions,
    ``randperm(l)``'s first ``l_c = c / r`` in the buffer; then, while some are on disk, the buffer and the disk are
    shuffled, the buffer's last entry is replaced by the disk's first and that one leaves the disk (an evicted
    partition never returns): ``l - l_c + 1`` states, each coarse partition loaded once. Fine partitions: a fresh
    ``randperm(p)`` cut into groups of ``r``. Training nodes: each to a uniformly random state holding its
    partition. Here the on-disk order is one permutation drawn up front and each step replaces a uniformly random
    slot: the same distribution (after a reshuffle, the disk's first entry is uniform over what is left and the
    buffer's last entry is uniform over the residents), with slots kept in place so that a transition reads only
    the new partition. Pinned by hand in ``tests/systems/disk/test_policies.py``.
    """

    name: ClassVar[str] = "dispersed"
    tasks: ClassVar[frozenset[str]] = frozenset({"node_classification"})

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        """Random logical partitions; one random slot replaced per state; ``"uniform"`` assignment."""
        require_task(spec, self.name, self.tasks)
        l, lc, r = logical_sizes(spec, self.name)
        groups = random_groups(spec.num_partitions, r, rng)
        if l <= lc:
            walk = single_state(l)
        else:
            perm = rng.permutation(l).astype(np.int32)
            slots = np.concatenate([np.arange(lc), rng.integers(0, lc, l - lc)]).astype(np.int32)
            walk = (np.concatenate([[0], np.arange(lc, l + 1)]).astype(np.int64), slots, perm)
        return build_plan(self.name, spec, groups, min(l, lc), spec.capacity, walk, "uniform", rng)


__all__ = ["DispersedPolicy", "RotatingSequentialPolicy", "SequentialPolicy", "random_fill", "rotation_window"]
