"""Partition-buffer policies as *plans*: pure data that the disk system executes and the simulators price.

A policy (registered by name in :data:`suite.registry.POLICIES`) turns a :class:`PolicySpec` (``p`` node
partitions on disk, a buffer of ``c`` partition slots in memory, the task and its training examples) and an
explicit :class:`numpy.random.Generator` into a :class:`BufferPlan` for one epoch. :func:`make_plan` derives
the generator from ``(seed, epoch)``, so a plan is a deterministic function of ``(policy, spec, seed, epoch)``.

Plan contract
-------------
*Units.* Every plan moves whole **units**: groups of physical partitions that always enter and leave the
buffer together (COMET's logical partitions; single partitions for BETA). ``unit_partitions[u]`` lists the
physical partitions of unit ``u`` (``-1``-padded to the widest unit, ``r`` columns); every partition is in
exactly one unit (:attr:`BufferPlan.unit_of`).

*Slots.* The buffer has ``unit_capacity`` unit slots; unit slot ``s`` occupies the physical slots
``s*r .. s*r + r - 1`` (physical slot ``s*r + j`` holds ``unit_partitions[u, j]``, or nothing where that is
``-1``), so ``unit_capacity * r <= capacity``. A state is the content of the slots.

*Transitions.* The plan is a sequence of ``S`` states given as loads: state ``k`` is the previous state with
unit ``load_units[t]`` put into unit slot ``load_slots[t]`` for every ``t`` in
``load_offsets[k]:load_offsets[k+1]``; the unit that was in that slot (``evict_units[t]``, ``-1`` if it was
empty) is evicted. State 0 starts from an empty buffer, so its loads are the initial fill. Slots that do not
change keep their partitions in place: a transition reads exactly the partitions that change.
:meth:`BufferPlan.transition` gives the physical view (slots, partitions loaded, partitions evicted);
:meth:`BufferPlan.state` / :meth:`BufferPlan.state_slots` give a state.

*Swaps.* :attr:`BufferPlan.swaps` is the number of physical partitions read after the initial fill (what
the BETA formula counts); :attr:`BufferPlan.partitions_loaded` adds the fill.

*Examples.* Every training example is assigned to exactly one state whose buffer holds what it needs:

- ``link_prediction``: the examples are the ``p * p`` edge buckets ``(i, j)`` (edges from partition ``i`` to
  partition ``j``); :meth:`BufferPlan.bucket_state` is the ``(p, p)`` int32 state of each bucket. The rule
  ``assignment`` is ``"first"`` (the first state holding both ``i`` and ``j``: Marius's greedy BETA
  assignment) or ``"uniform"`` (a uniformly random state among all states holding both, drawn from a
  generator seeded with ``assignment_seed``: COMET). The assignment is computed on demand, in row chunks, so
  that the simulator can count examples per state (:meth:`BufferPlan.state_bucket_counts`) at
  ``p = 8192`` without a ``(p, p)`` array; the counts equal those of the materialized assignment.
- ``node_classification``: the examples are training nodes, given by the partition of each
  (``PolicySpec.train_partitions``); ``node_state[n]`` is the state of training node ``n`` (same rules).

Within a state the executor shuffles the state's examples together (the plan orders states, not examples);
:meth:`BufferPlan.examples_by_state` groups example ids by state. :meth:`BufferPlan.validate` checks the
contract: states hold at most ``capacity`` partitions with no duplicate, loads never load a resident unit,
every example is in exactly one state that holds its partition(s), and every bucket is covered.

Policies
--------
``beta``
    Marius's Buffer-aware Edge Traversal Algorithm on a random relabelling of the partitions: fill the buffer
    with ``c`` partitions; keep ``c - 1`` fixed and cycle the remaining slot through every partition on disk;
    then replace the fixed ones, one per state, by partitions not yet done; repeat until every pair has met.
    One partition per transition; swaps ``= (p-c) + (x+1)((p-c) - x(c-1)/2)``, ``x = floor((p-c)/(c-1))``
    (:func:`beta_swaps`). Buckets: ``"first"`` (greedy).
``comet``
    MariusGNN: ``l = p / fine_to_coarse_ratio`` logical partitions of ``r = fine_to_coarse_ratio`` physical
    ones, grouped by a fresh random permutation every epoch; BETA over the logical partitions with capacity
    ``c / r``; every bucket to a uniformly random state holding both its partitions (``"uniform"``).
``random``
    A naive baseline: a random covering visited in random order. The partitions are randomly split into
    ``g = ceil(p / h)`` groups of at most ``h = c // 2`` partitions (units); the states are all ``g (g-1) / 2``
    pairs of groups in uniformly random order (consecutive states share a group only by chance);
    ``"uniform"`` bucket assignment.
``in_memory``
    One state holding all ``p`` partitions (the plan's capacity is ``p``, whatever ``spec.capacity`` is).
``sequential`` (node classification)
    MariusGNN: the partitions holding the examples (training nodes; with a train-first or labeled-first node
    order, the first ones) stay in the buffer, the other ``w = c - t`` slots rotate through the remaining
    ``n = p - t`` partitions across epochs: one state per epoch. The rotation is a permutation of the remaining
    partitions drawn once from ``default_rng(seed)``; epoch ``e`` takes its ``w`` entries from position ``e * w``
    on (cyclically), so every partition has been in the buffer after ``ceil(n / w)`` epochs and sampling has seen
    every neighbourhood. With ``PolicySpec.resident`` given (an evaluation pass), the slots are filled first with
    partitions already resident, so a pass over nodes in the kept partitions reads nothing.
``dispersed`` (node classification)
    MariusGNN: logical partitions as in COMET; start with ``c / r`` random logical partitions and replace one
    random slot per state by the next logical partition on disk until every one has been in the buffer
    (``l - c/r`` transitions); every training node to a uniformly random state holding its partition.

Every policy also accepts node classification (nodes then follow the policy's rule); ``sequential`` and
``dispersed`` are node classification only.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from suite.errors import ConfigError, DataError
from suite.registry import POLICIES

Task = Literal["link_prediction", "node_classification"]
TASKS: tuple[str, ...] = ("link_prediction", "node_classification")
ASSIGNMENTS: tuple[str, ...] = ("first", "uniform")

_CHUNK_ELEMENTS = 1 << 22  # buckets per chunk of the on-demand assignment (fixed: draws do not depend on use)
_MAX_PAIR_ENTRIES = 300_000_000  # (unit pair, state) entries of the uniform assignment's eligibility lists


# ----------------------------------------------------------------------------------------------- formulas
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


# ------------------------------------------------------------------------------------------------- spec
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
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"policy.{name}: expected a positive integer, got {value!r}")
            object.__setattr__(self, name, int(value))
        if self.task not in TASKS:
            raise ConfigError(f"policy.task: expected one of {', '.join(TASKS)}, got {self.task!r}")
        if self.task == "node_classification":
            if self.train_partitions is None:
                raise ConfigError("policy.train_partitions: node classification needs the partition of every "
                                  "training node")
            parts = np.asarray(self.train_partitions)
            if parts.ndim != 1 or not np.issubdtype(parts.dtype, np.integer):
                raise ConfigError("policy.train_partitions: expected a 1-D integer array")
            if parts.size and (parts.min() < 0 or parts.max() >= self.num_partitions):
                raise ConfigError(f"policy.train_partitions: partition ids must lie in [0, {self.num_partitions})")
            object.__setattr__(self, "train_partitions", parts.astype(np.int32, copy=False))

    @property
    def num_examples(self) -> int:
        """Training examples: ``p * p`` buckets or the number of training nodes."""
        if self.task == "link_prediction":
            return self.num_partitions ** 2
        return int(self.train_partitions.size)


# ------------------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class Transition:
    """The physical view of entering state ``index``: which slots change, what is read and what is evicted.

    Attributes:
        index: the state entered.
        slots: physical slots that change (ascending within each unit slot).
        loaded: partition now in each of ``slots`` (``-1``: the slot becomes empty).
        evicted: partition that was in each of ``slots`` (``-1``: it was empty).
    """

    index: int
    slots: np.ndarray
    loaded: np.ndarray
    evicted: np.ndarray

    @property
    def partitions_loaded(self) -> np.ndarray:
        """Partitions read from disk for this state."""
        return self.loaded[self.loaded >= 0]

    @property
    def partitions_evicted(self) -> np.ndarray:
        """Partitions leaving the buffer (written back first if learnable)."""
        return self.evicted[self.evicted >= 0]


@dataclass(frozen=True, eq=False)
class BufferPlan:
    """One epoch of a partition-buffer policy as pure data (see the module docstring for the contract).

    Attributes:
        policy: the policy's registered name.
        task: ``"link_prediction"`` or ``"node_classification"``.
        num_partitions: ``p``.
        capacity: physical slots of the buffer.
        unit_partitions: ``(U, r)`` int32, the physical partitions of each unit, ``-1``-padded.
        unit_capacity: unit slots (``unit_capacity * r <= capacity``).
        load_offsets: ``(S + 1,)`` int64, loads of state ``k`` are entries ``load_offsets[k]:load_offsets[k+1]``.
        load_slots: ``(T,)`` int32, unit slot of each load.
        load_units: ``(T,)`` int32, unit loaded.
        assignment: ``"first"`` or ``"uniform"`` (how examples choose among the states that can hold them).
        assignment_seed: seed of the ``"uniform"`` bucket draws.
        train_partitions: node classification: partition of each training node (else ``None``).
        node_state: node classification: ``(num_train,)`` int32 state of each training node (else ``None``).
    """

    policy: str
    task: str
    num_partitions: int
    capacity: int
    unit_partitions: np.ndarray
    unit_capacity: int
    load_offsets: np.ndarray
    load_slots: np.ndarray
    load_units: np.ndarray
    assignment: str = "first"
    assignment_seed: int = 0
    train_partitions: np.ndarray | None = None
    node_state: np.ndarray | None = None

    # ------------------------------------------------------------------------------------ structure
    @property
    def num_states(self) -> int:
        """``S``, states in the epoch."""
        return len(self.load_offsets) - 1

    @property
    def num_units(self) -> int:
        """``U``, units (logical partitions)."""
        return self.unit_partitions.shape[0]

    @property
    def unit_width(self) -> int:
        """``r``, physical slots per unit slot."""
        return self.unit_partitions.shape[1]

    @functools.cached_property
    def unit_sizes(self) -> np.ndarray:
        """``(U,)`` int64, partitions in each unit."""
        return (self.unit_partitions >= 0).sum(axis=1).astype(np.int64)

    @functools.cached_property
    def unit_of(self) -> np.ndarray:
        """``(p,)`` int32, the unit of each physical partition."""
        out = np.full(self.num_partitions, -1, dtype=np.int32)
        rows, _ = np.nonzero(self.unit_partitions >= 0)
        out[self.unit_partitions[self.unit_partitions >= 0]] = rows
        return out

    @functools.cached_property
    def entry_state(self) -> np.ndarray:
        """``(T,)`` int64, the state of each load entry."""
        return np.repeat(np.arange(self.num_states, dtype=np.int64), np.diff(self.load_offsets))

    @functools.cached_property
    def evict_units(self) -> np.ndarray:
        """``(T,)`` int32, the unit each load replaces in its slot (``-1``: the slot was empty)."""
        order = np.lexsort((np.arange(len(self.load_slots)), self.load_slots))
        sorted_slots = self.load_slots[order]
        previous = np.full(len(order), -1, dtype=np.int32)
        same = np.zeros(len(order), dtype=bool)
        same[1:] = sorted_slots[1:] == sorted_slots[:-1]
        previous[1:][same[1:]] = self.load_units[order[:-1]][same[1:]]
        out = np.empty_like(previous)
        out[order] = previous
        return out

    @property
    def swaps(self) -> int:
        """Physical partitions read after the initial fill (what the BETA formula counts)."""
        return int(self.unit_sizes[self.load_units[self.load_offsets[1]:]].sum())

    @property
    def partitions_loaded(self) -> int:
        """Physical partitions read in the epoch, initial fill included."""
        return int(self.unit_sizes[self.load_units].sum())

    def iter_unit_slots(self) -> Iterator[np.ndarray]:
        """Yield the ``(unit_capacity,)`` unit-slot array of every state in order (``-1`` = empty; a copy)."""
        slots = np.full(self.unit_capacity, -1, dtype=np.int32)
        for k in range(self.num_states):
            lo, hi = self.load_offsets[k], self.load_offsets[k + 1]
            slots[self.load_slots[lo:hi]] = self.load_units[lo:hi]
            yield slots.copy()

    @functools.cached_property
    def _unit_slot_matrix(self) -> np.ndarray:
        if self.num_states * self.unit_capacity > 400_000_000:
            raise ConfigError(f"plan: {self.num_states} states x {self.unit_capacity} slots is too large to "
                              "materialize; iterate with iter_unit_slots() / iter_transitions()")
        return np.stack(list(self.iter_unit_slots())) if self.num_states else np.empty((0, self.unit_capacity))

    def _expand(self, unit_slots: np.ndarray) -> np.ndarray:
        """Physical slot array (``capacity``,) of a unit-slot array."""
        out = np.full(self.capacity, -1, dtype=np.int64)
        width = self.unit_width
        for s in np.flatnonzero(unit_slots >= 0):
            out[s * width:(s + 1) * width] = self.unit_partitions[unit_slots[s]]
        return out

    def state_slots(self, k: int) -> np.ndarray:
        """``(capacity,)`` partitions in each physical slot of state ``k`` (``-1`` = empty)."""
        return self._expand(self._unit_slot_matrix[k])

    def state(self, k: int) -> np.ndarray:
        """Partitions held in state ``k``, in slot order."""
        slots = self.state_slots(k)
        return slots[slots >= 0]

    @property
    def states(self) -> tuple[tuple[int, ...], ...]:
        """Every state as a tuple of partitions in slot order (convenient for small plans)."""
        return tuple(tuple(int(v) for v in self.state(k)) for k in range(self.num_states))

    def transition(self, k: int) -> Transition:
        """Physical view of entering state ``k`` (state 0: the initial fill)."""
        lo, hi = self.load_offsets[k], self.load_offsets[k + 1]
        width = self.unit_width
        slots = (self.load_slots[lo:hi, None].astype(np.int64) * width + np.arange(width)).ravel()
        loaded = self.unit_partitions[self.load_units[lo:hi]].astype(np.int64).ravel()
        evict = self.evict_units[lo:hi]
        evicted = np.where(evict[:, None] >= 0, self.unit_partitions[np.maximum(evict, 0)], -1).astype(np.int64).ravel()
        keep = (loaded >= 0) | (evicted >= 0)
        return Transition(int(k), slots[keep], loaded[keep], evicted[keep])

    def iter_transitions(self) -> Iterator[Transition]:
        """Yield :meth:`transition` of every state in order (what the disk system executes)."""
        for k in range(self.num_states):
            yield self.transition(k)

    # ------------------------------------------------------------------------------------ examples
    def _check_task(self, task: str, what: str) -> None:
        if self.task != task:
            raise ConfigError(f"plan: {what} is for {task} plans (this one is {self.task})")

    def _first_pass(self, materialize: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Greedy assignment at unit level: per-state bucket counts and optionally the (U, U) first state."""
        U = self.num_units
        sizes = self.unit_sizes
        counts = np.zeros(self.num_states, dtype=np.int64)
        first = np.full((U, U), -1, dtype=np.int32) if materialize else None
        seen = np.zeros((U, U), dtype=bool)
        slots = np.full(self.unit_capacity, -1, dtype=np.int32)
        for k in range(self.num_states):
            lo, hi = self.load_offsets[k], self.load_offsets[k + 1]
            slots[self.load_slots[lo:hi]] = self.load_units[lo:hi]
            members = slots[slots >= 0]
            for q in self.load_units[lo:hi]:
                new = members[~seen[q, members]]
                if not new.size:
                    continue
                seen[q, new] = True
                seen[new, q] = True
                if first is not None:
                    first[q, new] = k
                    first[new, q] = k
                counts[k] += 2 * sizes[q] * sizes[new].sum() - (sizes[q] ** 2 if q in new else 0)
        return counts, first

    def _sorted_member_batches(self) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(k, members)`` with the sorted unit members of every state (int64)."""
        for k, slots in enumerate(self.iter_unit_slots()):
            yield k, np.sort(slots[slots >= 0]).astype(np.int64)

    @functools.cached_property
    def _eligible(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Uniform assignment: for each unordered unit pair ``a <= b`` (id ``a * U + b``), the states holding
        both, as CSR ``(starts, counts, states)`` (states ascending within a pair).

        Two passes over the states (count, then fill by a running count per pair; a pair occurs at most once
        per state), ``O(sum over states of m (m + 1) / 2)`` for ``m`` units per state, no sort.
        """
        U = self.num_units
        triu: dict[int, tuple[np.ndarray, np.ndarray]] = {}

        def pairs(members: np.ndarray) -> np.ndarray:
            m = len(members)
            if m not in triu:
                triu[m] = np.triu_indices(m)
            i, j = triu[m]
            return members[i] * U + members[j]

        total = sum(len(m) * (len(m) + 1) // 2 for _, m in self._sorted_member_batches())
        if total > _MAX_PAIR_ENTRIES:
            raise ConfigError(f"plan {self.policy}: the uniform assignment would list {total} (pair, state) "
                              "entries; use fewer logical partitions (a larger policy.fine_to_coarse_ratio)")
        counts = np.zeros(U * U, dtype=np.int64)
        for _, members in self._sorted_member_batches():
            counts[pairs(members)] += 1
        starts = np.zeros(U * U, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        states = np.empty(total, dtype=np.int32)
        fill = starts.copy()
        for k, members in self._sorted_member_batches():
            pid = pairs(members)
            states[fill[pid]] = k
            fill[pid] += 1
        return starts, counts, states

    def _uniform_chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(rows, states)``: the uniform bucket assignment of whole physical rows ``rows`` (``states``
        is ``(len(rows), p)``), batch by batch of units; the draws are fixed by ``assignment_seed``."""
        starts, counts, states = self._eligible
        p, U = self.num_partitions, self.num_units
        unit_of = self.unit_of.astype(np.int64)
        units = np.arange(U, dtype=np.int64)
        rng = np.random.default_rng(self.assignment_seed)
        batch = max(1, _CHUNK_ELEMENTS // max(1, self.unit_width * p))
        for a0 in range(0, U, batch):
            a = units[a0:a0 + batch]
            pair = np.minimum(a[:, None], units[None, :]) * U + np.maximum(a[:, None], units[None, :])
            n_units, s_units = counts[pair], starts[pair]
            if (n_units == 0).any():
                raise DataError(f"plan {self.policy}: some bucket is in no state (the states do not cover all pairs)")
            rows = self.unit_partitions[a0:a0 + batch].ravel()
            local = np.repeat(np.arange(len(a)), self.unit_width)[rows >= 0]
            rows = rows[rows >= 0].astype(np.int64)
            n = np.take(n_units[local], unit_of, axis=1)
            pick = rng.random(n.shape)
            pick *= n
            pick = np.minimum(pick.astype(np.int64), n - 1)
            pick += np.take(s_units[local], unit_of, axis=1)
            yield rows, states[pick]

    def bucket_state(self) -> np.ndarray:
        """``(p, p)`` int32, the state of every edge bucket ``(i, j)`` (computed on first use, then cached)."""
        self._check_task("link_prediction", "bucket_state")
        return self._bucket_state

    @functools.cached_property
    def _bucket_state(self) -> np.ndarray:
        p = self.num_partitions
        if self.assignment == "first":
            _, first = self._first_pass(materialize=True)
            unit_of = self.unit_of
            return first[unit_of[:, None], unit_of[None, :]]
        out = np.empty((p, p), dtype=np.int32)
        for rows, states in self._uniform_chunks():
            out[rows] = states
        return out

    def state_bucket_counts(self) -> np.ndarray:
        """``(S,)`` int64 buckets assigned to each state, without materializing the ``(p, p)`` assignment."""
        self._check_task("link_prediction", "state_bucket_counts")
        return self._state_bucket_counts

    @functools.cached_property
    def _state_bucket_counts(self) -> np.ndarray:
        if "_bucket_state" in self.__dict__:
            return np.bincount(self._bucket_state.ravel(), minlength=self.num_states).astype(np.int64)
        if self.assignment == "first":
            return self._first_pass(materialize=False)[0]
        counts = np.zeros(self.num_states, dtype=np.int64)
        for _, states in self._uniform_chunks():
            counts += np.bincount(states.ravel(), minlength=self.num_states)
        return counts

    def state_bucket_totals(self, weights: np.ndarray | float) -> np.ndarray:
        """``(S,)`` sum of ``weights`` (a scalar per bucket or a ``(p, p)`` array, e.g. edges per bucket) over
        the buckets of each state."""
        if np.ndim(weights) == 0:
            return self.state_bucket_counts() * float(weights)
        weights = np.asarray(weights)
        p = self.num_partitions
        if weights.shape != (p, p):
            raise ConfigError(f"bucket weights: expected shape ({p}, {p}), got {weights.shape}")
        if self.assignment == "uniform" and "_bucket_state" not in self.__dict__:
            totals = np.zeros(self.num_states, dtype=np.float64)
            for rows, states in self._uniform_chunks():
                totals += np.bincount(states.ravel(), weights=weights[rows].ravel(), minlength=self.num_states)
            return totals
        return np.bincount(self.bucket_state().ravel(), weights=weights.ravel(), minlength=self.num_states)

    def examples_by_state(self) -> tuple[np.ndarray, np.ndarray]:
        """``(example_ids, offsets)``: ids of state ``k``'s examples are ``example_ids[offsets[k]:offsets[k+1]]``
        (ascending). Link prediction: bucket id ``i * p + j``; node classification: index into the training
        nodes."""
        return self._examples_by_state

    @functools.cached_property
    def _examples_by_state(self) -> tuple[np.ndarray, np.ndarray]:
        state = self.bucket_state().ravel() if self.task == "link_prediction" else self.node_state
        order = np.argsort(state, kind="stable").astype(np.int64)
        offsets = np.zeros(self.num_states + 1, dtype=np.int64)
        np.cumsum(np.bincount(state, minlength=self.num_states), out=offsets[1:])
        return order, offsets

    def examples_of_state(self, k: int) -> np.ndarray:
        """Examples of state ``k``: ``(n, 2)`` buckets ``(i, j)`` or ``(n,)`` training-node indices."""
        ids, offsets = self.examples_by_state()
        chosen = ids[offsets[k]:offsets[k + 1]]
        if self.task == "link_prediction":
            return np.stack(np.divmod(chosen, self.num_partitions), axis=1)
        return chosen

    # ------------------------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Check the plan contract; raises :class:`~suite.errors.DataError` naming the first violation.

        Cost ``O(S * U + p^2)``: meant for tests and small plans.
        """
        p, U = self.num_partitions, self.num_units

        def fail(message: str) -> None:
            raise DataError(f"plan {self.policy}: {message}")

        parts = self.unit_partitions[self.unit_partitions >= 0]
        if np.sort(parts).tolist() != list(range(p)):
            fail("unit_partitions must hold every partition exactly once")
        if self.unit_capacity * self.unit_width > self.capacity:
            fail(f"{self.unit_capacity} unit slots of width {self.unit_width} exceed the capacity {self.capacity}")
        if len(self.load_slots) and (self.load_slots.min() < 0 or self.load_slots.max() >= self.unit_capacity):
            fail("a load uses a slot outside the buffer")
        if len(self.load_units) and (self.load_units.min() < 0 or self.load_units.max() >= U):
            fail("a load names an unknown unit")
        if self.load_offsets[0] != 0 or (np.diff(self.load_offsets) < 0).any():
            fail("load_offsets must start at 0 and not decrease")
        resident = np.zeros((self.num_states, U), dtype=bool)
        slots = np.full(self.unit_capacity, -1, dtype=np.int32)
        for k in range(self.num_states):
            lo, hi = self.load_offsets[k], self.load_offsets[k + 1]
            if k and lo == hi:
                fail(f"state {k} loads nothing (a repeated state)")
            for s, u in zip(self.load_slots[lo:hi], self.load_units[lo:hi]):
                if u in slots:
                    fail(f"state {k} loads unit {u}, which is already in the buffer")
                slots[s] = u
            members = slots[slots >= 0]
            if self.unit_sizes[members].sum() > self.capacity:
                fail(f"state {k} holds more than {self.capacity} partitions")
            resident[k, members] = True
        unit_of = self.unit_of
        if self.task == "link_prediction":
            bs = self.bucket_state()
            if bs.shape != (p, p) or bs.min() < 0 or bs.max() >= self.num_states:
                fail("every bucket must be assigned to a state")
            ok = resident[bs, unit_of[:, None]] & resident[bs, unit_of[None, :]]
            if not ok.all():
                i, j = np.argwhere(~ok)[0]
                fail(f"bucket ({i}, {j}) is assigned to state {bs[i, j]}, which does not hold both partitions")
            counts = self.state_bucket_counts()
            if counts.sum() != p * p or not np.array_equal(counts, np.bincount(bs.ravel(), minlength=self.num_states)):
                fail("per-state bucket counts disagree with the assignment")
        else:
            ns = self.node_state
            if ns is None or len(ns) != len(self.train_partitions):
                fail("node_state must give a state to every training node")
            if len(ns):
                if ns.min() < 0 or ns.max() >= self.num_states:
                    fail("a training node is assigned to no state")
                ok = resident[ns, unit_of[self.train_partitions]]
                if not ok.all():
                    n = int(np.flatnonzero(~ok)[0])
                    fail(f"training node {n} is assigned to state {ns[n]}, which does not hold its partition")


# ------------------------------------------------------------------------------------------ plan building
def _unit_walk_from_slots(states: list[np.ndarray], unit_capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def beta_walk(n: int, capacity: int, rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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

    def shuffle(a: np.ndarray) -> np.ndarray:
        return a if rng is None else a[rng.permutation(len(a))]

    perm = np.arange(n, dtype=np.int32) if rng is None else rng.permutation(n).astype(np.int32)
    slots = perm[:capacity].copy()
    on_disk = perm[capacity:].copy()
    load_slots = [np.arange(capacity, dtype=np.int32)]
    load_units = [slots.copy()]
    while len(on_disk):
        order = np.arange(capacity, dtype=np.int32) if rng is None else rng.permutation(capacity).astype(np.int32)
        cycling = order[-1]
        on_disk = shuffle(on_disk)
        load_slots.append(np.full(len(on_disk), cycling, dtype=np.int32))
        load_units.append(on_disk.copy())
        evicted_first = slots[cycling]
        slots[cycling] = on_disk[-1]
        on_disk = np.concatenate([[evicted_first], on_disk[:-1]]).astype(np.int32)
        on_disk = shuffle(on_disk)
        m = min(capacity - 1, len(on_disk))
        fixed = order[:m]
        load_slots.append(fixed.copy())
        load_units.append(on_disk[:m].copy())
        slots[fixed] = on_disk[:m]
        on_disk = on_disk[m:]
    slots_all = np.concatenate(load_slots)
    units_all = np.concatenate(load_units)
    offsets = np.concatenate([[0], np.arange(capacity, len(units_all) + 1)]).astype(np.int64)
    return offsets, slots_all, units_all


def _single_state(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.array([0, n], dtype=np.int64), np.arange(n, dtype=np.int32), np.arange(n, dtype=np.int32)


def _groups(p: int, ratio: int, rng: np.random.Generator | None) -> np.ndarray:
    """``(p / ratio, ratio)`` logical partitions: a random permutation of the partitions cut into groups."""
    perm = np.arange(p, dtype=np.int32) if rng is None else rng.permutation(p).astype(np.int32)
    return perm.reshape(p // ratio, ratio)


def _assign_nodes(plan_kwargs: dict, spec: PolicySpec, rule: str, rng: np.random.Generator) -> np.ndarray:
    """State of every training node: the first (``"first"``) or a uniformly random (``"uniform"``) state
    holding its partition's unit."""
    probe = BufferPlan(**plan_kwargs)
    U = probe.num_units
    unit_lists = []
    state_lists = []
    for k, slots in enumerate(probe.iter_unit_slots()):
        members = slots[slots >= 0]
        unit_lists.append(members)
        state_lists.append(np.full(len(members), k, dtype=np.int32))
    units = np.concatenate(unit_lists).astype(np.int64)
    states = np.concatenate(state_lists)
    order = np.argsort(units, kind="stable")
    counts = np.bincount(units, minlength=U)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    states = states[order]
    node_units = probe.unit_of[spec.train_partitions].astype(np.int64)
    n = counts[node_units]
    if rule == "first":
        pick = np.zeros(len(node_units), dtype=np.int64)
    else:
        pick = np.minimum((rng.random(len(node_units)) * n).astype(np.int64), n - 1)
    return states[starts[node_units] + pick].astype(np.int32)


def _build(name: str, spec: PolicySpec, unit_partitions: np.ndarray, unit_capacity: int, capacity: int,
           walk: tuple[np.ndarray, np.ndarray, np.ndarray], assignment: str, rng: np.random.Generator) -> BufferPlan:
    offsets, slots, units = walk
    kwargs = dict(policy=name, task=spec.task, num_partitions=spec.num_partitions, capacity=capacity,
                  unit_partitions=np.ascontiguousarray(unit_partitions, dtype=np.int32), unit_capacity=unit_capacity,
                  load_offsets=offsets, load_slots=slots, load_units=units, assignment=assignment,
                  assignment_seed=int(rng.integers(2 ** 63 - 1)))
    if spec.task == "node_classification":
        kwargs["train_partitions"] = spec.train_partitions
        kwargs["node_state"] = _assign_nodes(kwargs, spec, assignment, rng)
    return BufferPlan(**kwargs)


def _require(spec: PolicySpec, name: str, tasks: frozenset[str]) -> None:
    if spec.task not in tasks:
        raise ConfigError(f"policy: {name!r} does not support task {spec.task!r} (supports {', '.join(sorted(tasks))})")


def _logical(spec: PolicySpec, name: str) -> tuple[int, int, int]:
    r = spec.fine_to_coarse_ratio
    p, c = spec.num_partitions, spec.capacity
    if p % r:
        raise ConfigError(f"policy.fine_to_coarse_ratio: {name} needs num_partitions ({p}) to be a multiple of it ({r})")
    if c % r:
        raise ConfigError(f"policy.fine_to_coarse_ratio: {name} needs capacity ({c}) to be a multiple of it ({r})")
    return p // r, c // r, r


# ------------------------------------------------------------------------------------------------ policies
class PartitionPolicy:
    """Base class of policies: ``plan(spec, rng) -> BufferPlan`` for one epoch."""

    name: ClassVar[str] = ""
    tasks: ClassVar[frozenset[str]] = frozenset(TASKS)

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:  # pragma: no cover - abstract
        raise NotImplementedError


@POLICIES.register("beta")
@dataclass(frozen=True)
class BetaPolicy(PartitionPolicy):
    """Marius's BETA ordering with greedy bucket assignment. ``randomize=False``: canonical, hand-checkable."""

    name: ClassVar[str] = "beta"
    randomize: bool = True

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        _require(spec, self.name, self.tasks)
        p, c = spec.num_partitions, spec.capacity
        walk = beta_walk(p, c, rng if self.randomize else None)
        return _build(self.name, spec, np.arange(p, dtype=np.int32)[:, None], min(p, c), max(min(p, c), c),
                      walk, "first", rng)


@POLICIES.register("comet")
@dataclass(frozen=True)
class CometPolicy(PartitionPolicy):
    """MariusGNN's COMET: BETA over random logical partitions, uniformly random bucket assignment."""

    name: ClassVar[str] = "comet"
    randomize: bool = True

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        _require(spec, self.name, self.tasks)
        l, lc, r = _logical(spec, self.name)
        walk = beta_walk(l, lc, rng if self.randomize else None)
        groups = _groups(spec.num_partitions, r, rng if self.randomize else None)
        return _build(self.name, spec, groups, min(l, lc), spec.capacity, walk, "uniform", rng)


@POLICIES.register("random")
@dataclass(frozen=True)
class RandomPolicy(PartitionPolicy):
    """Naive baseline: all pairs of random half-buffer groups, in random order; uniform bucket assignment."""

    name: ClassVar[str] = "random"

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        _require(spec, self.name, self.tasks)
        p, c = spec.num_partitions, spec.capacity
        if p <= c:
            return _build(self.name, spec, np.arange(p, dtype=np.int32)[:, None], p, c, _single_state(p), "uniform", rng)
        if c < 2:
            raise ConfigError(f"policy.capacity: random needs at least 2 slots (got {c})")
        h = c // 2
        g = -(-p // h)
        perm = rng.permutation(p).astype(np.int32)
        groups = np.full((g, h), -1, dtype=np.int32)
        for a, members in enumerate(np.array_split(perm, g)):
            groups[a, :len(members)] = members
        a, b = np.triu_indices(g, k=1)
        order = rng.permutation(len(a))
        states = []
        slots = np.full(2, -1, dtype=np.int32)
        for x, y in zip(a[order], b[order]):
            wanted = {int(x), int(y)}
            keep = [s for s in range(2) if slots[s] in wanted]
            new = sorted(wanted - {int(slots[s]) for s in keep})
            if rng.random() < 0.5:
                new.reverse()
            free = [s for s in range(2) if s not in keep]
            nxt = slots.copy()
            nxt[free] = new
            states.append(nxt)
            slots = nxt
        walk = _unit_walk_from_slots(states, 2)
        return _build(self.name, spec, groups, 2, c, walk, "uniform", rng)


@POLICIES.register("in_memory")
@dataclass(frozen=True)
class InMemoryPolicy(PartitionPolicy):
    """Everything in memory: one state holding all ``p`` partitions (capacity ``p``)."""

    name: ClassVar[str] = "in_memory"

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        _require(spec, self.name, self.tasks)
        p = spec.num_partitions
        return _build(self.name, spec, np.arange(p, dtype=np.int32)[:, None], p, p, _single_state(p), "first", rng)


@POLICIES.register("sequential")
@dataclass(frozen=True)
class SequentialPolicy(PartitionPolicy):
    """Node classification: the training partitions plus random others, one state per epoch."""

    name: ClassVar[str] = "sequential"
    tasks: ClassVar[frozenset[str]] = frozenset({"node_classification"})

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        _require(spec, self.name, self.tasks)
        p, c = spec.num_partitions, spec.capacity
        train = np.unique(spec.train_partitions)
        if len(train) > c:
            raise ConfigError(f"policy.capacity: sequential keeps the {len(train)} partitions holding training "
                              f"nodes in the buffer, more than its capacity {c} (use 'dispersed' or a "
                              "train-first node order)")
        others = np.setdiff1d(np.arange(p), train)
        fill = rotation_window(others, min(c, p) - len(train), spec.seed, spec.epoch, spec.resident)
        members = np.concatenate([train, fill]).astype(np.int32)
        n = len(members)
        walk = (np.array([0, n], dtype=np.int64), np.arange(n, dtype=np.int32), members)
        return _build(self.name, spec, np.arange(p, dtype=np.int32)[:, None], min(p, c), c, walk, "first", rng)


def rotation_window(others: np.ndarray, width: int, seed: int, epoch: int,
                    resident: np.ndarray | None = None) -> np.ndarray:
    """The ``width`` partitions of ``others`` that fill the free slots in ``epoch``: partitions in ``resident``
    first (ascending), then the rotation's window (a permutation of ``others`` from ``default_rng(seed)``,
    entries ``epoch * width ...`` cyclically) until ``width`` are chosen."""
    if width <= 0 or not len(others):
        return np.empty(0, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(others)
    window = order[(epoch * width + np.arange(len(others))) % len(others)]
    kept = np.intersect1d(others, resident) if resident is not None else np.empty(0, dtype=np.int64)
    rest = window[~np.isin(window, kept)]
    return np.concatenate([kept, rest])[:width].astype(np.int64)


@POLICIES.register("dispersed")
@dataclass(frozen=True)
class DispersedPolicy(PartitionPolicy):
    """Node classification: one pass of logical partitions through the buffer; nodes to random states."""

    name: ClassVar[str] = "dispersed"
    tasks: ClassVar[frozenset[str]] = frozenset({"node_classification"})

    def plan(self, spec: PolicySpec, rng: np.random.Generator) -> BufferPlan:
        _require(spec, self.name, self.tasks)
        l, lc, r = _logical(spec, self.name)
        groups = _groups(spec.num_partitions, r, rng)
        if l <= lc:
            walk = _single_state(l)
        else:
            perm = rng.permutation(l).astype(np.int32)
            slots = np.concatenate([np.arange(lc), rng.integers(0, lc, l - lc)]).astype(np.int32)
            walk = (np.concatenate([[0], np.arange(lc, l + 1)]).astype(np.int64), slots, perm)
        return _build(self.name, spec, groups, min(l, lc), spec.capacity, walk, "uniform", rng)


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
    "ASSIGNMENTS", "TASKS", "BetaPolicy", "BufferPlan", "CometPolicy", "DispersedPolicy", "InMemoryPolicy",
    "PartitionPolicy", "PolicySpec", "RandomPolicy", "SequentialPolicy", "Transition", "beta_swaps", "beta_walk",
    "epoch_generator", "make_plan", "rotation_window", "swap_lower_bound",
]
