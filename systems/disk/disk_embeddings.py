"""Learnable embedding partitions on disk: generations, checksums, asynchronous write-back and atomic commits.

The disk system's link prediction keeps every node's embedding and its Adagrad state on disk, as one ``(n, 2d)``
float32 array per *generation* (row ``v`` = ``[weight_v | state_v]``, rows partition-contiguous in the partitioned
store's node order), so that one positional read brings a partition's embeddings and optimizer state together.

Folder layout (:class:`EmbeddingStore`, one per run, inside the run's folder)::

    manifest.json          the last committed generation E: its files, one CRC-32 per partition, the history
    embeddings.gE.npy      the rows after E completed epochs
    dense.gE.pt            the dense state after E epochs (model, optimizer, step counter, torch RNG state)

Crash consistency. Epoch ``E`` reads generation ``E`` and writes every partition it evicts (and, at its end, every
partition still in the buffer) into a new file, generation ``E + 1``; generation ``E`` is never written. The commit
(:meth:`EmbeddingStore.commit`) waits for the writes, flushes the new file (``fdatasync``), writes the dense state
atomically, then replaces ``manifest.json`` atomically (temporary file, ``fsync``, ``rename``, ``fsync`` of the
folder) and only then deletes generation ``E``. A kill at any moment therefore leaves a manifest naming a complete,
flushed generation whose checksums match: the last committed epoch. Resuming opens it and trains the next epoch
again, reading the same files with the same seeds, so it reaches the metrics of an uninterrupted run.

Integrity. Every partition read is checked against the CRC-32 recorded when it was written (``verify``), and every
file's size against its header: a truncated or corrupted file is a one-line :class:`~suite.errors.DataError` naming
the file and the partition.

Within an epoch a partition evicted earlier (BETA and COMET reload partitions) is read back from the new
generation, after its write finished: the writer thread's future for that partition is awaited first.
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import os
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from suite.errors import DataError, describe_os_error
from suite.io import (IOCounters, atomic_write_bytes, atomic_write_json, check_read, evict_page_cache, flush_to, fsync_dir,
                      open_fd, pwrite_all, sync_file, write_to, writing)
from systems.disk.buffer import PartitionArray

MANIFEST = "manifest.json"
FORMAT = 1


def crc32(rows: torch.Tensor) -> int:
    """CRC-32 of a contiguous CPU tensor's bytes."""
    return zlib.crc32(rows.contiguous().numpy().view(np.uint8).reshape(-1))


def _embedding_file(generation: int) -> str:
    return f"embeddings.g{generation}.npy"


def _dense_file(generation: int) -> str:
    return f"dense.g{generation}.pt"


def _npy_header(num_rows: int, width: int) -> bytes:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (num_rows, width)})
    return header.getvalue()


def create_rows_file(path: Path, num_rows: int, width: int) -> None:
    """Create ``path`` as a ``.npy`` file of ``(num_rows, width)`` float32 (header written, data sparse)."""
    header = _npy_header(num_rows, width)
    with writing(path, "wb") as handle:
        write_to(handle, header, path)
        flush_to(handle, path)
        handle.truncate(len(header) + num_rows * width * 4)


class EmbeddingStore:
    """The generations of a run's embedding partitions (see the module docstring).

    Args:
        folder: where the files live (created).
        partition_offsets: ``(p + 1,)`` row offsets of the partitions.
        width: floats per row (``2 * embedding_dim``: weight and Adagrad state).
        counters: where read and written bytes are counted.
        evict: drop written and read ranges from the page cache (every read hits the disk).
        verify: check every partition read against its checksum.
        max_pending_writes: write-backs queued or in flight at most; :meth:`write_async` waits for one to finish
            before queueing more, so at most this many copies of partitions plus the caller's new one are alive.
            Unbounded, a writer slower than the training (every write is flushed when ``evict``) queued copies
            until the whole table was in memory.
    """

    def __init__(self, folder: Path, partition_offsets: np.ndarray, width: int, counters: IOCounters,
                 evict: bool = True, verify: bool = True, max_pending_writes: int = 1):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.offsets = np.asarray(partition_offsets, dtype=np.int64)
        self.num_partitions = len(self.offsets) - 1
        self.num_rows = int(self.offsets[-1])
        self.width = width
        self.data_offset = len(_npy_header(self.num_rows, width))
        self.counters = counters
        self.evict = evict
        self.verify = verify
        if max_pending_writes < 1:
            raise ValueError(f"max_pending_writes must be >= 1, got {max_pending_writes}")
        self.max_pending_writes = max_pending_writes
        self.generation = -1
        self.checksums: list[int] = []
        self.history: list[dict[str, Any]] = []
        self._current: PartitionArray | None = None
        self._next: PartitionArray | None = None
        self._next_fd = -1
        self._next_checksums: dict[int, int] = {}
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="disk-writeback")

    # ------------------------------------------------------------------ opening
    def open(self, initial_rows: Callable[[int], torch.Tensor]) -> bool:
        """Open the committed generation, or create generation 0 from ``initial_rows(partition)``; return whether
        an earlier run's generation was resumed."""
        manifest = self._read_manifest()
        if manifest is None:
            self._create_initial(initial_rows)
            return False
        self._adopt(manifest)
        return True

    def reset(self, initial_rows: Callable[[int], torch.Tensor]) -> None:
        """Forget every generation and start again from generation 0."""
        if self._current is not None:
            self._current.close()
            self._current = None
        (self.folder / MANIFEST).unlink(missing_ok=True)
        self._create_initial(initial_rows)

    def _read_manifest(self) -> dict[str, Any] | None:
        path = self.folder / MANIFEST
        if not path.exists():
            return None
        try:
            check_read(path)
            manifest = json.loads(path.read_text())
        except OSError as err:  # the cause as every IO error names it: "input/output error (EIO)"
            raise DataError(f"{path}: unreadable manifest: {describe_os_error(err)}") from None
        except ValueError as err:
            raise DataError(f"{path}: unreadable manifest ({err})") from None
        if manifest.get("format") != FORMAT or len(manifest.get("checksums", [])) != self.num_partitions \
                or manifest.get("rows") != self.num_rows or manifest.get("width") != self.width:
            raise DataError(f"{path}: manifest does not describe {self.num_partitions} partitions of "
                            f"{self.num_rows} rows x {self.width} floats (another run's files?)")
        return manifest

    def _create_initial(self, initial_rows: Callable[[int], torch.Tensor]) -> None:
        for stale in self.folder.glob("*.g*.*"):
            stale.unlink()
        path = self.folder / _embedding_file(0)
        create_rows_file(path, self.num_rows, self.width)
        fd = open_fd(path, os.O_RDWR)
        checksums = []
        try:
            for partition in range(self.num_partitions):
                rows = initial_rows(partition).to(torch.float32).contiguous()
                pwrite_all(fd, rows, self._offset(partition), path=path)
                checksums.append(crc32(rows))
            sync_file(fd, path)
        finally:
            os.close(fd)
        self._write_manifest(0, checksums, dense=None, history=[])
        self._adopt(self._read_manifest())

    def _adopt(self, manifest: dict[str, Any]) -> None:
        self.generation = int(manifest["generation"])
        self.checksums = [int(value) for value in manifest["checksums"]]
        self.history = list(manifest.get("history", []))
        self.dense_file = manifest.get("dense")
        keep = {_embedding_file(self.generation), self.dense_file}
        for stale in self.folder.glob("*.g*.*"):  # a generation a killed epoch was writing, or one not yet removed
            if stale.name not in keep:
                stale.unlink()
        self._current = PartitionArray(self.folder / _embedding_file(self.generation), self.counters, self.evict)
        if self._current.shape != (self.num_rows, self.width):
            raise DataError(f"{self._current.path}: shape {self._current.shape}, expected "
                            f"({self.num_rows}, {self.width})")

    def dense_state(self) -> dict[str, Any] | None:
        """The committed dense state (None for generation 0)."""
        if not self.dense_file:
            return None
        path = self.folder / self.dense_file
        try:  # tensors, numbers, strings and containers only: a file cannot run code when it is loaded
            check_read(path)
            return torch.load(path, weights_only=True)
        except OSError as err:
            raise DataError(f"{path}: unreadable dense state ({describe_os_error(err)})") from None
        except Exception as err:  # noqa: BLE001 - any unpickling failure is a corrupted file
            raise DataError(f"{path}: unreadable dense state ({type(err).__name__}: {err})") from None

    # ------------------------------------------------------------------ an epoch
    def begin_epoch(self) -> None:
        """Create the next generation's file; writes of this epoch go there."""
        path = self.folder / _embedding_file(self.generation + 1)
        create_rows_file(path, self.num_rows, self.width)
        self._next_fd = open_fd(path, os.O_RDWR)
        self._next = PartitionArray(path, self.counters, self.evict)
        self._next_checksums = {}
        self._pending = {}

    def read(self, partition: int, out: torch.Tensor) -> int:
        """Read ``partition``'s latest rows into ``out``: from this epoch's generation if it was written back
        already (after that write finished), else from the committed one; checked against its CRC-32."""
        pending = self._pending.get(partition)
        if pending is not None:
            pending.result()
        start, stop = int(self.offsets[partition]), int(self.offsets[partition + 1])
        written = partition in self._next_checksums
        source = self._next if written else self._current
        nbytes = source.read_rows(start, stop, out)
        if self.verify:
            expected = self._next_checksums[partition] if written else self.checksums[partition]
            if crc32(out[: stop - start]) != expected:
                raise DataError(f"{source.path}: partition {partition} (rows {start}:{stop}) fails its CRC-32 "
                                f"check (corrupted)")
        return nbytes

    def write_async(self, partition: int, rows: torch.Tensor) -> None:
        """Write ``partition``'s rows (a tensor nobody else writes any more) into this epoch's generation, in the
        writer thread, once fewer than :attr:`max_pending_writes` write-backs are unfinished."""
        earlier = self._pending.get(partition)
        if earlier is not None:
            earlier.result()
        unfinished = [future for future in self._pending.values() if not future.done()]
        if len(unfinished) >= self.max_pending_writes:
            for future in unfinished[: len(unfinished) - self.max_pending_writes + 1]:
                future.result()  # the writer runs them in order: the oldest ones finish first
        self._pending[partition] = self._writer.submit(self._write, partition, rows)

    def _write(self, partition: int, rows: torch.Tensor) -> None:
        rows = rows.contiguous()
        offset = self._offset(partition)
        started = time.perf_counter()
        nbytes = pwrite_all(self._next_fd, rows, offset, path=self._next.path)
        if self.evict:  # flush, then drop: a later read of this partition must come from the disk
            evict_page_cache(self._next_fd, offset, nbytes, sync=True)
        self.counters.add_write(nbytes, time.perf_counter() - started)
        self._next_checksums[partition] = crc32(rows)

    def wait_writes(self) -> float:
        """Wait for every write-back of the epoch; return the seconds waited."""
        started = time.perf_counter()
        for future in self._pending.values():
            future.result()
        return time.perf_counter() - started

    def finish_epoch(self) -> None:
        """Complete this epoch's generation: copy partitions the epoch never wrote, wait for the writes, flush."""
        for partition in range(self.num_partitions):
            if partition not in self._next_checksums and partition not in self._pending:
                start, stop = int(self.offsets[partition]), int(self.offsets[partition + 1])
                rows = torch.empty((stop - start, self.width))  # handed to the writer: no staging copy
                self.read(partition, rows)
                self.write_async(partition, rows)
        self.wait_writes()
        sync_file(self._next_fd, self._next.path)

    def commit(self, dense: dict[str, Any], record: dict[str, Any]) -> None:
        """Make the finished epoch's generation the committed one (dense state, then the manifest, atomically),
        appending ``record`` to the history; then delete the previous generation."""
        generation = self.generation + 1
        buffer = io.BytesIO()
        torch.save(dense, buffer)
        atomic_write_bytes(self.folder / _dense_file(generation), buffer.getvalue())
        checksums = [self._next_checksums[p] for p in range(self.num_partitions)]
        self._write_manifest(generation, checksums, _dense_file(generation), self.history + [record])
        self._close_next()
        self._next_checksums, self._pending = {}, {}
        self._current.close()
        self._adopt(self._read_manifest())

    def _write_manifest(self, generation: int, checksums: list[int], dense: str | None,
                        history: list[dict[str, Any]]) -> None:
        atomic_write_json(self.folder / MANIFEST, {
            "format": FORMAT, "generation": generation, "embeddings": _embedding_file(generation), "dense": dense,
            "rows": self.num_rows, "width": self.width, "partition_offsets": self.offsets.tolist(),
            "checksums": checksums, "history": history})
        fsync_dir(self.folder)

    # ------------------------------------------------------------------ whole table
    def load_all(self) -> torch.Tensor:
        """The committed generation's ``(n, width)`` rows in memory (checked partition by partition)."""
        out = torch.empty((self.num_rows, self.width))
        for partition in range(self.num_partitions):
            start, stop = int(self.offsets[partition]), int(self.offsets[partition + 1])
            self.read(partition, out[start:stop])
        return out

    def _offset(self, partition: int) -> int:
        return self.data_offset + int(self.offsets[partition]) * self.width * 4

    def _close_next(self) -> None:
        if self._next_fd >= 0:
            os.close(self._next_fd)
            self._next_fd = -1
        if self._next is not None:
            self._next.close()
            self._next = None

    def close(self) -> None:
        """Wait for the writer, close the files (an epoch not committed stays uncommitted)."""
        self._writer.shutdown(wait=True)
        self._close_next()
        if self._current is not None:
            self._current.close()


__all__ = ["EmbeddingStore", "crc32", "create_rows_file"]
