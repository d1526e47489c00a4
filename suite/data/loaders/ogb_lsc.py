"""OGB-LSC datasets in their published on-disk layouts: WikiKG90Mv2 (link prediction) and MAG240M (node
classification on the paper citation graph). Nothing is downloaded and the ``ogb`` package is not needed: the
files are ``.npy`` arrays (read in blocks through memory maps, bounded memory) and two ``torch.save`` files
(MAG240M's ``meta.pt`` and ``split_dict.pt``, read with ``torch.load(weights_only=True)``, numpy arrays allowed).

**WikiKG90Mv2** (``wikikg90m-v2``): ``root`` is the folder holding ``wikikg90m-v2/``, that folder, or its
``processed/``. Files in ``processed/``:

- ``train_hrt.npy`` ``(k, 3)`` integer ``(head, relation, tail)`` -- required;
- ``val_hr.npy`` ``(k, 2)`` and ``val_t.npy`` ``(k,)`` -- validation queries and their answers (both or neither);
- ``test-dev_hr.npy``, ``test-challenge_hr.npy`` ``(k, 2)`` -- test queries (answers withheld by OGB-LSC);
- ``entity_feat.npy`` ``(num_entities, 768)`` and ``relation_feat.npy`` ``(num_relations, 768)`` float16 -- when
  present they fix the number of entities and relations (otherwise the largest id plus one).

Store: directed, typed CSRs of the training triples; ``train_edges`` and ``valid_edges`` ``(k, 3)``
``(src, rel, dst)``; ``test_dev_queries`` / ``test_challenge_queries`` ``(k, 2)`` ``(src, rel)``; ``features``
(entity features, dtype kept: float16 or float32) and ``relation_features``. No ``test_edges`` (the test answers
are not published).

**MAG240M** (``mag240m_kddcup2021``): ``root`` is the folder holding ``mag240m_kddcup2021/`` or that folder. Read:
``meta.pt`` (``{"paper": n, "author": ..., "institution": ..., "num_classes": c}``), ``split_dict.pt``
(``train``, ``valid``, ``test-dev`` / ``test``, ``test-challenge`` paper indices),
``processed/paper/node_feat.npy`` ``(n, 768)`` float16, ``processed/paper/node_label.npy`` ``(n,)`` float with
NaN for unlabelled papers, ``processed/paper/node_year.npy`` and
``processed/paper___cites___paper/edge_index.npy`` ``(2, m)``. Store: the paper citation graph as directed CSRs
(citing -> cited, as in the file), ``features``, ``labels`` (int64, -1 unlabelled), ``node_year``, node splits
(``test-dev`` -- or ``test`` in release 1 -- as ``test_nodes``; ``test-challenge`` as ``test_challenge_nodes``).
Left out (listed under ``source.not_stored``): the author and institution nodes and the
``author___writes___paper`` and ``author___affiliated_with___institution`` edges, i.e. the heterogeneous graph;
papers are the only node type of the store.

Every error is one line naming the file (a missing or malformed file, a shape that disagrees with another file,
an id out of range); the store is staged and renamed into place only on success.
"""

from __future__ import annotations

import contextlib
import pickle
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from suite.errors import DataError
from suite.data.csr import DEFAULT_CHUNK_EDGES, EdgeChunk, write_csrs
from suite.data.loaders.raw_files import LOADERS, check_ids, npy_array, npy_blocks, raw_source
from suite.data.loaders.ogb import labels_to_int64, numpy_safe_globals
from suite.data.store import GraphStore, StoreWriter, create_store

WIKIKG_FOLDER = "wikikg90m-v2"
MAG_FOLDER = "mag240m_kddcup2021"
FEATURE_ROWS = 1 << 16
"""Rows of a feature matrix copied at a time (768 float16 columns: 96 MiB)."""


# ---------------------------------------------------------------------------------------------- shared
def _locate(root: Path, folder: str, marker: str) -> Path:
    """The dataset folder: ``root/folder``, ``root`` itself or (WikiKG) ``root``'s parent; DataError if absent."""
    for candidate in (root / folder, root, root.parent):
        if (candidate / marker).is_file():
            return candidate
    raise DataError(f"{root / folder / marker}: missing ({folder} in its published layout; this loader does not "
                    "download)")


def _checked_shape(path: Path, array: np.ndarray, shape: tuple[int | None, ...], kinds: str) -> None:
    """DataError naming ``path`` unless ``array`` has ``shape`` (None: any length) and a dtype kind in ``kinds``."""
    if array.ndim != len(shape) or any(want is not None and want != got for want, got in zip(shape, array.shape)):
        shown = ", ".join("*" if want is None else str(want) for want in shape)
        raise DataError(f"{path}: shape {array.shape}, expected ({shown}{',' if len(shape) == 1 else ''})")
    if array.dtype.kind not in kinds:
        kind = {"iu": "integer", "f": "float", "iuf": "numeric"}.get(kinds, kinds)
        raise DataError(f"{path}: dtype {array.dtype}, expected {kind} values")


def _copy_rows(writer: StoreWriter, key: str, path: Path, dtype: np.dtype) -> None:
    """Stream the rows of the ``.npy`` matrix ``path`` into store key ``key`` (bounded memory)."""
    shape = npy_array(path, key).shape
    with writer.appender(key, dtype, tuple(shape[1:])) as out:
        for block in npy_blocks(path, FEATURE_ROWS):
            out.append(block)


def _feature_dtype(path: Path, array: np.ndarray) -> np.dtype:
    if array.dtype not in (np.float16, np.float32):
        raise DataError(f"{path}: dtype {array.dtype}, expected float16 or float32 features")
    return array.dtype


def _max_plus_one(paths_columns: list[tuple[Path, list[int]]]) -> int:
    """One more than the largest value in the given columns of 2-D integer ``.npy`` files (streamed)."""
    highest = -1
    for path, columns in paths_columns:
        for block in npy_blocks(path, DEFAULT_CHUNK_EDGES):
            part = block[:, columns] if block.ndim == 2 else block
            if part.size:
                highest = max(highest, int(part.max()))
    return highest + 1


@contextlib.contextmanager
def _torch_file(path: Path) -> Iterator[None]:
    """Errors of ``torch.load`` on ``path`` as one-line DataErrors naming it."""
    try:
        with torch.serialization.safe_globals(numpy_safe_globals()):
            yield
    except pickle.UnpicklingError as err:
        if not zipfile.is_zipfile(path):
            raise DataError(f"{path}: not a readable torch.save file (no zip archive)") from None
        raise DataError(f"{path}: torch.load(weights_only=True) refused it ({' '.join(str(err).split())[:160]}); "
                        "if you trust the file, set TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1") from None
    except (OSError, RuntimeError, EOFError, ValueError, zipfile.BadZipFile) as err:
        raise DataError(f"{path}: not a readable torch.save file ({' '.join(str(err).split())[:160]})") from None


def read_torch_dict(path: Path, what: str) -> dict[str, Any]:
    """A ``torch.save``'d dict (numpy arrays allowed, nothing else unpickled); DataError naming ``path``."""
    if not path.is_file():
        raise DataError(f"{path}: missing ({what})")
    with _torch_file(path):
        value = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(value, dict):
        raise DataError(f"{path}: expected a dict ({what}), got {type(value).__name__}")
    return value


# ---------------------------------------------------------------------------------------------- WikiKG90Mv2
def _wikikg_files(processed: Path) -> dict[str, Path]:
    names = {"train": "train_hrt.npy", "valid_hr": "val_hr.npy", "valid_t": "val_t.npy",
             "test_dev": "test-dev_hr.npy", "test_challenge": "test-challenge_hr.npy",
             "entity_feat": "entity_feat.npy", "relation_feat": "relation_feat.npy"}
    return {key: processed / name for key, name in names.items() if (processed / name).is_file()}


def _wikikg_counts(files: dict[str, Path]) -> tuple[int, int, int]:
    """``(num_entities, num_relations, feature_dim)`` from the feature tables, else from the largest ids."""
    query_files = [files[key] for key in ("valid_hr", "test_dev", "test_challenge") if key in files]
    if "entity_feat" in files:
        table = npy_array(files["entity_feat"], "entity features")
        _checked_shape(files["entity_feat"], table, (None, None), "f")
        num_entities, dim = table.shape
    else:
        entity_columns = [(files["train"], [0, 2])] + [(path, [0]) for path in query_files]
        num_entities = max(_max_plus_one(entity_columns),
                           _max_plus_one([(files["valid_t"], [])]) if "valid_t" in files else 0)
        dim = 0
    if "relation_feat" in files:
        relation_table = npy_array(files["relation_feat"], "relation features")
        _checked_shape(files["relation_feat"], relation_table, (None, None), "f")
        num_relations = relation_table.shape[0]
    else:
        num_relations = _max_plus_one([(files["train"], [1])] + [(path, [1]) for path in query_files])
    return int(num_entities), max(1, int(num_relations)), int(dim)


def _wikikg_queries(path: Path, num_entities: int, num_relations: int) -> np.ndarray:
    """A ``(k, 2)`` ``(head, relation)`` query file as int64, checked."""
    queries = np.asarray(npy_array(path, "queries"))
    _checked_shape(path, queries, (None, 2), "iu")
    check_ids(queries[:, 0], num_entities, f"{path} (column 0)", "entity id")
    check_ids(queries[:, 1], num_relations, f"{path} (column 1)", "relation id")
    return queries.astype(np.int64)


def load_wikikg90m_v2(root: Path, out: Path, *, overwrite: bool, progress: bool,
                      name: str = "wikikg90m-v2") -> GraphStore:
    """Build the store of WikiKG90Mv2 from OGB-LSC's ``processed/`` arrays (see the module docstring).

    Args:
        root: folder holding ``wikikg90m-v2/``, that folder or its ``processed/``.
        out: store folder to create.
        overwrite: replace an existing store.
        progress: unused.
        name: dataset name recorded in the store.

    Returns:
        The opened store.

    Raises:
        DataError: a file is missing or malformed (one line naming it); no store is left behind.
    """
    del progress
    folder = _locate(root, WIKIKG_FOLDER, "processed/train_hrt.npy")
    processed = folder / "processed"
    files = _wikikg_files(processed)
    train = npy_array(files["train"], "training triples")
    _checked_shape(files["train"], train, (None, 3), "iu")
    if ("valid_hr" in files) != ("valid_t" in files):
        present, absent = ("val_hr.npy", "val_t.npy") if "valid_hr" in files else ("val_t.npy", "val_hr.npy")
        raise DataError(f"{processed / absent}: missing (needed with {present})")
    num_entities, num_relations, dim = _wikikg_counts(files)
    extras: dict[str, np.ndarray] = {}
    if "valid_hr" in files:
        valid_hr = _wikikg_queries(files["valid_hr"], num_entities, num_relations)
        valid_t = np.asarray(npy_array(files["valid_t"], "validation answers"))
        _checked_shape(files["valid_t"], valid_t, (len(valid_hr),), "iu")
        check_ids(valid_t, num_entities, str(files["valid_t"]), "entity id")
        extras["valid_edges"] = np.stack([valid_hr[:, 0], valid_hr[:, 1], valid_t.astype(np.int64)], axis=1)
    for key in ("test_dev", "test_challenge"):
        if key in files:
            extras[f"{key}_queries"] = _wikikg_queries(files[key], num_entities, num_relations)
    if "relation_feat" in files:
        relations = npy_array(files["relation_feat"], "relation features")
        extras["relation_features"] = np.asarray(relations, dtype=_feature_dtype(files["relation_feat"], relations))

    def triples() -> Iterator[EdgeChunk]:
        for block in npy_blocks(files["train"], DEFAULT_CHUNK_EDGES):
            yield EdgeChunk(block[:, 0], block[:, 2], block[:, 1])

    source = raw_source("wikikg90m-v2", folder, files.values(), checksum=False,
                        layout="OGB-LSC wikikg90m-v2/processed/*.npy")
    with create_store(out, overwrite) as writer:
        with writer.appender("train_edges", np.int64, (3,)) as train_out:
            for block in npy_blocks(files["train"], DEFAULT_CHUNK_EDGES):
                for column, high, what in ((0, num_entities, "head entity id"), (1, num_relations, "relation id"),
                                           (2, num_entities, "tail entity id")):
                    check_ids(block[:, column], high, f"{files['train']} (column {column})", what)
                train_out.append(block)
        num_edges = write_csrs(writer, triples(), num_entities, num_relations=num_relations)
        for key, array in extras.items():
            writer.write_array(key, array)
        if "entity_feat" in files:
            table = npy_array(files["entity_feat"], "entity features")
            _copy_rows(writer, "features", files["entity_feat"], _feature_dtype(files["entity_feat"], table))
        writer.finalize(name=name, num_nodes=num_entities, num_edges=num_edges, directed=True,
                        num_relations=num_relations, feature_dim=dim, source=source)
    return GraphStore.open(out)


# ---------------------------------------------------------------------------------------------- MAG240M
MAG_NOT_STORED = ("author and institution nodes", "author___writes___paper",
                  "author___affiliated_with___institution")
_MAG_SPLITS = {"train": "train_nodes", "valid": "valid_nodes", "test-dev": "test_nodes", "test": "test_nodes",
               "test-challenge": "test_challenge_nodes"}


def _mag_count(meta: dict[str, Any], key: str, path: Path) -> int:
    value = meta.get(key)
    if isinstance(value, torch.Tensor):
        value = value.item()
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
        raise DataError(f"{path}: '{key}' must be a non-negative integer, got {value!r}"[:200])
    return int(value)


def _mag_splits(path: Path, num_papers: int) -> dict[str, np.ndarray]:
    """Node splits of ``split_dict.pt`` by store key, each checked against the paper count."""
    raw = read_torch_dict(path, "MAG240M node split")
    splits: dict[str, np.ndarray] = {}
    for split, value in raw.items():
        key = _MAG_SPLITS.get(str(split))
        if key is None or key in splits:
            continue
        array = value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        if array.ndim != 1 or array.dtype.kind not in "iu":
            raise DataError(f"{path}: split '{split}' must be a 1-D integer array, got {array.dtype} {array.shape}")
        check_ids(array, num_papers, f"{path} (split '{split}')", "paper id")
        splits[key] = array.astype(np.int64)
    for key in ("train_nodes", "valid_nodes"):
        if key not in splits:
            raise DataError(f"{path}: no '{key.split('_')[0]}' split (found {', '.join(map(str, raw)) or 'none'})")
    return splits


def _mag_labels(path: Path, num_papers: int, num_classes: int) -> Iterator[np.ndarray]:
    labels = npy_array(path, "paper labels")
    _checked_shape(path, labels, (num_papers,), "iuf")
    for block in npy_blocks(path, DEFAULT_CHUNK_EDGES):
        yield labels_to_int64(block, len(block), num_classes, str(path))


def load_mag240m(root: Path, out: Path, *, overwrite: bool, progress: bool, name: str = "mag240m") -> GraphStore:
    """Build the store of MAG240M's paper citation graph (node classification; see the module docstring).

    Args:
        root: folder holding ``mag240m_kddcup2021/`` or that folder.
        out: store folder to create.
        overwrite: replace an existing store.
        progress: unused.
        name: dataset name recorded in the store.

    Returns:
        The opened store: papers only, directed citation CSRs, features, labels, years and node splits.

    Raises:
        DataError: a file is missing or malformed (one line naming it); no store is left behind.
    """
    del progress
    folder = _locate(root, MAG_FOLDER, "meta.pt")
    meta = read_torch_dict(folder / "meta.pt", "MAG240M counts")
    num_papers = _mag_count(meta, "paper", folder / "meta.pt")
    paper = folder / "processed" / "paper"
    paths = {"features": paper / "node_feat.npy", "labels": paper / "node_label.npy",
             "years": paper / "node_year.npy",
             "cites": folder / "processed" / "paper___cites___paper" / "edge_index.npy"}
    features = npy_array(paths["features"], "paper features")
    _checked_shape(paths["features"], features, (num_papers, None), "f")
    years = npy_array(paths["years"], "paper years")
    _checked_shape(paths["years"], years, (num_papers,), "iu")
    cites = npy_array(paths["cites"], "paper citations")
    _checked_shape(paths["cites"], cites, (2, None), "iu")
    labels = npy_array(paths["labels"], "paper labels")
    if "num_classes" in meta:
        num_classes = _mag_count(meta, "num_classes", folder / "meta.pt")
    else:  # streamed: the largest known label plus one
        num_classes = 1 + max((int(np.nanmax(block)) for block in npy_blocks(paths["labels"], DEFAULT_CHUNK_EDGES)
                               if block.size and not np.isnan(block.astype(np.float64)).all()), default=-1)
    splits = _mag_splits(folder / "split_dict.pt", num_papers)
    del features, years, cites, labels

    def citations() -> Iterator[EdgeChunk]:
        for block in npy_blocks(paths["cites"], DEFAULT_CHUNK_EDGES, axis=1):
            yield EdgeChunk(block[0], block[1])

    inputs = [folder / "meta.pt", folder / "split_dict.pt", *paths.values()]
    source = {**raw_source("mag240m", folder, inputs, checksum=False,
                           layout="OGB-LSC mag240m_kddcup2021 (processed/*.npy, meta.pt, split_dict.pt)"),
              "not_stored": list(MAG_NOT_STORED)}
    with create_store(out, overwrite) as writer:
        try:  # write_csrs checks every chunk's ids against the paper count
            num_edges = write_csrs(writer, citations(), num_papers)
        except ValueError as err:
            raise DataError(f"{paths['cites']}: {err}") from None
        _copy_rows(writer, "features", paths["features"], _feature_dtype(paths["features"], npy_array(
            paths["features"], "paper features")))
        labelled = 0
        with writer.appender("labels", np.int64) as labels_out:
            for block in _mag_labels(paths["labels"], num_papers, num_classes):
                labels_out.append(block)
                labelled += int((block >= 0).sum())
        with writer.appender("node_year", np.int64) as years_out:
            for block in npy_blocks(paths["years"], DEFAULT_CHUNK_EDGES):
                years_out.append(block.astype(np.int64))
        for key, array in splits.items():
            writer.write_array(key, array)
        writer.finalize(name=name, num_nodes=num_papers, num_edges=num_edges, directed=True,
                        num_classes=num_classes, feature_dim=int(features_dim(paths["features"])), source=source,
                        labeled_nodes=labelled)
    return GraphStore.open(out)


def features_dim(path: Path) -> int:
    """Columns of the ``.npy`` feature matrix ``path``."""
    return int(npy_array(path, "features").shape[1])


LOADERS.register("wikikg90m-v2", load_wikikg90m_v2)
LOADERS.register("mag240m", load_mag240m)
