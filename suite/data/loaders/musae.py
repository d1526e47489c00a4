"""Facebook Page-Page in the MUSAE layout (Rozemberczki et al. 2019, benedekrozemberczki/MUSAE).

Files in ``root``:

- ``facebook_edges.csv``: header ``id_1,id_2``, one undirected edge per line;
- ``facebook.json``: an object mapping each node id (a string) to the list of its feature ids;
- ``facebook_target.csv``: header with ``id`` and ``page_type`` (the label; other columns are not read), one row per
  node, ids ``0 .. n-1``.

The store is undirected (both directions of every edge, duplicates and self-loops dropped, as for Shchur's graphs),
with binary float16 features (width: the largest feature id + 1), ``page_type`` as classes numbered in sorted name
order (``class_names`` in the metadata), and a seeded fraction split (default 60 / 20 / 20 %; the dataset has no
fixed split). Registered as ``facebook-page-page``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from suite.errors import DataError
from suite.data.csr import write_csrs
from suite.data.loaders.node_splits import FractionSplit, NodeSplitOptions, split_for, split_labels
from suite.data.loaders.raw_files import LOADERS, check_ids, edge_chunks, raw_source, require_files
from suite.data.store import GraphStore, create_store

EDGES_FILE, FEATURES_FILE, TARGET_FILE = "facebook_edges.csv", "facebook.json", "facebook_target.csv"
LABEL_COLUMN = "page_type"


def musae_protocol(seed: int) -> FractionSplit:
    """The default split of a MUSAE graph: 60 % training, 20 % validation, 20 % test nodes."""
    return FractionSplit(fractions=(0.6, 0.2, 0.2), seed=seed)


def _read_csv(path: Path, columns: tuple[str, ...]):
    import pandas as pd

    try:
        table = pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError) as err:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise DataError(f"{path}: not a readable csv file ({' '.join(str(err).split())[:160]})") from None
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise DataError(f"{path}: missing column {missing[0]!r} (header {', '.join(map(str, table.columns))[:120]})")
    return table


def _integer_column(table, column: str, path: Path) -> np.ndarray:
    values = table[column].to_numpy()
    if values.dtype.kind not in "iu":
        raise DataError(f"{path}: column {column!r} must hold integer node ids, got {values.dtype} "
                        f"(first value {values[0]!r})" if len(values) else f"{path}: column {column!r} is empty")
    return values.astype(np.int64)


def read_targets(path: Path) -> tuple[np.ndarray, list[str]]:
    """Labels by node id (classes in sorted name order) and the class names; DataError naming the file."""
    table = _read_csv(path, ("id", LABEL_COLUMN))
    ids = _integer_column(table, "id", path)
    check_ids(ids, len(ids), f"{path}: column 'id'", "node id")
    if len(np.unique(ids)) != len(ids):
        raise DataError(f"{path}: column 'id' repeats node ids (expected each of 0 .. {len(ids) - 1} once)")
    names = table[LABEL_COLUMN].astype(str).to_numpy()
    class_names, codes = np.unique(names, return_inverse=True)
    labels = np.empty(len(ids), np.int64)
    labels[ids] = codes
    return labels, [str(name) for name in class_names]


def read_feature_lists(path: Path, num_nodes: int) -> np.ndarray:
    """The binary float16 feature matrix of the JSON feature-id lists; DataError naming the file and the node."""
    try:
        content = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: invalid JSON ({err})") from None
    if not isinstance(content, dict):
        raise DataError(f"{path}: expected an object mapping node ids to lists of feature ids")
    rows, columns = [], []
    for key, value in content.items():
        if not key.isdigit() or int(key) >= num_nodes:
            raise DataError(f"{path}: key {key!r} is not a node id in [0, {num_nodes})")
        if not isinstance(value, list) or not all(isinstance(f, int) and not isinstance(f, bool) and f >= 0
                                                  for f in value):
            raise DataError(f"{path}: node {key}: expected a list of non-negative integer feature ids")
        rows.append(np.full(len(value), int(key), np.int64))
        columns.append(np.asarray(value, np.int64))
    row_ids = np.concatenate(rows) if rows else np.empty(0, np.int64)
    feature_ids = np.concatenate(columns) if columns else np.empty(0, np.int64)
    width = int(feature_ids.max()) + 1 if len(feature_ids) else 0
    features = np.zeros((num_nodes, width), np.float16)
    features[row_ids, feature_ids] = 1
    return features


@LOADERS.register("facebook-page-page")
def load_facebook_page_page(root: Path, out: Path, *, overwrite: bool, progress: bool,
                            name: str = "facebook-page-page", split: NodeSplitOptions | None = None) -> GraphStore:
    """Build the store of Facebook Page-Page from its MUSAE files in ``root`` (see the module docstring).

    Args:
        root: folder holding ``facebook_edges.csv``, ``facebook.json`` and ``facebook_target.csv``.
        out: store folder to create.
        overwrite: replace an existing store.
        progress: unused.
        name: dataset name recorded in the store.
        split: the node split (default: fractions 0.6 / 0.2 / 0.2, seed 0).

    Returns:
        The opened store: undirected, binary features, ``page_type`` labels, the node split.

    Raises:
        DataError: a file is missing or malformed (one line naming it); no store is left behind.
    """
    del progress
    edges_path, features_path, target_path = require_files(root, [EDGES_FILE, FEATURES_FILE, TARGET_FILE],
                                                           "MUSAE file of Facebook Page-Page")
    labels, class_names = read_targets(target_path)
    num_nodes = len(labels)
    edges = _read_csv(edges_path, ("id_1", "id_2"))
    src, dst = (_integer_column(edges, column, edges_path) for column in ("id_1", "id_2"))
    for column, values in (("id_1", src), ("id_2", dst)):
        check_ids(values, num_nodes, f"{edges_path}: column {column!r}", f"node id (of {num_nodes} in {TARGET_FILE})")
    features = read_feature_lists(features_path, num_nodes)
    protocol = split_for(split, musae_protocol)
    node_split = protocol.assign(split_labels(labels, protocol.component, src, dst), str(target_path))
    source = raw_source("musae", root, [edges_path, features_path, target_path],
                        format="MUSAE: edge csv, JSON feature-id lists, target csv (page_type)")
    with create_store(out, overwrite) as writer:
        num_edges = write_csrs(writer, edge_chunks(src, dst), num_nodes, symmetrize=True, drop_self_loops=True,
                               deduplicate=True)
        writer.write_array("features", features)
        writer.write_array("labels", labels)
        for key, nodes in node_split.items():
            writer.write_array(key, nodes)
        writer.finalize(name=name, num_nodes=num_nodes, num_edges=num_edges, directed=False,
                        num_classes=len(class_names), feature_dim=features.shape[1], source=source,
                        labeled_nodes=num_nodes, class_names=class_names, node_split=protocol.describe())
    return GraphStore.open(out)


__all__ = ["load_facebook_page_page", "musae_protocol", "read_feature_lists", "read_targets"]
