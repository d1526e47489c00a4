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

from systems.feature_cache.direct_io import ExtentReader
from systems.feature_cache.policies import CachePolicy


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


class FeatureCache:
    """Rows of a feature table kept in ``policy.capacity`` slots in memory (see the module docstring).

    Args:
        reader: reads rows from disk.
        policy: decides which rows stay.
    """

    def __init__(self, reader: ExtentReader, policy: CachePolicy):
        self.reader = reader
        self.policy = policy
        self.capacity = policy.capacity
        num_rows = reader.shape[0]
        dtype = torch.from_numpy(np.empty(0, dtype=reader.dtype)).dtype
        self.slots = torch.empty((self.capacity, *reader.shape[1:]), dtype=dtype)
        self.row_of_slot = np.full(self.capacity, -1, dtype=np.int64)
        self.slot_of_row = np.full(num_rows, -1, dtype=np.int64)
        self.stats = CacheStats()
        self._lock = threading.Lock()
        self.filled = False

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
            rows = self.policy.pinned()[:self.capacity]
            if len(rows):
                self.slots[:len(rows)] = torch.from_numpy(self.reader.read_rows(rows))
                self.row_of_slot[:len(rows)] = rows
                self.slot_of_row[rows] = np.arange(len(rows))
            return len(rows)

    def gather(self, nodes: torch.Tensor, future: Sequence[np.ndarray] = ()) -> torch.Tensor:
        """The rows of ``nodes`` (any order, repeats allowed) in the table's dtype, as ``table[nodes]``; ``future``:
        the distinct rows of the next batches, nearest first (for a policy that looks ahead)."""
        distinct, inverse = torch.unique(nodes, sorted=True, return_inverse=True)
        rows = distinct.numpy().astype(np.int64, copy=False)
        with self._lock:
            values = self._lookup(rows, future)
        return values[inverse]

    def _lookup(self, rows: np.ndarray, future: Sequence[np.ndarray]) -> torch.Tensor:
        slots = self.slot_of_row[rows]
        hit = slots >= 0
        values = torch.empty((len(rows), *self.slots.shape[1:]), dtype=self.slots.dtype)
        hit_index = torch.from_numpy(np.flatnonzero(hit))
        values[hit_index] = self.slots[torch.from_numpy(slots[hit])]
        missed = rows[~hit]
        read = torch.from_numpy(self.reader.read_rows(missed))
        values[torch.from_numpy(np.flatnonzero(~hit))] = read
        self.stats.hits += int(hit.sum())
        self.stats.misses += len(missed)
        if self.policy.admits:  # also without misses: the policy learns of the hits
            placed = self.policy.place(rows, slots, self.row_of_slot, future)
            self._install(missed, placed, read)
        return values

    def _install(self, missed: np.ndarray, placed: np.ndarray, read: torch.Tensor) -> None:
        """Put the misses the policy placed into their slots (a slot given twice goes to the last one)."""
        chosen = np.flatnonzero(placed >= 0)
        if len(chosen) == 0:
            return
        targets = placed[chosen]
        _, last = np.unique(targets[::-1], return_index=True)
        chosen = chosen[len(chosen) - 1 - last]
        targets = placed[chosen]
        previous = self.row_of_slot[targets]
        self.slot_of_row[previous[previous >= 0]] = -1
        self.row_of_slot[targets] = missed[chosen]
        self.slot_of_row[missed[chosen]] = targets
        self.slots[torch.from_numpy(targets)] = read[torch.from_numpy(chosen)]
        self.stats.admitted += len(chosen)

    def take_stats(self) -> CacheStats:
        """The stats since the last call (and start a new period)."""
        with self._lock:
            stats, self.stats = self.stats, CacheStats()
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


__all__ = ["CacheStats", "CachedRows", "FeatureCache"]
