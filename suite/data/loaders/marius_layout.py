"""Link-prediction datasets as Marius's ``marius_preprocess`` writes them (e.g. ``--dataset freebase86m``).

Layout of the output folder (``root``):

- ``dataset.yaml``: ``num_nodes``, ``num_relations``, ``num_train``, ``num_valid``, ``num_test`` (other fields,
  such as ``dataset_dir``, ``num_edges`` or ``node_feature_dim``, are not read);
- ``edges/train_edges.bin``, ``edges/validation_edges.bin``, ``edges/test_edges.bin``: raw row-major integer
  arrays, one row per edge, ``(src, rel, dst)`` when ``num_relations > 1`` and ``(src, dst)`` otherwise; int32 or
  int64 (Marius picks the width; it is read off the file size, which must match the row count exactly).

Node ids are Marius's remapped ids (its ``nodes/node_mapping.txt`` maps them back; not read). The files are read
in blocks of :data:`BLOCK_ROWS` rows (bounded memory); every id is checked against ``dataset.yaml``. Registered as
``marius`` (any such folder; ``--name`` sets the dataset name) and read by ``freebase86m`` when its ``root`` is
such a folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from suite.errors import DataError
from suite.data.csr import EdgeChunk, write_csrs
from suite.data.loaders.raw_files import LOADERS, raw_source
from suite.data.store import GraphStore, create_store

DATASET_FILE = "dataset.yaml"
EDGE_FILES = {"train": ("edges/train_edges.bin", "num_train"), "valid": ("edges/validation_edges.bin", "num_valid"),
              "test": ("edges/test_edges.bin", "num_test")}
BLOCK_ROWS = 1 << 22


def is_marius_folder(root: Path) -> bool:
    """Whether ``root`` looks like a ``marius_preprocess`` output folder."""
    return (root / DATASET_FILE).is_file() and (root / EDGE_FILES["train"][0]).is_file()


def read_dataset_yaml(path: Path) -> dict[str, int]:
    """The counts of a Marius ``dataset.yaml``; DataError naming the file and the field."""
    try:
        content: Any = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise DataError(f"{path}: cannot read ({' '.join(str(err).split())[:160]})") from None
    if not isinstance(content, dict):
        raise DataError(f"{path}: expected a mapping of dataset statistics")
    counts = {}
    for field in ("num_nodes", "num_relations", "num_train", "num_valid", "num_test"):
        value = content.get(field, 0 if field in ("num_valid", "num_test") else None)
        value = 0 if value is None and field in ("num_valid", "num_test") else value
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise DataError(f"{path}: {field} must be a non-negative integer, got {value!r}")
        counts[field] = value
    if counts["num_nodes"] == 0 or counts["num_train"] == 0:
        raise DataError(f"{path}: num_nodes and num_train must be positive")
    counts["num_relations"] = max(1, counts["num_relations"])
    return counts


def edge_file_dtype(path: Path, rows: int, columns: int, field: str) -> np.dtype:
    """int32 or int64, whichever makes ``path`` exactly ``rows`` rows of ``columns``; DataError otherwise."""
    size = path.stat().st_size
    for dtype in (np.dtype(np.int32), np.dtype(np.int64)):
        if size == rows * columns * dtype.itemsize:
            return dtype
    raise DataError(f"{path}: {size} bytes is not {rows} rows ({DATASET_FILE} {field}) of {columns} int32 or int64 "
                    f"columns")


def _blocks(path: Path, dtype: np.dtype, columns: int) -> Iterator[np.ndarray]:
    with open(path, "rb") as handle:
        while len(block := np.fromfile(handle, dtype=dtype, count=BLOCK_ROWS * columns)):
            yield block.reshape(-1, columns).astype(np.int64)


def _triples(path: Path, dtype: np.dtype, columns: int, counts: dict[str, int]) -> Iterator[np.ndarray]:
    """``(k, 3)`` ``(src, rel, dst)`` blocks of an edge file, every id checked (errors name the row)."""
    done = 0
    for block in _blocks(path, dtype, columns):
        triples = block if columns == 3 else np.stack([block[:, 0], np.zeros(len(block), np.int64), block[:, 1]], 1)
        for column, high, what in ((0, counts["num_nodes"], "source node id"),
                                   (1, counts["num_relations"], "relation id"),
                                   (2, counts["num_nodes"], "destination node id")):
            bad = (triples[:, column] < 0) | (triples[:, column] >= high)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise DataError(f"{path}: row {done + row}: {what} {int(triples[row, column])} is out of range "
                                f"[0, {high}) ({DATASET_FILE})")
        done += len(block)
        yield triples


def load_marius(root: Path, out: Path, *, overwrite: bool, progress: bool, name: str = "marius") -> GraphStore:
    """Build a store from a ``marius_preprocess`` link-prediction folder (see the module docstring).

    Args:
        root: the folder holding ``dataset.yaml`` and ``edges/``.
        out: store folder to create.
        overwrite: replace an existing store.
        progress: unused.
        name: dataset name recorded in the store.

    Returns:
        The opened store: directed, typed when ``num_relations > 1``, CSRs over the training edges, edge splits.

    Raises:
        DataError: a file is missing or malformed (one line naming it); no store is left behind.
    """
    del progress
    counts = read_dataset_yaml(root / DATASET_FILE) if (root / DATASET_FILE).is_file() else None
    if counts is None:
        raise DataError(f"{root / DATASET_FILE}: missing (a marius_preprocess output folder)")
    columns = 3 if counts["num_relations"] > 1 else 2
    splits = {}
    for split, (relative, field) in EDGE_FILES.items():
        path = root / relative
        if counts[field] == 0:
            continue
        if not path.is_file():
            raise DataError(f"{path}: missing ({DATASET_FILE} says {field}: {counts[field]})")
        splits[split] = (path, edge_file_dtype(path, counts[field], columns, field))
    source = raw_source("marius", root, [root / DATASET_FILE] + [path for path, _ in splits.values()],
                        checksum=False, layout="marius_preprocess: dataset.yaml, edges/*.bin")
    with create_store(out, overwrite) as writer:
        for split, (path, dtype) in splits.items():
            with writer.appender(f"{split}_edges", np.int64, (3,)) as split_out:
                for triples in _triples(path, dtype, columns, counts):
                    split_out.append(triples)
        train_path, train_dtype = splits["train"]
        chunks = (EdgeChunk(t[:, 0], t[:, 2], t[:, 1] if columns == 3 else None)
                  for t in _triples(train_path, train_dtype, columns, counts))
        num_edges = write_csrs(writer, chunks, counts["num_nodes"], num_relations=counts["num_relations"])
        writer.finalize(name=name, num_nodes=counts["num_nodes"], num_edges=num_edges, directed=True,
                        num_relations=counts["num_relations"], source=source)
    return GraphStore.open(out)


__all__ = ["edge_file_dtype", "is_marius_folder", "load_marius", "read_dataset_yaml"]

LOADERS.register("marius", load_marius)
