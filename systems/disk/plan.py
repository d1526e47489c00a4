"""The plan of a partition-buffer policy: pure data that the disk system executes and the simulators price.

A policy (:mod:`systems.disk.policies`) turns a spec and a generator into a :class:`BufferPlan` for one epoch;
this module holds the plan type and the pure functions that read it (states, transitions, the assignment of
examples to states, the contract check). It imports no policy.

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
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from suite.errors import ConfigError, DataError

Task = Literal["link_prediction", "node_classification"]
TASKS: tuple[str, ...] = ("link_prediction", "node_classification")
ASSIGNMENTS: tuple[str, ...] = ("first", "uniform")

_CHUNK_ELEMENTS = 1 << 22  # buckets per chunk of the on-demand assignment (fixed: draws do not depend on use)
_MAX_PAIR_ENTRIES = 300_000_000  # (unit pair, state) entries of the uniform assignment's eligibility lists
_MAX_SLOT_MATRIX = 400_000_000  # states x unit slots materialized by BufferPlan.state_slots


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
        return unit_of_partitions(self.unit_partitions, self.num_partitions)

    @functools.cached_property
    def entry_state(self) -> np.ndarray:
        """``(T,)`` int64, the state of each load entry."""
        return np.repeat(np.arange(self.num_states, dtype=np.int64), np.diff(self.load_offsets))

    @functools.cached_property
    def evict_units(self) -> np.ndarray:
        """``(T,)`` int32, the unit each load replaces in its slot (``-1``: the slot was empty)."""
        return previous_in_slot(self.load_slots, self.load_units)

    @property
    def swaps(self) -> int:
        """Physical partitions read after the initial fill (what the BETA formula counts)."""
        return int(self.unit_sizes[self.load_units[self.load_offsets[1]:]].sum())

    @property
    def partitions_loaded(self) -> int:
        """Physical partitions read in the epoch, initial fill included."""
        return int(self.unit_sizes[self.load_units].sum())

    def state_loads(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(slots, units)`` loaded on entering state ``k``."""
        lo, hi = self.load_offsets[k], self.load_offsets[k + 1]
        return self.load_slots[lo:hi], self.load_units[lo:hi]

    def iter_unit_slots(self) -> Iterator[np.ndarray]:
        """Yield the ``(unit_capacity,)`` unit-slot array of every state in order (``-1`` = empty; a copy)."""
        slots = np.full(self.unit_capacity, -1, dtype=np.int32)
        for k in range(self.num_states):
            load_slots, load_units = self.state_loads(k)
            slots[load_slots] = load_units
            yield slots.copy()

    @functools.cached_property
    def _unit_slot_matrix(self) -> np.ndarray:
        if self.num_states * self.unit_capacity > _MAX_SLOT_MATRIX:
            raise ConfigError(f"plan: {self.num_states} states x {self.unit_capacity} slots is too large to "
                              "materialize; iterate with iter_unit_slots() / iter_transitions()")
        return np.stack(list(self.iter_unit_slots())) if self.num_states else np.empty((0, self.unit_capacity))

    def state_slots(self, k: int) -> np.ndarray:
        """``(capacity,)`` partitions in each physical slot of state ``k`` (``-1`` = empty)."""
        return expand_unit_slots(self._unit_slot_matrix[k], self.unit_partitions, self.capacity)

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
        return physical_transition(int(k), self.unit_partitions, self.load_slots[lo:hi], self.load_units[lo:hi],
                                   self.evict_units[lo:hi])

    def iter_transitions(self) -> Iterator[Transition]:
        """Yield :meth:`transition` of every state in order (what the disk system executes)."""
        for k in range(self.num_states):
            yield self.transition(k)

    def sorted_unit_members(self) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(k, members)`` with the sorted unit members of every state (int64)."""
        for k, slots in enumerate(self.iter_unit_slots()):
            yield k, np.sort(slots[slots >= 0]).astype(np.int64)

    # ------------------------------------------------------------------------------------ examples
    def _check_task(self, task: str, what: str) -> None:
        if self.task != task:
            raise ConfigError(f"plan: {what} is for {task} plans (this one is {self.task})")

    @functools.cached_property
    def _eligible(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        total = sum(len(m) * (len(m) + 1) // 2 for _, m in self.sorted_unit_members())
        if total > _MAX_PAIR_ENTRIES:
            raise ConfigError(f"plan {self.policy}: the uniform assignment would list {total} (pair, state) "
                              "entries; use fewer logical partitions (a larger policy.fine_to_coarse_ratio)")
        return eligible_states(self, total)

    def _uniform_chunks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return uniform_bucket_chunks(self, self._eligible)

    def bucket_state(self) -> np.ndarray:
        """``(p, p)`` int32, the state of every edge bucket ``(i, j)`` (computed on first use, then cached)."""
        self._check_task("link_prediction", "bucket_state")
        return self._bucket_state

    @functools.cached_property
    def _bucket_state(self) -> np.ndarray:
        if self.assignment == "first":
            _, first = greedy_bucket_pass(self, materialize=True)
            return first[self.unit_of[:, None], self.unit_of[None, :]]
        p = self.num_partitions
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
            return greedy_bucket_pass(self, materialize=False)[0]
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
        return group_by_state(state, self.num_states)

    def states_with_examples(self) -> np.ndarray:
        """``(n,)`` int64, the states that hold examples, ascending (state 0 alone when none does): the states a
        pass enters. A state without examples computes nothing; skipping it leaves every other state's buffer as
        the plan has it and saves its reads (those of its partitions that leave before the next state entered)."""
        if self.task != "link_prediction" and self.node_state is None:  # no examples given: every state
            return np.arange(self.num_states, dtype=np.int64)
        counts = (self.state_bucket_counts() if self.task == "link_prediction"
                  else np.bincount(self.node_state, minlength=self.num_states))
        states = np.flatnonzero(counts > 0).astype(np.int64)
        return states if len(states) else np.zeros(1, dtype=np.int64)

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
        for check in (_check_units, _check_loads):
            _raise_first(self, check(self))
        resident, problem = resident_units(self)
        _raise_first(self, problem)
        check_examples = _check_buckets if self.task == "link_prediction" else _check_nodes
        _raise_first(self, check_examples(self, resident))


# ------------------------------------------------------------------------------------ structure helpers
def unit_of_partitions(unit_partitions: np.ndarray, num_partitions: int) -> np.ndarray:
    """``(p,)`` int32, the unit (row of ``unit_partitions``) of each physical partition (``-1``: none)."""
    out = np.full(num_partitions, -1, dtype=np.int32)
    rows, _ = np.nonzero(unit_partitions >= 0)
    out[unit_partitions[unit_partitions >= 0]] = rows
    return out


def previous_in_slot(load_slots: np.ndarray, load_units: np.ndarray) -> np.ndarray:
    """For each load, the unit loaded before it into the same slot (``-1``: the slot's first load)."""
    order = np.lexsort((np.arange(len(load_slots)), load_slots))
    sorted_slots = load_slots[order]
    previous = np.full(len(order), -1, dtype=np.int32)
    same = np.zeros(len(order), dtype=bool)
    same[1:] = sorted_slots[1:] == sorted_slots[:-1]
    previous[1:][same[1:]] = load_units[order[:-1]][same[1:]]
    out = np.empty_like(previous)
    out[order] = previous
    return out


def expand_unit_slots(unit_slots: np.ndarray, unit_partitions: np.ndarray, capacity: int) -> np.ndarray:
    """The ``(capacity,)`` physical slot array (``-1`` = empty) of a unit-slot array."""
    out = np.full(capacity, -1, dtype=np.int64)
    width = unit_partitions.shape[1]
    for s in np.flatnonzero(unit_slots >= 0):
        out[s * width:(s + 1) * width] = unit_partitions[unit_slots[s]]
    return out


def physical_transition(index: int, unit_partitions: np.ndarray, load_slots: np.ndarray, load_units: np.ndarray,
                        evict_units: np.ndarray) -> Transition:
    """The :class:`Transition` of loading ``load_units`` into unit slots ``load_slots`` (evicting
    ``evict_units``), slots without a partition before or after left out."""
    width = unit_partitions.shape[1]
    slots = (load_slots[:, None].astype(np.int64) * width + np.arange(width)).ravel()
    loaded = unit_partitions[load_units].astype(np.int64).ravel()
    evicted = np.where(evict_units[:, None] >= 0, unit_partitions[np.maximum(evict_units, 0)], -1)
    evicted = evicted.astype(np.int64).ravel()
    keep = (loaded >= 0) | (evicted >= 0)
    return Transition(index, slots[keep], loaded[keep], evicted[keep])


def group_by_state(state: np.ndarray, num_states: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, offsets)``: the indices of ``state`` grouped by value (ascending within a group), CSR style."""
    order = np.argsort(state, kind="stable").astype(np.int64)
    offsets = np.zeros(num_states + 1, dtype=np.int64)
    np.cumsum(np.bincount(state, minlength=num_states), out=offsets[1:])
    return order, offsets


# ------------------------------------------------------------------------------------ assignment helpers
def greedy_bucket_pass(plan: BufferPlan, materialize: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The ``"first"`` assignment at unit level: per-state bucket counts and, with ``materialize``, the
    ``(U, U)`` first state holding each unit pair."""
    U, sizes = plan.num_units, plan.unit_sizes
    counts = np.zeros(plan.num_states, dtype=np.int64)
    first = np.full((U, U), -1, dtype=np.int32) if materialize else None
    seen = np.zeros((U, U), dtype=bool)
    slots = np.full(plan.unit_capacity, -1, dtype=np.int32)
    for k in range(plan.num_states):
        load_slots, load_units = plan.state_loads(k)
        slots[load_slots] = load_units
        members = slots[slots >= 0]
        for q in load_units:
            new = members[~seen[q, members]]
            if new.size:
                _meet(seen, first, q, new, k)
                counts[k] += 2 * sizes[q] * sizes[new].sum() - (sizes[q] ** 2 if q in new else 0)
    return counts, first


def _meet(seen: np.ndarray, first: np.ndarray | None, q: int, new: np.ndarray, k: int) -> None:
    """Mark unit ``q`` as having met the units ``new`` in state ``k`` (both directions)."""
    seen[q, new] = True
    seen[new, q] = True
    if first is not None:
        first[q, new] = k
        first[new, q] = k


def eligible_states(plan: BufferPlan, total: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Uniform assignment: for each unordered unit pair ``a <= b`` (id ``a * U + b``), the states holding
    both, as CSR ``(starts, counts, states)`` (states ascending within a pair; ``total`` entries).

    Two passes over the states (count, then fill by a running count per pair; a pair occurs at most once
    per state), ``O(sum over states of m (m + 1) / 2)`` for ``m`` units per state, no sort.
    """
    U = plan.num_units
    pairs = _PairIds(U)
    counts = np.zeros(U * U, dtype=np.int64)
    for _, members in plan.sorted_unit_members():
        counts[pairs(members)] += 1
    starts = np.zeros(U * U, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    states = np.empty(total, dtype=np.int32)
    fill = starts.copy()
    for k, members in plan.sorted_unit_members():
        pid = pairs(members)
        states[fill[pid]] = k
        fill[pid] += 1
    return starts, counts, states


class _PairIds:
    """Pair ids ``a * U + b`` of all ``a <= b`` among sorted members (upper-triangle indices cached by size)."""

    def __init__(self, num_units: int):
        self.num_units = num_units
        self.triu: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, members: np.ndarray) -> np.ndarray:
        m = len(members)
        if m not in self.triu:
            self.triu[m] = np.triu_indices(m)
        i, j = self.triu[m]
        return members[i] * self.num_units + members[j]


def uniform_bucket_chunks(plan: BufferPlan, eligible: tuple[np.ndarray, np.ndarray, np.ndarray]
                          ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(rows, states)``: the uniform bucket assignment of whole physical rows ``rows`` (``states``
    is ``(len(rows), p)``), batch by batch of units; the draws are fixed by ``assignment_seed``."""
    starts, counts, states = eligible
    p, U = plan.num_partitions, plan.num_units
    unit_of = plan.unit_of.astype(np.int64)
    units = np.arange(U, dtype=np.int64)
    rng = np.random.default_rng(plan.assignment_seed)
    batch = max(1, _CHUNK_ELEMENTS // max(1, plan.unit_width * p))
    for a0 in range(0, U, batch):
        a = units[a0:a0 + batch]
        pair = np.minimum(a[:, None], units[None, :]) * U + np.maximum(a[:, None], units[None, :])
        n_units, s_units = counts[pair], starts[pair]
        if (n_units == 0).any():
            raise DataError(f"plan {plan.policy}: some bucket is in no state (the states do not cover all pairs)")
        rows = plan.unit_partitions[a0:a0 + batch].ravel()
        local = np.repeat(np.arange(len(a)), plan.unit_width)[rows >= 0]
        rows = rows[rows >= 0].astype(np.int64)
        n = np.take(n_units[local], unit_of, axis=1)
        yield rows, states[_uniform_pick(rng, n) + np.take(s_units[local], unit_of, axis=1)]


def _uniform_pick(rng: np.random.Generator, n: np.ndarray) -> np.ndarray:
    """A uniformly random index in ``[0, n)`` for every entry of ``n`` (one float draw per entry)."""
    pick = rng.random(n.shape)
    pick *= n
    return np.minimum(pick.astype(np.int64), n - 1)


# ------------------------------------------------------------------------------------ contract checks
# Each check returns the first violation as a message (None: fine); BufferPlan.validate raises it.
def _raise_first(plan: BufferPlan, problem: str | None) -> None:
    if problem is not None:
        raise DataError(f"plan {plan.policy}: {problem}")


def _check_units(plan: BufferPlan) -> str | None:
    parts = plan.unit_partitions[plan.unit_partitions >= 0]
    if np.sort(parts).tolist() != list(range(plan.num_partitions)):
        return "unit_partitions must hold every partition exactly once"
    if plan.unit_capacity * plan.unit_width > plan.capacity:
        return f"{plan.unit_capacity} unit slots of width {plan.unit_width} exceed the capacity {plan.capacity}"
    return None


def _check_loads(plan: BufferPlan) -> str | None:
    slots, units = plan.load_slots, plan.load_units
    if len(slots) and (slots.min() < 0 or slots.max() >= plan.unit_capacity):
        return "a load uses a slot outside the buffer"
    if len(units) and (units.min() < 0 or units.max() >= plan.num_units):
        return "a load names an unknown unit"
    if plan.load_offsets[0] != 0 or (np.diff(plan.load_offsets) < 0).any():
        return "load_offsets must start at 0 and not decrease"
    return None


def resident_units(plan: BufferPlan) -> tuple[np.ndarray, str | None]:
    """``(S, U)`` bool, which units each state holds, replaying the loads; with the first violation of the load
    rules (a repeated state, a resident unit loaded again, more than ``capacity`` partitions) or ``None``."""
    resident = np.zeros((plan.num_states, plan.num_units), dtype=bool)
    slots = np.full(plan.unit_capacity, -1, dtype=np.int32)
    for k in range(plan.num_states):
        load_slots, load_units = plan.state_loads(k)
        if k and not len(load_slots):
            return resident, f"state {k} loads nothing (a repeated state)"
        for s, u in zip(load_slots, load_units):
            if u in slots:
                return resident, f"state {k} loads unit {u}, which is already in the buffer"
            slots[s] = u
        members = slots[slots >= 0]
        if plan.unit_sizes[members].sum() > plan.capacity:
            return resident, f"state {k} holds more than {plan.capacity} partitions"
        resident[k, members] = True
    return resident, None


def _check_buckets(plan: BufferPlan, resident: np.ndarray) -> str | None:
    p, unit_of = plan.num_partitions, plan.unit_of
    bs = plan.bucket_state()
    if bs.shape != (p, p) or bs.min() < 0 or bs.max() >= plan.num_states:
        return "every bucket must be assigned to a state"
    ok = resident[bs, unit_of[:, None]] & resident[bs, unit_of[None, :]]
    if not ok.all():
        i, j = np.argwhere(~ok)[0]
        return f"bucket ({i}, {j}) is assigned to state {bs[i, j]}, which does not hold both partitions"
    counts = plan.state_bucket_counts()
    if counts.sum() != p * p or not np.array_equal(counts, np.bincount(bs.ravel(), minlength=plan.num_states)):
        return "per-state bucket counts disagree with the assignment"
    return None


def _check_nodes(plan: BufferPlan, resident: np.ndarray) -> str | None:
    ns = plan.node_state
    if ns is None or len(ns) != len(plan.train_partitions):
        return "node_state must give a state to every training node"
    if not len(ns):
        return None
    if ns.min() < 0 or ns.max() >= plan.num_states:
        return "a training node is assigned to no state"
    ok = resident[ns, plan.unit_of[plan.train_partitions]]
    if not ok.all():
        n = int(np.flatnonzero(~ok)[0])
        return f"training node {n} is assigned to state {ns[n]}, which does not hold its partition"
    return None


__all__ = [
    "ASSIGNMENTS", "TASKS", "BufferPlan", "Task", "Transition", "eligible_states", "expand_unit_slots",
    "greedy_bucket_pass", "group_by_state", "physical_transition", "previous_in_slot", "resident_units",
    "uniform_bucket_chunks", "unit_of_partitions",
]
