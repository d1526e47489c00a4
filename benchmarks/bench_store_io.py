"""Store IO: positional reads of one partition (from the disk and from the page cache) and opening a store.

- :class:`PartitionRead`: a file of :data:`NUM_PARTITIONS` partitions of the largest size in
  :data:`PARTITION_MIB` is written once (``setup_cache``, in asv's working folder, synced to the disk); every
  benchmark reads partition 1 (at a non-zero offset) into a preallocated numpy buffer with
  :func:`suite.io.pread_into`, the disk system's read path. With ``page_cache="evicted"`` ``setup`` (re-run by
  asv before every timed call) drops the partition's pages with ``posix_fadvise(DONTNEED)``
  (:func:`suite.io.evict_page_cache`), so the read comes from the storage device; with ``"warm"`` it reads the
  partition once first, so the timed read is a copy from the page cache. ``track_read_mb_per_s`` reports the
  bandwidth of one such read (MB = 10**6 bytes). On a filesystem without a page cache to evict (tmpfs) both
  give memory bandwidth.
- :class:`StoreOpen`: :meth:`suite.data.GraphStore.open` (parses ``metadata.json``, checks every file's size
  and ``.npy`` header, maps nothing eagerly) and ``verify()`` (re-reads every file and recomputes its checksum)
  on a generated store of :data:`STORE_GRAPH`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from suite.data import GraphStore
from suite.data.synthetic import SyntheticConfig, generate
from suite.io import evict_page_cache, pread_into, pwrite_all

PARTITION_MIB = (1, 8, 32)
"""Partition sizes benchmarked, in MiB."""
NUM_PARTITIONS = 4
PARTITION_FILE = "partitions.bin"
STORE_GRAPH = SyntheticConfig(name="bench-store", num_nodes=100_000, avg_degree=10.0, num_classes=10,
                              feature_dim=64, label_rate=0.5, seed=0)
"""The store of :class:`StoreOpen`: 100k nodes, ~1M stored edges, 64 float32 features (~26 MB)."""


def make_partition_file(folder: str | os.PathLike, partition_bytes: int,
                        num_partitions: int = NUM_PARTITIONS) -> str:
    """Write ``num_partitions`` partitions of ``partition_bytes`` random bytes to ``folder``, synced to disk and
    evicted from the page cache; returns the file's absolute path."""
    path = Path(folder).resolve() / PARTITION_FILE
    rng = np.random.default_rng(0)
    block = rng.integers(0, 256, size=partition_bytes, dtype=np.uint8)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for k in range(num_partitions):
            pwrite_all(fd, block, k * partition_bytes)
        os.fsync(fd)
    finally:
        os.close(fd)
    evict_page_cache(path, sync=True)
    return str(path)


class PartitionRead:
    """Reading one partition with ``pread_into``, ``partition_mib`` x ``page_cache``."""

    params = [list(PARTITION_MIB), ["evicted", "warm"]]
    param_names = ["partition_mib", "page_cache"]
    timeout = 300.0
    number = 1

    def setup_cache(self) -> str:
        """The partition file (largest partitions; smaller ones read a prefix of partition 1's slot)."""
        return make_partition_file(".", max(PARTITION_MIB) << 20)

    def setup(self, path: str, partition_mib: int, page_cache: str) -> None:
        """Open the file, allocate the buffer, and evict (or warm) the partition's pages."""
        self.nbytes = partition_mib << 20
        self.offset = os.path.getsize(path) // NUM_PARTITIONS  # partition 1
        self.buffer = np.empty(self.nbytes, dtype=np.uint8)
        self.fd = os.open(path, os.O_RDONLY)
        if page_cache == "evicted":
            evict_page_cache(self.fd, self.offset, self.nbytes, sync=False)
        else:
            pread_into(self.fd, self.buffer, self.offset)

    def teardown(self, path: str, partition_mib: int, page_cache: str) -> None:
        """Close the file."""
        os.close(self.fd)

    def time_pread_partition(self, path: str, partition_mib: int, page_cache: str) -> None:
        """Read the partition."""
        pread_into(self.fd, self.buffer, self.offset)

    def track_read_mb_per_s(self, path: str, partition_mib: int, page_cache: str) -> float:
        """Bandwidth of one read of the partition, MB/s."""
        started = time.perf_counter()
        pread_into(self.fd, self.buffer, self.offset)
        return self.nbytes / (time.perf_counter() - started) / 1e6

    track_read_mb_per_s.unit = "MB/s"


class StoreOpen:
    """Opening and verifying a generated store."""

    timeout = 300.0

    def setup_cache(self) -> str:
        """Generate :data:`STORE_GRAPH` into asv's working folder (a few seconds)."""
        return str(generate(STORE_GRAPH, Path("store").resolve()).path)

    def time_open(self, path: str) -> None:
        """Open the store (metadata and headers only)."""
        GraphStore.open(path)

    def time_verify(self, path: str) -> None:
        """Re-read every file and check its checksum."""
        GraphStore.open(path).verify()

    def track_store_mb(self, path: str) -> float:
        """Size of the store's files, MB."""
        return sum(f.stat().st_size for f in Path(path).iterdir()) / 1e6

    track_store_mb.unit = "MB"
