"""What every policy shares: the :class:`PolicySpec` it plans for, the :class:`PartitionPolicy` base class, the
helpers that turn a walk of loads into a :class:`~systems.disk.plan.BufferPlan`, the :data:`POLICIES` registry
and :func:`make_plan`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from suite.errors import ConfigError
from suite.registry import Registry
from systems.disk.plan import TASKS, BufferPlan

POLICIES: Registry = Registry("policy", plugin_table="policies")
"""Partition-buffer policies by name (:class:`PartitionPolicy` subclasses), declared by the ``policies`` plugin
table (the built-in lines: :mod:`systems.plugins`); read by the disk system and the buffer simulator."""

Walk = tuple[np.ndarray, np.ndarray, np.ndarray]  # loads (offsets, unit slots, units), see systems.disk.plan


@dataclass(frozen=True, eq=False)
class PolicySpec:
    """What a policy plans for.

    Attributes:
        num_partitions: ``p``, node partitions on disk.
        capacity: ``c``, partitions the buffer holds.
        task: ``"link_prediction"`` (examples: the ``p x p`` edge buckets) or ``"node_classification"``
            (examples: training nodes).
        fine_to_coarse_ratio: ``r``, physical partitions per logical partition (``comet``, ``dispersed``);
            ``p`` and ``c`` must be multiples of it.
        train_partitions: node classification: the partition of every training node (int array).
        resident: partitions in the buffer before the pass (``sequential`` fills its slots with them first).
        seed / epoch: the run's seed and the epoch planned (set by :func:`make_plan`; ``sequential`` rotates by
            them).
    """

    num_partitions: int
    capacity: int
    task: str = "link_prediction"
    fine_to_coarse_ratio: int = 1
    train_partitions: np.ndarray | None = None
    resident: np.ndarray | None = None
    seed: int = 0
    epoch: int = 0

    def __post_init__(self) -> None:
        for name in ("num_partitions", "capacity", "fine_to_coarse_ratio"):
            object.__setattr__(self, name, _positive_int(name, getattr(self, name)))
        if self.task not in TASKS:
            raise ConfigError(f"policy.task: expected one of {', '.join(TASKS)}, got {self.task!r}")
        if self.task == "node_classification":
            object.__setattr__(self, "train_partitions", _train_partitions(self.train_partitions,
                                                                           self.num_partitions))

    @property
    def num_examples(self) -> int:
        """Training examples: ``p * p`` buckets or the number of training nodes."""
        if self.task == "link_prediction":
            return self.num_partitions ** 2
        return int(self.train_partitions.size)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"policy.{name}: expected a positive integer, got {value!r}")
    return int(value)


def _train_partitions(parts, num_partitions: int) -> np.ndarray:
    if parts is None:
        raise ConfigError("policy.train_partitions: node classification needs the partition of every "
                          "training node")
    parts = np.asarray(parts)
    if parts.ndim != 1 or not np.issubdtype(parts.dtype, np.integer):
        raise ConfigError("policy.train_partitions: expected a 1-D integer array")
    if parts.size and (parts.min() < 0 or parts.max() >= num_partitions):
        raise ConfigError(f"policy.train_partitions: partition ids must lie in [0, {num_partitions})")
    return parts.astype(np.int32, copy=False)


class PartitionPolicy:
    """Base class of policies: ``plan(spec, rng) -> BufferPlan`` for one epoch."""

    name: ClassVar[str] = ""
    tasks: ClassVar[frozenset[str]] = frozenset(TASKS)

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:  # pragma: no cover - abstract
        raise NotImplementedError


# ------------------------------------------------------------------------------------------ plan building
def walk_from_unit_slots(states: list[np.ndarray], unit_capacity: int) -> Walk:
    """Loads (offsets, slots, units) of a sequence of unit-slot arrays (each the full slot content)."""
    offsets, slot_list, unit_list = [0], [], []
    previous = np.full(unit_capacity, -1, dtype=np.int32)
    for slots in states:
        changed = np.flatnonzero(slots != previous)
        slot_list.append(changed)
        unit_list.append(slots[changed])
        offsets.append(offsets[-1] + len(changed))
        previous = slots
    return (np.asarray(offsets, dtype=np.int64), np.concatenate(slot_list).astype(np.int32),
            np.concatenate(unit_list).astype(np.int32))


def single_state(n: int) -> Walk:
    """One state loading units ``0 .. n-1`` into slots ``0 .. n-1``."""
    return np.array([0, n], dtype=np.int64), np.arange(n, dtype=np.int32), np.arange(n, dtype=np.int32)


def single_partitions(p: int) -> np.ndarray:
    """``(p, 1)`` units of one partition each."""
    return np.arange(p, dtype=np.int32)[:, None]


def random_groups(p: int, ratio: int, rng: np.random.Generator | None) -> np.ndarray:
    """``(p / ratio, ratio)`` logical partitions: a random permutation of the partitions cut into groups."""
    perm = np.arange(p, dtype=np.int32) if rng is None else rng.permutation(p).astype(np.int32)
    return perm.reshape(p // ratio, ratio)


def assign_nodes(plan_kwargs: dict, spec: PolicySpec, rule: str, rng: np.random.Generator) -> np.ndarray:
    """State of every training node: the first (``"first"``) or a uniformly random (``"uniform"``) state
    holding its partition's unit."""
    probe = BufferPlan(**plan_kwargs)
    starts, counts, states = _states_by_unit(probe)
    node_units = probe.unit_of[spec.train_partitions].astype(np.int64)
    n = counts[node_units]
    if rule == "first":
        pick = np.zeros(len(node_units), dtype=np.int64)
    else:
        pick = np.minimum((rng.random(len(node_units)) * n).astype(np.int64), n - 1)
    return states[starts[node_units] + pick].astype(np.int32)


def _states_by_unit(plan: BufferPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR ``(starts, counts, states)``: the states holding each unit, ascending."""
    unit_lists, state_lists = [], []
    for k, slots in enumerate(plan.iter_unit_slots()):
        members = slots[slots >= 0]
        unit_lists.append(members)
        state_lists.append(np.full(len(members), k, dtype=np.int32))
    units = np.concatenate(unit_lists).astype(np.int64)
    order = np.argsort(units, kind="stable")
    counts = np.bincount(units, minlength=plan.num_units)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return starts, counts, np.concatenate(state_lists)[order]


def build_plan(name: str, spec: PolicySpec, unit_partitions: np.ndarray, unit_capacity: int, capacity: int,
               walk: Walk, assignment: str, rng: np.random.Generator) -> BufferPlan:
    """The :class:`BufferPlan` of ``walk`` over ``unit_partitions``; node classification assigns every training
    node to a state by ``assignment`` (the seed of the bucket draws comes from ``rng`` first)."""
    offsets, slots, units = walk
    kwargs = dict(policy=name, task=spec.task, num_partitions=spec.num_partitions, capacity=capacity,
                  unit_partitions=np.ascontiguousarray(unit_partitions, dtype=np.int32), unit_capacity=unit_capacity,
                  load_offsets=offsets, load_slots=slots, load_units=units, assignment=assignment,
                  assignment_seed=int(rng.integers(2 ** 63 - 1)))
    if spec.task == "node_classification":
        kwargs["train_partitions"] = spec.train_partitions
        kwargs["node_state"] = assign_nodes(kwargs, spec, assignment, rng)
    return BufferPlan(**kwargs)


def require_task(spec: PolicySpec, name: str, tasks: frozenset[str]) -> None:
    """Raise :class:`ConfigError` unless policy ``name`` supports the spec's task."""
    if spec.task not in tasks:
        raise ConfigError(f"policy: {name!r} does not support task {spec.task!r} (supports {', '.join(sorted(tasks))})")


def logical_sizes(spec: PolicySpec, name: str) -> tuple[int, int, int]:
    """``(l, lc, r)``: logical partitions, logical capacity and ``fine_to_coarse_ratio`` (checked to divide
    ``p`` and ``c``)."""
    r = spec.fine_to_coarse_ratio
    p, c = spec.num_partitions, spec.capacity
    if p % r:
        raise ConfigError(f"policy.fine_to_coarse_ratio: {name} needs num_partitions ({p}) to be a multiple of it ({r})")
    if c % r:
        raise ConfigError(f"policy.fine_to_coarse_ratio: {name} needs capacity ({c}) to be a multiple of it ({r})")
    return p // r, c // r, r


# ------------------------------------------------------------------------------------------------ entry
def epoch_generator(seed: int, epoch: int) -> np.random.Generator:
    """The generator of one epoch's plan: ``numpy.random.default_rng([seed, epoch])``."""
    return np.random.default_rng([int(seed), int(epoch)])


def make_plan(name: str, spec: PolicySpec, seed: int = 0, epoch: int = 0, **options) -> BufferPlan:
    """The plan of policy ``name`` (registered in ``POLICIES``) for ``epoch``; deterministic in ``(seed, epoch)``.

    ``options`` go to the policy's constructor (e.g. ``randomize=False`` for BETA's canonical order).
    """
    policy = POLICIES.get(name)
    try:
        instance = policy(**options)
    except TypeError as err:
        raise ConfigError(f"policy.options: {err}") from None
    return instance.plan(dataclasses.replace(spec, seed=int(seed), epoch=int(epoch)), epoch_generator(seed, epoch))


__all__ = [
    "PartitionPolicy", "PolicySpec", "Walk", "assign_nodes", "build_plan", "epoch_generator", "logical_sizes",
    "make_plan", "random_groups", "require_task", "single_partitions", "single_state", "walk_from_unit_slots",
]
