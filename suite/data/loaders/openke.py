"""Knowledge graphs in the OpenKE id format (FB15k, FB15k-237, WN18, WN18RR, YAGO3-10 and any other OpenKE
benchmark folder: registered as ``openke`` and under each of those names).

A benchmark folder holds ``entity2id.txt`` and ``relation2id.txt`` (first line: the count, then one
``name<TAB>id`` per line) and ``train2id.txt``, ``valid2id.txt``, ``test2id.txt`` (first line: the number of
triples, then ``head tail relation`` per line, whitespace-separated).

The store is directed; its CSRs hold the training triples with their relation types (repeated triples are
kept, as in the file); ``train_edges`` / ``valid_edges`` / ``test_edges`` hold the triples as ``(k, 3)`` int64
columns ``(src, rel, dst)`` -- note the column order differs from the file's ``head tail relation``. No node
features, no labels.

Parsing is vectorized (pandas' C tokenizer); only when a file is malformed is it re-scanned line by line to name
the first bad line. Every error is one line ``<file>: line <k>: <what is wrong>``.
"""

from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from suite.errors import DataError
from suite.data.csr import EdgeChunk, write_csrs
from suite.data.loaders.raw_files import LOADERS, raw_source, read_raw_bytes, require_files
from suite.data.store import GraphStore, create_store

ENTITY_FILE = "entity2id.txt"
RELATION_FILE = "relation2id.txt"
SPLIT_FILES = {"train": "train2id.txt", "valid": "valid2id.txt", "test": "test2id.txt"}
OPENKE_FILES = (ENTITY_FILE, RELATION_FILE, *SPLIT_FILES.values())
_INTEGER = re.compile(rb"[+-]?\d{1,18}")


@dataclass(frozen=True)
class Triples:
    """Triples of one split as parsed from an OpenKE file (each array ``(k,)`` int64)."""

    head: np.ndarray
    tail: np.ndarray
    relation: np.ndarray

    def as_edges(self) -> np.ndarray:
        """The ``(k, 3)`` int64 array ``(src, rel, dst)`` of the store format."""
        return np.stack([self.head, self.relation, self.tail], axis=1).astype(np.int64, copy=False)


def _split_header(path: Path, data: bytes, what: str) -> tuple[int, bytes, int]:
    """Parse the count on line 1; return ``(count, data without trailing blank lines, lines after the header)``."""
    data = data.rstrip()
    header = data.split(b"\n", 1)[0].strip()
    if not _INTEGER.fullmatch(header) or int(header) < 0:
        shown = header[:40].decode(errors="replace")
        raise DataError(f"{path}: line 1: expected the number of {what} (a non-negative integer), got {shown!r}")
    return int(header), data, data.count(b"\n")


def read_count_file(path: Path, what: str) -> int:
    """Read an ``entity2id.txt`` / ``relation2id.txt`` file: its header count, checked against its line count.

    Args:
        path: the file.
        what: what it lists (``"entities"``, ``"relations"``), for messages.

    Returns:
        The number of entries.
    """
    count, _, lines = _split_header(path, read_raw_bytes(path), what)
    if lines != count:
        raise DataError(f"{path}: line 1: header says {count} {what} but {lines} lines follow")
    return count


def _first_bad_line(body: bytes) -> tuple[int, str] | None:
    """Locate the first line (1-based, counting the header) that is not three integers; None if all are.

    Only called once a file is known to be malformed (a Python scan of the lines is then acceptable).
    """
    for number, line in enumerate(body.split(b"\n")[1:], start=2):
        fields = line.split()
        if len(fields) != 3 or not all(_INTEGER.fullmatch(field) for field in fields):
            return number, line.strip()[:60].decode(errors="replace")
    return None


def _parse_body(path: Path, body: bytes, lines: int) -> np.ndarray:
    """Parse the lines after the header into a ``(lines, 3)`` int64 array, or raise naming the bad line."""
    error: Exception | None = None
    values = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)  # a malformed row: treat as an error
            frame = pd.read_csv(
                io.BytesIO(body), sep=r"\s+", header=None, skiprows=1, names=["head", "tail", "relation"],
                index_col=False, skip_blank_lines=False, engine="c",
            )
        if len(frame) == lines and all(dtype == np.int64 for dtype in frame.dtypes):
            values = frame.to_numpy(dtype=np.int64)
    except (ValueError, pd.errors.ParserError, pd.errors.ParserWarning, pd.errors.EmptyDataError) as err:
        error = err
    if values is not None:
        return values
    bad = _first_bad_line(body)
    if bad is not None:
        number, text = bad
        raise DataError(f"{path}: line {number}: expected three integers 'head tail relation', got {text!r}")
    detail = " ".join(str(error).split()) if error is not None else "unexpected row count or column types"
    raise DataError(f"{path}: cannot parse triples ({detail})")


def _check_range(path: Path, column: np.ndarray, high: int, what: str, source: str) -> None:
    bad = (column < 0) | (column >= high)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"{path}: line {row + 2}: {what} id {int(column[row])} is out of range [0, {high}) ({source})"
        )


def read_triples(path: Path, num_entities: int, num_relations: int) -> Triples:
    """Read one OpenKE split file (``head tail relation`` per line after a count line) and check every id.

    Args:
        path: ``train2id.txt``, ``valid2id.txt`` or ``test2id.txt``.
        num_entities: entity ids must lie in ``[0, num_entities)``.
        num_relations: relation ids must lie in ``[0, num_relations)``.

    Returns:
        The triples.

    Raises:
        DataError: ``<file>: line <k>: ...`` for a bad count line, a count that disagrees with the number of
            lines, a line that is not three integers, an id out of range, or an empty split.
    """
    count, body, lines = _split_header(path, read_raw_bytes(path), "triples")
    values = _parse_body(path, body, lines) if lines else np.empty((0, 3), np.int64)
    if lines != count:
        raise DataError(f"{path}: line 1: header says {count} triples but {lines} lines follow")
    if count == 0:
        raise DataError(f"{path}: line 1: the split is empty (0 triples)")
    head, tail, relation = values[:, 0], values[:, 1], values[:, 2]
    _check_range(path, head, num_entities, "head entity", f"{ENTITY_FILE} lists {num_entities}")
    _check_range(path, tail, num_entities, "tail entity", f"{ENTITY_FILE} lists {num_entities}")
    _check_range(path, relation, num_relations, "relation", f"{RELATION_FILE} lists {num_relations}")
    return Triples(head, tail, relation)


OPENKE_BENCHMARKS = ("fb15k", "fb15k237", "wn18", "wn18rr", "yago3-10")
"""Benchmark names registered on :func:`load_openke` (each a folder in OpenKE's layout); ``openke`` itself is
registered too, for any other benchmark folder (its name is then given by ``--name``)."""


def load_openke(root: Path, out: Path, *, overwrite: bool, progress: bool, name: str = "fb15k237") -> GraphStore:
    """Build the store of an OpenKE benchmark folder.

    Args:
        root: folder with ``entity2id.txt``, ``relation2id.txt``, ``train2id.txt``, ``valid2id.txt``,
            ``test2id.txt``.
        out: store folder to create.
        overwrite: replace an existing store.
        progress: unused (parsing takes well under a second for FB15k-237).
        name: dataset name recorded in the store.

    Returns:
        The opened store: directed, typed (``num_relations`` from ``relation2id.txt``), CSRs over the
        training triples, edge splits ``(src, rel, dst)``.

    Raises:
        DataError: a file is missing or malformed (the message names the file and line).
    """
    del progress
    paths = require_files(root, OPENKE_FILES, "OpenKE benchmark file")
    num_entities = read_count_file(root / ENTITY_FILE, "entities")
    num_relations = read_count_file(root / RELATION_FILE, "relations")
    if num_entities == 0 or num_relations == 0:
        empty = ENTITY_FILE if num_entities == 0 else RELATION_FILE
        raise DataError(f"{root / empty}: line 1: count is 0 (a knowledge graph needs entities and relations)")
    splits = {split: read_triples(root / file, num_entities, num_relations) for split, file in SPLIT_FILES.items()}
    train = splits["train"]
    source = raw_source("openke", root, paths, format="OpenKE ids: <count> line, then 'head tail relation' per line")
    with create_store(out, overwrite) as writer:
        num_edges = write_csrs(writer, [EdgeChunk(train.head, train.tail, train.relation)], num_entities,
                               num_relations=num_relations)
        for split, triples in splits.items():
            writer.write_array(f"{split}_edges", triples.as_edges())
        writer.finalize(
            name=name, num_nodes=num_entities, num_edges=num_edges, directed=True, num_relations=num_relations,
            source=source,
        )
    return GraphStore.open(out)


for _benchmark in ("openke", *OPENKE_BENCHMARKS):
    LOADERS.register(_benchmark, load_openke)
