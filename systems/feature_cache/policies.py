"""Feature-cache policies: which feature rows stay in memory between mini-batches.

A policy (declared by name in the ``cache_policies`` plugin table, looked up in :data:`CACHE_POLICIES`) decides, per
mini-batch, where the rows the cache missed go: each miss gets a cache slot (evicting the slot's row) or -1 (read
and used, not kept). It sees the batch as a whole: the batch's distinct rows (sorted), which of them hit and in which
slot, and the rows of the next batches where it looks ahead; it never loops over rows in Python (vectorized numpy,
or a numba kernel for a per-row state machine). The cache (:mod:`systems.feature_cache.cache`) owns the slots and
applies the decision.

Policies
--------
``none``
    No cache: every row of every batch is read.
``static_degree`` (PaGraph, AliGraph)
    The ``capacity`` rows of highest degree (in the sampling direction; ties by row id) are read once and pinned;
    misses are never kept.
``lru`` (GraphBolt's CPU cache option)
    Least recently used, at batch granularity: a batch's rows are one access; misses take the slots used longest
    ago (empty slots first); when a batch misses more rows than there are slots not used by it, the first misses
    (by row id) are kept.
``s3fifo`` (GraphBolt's default; Yang et al., SOSP 2023)
    A small FIFO (10 % of the slots) admits new rows, a main FIFO (the rest) holds rows that were hit again while in
    the small one (frequency > 1), a ghost FIFO (as many entries as the main one) remembers rows recently dropped from
    the small one, so that a ghost that comes back goes straight to the main FIFO. Hits raise a row's frequency
    (at most 3); the main FIFO reinserts a row of frequency > 0 with its frequency less one instead of evicting it.
    Within a batch: hits first, then misses in row order (a per-row state machine, compiled with numba).
``belady`` (Ginex)
    Optimal replacement over a window of the next ``lookahead_batches`` sampled batches: after a batch, the cache
    holds the ``capacity`` rows (among those it held and the batch's misses) whose next use in the window comes first;
    rows not used again within the window go first, those already cached last among equals. Misses may be passed over
    (not kept) when every cached row is needed sooner. With the whole epoch as window this is Belady's MIN with
    bypass, the most hits any policy can have.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np

from suite.registry import Registry

CACHE_POLICIES: Registry = Registry("cache policy", plugin_table="cache_policies")
"""Feature-cache policies by name (:class:`CachePolicy` subclasses), declared by the ``cache_policies`` plugin table
(the built-in lines: :mod:`systems.plugins`)."""

_NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True, eq=False)
class CacheContext:
    """What a policy is built for.

    Attributes:
        capacity: cache slots (rows kept in memory).
        num_rows: rows of the feature table.
        degrees: ``(num_rows,)`` degree of every row's node in the sampling direction (``static_degree`` pins the
            highest); None where no policy needs it.
    """

    capacity: int
    num_rows: int
    degrees: np.ndarray | None = None


class CachePolicy(ABC):
    """Base class of feature-cache policies (see the module docstring).

    Attributes:
        looks_ahead: the policy wants the rows of the next batches (the system then samples ahead).
        admits: the policy may keep misses (False: the cache never changes after :meth:`pinned` is filled).
    """

    looks_ahead: ClassVar[bool] = False
    admits: ClassVar[bool] = True

    def __init__(self, context: CacheContext):
        self.context = context

    @property
    def capacity(self) -> int:
        """The slots this policy fills (0 for ``none``)."""
        return self.context.capacity

    def pinned(self) -> np.ndarray:
        """Rows read into slots ``0..len-1`` before the first batch (none by default)."""
        return np.empty(0, dtype=np.int64)

    @abstractmethod
    def place(self, rows: np.ndarray, slots: np.ndarray, occupants: np.ndarray,
              future: Sequence[np.ndarray] = ()) -> np.ndarray:
        """Where the batch's misses go.

        Args:
            rows: the batch's distinct rows, ascending (int64).
            slots: the slot of each row, -1 for a miss.
            occupants: the row in each slot before the batch (-1: empty); read only.
            future: the distinct rows of each of the next batches, nearest first (policies that look ahead).

        Returns:
            For each miss (``rows[slots < 0]``, in order) the slot it goes into, or -1 (not kept). A slot may be
            given to several misses (a row admitted and pushed out within the batch): the last one keeps it.
        """


class NoCache(CachePolicy):
    """``none``: nothing is kept; every row is read from disk."""

    admits = False

    @property
    def capacity(self) -> int:
        return 0

    def place(self, rows, slots, occupants, future=()):
        return np.full(int((slots < 0).sum()), -1, dtype=np.int64)


class StaticDegree(CachePolicy):
    """``static_degree``: the highest-degree rows, pinned before training; misses are never kept."""

    admits = False

    def __init__(self, context: CacheContext):
        super().__init__(context)
        if context.degrees is None:
            raise ValueError("static_degree needs the degree of every row")

    def pinned(self) -> np.ndarray:
        order = np.argsort(-np.asarray(self.context.degrees, dtype=np.int64), kind="stable")
        return np.sort(order[:self.context.capacity]).astype(np.int64)

    def place(self, rows, slots, occupants, future=()):
        return np.full(int((slots < 0).sum()), -1, dtype=np.int64)


class Lru(CachePolicy):
    """``lru``: least recently used at batch granularity (vectorized over the slots)."""

    def __init__(self, context: CacheContext):
        super().__init__(context)
        self.last_used = np.full(context.capacity, -1, dtype=np.int64)  # -1: empty, oldest of all
        self.clock = 0

    def place(self, rows, slots, occupants, future=()):
        self.clock += 1
        self.last_used[slots[slots >= 0]] = self.clock
        misses = int((slots < 0).sum())
        placed = np.full(misses, -1, dtype=np.int64)
        candidates = np.flatnonzero(self.last_used < self.clock)
        kept = min(misses, len(candidates))
        if kept == 0:
            return placed
        ages = self.last_used[candidates]
        oldest = candidates[np.argsort(ages, kind="stable")[:kept]]
        placed[:kept] = oldest
        self.last_used[oldest] = self.clock
        return placed


class S3Fifo(CachePolicy):
    """``s3fifo``: small, main and ghost FIFOs (see the module docstring); the state machine runs in numba."""

    small_fraction: ClassVar[float] = 0.1

    def __init__(self, context: CacheContext):
        super().__init__(context)
        capacity = context.capacity
        small = min(capacity, max(1, int(round(self.small_fraction * capacity)))) if capacity else 0
        main = capacity - small
        self.sizes = np.array([small, main, max(main, 1)], dtype=np.int64)  # small, main, ghost capacities
        # ring buffers of slots: small [0, small), main [small, capacity); heads and counts in `queues`
        self.ring = np.zeros(max(capacity, 1), dtype=np.int64)
        self.queues = np.zeros(4, dtype=np.int64)  # small head, small count, main head, main count
        self.freq = np.zeros(max(capacity, 1), dtype=np.int8)
        self.row_of_slot = np.full(max(capacity, 1), -1, dtype=np.int64)
        self.free = np.arange(capacity, dtype=np.int64)[::-1].copy()  # a stack of free slots
        self.free_count = np.array([capacity], dtype=np.int64)
        self.ghost_stamp = np.full(context.num_rows, -1, dtype=np.int64)  # ghost insertion number, -1: not a ghost
        self.ghost_clock = np.zeros(1, dtype=np.int64)

    def place(self, rows, slots, occupants, future=()):
        misses = rows[slots < 0]
        if self.context.capacity == 0:
            return np.full(len(misses), -1, dtype=np.int64)
        return _s3fifo_batch(slots[slots >= 0], misses, self.sizes, self.ring, self.queues, self.freq,
                             self.row_of_slot, self.free, self.free_count, self.ghost_stamp, self.ghost_clock)


@numba.njit(nogil=True, cache=True)
def _ring_push(ring, queues, which, base, size, slot):
    head, count = queues[2 * which], queues[2 * which + 1]
    ring[base + (head + count) % size] = slot
    queues[2 * which + 1] = count + 1


@numba.njit(nogil=True, cache=True)
def _ring_pop(ring, queues, which, base, size):
    head = queues[2 * which]
    slot = ring[base + head]
    queues[2 * which] = (head + 1) % size
    queues[2 * which + 1] -= 1
    return slot


@numba.njit(nogil=True, cache=True)
def _evict_main(sizes, ring, queues, freq, row_of_slot, free, free_count):
    """Evict one row of the main FIFO (rows of frequency > 0 go round again, one less)."""
    base, size = sizes[0], sizes[1]
    while queues[3] > 0:
        slot = _ring_pop(ring, queues, 1, base, size)
        if freq[slot] > 0:
            freq[slot] -= 1
            _ring_push(ring, queues, 1, base, size, slot)
        else:
            row_of_slot[slot] = -1
            free[free_count[0]] = slot
            free_count[0] += 1
            return


@numba.njit(nogil=True, cache=True)
def _s3fifo_batch(hit_slots, misses, sizes, ring, queues, freq, row_of_slot, free, free_count, ghost_stamp,
                  ghost_clock):
    small, main, ghost = sizes[0], sizes[1], sizes[2]
    for slot in hit_slots:
        if freq[slot] < 3:
            freq[slot] += 1
    placed = np.full(len(misses), -1, dtype=np.int64)
    for i in range(len(misses)):
        row = misses[i]
        stamp = ghost_stamp[row]
        if main > 0 and stamp >= 0 and ghost_clock[0] - stamp < ghost:  # a ghost comes back: to the main FIFO
            ghost_stamp[row] = -1
            while queues[3] >= main:
                _evict_main(sizes, ring, queues, freq, row_of_slot, free, free_count)
            target = 1
        else:
            while queues[1] >= small:  # make room in the small FIFO
                slot = _ring_pop(ring, queues, 0, 0, small)
                if main > 0 and freq[slot] > 1:  # hit again while small: promoted
                    while queues[3] >= main:
                        _evict_main(sizes, ring, queues, freq, row_of_slot, free, free_count)
                    _ring_push(ring, queues, 1, small, main, slot)
                else:  # dropped, remembered as a ghost
                    ghost_clock[0] += 1
                    ghost_stamp[row_of_slot[slot]] = ghost_clock[0]
                    row_of_slot[slot] = -1
                    free[free_count[0]] = slot
                    free_count[0] += 1
            target = 0
        free_count[0] -= 1
        slot = free[free_count[0]]
        row_of_slot[slot] = row
        freq[slot] = 0
        if target == 0:
            _ring_push(ring, queues, 0, 0, small, slot)
        else:
            _ring_push(ring, queues, 1, small, main, slot)
        placed[i] = slot
    return placed


class Belady(CachePolicy):
    """``belady``: optimal replacement over the sampled-ahead window (see the module docstring); vectorized."""

    looks_ahead = True

    def __init__(self, context: CacheContext):
        super().__init__(context)
        self._next_use = np.full(context.num_rows, _NEVER, dtype=np.int64)  # scratch, reset after every batch

    def place(self, rows, slots, occupants, future=()):
        misses = rows[slots < 0]
        capacity = self.context.capacity
        placed = np.full(len(misses), -1, dtype=np.int64)
        if capacity == 0 or len(misses) == 0:
            return placed
        for distance in range(len(future) - 1, -1, -1):  # nearest last: it wins
            self._next_use[future[distance]] = distance
        held_slots = np.flatnonzero(occupants >= 0)
        candidates = np.concatenate([occupants[held_slots], misses])
        next_use = self._next_use[candidates]
        for distance_rows in future:
            self._next_use[distance_rows] = _NEVER
        newcomer = np.arange(len(candidates)) >= len(held_slots)
        order = np.lexsort((newcomer, next_use))  # soonest first; among equals, the rows already held
        kept = np.zeros(len(candidates), dtype=bool)
        kept[order[:capacity]] = True
        evicted = held_slots[~kept[:len(held_slots)]]
        admitted = np.flatnonzero(kept[len(held_slots):])
        free = np.concatenate([np.flatnonzero(occupants < 0), evicted])
        placed[admitted] = free[:len(admitted)]
        return placed


__all__ = ["CACHE_POLICIES", "Belady", "CacheContext", "CachePolicy", "Lru", "NoCache", "S3Fifo", "StaticDegree"]
