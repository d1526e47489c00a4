"""GraphStore: one graph as a folder of memory-mapped ``.npy`` files plus ``metadata.json``.

Layout (every file optional unless marked *required*; keys are file names without ``.npy``):

=================  ==============  ===================================================================
key                shape / dtype   meaning
=================  ==============  ===================================================================
in_indptr *        (n+1,) int64    CSR by destination: in-neighbours of v are ``in_indices[in_indptr[v]:in_indptr[v+1]]``
in_indices *       (m,) int32|64   source node of each in-edge (int64 when n >= 2**31)
in_relations       (m,) int32|64   relation type of each in-edge (when ``num_relations > 1``)
out_indptr *       (n+1,) int64    CSR by source (out-neighbours)
out_indices *      (m,) int32|64   destination node of each out-edge
out_relations      (m,) int32|64   relation type of each out-edge
features           (n, d) f32|f16  node features, row-major
labels             (n,) int64      class of each node, -1 = unlabeled
train_nodes ...    (k,) int64      node split index arrays: ``train_nodes``, ``valid_nodes``, ``test_nodes``
train_edges ...    (k, 3) int64    link-prediction edge splits, columns ``(src, rel, dst)``; rel is 0 when untyped
=================  ==============  ===================================================================

Edges are directed; an undirected graph (``directed: false``) stores both directions of each edge, so ``m``
counts directed edges. Opening a store maps its files copy-on-write (``np.load(mmap_mode="c")``): it reads only
headers and metadata, takes no memory, and hands out zero-copy torch tensors whose writes never reach the files.
:meth:`GraphStore.verify` re-reads everything: checksums, ranges, NaNs and CSR consistency.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from suite.errors import DataError, describe_os_error
from suite.data.npy import NpyAppender, read_npy_header
from suite.io import atomic_write_json, check_read, file_checksum, staged_directory

FORMAT_NAME = "gnnsuite-graphstore"
FORMAT_VERSION = 1
METADATA_FILE = "metadata.json"
NODE_SPLITS = ("train_nodes", "valid_nodes", "test_nodes")
EDGE_SPLITS = ("train_edges", "valid_edges", "test_edges")
REQUIRED_KEYS = ("in_indptr", "in_indices", "out_indptr", "out_indices")
PARTITION_KEYS = ("node_map", "partition_offsets", "bucket_row_offsets", "bucket_dst", "bucket_edge_offsets",
                  "bucket_crc32", "bucket_edges")
LAYOUT_KEYS = {"partitioning"}  # metadata keys of layouts whose checks live in other modules
FEATURE_DTYPES = ("float32", "float16")
_VERIFY_CHUNK = 1 << 24  # elements per chunk in verify(): bounded memory on stores larger than RAM
# Checks of the layouts other modules add to a store, by the metadata key that marks them (``partitioning``:
# :func:`suite.data.partition.verify_partitioning`, registered when :mod:`suite.data` is imported);
# :meth:`GraphStore.verify` runs the ones the store's metadata names.
LAYOUT_CHECKS: dict[str, Callable[["GraphStore"], None]] = {}


def index_dtype(num_nodes: int) -> np.dtype:
    """Dtype of node indices for a graph of ``num_nodes`` nodes: int32 below 2**31 nodes, int64 from there."""
    return np.dtype(np.int32) if num_nodes < 2**31 else np.dtype(np.int64)


@dataclass(frozen=True)
class CSR:
    """Compressed sparse rows of one edge direction, as zero-copy tensors.

    Attributes:
        indptr: ``(n+1,)`` int64 offsets; row ``v`` spans ``indices[indptr[v]:indptr[v+1]]``.
        indices: ``(m,)`` neighbour ids (int32 or int64).
        relations: ``(m,)`` relation type per edge, or ``None`` for untyped graphs.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    relations: torch.Tensor | None

    def degrees(self) -> torch.Tensor:
        """Number of neighbours of every node."""
        return self.indptr[1:] - self.indptr[:-1]


_REQUIRED_FIELDS: dict[str, type | tuple[type, ...]] = {
    "format": str,
    "format_version": int,
    "name": str,
    "num_nodes": int,
    "num_edges": int,
    "directed": bool,
    "num_relations": int,
    "num_classes": int,
    "feature_dim": int,
    "files": dict,
}


def _field_error(path: Path, field: str, message: str) -> DataError:
    return DataError(f"{path}: field '{field}' {message}")


def _load_metadata(path: Path) -> dict[str, Any]:
    meta_path = path / METADATA_FILE
    if not path.is_dir():
        raise DataError(f"{path}: not a graph store folder (does not exist or is not a directory)")
    if not meta_path.is_file():
        raise DataError(f"{meta_path}: missing (not a complete graph store)")
    try:
        check_read(meta_path)
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{meta_path}: invalid JSON ({err})") from None
    except OSError as err:
        raise DataError(f"{meta_path}: cannot read ({describe_os_error(err)})") from None
    except RecursionError:
        raise DataError(f"{meta_path}: invalid JSON (nested too deeply)") from None
    if not isinstance(meta, dict):
        raise DataError(f"{meta_path}: expected a JSON object")
    for field, kind in _REQUIRED_FIELDS.items():
        if field not in meta:
            raise _field_error(meta_path, field, "is missing")
        value = meta[field]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _field_error(meta_path, field, f"must be {getattr(kind, '__name__', kind)}, got {value!r}")
    if meta["format"] != FORMAT_NAME:
        raise _field_error(meta_path, "format", f"must be {FORMAT_NAME!r}, got {meta['format']!r}")
    if meta["format_version"] != FORMAT_VERSION:
        raise _field_error(meta_path, "format_version", f"is {meta['format_version']}; this suite reads {FORMAT_VERSION}")
    for field in ("num_nodes", "num_edges", "num_classes", "feature_dim"):
        if meta[field] < 0:
            raise _field_error(meta_path, field, f"must be >= 0, got {meta[field]}")
    if meta["num_relations"] < 1:
        raise _field_error(meta_path, "num_relations", f"must be >= 1, got {meta['num_relations']}")
    return meta


def _expected_shapes(meta: dict[str, Any]) -> dict[str, tuple[int | None, ...]]:
    """Shapes the counts in ``meta`` imply for the standard keys (None = any length)."""
    n, m, d = meta["num_nodes"], meta["num_edges"], meta["feature_dim"]
    shapes: dict[str, tuple[int | None, ...]] = {
        "in_indptr": (n + 1,), "out_indptr": (n + 1,),
        "in_indices": (m,), "out_indices": (m,), "in_relations": (m,), "out_relations": (m,),
        "features": (n, d), "labels": (n,),
    }
    shapes.update({key: (None,) for key in NODE_SPLITS})
    shapes.update({key: (None, 3) for key in EDGE_SPLITS})
    partitioning = meta.get("partitioning")
    if isinstance(partitioning, dict) and isinstance(partitioning.get("num_partitions"), int):
        p = partitioning["num_partitions"]
        shapes.update(node_map=(n,), partition_offsets=(p + 1,), bucket_row_offsets=(p + 1,), bucket_dst=(None,),
                      bucket_edge_offsets=(None,), bucket_crc32=(None,), bucket_edges=(None, 3))
    return shapes


def _expected_dtypes(meta: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    idx = str(index_dtype(meta["num_nodes"]))
    return {
        "in_indptr": ("int64",), "out_indptr": ("int64",),
        "in_indices": (idx,), "out_indices": (idx,), "in_relations": ("int32", "int64"),
        "out_relations": ("int32", "int64"), "features": FEATURE_DTYPES, "labels": ("int64",),
        **{key: ("int64",) for key in NODE_SPLITS + EDGE_SPLITS + PARTITION_KEYS},
    }


_ENTRY_FIELDS: dict[str, type | tuple[type, ...]] = {"path": str, "dtype": str, "shape": list, "bytes": int,
                                                     "checksum": str}


def _check_file(root: Path, key: str, entry: Any, meta: dict[str, Any]) -> None:
    """Cheap checks of one file against metadata: existence, byte size, npy header dtype and shape."""
    meta_path = root / METADATA_FILE
    if not isinstance(entry, dict) or not {"path", "dtype", "shape", "bytes", "checksum"} <= entry.keys():
        raise _field_error(meta_path, f"files.{key}", "must hold path, dtype, shape, bytes and checksum")
    for field, kind in _ENTRY_FIELDS.items():
        value = entry[field]
        if not isinstance(value, kind) or isinstance(value, bool) \
                or (field == "shape" and not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                 for s in value)):
            raise _field_error(meta_path, f"files.{key}.{field}", f"has the wrong type or value: {value!r}"[:200])
    relative = Path(entry["path"])
    if relative.is_absolute() or ".." in relative.parts or not entry["path"] or "\0" in entry["path"]:
        raise _field_error(meta_path, f"files.{key}.path", f"must be a relative path inside the store, got "
                                                           f"{entry['path']!r}")
    file = root / entry["path"]
    if not file.is_file():
        raise DataError(f"{file}: missing (listed in {METADATA_FILE} as files.{key})")
    try:
        size = file.stat().st_size
    except OSError as err:
        raise DataError(f"{file}: cannot read ({describe_os_error(err)})") from None
    if size != entry["bytes"]:
        kind = "short" if size < entry["bytes"] else "too long"
        raise DataError(f"{file}: file is {kind}: {size} bytes, metadata says {entry['bytes']}")
    try:
        dtype, shape, offset = read_npy_header(file)
    except OSError as err:
        raise DataError(f"{file}: cannot read ({describe_os_error(err)})") from None
    except (ValueError, TypeError, SyntaxError, EOFError) as err:
        raise DataError(f"{file}: not a valid .npy file ({' '.join(str(err).split())[:200]})") from None
    if str(dtype) != entry["dtype"]:
        raise DataError(f"{file}: dtype is {dtype}, metadata says {entry['dtype']}")
    if list(shape) != list(entry["shape"]):
        raise DataError(f"{file}: shape is {shape}, metadata says {tuple(entry['shape'])}")
    if offset + math.prod(shape) * dtype.itemsize != size:  # Python ints: a huge header shape cannot overflow
        raise DataError(f"{file}: data size does not match its header shape {shape}")
    allowed = _expected_dtypes(meta).get(key)
    if allowed is not None and str(dtype) not in allowed:
        raise DataError(f"{file}: dtype {dtype} is not allowed for {key} (expected {' or '.join(allowed)})")
    expected = _expected_shapes(meta).get(key)
    if expected is not None:
        if len(shape) != len(expected) or any(e is not None and e != s for e, s in zip(expected, shape)):
            shown = tuple("*" if e is None else e for e in expected)
            raise DataError(f"{file}: shape {shape} does not match metadata counts (expected {shown})")


class GraphStore:
    """A memory-mapped graph store (see the module docstring for the layout).

    Open with :meth:`GraphStore.open`; create with :func:`create_store`. A partitioned store (metadata field
    ``partitioning``) also holds the layout files of :mod:`suite.data.partition`.
    """

    def __init__(self, path: Path, meta: dict[str, Any]):
        self.path = path
        self.metadata = meta
        self._arrays: dict[str, np.ndarray] = {}
        self._checked = ""  # "" not yet, "rules" before use (check_before_use), "whole" for a run (check_for_run)

    @classmethod
    def open(cls, path: str | os.PathLike) -> "GraphStore":
        """Open a store: parse metadata and check every file's size and header (no data is read)."""
        root = Path(path)
        meta = _load_metadata(root)
        for key in REQUIRED_KEYS:
            if key not in meta["files"]:
                raise _field_error(root / METADATA_FILE, f"files.{key}", "is missing (required file)")
        for key, entry in meta["files"].items():
            _check_file(root, key, entry, meta)
        if meta["feature_dim"] > 0 and "features" not in meta["files"]:
            raise _field_error(root / METADATA_FILE, "feature_dim", "is > 0 but files.features is missing")
        if meta["num_relations"] > 1 and not {"in_relations", "out_relations"} <= meta["files"].keys():
            raise _field_error(root / METADATA_FILE, "num_relations", "is > 1 but the CSR relation files are missing")
        return cls(root, meta)

    # ------------------------------------------------------------------ counts
    @property
    def name(self) -> str:
        """Dataset name recorded at creation."""
        return self.metadata["name"]

    @property
    def num_nodes(self) -> int:
        """Number of nodes."""
        return self.metadata["num_nodes"]

    @property
    def num_edges(self) -> int:
        """Number of directed edges in the CSRs."""
        return self.metadata["num_edges"]

    @property
    def directed(self) -> bool:
        """False when every edge is stored in both directions."""
        return self.metadata["directed"]

    @property
    def num_relations(self) -> int:
        """Number of relation types (1 for untyped graphs)."""
        return self.metadata["num_relations"]

    @property
    def num_classes(self) -> int:
        """Number of node classes (0 without labels)."""
        return self.metadata["num_classes"]

    @property
    def feature_dim(self) -> int:
        """Node feature dimension (0 without features)."""
        return self.metadata["feature_dim"]

    # ------------------------------------------------------------------ arrays
    def has(self, key: str) -> bool:
        """Whether the store holds the file ``key``."""
        return key in self.metadata["files"]

    def file(self, key: str) -> Path:
        """Path of the file holding ``key``."""
        self._require(key)
        return self.path / self.metadata["files"][key]["path"]

    def check_for_run(self) -> None:
        """Check every file before a run reads it: ids, labels and relations in range, finite features, CSR and
        partition offsets consistent, checksums matching (:func:`suite.data.store_checks.check_store`).

        Paid once per store: the scans are cached in ``metadata.json`` and reused while the files are unchanged;
        repeated calls on one opened store return at once.

        Raises:
            DataError: one line naming the first file at fault.
        """
        if self._checked != "whole":
            from suite.data.store_checks import check_store

            check_store(self)
            self._checked = "whole"

    def check_before_use(self) -> None:
        """:meth:`check_for_run`, except that files checked partition by partition when read (a partitioned store's
        features and buckets, see :func:`suite.data.store_checks.partition_checksummed`) are left to their reader's
        per-partition checksums."""
        if not self._checked:
            from suite.data.store_checks import check_store

            check_store(self, whole_files=False)
            self._checked = "rules"

    def array(self, key: str, checked: bool = True) -> np.ndarray:
        """The array ``key`` as a copy-on-write memory map (no data read until touched).

        The store is checked first (once: :meth:`check_for_run`, where partition-checksummed files are left to
        their reader), so no array with an id out of range, a label outside its classes or a non-finite feature is
        ever handed out. ``checked=False`` skips that, for verification code that checks the data itself
        (:meth:`verify`).
        """
        if checked:
            self.check_before_use()
        return self._map(key)

    def _map(self, key: str) -> np.ndarray:
        """The memory map of ``key``, unchecked (for :meth:`verify` and the checks themselves)."""
        if key not in self._arrays:
            self._require(key)
            try:
                check_read(self.file(key))
                self._arrays[key] = np.load(self.file(key), mmap_mode="c", allow_pickle=False)
            except OSError as err:
                raise DataError(f"{self.file(key)}: cannot read ({describe_os_error(err)})") from None
            except ValueError as err:
                raise DataError(f"{self.file(key)}: cannot read ({' '.join(str(err).split())[:200]})") from None
        return self._arrays[key]

    def tensor(self, key: str, checked: bool = True) -> torch.Tensor:
        """The array ``key`` as a zero-copy torch tensor over the memory map (writes stay private); checked as in
        :meth:`array`."""
        array = self.array(key, checked)
        if array.size == 0:
            return torch.from_numpy(np.empty(array.shape, dtype=array.dtype))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.from_numpy(array)

    def optional_tensor(self, key: str) -> torch.Tensor | None:
        """:meth:`tensor` of ``key``, or None when the store lacks it."""
        return self.tensor(key) if self.has(key) else None

    def csr(self, direction: str = "in") -> CSR:
        """CSR by destination (``"in"``: in-neighbours) or by source (``"out"``: out-neighbours)."""
        if direction not in ("in", "out"):
            raise ValueError(f"direction must be 'in' or 'out', got {direction!r}")
        return CSR(
            self.tensor(f"{direction}_indptr"),
            self.tensor(f"{direction}_indices"),
            self.optional_tensor(f"{direction}_relations"),
        )

    @property
    def features(self) -> torch.Tensor | None:
        """Node features ``(n, d)`` or None."""
        return self.optional_tensor("features")

    @property
    def labels(self) -> torch.Tensor | None:
        """Node labels ``(n,)`` (-1 = unlabeled) or None."""
        return self.optional_tensor("labels")

    def split(self, name: str) -> torch.Tensor | None:
        """Node split ``train``, ``valid`` or ``test`` as an index tensor, or None."""
        return self.optional_tensor(f"{name}_nodes")

    def edges(self, name: str) -> torch.Tensor | None:
        """Link-prediction edge split ``train``, ``valid`` or ``test`` as ``(k, 3)`` ``(src, rel, dst)``, or None."""
        return self.optional_tensor(f"{name}_edges")

    def edge_index(self) -> torch.Tensor:
        """All edges as a ``(2, m)`` int64 tensor (src, dst), materialized from the out-CSR (small graphs)."""
        csr = self.csr("out")
        src = torch.repeat_interleave(torch.arange(self.num_nodes), csr.degrees())
        return torch.stack([src, csr.indices.to(torch.int64)])

    def _require(self, key: str) -> None:
        if key not in self.metadata["files"]:
            raise DataError(f"{self.path}: store has no '{key}' file")

    # ------------------------------------------------------------------ info
    def info(self) -> dict[str, Any]:
        """Counts and file sizes, for display."""
        meta = self.metadata
        info: dict[str, Any] = {
            key: meta[key]
            for key in ("name", "num_nodes", "num_edges", "directed", "num_relations", "num_classes", "feature_dim")
        }
        for key in NODE_SPLITS + EDGE_SPLITS:
            if self.has(key):
                info[key] = meta["files"][key]["shape"][0]
        if self.has("labels"):
            info["labeled_nodes"] = meta.get("labeled_nodes")
        info["bytes"] = sum(entry["bytes"] for entry in meta["files"].values())
        if "partitioning" in meta:
            info["partitioning"] = meta["partitioning"]
        return info

    # ------------------------------------------------------------------ verify
    def verify(self, progress: bool = False) -> None:
        """Re-read every file: checksums, index ranges, CSR monotonicity and consistency, finite features.

        Raises:
            DataError: naming the first file or field that is wrong.
        """
        from tqdm import tqdm

        files = self.metadata["files"]
        for key, entry in tqdm(files.items(), desc="checksums", disable=not progress, unit="file"):
            try:
                actual = file_checksum(self.path / entry["path"])  # SHA-256, as every store is written
            except OSError as err:
                raise DataError(f"{self.path / entry['path']}: cannot read ({describe_os_error(err)})") from None
            if actual != entry["checksum"]:
                raise DataError(f"{self.path / entry['path']}: checksum mismatch (file changed since it was written)")
        for direction in ("in", "out"):
            self._verify_csr(direction)
        self._verify_degree_consistency()
        for key in ("in_relations", "out_relations"):
            if self.has(key):
                self._verify_range(key, 0, self.num_relations)
        if self.has("labels"):
            self._verify_range("labels", -1, max(self.num_classes, 0))
        for key in NODE_SPLITS:
            if self.has(key):
                self._verify_range(key, 0, self.num_nodes)
        for key in EDGE_SPLITS:
            if self.has(key):
                self._verify_edge_list(key)
        if self.has("features"):
            self._verify_finite("features")
        for key in sorted(self.metadata.keys() & LAYOUT_KEYS):
            if key not in LAYOUT_CHECKS:
                raise DataError(f"{self.path / METADATA_FILE}: {key}: no check of this layout is loaded "
                                f"(import suite.data)")
            LAYOUT_CHECKS[key](self)

    def _chunks(self, key: str) -> Iterator[tuple[int, np.ndarray]]:
        array = self._map(key)
        rows = max(1, _VERIFY_CHUNK // max(1, int(np.prod(array.shape[1:], dtype=np.int64))))
        for start in range(0, array.shape[0], rows):
            yield start, np.asarray(array[start : start + rows])

    def _verify_range(self, key: str, low: int, high: int, column: int | None = None) -> None:
        for start, chunk in self._chunks(key):
            values = chunk if column is None else chunk[:, column]
            if values.size and (values.min() < low or values.max() >= high):
                bad = int(np.flatnonzero((values < low) | (values >= high))[0])
                where = f"row {start + bad}" + ("" if column is None else f", column {column}")
                raise DataError(
                    f"{self.file(key)}: value {int(values[bad])} at {where} is out of range [{low}, {high})"
                )

    def _verify_csr(self, direction: str) -> None:
        key = f"{direction}_indptr"
        indptr = self._map(key)
        if indptr[0] != 0 or indptr[-1] != self.num_edges:
            raise DataError(
                f"{self.file(key)}: must start at 0 and end at num_edges={self.num_edges}, "
                f"got {int(indptr[0])}..{int(indptr[-1])}"
            )
        for start, chunk in self._chunks(key):
            previous = indptr[start - 1 : start] if start else chunk[:0]
            steps = np.diff(np.concatenate([previous, chunk]))
            if (steps < 0).any():
                row = start - len(previous) + 1 + int(np.argmax(steps < 0))
                raise DataError(f"{self.file(key)}: offsets decrease at row {row}")
        self._verify_range(f"{direction}_indices", 0, self.num_nodes)

    def _verify_degree_consistency(self) -> None:
        """In-degrees from the in-CSR must equal counts of destinations in the out-CSR."""
        counts = np.zeros(self.num_nodes, dtype=np.int64)
        for _, chunk in self._chunks("out_indices"):
            counts += np.bincount(chunk, minlength=self.num_nodes)
        if not np.array_equal(counts, np.diff(self._map("in_indptr"))):
            node = int(np.flatnonzero(counts != np.diff(self._map("in_indptr")))[0])
            raise DataError(f"{self.file('in_indptr')}: in-degree of node {node} disagrees with out_indices")

    def _verify_edge_list(self, key: str) -> None:
        self._verify_range(key, 0, self.num_nodes, column=0)
        self._verify_range(key, 0, self.num_relations, column=1)
        self._verify_range(key, 0, self.num_nodes, column=2)

    def _verify_finite(self, key: str) -> None:
        for start, chunk in self._chunks(key):
            bad = ~np.isfinite(chunk)
            if bad.any():
                row = start + int(np.flatnonzero(bad.any(axis=1))[0])
                raise DataError(f"{self.file(key)}: non-finite value (NaN or inf) in row {row}")


class StoreWriter:
    """Writes the files of a new store into a staging folder; :meth:`finalize` adds ``metadata.json``.

    Use through :func:`create_store`, which renames the folder into place only when everything succeeded.
    """

    def __init__(self, root: Path):
        self.root = root
        self._files: dict[str, dict[str, Any]] = {}
        self.finalized = False

    def path_for(self, key: str) -> Path:
        """File path that ``key`` is written to (``<key>.npy``, subfolders allowed as ``a/b``)."""
        path = self.root / f"{key}.npy"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def write_array(self, key: str, array: np.ndarray | torch.Tensor) -> None:
        """Write a whole array as ``<key>.npy``."""
        if isinstance(array, torch.Tensor):
            array = array.detach().cpu().numpy()
        array = np.ascontiguousarray(array)
        with NpyAppender(self.path_for(key), array.dtype, array.shape[1:]) as out:
            out.append(array)
        self._files[key] = {}

    @contextlib.contextmanager
    def appender(self, key: str, dtype, row_shape: tuple[int, ...] = ()) -> Iterator[NpyAppender]:
        """Stream rows into ``<key>.npy`` (see :class:`NpyAppender`)."""
        with NpyAppender(self.path_for(key), dtype, row_shape) as out:
            yield out
        self._files[key] = {}

    def has(self, key: str) -> bool:
        """Whether ``key`` was written."""
        return key in self._files

    def discard(self, key: str) -> None:
        """Remove the written file ``key`` (e.g. a split that turned out empty)."""
        self.path_for(key).unlink(missing_ok=True)
        self._files.pop(key, None)

    def finalize(
        self,
        *,
        name: str,
        num_nodes: int,
        num_edges: int,
        directed: bool,
        num_relations: int = 1,
        num_classes: int = 0,
        feature_dim: int = 0,
        source: dict[str, Any] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Checksum every written file and write ``metadata.json``; return the metadata."""
        from suite.version import __version__

        from suite.data.store_checks import checks_field, scan_file

        files, scans = {}, {}
        for key in sorted(self._files):
            path = self.path_for(key)
            dtype, shape, _ = read_npy_header(path)
            scans[key] = scan_file(path)  # the checksum and the statistics of the run-time checks, in one pass
            files[key] = {
                "path": str(path.relative_to(self.root)),
                "dtype": str(dtype),
                "shape": list(shape),
                "bytes": path.stat().st_size,
                "checksum": scans[key]["checksum"],
            }
        meta = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "name": name,
            "num_nodes": int(num_nodes),
            "num_edges": int(num_edges),
            "directed": bool(directed),
            "num_relations": int(num_relations),
            "num_classes": int(num_classes),
            "feature_dim": int(feature_dim),
            "dtypes": {key: entry["dtype"] for key, entry in files.items()},
            "source": source or {},
            **extra,
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "suite_version": __version__,
            "files": files,
            "checks": checks_field(scans),
        }
        atomic_write_json(self.root / METADATA_FILE, meta)
        self.finalized = True
        return meta


@contextlib.contextmanager
def create_store(path: str | os.PathLike, overwrite: bool = False) -> Iterator[StoreWriter]:
    """Create a store at ``path``: yields a :class:`StoreWriter` over a hidden staging folder.

    The folder is renamed to ``path`` only if the block ends normally and :meth:`StoreWriter.finalize` was
    called; an exception or interrupt removes it, so an incomplete store never appears under ``path``.
    """
    with staged_directory(path, overwrite=overwrite) as tmp:
        writer = StoreWriter(tmp)
        yield writer
        if not writer.finalized:
            raise RuntimeError("create_store: block ended without StoreWriter.finalize()")
