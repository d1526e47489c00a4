"""The in-buffer graph: edge buckets held while both their partitions are resident, and their CSR over buffer rows.

A partitioned store keeps its non-empty buckets in (source partition, destination partition) order, each sorted
by destination (:mod:`suite.data.partition`, layout version 4), and indexes them sparsely (a CSR over source
partitions), so nothing here is of size ``p * p`` and nothing loops in Python per bucket: a state's buckets are
found, read, checked and assembled with array operations whatever ``p`` is (MariusGNN's 8,192 partitions included).

*Holding* (:meth:`BufferedGraph.hold`). The buckets between the resident partitions that are not held yet are
read with one positional read per *extent*: a run of such buckets adjacent on disk, runs closer than
:data:`COALESCE_BYTES` merged (the rows between them are read and dropped: at fine granularity a bucket is a few
rows, and a read per bucket would cost more than its bytes). Buckets whose partitions left are dropped. The held
rows stay concatenated in file order.

*Assembling* (:func:`state_csr`). The CSR of a buffer state over its buffer rows (row ``frame * max_rows + local``)
is a stable counting sort of the held edges by row: for direction ``in`` a row is a destination and its neighbours
are the sources, in file order, i.e. by (source partition, source, relation); for ``out`` by (destination
partition, destination, relation); ``both`` lists a row's in-neighbours first. So a node's neighbour list does not
depend on which frames the partitions occupy, and nothing is sorted at a swap beyond one pass over the in-buffer
edges (``experiments``' and asv's ``edges/s``).

Relation types. For an encoder that reads them (R-GCN), the assembled graph has ``relations`` aligned with its
``indices``: ``r`` for an in-neighbour, ``r + R`` for an out-neighbour (the reverse edge, R-GCN's inverse relation, as
:class:`systems.models.rgcn.RelationLookup` numbers them).

The kernels are compiled with numba (``nogil``): the prefetch thread that builds the next state's CSR never holds
the interpreter, and runs on one core (no thread pool of its own to compete with compute's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba
import numpy as np
import torch

from suite.data import GraphStore
from suite.data.partition import PartitionLayout, check_bucket_crcs
from suite.io import IOCounters
from systems.disk.buffer import PartitionArray, coalesced_extents
from systems.sampling.sampler import SamplingGraph

_jit = numba.njit(cache=True, nogil=True)
COALESCE_BYTES = 256 << 10
"""Bucket extents closer than this on disk are read as one (the gap's rows are read and dropped)."""


@_jit
def _counting_order(keys: np.ndarray, rows: int) -> np.ndarray:
    """A stable order of ``keys`` by value (a counting sort; ``keys`` lie in ``[0, rows)``)."""
    starts = np.zeros(rows + 1, dtype=np.int64)
    for key in keys:
        starts[key + 1] += 1
    for r in range(rows):
        starts[r + 1] += starts[r]
    order = np.empty(len(keys), dtype=np.int64)
    for position in range(len(keys)):
        key = keys[position]
        order[starts[key]] = position
        starts[key] += 1
    return order


@_jit
def _csr(keys, nbrs, types, typed, rows):
    """CSR of ``(keys[e], nbrs[e])`` over ``rows`` rows, each row's entries in input order (a stable counting
    sort), with ``types`` alongside when ``typed``."""
    indptr = np.zeros(rows + 1, dtype=np.int64)
    for key in keys:
        indptr[key + 1] += 1
    for r in range(rows):
        indptr[r + 1] += indptr[r]
    fill = indptr[:-1].copy()
    indices = np.empty(len(keys), dtype=np.int64)
    relations = np.empty(len(keys) if typed else 0, dtype=np.int64)
    for e in range(len(keys)):
        position = fill[keys[e]]
        indices[position] = nbrs[e]
        if typed:
            relations[position] = types[e]
        fill[keys[e]] = position + 1
    return indptr, indices, relations


def state_csr(src_rows: np.ndarray, dst_rows: np.ndarray, rel: np.ndarray, total_rows: int, direction: str,
              relations: int | None = None) -> SamplingGraph:
    """The CSR over ``total_rows`` buffer rows of edges ``src_rows[e] -> dst_rows[e]`` (buffer rows) given in bucket
    (file) order: per row its in-neighbours (``in``), out-neighbours (``out``) or both, in-neighbours first, each in
    input order. With ``relations`` (the store's relation count ``R``) the graph carries each neighbour's relation
    type: ``rel`` for an in-neighbour, ``rel + R`` for an out-neighbour."""
    typed = relations is not None
    keys, nbrs, types = [], [], []
    if direction in ("in", "both"):
        keys.append(dst_rows)
        nbrs.append(src_rows)
        types.append(rel)
    if direction in ("out", "both"):
        keys.append(src_rows)
        nbrs.append(dst_rows)
        types.append(rel + relations if typed else rel)
    typed_values = np.concatenate(types).astype(np.int64) if typed else np.empty(0, dtype=np.int64)
    indptr, indices, relation_types = _csr(np.concatenate(keys).astype(np.int64), np.concatenate(nbrs).astype(np.int64),
                                           typed_values, typed, int(total_rows))
    return SamplingGraph(torch.from_numpy(indptr), torch.from_numpy(indices),
                         relations=torch.from_numpy(relation_types) if typed else None)


@dataclass(frozen=True)
class ReadEvent:
    """One read of the walk's timeline: ``kind`` (``features``, ``embeddings``, ``buckets``), what was read
    (the first partition of a run of ``count`` consecutive partitions, or ``-1`` for bucket extents),
    ``perf_counter`` start and end, and bytes."""

    kind: str
    partition: int
    start: float
    end: float
    bytes: int
    count: int = 1


def _segments(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(starts[s], stops[s])`` over ``s`` (int64), without a Python loop."""
    lengths = stops - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    shifts = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(total, dtype=np.int64) + shifts


class BufferedGraph:
    """The edge buckets inside the buffer and their CSR over buffer rows (see the module docstring).

    Args:
        store: the partitioned store (layout version 4).
        direction: ``in`` (a node's neighbours are its in-edges' sources), ``out`` or ``both``.
        counters: where read bytes are counted.
        evict: drop read ranges from the page cache.
        verify: check every bucket read against its CRC-32.
        typed: the built graphs carry relation types (for encoders that read them).
        coalesce_bytes: extents of buckets closer than this on disk are read as one.
    """

    def __init__(self, store: GraphStore, direction: str, counters: IOCounters, evict: bool, verify: bool = True,
                 typed: bool = False, coalesce_bytes: int = COALESCE_BYTES):
        layout = PartitionLayout.from_store(store, checked=False)
        self.edges = PartitionArray(store.file("bucket_edges"), counters, evict=evict)
        self.p = layout.num_partitions
        self.partition_offsets = layout.offsets.numpy().astype(np.int64)
        self.row_offsets = layout.bucket_row_offsets.numpy().astype(np.int64)
        self.bucket_dst = layout.bucket_dst.numpy().astype(np.int64)
        self.bucket_src = layout.bucket_src().numpy()
        self.edge_offsets = layout.bucket_edge_offsets.numpy().astype(np.int64)
        self.bucket_crc32 = layout.bucket_crc32.numpy().astype(np.int64) if verify else None
        self.direction = direction
        self.relations = int(store.num_relations) if typed else None
        self.gap_rows = max(0, coalesce_bytes // max(1, self.edges.row_bytes))
        self.clear()

    # ------------------------------------------------------------------ holding
    def needed(self, partitions) -> np.ndarray:
        """The index entries (ascending) of the non-empty buckets between ``partitions`` (ignoring -1)."""
        parts = np.unique(np.asarray(partitions, dtype=np.int64))
        parts = parts[parts >= 0]
        resident = np.zeros(self.p, dtype=bool)
        resident[parts] = True
        candidates = _segments(self.row_offsets[parts], self.row_offsets[parts + 1])
        return candidates[resident[self.bucket_dst[candidates]]]

    def hold(self, partitions) -> list[ReadEvent]:
        """Hold every bucket between ``partitions`` (reading those not held yet, one read per extent; dropping those
        with a partition outside); return the reads."""
        needed = self.needed(partitions)
        kept = self.held[np.isin(self.held, needed, assume_unique=True)]
        missing = needed[~np.isin(needed, self.held, assume_unique=True)]
        if len(kept) == len(self.held) and not len(missing):
            return []
        kept_rows = self._rows_of(kept)
        new_rows, events = self._read(missing)
        entries = np.concatenate([kept, missing])
        sizes = self.edge_offsets[entries + 1] - self.edge_offsets[entries]
        pool = np.concatenate([kept_rows, new_rows])
        order = np.argsort(entries, kind="stable")
        pool_starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.rows = pool[_segments(pool_starts[order], pool_starts[order] + sizes[order])]
        self.held = entries[order]
        self.held_starts = np.concatenate([[0], np.cumsum(sizes[order])]).astype(np.int64)
        return events

    def _rows_of(self, entries: np.ndarray) -> np.ndarray:
        """The held rows of the held ``entries`` (ascending), concatenated."""
        position = np.searchsorted(self.held, entries)
        return self.rows[_segments(self.held_starts[position], self.held_starts[position + 1])]

    def _read(self, entries: np.ndarray) -> tuple[np.ndarray, list[ReadEvent]]:
        """Read the rows of ``entries`` (ascending), one read per coalesced extent, checked against their
        CRC-32s."""
        if not len(entries):
            return np.empty((0, 3), dtype=np.int64), []
        starts, stops = self.edge_offsets[entries], self.edge_offsets[entries + 1]
        extent_starts, extent_stops = coalesced_extents(starts, stops, self.gap_rows)
        extent_rows = extent_stops - extent_starts
        block = np.empty((int(extent_rows.sum()), 3), dtype=np.int64)
        base = np.concatenate([[0], np.cumsum(extent_rows)[:-1]]).astype(np.int64)
        events = []
        target = torch.from_numpy(block)
        for first, stop, at in zip(extent_starts.tolist(), extent_stops.tolist(), base.tolist()):
            began = time.perf_counter()
            nbytes = self.edges.read_rows(first, stop, target[at:at + stop - first])
            events.append(ReadEvent("buckets", -1, began, time.perf_counter(), nbytes))
        extent = np.searchsorted(extent_starts, starts, side="right") - 1
        local = base[extent] + (starts - extent_starts[extent])
        rows = block[_segments(local, local + (stops - starts))]
        if self.bucket_crc32 is not None:
            sizes = stops - starts
            new_starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            check_bucket_crcs(self.bucket_crc32[entries], self.bucket_src[entries], self.bucket_dst[entries], rows,
                              new_starts, new_starts + sizes, self.edges.path)
        return rows, events

    # ------------------------------------------------------------------ the state's graph
    def _buffer_rows(self, layout: np.ndarray, max_rows: int) -> tuple[np.ndarray, np.ndarray]:
        """The buffer rows of the held edges' sources and destinations under ``layout`` (frame -> partition)."""
        frame_of = np.full(self.p, -1, dtype=np.int64)
        frames = np.flatnonzero(np.asarray(layout) >= 0)
        frame_of[np.asarray(layout)[frames]] = frames
        sizes = np.diff(self.held_starts)
        src_part = np.repeat(self.bucket_src[self.held], sizes)
        dst_part = np.repeat(self.bucket_dst[self.held], sizes)
        if len(self.held) and (frame_of[self.bucket_src[self.held]] < 0).any() | \
                (frame_of[self.bucket_dst[self.held]] < 0).any():
            raise RuntimeError("a held bucket's partition is not in the layout (hold and build disagree)")
        src = frame_of[src_part] * max_rows + self.rows[:, 0] - self.partition_offsets[src_part]
        dst = frame_of[dst_part] * max_rows + self.rows[:, 2] - self.partition_offsets[dst_part]
        return src, dst

    def build(self, layout: np.ndarray, max_rows: int) -> SamplingGraph:
        """The CSR over ``len(layout) * max_rows`` buffer rows of the held buckets (:func:`state_csr`),
        ``layout[f]`` being the partition in frame ``f`` (-1: empty); every partition of a held bucket must be in
        the layout."""
        src, dst = self._buffer_rows(layout, max_rows)
        return state_csr(src, dst, self.rows[:, 1], len(layout) * max_rows, self.direction, self.relations)

    @property
    def held_edges(self) -> int:
        """Edges in the held buckets."""
        return len(self.rows)

    @property
    def held_buckets(self) -> list[tuple[int, int]]:
        """The held non-empty buckets ``(i, j)``, in file order."""
        return list(zip(self.bucket_src[self.held].tolist(), self.bucket_dst[self.held].tolist()))

    def bucket_edges(self, buckets: np.ndarray, layout: np.ndarray, max_rows: int) -> torch.Tensor:
        """``(k, 3)`` ``(src, rel, dst)`` rows of the held ``buckets`` (ids ``i * p + j``, empty ones allowed, in
        their order), endpoints as buffer rows of ``layout`` (frame -> partition)."""
        buckets = np.asarray(buckets, dtype=np.int64)
        keys = self.bucket_src[self.held] * self.p + self.bucket_dst[self.held]
        position = np.searchsorted(keys, buckets)
        found = position < len(keys)
        found[found] = keys[position[found]] == buckets[found]
        position = position[found]
        chosen = _segments(self.held_starts[position], self.held_starts[position + 1])
        src, dst = self._buffer_rows(layout, max_rows)
        return torch.from_numpy(np.stack([src[chosen], self.rows[chosen, 1], dst[chosen]], axis=1))

    def clear(self) -> None:
        """Forget the held buckets (the buffer was emptied)."""
        self.held = np.empty(0, dtype=np.int64)
        self.held_starts = np.zeros(1, dtype=np.int64)
        self.rows = np.empty((0, 3), dtype=np.int64)

    def close(self) -> None:
        """Close the bucket file."""
        self.edges.close()


__all__ = ["BufferedGraph", "COALESCE_BYTES", "ReadEvent", "coalesced_extents", "state_csr"]
