"""Out-of-core construction of the two CSRs of a store from a stream of edge chunks.

The edges of a graph far larger than memory arrive in chunks (from a generator or a loader). They are spilled
once to a scratch file while in- and out-degrees are counted (O(num_nodes) words); the degree counts then split
the node range into buckets of at most ``max_bucket_edges`` edges; a second pass scatters the spill into one
file per bucket and direction; each bucket is then sorted (and optionally deduplicated) in memory and appended
to the final ``indices`` file. Peak memory is O(num_nodes) words plus a few arrays of ``max_bucket_edges``
elements, whatever the number of edges.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from suite.data.store import GraphStore, StoreWriter, index_dtype
from suite.io import close_quietly, flush_to, open_read, open_write, write_to, writing

DEFAULT_CHUNK_EDGES = 1 << 23
DEFAULT_MAX_BUCKET_EDGES = 1 << 25


@dataclass(frozen=True)
class EdgeChunk:
    """A chunk of directed edges ``src[i] -> dst[i]`` with optional relation types ``rel[i]``."""

    src: np.ndarray
    dst: np.ndarray
    rel: np.ndarray | None = None


def _spill_dtype(num_nodes: int) -> np.dtype:
    idx = index_dtype(num_nodes)
    return np.dtype([("src", idx), ("dst", idx), ("rel", np.int32)])


def _to_records(chunk: EdgeChunk, num_nodes: int, num_relations: int, symmetrize: bool,
                drop_self_loops: bool) -> np.ndarray:
    src = np.asarray(chunk.src)
    dst = np.asarray(chunk.dst)
    rel = np.zeros(len(src), np.int32) if chunk.rel is None else np.asarray(chunk.rel)
    if not (len(src) == len(dst) == len(rel)):
        raise ValueError(f"edge chunk arrays differ in length: {len(src)}, {len(dst)}, {len(rel)}")
    if len(src):
        for name, values, high in (("source", src, num_nodes), ("destination", dst, num_nodes),
                                   ("relation", rel, num_relations)):
            if values.min() < 0 or values.max() >= high:
                raise ValueError(f"edge {name} id out of range [0, {high}): {int(values.min())}..{int(values.max())}")
    if symmetrize:
        src, dst, rel = np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([rel, rel])
    if drop_self_loops:
        keep = src != dst
        src, dst, rel = src[keep], dst[keep], rel[keep]
    records = np.empty(len(src), _spill_dtype(num_nodes))
    records["src"], records["dst"], records["rel"] = src, dst, rel
    return records


def _bucket_bounds(degrees: np.ndarray, max_bucket_edges: int) -> np.ndarray:
    """Node-range boundaries ``[0, b1, ..., n]`` so that each range holds at most ``max_bucket_edges`` edges.

    A single node whose degree alone exceeds the budget gets a bucket of its own.
    """
    cumulative = np.concatenate([[0], np.cumsum(degrees, dtype=np.int64)])
    bounds = [0]
    n = len(degrees)
    while bounds[-1] < n:
        start = bounds[-1]
        limit = cumulative[start] + max_bucket_edges
        end = int(np.searchsorted(cumulative, limit, side="right")) - 1
        bounds.append(min(n, max(end, start + 1)))
    return np.asarray(bounds, dtype=np.int64)


def _read_records(path: Path, dtype: np.dtype, chunk: int) -> Iterator[np.ndarray]:
    with open_read(path, "rb") as handle:
        while True:
            records = np.fromfile(handle, dtype=dtype, count=chunk)
            if not len(records):
                return
            yield records


def _scatter(spill: Path, dtype: np.dtype, key: str, bounds: np.ndarray, folder: Path, chunk: int) -> list[Path]:
    """Split the spill file into one file per bucket of ``key`` (``"src"`` or ``"dst"``)."""
    paths = [folder / f"{key}-{i}.bin" for i in range(len(bounds) - 1)]
    handles = []
    try:
        handles.extend(open_write(path, "wb") for path in paths)
        for records in _read_records(spill, dtype, chunk):
            if len(handles) == 1:  # one bucket takes every record as it comes: nothing to reorder
                write_to(handles[0], records.data, handles[0].name)
                continue
            bucket = np.searchsorted(bounds, records[key], side="right") - 1
            order = np.argsort(bucket, kind="stable")
            counts = np.bincount(bucket, minlength=len(paths))
            for handle, part in zip(handles, np.split(records[order], np.cumsum(counts)[:-1])):
                if len(part):
                    write_to(handle, part.data, handle.name)
        for handle in handles:
            flush_to(handle, handle.name)
    finally:
        for handle in handles:
            close_quietly(handle)  # after a failure only: the flushes above wrote everything
    return paths


def _sort_key(rows: np.ndarray, cols: np.ndarray, rel: np.ndarray, num_nodes: int,
              num_relations: int) -> np.ndarray | None:
    """One int64 key ordering edges by (row, col, rel), or None when it could overflow.

    Sorting one key is 2-3x faster than ``np.lexsort`` on three.
    """
    low, high = int(rows.min()), int(rows.max())
    if (high - low + 1) * num_nodes * num_relations >= 2**63:
        return None
    key = (rows.astype(np.int64) - low) * (num_nodes * num_relations)
    key += cols.astype(np.int64) * num_relations
    key += rel
    return key


def _sorted_unique(rows: np.ndarray, cols: np.ndarray, rel: np.ndarray, deduplicate: bool, num_nodes: int,
                   num_relations: int) -> np.ndarray:
    """Order of edges by (row, col, rel); with ``deduplicate``, only the first of equal triples."""
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)
    key = _sort_key(rows, cols, rel, num_nodes, num_relations)
    if key is None:
        order = np.lexsort((rel, cols, rows))
        if not deduplicate or len(order) < 2:
            return order
        r, c, t = rows[order], cols[order], rel[order]
        keep = np.ones(len(order), dtype=bool)
        keep[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1]) | (t[1:] != t[:-1])
        return order[keep]
    order = np.argsort(key)  # equal keys are identical edges, so stability does not matter
    if not deduplicate:
        return order
    sorted_key = key[order]
    keep = np.ones(len(order), dtype=bool)
    keep[1:] = sorted_key[1:] != sorted_key[:-1]
    return order[keep]


def _write_direction(writer: StoreWriter, direction: str, bucket_paths: list[Path], bounds: np.ndarray,
                     dtype: np.dtype, num_nodes: int, num_relations: int, deduplicate: bool) -> int:
    row_key, col_key = ("dst", "src") if direction == "in" else ("src", "dst")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    idx = index_dtype(num_nodes)
    with contextlib.ExitStack() as stack:
        indices_out = stack.enter_context(writer.appender(f"{direction}_indices", idx))
        typed = num_relations > 1
        relations_out = stack.enter_context(writer.appender(f"{direction}_relations", np.int32)) if typed else None
        for (low, high), path in zip(zip(bounds[:-1], bounds[1:]), bucket_paths):
            records = np.fromfile(path, dtype=dtype)
            path.unlink()
            order = _sorted_unique(records[row_key], records[col_key], records["rel"], deduplicate, num_nodes,
                                   num_relations)
            records = records[order]
            indptr[low + 1 : high + 1] = np.bincount(records[row_key] - low, minlength=high - low)
            indices_out.append(records[col_key])
            if relations_out is not None:
                relations_out.append(records["rel"])
    np.cumsum(indptr, out=indptr)
    writer.write_array(f"{direction}_indptr", indptr)
    return int(indptr[-1])


def write_csrs(
    writer: StoreWriter,
    chunks: Iterable[EdgeChunk],
    num_nodes: int,
    *,
    num_relations: int = 1,
    symmetrize: bool = False,
    drop_self_loops: bool = False,
    deduplicate: bool = False,
    chunk_edges: int = DEFAULT_CHUNK_EDGES,
    max_bucket_edges: int = DEFAULT_MAX_BUCKET_EDGES,
) -> int:
    """Build ``in_*`` and ``out_*`` CSR files of ``writer`` from edge chunks; return the number of edges.

    Args:
        writer: the store being written; scratch files go to a folder inside its staging directory.
        chunks: edges, any chunk sizes; ids are checked against ``num_nodes`` and ``num_relations``.
        num_nodes: number of nodes.
        num_relations: relation types; ``*_relations`` files are written when it is > 1.
        symmetrize: also add the reverse of every edge (for undirected graphs).
        drop_self_loops: drop edges ``v -> v``.
        deduplicate: keep one copy of repeated ``(src, dst, rel)`` triples.
        chunk_edges: edges per read during the scatter pass.
        max_bucket_edges: the largest bucket sorted in memory (bounds peak memory).

    Neighbour lists come out sorted by neighbour id, then relation.
    """
    dtype = _spill_dtype(num_nodes)
    scratch = writer.root / "_scratch"
    scratch.mkdir(exist_ok=True)
    spill = scratch / "edges.bin"
    in_degree = np.zeros(num_nodes, dtype=np.int64)
    out_degree = np.zeros(num_nodes, dtype=np.int64)
    try:
        with writing(spill, "wb") as handle:
            for chunk in chunks:
                records = _to_records(chunk, num_nodes, num_relations, symmetrize, drop_self_loops)
                in_degree += np.bincount(records["dst"], minlength=num_nodes)
                out_degree += np.bincount(records["src"], minlength=num_nodes)
                write_to(handle, records.data, spill)
        counts = []
        for direction, key, degrees in (("in", "dst", in_degree), ("out", "src", out_degree)):
            bounds = _bucket_bounds(degrees, max_bucket_edges)
            paths = _scatter(spill, dtype, key, bounds, scratch, chunk_edges)
            counts.append(_write_direction(writer, direction, paths, bounds, dtype, num_nodes, num_relations,
                                           deduplicate))
        if counts[0] != counts[1]:
            raise AssertionError(f"in- and out-CSR disagree on the number of edges: {counts}")
        return counts[0]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def iter_store_edges(store: GraphStore, chunk_edges: int = DEFAULT_CHUNK_EDGES) -> Iterator[EdgeChunk]:
    """Stream a store's edges from its out-CSR in chunks of about ``chunk_edges`` (ordered by source)."""
    indptr = store.array("out_indptr")
    indices = store.array("out_indices")
    relations = store.array("out_relations") if store.has("out_relations") else None
    node = 0
    n = store.num_nodes
    while node < n:
        end = int(np.searchsorted(indptr, indptr[node] + chunk_edges, side="right")) - 1
        end = min(n, max(end, node + 1))
        lo, hi = int(indptr[node]), int(indptr[end])
        degrees = np.diff(np.asarray(indptr[node : end + 1]))
        src = np.repeat(np.arange(node, end, dtype=np.int64), degrees)
        rel = None if relations is None else np.asarray(relations[lo:hi])
        yield EdgeChunk(src, np.asarray(indices[lo:hi]), rel)
        node = end
