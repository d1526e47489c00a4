"""DiskGNN-style packing: an epoch's batches sampled ahead, each batch's distinct feature rows written contiguously to
a packed file, so that a batch's misses are read from one short stretch of it (one extent, or a few) instead of
from all over the feature table.

:func:`pack_epoch` writes the packed file: batch after batch, each batch's distinct rows in ascending order (packed
row ``offsets[b] + i`` is batch ``b``'s ``i``-th row). It works through windows of consecutive batches (about
``window_bytes`` of packed rows): the window's distinct rows are read from the table through an
:class:`~systems.feature_cache.direct_io.ExtentReader` (sorted, merged extents, ``O_DIRECT``), copied out in packed
order and appended to the file. The file is a ``.npy`` table written under a temporary name and renamed when
complete (a reader never sees half of it), then its pages are dropped from the page cache, so that the batches read
it from the disk. What the pass cost (seconds, bytes read and written, rows) is :class:`PackStats`.

:class:`PackedEpoch` is the packed file opened for reading: :meth:`PackedEpoch.batch` gives a batch's
:class:`PackedBatch`, which translates table rows into packed rows for the cache's reads.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from suite.io import IOCounters, evict_page_cache
from systems.feature_cache.direct_io import ExtentReader

DEFAULT_WINDOW_BYTES = 64 * 1024 * 1024


@dataclass
class PackStats:
    """The packing pass of one epoch: seconds, bytes read from the table and written to the packed file, packed rows
    (each batch's distinct rows, summed)."""

    seconds: float = 0.0
    read_bytes: int = 0
    write_bytes: int = 0
    rows: int = 0

    def as_dict(self) -> dict[str, float | int]:
        return {"pack_s": self.seconds, "pack_read_bytes": self.read_bytes, "pack_write_bytes": self.write_bytes,
                "packed_rows": self.rows}


def packed_offsets(batch_rows: list[np.ndarray]) -> np.ndarray:
    """Where each batch's rows start in the packed file (``len + 1`` bounds)."""
    return np.concatenate([[0], np.cumsum([len(rows) for rows in batch_rows])]).astype(np.int64)


def pack_epoch(batch_rows: list[np.ndarray], source: ExtentReader, path: Path,
               window_bytes: int = DEFAULT_WINDOW_BYTES) -> PackStats:
    """Write the batches' distinct rows (each ascending) of ``source``'s table contiguously, batch after batch, as
    a ``.npy`` table at ``path`` (atomically; see the module docstring); what it cost."""
    started = time.perf_counter()
    before = source.stats.bytes
    offsets = packed_offsets(batch_rows)
    total = int(offsets[-1])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    per_window = max(1, window_bytes // max(source.row_bytes, 1))
    written = 0
    try:
        with open(partial, "wb") as handle:
            np.lib.format.write_array_header_2_0(handle, {"descr": np.lib.format.dtype_to_descr(source.dtype),
                                                          "fortran_order": False,
                                                          "shape": (total, *source.shape[1:])})
            first = 0
            while first < len(batch_rows):
                stop = int(np.searchsorted(offsets, offsets[first] + per_window, side="right")) - 1
                stop = min(len(batch_rows), max(stop, first + 1))
                window = np.concatenate(batch_rows[first:stop])
                distinct, inverse = np.unique(window, return_inverse=True)
                values = source.read_rows(distinct)
                handle.write(np.ascontiguousarray(values[inverse]).data)
                first = stop
            handle.flush()
            written = handle.tell()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    evict_page_cache(path)
    return PackStats(time.perf_counter() - started, source.stats.bytes - before, written, total)


@dataclass(frozen=True, eq=False)
class PackedBatch:
    """One batch's stretch of the packed file: its reader and where its rows are."""

    reader: ExtentReader
    rows: np.ndarray
    offset: int

    def locate(self, rows: np.ndarray) -> np.ndarray:
        """The packed rows of ``rows`` (some of the batch's rows, ascending)."""
        return self.offset + np.searchsorted(self.rows, rows)


class PackedEpoch:
    """A packed file opened for reading (``O_DIRECT`` as the table is), the batches' rows beside it.

    Args:
        path: the packed file :func:`pack_epoch` wrote.
        batch_rows: each batch's distinct rows, as packed.
        counters / direct / io_threads / merge_gap_bytes: as for :class:`ExtentReader`.
    """

    def __init__(self, path: Path, batch_rows: list[np.ndarray], counters: IOCounters, direct: bool,
                 io_threads: int, merge_gap_bytes: int):
        self.path = path
        self.batch_rows = batch_rows
        self.offsets = packed_offsets(batch_rows)
        self.reader = ExtentReader(path, counters, direct=direct, io_threads=io_threads,
                                   merge_gap_bytes=merge_gap_bytes)

    def batch(self, index: int) -> PackedBatch:
        """Batch ``index``'s stretch."""
        return PackedBatch(self.reader, self.batch_rows[index], int(self.offsets[index]))

    def close(self) -> None:
        """Close the reader and delete the packed file."""
        self.reader.close()
        self.path.unlink(missing_ok=True)


__all__ = ["DEFAULT_WINDOW_BYTES", "PackStats", "PackedBatch", "PackedEpoch", "pack_epoch", "packed_offsets"]
