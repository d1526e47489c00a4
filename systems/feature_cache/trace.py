"""The feature cache's access trace: every lookup's distinct rows, in order, with what replaying it needs.

The ``feature_cache`` system writes one (``system.options.record_trace``) to ``cache_trace.npz`` in the run folder;
the cache simulator (:mod:`simulators.cache_model`) replays it under any policy and budget. A lookup is one batch's
gather (training) or one evaluation gather; lookups come in *segments* (``train:<epoch>``, ``eval:<split>``) in the
order they ran. Within a training segment a look-ahead policy was shown the next ``lookahead_batches - 1`` lookups of
the segment (:class:`~systems.feature_cache.feature_cache_system.LookAhead`); evaluations show it nothing.

File layout (``.npz``, compressed): ``rows`` (all lookups' rows concatenated, int32 where the table allows),
``offsets`` (``lookups + 1``), ``segment_of_lookup`` (int32), ``segments`` (names), ``degrees`` (int32 or int64, what
``static_degree`` ranks), and the scalars ``fill_at`` (lookups before the pinned rows were read, -1: never),
``num_rows``, ``row_bytes``, ``data_offset``, ``file_size``, ``capacity``, ``merge_gap_bytes``,
``lookahead_batches``, ``policy``.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from suite.errors import DataError
from suite.io import atomic_write_bytes

TRACE_FILE = "cache_trace.npz"
_SCALARS = ("fill_at", "num_rows", "row_bytes", "data_offset", "file_size", "capacity", "merge_gap_bytes",
            "lookahead_batches")


@dataclass(frozen=True, eq=False)
class CacheTrace:
    """A recorded sequence of cache lookups (see the module docstring)."""

    rows: np.ndarray
    offsets: np.ndarray
    segment_of_lookup: np.ndarray
    segments: tuple[str, ...]
    degrees: np.ndarray
    fill_at: int
    num_rows: int
    row_bytes: int
    data_offset: int
    file_size: int
    capacity: int
    merge_gap_bytes: int
    lookahead_batches: int
    policy: str

    @property
    def num_lookups(self) -> int:
        return len(self.offsets) - 1

    def lookup(self, index: int) -> np.ndarray:
        """The distinct rows (ascending, int64) of lookup ``index``."""
        return self.rows[self.offsets[index]:self.offsets[index + 1]].astype(np.int64)

    def windows(self, lookahead_batches: int) -> np.ndarray:
        """Per lookup, how many following lookups a look-ahead policy is shown: in a training segment the next
        ``lookahead_batches - 1`` of the segment; in an evaluation none."""
        segment = self.segment_of_lookup
        index = np.arange(self.num_lookups)
        is_last = np.concatenate([segment[1:] != segment[:-1], [True]])
        last = np.minimum.accumulate(np.where(is_last, index, self.num_lookups)[::-1])[::-1]
        training = np.array([name.startswith("train:") for name in self.segments], dtype=bool)[segment]
        return np.where(training, np.minimum(lookahead_batches - 1, last - index), 0)

    def save(self, path: str | os.PathLike) -> None:
        """Write the trace atomically (compressed ``.npz``)."""
        buffer = io.BytesIO()
        np.savez_compressed(buffer, rows=self.rows, offsets=self.offsets, segment_of_lookup=self.segment_of_lookup,
                            segments=np.array(self.segments, dtype=str), degrees=self.degrees,
                            policy=np.array(self.policy), **{name: np.int64(getattr(self, name))
                                                            for name in _SCALARS})
        atomic_write_bytes(path, buffer.getvalue())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "CacheTrace":
        """Read a trace written by :meth:`save`; a :class:`~suite.errors.DataError` naming the file otherwise."""
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                return cls(rows=data["rows"], offsets=data["offsets"].astype(np.int64),
                           segment_of_lookup=data["segment_of_lookup"].astype(np.int64),
                           segments=tuple(str(s) for s in data["segments"]), degrees=data["degrees"],
                           policy=str(data["policy"]), **{name: int(data[name]) for name in _SCALARS})
        except (OSError, KeyError, ValueError) as err:
            raise DataError(f"{path}: not a cache trace ({' '.join(str(err).split())[:200]})") from None


def build_trace(lookups: Sequence[tuple[str, np.ndarray]], degrees: np.ndarray, fill_at: int | None,
                **layout: int | str) -> CacheTrace:
    """A :class:`CacheTrace` from the cache's ``(segment, rows)`` lookups; ``layout``: the scalars but ``fill_at``
    and ``policy`` given by name (see the module docstring)."""
    num_rows = int(layout["num_rows"])
    row_type = np.int32 if num_rows < 2**31 else np.int64
    names = list(dict.fromkeys(segment for segment, _ in lookups))
    index = {name: i for i, name in enumerate(names)}
    sizes = np.array([len(rows) for _, rows in lookups], dtype=np.int64)
    rows = (np.concatenate([r for _, r in lookups]).astype(row_type) if lookups
            else np.empty(0, dtype=row_type))
    degree_type = np.int32 if len(degrees) == 0 or int(np.max(degrees)) < 2**31 else np.int64
    return CacheTrace(rows=rows, offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                      segment_of_lookup=np.array([index[s] for s, _ in lookups], dtype=np.int64),
                      segments=tuple(names), degrees=np.asarray(degrees).astype(degree_type),
                      fill_at=-1 if fill_at is None else int(fill_at), **layout)


__all__ = ["TRACE_FILE", "CacheTrace", "build_trace"]
