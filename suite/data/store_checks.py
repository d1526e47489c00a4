"""The checks a run depends on, made when a store is opened for a run and cached in its ``metadata.json``.

A run must never hand a compiled kernel (the numba samplers, torch's C++ index ops) an id outside its table, a
label outside ``[0, num_classes)`` or a non-finite feature: the kernels do not check bounds, so the result is a
segmentation fault or a traceback, not an error naming the file. This module checks every array of a store in
two layers:

1. **Scan** (:func:`scan_file`, one streaming pass over a file, bounded memory): the file's SHA-256 (compared with
   the checksum recorded when the store was written) and statistics of its values: for integer arrays the
   minimum and maximum (per column for edge lists of up to :data:`MAX_COLUMNS` columns), whether a 1-D array never
   decreases, its first and last entry; for float arrays the number of non-finite values and the first row holding
   one. The scan costs a read of the file; its result is cached in ``metadata.json`` under ``checks`` with the
   file's *signature* (size, modification time in ns, inode), so it is paid once per store: a file that changes
   (rewritten, copied, corrupted) gets a new signature and is scanned again. A store written by this suite gets
   its scans at :meth:`~suite.data.store.StoreWriter.finalize`, from the pass that computes its checksums.
2. **Rules** (:data:`RULES`, no data read): what the statistics must satisfy given the metadata's counts, e.g.
   ``in_indices`` in ``[0, num_nodes)``, ``labels`` in ``[-1, num_classes)``, ``features`` all finite, CSR offsets
   from 0 to ``num_edges`` never decreasing, edge lists' node columns in ``[0, num_nodes)`` and relation column in
   ``[0, num_relations)``, the partition layout's offsets consistent.

:func:`check_store` applies both; :meth:`GraphStore.check_for_run <suite.data.store.GraphStore.check_for_run>`
calls it once per opened store (the runner does so before a run's folder exists, and every array handed out by a
store is checked first). Errors are one line naming the file: ``<store>/labels.npy: value 99 is out of range
[-1, 7) for labels (num_classes=7)``. :meth:`~suite.data.store.GraphStore.verify` remains the deep check
(CSR degree consistency, permutations, bucket membership), which a run does not need.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from suite.errors import DataError, LockedError, describe_os_error
from suite.data.npy import read_npy_header
from suite.io import CHECKSUM_ALGORITHM, open_read

CHECKS_FIELD = "checks"
CHECKS_VERSION = 1
MAX_COLUMNS = 8
"""Integer arrays with at most this many columns get per-column minima and maxima (edge lists ``(k, 3)``)."""
_CHUNK_BYTES = 8 << 20  # a scan holds about 3 chunks (the rows, the joined copy, comparisons): fits a small cap


def file_signature(path: str | os.PathLike) -> list[int]:
    """``[size, mtime_ns, inode]`` of a file: a cached scan is reused only while all three are unchanged."""
    info = os.stat(path)
    return [info.st_size, info.st_mtime_ns, info.st_ino]


def _row_bytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    return math.prod(shape[1:]) * dtype.itemsize


def scan_file(path: str | os.PathLike, algorithm: str = CHECKSUM_ALGORITHM) -> dict[str, Any]:
    """One pass over a ``.npy`` file: its checksum and the statistics :data:`RULES` read (see the module docstring).

    Returns:
        ``{"signature", "checksum", "dtype", "rows", ...}`` plus, for integers, ``min``, ``max``, ``column_min``,
        ``column_max`` (2-D arrays of at most :data:`MAX_COLUMNS` columns), ``nondecreasing``, ``first``, ``last``
        (1-D arrays); for floats, ``non_finite`` and ``first_non_finite_row``. ``min``/``max`` are None for an
        empty array.

    Raises:
        DataError: the file cannot be read or is not a valid ``.npy`` file.
    """
    path = Path(path)
    try:
        signature = file_signature(path)
        dtype, shape, offset = read_npy_header(path)
        digest = hashlib.new(algorithm)
        with open(path, "rb") as handle:
            digest.update(handle.read(offset))
        if dtype.hasobject:
            raise ValueError("object arrays are not allowed")
        expected = offset + int(np.prod(shape, dtype=object)) * dtype.itemsize
        if path.stat().st_size < expected:
            raise ValueError(f"file is short: {path.stat().st_size} bytes, its header needs {expected}")
    except (OSError, ValueError) as err:
        raise DataError(f"{path}: cannot read ({_reason(err)})") from None
    # Plain reads, not a memory map: the pages of a mapped file count toward the resident memory of the process
    # (a scan of a multi-GiB file would look like that much memory), read ones do not stay mapped.
    try:
        handle = open_read(path, "rb")
    except OSError as err:
        raise DataError(f"{path}: cannot read ({_reason(err)})") from None
    handle.seek(offset)
    row_elements = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
    first_value = last_value = None
    stats: dict[str, Any] = {"signature": signature, "dtype": str(dtype), "rows": int(shape[0]) if shape else 0}
    rows_per_chunk = max(1, _CHUNK_BYTES // max(1, _row_bytes(shape, dtype))) if shape else 1
    kind = dtype.kind
    columns = int(shape[1]) if len(shape) == 2 else 1
    per_column = kind in "iu" and len(shape) == 2 and columns <= MAX_COLUMNS
    low = high = None
    col_low = col_high = None
    nondecreasing, previous = True, None
    non_finite, first_bad = 0, None
    try:
        if not shape:  # a 0-d array: hash its bytes, no statistics
            digest.update(handle.read(dtype.itemsize))
        for start in range(0, shape[0] if shape else 0, rows_per_chunk):
            rows = min(rows_per_chunk, shape[0] - start)
            chunk = np.fromfile(handle, dtype=dtype, count=rows * row_elements)
            if len(chunk) != rows * row_elements:
                raise OSError(f"file is short at row {start}")
            chunk = chunk.reshape(rows, *shape[1:])
            digest.update(chunk.reshape(-1).view(np.uint8))
            if chunk.ndim == 1 and len(chunk):
                first_value = chunk[0] if first_value is None else first_value
                last_value = chunk[-1]
            if chunk.size == 0:
                continue
            if kind in "iu":
                low = int(chunk.min()) if low is None else min(low, int(chunk.min()))
                high = int(chunk.max()) if high is None else max(high, int(chunk.max()))
                if per_column:
                    mins, maxs = chunk.min(axis=0), chunk.max(axis=0)
                    col_low = mins if col_low is None else np.minimum(col_low, mins)
                    col_high = maxs if col_high is None else np.maximum(col_high, maxs)
                if chunk.ndim == 1 and nondecreasing:
                    joined = chunk if previous is None else np.concatenate([[previous], chunk])
                    nondecreasing = bool((joined[1:] >= joined[:-1]).all())
                    previous = chunk[-1]
            elif kind == "f":
                bad = ~np.isfinite(chunk)
                count = int(np.count_nonzero(bad))
                if count and first_bad is None:
                    first_bad = start + int(np.flatnonzero(bad.reshape(len(chunk), -1).any(axis=1))[0])
                non_finite += count
    except OSError as err:
        raise DataError(f"{path}: cannot read ({_reason(err)})") from None
    finally:
        handle.close()
    stats["checksum"] = f"{algorithm}:{digest.hexdigest()}"
    if kind in "iu":
        stats.update(min=low, max=high)
        if per_column:
            stats.update(column_min=None if col_low is None else [int(v) for v in col_low],
                         column_max=None if col_high is None else [int(v) for v in col_high])
        if len(shape) == 1:
            stats.update(nondecreasing=nondecreasing,
                         first=int(first_value) if shape[0] else None, last=int(last_value) if shape[0] else None)
    elif kind == "f":
        stats.update(non_finite=non_finite, first_non_finite_row=first_bad)
    return stats


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError) and err.errno is not None:
        return describe_os_error(err)
    text = getattr(err, "strerror", None) or str(err)
    return " ".join(str(text).split())[:200]


# ---------------------------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class OutOfRange:
    """A rule's finding: some value (of ``column``) lies outside ``[low, high)``; :func:`check_store` locates the
    first such row to name it.

    Attributes:
        low / high: the allowed range.
        what: what one value is, e.g. ``"destination node id"``.
        context: where the bound comes from, e.g. ``"num_nodes in metadata.json"``.
        column: the column of a 2-D array (None: any value).
    """

    low: int
    high: int
    what: str
    context: str
    column: int | None = None


Rule = Callable[[dict[str, Any], dict[str, Any]], "str | OutOfRange | None"]
"""A rule: ``(stats of the file, store metadata) -> None`` when the file is usable, else what is wrong (a message,
or an :class:`OutOfRange` finding)."""


def _in_range(stats: dict[str, Any], low: int, high: int, what: str, context: str,
              column: int | None = None) -> OutOfRange | None:
    """None when every value (of ``column``) lies in ``[low, high)``; else the finding."""
    if column is None:
        lo, hi = stats.get("min"), stats.get("max")
    else:
        mins, maxs = stats.get("column_min"), stats.get("column_max")
        lo = None if mins is None else mins[column]
        hi = None if maxs is None else maxs[column]
    if lo is None:  # empty
        return None
    return OutOfRange(low, high, what, context, column) if lo < low or hi >= high else None


def _offsets(stats: dict[str, Any], end: int, what: str) -> str | None:
    """Offsets: start at 0, end at ``end``, never decrease."""
    if stats.get("rows", 0) == 0:
        return f"is empty; {what} need at least one entry"
    if stats.get("first") != 0 or stats.get("last") != end:
        return f"must start at 0 and end at {end} ({what}), got {stats.get('first')}..{stats.get('last')}"
    if not stats.get("nondecreasing", False):
        return f"offsets decrease somewhere ({what} must never decrease)"
    return None


def _node_ids(stats: dict[str, Any], meta: dict[str, Any]) -> OutOfRange | None:
    return _in_range(stats, 0, meta["num_nodes"], "node id", "num_nodes in metadata.json")


def _relations(stats: dict[str, Any], meta: dict[str, Any]) -> OutOfRange | None:
    return _in_range(stats, 0, meta["num_relations"], "relation id", "num_relations in metadata.json")


def _indptr(stats: dict[str, Any], meta: dict[str, Any]) -> str | None:
    return _offsets(stats, meta["num_edges"], f"CSR offsets of num_edges={meta['num_edges']} edges")


def _labels(stats: dict[str, Any], meta: dict[str, Any]) -> OutOfRange | None:
    classes = meta["num_classes"]
    if classes > 0:
        return _in_range(stats, -1, classes, "label", "num_classes in metadata.json; -1 = unlabeled")
    return _in_range(stats, -1, 2**62, "label", "-1 = unlabeled, classes from 0")


def _finite(stats: dict[str, Any], meta: dict[str, Any]) -> str | None:
    del meta
    if stats.get("non_finite"):
        return (f"{stats['non_finite']} non-finite values (NaN or inf), the first in row "
                f"{stats.get('first_non_finite_row')}")
    return None


def _edge_list(stats: dict[str, Any], meta: dict[str, Any]) -> str | OutOfRange | None:
    if "column_min" not in stats:
        return None if stats.get("rows", 0) == 0 else "expected (k, 3) integer rows 'src, rel, dst'"
    nodes, relations = "num_nodes in metadata.json", "num_relations in metadata.json"
    n, r = meta["num_nodes"], meta["num_relations"]
    return (_in_range(stats, 0, n, "source node id", nodes, column=0)
            or _in_range(stats, 0, r, "relation id", relations, column=1)
            or _in_range(stats, 0, n, "destination node id", nodes, column=2))


def _partition_offsets(stats: dict[str, Any], meta: dict[str, Any]) -> str | None:
    return _offsets(stats, meta["num_nodes"], f"partition boundaries of num_nodes={meta['num_nodes']} nodes")


def _rows_of(meta: dict[str, Any], key: str) -> int:
    entry = meta["files"].get(key)
    return entry["shape"][0] if isinstance(entry, dict) and entry.get("shape") else 0


def _bucket_edge_offsets(stats: dict[str, Any], meta: dict[str, Any]) -> str | None:
    rows = _rows_of(meta, "bucket_edges")
    return _offsets(stats, rows, f"bucket boundaries of the {rows} rows of bucket_edges")


def _bucket_row_offsets(stats: dict[str, Any], meta: dict[str, Any]) -> str | None:
    buckets = _rows_of(meta, "bucket_dst")
    return _offsets(stats, buckets, f"source-partition boundaries of the {buckets} non-empty buckets")


def _bucket_dst(stats: dict[str, Any], meta: dict[str, Any]) -> OutOfRange | None:
    p = meta.get("partitioning", {}).get("num_partitions", 0)
    return _in_range(stats, 0, p, "destination partition", "partitioning.num_partitions in metadata.json")


RULES: dict[str, Rule] = {
    "in_indptr": _indptr, "out_indptr": _indptr,
    "in_indices": _node_ids, "out_indices": _node_ids, "node_map": _node_ids,
    "in_relations": _relations, "out_relations": _relations,
    "labels": _labels, "features": _finite,
    "train_nodes": _node_ids, "valid_nodes": _node_ids, "test_nodes": _node_ids,
    "train_edges": _edge_list, "valid_edges": _edge_list, "test_edges": _edge_list, "bucket_edges": _edge_list,
    "partition_offsets": _partition_offsets, "bucket_edge_offsets": _bucket_edge_offsets,
    "bucket_row_offsets": _bucket_row_offsets, "bucket_dst": _bucket_dst,
}
"""The rule of each standard file (see :mod:`suite.data.store` and :mod:`suite.data.partition`)."""

_NEGATIVES = re.compile(r"^(train|valid|test)_(edges_neg|dst_neg|src_neg)$")  # ogb evaluation candidates: node ids


def rule_for(key: str) -> Rule | None:
    """The rule of file ``key`` (None: only its checksum is checked)."""
    if key in RULES:
        return RULES[key]
    if _NEGATIVES.match(key):
        return _node_ids
    return None


# ---------------------------------------------------------------------------------------------- store
def scans_for(root: Path, files: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Scan every file of ``files`` (metadata entries) under ``root``: ``{key: stats}`` (for ``finalize``)."""
    return {key: scan_file(root / entry["path"]) for key, entry in files.items()}


def _cached_scans(meta: dict[str, Any]) -> dict[str, Any]:
    checks = meta.get(CHECKS_FIELD)
    if not isinstance(checks, dict) or checks.get("version") != CHECKS_VERSION:
        return {}
    files = checks.get("files")
    return files if isinstance(files, dict) else {}


def _usable(cached: Any, signature: list[int], entry: dict[str, Any]) -> bool:
    return (isinstance(cached, dict) and cached.get("signature") == signature
            and cached.get("checksum") == entry.get("checksum") and cached.get("dtype") == entry.get("dtype"))


PARTITION_CHECKSUMS = {"features": "feature_crc32", "bucket_edges": "bucket_crc32"}
"""Files of a partitioned store whose partitions (or buckets) carry their own CRC-32 (checked at every read by the
disk system): the features' in ``metadata["partitioning"]["feature_crc32"]`` (a list), the buckets' in the file
``bucket_crc32.npy``."""


def partition_checksummed(meta: dict[str, Any]) -> set[str]:
    """The files of ``meta``'s store checked partition by partition when read (see :data:`PARTITION_CHECKSUMS`)."""
    partitioning = meta.get("partitioning")
    if not isinstance(partitioning, dict):
        return set()
    files = meta.get("files", {})
    return {key for key, field in PARTITION_CHECKSUMS.items()
            if isinstance(partitioning.get(field), list) or field in files}


def check_store(store: Any, *, cache: bool = True, whole_files: bool = True) -> dict[str, dict[str, Any]]:
    """Check every file of an opened store against :data:`RULES` and its recorded checksum.

    Files whose cached scan (``metadata.json`` ``checks``) still matches their signature are not read; the others
    are scanned, and their scans are written back into ``metadata.json`` when ``cache`` (best effort: skipped when
    the store is read-only or another process is writing it).

    With ``whole_files=False`` the whole-file checksum of a file checked partition by partition when read
    (:func:`partition_checksummed`) is not compared: its reader reports a mismatch naming the partition, and can be
    told not to check (the disk system's ``verify_checksums: false``). Its rules still apply.

    Returns:
        The scans of every file, by key.

    Raises:
        DataError: one line naming the first file that breaks a rule, or whose checksum does not match.
    """
    meta = store.metadata
    cached = _cached_scans(meta)
    by_partition = set() if whole_files else partition_checksummed(meta)
    scans: dict[str, dict[str, Any]] = {}
    fresh: dict[str, dict[str, Any]] = {}
    for key, entry in meta["files"].items():
        path = store.path / entry["path"]
        try:
            signature = file_signature(path)
        except OSError as err:
            raise DataError(f"{path}: cannot read ({_reason(err)})") from None
        stats = cached.get(key)
        if not _usable(stats, signature, entry):
            stats = scan_file(path)  # SHA-256, as the store's writer hashed it (another algorithm: a mismatch)
            if stats["checksum"] == entry["checksum"]:
                fresh[key] = stats
        rule = rule_for(key)
        problem = rule(stats, meta) if rule is not None else None
        if isinstance(problem, OutOfRange):
            raise DataError(f"{path}: {_locate(path, problem)}")
        if problem:
            raise DataError(f"{path}: {problem}")
        if stats["checksum"] != entry["checksum"] and key not in by_partition:
            raise DataError(f"{path}: checksum mismatch (file changed since it was written; metadata says "
                            f"{entry['checksum'][:19]}..., the file hashes to {stats['checksum'][:19]}...)")
        scans[key] = stats
    if fresh and cache:
        _write_cache(store, fresh)
    return scans


def _locate(path: Path, finding: OutOfRange) -> str:
    """The message of ``finding``, naming the first row (and column) holding a value out of range."""
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    rows = max(1, _CHUNK_BYTES // max(1, _row_bytes(array.shape, array.dtype)))
    for start in range(0, array.shape[0], rows):
        chunk = np.asarray(array[start:start + rows])
        values = chunk if finding.column is None else chunk[:, finding.column]
        bad = (values < finding.low) | (values >= finding.high)
        if bad.any():
            flat = int(np.flatnonzero(bad.reshape(len(values), -1).any(axis=1))[0])
            row_values = values[flat].reshape(-1)
            value = int(row_values[((row_values < finding.low) | (row_values >= finding.high))][0])
            return (f"row {start + flat}: {finding.what} {value} is out of range [{finding.low}, "
                    f"{finding.high}) ({finding.context})")
    return f"a {finding.what} is out of range [{finding.low}, {finding.high}) ({finding.context})"


def checks_field(scans: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``checks`` field of ``metadata.json`` holding ``scans``."""
    return {"version": CHECKS_VERSION, "files": scans}


def _write_cache(store: Any, fresh: dict[str, dict[str, Any]]) -> None:
    """Add ``fresh`` scans to the store's ``metadata.json`` (atomically, under the store's writer lock; skipped if
    the store is being written, read-only, or its metadata changed since it was opened)."""
    import json

    from suite.io import atomic_write_json, exclusive_lock, lock_path

    meta_path = store.path / "metadata.json"
    with contextlib.suppress(LockedError, OSError, ValueError):
        with exclusive_lock(lock_path(store.path), f"{store.path}: store"):
            current = json.loads(meta_path.read_text())
            if not isinstance(current, dict) or current.get("files") != store.metadata["files"]:
                return  # replaced since we opened it: the scans describe other files
            scans = {**_cached_scans(current), **fresh}
            current[CHECKS_FIELD] = checks_field(scans)
            atomic_write_json(meta_path, current)
            store.metadata[CHECKS_FIELD] = current[CHECKS_FIELD]


__all__ = ["CHECKS_FIELD", "MAX_COLUMNS", "PARTITION_CHECKSUMS", "RULES", "OutOfRange", "check_store", "partition_checksummed", "checks_field", "file_signature", "rule_for",
           "scan_file", "scans_for"]
