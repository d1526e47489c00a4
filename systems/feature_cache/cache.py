"""The feature cache: ``capacity`` rows of the feature table in memory, the rest read from disk on demand.

:meth:`FeatureCache.gather` serves one mini-batch's rows: it looks the batch's distinct rows up in the slot map,
copies the hits out of the cache, reads the misses from disk in one call of the reader
(:class:`~systems.feature_cache.direct_io.ExtentReader`: sorted rows, merged extents, ``O_DIRECT``), and asks the
policy (:mod:`systems.feature_cache.policies`) which misses to keep and where. Everything is vectorized over the
batch's rows; calls are serialized (one batch at a time, in the order they come), so hits and bytes depend only on
the sequence of batches, never on timing.

:class:`CachedRows` is the same cache as a :class:`~systems.tasks.node_classification.RowSource` (what an evaluation
binds as its features).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from systems.feature_cache.direct_io import ExtentReader, copy_rows
from systems.feature_cache.packing import PackedBatch
from systems.feature_cache.policies import CachePolicy


def _rows_2d(table: torch.Tensor) -> np.ndarray:
    """``table``'s bytes as a 2-D ``uint8`` numpy view, one row per row of the table (no copy; any dtype, float16
    included, which numba cannot type)."""
    return table.view(len(table), int(np.prod(table.shape[1:], dtype=np.int64))).numpy().view(np.uint8)


def _move_rows(source: torch.Tensor, source_rows: np.ndarray, target: torch.Tensor,
               target_rows: np.ndarray) -> None:
    """Row ``source_rows[i]`` of ``source`` into row ``target_rows[i]`` of ``target`` in one compiled pass without
    the interpreter lock (the reader's :func:`~systems.feature_cache.direct_io.copy_rows` over byte rows), where
    indexing would gather into a temporary and scatter it."""
    rows = _rows_2d(source)
    width = rows.shape[1]
    copy_rows(rows.reshape(-1), source_rows * width, width, _rows_2d(target), target_rows)


@dataclass
class CacheStats:
    """Lookups of a period: distinct rows asked for per batch, summed (``hits + misses``), and rows kept."""

    hits: int = 0
    misses: int = 0
    admitted: int = 0

    @property
    def hit_rate(self) -> float | None:
        """Hits over lookups (None before any)."""
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else None

    def as_dict(self, prefix: str = "") -> dict[str, float | int | None]:
        return {f"{prefix}cache_hits": self.hits, f"{prefix}cache_misses": self.misses,
                f"{prefix}cache_admitted": self.admitted, f"{prefix}hit_rate": self.hit_rate}


class CacheState:
    """Which row is in which slot, and the policy that decides: the bookkeeping of :class:`FeatureCache` without the
    rows' values (what the cache simulator, :mod:`simulators.cache_model`, replays a trace through).

    Args:
        policy: decides which rows stay; its ``capacity`` is the number of slots.
        num_rows: rows of the feature table.
    """

    def __init__(self, policy: CachePolicy, num_rows: int):
        self.policy = policy
        self.capacity = policy.capacity
        self.row_of_slot = np.full(self.capacity, -1, dtype=np.int64)
        self.slot_of_row = np.full(num_rows, -1, dtype=np.int64)
        self.stats = CacheStats()

    def pin(self) -> np.ndarray:
        """Put the policy's pinned rows into the first slots; returns them (to be read)."""
        rows = self.policy.pinned()[:self.capacity]
        self.row_of_slot[:len(rows)] = rows
        self.slot_of_row[rows] = np.arange(len(rows))
        return rows

    def lookup(self, rows: np.ndarray) -> np.ndarray:
        """The slot of each of ``rows`` (distinct, ascending), -1 for a miss; hits and misses counted."""
        slots = self.slot_of_row[rows]
        misses = int((slots < 0).sum())
        self.stats.hits += len(rows) - misses
        self.stats.misses += misses
        return slots

    def admit(self, rows: np.ndarray, slots: np.ndarray,
              future: Sequence[np.ndarray] = ()) -> tuple[np.ndarray, np.ndarray]:
        """Tell the policy of the batch (``rows`` and their ``slots`` from :meth:`lookup`); apply its decision.
        Returns ``(chosen, targets)``: the misses kept (indices into ``rows[slots < 0]``) and their slots (a slot
        given to several misses goes to the last one)."""
        empty = np.empty(0, dtype=np.int64)
        if not self.policy.admits:
            return empty, empty
        placed = self.policy.place(rows, slots, self.row_of_slot, future)  # also without misses: it learns of hits
        chosen = np.flatnonzero(placed >= 0)
        if len(chosen) == 0:
            return empty, empty
        missed = rows[slots < 0]
        targets = placed[chosen]
        _, last = np.unique(targets[::-1], return_index=True)
        chosen = chosen[len(chosen) - 1 - last]
        targets = placed[chosen]
        previous = self.row_of_slot[targets]
        self.slot_of_row[previous[previous >= 0]] = -1
        self.row_of_slot[targets] = missed[chosen]
        self.slot_of_row[missed[chosen]] = targets
        self.stats.admitted += len(chosen)
        return chosen, targets


class FeatureCache:
    """Rows of a feature table kept in ``policy.capacity`` slots in memory (see the module docstring).

    Args:
        reader: reads rows from disk.
        policy: decides which rows stay.

    Attributes:
        trace: where every lookup's distinct rows are appended, with :attr:`segment` (None: not recorded).
        segment: the label of the lookups now (set by the system: a training epoch, an evaluation).
        fill_at: lookups recorded before :meth:`fill` read the pinned rows (None: not yet).
    """

    def __init__(self, reader: ExtentReader, policy: CachePolicy):
        self.reader = reader
        self.state = CacheState(policy, reader.shape[0])
        dtype = torch.from_numpy(np.empty(0, dtype=reader.dtype)).dtype
        self.slots = torch.empty((self.capacity, *reader.shape[1:]), dtype=dtype)
        self._lock = threading.Lock()
        self.filled = False
        self.trace: list[tuple[str, np.ndarray]] | None = None
        self.segment = ""
        self.fill_at: int | None = None

    @property
    def policy(self) -> CachePolicy:
        return self.state.policy

    @property
    def capacity(self) -> int:
        return self.state.capacity

    @property
    def row_of_slot(self) -> np.ndarray:
        return self.state.row_of_slot

    @property
    def slot_of_row(self) -> np.ndarray:
        return self.state.slot_of_row

    @property
    def stats(self) -> CacheStats:
        return self.state.stats

    @property
    def slot_bytes(self) -> int:
        """Memory of the slots."""
        return self.capacity * self.reader.row_bytes

    def fill(self) -> int:
        """Read the policy's pinned rows into the first slots (once); returns their number."""
        with self._lock:
            if self.filled:
                return 0
            self.filled = True
            self.fill_at = len(self.trace) if self.trace is not None else None
            rows = self.state.pin()
            self.reader.read_rows(rows, out=self.slots.numpy())
            return len(rows)

    def gather(self, nodes: torch.Tensor, future: Sequence[np.ndarray] = (),
               packed: PackedBatch | None = None) -> torch.Tensor:
        """The rows of ``nodes`` (any order, repeats allowed) in the table's dtype, as ``table[nodes]``; ``future``:
        the distinct rows of the next batches, nearest first (for a policy that looks ahead); ``packed``: the
        batch's stretch of a packed file, where its misses are read instead of the table."""
        distinct, inverse = torch.unique(nodes, sorted=True, return_inverse=True)
        rows = distinct.numpy().astype(np.int64, copy=False)
        values = torch.empty((len(nodes), *self.slots.shape[1:]), dtype=self.slots.dtype)
        if len(rows) == len(nodes):  # no repeats (a sample's input nodes): each row straight to its place in nodes
            place = np.empty(len(rows), dtype=np.int64)
            place[inverse.numpy()] = np.arange(len(rows))
            with self._lock:
                self._lookup(rows, future, values, place, packed)
            return values
        values = values[:len(rows)]
        with self._lock:
            self._lookup(rows, future, values, np.arange(len(rows)), packed)
        return values[inverse]

    def _lookup(self, rows: np.ndarray, future: Sequence[np.ndarray], values: torch.Tensor, place: np.ndarray,
                packed: PackedBatch | None = None) -> None:
        """Row ``rows[i]`` into ``values[place[i]]``: hits from the slots, misses read from disk; the policy told."""
        if self.trace is not None:
            self.trace.append((self.segment, rows.copy()))
        slots = self.state.lookup(rows)
        hit = slots >= 0
        _move_rows(self.slots, slots[hit], values, place[hit])
        miss_place = place[~hit]
        if packed is None:
            self.reader.read_rows(rows[~hit], out=values.numpy(), targets=miss_place)
        else:
            packed.reader.read_rows(packed.locate(rows[~hit]), out=values.numpy(), targets=miss_place)
        chosen, targets = self.state.admit(rows, slots, future)
        if len(chosen):
            _move_rows(values, miss_place[chosen], self.slots, targets)

    def take_stats(self) -> CacheStats:
        """The stats since the last call (and start a new period)."""
        with self._lock:
            stats, self.state.stats = self.state.stats, CacheStats()
        return stats

    def close(self) -> None:
        """Close the reader."""
        self.reader.close()


class CachedRows:
    """A :class:`FeatureCache` as a :class:`~systems.tasks.node_classification.RowSource`: ``index_select(0, nodes)``
    serves ``nodes`` through the cache."""

    def __init__(self, cache: FeatureCache):
        self.cache = cache
        self.shape = cache.reader.shape

    def index_select(self, dim: int, index: torch.Tensor) -> torch.Tensor:
        """The rows ``index`` (``dim`` must be 0), in its order."""
        if dim != 0:
            raise ValueError("CachedRows reads rows (dim 0) only")
        return self.cache.gather(index)


__all__ = ["CacheState", "CacheStats", "CachedRows", "FeatureCache"]
