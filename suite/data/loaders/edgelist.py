"""Import a user's edge list (CSV, TSV or Parquet) into a graph store, in chunks with bounded memory.

``gnnsuite datasets import EDGES --out STORE`` (:func:`import_edge_list`):

- columns by name (with a header) or by 0-based position: source, destination, optional relation and weight;
  a header line or not; any one-character delimiter (default: ``,`` for ``.csv``, tab otherwise); leading lines
  starting with ``#`` are skipped (SNAP's LiveJournal and Twitter files start with such comments);
- node ids of any value (integers, strings) are remapped to ``0..n-1`` in order of first appearance (row by row,
  source before destination; so the numbering does not depend on the chunk size); the original ids are written to ``node_ids.parquet`` in the store (row ``i``:
  the original id of node ``i``); relation values likewise (``relation_ids.parquet``). Without remapping
  (``remap=False``) ids must be non-negative integers and ``n`` is the largest id plus one;
- edge splits: fractions ``(train, valid, test)`` drawn per edge from a hash of ``(seed, row number)`` (so
  they do not depend on the chunk size), or given ``valid`` / ``test`` files in the same format; the store's CSRs
  hold the training edges only, the ``*_edges`` arrays hold the splits ``(src, rel, dst)``, and a weight column
  is kept aligned with them as ``*_edge_weights`` (float32; recorded, not used by the built-in models);
- optional node features (``.npy``, row ``k`` = the node whose original id is ``k``; nodes with a feature row but
  no edge become isolated nodes) and labels (``.npy`` in the same row order, or a text file ``node label`` per
  line), with node split fractions over the labelled nodes.

Memory: the input is read in blocks of ``chunk_bytes`` cut at line ends, each parsed by pyarrow's CSV reader in
turn (its streaming reader read ahead of its consumer: the whole 1 GB test file by the first batch), or in Parquet
row batches; each batch is remapped and appended to the store's split files; the CSRs are then built out of core
by :func:`suite.data.csr.write_csrs` (sorted in buckets of at most ``max_bucket_edges``). Peak memory is the id
map and degree counts (O(n)) plus a few batches and one bucket, whatever the number of edges.

Errors are one line naming the file and the line (CSV/TSV; a row number for Parquet): a row with the wrong
number of fields, a missing value, an id that does not fit the column's type, a negative id without remapping.
Locating the line re-reads the file (only when it is malformed). The store is staged and renamed into place only
when everything succeeded.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from suite.errors import ConfigError, DataError
from suite.data.csr import EdgeChunk, write_csrs
from suite.data.loaders.raw_files import file_records
from suite.data.out_of_core import MemoryBudget, OutOfCoreSizes, sizes_for
from suite.data.store import NODE_SPLITS, GraphStore, StoreWriter, create_store
from suite.io import close_file, open_write, write_to

DEFAULT_CHUNK_BYTES = 64 << 20
IMPORT_MAX_BUCKET_EDGES = 1 << 23
"""Bucket size of the CSR sort of an import: about 0.5 GiB of sort buffers, whatever the number of edges."""
IDMAP_BYTES_PER_NODE = 16
"""What the id map's next merge adds per node for a while (:class:`SortedIdMap`: a new array beside the one it
replaces; what it holds is counted as held): reserved before each block is sized."""
DEGREE_BYTES_PER_NODE = 40
"""What the CSR build holds per node: in- and out-degrees, one ``indptr`` and a bincount in flight."""
_INTEGER = re.compile(rb"\s*[+-]?\d+\s*")
_NUMBER = re.compile(rb"\s*[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|nan|inf)\s*", re.IGNORECASE)
_SPLITS = ("train", "valid", "test")
Column = str | int


@dataclass(frozen=True)
class EdgeListFormat:
    """How to read an edge-list file.

    Attributes:
        source, destination: column name (needs ``header``) or 0-based position.
        relation, weight: optional columns.
        header: the first (non-comment) line names the columns.
        delimiter: field separator (CSV/TSV); None: ``,`` for ``.csv``, tab for anything else.
        file_format: ``csv`` or ``parquet``; None: from the suffix (``.parquet``/``.pq`` are Parquet).
        id_type: type of the id columns: ``auto`` (inferred by pyarrow from the first block), ``int`` or
            ``string``.
        comment: leading lines starting with it are skipped (CSV/TSV).
        skip_lines: lines skipped at the top of the file after the comments (e.g. a count line), CSV/TSV only.
    """

    source: Column = 0
    destination: Column = 1
    relation: Column | None = None
    weight: Column | None = None
    header: bool = False
    delimiter: str | None = None
    file_format: Literal["csv", "parquet"] | None = None
    id_type: Literal["auto", "int", "string"] = "auto"
    comment: str = "#"
    skip_lines: int = 0

    def kind(self, path: Path) -> str:
        """``csv`` or ``parquet`` for ``path``."""
        if self.file_format is not None:
            return self.file_format
        return "parquet" if path.suffix.lower() in (".parquet", ".pq") else "csv"

    def separator(self, path: Path) -> str:
        """The delimiter of ``path``."""
        if self.delimiter is not None:
            return self.delimiter
        return "," if path.suffix.lower() == ".csv" else "\t"


@dataclass
class IdMap:
    """Any hashable ids -> ``0..n-1`` in order of first appearance (a growing pandas Index)."""

    values: list[pd.Index] = field(default_factory=list)
    _index: pd.Index | None = None
    size: int = 0

    def index(self) -> pd.Index:
        if self._index is None or len(self._index) != self.size:
            self._index = self.values[0].append(self.values[1:]) if len(self.values) > 1 else (
                self.values[0] if self.values else pd.Index([]))
            self.values = [self._index] if self.size else []
        return self._index

    def map(self, ids: np.ndarray) -> np.ndarray:
        """The new ids of ``ids`` (unseen ones are added)."""
        codes = self.index().get_indexer(ids) if self.size else np.full(len(ids), -1, np.int64)
        missing = codes < 0
        if missing.any():
            new = pd.Index(pd.unique(ids[missing]))
            codes[missing] = self.size + new.get_indexer(ids[missing])
            self.values.append(new)
            self.size += len(new)
        return codes.astype(np.int64, copy=False)

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """The new ids of ``ids``; -1 for unseen ones (nothing is added)."""
        return self.index().get_indexer(ids).astype(np.int64) if self.size else np.full(len(ids), -1, np.int64)

    def originals(self) -> pd.Index:
        """Original id of every new id, in order."""
        return self.index()


@dataclass
class SortedIdMap:
    """Integer ids -> ``0..n-1`` in order of first appearance, as :class:`IdMap` numbers them, in two arrays sorted
    by id: the ids seen and the new id of each (16 B a node; 24 while a batch's new ids are merged in). IdMap's
    pandas index and hash table hold 57 B a node: 230 MB for 4M nodes, most of a 512 MiB limit."""

    keys: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    codes: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    size: int = 0

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """The new ids of ``ids``; -1 for unseen ones (and for ids that are not integers)."""
        ids = np.asarray(ids)
        if not self.size or ids.dtype.kind not in "iu":
            return np.full(len(ids), -1, np.int64)
        ids = ids.astype(np.int64, copy=False)
        at = np.minimum(np.searchsorted(self.keys, ids), self.size - 1)
        return np.where(self.keys[at] == ids, self.codes[at], -1)

    def map(self, ids: np.ndarray) -> np.ndarray:
        """The new ids of ``ids`` (unseen ones are added, numbered in order of first appearance)."""
        ids = np.asarray(ids).astype(np.int64, copy=False)
        codes = self.lookup(ids)
        missing = codes < 0
        if missing.any():
            unseen = ids[missing]
            new = pd.unique(unseen)  # in order of first appearance
            order = np.argsort(new, kind="stable")
            ascending = new[order]
            codes[missing] = self.size + order[np.searchsorted(ascending, unseen)]
            at = np.searchsorted(self.keys, ascending)
            self.keys = np.insert(self.keys, at, ascending)
            self.codes = np.insert(self.codes, at, self.size + order)
            self.size += len(new)
        return codes

    def originals(self) -> pd.Index:
        """Original id of every new id, in order."""
        values = np.empty(self.size, np.int64)
        values[self.codes] = self.keys
        return pd.Index(values)


def _id_map(values: np.ndarray) -> IdMap | SortedIdMap:
    """The id map for ids like ``values``: :class:`SortedIdMap` for signed integers (what pyarrow reads integer
    columns as), else :class:`IdMap`."""
    return SortedIdMap() if np.asarray(values).dtype.kind == "i" else IdMap()


@dataclass(frozen=True)
class EdgeBatch:
    """Raw columns of one batch and the physical line (CSV) or row (Parquet) number of its first row."""

    first: int
    source: np.ndarray
    destination: np.ndarray
    relation: np.ndarray | None
    weight: np.ndarray | None


# ---------------------------------------------------------------------------------------------- reading
def _leading_comments(path: Path, comment: str) -> int:
    count = 0
    with open(path, "rb") as handle:
        for line in handle:
            if comment and line.startswith(comment.encode()):
                count += 1
            else:
                break
    return count


def _header_names(path: Path, skip: int, delimiter: str) -> list[str]:
    with open(path, "rb") as handle:
        line = next(itertools.islice(handle, skip, None), b"")
    return [name.strip() for name in line.decode(errors="replace").rstrip("\r\n").split(delimiter)]


def _resolve_columns(path: Path, fmt: EdgeListFormat, names: Sequence[str]) -> dict[str, str]:
    """``{role: column name}`` for the roles given; errors name the option and the file."""
    resolved = {}
    for role in ("source", "destination", "relation", "weight"):
        column = getattr(fmt, role)
        if column is None:
            continue
        if isinstance(column, int) or (isinstance(column, str) and column.isdigit() and column not in names):
            position = int(column)
            if not 0 <= position < len(names):
                raise ConfigError(f"--{role}: column {position} does not exist in {path} ({len(names)} columns)")
            resolved[role] = names[position]
        elif column in names:
            resolved[role] = column
        else:
            where = f"its header names {', '.join(names)}" if fmt.header or fmt.kind(path) == "parquet" else \
                "it has no header (give a 0-based position, or --header)"
            raise ConfigError(f"--{role}: no column {column!r} in {path} ({where})")
    if len(set(resolved.values())) != len(resolved):
        raise ConfigError(f"{path}: two roles name the same column ({resolved})")
    return resolved


def _field_ok(value: bytes, kind: str) -> bool:
    if kind == "int":
        return bool(_INTEGER.fullmatch(value))
    if kind == "float":
        return bool(_NUMBER.fullmatch(value))
    return True


def _locate_bad_line(path: Path, delimiter: str, first_line: int, num_columns: int,
                     checks: dict[int, tuple[str, str]]) -> str | None:
    """``line N: what`` for the first line from ``first_line`` (1-based) that does not parse; None if none."""
    sep = delimiter.encode()
    with open(path, "rb") as handle:
        for number, line in enumerate(itertools.islice(handle, first_line - 1, None), start=first_line):
            text = line.rstrip(b"\r\n")
            fields = text.split(sep)
            shown = text[:60].decode(errors="replace")
            if len(fields) != num_columns:
                return f"line {number}: expected {num_columns} fields separated by {delimiter!r}, got " \
                       f"{len(fields)}: {shown!r}"
            for position, (kind, role) in checks.items():
                value = fields[position]
                if not value.strip():
                    return f"line {number}: missing {role} value: {shown!r}"
                if not _field_ok(value, kind):
                    what = {"int": "an integer", "float": "a number"}[kind]
                    hint = " (non-numeric ids: --id-type string)" if role in ("source", "destination",
                                                                              "relation") else ""
                    return f"line {number}: {role} {value.decode(errors='replace')!r} is not {what}{hint}"
    return None


def _arrow_kind(arrow_type) -> str:
    import pyarrow as pa

    if pa.types.is_integer(arrow_type):
        return "int"
    if pa.types.is_floating(arrow_type):
        return "float"
    return "string"


def _column_numpy(column, role: str, path: Path, first: int, unit: str) -> np.ndarray:
    """A pyarrow column as numpy; a null names its line."""
    if column.null_count:
        position = int(np.flatnonzero(np.asarray(column.is_null()))[0])
        raise DataError(f"{path}: {unit} {first + position}: missing {role} value")
    return column.to_numpy(zero_copy_only=False)


def _csv_batches(path: Path, fmt: EdgeListFormat, chunk_bytes: int | Callable[[], int]) -> Iterator[EdgeBatch]:
    import pyarrow as pa
    from pyarrow import csv as pacsv

    delimiter = fmt.separator(path)
    if len(delimiter) != 1:
        raise ConfigError(f"--delimiter: must be one character, got {delimiter!r}")
    skip = _leading_comments(path, fmt.comment) + fmt.skip_lines
    header = _header_names(path, skip, delimiter)
    if header == [""]:
        raise DataError(f"{path}: line {skip + 1}: no edges (empty file)")
    names = header if fmt.header else [f"f{i}" for i in range(len(header))]
    if fmt.header and len(set(names)) != len(names):
        raise DataError(f"{path}: line {skip + 1}: repeated column names in the header {names}")
    roles = _resolve_columns(path, fmt, names)
    id_type = {"auto": None, "int": pa.int64(), "string": pa.string()}[fmt.id_type]
    types = {roles[r]: id_type for r in ("source", "destination", "relation") if r in roles and id_type is not None}
    if "weight" in roles:
        types[roles["weight"]] = pa.float64()
    first_data_line = skip + (2 if fmt.header else 1)
    position = {name: i for i, name in enumerate(names)}
    declared = {position[name]: (_arrow_kind(types[name]) if name in types else "string", role)
                for role, name in roles.items()}

    def failed(err: Exception, rows_done: int, checks: dict[int, tuple[str, str]]) -> DataError:
        where = _locate_bad_line(path, delimiter, first_data_line + rows_done, len(names), checks)
        if where is not None:
            return DataError(f"{path}: {where}")
        return DataError(f"{path}: cannot parse ({' '.join(str(err).split())[:200]})")

    largest = chunk_bytes if isinstance(chunk_bytes, int) else DEFAULT_CHUNK_BYTES
    read_options = pacsv.ReadOptions(column_names=names, block_size=largest + 1)
    parse_options = pacsv.ParseOptions(delimiter=delimiter, ignore_empty_lines=False)
    checks, rows_done = declared, 0
    pool = pa.default_memory_pool()
    for block in _line_blocks(path, skip + (1 if fmt.header else 0), chunk_bytes):
        pool.release_unused()  # arrow's allocator keeps freed blocks otherwise: resident, and counted as held
        convert_options = pacsv.ConvertOptions(include_columns=list(roles.values()), column_types=types,
                                               strings_can_be_null=False, quoted_strings_can_be_null=False)
        try:
            table = pacsv.read_csv(pa.py_buffer(block), read_options=read_options, parse_options=parse_options,
                                   convert_options=convert_options)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
            raise failed(err, rows_done, checks) from None
        del block
        if not types.keys() >= set(roles.values()):  # the first block's types hold for the whole file
            types = {name: table.schema.field(name).type for name in roles.values()}
            checks = {position[name]: (_arrow_kind(types[name]), role) for role, name in roles.items()}
        first = first_data_line + rows_done
        columns = {role: _column_numpy(table.column(name), role, path, first, "line") for role, name in roles.items()}
        rows_done += table.num_rows
        del table
        yield EdgeBatch(first, columns["source"], columns["destination"], columns.get("relation"),
                        columns.get("weight"))


def _line_blocks(path: Path, skip_lines: int, chunk_bytes: int | Callable[[], int]) -> Iterator[bytes]:
    """The lines of ``path`` after its first ``skip_lines``, in blocks of about ``chunk_bytes`` that end at a line
    end (a line longer than that makes its block longer); ``chunk_bytes`` may be a function, asked before each
    block (the memory left shrinks as the id map grows).

    The blocks are read here, one at a time, and parsed by the caller: pyarrow's streaming CSV reader read ahead
    of its consumer in a background thread, so its memory grew with the file (measured: the whole 1 GB file of
    50M edges was in arrow's pool by the first batch).
    """
    with open(path, "rb") as handle:
        for _ in range(skip_lines):
            handle.readline()
        rest = b""
        block_bytes = chunk_bytes if callable(chunk_bytes) else lambda: chunk_bytes
        while data := handle.read(block_bytes()):
            data = rest + data if rest else data
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            rest = data[cut:]
            yield data[:cut] if cut < len(data) else data
        if rest:
            yield rest


def _parquet_batches(path: Path, fmt: EdgeListFormat, chunk_rows: int) -> Iterator[EdgeBatch]:
    import pyarrow as pa
    from pyarrow import parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise DataError(f"{path}: not a readable Parquet file ({' '.join(str(err).split())[:200]})") from None
    names = parquet.schema_arrow.names
    roles = _resolve_columns(path, fmt, names)
    first = 1
    for batch in parquet.iter_batches(batch_size=chunk_rows, columns=list(roles.values())):
        columns = {role: _column_numpy(batch.column(name), role, path, first, "row") for role, name in roles.items()}
        if "weight" in columns and columns["weight"].dtype.kind not in "iuf":
            raise DataError(f"{path}: column {roles['weight']!r}: weights must be numbers, got {columns['weight'].dtype}")
        yield EdgeBatch(first, columns["source"], columns["destination"], columns.get("relation"),
                        columns.get("weight"))
        first += batch.num_rows


def read_edge_batches(path: Path, fmt: EdgeListFormat,
                      chunk_bytes: int | Callable[[], int] = DEFAULT_CHUNK_BYTES) -> Iterator[EdgeBatch]:
    """The batches of an edge-list file (see :class:`EdgeListFormat`); ``chunk_bytes`` of text per batch, or a
    function giving it before each batch (CSV/TSV; Parquet asks it once)."""
    if not path.is_file():
        raise DataError(f"{path}: edge list not found")
    if fmt.kind(path) == "parquet":
        return _parquet_batches(path, fmt, max(1, (chunk_bytes() if callable(chunk_bytes) else chunk_bytes) // 32))
    return _csv_batches(path, fmt, chunk_bytes)


# ---------------------------------------------------------------------------------------------- splitting
def _row_hash(rows: np.ndarray, seed: int) -> np.ndarray:
    """splitmix64 of ``seed`` and the row numbers, as uniform floats in [0, 1)."""
    with np.errstate(over="ignore"):
        x = rows.astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def parse_fractions(text: str | Sequence[float], option: str) -> tuple[float, float, float]:
    """``"0.9,0.05,0.05"`` -> three non-negative fractions summing to 1 (ConfigError naming ``option``)."""
    try:
        values = [float(v) for v in (text.split(",") if isinstance(text, str) else text)]
    except ValueError:
        raise ConfigError(f"{option}: expected three fractions train,valid,test, got {text!r}") from None
    if len(values) != 3 or any(not math.isfinite(v) or v < 0 for v in values) or abs(sum(values) - 1) > 1e-6:
        raise ConfigError(f"{option}: expected three non-negative fractions train,valid,test summing to 1, "
                          f"got {text!r}")
    return values[0], values[1], values[2]


def _assign(rows: np.ndarray, fractions: tuple[float, float, float], seed: int) -> np.ndarray:
    u = _row_hash(rows, seed)
    return (u >= fractions[0]).astype(np.int8) + (u >= fractions[0] + fractions[1]).astype(np.int8)


# ---------------------------------------------------------------------------------------------- the import
@dataclass
class _Ids:
    """Node and relation ids of an import: remapped through :class:`IdMap`, or checked integers."""

    remap: bool
    nodes: IdMap | SortedIdMap = field(default_factory=IdMap)
    relations: IdMap | SortedIdMap = field(default_factory=IdMap)
    num_nodes: int = 0
    num_relations: int = 0
    node_limit: int | None = None
    relation_limit: int | None = None

    def release_maps(self) -> None:
        """Drop the id maps (written out already): their memory goes to the CSR build; the counts stay."""
        self.nodes, self.relations = IdMap(), IdMap()

    def _plain(self, values: np.ndarray, path: Path, first: int, role: str, limit: int | None) -> np.ndarray:
        if values.dtype.kind not in "iu":
            numeric = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy()
            bad = np.isnan(numeric) | (numeric != np.round(numeric)) if numeric.dtype.kind == "f" else \
                np.zeros(len(values), bool)
            row = int(np.flatnonzero(bad)[0]) if bad.any() else 0
            raise DataError(f"{path}: line {first + row}: {role} id {values[row]!r} is not an integer (ids are "
                            f"used as they are with --no-remap)")
        bad = values < 0
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise DataError(f"{path}: line {first + row}: {role} id {int(values[row])} is negative")
        if limit is not None and len(values) and values.max() >= limit:
            row = int(np.flatnonzero(values >= limit)[0])
            raise DataError(f"{path}: line {first + row}: {role} id {int(values[row])} is out of range "
                            f"[0, {limit})")
        return values.astype(np.int64, copy=False)

    def edges(self, batch: EdgeBatch, path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.remap:
            endpoints = np.stack([batch.source, batch.destination], axis=1).reshape(-1)
            if not self.nodes.size:  # the first batch: its column types hold for the whole file
                self.nodes = _id_map(endpoints)
            if batch.relation is not None and not self.relations.size:
                self.relations = _id_map(batch.relation)
            both = self.nodes.map(endpoints).reshape(-1, 2)
            src, dst = both[:, 0], both[:, 1]
            rel = self.relations.map(batch.relation) if batch.relation is not None else np.zeros(len(src), np.int64)
            self.num_nodes, self.num_relations = self.nodes.size, max(1, self.relations.size)
            return src, rel, dst
        src = self._plain(batch.source, path, batch.first, "source", self.node_limit)
        dst = self._plain(batch.destination, path, batch.first, "destination", self.node_limit)
        rel = (self._plain(batch.relation, path, batch.first, "relation", self.relation_limit)
               if batch.relation is not None
               else np.zeros(len(src), np.int64))
        if len(src):
            self.num_nodes = max(self.num_nodes, int(src.max()) + 1, int(dst.max()) + 1)
            self.num_relations = max(self.num_relations, int(rel.max()) + 1)
        self.num_relations = max(self.num_relations, 1, self.relation_limit or 0)
        self.num_nodes = max(self.num_nodes, self.node_limit or 0)
        return src, rel, dst


def _read_labels(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(node ids, labels, line numbers)`` of a labels file: ``.npy`` (row k: original id k) or ``node label``
    lines (whitespace or comma separated, ``#`` comments)."""
    if path.suffix == ".npy":
        labels = _load_npy(path)
        if labels.ndim != 1 or labels.dtype.kind not in "iu":
            raise DataError(f"{path}: expected a 1-D integer array of labels, got {labels.dtype} {labels.shape}")
        return np.arange(len(labels)), labels.astype(np.int64), np.arange(len(labels)) + 1
    try:
        frame = pd.read_csv(path, sep=r"[\s,]+", header=None, comment="#", engine="python", dtype=str,
                            skip_blank_lines=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot parse labels ({' '.join(str(err).split())[:160]})") from None
    if frame.shape[1] != 2:
        raise DataError(f"{path}: expected two fields 'node label' per line, got {frame.shape[1]}")
    labels = pd.to_numeric(frame[1], errors="coerce")
    bad = labels.isna() | (labels != labels.round())
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"{path}: line {row + 1}: label {frame.iloc[row, 1]!r} is not an integer")
    nodes = frame[0].to_numpy()
    numeric = pd.to_numeric(frame[0], errors="coerce")
    if not numeric.isna().any():
        nodes = numeric.to_numpy(np.int64)
    return nodes, labels.to_numpy(np.int64), np.arange(len(frame)) + 1


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as err:
        raise DataError(f"{path}: not a readable .npy file ({' '.join(str(err).split())[:160]})") from None


def _original_rows(ids: _Ids, count: int, path: Path, what: str) -> np.ndarray:
    """Row of ``path`` (a per-node array indexed by original integer id) for every new node id."""
    if not ids.remap:
        if ids.num_nodes > count:
            raise DataError(f"{path}: {count} {what} rows but the edges name node {ids.num_nodes - 1}")
        ids.num_nodes = count
        return np.arange(count)
    ids.nodes.map(np.arange(count, dtype=np.int64))  # rows without edges become isolated nodes
    ids.num_nodes = ids.nodes.size
    originals = ids.nodes.originals()
    if originals.dtype.kind not in "iu":
        raise DataError(f"{path}: {what} rows are indexed by integer node ids, but the edge list has ids like "
                        f"{originals[0]!r}")
    rows = originals.to_numpy(np.int64)
    outside = (rows < 0) | (rows >= count)
    if outside.any():
        raise DataError(f"{path}: {count} {what} rows but the edge list names node {int(rows[outside][0])}")
    return rows


def import_edge_list(
    path: str | Path,
    out: str | Path,
    *,
    fmt: EdgeListFormat = EdgeListFormat(),
    split: tuple[float, float, float] | None = None,
    valid: str | Path | None = None,
    test: str | Path | None = None,
    features: str | Path | None = None,
    labels: str | Path | None = None,
    node_split: tuple[float, float, float] | None = None,
    remap: bool = True,
    directed: bool = True,
    seed: int = 0,
    name: str | None = None,
    overwrite: bool = False,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    max_bucket_edges: int = IMPORT_MAX_BUCKET_EDGES,
    num_nodes: int | None = None,
    num_relations: int | None = None,
    source_fields: dict | None = None,
    memory: MemoryBudget | None = None,
) -> GraphStore:
    """Build a store from an edge-list file (see the module docstring).

    Args:
        path: the edges (CSV/TSV/Parquet).
        out: the store folder to create.
        fmt: columns, header, delimiter, id type.
        split: edge split fractions ``(train, valid, test)``; None: every edge of ``path`` is a training edge.
        valid, test: files of validation / test edges in the same format (instead of ``split``).
        features: ``.npy`` ``(rows, d)`` float features, row ``k`` = original node id ``k``.
        labels: ``.npy`` (row = original id) or ``node label`` text file; -1 = unlabelled.
        node_split: node split fractions over the labelled nodes.
        remap: remap ids of any value to ``0..n-1`` (else ids are used as they are).
        directed: False stores both directions of every edge in the CSRs.
        seed: seed of the split draws.
        name: the name recorded (default: the file's stem).
        overwrite: replace an existing store.
        chunk_bytes: bytes of CSV per batch (Parquet: ``chunk_bytes / 32`` rows).
        max_bucket_edges: bucket size of the out-of-core CSR sort.
        num_nodes, num_relations: known counts (only without ``remap``): ids must lie below them, and the store
            has that many nodes / relations even when some have no edge.
        source_fields: entries added to (or replacing) the provenance record ``metadata["source"]`` (loaders
            built on this import name themselves there).
        memory: the memory the import may use: each text block, and the CSR build's chunks and sorts, are sized
            to what is left of it (:mod:`suite.data.out_of_core`), ``chunk_bytes`` and ``max_bucket_edges``
            being the largest; None: those sizes as given.

    Raises:
        MemoryLimitError: ``memory`` leaves too little for the smallest blocks and sorts.

    Returns:
        The opened store.
    """
    path = Path(path)
    _check_import_options(split, valid, test, node_split, labels, remap, num_nodes, num_relations)
    ids = _Ids(remap, node_limit=num_nodes, relation_limit=num_relations)
    inputs = [("train", path)] + [(s, Path(p)) for s, p in (("valid", valid), ("test", test)) if p is not None]
    ceiling = OutOfCoreSizes(max(1, chunk_bytes // 16), max_bucket_edges, chunk_bytes)
    if remap and memory is not None:
        from pyarrow import parquet  # noqa: F401  loaded now (40 MB of libraries): the sizes below see it held

    def block_bytes() -> int:
        return sizes_for(memory, ceiling, f"import of {path}", IDMAP_BYTES_PER_NODE * ids.nodes.size).chunk_bytes

    with create_store(out, overwrite) as writer:
        _write_edge_splits(writer, inputs, fmt, ids, split, seed, block_bytes if memory is not None else chunk_bytes)
        feature_dim = _write_features(writer, ids, Path(features)) if features is not None else 0
        num_classes = _write_labels(writer, ids, Path(labels), node_split, seed) if labels is not None else 0
        if ids.num_nodes == 0:
            raise DataError(f"{path}: no nodes")
        files = [p for _, p in inputs] + [Path(x) for x in (features, labels) if x]
        source = {**_import_source(path, fmt, remap, seed, split, files), **(source_fields or {})}
        if remap:  # written before the CSR build, whose chunks and sorts get the id map's memory
            _write_ids(writer.root / "node_ids.parquet", ids.nodes.originals())
            source["node_ids"] = "node_ids.parquet"
            if ids.relations.size:
                _write_ids(writer.root / "relation_ids.parquet", ids.relations.originals())
                source["relation_ids"] = "relation_ids.parquet"
            ids.release_maps()
        sizes = sizes_for(memory, ceiling, f"import of {path}", DEGREE_BYTES_PER_NODE * ids.num_nodes)
        chunks = _read_triples(writer.path_for("train_edges"), max(1, sizes.chunk_bytes // 24),
                               ids.num_relations > 1)
        num_edges = write_csrs(writer, chunks, ids.num_nodes, num_relations=ids.num_relations,
                               symmetrize=not directed, max_bucket_edges=sizes.max_bucket_edges,
                               chunk_edges=sizes.chunk_edges)
        writer.finalize(name=name or path.stem, num_nodes=ids.num_nodes, num_edges=num_edges, directed=directed,
                        num_relations=ids.num_relations, num_classes=num_classes, feature_dim=feature_dim,
                        source=source)
    return GraphStore.open(out)


def _check_import_options(split, valid, test, node_split, labels, remap: bool, num_nodes: int | None,
                          num_relations: int | None) -> None:
    """Options of :func:`import_edge_list` that exclude or need each other."""
    if split is not None and (valid is not None or test is not None):
        raise ConfigError("--split: give split fractions or --valid/--test files, not both")
    if node_split is not None and labels is None:
        raise ConfigError("--node-split: needs --labels")
    if remap and (num_nodes is not None or num_relations is not None):
        raise ConfigError("num_nodes / num_relations: known counts need integer ids used as they are (remap=False)")


def _write_edge_splits(writer: StoreWriter, inputs: list[tuple[str, Path]], fmt: EdgeListFormat, ids: "_Ids",
                       split: tuple[float, float, float] | None, seed: int,
                       chunk_bytes: int | Callable[[], int]) -> None:
    """Read every input file in batches, number its ids, and append its triples (and weights) to the split they
    belong to: the file's own split, or a seeded draw by row over ``split`` for the training file."""
    counts = dict.fromkeys(_SPLITS, 0)
    with (writer.appender("train_edges", np.int64, (3,)) as train_out,
          writer.appender("valid_edges", np.int64, (3,)) as valid_out,
          writer.appender("test_edges", np.int64, (3,)) as test_out):
        outputs = {"train": train_out, "valid": valid_out, "test": test_out}
        weights = {}
        if fmt.weight is not None:
            weights = {s: writer.path_for(f"{s}_edge_weights") for s in _SPLITS}
            weight_files = {s: open_write(p.with_suffix(".raw"), "wb") for s, p in weights.items()}
        row = 0
        for origin, file in inputs:
            for batch in read_edge_batches(file, fmt, chunk_bytes):
                src, rel, dst = ids.edges(batch, file)
                triples = np.stack([src, rel, dst], axis=1)
                if origin == "train" and split is not None:
                    assigned = _assign(np.arange(row, row + len(src)), split, seed)
                    parts = {s: assigned == i for i, s in enumerate(_SPLITS)}
                else:
                    parts = {origin: slice(None)}
                row += len(src)
                for target, selector in parts.items():
                    chosen = triples[selector]
                    outputs[target].append(chosen)
                    counts[target] += len(chosen)
                    if weights:
                        write_to(weight_files[target], np.asarray(batch.weight[selector], np.float32).tobytes(),
                                 weights[target].with_suffix(".raw"))
        for split_name, handle in (weight_files.items() if weights else ()):
            close_file(handle, weights[split_name].with_suffix(".raw"))
    if counts["train"] == 0:
        raise DataError(f"{inputs[0][1]}: no training edges (empty file, or a train fraction of 0)")
    for split_name, count in counts.items():
        if count == 0 and split_name != "train":
            writer.discard(f"{split_name}_edges")
    for split_name, raw in ((s, p.with_suffix(".raw")) for s, p in weights.items()):
        if counts[split_name]:
            writer.write_array(f"{split_name}_edge_weights", np.fromfile(raw, np.float32))
        raw.unlink()


def _write_features(writer: StoreWriter, ids: "_Ids", feature_path: Path) -> int:
    """The ``.npy`` feature table's rows of the stored nodes (row = original id), in row blocks; its width."""
    table = _load_npy(feature_path)
    if table.ndim != 2 or table.dtype.kind != "f":
        raise DataError(f"{feature_path}: expected a 2-D float array (nodes x features), got "
                        f"{table.dtype} {table.shape}")
    rows = _original_rows(ids, len(table), feature_path, "feature")
    with writer.appender("features", np.float32, (table.shape[1],)) as feature_out:
        for part in np.array_split(rows, max(1, len(rows) // (1 << 20))):
            feature_out.append(np.asarray(table[part], dtype=np.float32))
    return table.shape[1]


def _import_source(path: Path, fmt: EdgeListFormat, remap: bool, seed: int,
                   split: tuple[float, float, float] | None, files: list[Path]) -> dict:
    """The provenance record ``metadata["source"]`` of an import: format, columns, options and the files read."""
    return {"loader": "edge_list", "format": fmt.kind(path), "columns": {
        role: getattr(fmt, role) for role in ("source", "destination", "relation", "weight")
        if getattr(fmt, role) is not None}, "remapped": remap, "seed": seed,
        "split": list(split) if split is not None else None,
        "files": {str(p): record for file in files
                  for p, record in file_records(file.parent, [file], checksum=False).items()}}


def _read_triples(path: Path, rows: int, typed: bool) -> Iterator[EdgeChunk]:
    """The ``(k, 3)`` rows of a ``.npy`` file in chunks, read with plain reads (a memory map's pages would count
    toward the resident memory, which must not grow with the number of edges)."""
    from suite.data.npy import read_npy_header

    _, shape, offset = read_npy_header(path)
    with open(path, "rb") as handle:
        handle.seek(offset)
        for _ in range(0, shape[0], rows):
            block = np.fromfile(handle, dtype=np.int64, count=rows * 3).reshape(-1, 3)
            yield EdgeChunk(block[:, 0], block[:, 2], block[:, 1] if typed else None)


def _write_ids(path: Path, originals: pd.Index) -> None:
    import pyarrow as pa
    from pyarrow import parquet as pq

    pq.write_table(pa.table({"id": pa.array(originals.to_numpy())}), path)


def _write_labels(writer, ids: _Ids, path: Path, node_split, seed: int) -> int:
    nodes, values, lines = _read_labels(path)
    if path.suffix == ".npy":
        rows = _original_rows(ids, len(values), path, "label")
        labels = values[rows]
    else:
        if ids.remap:
            new = ids.nodes.lookup(nodes)
        else:
            new = nodes.astype(np.int64) if nodes.dtype.kind in "iu" else np.full(len(nodes), -1)
            new[(new < 0) | (new >= ids.num_nodes)] = -1
        unknown = new < 0
        if unknown.any():
            row = int(np.flatnonzero(unknown)[0])
            raise DataError(f"{path}: line {int(lines[row])}: node {nodes[row]!r} is not in the edge list")
        labels = np.full(ids.num_nodes, -1, np.int64)
        labels[new] = values
    if (labels < -1).any():
        raise DataError(f"{path}: labels must be >= 0 (or -1 for unlabelled), got {int(labels.min())}")
    writer.write_array("labels", labels)
    labelled = np.flatnonzero(labels >= 0)
    if node_split is not None and len(labelled):
        assigned = _assign(labelled, node_split, seed + 1)
        for i, key in enumerate(NODE_SPLITS):
            writer.write_array(key, labelled[assigned == i].astype(np.int64))
    return int(labels.max()) + 1 if len(labelled) else 0


__all__ = ["EdgeListFormat", "IdMap", "SortedIdMap", "import_edge_list", "parse_fractions", "read_edge_batches"]
