"""Partitioned stores for disk-based training: nodes re-ordered, split into ``p`` partitions, edges in p x p buckets.

:func:`partition_store` writes a *new* store that is the input graph relabelled into a node order (every array
rewritten, out-of-core) plus the layout the disk-based system reads. Node ids in the output are *new* ids; new id
``i`` is original node ``node_map[i]``.

Files added to the store layout of :mod:`suite.data.store`:

====================  ==============  ==================================================================
key                   shape / dtype   meaning
====================  ==============  ==================================================================
node_map              (n,) int64      new id -> original id (the id in the store first partitioned, so
                                      re-partitioning a partitioned store composes the maps)
partition_offsets     (p+1,) int64    partition ``i`` holds new ids ``partition_offsets[i]:partition_offsets[i+1]``
bucket_edges          (k, 3) int64    ``(src, rel, dst)`` rows in new ids, sorted by (src partition, dst
                                      partition, dst, src, rel): within a bucket by destination, so the CSR
                                      of any set of buckets over their destinations is assembled from the
                                      buckets' pieces without a sort
bucket_row_offsets    (p+1,) int64    the *bucket index*, a CSR over source partitions of the ``b``
                                      non-empty buckets: those of source partition ``i`` are index entries
                                      ``bucket_row_offsets[i]:bucket_row_offsets[i+1]``
bucket_dst            (b,) int64      destination partition of each non-empty bucket (ascending in a row)
bucket_edge_offsets   (b+1,) int64    entry ``t`` is ``bucket_edges[bucket_edge_offsets[t]:bucket_edge_offsets[t+1]]``
bucket_crc32          (b,) int64      CRC-32 (:func:`zlib.crc32`) of each non-empty bucket's rows
====================  ==============  ==================================================================

The bucket index is sparse: ``O(p + b)`` words with ``b <= min(p * p, k)``, so ``p = 8192`` partitions cost nothing
for their ``p * p = 67M`` mostly empty buckets (a dense ``p * p + 1`` offset table would be 537 MB). Index entries
are in file order: entry ``t`` is the ``t``-th non-empty bucket of ``bucket_edges``, so consecutive entries are
adjacent on disk.

``metadata["partitioning"]["layout_version"]`` is :data:`LAYOUT_VERSION`; a store of an older layout (a dense
``bucket_offsets``, buckets sorted by source, or without bucket CRC-32s) is rebuilt by the disk system's cache.
Checksums: ``metadata["partitioning"]["feature_crc32"]`` holds the CRC-32 of every partition's feature rows,
``bucket_crc32.npy`` that of every non-empty bucket; the disk system checks every partition and bucket it reads
against them (:func:`check_bucket_crcs`), so a corrupted read names the file and the partition or bucket.

Partition sizes are balanced as :func:`numpy.array_split` does: the first ``n % p`` partitions hold
``n // p + 1`` nodes, the others ``n // p``; so sizes differ by at most one and none is empty.

Buckets hold the training examples of the disk-based system: for link-prediction stores (those with
``train_edges``) the ``train_edges`` (``k`` = number of training edges, relations preserved); otherwise every edge
of the graph (``k = m``, relations from the out-CSR, 0 when untyped). The edges of bucket ``(i, j)`` go from
partition ``i`` to partition ``j``.

Orderings (``order=``) are looked up by name in :data:`ORDERINGS`; a path to a ``.npy`` file (or an array) gives
the order directly as ``node_map`` (entry ``i`` = the original id placed at new id ``i``).

Memory: O(num_nodes) words (the order, its inverse, degree counts of :func:`~suite.data.csr.write_csrs`) plus
chunks of ``chunk_edges`` edges, ``chunk_bytes`` of feature rows and sort bins of ``max_bucket_edges`` edges,
whatever the number of edges.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from suite.errors import ConfigError, DataError
from suite.data.csr import DEFAULT_CHUNK_EDGES, DEFAULT_MAX_BUCKET_EDGES, EdgeChunk, iter_store_edges, write_csrs
from suite.data.out_of_core import MemoryBudget, OutOfCoreSizes, sizes_for
from suite.data.store import (
    EDGE_SPLITS,
    METADATA_FILE,
    NODE_SPLITS,
    LAYOUT_CHECKS,
    PARTITION_KEYS,
    REQUIRED_KEYS,
    GraphStore,
    StoreWriter,
    create_store,
)
from suite.io import check_read, file_checksum, write_to, writing
from suite.registry import Registry

DEFAULT_CHUNK_BYTES = 64 << 20
LAYOUT_VERSION = 4
"""Version of the partitioned layout: 4 keeps a sparse bucket index (non-empty buckets only, their CRC-32s in a
file); 3 a dense ``bucket_offsets`` (``p * p + 1``) and CRC-32s in the metadata; 2 sorts each bucket by
(dst, src, rel) (1: by (src, dst, rel))."""
RESIDENT_BYTES_PER_NODE = 40
"""What partitioning holds per node besides ``node_map`` and its inverse (held when the sizes are fitted): the CSR
build's in- and out-degrees, one ``indptr`` and a bincount in flight."""
DEFAULT_SIZES = OutOfCoreSizes(DEFAULT_CHUNK_EDGES, DEFAULT_MAX_BUCKET_EDGES, DEFAULT_CHUNK_BYTES)
"""The sizes :func:`partition_store` uses by default, before they are fitted to a memory budget."""
_MAX_OPEN_BINS = 256  # scratch files open at once while scattering edges into sort bins
_MAX_DENSE_BIN_UNITS = 1 << 20
"""Up to this many buckets (``p <= 1024``) sort bins are ranges of buckets, counted per bucket (8 MiB of counts),
so a bin stays within ``max_bucket_edges`` however many edges one source partition has; beyond, ranges of
source partitions (a source partition larger than the budget is then sorted whole)."""
_CSR_KEYS = REQUIRED_KEYS + ("in_relations", "out_relations")
_ROW_KEYS = ("features", "labels")
_OLD_LAYOUT_KEYS = frozenset({"bucket_offsets"})  # layout files of versions <= 3 (a dense bucket table), rebuilt
# metadata fields that partition_store writes itself; every other top-level field of the input is copied
_OWN_FIELDS = frozenset({
    "format", "format_version", "name", "num_nodes", "num_edges", "directed", "num_relations", "num_classes",
    "feature_dim", "dtypes", "source", "created_at", "suite_version", "files", "partitioning", "checks",
})

Ordering = Callable[[GraphStore, int], np.ndarray]
"""An ordering: ``(store, seed) -> node_map``, a permutation of ``range(store.num_nodes)`` (new id -> old id)."""

ORDERINGS: Registry[Ordering] = Registry("ordering")


# ---------------------------------------------------------------------------------------------- orderings
def _row_chunks(array: np.ndarray, rows: int) -> Iterator[tuple[int, np.ndarray]]:
    for start in range(0, array.shape[0], rows):
        yield start, np.asarray(array[start : start + rows])


def _rows_per_chunk(array: np.ndarray, chunk_bytes: int) -> int:
    row_bytes = array.dtype.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))
    return max(1, chunk_bytes // max(1, row_bytes))


@ORDERINGS.register("random")
def random_order(store: GraphStore, seed: int) -> np.ndarray:
    """A uniformly random permutation of the nodes drawn from ``numpy.random.default_rng(seed)``."""
    return np.random.default_rng(seed).permutation(store.num_nodes).astype(np.int64)


def _training_mask(store: GraphStore) -> np.ndarray:
    """Boolean mask of the training nodes: ``train_nodes``, else endpoints of ``train_edges``."""
    mask = np.zeros(store.num_nodes, dtype=bool)
    if store.has("train_nodes"):
        for _, chunk in _row_chunks(store.array("train_nodes"), DEFAULT_CHUNK_EDGES):
            mask[chunk] = True
    elif store.has("train_edges"):
        for _, chunk in _row_chunks(store.array("train_edges"), DEFAULT_CHUNK_EDGES):
            mask[chunk[:, 0]] = True
            mask[chunk[:, 2]] = True
    else:
        raise ConfigError(f"order 'train-first' needs train_nodes or train_edges; store {store.path} has neither")
    return mask


def _split_mask(store: GraphStore, splits: tuple[str, ...]) -> np.ndarray:
    """Boolean mask of the nodes of the node splits ``splits`` that the store has."""
    mask = np.zeros(store.num_nodes, dtype=bool)
    for split in splits:
        if store.has(f"{split}_nodes"):
            for _, chunk in _row_chunks(store.array(f"{split}_nodes"), DEFAULT_CHUNK_EDGES):
                mask[chunk] = True
    return mask


@ORDERINGS.register("labeled-first")
def labeled_first_order(store: GraphStore, seed: int) -> np.ndarray:
    """Training nodes first, then the other split nodes (valid, test), then the rest; each group in random order
    (``default_rng(seed)``).

    MariusGNN's layout for node classification from disk: with few labeled nodes (papers100M: 1.4 %) all of them
    fit in the first partitions, which the ``sequential`` policy keeps in the buffer, so evaluation passes read
    nothing. Stores without node splits order as ``train-first``.
    """
    if not store.has("train_nodes"):
        return train_first_order(store, seed)
    train = _split_mask(store, ("train",))
    evaluated = _split_mask(store, ("valid", "test")) & ~train
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(train), np.flatnonzero(evaluated), np.flatnonzero(~(train | evaluated))]
    return np.concatenate([rng.permutation(group) for group in groups]).astype(np.int64)


def _in_neighbour_counts(store: GraphStore, nodes: np.ndarray) -> np.ndarray:
    """Per node of the store, how many of ``nodes`` it is an in-neighbour of (the nodes a one-hop sample of
    ``nodes`` can draw, with multiplicity)."""
    indptr = store.array("in_indptr")
    starts, stops = indptr[nodes], indptr[nodes + 1]
    counts = np.zeros(store.num_nodes, dtype=np.int64)
    indices = store.array("in_indices")
    for first in range(0, len(nodes), DEFAULT_CHUNK_EDGES // 64):
        chunk = slice(first, first + DEFAULT_CHUNK_EDGES // 64)
        lengths = (stops[chunk] - starts[chunk]).astype(np.int64)
        positions = np.repeat(starts[chunk] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + \
            np.arange(int(lengths.sum()))
        np.add.at(counts, np.asarray(indices[positions], dtype=np.int64), 1)
    return counts


@ORDERINGS.register("neighborhood-first")
def neighborhood_first_order(store: GraphStore, seed: int) -> np.ndarray:
    """Training nodes first, then their in-neighbours (the nodes a one-hop sample of a training node draws; most
    shared first, ties in random order), then the other split nodes (valid, test), then the rest; each group in
    random order (``default_rng(seed)``).

    With the ``sequential_neighborhood`` policy, which keeps the first partitions in the buffer besides the training
    ones, every training node's first hop is sampled from all of its neighbours rather than from the quarter that
    a random fill happens to hold. Stores without node splits order as ``train-first``.
    """
    if not store.has("train_nodes"):
        return train_first_order(store, seed)
    train = _split_mask(store, ("train",))
    counts = _in_neighbour_counts(store, np.flatnonzero(train))
    neighbours = (counts > 0) & ~train
    evaluated = _split_mask(store, ("valid", "test")) & ~train & ~neighbours
    rng = np.random.default_rng(seed)
    first = rng.permutation(np.flatnonzero(train))
    shuffled = rng.permutation(np.flatnonzero(neighbours))
    by_count = shuffled[np.argsort(-counts[shuffled], kind="stable")]
    rest = [rng.permutation(np.flatnonzero(group)) for group in (evaluated, ~(train | neighbours | evaluated))]
    return np.concatenate([first, by_count, *rest]).astype(np.int64)


@ORDERINGS.register("train-first")
def train_first_order(store: GraphStore, seed: int) -> np.ndarray:
    """Training nodes first, then all other nodes; each group in random order (``default_rng(seed)``).

    Training nodes are ``train_nodes`` for node classification. Link-prediction stores have no node split: there
    the training nodes are the endpoints of ``train_edges`` (nodes touched by a training example), so the nodes
    only in validation/test edges or in no split come last. A store with neither split raises
    :class:`~suite.errors.ConfigError`. With ``k`` training nodes, they fill exactly the first partitions up to
    new id ``k``.
    """
    mask = _training_mask(store)
    rng = np.random.default_rng(seed)
    train = np.flatnonzero(mask)
    other = np.flatnonzero(~mask)
    return np.concatenate([rng.permutation(train), rng.permutation(other)]).astype(np.int64)


def check_permutation(values: np.ndarray, num_nodes: int, where: str) -> np.ndarray:
    """Return ``values`` as an int64 array after checking it is a permutation of ``range(num_nodes)``.

    Args:
        values: candidate ``node_map``.
        num_nodes: expected length.
        where: what to name in the error (a file path or ``"order"``).

    Raises:
        DataError: one line naming ``where`` and the first problem found.
    """
    values = np.asarray(values)
    if values.ndim != 1 or values.shape[0] != num_nodes:
        raise DataError(f"{where}: order must have shape ({num_nodes},) (one entry per node), got {values.shape}")
    if values.dtype.kind not in "iu":
        raise DataError(f"{where}: order must hold integer node ids, got dtype {values.dtype}")
    if num_nodes == 0:
        return values.astype(np.int64)
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= num_nodes:
        bad = low if low < 0 else high
        raise DataError(f"{where}: order is not a permutation of range({num_nodes}): node id {bad} is out of range")
    counts = np.bincount(values, minlength=num_nodes)
    if (counts != 1).any():
        repeated = int(np.flatnonzero(counts > 1)[0])
        missing = int(np.flatnonzero(counts == 0)[0])
        raise DataError(
            f"{where}: order is not a permutation of range({num_nodes}): node {repeated} appears "
            f"{int(counts[repeated])} times and node {missing} is missing"
        )
    return values.astype(np.int64, copy=False)


def load_order(path: str | os.PathLike, num_nodes: int) -> np.ndarray:
    """Read a ``node_map`` (new id -> original id) from a ``.npy`` file and check it is a permutation.

    Raises:
        DataError: naming the file when it is missing, unreadable or not a permutation of ``range(num_nodes)``.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: order file does not exist")
    try:
        values = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as err:
        raise DataError(f"{path}: not a valid .npy order file ({str(err).splitlines()[0]})") from None
    return check_permutation(np.array(values), num_nodes, str(path))


def resolve_order(store: GraphStore, order: str | os.PathLike | np.ndarray | torch.Tensor,
                  seed: int = 0) -> tuple[np.ndarray, dict[str, Any]]:
    """The ``node_map`` (new id -> id in ``store``) that ``order`` denotes, and a description for metadata.

    Args:
        store: the store to order.
        order: a name registered in :data:`ORDERINGS`, a path to a ``.npy`` permutation file (a string ending in
            ``.npy``, an existing file, or any :class:`os.PathLike`), or the permutation itself as an array.
        seed: seed of random orderings.

    Raises:
        ConfigError: for an unknown ordering name.
        DataError: for an order file or array that is not a permutation of ``range(num_nodes)``.
    """
    n = store.num_nodes
    if isinstance(order, torch.Tensor):
        order = order.detach().cpu().numpy()
    if isinstance(order, np.ndarray):
        return check_permutation(order, n, "order"), {"order": "array"}
    if isinstance(order, str) and order in ORDERINGS:
        node_map = ORDERINGS.get(order)(store, seed)
        return check_permutation(node_map, n, f"ordering {order!r}"), {"order": order}
    if isinstance(order, os.PathLike) or (isinstance(order, str) and (order.endswith(".npy") or Path(order).is_file())):
        path = Path(order)
        node_map = load_order(path, n)
        return node_map, {"order": "file", "order_file": str(path), "order_checksum": file_checksum(path)}
    known = ", ".join(ORDERINGS.names())
    raise ConfigError(f"unknown ordering {order!r} for order (known: {known}, or a path to a .npy permutation file)")


# ---------------------------------------------------------------------------------------------- layout
def partition_offsets(num_nodes: int, num_partitions: int) -> np.ndarray:
    """Balanced contiguous partition boundaries ``(p+1,)`` int64 (``numpy.array_split`` sizes).

    The first ``num_nodes % p`` partitions hold one node more than the others. E.g. 7 nodes, 3 partitions:
    ``[0, 3, 5, 7]``.

    Raises:
        ConfigError: when ``num_partitions`` is not in ``[1, num_nodes]``.
    """
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, (int, np.integer)) \
            or not 1 <= num_partitions <= num_nodes:
        shown = num_partitions if isinstance(num_partitions, (int, np.integer)) else repr(num_partitions)
        raise ConfigError(f"num_partitions must be in [1, {num_nodes}], got {shown}")
    p = int(num_partitions)
    size, extra = divmod(num_nodes, p)
    index = np.arange(p + 1, dtype=np.int64)
    return index * size + np.minimum(index, extra)


def node_partition(nodes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Partition of each (new) node id, given ``partition_offsets``."""
    return np.searchsorted(offsets, nodes, side="right") - 1


def inverse_permutation(node_map: np.ndarray) -> np.ndarray:
    """The inverse of a permutation: ``inverse[node_map[i]] = i`` (original id -> new id)."""
    inverse = np.empty(len(node_map), dtype=np.int64)
    inverse[node_map] = np.arange(len(node_map), dtype=np.int64)
    return inverse


@dataclass(frozen=True)
class PartitionLayout:
    """The partition layout of a partitioned store, as zero-copy tensors over its memory maps.

    Attributes:
        num_partitions: ``p``.
        offsets: ``(p+1,)`` node boundaries; partition ``i`` is new ids ``offsets[i]:offsets[i+1]``.
        node_map: ``(n,)`` new id -> original id.
        bucket_row_offsets: ``(p+1,)`` the non-empty buckets of source partition ``i`` are index entries
            ``bucket_row_offsets[i]:bucket_row_offsets[i+1]``.
        bucket_dst: ``(b,)`` destination partition of each non-empty bucket.
        bucket_edge_offsets: ``(b+1,)`` row boundaries of the non-empty buckets in ``bucket_edges``.
        bucket_crc32: ``(b,)`` CRC-32 of each non-empty bucket's rows.
        bucket_edges: ``(k, 3)`` ``(src, rel, dst)`` in new ids, grouped by bucket.
    """

    num_partitions: int
    offsets: torch.Tensor
    node_map: torch.Tensor
    bucket_row_offsets: torch.Tensor
    bucket_dst: torch.Tensor
    bucket_edge_offsets: torch.Tensor
    bucket_crc32: torch.Tensor
    bucket_edges: torch.Tensor

    @classmethod
    def from_store(cls, store: GraphStore, checked: bool = True) -> "PartitionLayout":
        """Read the layout of a store written by :func:`partition_store` (``checked``: see
        :meth:`GraphStore.array <suite.data.store.GraphStore.array>`).

        Raises:
            DataError: when the store is not partitioned (or of an older layout) or the layout files disagree
                in size.
        """
        missing = [key for key in PARTITION_KEYS if not store.has(key)]
        if missing:
            raise DataError(f"{store.path}: not a partitioned store of layout version {LAYOUT_VERSION} (no "
                            f"{', '.join(missing)}; run partition again)")
        offsets = store.tensor("partition_offsets", checked)
        p = len(offsets) - 1
        rows = store.tensor("bucket_row_offsets", checked)
        dst = store.tensor("bucket_dst", checked)
        edge_offsets = store.tensor("bucket_edge_offsets", checked)
        crcs = store.tensor("bucket_crc32", checked)
        edges = store.tensor("bucket_edges", checked)
        b = len(dst)
        for key, length, expected in (("bucket_row_offsets", len(rows), p + 1),
                                      ("bucket_edge_offsets", len(edge_offsets), b + 1),
                                      ("bucket_crc32", len(crcs), b)):
            if length != expected:
                raise DataError(f"{store.file(key)}: has {length} entries, expected {expected} (p = {p} partitions, "
                                f"{b} non-empty buckets)")
        if int(rows[-1]) != b:
            raise DataError(f"{store.file('bucket_row_offsets')}: ends at {int(rows[-1])}, but bucket_dst has {b} "
                            "entries")
        if int(edge_offsets[-1]) != len(edges):
            raise DataError(f"{store.file('bucket_edge_offsets')}: ends at {int(edge_offsets[-1])}, but bucket_edges "
                            f"has {len(edges)} rows")
        return cls(p, offsets, store.tensor("node_map", checked), rows, dst, edge_offsets, crcs, edges)

    @property
    def num_buckets(self) -> int:
        """``b``, the non-empty buckets."""
        return len(self.bucket_dst)

    def partition_range(self, i: int) -> tuple[int, int]:
        """New ids ``[start, end)`` of partition ``i``."""
        return int(self.offsets[i]), int(self.offsets[i + 1])

    def partition_sizes(self) -> torch.Tensor:
        """Number of nodes of every partition, ``(p,)``."""
        return self.offsets[1:] - self.offsets[:-1]

    def partition_of(self, nodes: torch.Tensor) -> torch.Tensor:
        """Partition of each new node id."""
        return torch.searchsorted(self.offsets, nodes.to(torch.int64), right=True) - 1

    def bucket_src(self) -> torch.Tensor:
        """``(b,)`` source partition of each non-empty bucket."""
        counts = self.bucket_row_offsets[1:] - self.bucket_row_offsets[:-1]
        return torch.repeat_interleave(torch.arange(self.num_partitions, dtype=torch.int64), counts)

    def bucket_entry(self, i: int, j: int) -> int:
        """The index entry of bucket ``(i, j)``, or -1 when it is empty."""
        lo, hi = int(self.bucket_row_offsets[i]), int(self.bucket_row_offsets[i + 1])
        t = lo + int(torch.searchsorted(self.bucket_dst[lo:hi], torch.tensor(j, dtype=self.bucket_dst.dtype)))
        return t if t < hi and int(self.bucket_dst[t]) == j else -1

    def bucket(self, i: int, j: int) -> torch.Tensor:
        """Edges ``(src, rel, dst)`` from partition ``i`` to partition ``j`` (a zero-copy view)."""
        t = self.bucket_entry(i, j)
        if t < 0:
            return self.bucket_edges[:0]
        return self.bucket_edges[int(self.bucket_edge_offsets[t]) : int(self.bucket_edge_offsets[t + 1])]

    def bucket_sizes(self) -> torch.Tensor:
        """Number of edges of every bucket as a dense ``(p, p)`` tensor (rows: source partition); ``p * p``
        words, for small ``p`` (:meth:`bucket_src`, :attr:`bucket_dst` and the offsets are the sparse form)."""
        p = self.num_partitions
        sizes = torch.zeros(p * p, dtype=torch.int64)
        sizes[self.bucket_src() * p + self.bucket_dst] = self.bucket_edge_offsets[1:] - self.bucket_edge_offsets[:-1]
        return sizes.reshape(p, p)


def verify_partitioning(store: GraphStore, chunk_edges: int = DEFAULT_CHUNK_EDGES) -> None:
    """Check the layout files of a partitioned store (bounded memory: chunks of ``chunk_edges`` rows).

    Checks: ``partition_offsets`` start at 0, end at ``n`` and increase; ``node_map`` is a permutation; the bucket
    index's offsets start at 0 and never decrease, its buckets are non-empty and in (source, destination) order;
    every bucket row lies in its bucket's partitions with ids and relations in range; rows are sorted by (bucket,
    dst, src, rel); the bucket edges count the training edges (link prediction) or all edges; every bucket matches
    its CRC-32.

    Raises:
        DataError: naming the first file that is wrong.
    """
    layout = PartitionLayout.from_store(store, checked=False)
    n, p = store.num_nodes, layout.num_partitions
    offsets = layout.offsets.numpy()
    if offsets[0] != 0 or offsets[-1] != n or (np.diff(offsets) <= 0).any():
        raise DataError(f"{store.file('partition_offsets')}: must increase strictly from 0 to num_nodes={n}")
    check_permutation(layout.node_map.numpy(), n, str(store.file("node_map")))
    row_offsets = layout.bucket_row_offsets.numpy()
    if row_offsets[0] != 0 or (np.diff(row_offsets) < 0).any():
        raise DataError(f"{store.file('bucket_row_offsets')}: must start at 0 and never decrease")
    edge_offsets = layout.bucket_edge_offsets.numpy()
    if edge_offsets[0] != 0 or (np.diff(edge_offsets) <= 0).any():
        raise DataError(f"{store.file('bucket_edge_offsets')}: must start at 0 and increase (buckets are non-empty)")
    keys = layout.bucket_src().numpy() * p + layout.bucket_dst.numpy()
    if len(keys) and (layout.bucket_dst.numpy().min() < 0 or layout.bucket_dst.numpy().max() >= p
                      or (np.diff(keys) <= 0).any()):
        raise DataError(f"{store.file('bucket_dst')}: destination partitions must lie in [0, {p}) and ascend in "
                        "each source partition")
    expected = store.metadata["files"]["train_edges"]["shape"][0] if store.has("train_edges") else store.num_edges
    if edge_offsets[-1] != expected:
        raise DataError(f"{store.file('bucket_edges')}: holds {int(edge_offsets[-1])} edges, expected {expected}")
    file = store.file("bucket_edges")
    previous = None
    crcs = layout.bucket_crc32.numpy()
    for start, rows in _row_chunks(store.array("bucket_edges", checked=False), chunk_edges):
        src, rel, dst = rows[:, 0], rows[:, 1], rows[:, 2]
        if rows.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n
                          or rel.min() < 0 or rel.max() >= store.num_relations):
            raise DataError(f"{file}: node or relation id out of range in rows {start}..{start + len(rows) - 1}")
        entry = np.searchsorted(edge_offsets, np.arange(start, start + len(rows)), side="right") - 1
        bucket = keys[entry]
        actual = node_partition(src, offsets) * p + node_partition(dst, offsets)
        if (bucket != actual).any():
            row = int(np.flatnonzero(bucket != actual)[0])
            raise DataError(f"{file}: row {start + row} lies in bucket {divmod(int(bucket[row]), p)} but its edge "
                            f"belongs to bucket {divmod(int(actual[row]), p)}")
        sort_keys = np.column_stack([bucket, dst, src, rel])
        if previous is not None:
            sort_keys = np.concatenate([previous, sort_keys])
        if len(sort_keys) > 1:
            step = sort_keys[1:] - sort_keys[:-1]
            nonzero = step != 0
            first = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), 0)
            decreasing = step[np.arange(len(step)), first] < 0
            if decreasing.any():
                row = start + int(np.flatnonzero(decreasing)[0]) - (0 if previous is None else 1)
                raise DataError(f"{file}: rows {row} and {row + 1} are not sorted by (bucket, dst, src, rel)")
        previous = sort_keys[-1:]
        # the CRC-32 of the buckets that end in this chunk (a bucket spanning chunks is read whole)
        whole = np.flatnonzero((edge_offsets[1:] > start) & (edge_offsets[1:] <= start + len(rows)))
        if len(whole):
            lo, hi = int(edge_offsets[whole[0]]), int(edge_offsets[whole[-1] + 1])
            block = np.ascontiguousarray(store.array("bucket_edges", checked=False)[lo:hi])
            check_bucket_crcs(crcs[whole], keys[whole] // p, keys[whole] % p, block,
                              edge_offsets[whole] - lo, edge_offsets[whole + 1] - lo, file)


LAYOUT_CHECKS["partitioning"] = verify_partitioning


# ---------------------------------------------------------------------------------------------- writing
def _relabel_rows(writer: StoreWriter, key: str, array: np.ndarray, node_map: np.ndarray, chunk_bytes: int) -> None:
    """Write ``array[node_map]`` (new row ``i`` = old row ``node_map[i]``) in chunks of whole rows.

    Each chunk's rows are gathered from the memory map in increasing old-row order (better locality), then put
    back in new-id order.
    """
    rows = _rows_per_chunk(array, chunk_bytes)
    with writer.appender(key, array.dtype, array.shape[1:]) as out:
        for start in range(0, len(node_map), rows):
            wanted = node_map[start : start + rows]
            ascending = np.argsort(wanted, kind="stable")
            gathered = np.empty((len(wanted), *array.shape[1:]), dtype=array.dtype)
            gathered[ascending] = array[wanted[ascending]]
            out.append(gathered)


def _relabel_ids(writer: StoreWriter, key: str, array: np.ndarray, inverse: np.ndarray, chunk_bytes: int) -> None:
    """Write a node index array (``(k,)``, or ``(k, 3)`` edges with node ids in columns 0 and 2) in new ids."""
    with writer.appender(key, array.dtype, array.shape[1:]) as out:
        for _, chunk in _row_chunks(array, _rows_per_chunk(array, chunk_bytes)):
            chunk = chunk.copy()
            if chunk.ndim == 1:
                chunk = inverse[chunk]
            else:
                chunk[:, 0] = inverse[chunk[:, 0]]
                chunk[:, 2] = inverse[chunk[:, 2]]
            out.append(chunk)


def _relabelled_csr_chunks(store: GraphStore, inverse: np.ndarray, chunk_edges: int) -> Iterator[EdgeChunk]:
    for chunk in iter_store_edges(store, chunk_edges):
        relabelled = EdgeChunk(inverse[chunk.src], inverse[chunk.dst], chunk.rel)
        chunk = None  # noqa: PLW2901 -- while suspended, hold only what the consumer holds
        yield relabelled


def _example_edges(store: GraphStore, inverse: np.ndarray, chunk_edges: int) -> Callable[[], Iterator[np.ndarray]]:
    """A re-iterable source of the bucket edges as ``(k, 3)`` int64 ``(src, rel, dst)`` chunks in new ids."""
    if store.has("train_edges"):
        def train_edges() -> Iterator[np.ndarray]:
            for _, chunk in _row_chunks(store.array("train_edges"), chunk_edges):
                rows = chunk.astype(np.int64, copy=True)
                rows[:, 0] = inverse[rows[:, 0]]
                rows[:, 2] = inverse[rows[:, 2]]
                yield rows

        return train_edges

    def graph_edges() -> Iterator[np.ndarray]:
        for chunk in _relabelled_csr_chunks(store, inverse, chunk_edges):
            rows = np.empty((len(chunk.src), 3), dtype=np.int64)
            rows[:, 0] = chunk.src
            rows[:, 1] = 0 if chunk.rel is None else chunk.rel
            rows[:, 2] = chunk.dst
            chunk = None  # noqa: PLW2901 -- its ids are copied: free them before the consumer works on the rows
            yield rows

    return graph_edges


def _bucket_of(rows: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    p = len(offsets) - 1
    return node_partition(rows[:, 0], offsets) * p + node_partition(rows[:, 2], offsets)


def _bin_bounds(counts: np.ndarray, max_edges: int) -> np.ndarray:
    """Boundaries ``[0, b1, ..., len(counts)]`` grouping consecutive entries of ``counts`` (edges per source
    partition) into bins of at most ``max_edges`` edges (an entry larger than that alone forms a bin)."""
    cumulative = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    bounds = [0]
    while bounds[-1] < len(counts):
        start = bounds[-1]
        end = int(np.searchsorted(cumulative, cumulative[start] + max_edges, side="right")) - 1
        bounds.append(min(len(counts), max(end, start + 1)))
    return np.asarray(bounds, dtype=np.int64)


def _write_buckets(writer: StoreWriter, edges: Callable[[], Iterator[np.ndarray]], offsets: np.ndarray,
                   max_bucket_edges: int) -> int:
    """Write ``bucket_edges`` and the sparse bucket index (``bucket_row_offsets``, ``bucket_dst``,
    ``bucket_edge_offsets``, ``bucket_crc32``); return the number of non-empty buckets.

    Pass 1 counts the edges of every bucket (every source partition beyond ``_MAX_DENSE_BIN_UNITS`` buckets). Pass
    2 scatters the edges into scratch files, one per *bin* of consecutive buckets (source partitions) holding at
    most ``max_bucket_edges`` edges (a larger one alone; at most ``_MAX_OPEN_BINS`` files open at once, more bins
    take more rounds over the source). Pass 3 sorts each bin by (bucket, dst, src, rel) in memory, appends it and
    indexes its non-empty buckets. Memory: one chunk of the source, one bin, and ``O(p + b)`` words of index;
    ``p * p`` counts only up to ``_MAX_DENSE_BIN_UNITS`` buckets.
    """
    p = len(offsets) - 1
    units = p * p if p * p <= _MAX_DENSE_BIN_UNITS else p
    unit_of = (lambda rows: _bucket_of(rows, offsets)) if units > p else (
        lambda rows: node_partition(rows[:, 0], offsets))
    counts = np.zeros(units, dtype=np.int64)
    for rows in edges():
        counts += np.bincount(unit_of(rows), minlength=units)
    bins = _bin_bounds(counts, max_bucket_edges)
    num_bins = len(bins) - 1
    keys, sizes, crcs = [], [], []
    scratch = writer.root / "_partition_scratch"
    scratch.mkdir(exist_ok=True)
    try:
        paths = [scratch / f"bin-{k}.bin" for k in range(num_bins)]
        with writer.appender("bucket_edges", np.int64, (3,)) as out:
            for first in range(0, num_bins, _MAX_OPEN_BINS):
                last = min(num_bins, first + _MAX_OPEN_BINS)
                with contextlib.ExitStack() as stack:
                    handles = [stack.enter_context(writing(paths[k], "wb")) for k in range(first, last)]
                    for rows in edges():
                        if num_bins == 1:  # every edge goes to the one bin: no bins to compute, no reordering
                            write_to(handles[0], np.ascontiguousarray(rows).data, paths[0])
                            continue
                        bin_ = np.searchsorted(bins, unit_of(rows), side="right") - 1
                        keep = (bin_ >= first) & (bin_ < last)
                        rows, bin_ = rows[keep], bin_[keep] - first
                        del keep
                        order = np.argsort(bin_, kind="stable")
                        bin_sizes = np.bincount(bin_, minlength=last - first)
                        del bin_
                        ends = np.cumsum(bin_sizes)
                        rows = rows[order]
                        del order
                        for k in np.flatnonzero(bin_sizes):
                            write_to(handles[k], np.ascontiguousarray(rows[ends[k] - bin_sizes[k] : ends[k]]).data,
                                     paths[first + k])
                        del rows
                for k in range(first, last):
                    check_read(paths[k])
                    rows = np.fromfile(paths[k], dtype=np.int64).reshape(-1, 3)
                    paths[k].unlink()
                    if not len(rows):
                        continue
                    bucket = _bucket_of(rows, offsets)
                    order = np.lexsort((rows[:, 1], rows[:, 0], rows[:, 2], bucket))
                    rows = np.ascontiguousarray(rows[order])
                    bucket = bucket[order]
                    del order
                    starts = np.flatnonzero(np.concatenate([[True], bucket[1:] != bucket[:-1]]))
                    stops = np.append(starts[1:], len(rows))
                    keys.append(bucket[starts])
                    sizes.append(stops - starts)
                    crcs.append(bucket_row_crc32(rows, starts, stops))
                    out.append(rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    keys_all = np.concatenate(keys) if keys else np.empty(0, dtype=np.int64)
    sizes_all = np.concatenate(sizes) if sizes else np.empty(0, dtype=np.int64)
    writer.write_array("bucket_row_offsets",
                       np.concatenate([[0], np.cumsum(np.bincount(keys_all // p, minlength=p))]).astype(np.int64))
    writer.write_array("bucket_dst", (keys_all % p).astype(np.int64))
    writer.write_array("bucket_edge_offsets", np.concatenate([[0], np.cumsum(sizes_all)]).astype(np.int64))
    writer.write_array("bucket_crc32", (np.concatenate(crcs) if crcs else np.empty(0)).astype(np.int64))
    return len(keys_all)


def partition_crc32(path: Path, offsets: np.ndarray, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> list[int]:
    """CRC-32 (:func:`zlib.crc32`) of the bytes of each partition's rows of the ``.npy`` file ``path``, read in
    chunks of about ``chunk_bytes`` (the disk system checks every partition it reads against them)."""
    check_read(path)
    array = np.load(path, mmap_mode="r")
    rows = _rows_per_chunk(array, chunk_bytes)
    crcs = []
    for start, stop in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        crc = 0
        for first in range(start, stop, rows):
            crc = zlib.crc32(np.ascontiguousarray(array[first:min(first + rows, stop)]).view(np.uint8), crc)
        crcs.append(crc)
    return crcs


def bucket_row_crc32(rows: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The CRC-32 (:func:`zlib.crc32`) of ``rows[starts[t]:stops[t]]`` for every ``t`` (``rows``: ``(k, 3)``
    contiguous bucket rows), in one compiled pass (:func:`suite.data.crc.crc32_segments`)."""
    from suite.data.crc import crc32_segments

    row_bytes = rows.dtype.itemsize * (rows.shape[1] if rows.ndim > 1 else 1)
    return crc32_segments(np.ascontiguousarray(rows).view(np.uint8).reshape(-1),
                          np.asarray(starts, dtype=np.int64) * row_bytes, np.asarray(stops, dtype=np.int64) * row_bytes)


def check_bucket_crcs(expected: np.ndarray, src: np.ndarray, dst: np.ndarray, rows: np.ndarray, starts: np.ndarray,
                      stops: np.ndarray, path: str | os.PathLike) -> None:
    """Check buckets read against their CRC-32s: bucket ``t`` (edges from partition ``src[t]`` to ``dst[t]``) is
    ``rows[starts[t]:stops[t]]`` and must have CRC-32 ``expected[t]`` (``bucket_crc32.npy``).

    Raises:
        DataError: ``<path>: bucket (i, j) (edges from partition i to partition j) fails its CRC-32 check``, for the
            first that fails.
    """
    actual = bucket_row_crc32(rows, starts, stops)
    bad = np.flatnonzero(actual != np.asarray(expected, dtype=np.int64))
    if len(bad):
        t = int(bad[0])
        i, j = int(src[t]), int(dst[t])
        raise DataError(f"{path}: bucket ({i}, {j}) (edges from partition {i} to partition {j}, "
                        f"{int(stops[t] - starts[t])} rows) fails its CRC-32 check (corrupted)")


def _copy_relabelled(writer: StoreWriter, store: GraphStore, key: str, node_map: np.ndarray, inverse: np.ndarray,
                     chunk_bytes: int) -> None:
    """One array in the new ids: rows of per-node arrays permuted, node ids of splits relabelled."""
    if key in _ROW_KEYS:
        _relabel_rows(writer, key, store.array(key), node_map, chunk_bytes)
    else:
        _relabel_ids(writer, key, store.array(key), inverse, chunk_bytes)


def _finalize_partitioned(writer: StoreWriter, store: GraphStore, num_edges: int, checksum: str,
                          partitioning: dict[str, Any]) -> None:
    """Write the partitioned store's metadata: the input's counts and extra fields, where it came from, and
    ``partitioning``."""
    source = {"kind": "partition", "store": str(store.path), "name": store.name, "metadata_checksum": checksum,
              "source": store.metadata.get("source", {})}
    extra = {key: value for key, value in store.metadata.items() if key not in _OWN_FIELDS}
    writer.finalize(
        name=store.name, num_nodes=store.num_nodes, num_edges=num_edges, directed=store.directed,
        num_relations=store.num_relations, num_classes=store.num_classes, feature_dim=store.feature_dim,
        source=source, partitioning=partitioning, **extra,
    )


def partition_store(
    store: GraphStore | str | os.PathLike,
    out: str | os.PathLike,
    num_partitions: int,
    order: str | os.PathLike | np.ndarray | torch.Tensor = "random",
    seed: int = 0,
    *,
    overwrite: bool = False,
    progress: bool = False,
    chunk_edges: int = DEFAULT_CHUNK_EDGES,
    max_bucket_edges: int = DEFAULT_MAX_BUCKET_EDGES,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    memory: MemoryBudget | None = None,
) -> GraphStore:
    """Write a partitioned copy of ``store`` at ``out`` (see the module docstring for the layout) and open it.

    Every array is rewritten in the new ids: both CSRs are rebuilt out-of-core by
    :func:`~suite.data.csr.write_csrs` from the relabelled edges; ``features`` and ``labels`` are permuted in
    row chunks gathered from the memory map; node splits (``train_nodes`` ...) and edge splits (``train_edges``
    ...) keep their row order with node ids relabelled. An input ``node_map`` (a store partitioned before) is
    composed, and old layout files are rebuilt; any other file is dropped and listed in
    ``metadata["partitioning"]["dropped_keys"]``. Other top-level metadata fields (counts such as
    ``labeled_nodes``) are copied. The store appears at ``out`` only when complete (:func:`create_store`).

    Args:
        store: the input store (or its path).
        out: folder of the new store; must differ from the input.
        num_partitions: ``p``, in ``[1, num_nodes]``.
        order: node order: a name in :data:`ORDERINGS` (``"random"``, ``"train-first"``), a ``.npy`` file or an
            array holding ``node_map`` (entry ``i`` = original id given new id ``i``).
        seed: seed of random orderings.
        overwrite: replace an existing store at ``out``.
        progress: show a progress bar over the steps.
        chunk_edges: edges per streamed chunk.
        max_bucket_edges: edges per in-memory sort (CSR rebuild and buckets).
        chunk_bytes: bytes of rows per chunk when permuting features, labels and splits.
        memory: the memory partitioning may use: ``chunk_edges``, ``max_bucket_edges`` and ``chunk_bytes``
            become the largest sizes that fit what is left of it once the order is drawn
            (:mod:`suite.data.out_of_core`); None: the sizes as given.

    Returns:
        The new store, opened.

    Raises:
        ConfigError: bad ``num_partitions``, unknown ordering, or ``out`` equal to the input store.
        DataError: an order file or array that is not a permutation; ``out`` exists without ``overwrite``.
        MemoryLimitError: ``memory`` leaves too little for the smallest chunks and sorts.
    """
    from tqdm import tqdm

    if not isinstance(store, GraphStore):
        store = GraphStore.open(store)
    n = store.num_nodes
    offsets = partition_offsets(n, num_partitions)
    p = len(offsets) - 1
    out = Path(out)
    if out.resolve() == store.path.resolve():
        raise ConfigError(f"out must differ from the input store, got {out}")
    node_map, order_info = resolve_order(store, order, seed)
    inverse = inverse_permutation(node_map)
    sizes = sizes_for(memory, OutOfCoreSizes(chunk_edges, max_bucket_edges, chunk_bytes),
                      f"partition of {store.path}", RESIDENT_BYTES_PER_NODE * n)
    chunk_edges, max_bucket_edges, chunk_bytes = sizes.chunk_edges, sizes.max_bucket_edges, sizes.chunk_bytes
    files = store.metadata["files"]
    rebuilt = set(_CSR_KEYS) | set(PARTITION_KEYS) | _OLD_LAYOUT_KEYS
    copied = [key for key in _ROW_KEYS + NODE_SPLITS + EDGE_SPLITS if key in files]
    dropped = sorted(set(files) - rebuilt - set(copied))
    steps = ["csr", *copied, "node_map", "buckets", "metadata"]

    with create_store(out, overwrite=overwrite) as writer, \
            tqdm(total=len(steps), desc=f"partition {store.name}", disable=not progress, unit="step") as bar:
        bar.set_postfix_str("csr")
        num_edges = write_csrs(
            writer, _relabelled_csr_chunks(store, inverse, chunk_edges), n,
            num_relations=store.num_relations, chunk_edges=chunk_edges, max_bucket_edges=max_bucket_edges,
        )
        if num_edges != store.num_edges:
            raise AssertionError(f"relabelled CSR has {num_edges} edges, the input {store.num_edges}")
        bar.update()
        for key in copied:
            bar.set_postfix_str(key)
            _copy_relabelled(writer, store, key, node_map, inverse, chunk_bytes)
            bar.update()
        bar.set_postfix_str("node_map")
        if store.has("node_map"):
            _relabel_rows(writer, "node_map", store.array("node_map"), node_map, chunk_bytes)
        else:
            writer.write_array("node_map", node_map)
        writer.write_array("partition_offsets", offsets)
        feature_crc32 = (partition_crc32(writer.path_for("features"), offsets, chunk_bytes)
                         if "features" in copied else None)
        bar.update()
        bar.set_postfix_str("buckets")
        num_buckets = _write_buckets(writer, _example_edges(store, inverse, chunk_edges), offsets,
                                     max_bucket_edges)
        bar.update()
        bar.set_postfix_str("metadata")
        checksum = file_checksum(store.path / METADATA_FILE)
        partitioning = {
            "layout_version": LAYOUT_VERSION, "num_partitions": p, **order_info, "seed": seed,
            "partition_sizes": "balanced: the first n % p partitions hold n // p + 1 nodes, the others n // p",
            "node_map": "new id -> original id",
            "bucket_source": "train_edges" if store.has("train_edges") else "edges",
            "source_store": str(store.path), "source_checksum": checksum, "dropped_keys": dropped,
            **({"feature_crc32": feature_crc32} if feature_crc32 is not None else {}),
            "num_buckets": num_buckets,
        }
        _finalize_partitioned(writer, store, num_edges, checksum, partitioning)
        bar.update()
    return GraphStore.open(out)
