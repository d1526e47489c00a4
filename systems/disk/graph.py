"""The in-buffer graph: edge buckets held while both their partitions are resident, and their CSR over buffer rows.

A partitioned store keeps every bucket ``(i, j)`` (edges from partition ``i`` to partition ``j``) sorted by
destination (:mod:`suite.graph.partition`, layout version 2). Reading a bucket once gives a *piece* of the
in-buffer CSR: for direction ``in``, the rows of partition ``j`` with, per row, its neighbours in partition ``i``
(the bucket's sources, already in row order); for ``out`` the bucket is put in source order once, by a counting
sort. The CSR of a buffer state is assembled from the pieces of the held buckets (:func:`assemble_csr`): row
degrees are summed, and each piece's neighbour lists are copied to their rows' places, pieces in the order of
their neighbour partition, so a node's neighbour list does not depend on which frames the partitions occupy.
Nothing is sorted at a swap: a state reads only the buckets of the partitions it loads, and assembling is a copy
of the in-buffer edges (``experiments``' and asv's ``edges/s``).

Relation types. For an encoder that reads them (R-GCN), the pieces carry each neighbour's relation type beside it
(``r`` for an in-neighbour, ``r + R`` for an out-neighbour: the reverse edge, R-GCN's inverse relation, as
:class:`systems.models.rgcn.RelationLookup` numbers them) and the assembled graph has ``relations`` aligned with
its ``indices``.

The kernels are compiled with numba (``nogil``): the prefetch thread that builds the next state's CSR never holds
the interpreter, and runs on one core (no thread pool of its own to compete with compute's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numba
import numpy as np
import torch

from suite.graph import GraphStore
from suite.graph.partition import bucket_checksums, check_bucket_crc
from suite.io import IOCounters
from systems.disk.buffer import PartitionArray
from systems.sampling.sampler import SamplingGraph

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _row_counts(keys: np.ndarray, rows: int) -> np.ndarray:
    counts = np.zeros(rows, dtype=np.int64)
    for key in keys:
        counts[key] += 1
    return counts


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
def _assemble(total_rows, max_rows, row_frames, nbr_frames, counts_list, nbrs_list, types_list, typed, order):
    degrees = np.zeros(total_rows, dtype=np.int64)
    for p in range(len(row_frames)):
        base = row_frames[p] * max_rows
        counts = counts_list[p]
        for r in range(len(counts)):
            degrees[base + r] += counts[r]
    indptr = np.empty(total_rows + 1, dtype=np.int64)
    indptr[0] = 0
    for r in range(total_rows):
        indptr[r + 1] = indptr[r] + degrees[r]
    fill = indptr[:-1].copy()
    indices = np.empty(indptr[total_rows], dtype=np.int64)
    relations = np.empty(indptr[total_rows] if typed else 0, dtype=np.int64)
    for p in order:
        base = row_frames[p] * max_rows
        shift = nbr_frames[p] * max_rows
        counts = counts_list[p]
        nbrs = nbrs_list[p]
        types = types_list[p]
        k = 0
        for r in range(len(counts)):
            position = fill[base + r]
            for t in range(counts[r]):
                indices[position + t] = nbrs[k + t] + shift
                if typed:
                    relations[position + t] = types[k + t]
            fill[base + r] = position + counts[r]
            k += counts[r]
    return indptr, indices, relations


@dataclass(frozen=True)
class Piece:
    """The neighbour lists one bucket gives the rows of one partition.

    Attributes:
        row_partition: the partition whose rows the lists belong to.
        nbr_partition: the partition the neighbours lie in.
        kind: 0 for in-neighbours, 1 for out-neighbours (``both`` lists a row's in-neighbours first).
        counts: ``(rows of row_partition,)`` neighbours per row.
        nbrs: the neighbours (local rows of ``nbr_partition``), row by row.
        types: their relation types (``r + R`` for out-neighbours), or an empty array when not asked for.
    """

    row_partition: int
    nbr_partition: int
    kind: int
    counts: np.ndarray
    nbrs: np.ndarray
    types: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


@dataclass
class Bucket:
    """A held bucket ``(i, j)``: its edges as local rows (``src`` of partition ``i``, ``dst`` of ``j``) in
    destination order, and the CSR pieces it gives."""

    src: np.ndarray
    rel: np.ndarray
    dst: np.ndarray
    pieces: list[Piece] = field(default_factory=list)

    @property
    def num_edges(self) -> int:
        """Edges in the bucket."""
        return len(self.src)


@dataclass(frozen=True)
class ReadEvent:
    """One read of the walk's timeline: ``kind`` (``features``, ``embeddings``, ``buckets``), what was read
    (a partition, or ``-1`` for a group of buckets), ``perf_counter`` start and end, and bytes."""

    kind: str
    partition: int
    start: float
    end: float
    bytes: int


def pieces_of(i: int, j: int, bucket: Bucket, sizes: np.ndarray, direction: str,
              relations: int | None = None) -> list[Piece]:
    """The CSR pieces of bucket ``(i, j)`` for ``direction`` (``in``, ``out`` or ``both``); with ``relations``
    (the store's relation count ``R``) each carries its neighbours' relation types."""
    untyped = np.empty(0, dtype=np.int64)
    pieces = []
    if direction in ("in", "both"):
        types = bucket.rel.astype(np.int64) if relations is not None else untyped
        pieces.append(Piece(j, i, 0, _row_counts(bucket.dst, int(sizes[j])), bucket.src, types))
    if direction in ("out", "both"):
        order = _counting_order(bucket.src, int(sizes[i]))
        types = bucket.rel[order].astype(np.int64) + relations if relations is not None else untyped
        pieces.append(Piece(i, j, 1, _row_counts(bucket.src, int(sizes[i])), bucket.dst[order], types))
    return pieces


def assemble_csr(pieces: list[Piece], frame_of: dict[int, int], frames: int, max_rows: int,
                 typed: bool = False) -> SamplingGraph:
    """The CSR over ``frames * max_rows`` buffer rows (row ``frame * max_rows + local``) of ``pieces``, each
    partition in the frame ``frame_of`` gives; a row's neighbours ordered by (kind, neighbour partition, the
    bucket's order). ``typed``: with the pieces' relation types as the graph's ``relations``."""
    if not pieces:
        empty = torch.empty(0, dtype=torch.int64)
        return SamplingGraph(torch.zeros(frames * max_rows + 1, dtype=torch.int64), empty,
                             relations=empty if typed else None)
    row_frames = np.array([frame_of[p.row_partition] for p in pieces], dtype=np.int64)
    nbr_frames = np.array([frame_of[p.nbr_partition] for p in pieces], dtype=np.int64)
    order = np.lexsort(([p.nbr_partition for p in pieces], [p.kind for p in pieces])).astype(np.int64)
    counts, nbrs, types = numba.typed.List(), numba.typed.List(), numba.typed.List()
    for piece in pieces:
        if typed and len(piece.types) != len(piece.nbrs):
            raise ValueError("assemble_csr: typed=True needs pieces made with their relation types")
        counts.append(piece.counts)
        nbrs.append(piece.nbrs)
        types.append(piece.types)
    indptr, indices, relations = _assemble(frames * max_rows, max_rows, row_frames, nbr_frames, counts, nbrs, types,
                                           typed, order)
    return SamplingGraph(torch.from_numpy(indptr), torch.from_numpy(indices),
                         relations=torch.from_numpy(relations) if typed else None)


class BufferedGraph:
    """The edge buckets inside the buffer and their CSR over buffer rows.

    Args:
        store: the partitioned store (layout version 2: buckets in destination order).
        direction: ``in`` (a node's neighbours are its in-edges' sources), ``out`` or ``both``.
        counters: where read bytes are counted.
        evict: drop read ranges from the page cache.
        pieces: build CSR pieces when a bucket is read (False: the edges only, e.g. for models without hops).
        typed: the pieces and the built graphs carry relation types (for encoders that read them).
        verify: check every bucket read against its CRC-32 (stores partitioned before buckets carried them: not
            checked).
    """

    def __init__(self, store: GraphStore, direction: str, counters: IOCounters, evict: bool, pieces: bool = True,
                 verify: bool = True, typed: bool = False):
        self.edges = PartitionArray(store.file("bucket_edges"), counters, evict=evict)
        self.bucket_crc32 = bucket_checksums(store) if verify else None
        self.bucket_offsets = store.array("bucket_offsets").astype(np.int64)
        self.partition_offsets = store.array("partition_offsets").astype(np.int64)
        self.sizes = np.diff(self.partition_offsets)
        self.p = len(self.partition_offsets) - 1
        self.direction = direction
        self.make_pieces = pieces
        self.relations = int(store.num_relations) if typed else None
        self.cache: dict[tuple[int, int], Bucket] = {}

    def hold(self, partitions) -> list[ReadEvent]:
        """Hold every bucket between ``partitions`` (reading those not held yet, in one read per run of
        consecutive buckets; dropping those with a partition outside); return the reads."""
        resident = sorted(int(p) for p in partitions if p >= 0)
        needed = {(i, j) for i in resident for j in resident}
        for key in [key for key in self.cache if key not in needed]:
            del self.cache[key]
        events = []
        for i in resident:
            missing = [j for j in resident if (i, j) not in self.cache]
            for first, last in _runs(missing):
                events.append(self._read_row_of_buckets(i, first, last))
        return [event for event in events if event is not None]

    def _read_row_of_buckets(self, i: int, first: int, last: int) -> ReadEvent | None:
        """Read buckets ``(i, first..last)`` (consecutive on disk) with one read, and split them."""
        base = i * self.p
        start, stop = int(self.bucket_offsets[base + first]), int(self.bucket_offsets[base + last + 1])
        block = np.empty((stop - start, 3), dtype=np.int64)
        began = time.perf_counter()
        nbytes = self.edges.read_rows(start, stop, torch.from_numpy(block)) if stop > start else 0
        ended = time.perf_counter()
        for j in range(first, last + 1):
            lo, hi = int(self.bucket_offsets[base + j]) - start, int(self.bucket_offsets[base + j + 1]) - start
            rows = block[lo:hi]
            check_bucket_crc(self.bucket_crc32, i, j, rows, self.edges.path)
            bucket = Bucket(rows[:, 0] - self.partition_offsets[i], np.ascontiguousarray(rows[:, 1]),
                            rows[:, 2] - self.partition_offsets[j])
            if self.make_pieces:
                bucket.pieces = pieces_of(i, j, bucket, self.sizes, self.direction, self.relations)
            self.cache[(i, j)] = bucket
        return ReadEvent("buckets", -1, began, ended, nbytes) if nbytes else None

    def build(self, layout: np.ndarray, max_rows: int) -> SamplingGraph:
        """The CSR over ``len(layout) * max_rows`` buffer rows of the held buckets, ``layout[f]`` being the
        partition in frame ``f`` (-1: empty); every partition of a held bucket must be in the layout."""
        frame_of = {int(part): frame for frame, part in enumerate(layout) if part >= 0}
        pieces = [piece for bucket in self.cache.values() for piece in bucket.pieces]
        return assemble_csr(pieces, frame_of, len(layout), max_rows, typed=self.relations is not None)

    @property
    def held_edges(self) -> int:
        """Edges in the held buckets."""
        return sum(bucket.num_edges for bucket in self.cache.values())

    def bucket_edges(self, buckets: np.ndarray, layout: np.ndarray, max_rows: int) -> torch.Tensor:
        """``(k, 3)`` ``(src, rel, dst)`` rows of the held ``buckets`` (ids ``i * p + j``), endpoints as buffer rows
        of ``layout`` (frame -> partition)."""
        frame_of = {int(part): frame for frame, part in enumerate(layout) if part >= 0}
        parts = []
        for bucket_id in buckets.tolist():
            i, j = divmod(bucket_id, self.p)
            bucket = self.cache[(i, j)]
            parts.append(np.stack([bucket.src + frame_of[i] * max_rows, bucket.rel,
                                   bucket.dst + frame_of[j] * max_rows], axis=1))
        return torch.from_numpy(np.concatenate(parts)) if parts else torch.empty((0, 3), dtype=torch.int64)

    def clear(self) -> None:
        """Forget the held buckets (the buffer was emptied)."""
        self.cache.clear()

    def close(self) -> None:
        """Close the bucket file."""
        self.edges.close()


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """``[(first, last), ...]`` of the runs of consecutive integers in sorted ``values``."""
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


__all__ = ["Bucket", "BufferedGraph", "Piece", "ReadEvent", "assemble_csr", "pieces_of"]
