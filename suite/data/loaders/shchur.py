"""Shchur et al.'s ``.npz`` graphs ("Pitfalls of Graph Neural Network Evaluation", shchur/gnn-benchmark).

Layout of one file: ``adj_data``, ``adj_indices``, ``adj_indptr``, ``adj_shape`` (the adjacency as CSR arrays),
``attr_data``, ``attr_indices``, ``attr_indptr``, ``attr_shape`` (the node features as CSR arrays), ``labels``
(one class per node), and name arrays (``class_names``, ``node_names``...) that are not read (they need pickle).
The file is read with ``allow_pickle=False``.

The store is undirected: the adjacency is symmetrised (Amazon's is stored one-directional in part), deduplicated
and stripped of self-loops, as PyG's ``read_npz`` does, so the edge counts equal PyG's (491,722 directed edges for
Amazon Computers). The whole file is stored; the split draws from every node, or with ``component: largest`` from
the largest connected component only, as Shchur et al. did (see docs/datasets.md). Features
are stored dense, float16 when every value is an integer of at most 2048 in magnitude (the binary and count
features of these files: exact), else float32. The node split is drawn at preparation (:mod:`.node_splits`):
20 training and 30 validation nodes per class by default, the rest test (Shchur et al.'s protocol).

Registered as ``amazon-computers``, ``coauthor-cs`` and ``coauthor-physics`` (each reads its published file name
in ``root``) and as ``shchur`` (any such file: ``root/<name>.npz``, else the only ``.npz`` in ``root``; ``--name``
sets the dataset name).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from suite.errors import DataError
from suite.data.csr import write_csrs
from suite.data.loaders.node_splits import NodeSplitOptions, PerClassSplit, split_for, split_labels
from suite.data.loaders.raw_files import LOADERS, check_ids, edge_chunks, raw_source, require_files
from suite.data.store import GraphStore, create_store

SHCHUR_FILES = {"amazon-computers": "amazon_electronics_computers.npz", "coauthor-cs": "ms_academic_cs.npz",
                "coauthor-physics": "ms_academic_phy.npz"}
"""The published file of each registered dataset."""
ARRAY_KEYS = ("adj_data", "adj_indices", "adj_indptr", "adj_shape", "attr_data", "attr_indices", "attr_indptr",
              "attr_shape", "labels")
FEATURE_ROWS = 4096
"""Rows of the dense feature matrix built at a time."""
FLOAT16_EXACT = 2048
"""Integers up to this magnitude are exact in float16."""


def shchur_protocol(seed: int) -> PerClassSplit:
    """Shchur et al.'s split: 20 training and 30 validation nodes per class, the rest test."""
    return PerClassSplit(train_per_class=20, valid_per_class=30, seed=seed)


def read_npz_arrays(path: Path) -> dict[str, np.ndarray]:
    """The arrays :data:`ARRAY_KEYS` of ``path``; DataError naming the file and the missing or unreadable key."""
    try:
        with np.load(path, allow_pickle=False) as content:
            missing = [key for key in ARRAY_KEYS if key not in content.files]
            if missing:
                raise DataError(f"{path}: missing key {missing[0]!r} (Shchur et al.'s .npz layout: "
                                f"{', '.join(ARRAY_KEYS)})")
            return {key: content[key] for key in ARRAY_KEYS}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise DataError(f"{path}: not a readable .npz file ({' '.join(str(err).split())[:160]})") from None


def _csr_parts(arrays: dict[str, np.ndarray], prefix: str, rows: int, path: Path,
               what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(data, indices, indptr, columns)`` of the CSR ``prefix_*`` arrays, their shapes checked against ``rows``."""
    shape, indptr = arrays[f"{prefix}_shape"].reshape(-1), arrays[f"{prefix}_indptr"].reshape(-1)
    data, indices = arrays[f"{prefix}_data"].reshape(-1), arrays[f"{prefix}_indices"].reshape(-1)
    where = f"{path}: {what}"
    if len(shape) != 2 or int(shape[0]) != rows:
        raise DataError(f"{where}: {prefix}_shape is {shape.tolist()}, expected ({rows}, columns) "
                        f"({rows} nodes in 'labels')")
    if len(indptr) != rows + 1 or indptr[0] != 0 or (np.diff(indptr) < 0).any():
        raise DataError(f"{where}: {prefix}_indptr must hold {rows + 1} non-decreasing offsets from 0, got "
                        f"{len(indptr)} entries")
    if not len(data) == len(indices) == int(indptr[-1]):
        raise DataError(f"{where}: {prefix}_data ({len(data)}) and {prefix}_indices ({len(indices)}) must both hold "
                        f"{prefix}_indptr[-1] = {int(indptr[-1])} entries")
    columns = int(shape[1])
    check_ids(indices, columns, f"{path}: {prefix}_indices", "column")
    return data, indices.astype(np.int64), indptr.astype(np.int64), columns


def _feature_blocks(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, columns: int,
                    dtype: np.dtype) -> Iterator[np.ndarray]:
    rows = len(indptr) - 1
    for start in range(0, rows, FEATURE_ROWS):
        end = min(start + FEATURE_ROWS, rows)
        block = np.zeros((end - start, columns), dtype=dtype)
        low, high = int(indptr[start]), int(indptr[end])
        block_rows = np.repeat(np.arange(end - start), np.diff(indptr[start:end + 1]))
        block[block_rows, indices[low:high]] = data[low:high]
        yield block


def feature_dtype(values: np.ndarray) -> np.dtype:
    """float16 when every value is an integer exact in float16, else float32."""
    exact = values.size == 0 or (np.all(np.mod(values, 1) == 0) and float(np.abs(values).max()) <= FLOAT16_EXACT)
    return np.dtype(np.float16 if exact else np.float32)


def shchur_file(root: Path, name: str) -> Path:
    """``root/<name>.npz``, else the only ``.npz`` file in ``root``; DataError naming ``root`` otherwise."""
    if not root.is_dir():
        raise DataError(f"{root}: raw data folder does not exist (expected a Shchur et al. .npz file in it)")
    if (root / f"{name}.npz").is_file():
        return root / f"{name}.npz"
    found = sorted(root.glob("*.npz"))
    if len(found) != 1:
        raise DataError(f"{root}: expected {name}.npz or exactly one .npz file (Shchur et al.'s layout), found "
                        f"{len(found)}{': ' + ', '.join(p.name for p in found[:5]) if found else ''}")
    return found[0]


def build_shchur_store(path: Path, root: Path, out: Path, *, overwrite: bool, name: str,
                       split: NodeSplitOptions | None) -> GraphStore:
    """The store of the Shchur ``.npz`` file ``path`` (see the module docstring)."""
    arrays = read_npz_arrays(path)
    labels = arrays["labels"].reshape(-1)
    if arrays["labels"].ndim != 1 or labels.dtype.kind not in "iu":
        raise DataError(f"{path}: labels must be one integer class per node, got shape {arrays['labels'].shape} "
                        f"{arrays['labels'].dtype}")
    labels = labels.astype(np.int64)
    num_nodes = len(labels)
    if (labels < 0).any():
        raise DataError(f"{path}: labels: class {int(labels.min())} is negative")
    adj_shape = arrays["adj_shape"].reshape(-1).tolist()
    if len(adj_shape) == 2 and adj_shape[0] == num_nodes and adj_shape[1] != num_nodes:
        raise DataError(f"{path}: adjacency: adj_shape is {arrays['adj_shape'].tolist()}, expected square "
                        f"({num_nodes}, {num_nodes})")
    adj_data, adj_indices, adj_indptr, _ = _csr_parts(arrays, "adj", num_nodes, path, "adjacency")
    attr_data, attr_indices, attr_indptr, feature_dim = _csr_parts(arrays, "attr", num_nodes, path, "features")
    present = adj_data != 0
    src = np.repeat(np.arange(num_nodes, dtype=np.int64), np.diff(adj_indptr))[present]
    dst = adj_indices[present]
    protocol = split_for(split, shchur_protocol)
    node_split = protocol.assign(split_labels(labels, protocol.component, src, dst), str(path))
    dtype = feature_dtype(attr_data)
    source = raw_source("shchur", root, [path], format="Shchur et al. .npz (CSR adjacency and features, labels)",
                        reader="numpy.load(allow_pickle=False)")
    with create_store(out, overwrite) as writer:
        num_edges = write_csrs(writer, edge_chunks(src, dst), num_nodes, symmetrize=True, drop_self_loops=True,
                               deduplicate=True)
        with writer.appender("features", dtype, (feature_dim,)) as features:
            for block in _feature_blocks(attr_data, attr_indices, attr_indptr, feature_dim, dtype):
                features.append(block)
        writer.write_array("labels", labels)
        for key, nodes in node_split.items():
            writer.write_array(key, nodes)
        writer.finalize(name=name, num_nodes=num_nodes, num_edges=num_edges, directed=False,
                        num_classes=int(labels.max()) + 1 if num_nodes else 0, feature_dim=feature_dim,
                        source=source, labeled_nodes=num_nodes,
                        node_split=protocol.describe())
    return GraphStore.open(out)


def load_shchur(root: Path, out: Path, *, overwrite: bool, progress: bool, name: str = "shchur",
                split: NodeSplitOptions | None = None) -> GraphStore:
    """Build the store of a Shchur et al. ``.npz`` file in ``root`` (``<name>.npz``, else the only one).

    Args:
        root: folder holding the file.
        out: store folder to create.
        overwrite: replace an existing store.
        progress: unused (the files are small).
        name: dataset name recorded in the store.
        split: the node split (default: 20 training and 30 validation nodes per class, seed 0).

    Returns:
        The opened store: undirected, features, labels, the node split.

    Raises:
        DataError: the file is missing, is not an ``.npz``, lacks a key or has inconsistent shapes (one line naming
            it); no store is left behind.
    """
    del progress
    return build_shchur_store(shchur_file(root, name), root, out, overwrite=overwrite, name=name, split=split)


def _published_loader(dataset: str):
    def load(root: Path, out: Path, *, overwrite: bool, progress: bool, name: str = dataset,
             split: NodeSplitOptions | None = None) -> GraphStore:
        del progress
        (path,) = require_files(root, [SHCHUR_FILES[dataset]], f"Shchur et al. .npz file of {dataset}")
        return build_shchur_store(path, root, out, overwrite=overwrite, name=name, split=split)

    load.__doc__ = (f"Build the store of {dataset} from ``root/{SHCHUR_FILES[dataset]}`` (as :func:`load_shchur`; "
                    f"see the module docstring).")
    return load


LOADERS.register("shchur", load_shchur)
for _dataset in SHCHUR_FILES:
    LOADERS.register(_dataset, _published_loader(_dataset))

__all__ = ["SHCHUR_FILES", "build_shchur_store", "feature_dtype", "load_shchur", "read_npz_arrays", "shchur_file"]
