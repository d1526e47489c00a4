"""The partition buffer: ``c`` preallocated slots in memory, filled with whole partitions by positional reads.

A partitioned store (:mod:`suite.graph.partition`) keeps every node array partition-contiguous: partition ``i``
is rows ``partition_offsets[i]:partition_offsets[i+1]``. :class:`PartitionArray` reads such a row range of a
``.npy`` file with one large positional read (:func:`suite.io.pread_into`, looping on short reads) straight into a
buffer slot, then drops the range from the page cache (``evict=True``) so that the next read of it comes from the
disk again, and counts the bytes (:class:`suite.io.IOCounters`). Kernel read-ahead is off for these files
(``POSIX_FADV_RANDOM``): it would cache the pages after each read, and the next partition would not come from
the disk.

:class:`FeatureBuffer` holds ``capacity`` slots of ``max_rows`` rows each and the map from a global node id to its
buffer row (``slot * max_rows + row``, or -1 when its partition is not in the buffer). Loading into a slot can
read directly, or copy a partition a prefetch thread read earlier into a staging tensor.
"""

from __future__ import annotations

import io
import os
import time
import zlib
from pathlib import Path

import numpy as np
import torch

from suite.errors import DataError
from suite.io import IOCounters, evict_page_cache, pread_into

_PAGE = os.sysconf("SC_PAGE_SIZE")


def _read_npy_header(fd: int, path: Path) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran_order, dtype, data_offset)`` of a ``.npy`` file, reading only its header's bytes."""
    prefix = os.pread(fd, 12, 0)
    if len(prefix) < 10 or prefix[:6] != b"\x93NUMPY":
        raise DataError(f"{path}: not a .npy file")
    length_bytes = 2 if prefix[6] == 1 else 4
    header_length = int.from_bytes(prefix[8:8 + length_bytes], "little")
    head = io.BytesIO(os.pread(fd, 8 + length_bytes + header_length, 0))
    version = np.lib.format.read_magic(head)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = read_header(head)
    return tuple(shape), fortran, dtype, head.tell()


class PartitionArray:
    """A row-major ``.npy`` file read by row ranges with positional reads.

    Args:
        path: the ``.npy`` file.
        counters: where read bytes are counted.
        evict: drop every range read from the page cache afterwards.
    """

    def __init__(self, path: str | os.PathLike, counters: IOCounters, evict: bool = True):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDONLY)
        # No kernel read-ahead: it would cache pages beyond each read, and the next read would not hit the disk.
        os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_RANDOM)
        shape, fortran, dtype, self.data_offset = _read_npy_header(self._fd, self.path)
        if fortran or len(shape) < 1:
            raise DataError(f"{self.path}: expected a C-ordered array with rows")
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * self.dtype.itemsize
        expected = self.data_offset + self.shape[0] * self.row_bytes
        actual = self.path.stat().st_size
        if actual != expected:
            raise DataError(f"{self.path}: {actual} bytes, expected {expected} for shape {self.shape} "
                            f"(truncated or corrupted)")
        self.counters = counters
        self.evict = evict
        if evict:
            evict_page_cache(self._fd, 0, self.data_offset + _PAGE, sync=False)

    def read_rows(self, start: int, stop: int, out: torch.Tensor) -> int:
        """Read rows ``start:stop`` into the first ``stop - start`` rows of ``out`` (contiguous); return bytes."""
        rows = stop - start
        target = out[:rows]
        offset = self.data_offset + start * self.row_bytes
        started = time.perf_counter()
        nbytes = pread_into(self._fd, target, offset, path=self.path)
        seconds = time.perf_counter() - started
        if self.evict:  # whole pages: the kernel keeps a page that the range covers only in part
            first = offset - offset % _PAGE
            evict_page_cache(self._fd, first, offset + nbytes - first + _PAGE - 1, sync=False)
        self.counters.add_read(nbytes, seconds)
        return nbytes

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class FeatureBuffer:
    """``capacity`` slots of node rows (features) and the global-id -> buffer-row map.

    Args:
        source: the partition-contiguous rows on disk.
        partition_offsets: ``(p + 1,)`` row offsets of the partitions.
        capacity: slots.
        checksums: the CRC-32 of every partition's rows; each read is checked against it (None: unchecked).
    """

    def __init__(self, source: PartitionArray, partition_offsets: np.ndarray, capacity: int,
                 checksums: list[int] | None = None):
        self.source = source
        self.checksums = checksums
        self.offsets = np.asarray(partition_offsets, dtype=np.int64)
        self.capacity = capacity
        self.max_rows = int(np.diff(self.offsets).max())
        dtype = torch.from_numpy(np.empty(0, dtype=source.dtype)).dtype
        self.slots = torch.empty((capacity, self.max_rows, *source.shape[1:]), dtype=dtype)
        self.slot_partition = np.full(capacity, -1, dtype=np.int64)
        self.node_row = torch.full((int(self.offsets[-1]),), -1, dtype=torch.int64)

    @property
    def rows(self) -> torch.Tensor:
        """All slots as one ``(capacity * max_rows, ...)`` view (indexed by buffer rows)."""
        return self.slots.view(self.capacity * self.max_rows, *self.slots.shape[2:])

    def partition_rows(self, partition: int) -> tuple[int, int]:
        """The global row range ``(start, stop)`` of ``partition``."""
        return int(self.offsets[partition]), int(self.offsets[partition + 1])

    def staging(self, count: int) -> torch.Tensor:
        """A tensor for ``count`` partitions read ahead of their state (same shape as ``count`` slots)."""
        return torch.empty((max(count, 1), *self.slots.shape[1:]), dtype=self.slots.dtype)

    def read(self, partition: int, out: torch.Tensor) -> int:
        """Read ``partition``'s rows from disk into ``out`` (a slot or a staging row block); return bytes."""
        start, stop = self.partition_rows(partition)
        nbytes = self.source.read_rows(start, stop, out)
        if self.checksums is not None:
            data = out[: stop - start].contiguous().numpy().view(np.uint8).reshape(-1)
            if zlib.crc32(data) != self.checksums[partition]:
                raise DataError(f"{self.source.path}: partition {partition} (rows {start}:{stop}) fails its CRC-32 "
                                f"check (corrupted)")
        return nbytes

    def install(self, slot: int, partition: int, staged: torch.Tensor | None = None) -> None:
        """Put ``partition`` into ``slot`` (evicting what was there): copy ``staged`` or read it now."""
        self.evict(slot)
        if partition < 0:
            return
        start, stop = self.partition_rows(partition)
        if staged is not None:
            self.slots[slot, : stop - start].copy_(staged[: stop - start])
        else:
            self.read(partition, self.slots[slot])
        self.slot_partition[slot] = partition
        self.node_row[start:stop] = torch.arange(stop - start) + slot * self.max_rows

    def evict(self, slot: int) -> None:
        """Empty ``slot`` (its partition's nodes map to -1 again)."""
        partition = int(self.slot_partition[slot])
        if partition >= 0:
            start, stop = self.partition_rows(partition)
            self.node_row[start:stop] = -1
            self.slot_partition[slot] = -1

    def resident(self) -> list[int]:
        """The partitions in the buffer, by slot (-1: empty)."""
        return [int(p) for p in self.slot_partition]


__all__ = ["FeatureBuffer", "PartitionArray"]
