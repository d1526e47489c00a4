"""Feature rows read from a ``.npy`` table on disk, bypassing the page cache: sorted rows merged into extents,
read with ``O_DIRECT`` into an aligned buffer by a pool of threads.

Per call (:meth:`ExtentReader.read_rows`) the distinct rows asked for, ascending, become *extents*: each row's byte
range widened to whole 4 KiB blocks, and rows whose blocks touch or lie within ``merge_gap_bytes`` of each other
read as one. Extents longer than a thread's share are cut into pieces (the plan, and what is counted, stays one
extent); the pieces are shared out among ``io_threads`` threads by bytes, each thread running a compiled (numba,
``nogil``) loop of ``pread(2)`` calls into its part of one page-aligned buffer, so the reads run in parallel and the
interpreter is free meanwhile (one piece: no thread hand-off, the caller reads it).

Rows that are one run of consecutive rows (one extent) are returned as a view of the read buffer itself, at the first
row's offset: no copy. Otherwise one compiled pass copies each row out of the buffer, straight into its place in the
caller's array where one is given (:meth:`ExtentReader.read_rows` ``out``/``targets``: the cache's batch array).

``O_DIRECT`` where the file system allows it (:func:`suite.io.direct_io_supported`); elsewhere (tmpfs) buffered
reads whose pages are dropped after every call (``POSIX_FADV_DONTNEED``), and :attr:`ExtentReader.note` says so.
No Python binding of io_uring is used: the threads issue plain ``pread`` calls (the ``liburing`` wheel's binding
issues one Python call per request, a per-extent Python loop on the hot path).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import mmap
import threading
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from suite.errors import DataError
from suite.io import DIRECT_ALIGNMENT, IOCounters, direct_io_supported, evict_page_cache

_libc = ctypes.CDLL(None, use_errno=True)
_pread = _libc.pread
_pread.restype = ctypes.c_ssize_t
_pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64]


@numba.njit(nogil=True)
def _read_extents(fd, base, file_offsets, lengths, needed, buffer_offsets, first, stop):
    """``pread`` extents ``first:stop`` into the buffer at ``base``; -1 when all are read, else the failing one."""
    for i in range(first, stop):
        got = 0
        while got < needed[i]:
            n = _pread(fd, base + buffer_offsets[i] + got, lengths[i] - got, file_offsets[i] + got)
            if n <= 0:
                return i
            got += n
    return -1


@numba.njit(nogil=True, cache=True)
def copy_rows(buffer, positions, row_bytes, out, targets):
    """Row ``i`` of the buffer (at byte ``positions[i]``) into row ``targets[i]`` of ``out`` (``(n, row_bytes)``)."""
    for i in range(len(positions)):
        start = positions[i]
        out[targets[i], :] = buffer[start:start + row_bytes]


@dataclass(frozen=True)
class Extents:
    """The block-aligned reads that cover a set of rows.

    Attributes:
        file_offsets / lengths: each extent's first byte in the file and its length (multiples of the alignment).
        needed: bytes of each extent that lie inside the file (the last extent may run past its end).
        buffer_offsets: where each extent goes in the read buffer (its lengths' exclusive prefix sum).
        row_positions: where each row's bytes start in the read buffer.
    """

    file_offsets: np.ndarray
    lengths: np.ndarray
    needed: np.ndarray
    buffer_offsets: np.ndarray
    row_positions: np.ndarray

    @property
    def total_bytes(self) -> int:
        """Bytes the extents read."""
        return int(self.lengths.sum())


def plan_extents(rows: np.ndarray, data_offset: int, row_bytes: int, file_size: int, merge_gap_bytes: int = 0,
                 alignment: int = DIRECT_ALIGNMENT) -> Extents:
    """The aligned extents that read ``rows`` (distinct, ascending) of a table whose row ``r`` is at byte
    ``data_offset + r * row_bytes``: each row's range widened to whole blocks, neighbours whose blocks touch or are at
    most ``merge_gap_bytes`` apart merged into one extent."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = data_offset + rows * row_bytes
    block_starts = starts // alignment * alignment
    block_ends = -(-(starts + row_bytes) // alignment) * alignment
    if len(rows) == 0:
        empty = np.empty(0, dtype=np.int64)
        return Extents(empty, empty, empty, empty, empty)
    opens = np.concatenate([[True], block_starts[1:] > block_ends[:-1] + merge_gap_bytes])
    firsts = np.flatnonzero(opens)
    lasts = np.concatenate([firsts[1:] - 1, [len(rows) - 1]])
    file_offsets = block_starts[firsts]
    lengths = block_ends[lasts] - file_offsets
    needed = np.minimum(lengths, file_size - file_offsets)
    buffer_offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    extent_of_row = np.cumsum(opens) - 1
    positions = buffer_offsets[extent_of_row] + starts - file_offsets[extent_of_row]
    return Extents(file_offsets, lengths, needed, buffer_offsets, positions)


@dataclass
class ReadStats:
    """What the reads of a period did: rows, extents, bytes read from the file, seconds spent reading."""

    rows: int = 0
    extents: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def add(self, rows: int, extents: int, nbytes: int, seconds: float) -> None:
        self.rows += rows
        self.extents += extents
        self.bytes += nbytes
        self.seconds += seconds

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        return {f"{prefix}rows_read": self.rows, f"{prefix}extents": self.extents,
                f"{prefix}io_read_bytes": self.bytes, f"{prefix}io_read_s": self.seconds}


DEFAULT_IO_THREADS = 16
"""Threads issuing one call's reads (measured: random 4 KiB extents gain up to 16 requests in flight; see
docs/feature_cache.md)."""

DEFAULT_MERGE_GAP_BYTES = 16 * 1024
"""Gap up to which neighbouring extents merge: reading a 16 KiB gap costs less than one more request here (random
batches of 50,000 rows of papers-like-s deliver rows 1.4x faster than with no merging, 1.2x faster than with 32 KiB,
for 1.8x the bytes; see docs/feature_cache.md)."""

KEPT_SCRATCH_BYTES = 64 * 1024 * 1024
"""The read buffer a reader keeps between calls at most (a bigger call, such as the fill of pinned rows, reads into
a buffer of its own, freed after it)."""

MIN_PIECE_BYTES = 256 * 1024
"""An extent is cut into pieces for the threads no smaller than this."""


def aligned_buffer(nbytes: int, alignment: int = DIRECT_ALIGNMENT) -> np.ndarray:
    """A fresh ``uint8`` array of ``nbytes`` whose first byte is ``alignment``-aligned (what ``O_DIRECT`` needs)."""
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    shift = (-raw.ctypes.data) % alignment
    return raw[shift:shift + nbytes]


def cut_pieces(extents: Extents, threads: int, min_piece: int = MIN_PIECE_BYTES,
               alignment: int = DIRECT_ALIGNMENT) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The extents cut into aligned pieces of at most about one thread's share (``total / threads``, at least
    ``min_piece``): ``(file_offsets, lengths, needed, buffer_offsets)`` of the pieces, in order."""
    share = max(min_piece, -(-extents.total_bytes // max(threads, 1)))
    share = -(-share // alignment) * alignment
    counts = -(-extents.lengths // share)
    if counts.max(initial=1) <= 1:
        return extents.file_offsets, extents.lengths, extents.needed, extents.buffer_offsets
    owner = np.repeat(np.arange(len(counts)), counts)
    within = np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)
    skip = within * share
    lengths = np.minimum(share, extents.lengths[owner] - skip)
    needed = np.clip(extents.needed[owner] - skip, 0, lengths)
    return extents.file_offsets[owner] + skip, lengths, needed, extents.buffer_offsets[owner] + skip


class ExtentReader:
    """Rows of a C-ordered ``.npy`` table read by extents, bypassing the page cache (see the module docstring).

    Args:
        path: the ``.npy`` file.
        counters: where every read's bytes are counted (the run's totals).
        direct: use ``O_DIRECT`` where the file system allows it.
        io_threads: threads issuing the reads of one call.
        merge_gap_bytes: rows whose blocks are at most this far apart are read as one extent (the gap is read too).
    """

    def __init__(self, path: str | os.PathLike, counters: IOCounters, direct: bool = True,
                 io_threads: int = DEFAULT_IO_THREADS, merge_gap_bytes: int = DEFAULT_MERGE_GAP_BYTES):
        self.path = Path(path)
        self.shape, self.dtype, self.data_offset = _npy_layout(self.path)
        self.row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        self.file_size = self.path.stat().st_size
        self.counters = counters
        self.io_threads = io_threads
        self.merge_gap_bytes = merge_gap_bytes
        self.direct = direct and direct_io_supported(self.path)
        if direct and not self.direct:
            self.note = (f"O_DIRECT refused for {self.path} (file system does not support it): buffered reads, "
                         f"the file's pages dropped from the page cache after every read")
        else:
            self.note = "O_DIRECT" if self.direct else "buffered reads (direct_io off)"
        self._fd = os.open(self.path, os.O_RDONLY | (os.O_DIRECT if self.direct else 0))
        if not self.direct:
            os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_RANDOM)
        evict_page_cache(self.path, 0, 0, sync=False)  # the header just read, and whatever an earlier reader left
        self._scratch = aligned_buffer(0)
        self._lock = threading.Lock()  # one call at a time owns the scratch buffer
        self._pool = concurrent.futures.ThreadPoolExecutor(io_threads, thread_name_prefix="feature-io")
        self.stats = ReadStats()

    def _scratch_of(self, nbytes: int) -> np.ndarray:
        """The reused aligned read buffer, grown to at least ``nbytes`` (a fresh one beyond
        :data:`KEPT_SCRATCH_BYTES`)."""
        if nbytes > KEPT_SCRATCH_BYTES:
            return aligned_buffer(nbytes)
        if len(self._scratch) < nbytes:
            self._scratch = aligned_buffer(-(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE)
        return self._scratch

    def plan(self, rows: np.ndarray) -> Extents:
        """The extents this reader reads for ``rows`` (distinct, ascending)."""
        return plan_extents(rows, self.data_offset, self.row_bytes, self.file_size, self.merge_gap_bytes)

    def read_rows(self, rows: np.ndarray, out: np.ndarray | None = None,
                  targets: np.ndarray | None = None) -> np.ndarray:
        """The rows ``rows`` (distinct, ascending) of the table.

        Without ``out``: a new ``(len(rows), ...)`` array of the table's dtype (a view of the read buffer when the
        rows are consecutive). With ``out`` (an array of the table's dtype and row shape): row ``rows[i]`` is
        written into ``out[targets[i]]`` (``targets`` default ``0..len-1``) and ``out`` is returned.
        """
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) == 0:
            return np.empty((0, *self.shape[1:]), dtype=self.dtype) if out is None else out
        started = time.perf_counter()
        extents = self.plan(rows)
        consecutive = out is None and len(extents.lengths) == 1 and int(rows[-1] - rows[0]) == len(rows) - 1
        with self._lock:
            buffer = aligned_buffer(extents.total_bytes) if consecutive else self._scratch_of(extents.total_bytes)
            self._read(extents, buffer)
            if consecutive:
                first = int(extents.row_positions[0])
                result = buffer[first:first + len(rows) * self.row_bytes].view(self.dtype)
                result = result.reshape(len(rows), *self.shape[1:])
            else:
                result = np.empty((len(rows), *self.shape[1:]), dtype=self.dtype) if out is None else out
                where = np.arange(len(rows)) if targets is None else np.asarray(targets, dtype=np.int64)
                flat = result.reshape(len(result), -1).view(np.uint8)
                copy_rows(buffer, extents.row_positions, self.row_bytes, flat, where)
        if not self.direct:
            evict_page_cache(self._fd, 0, 0, sync=False)
        seconds = time.perf_counter() - started
        nbytes = int(extents.needed.sum())
        self.counters.add_read(nbytes, seconds)
        self.stats.add(len(rows), len(extents.lengths), nbytes, seconds)
        return result

    def _read(self, extents: Extents, buffer: np.ndarray) -> None:
        """Read the extents into ``buffer``: cut into pieces, shared out among the threads by bytes."""
        offsets, lengths, needed, buffer_offsets = cut_pieces(extents, self.io_threads)
        bounds = _share(lengths, self.io_threads)
        base = buffer.ctypes.data
        if len(bounds) <= 2:  # one part: read it here
            failures = [_read_extents(self._fd, base, offsets, lengths, needed, buffer_offsets, 0, len(lengths))]
        else:
            jobs = [self._pool.submit(_read_extents, self._fd, base, offsets, lengths, needed, buffer_offsets,
                                      first, stop)
                    for first, stop in zip(bounds[:-1], bounds[1:]) if stop > first]
            failures = [job.result() for job in jobs]
        failures = [failed for failed in failures if failed >= 0]
        if failures:
            self._raise_read_error(int(offsets[failures[0]]), int(lengths[failures[0]]),
                                   int(needed[failures[0]]))

    def take_stats(self) -> ReadStats:
        """The reads since the last call (and start a new period)."""
        stats, self.stats = self.stats, ReadStats()
        return stats

    def _raise_read_error(self, offset: int, length: int, needed: int) -> None:
        probe = mmap.mmap(-1, length)
        try:
            got = os.preadv(self._fd, [probe], offset)
        except OSError as err:
            raise DataError(f"{self.path}: read of {length} bytes at byte {offset} failed ({err.strerror})") from None
        finally:
            probe.close()
        raise DataError(f"{self.path}: file ends at byte {offset + got}, expected {needed} bytes "
                        f"from offset {offset} (short file)")

    def close(self) -> None:
        """Stop the threads, close the file (idempotent)."""
        self._pool.shutdown(wait=True)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _npy_layout(path: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """``(shape, dtype, data_offset)`` of a C-ordered ``.npy`` file, from its header."""
    try:
        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(handle)
            offset = handle.tell()
    except (OSError, ValueError) as err:
        raise DataError(f"{path}: cannot read ({' '.join(str(err).split())[:200]})") from None
    if fortran or len(shape) < 1:
        raise DataError(f"{path}: expected a C-ordered array with rows")
    return tuple(shape), np.dtype(dtype), int(offset)


def _share(lengths: np.ndarray, parts: int) -> np.ndarray:
    """Bounds ``[0, ..., len]`` that cut the extents into ``parts`` runs of about equal bytes."""
    if len(lengths) == 0:
        return np.zeros(1, dtype=np.int64)
    cumulative = np.cumsum(lengths)
    cuts = np.searchsorted(cumulative, cumulative[-1] * np.arange(1, parts) / parts, side="left") + 1
    return np.unique(np.concatenate([[0], np.minimum(cuts, len(lengths)), [len(lengths)]]))


__all__ = ["DEFAULT_IO_THREADS", "DEFAULT_MERGE_GAP_BYTES", "ExtentReader", "Extents", "ReadStats", "aligned_buffer",
           "copy_rows",
           "cut_pieces", "plan_extents"]
