"""The partition buffer: preallocated frames in memory, filled with whole partitions by positional reads.

A partitioned store (:mod:`suite.data.partition`) keeps every node array partition-contiguous: partition ``i``
is rows ``partition_offsets[i]:partition_offsets[i+1]``. :class:`PartitionArray` reads such a row range of a
``.npy`` file with one large positional read straight into buffer slots (a run of adjacent partitions with one
scatter read into their frames, :meth:`FeatureBuffer.read_run` and :func:`suite.io.preadv_into`, looping on short
reads), then drops the range from the page cache (``evict=True``) so that the next read of it comes from the
disk again, and counts the bytes (:class:`suite.io.IOCounters`). Kernel read-ahead is off for these files
(``POSIX_FADV_RANDOM``): it would cache the pages after each read, and the next partition would not come from
the disk.

:class:`FeatureBuffer` holds frames of ``max_rows`` rows each (the ``capacity`` partitions of a state, plus room to
read the next state's partitions ahead) and the map from a global node id to its buffer row
(``frame * max_rows + row``, or -1 when its partition is not resident).

:class:`RowsOnDemand` reads arbitrary rows of such a file instead (a full-graph evaluation's feature rows, batch by
batch): in file order, as extents that read short gaps through (:func:`row_extents`), or through a memory map
without read-around when the rows are scattered thinly.
"""

from __future__ import annotations

import concurrent.futures
import io
import mmap
import os
import time
import zlib
from pathlib import Path

import numpy as np
import torch

from suite.errors import DataError
from suite.io import IOCounters, evict_page_cache, preadv_into

_PAGE = os.sysconf("SC_PAGE_SIZE")

ROW_SET_GAP_BYTES = 256 << 10
"""A gap between wanted rows of at most this many bytes is read through (one extent) rather than split: a read
costs more than the bytes it would skip (the default of the disk system's ``coalesce_bytes``)."""
ROW_SET_EXTENT_BYTES = 32 << 20
"""The longest single read of a row set (an extent's buffer)."""
ROW_SET_MAX_EXTENTS = 4096
"""A row set of more extents than this (rows scattered thinly over the file) is read through a memory map instead
of one positional read, and one Python call, per extent."""


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
        return self.read_rows_into(start, [out[:stop - start]])

    def read_rows_into(self, start: int, targets: list[torch.Tensor]) -> int:
        """Read the rows from ``start`` on into ``targets`` in turn (each contiguous, filled whole), with one
        scatter read (:func:`suite.io.preadv_into`); return bytes."""
        offset = self.data_offset + start * self.row_bytes
        started = time.perf_counter()
        nbytes = preadv_into(self._fd, targets, offset, path=self.path)
        seconds = time.perf_counter() - started
        if self.evict:  # whole pages: the kernel keeps a page that the range covers only in part
            first = offset - offset % _PAGE
            evict_page_cache(self._fd, first, offset + nbytes - first + _PAGE - 1, sync=False)
        self.counters.add_read(nbytes, seconds)
        return nbytes

    def read_row_set(self, rows: np.ndarray) -> tuple[torch.Tensor, int]:
        """The rows ``rows`` (distinct, any order) as one ``(len(rows), ...)`` tensor, and the bytes read for them.

        The rows are read in file order as extents (:func:`row_extents`: runs of wanted rows, a gap of at most
        :data:`ROW_SET_GAP_BYTES` read through, at most :data:`ROW_SET_EXTENT_BYTES` a read), each with one
        positional read and dropped from the page cache afterwards when ``evict``; the bytes counted are the
        extents' (the gaps included). A set that makes more than :data:`ROW_SET_MAX_EXTENTS` extents (rows
        scattered thinly over the file) is read through a memory map without read-around instead: the kernel reads
        the pages that hold them, the bytes counted are the rows'."""
        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        starts, stops = row_extents(ordered, self.row_bytes, ROW_SET_GAP_BYTES, ROW_SET_EXTENT_BYTES)
        if len(starts) > ROW_SET_MAX_EXTENTS:
            return self._read_row_set_mapped(rows)
        out = torch.empty((len(rows), *self.shape[1:]), dtype=torch.from_numpy(np.empty(0, self.dtype)).dtype)
        if len(rows) == 0:
            return out, 0
        first_wanted = np.searchsorted(ordered, starts)
        last_wanted = np.searchsorted(ordered, stops)
        largest = int((stops - starts).max())
        extent = torch.empty((largest, *self.shape[1:]), dtype=out.dtype)
        nbytes = 0
        for start, stop, a, b in zip(starts.tolist(), stops.tolist(), first_wanted.tolist(), last_wanted.tolist()):
            nbytes += self.read_rows(start, stop, extent)
            out[torch.from_numpy(order[a:b])] = extent[torch.from_numpy(ordered[a:b] - start)]
        return out, nbytes

    def _read_row_set_mapped(self, rows: np.ndarray) -> tuple[torch.Tensor, int]:
        """:meth:`read_row_set` through a memory map of the file with ``MADV_RANDOM`` (the kernel reads the pages
        holding the rows, no read-around), then dropped from the page cache when ``evict``."""
        started = time.perf_counter()
        elements = self.shape[0] * (self.row_bytes // self.dtype.itemsize)
        if len(rows) == 0 or elements == 0:
            out = np.empty((len(rows), *self.shape[1:]), dtype=self.dtype)
        else:
            with mmap.mmap(self._fd, self.data_offset + self.shape[0] * self.row_bytes,
                           prot=mmap.PROT_READ) as mapped:
                mapped.madvise(mmap.MADV_RANDOM)
                table = np.frombuffer(mapped, dtype=self.dtype, count=elements,
                                      offset=self.data_offset).reshape(self.shape)
                out = table[rows]  # a copy: the map can close
                del table
        nbytes = len(rows) * self.row_bytes
        if self.evict:
            evict_page_cache(self._fd, self.data_offset, 0, sync=False)
        self.counters.add_read(nbytes, time.perf_counter() - started)
        return torch.from_numpy(out), nbytes

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class FeatureBuffer:
    """``frames`` partition-sized frames of node rows (features) and the global-id -> buffer-row map.

    A buffer state holds at most ``capacity`` partitions; the frames beyond that are where the next state's
    partitions are read while the current state computes (prefetch), so entering a state copies nothing: a read
    partition's frame simply becomes resident. Buffer row ``frame * max_rows + r`` holds row ``r`` of the frame's
    partition.

    Args:
        source: the partition-contiguous rows on disk.
        partition_offsets: ``(p + 1,)`` row offsets of the partitions.
        capacity: partitions a state holds.
        frames: frames (at least ``capacity``; default ``capacity``: no room to read ahead).
        checksums: the CRC-32 of every partition's rows; each read is checked against it (None: unchecked).
    """

    def __init__(self, source: PartitionArray, partition_offsets: np.ndarray, capacity: int,
                 frames: int | None = None, checksums: list[int] | None = None):
        self.source = source
        self.checksums = checksums
        self.offsets = np.asarray(partition_offsets, dtype=np.int64)
        self.capacity = capacity
        self.num_frames = max(capacity, frames or capacity)
        self.max_rows = int(np.diff(self.offsets).max())
        dtype = torch.from_numpy(np.empty(0, dtype=source.dtype)).dtype
        self.frames = torch.empty((self.num_frames, self.max_rows, *source.shape[1:]), dtype=dtype)
        self._frames_np = self.frames.numpy()  # the same memory: reads plan their targets without torch indexing
        self.frame_partition = np.full(self.num_frames, -1, dtype=np.int64)
        self.node_row = torch.full((int(self.offsets[-1]),), -1, dtype=torch.int64)

    @property
    def rows(self) -> torch.Tensor:
        """All frames as one ``(frames * max_rows, ...)`` view (indexed by buffer rows)."""
        return self.frames.view(self.num_frames * self.max_rows, *self.frames.shape[2:])

    def partition_rows(self, partition: int) -> tuple[int, int]:
        """The global row range ``(start, stop)`` of ``partition``."""
        return int(self.offsets[partition]), int(self.offsets[partition + 1])

    def read(self, partition: int, out: torch.Tensor) -> int:
        """Read ``partition``'s rows from disk into ``out`` (a frame); return bytes."""
        start, stop = self.partition_rows(partition)
        nbytes = self.source.read_rows(start, stop, out)
        if self.checksums is not None:
            self._check(partition, out[: stop - start])
        return nbytes

    def read_run(self, partitions: list[int], frames: list[int]) -> int:
        """Read the consecutive partitions ``partitions`` (ascending, adjacent on disk) into ``frames`` (one each)
        with one scatter read, each checked against its CRC-32; return bytes."""
        starts = self.offsets[partitions]
        sizes = (self.offsets[np.asarray(partitions) + 1] - starts).tolist()
        return self._read_planned(list(partitions), list(frames), int(starts[0]),
                                  [self._frames_np[frame, :size] for frame, size in zip(frames, sizes)])

    def _read_planned(self, partitions: list[int], frames: list[int], start: int, targets: list[np.ndarray]) -> int:
        """Read a run whose rows start at row ``start`` into ``targets`` (the frames' leading rows)."""
        nbytes = self.source.read_rows_into(start, targets)
        if self.checksums is not None:
            for partition, target in zip(partitions, targets):
                self._check(partition, target)
        return nbytes

    parallel_reads = True
    """Whether runs may be read concurrently (:meth:`read_partitions` with a pool)."""

    def read_partitions(self, partitions: np.ndarray, frames: np.ndarray,
                        pool: concurrent.futures.Executor | None = None) -> list[tuple[int, int, float, float, int]]:
        """Read ``partitions`` (ascending) into ``frames``: one scatter read per run of adjacent partitions
        (:func:`partition_runs`), the runs spread over ``pool``'s threads when given (a virtual or flash disk
        serves concurrent requests in parallel: at fine granularity a state is hundreds of small runs); returns
        ``(first partition, partitions, start, end, bytes)`` per run (``perf_counter`` times). Every run's targets
        are planned here, before the threads start: a thread only reads (and checks), so the threads do not queue
        for the interpreter between their reads."""
        partitions = np.asarray(partitions, dtype=np.int64)
        starts = self.offsets[partitions]
        sizes = (self.offsets[partitions + 1] - starts).tolist()
        frames = np.asarray(frames).tolist()
        targets = [self._frames_np[frame, :size] for frame, size in zip(frames, sizes)]
        parts, starts = partitions.tolist(), starts.tolist()
        jobs = [(parts[run], frames[run], starts[run.start], targets[run]) for run in partition_runs(partitions)]

        def read(job: tuple[list[int], list[int], int, list[np.ndarray]]) -> tuple[int, int, float, float, int]:
            run_partitions = job[0]
            started = time.perf_counter()
            nbytes = self._read_planned(*job)
            return run_partitions[0], len(run_partitions), started, time.perf_counter(), nbytes

        if pool is None or len(jobs) < 2 or not self.parallel_reads:
            return [read(job) for job in jobs]
        return list(pool.map(read, jobs))

    def _check(self, partition: int, rows: torch.Tensor | np.ndarray) -> None:
        rows = rows.contiguous().numpy() if isinstance(rows, torch.Tensor) else np.ascontiguousarray(rows)
        if zlib.crc32(rows.view(np.uint8).reshape(-1)) != self.checksums[partition]:
            start, stop = self.partition_rows(partition)
            raise DataError(f"{self.source.path}: partition {partition} (rows {start}:{stop}) fails its CRC-32 "
                            f"check (corrupted)")

    def install(self, frame: int, partition: int, read: bool = True) -> None:
        """Make ``partition`` resident in ``frame`` (evicting what was there): read it now, or (``read=False``)
        it was read into the frame ahead."""
        self.evict(frame)
        if partition < 0:
            return
        start, stop = self.partition_rows(partition)
        if read:
            self.read(partition, self.frames[frame])
        self.frame_partition[frame] = partition
        self.node_row[start:stop] = torch.arange(stop - start) + frame * self.max_rows

    def evict(self, frame: int) -> None:
        """Empty ``frame`` (its partition's nodes map to -1 again)."""
        partition = int(self.frame_partition[frame])
        if partition >= 0:
            start, stop = self.partition_rows(partition)
            self.node_row[start:stop] = -1
            self.frame_partition[frame] = -1

    def resident(self) -> list[int]:
        """The partition in each frame (-1: empty)."""
        return [int(p) for p in self.frame_partition]

    def resident_rows(self) -> torch.Tensor:
        """The buffer rows that hold a node (padding rows of shorter partitions and empty frames excluded)."""
        parts = [torch.arange(stop - start) + frame * self.max_rows
                 for frame, partition in enumerate(self.frame_partition.tolist()) if partition >= 0
                 for start, stop in [self.partition_rows(partition)]]
        return torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64)


class RowsOnDemand:
    """Rows of a :class:`PartitionArray` read on demand (a
    :class:`~systems.tasks.node_classification.RowSource`): each ``index_select`` reads the distinct rows it asks
    for, once each, and counts its reads (``bytes_read``, ``read_s``, ``reads``) apart from the buffer's."""

    def __init__(self, source: PartitionArray):
        self.source = source
        self.shape = source.shape
        self.bytes_read = 0
        self.read_s = 0.0
        self.reads = 0

    def index_select(self, dim: int, index: torch.Tensor) -> torch.Tensor:
        """The rows ``index`` (``dim`` must be 0), in its order."""
        if dim != 0:
            raise ValueError("RowsOnDemand reads rows (dim 0) only")
        distinct, position = torch.unique(index, return_inverse=True)
        started = time.perf_counter()
        rows, nbytes = self.source.read_row_set(distinct.numpy())
        self.read_s += time.perf_counter() - started
        self.bytes_read += nbytes
        self.reads += 1
        return rows[position]


def partition_runs(partitions: np.ndarray) -> list[slice]:
    """The slices of ``partitions`` (ascending) that are runs of consecutive ids: adjacent on disk, read as one
    extent. E.g. ``[2, 3, 4, 7, 9, 10]`` -> ``[0:3, 3:4, 4:6]``."""
    partitions = np.asarray(partitions)
    breaks = (np.flatnonzero(np.diff(partitions) != 1) + 1).tolist()
    bounds = [0, *breaks, len(partitions)] if len(partitions) else [0]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def coalesced_extents(starts: np.ndarray, stops: np.ndarray, gap: int) -> tuple[np.ndarray, np.ndarray]:
    """``(extent_starts, extent_stops)``: the ranges ``[starts[t], stops[t])`` (ascending, disjoint) merged where
    they touch or the gap between them is at most ``gap``."""
    if not len(starts):
        return starts, stops
    breaks = np.flatnonzero(starts[1:] - stops[:-1] > gap) + 1
    first = np.concatenate([[0], breaks])
    last = np.concatenate([breaks - 1, [len(starts) - 1]])
    return starts[first], stops[last]


def row_extents(rows: np.ndarray, row_bytes: int, gap_bytes: int, extent_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, stops)``: the row ranges, in file order, that cover ``rows`` (ascending, distinct) when a gap of
    at most ``gap_bytes`` between two wanted rows is read through (:func:`coalesced_extents`) and no range exceeds
    ``extent_bytes`` (nor one row). E.g. rows ``[0, 1, 5, 40]`` of 1 KiB rows with 8 KiB gaps read through ->
    ``[0, 40]``, ``[6, 41]``."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    max_rows = max(1, extent_bytes // max(1, row_bytes))
    merged_starts, _ = coalesced_extents(rows, rows + 1, gap_bytes // max(1, row_bytes))
    # within a merged range, split wherever a read would outgrow max_rows
    run_start = merged_starts[np.searchsorted(merged_starts, rows, side="right") - 1]
    key = np.stack([run_start, (rows - run_start) // max_rows])
    first = np.flatnonzero(np.concatenate([[True], (key[:, 1:] != key[:, :-1]).any(axis=0)]))
    last = np.concatenate([first[1:], [len(rows)]]) - 1
    return rows[first], rows[last] + 1


__all__ = ["FeatureBuffer", "PartitionArray", "ROW_SET_EXTENT_BYTES", "ROW_SET_GAP_BYTES", "ROW_SET_MAX_EXTENTS",
           "RowsOnDemand", "coalesced_extents", "partition_runs", "row_extents"]
