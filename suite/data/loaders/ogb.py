"""OGB datasets (node and link property prediction) already on disk, read through the ``ogb`` package.

``root`` is the folder that holds the dataset's OGB folder (``<root>/ogbn_arxiv/...``, what ogb calls its
``root``), or that folder itself. The files must be there already (ogb's own layout: ``RELEASE_v<k>.txt``,
``raw/``, ``split/<split_type>/``): this loader never downloads. It checks them before handing over to ogb, so
ogb never reaches its download or "update the dataset?" prompt, and imports ogb without the PyPI version check
ogb otherwise starts in a background thread at import time.

Reading goes through ``ogb.nodeproppred.NodePropPredDataset`` / ``ogb.linkproppred.LinkPropPredDataset`` (its
dataset table ``master.csv``, version check, raw readers and ``get_idx_split`` / ``get_edge_split``), with one
change: the raw files are read every time and ogb's ``processed/`` cache is neither written nor read. The cache
is a pickle that PyTorch >= 2.6 refuses to load by default (ogb issue #507), and skipping it means preparing a
store never writes into the dataset folder. Split files (``.pt``) are loaded with ``weights_only`` (numpy arrays
allowed); a file needing full unpickling is refused with a hint.

Store contents:

- CSRs of the dataset's graph as ogb returns it: for datasets whose meta has ``add_inverse_edge`` the edges are
  already in both directions (``directed: false``); the others are stored as given (``directed: true``). For
  link datasets the graph holds the training edges only. ``ogbl-wikikg2`` has relation types.
- ``features`` float32 when the dataset has node features; other per-node arrays (``node_year``) under their
  ogb key; per-edge attributes (``edge_weight``, ``edge_year``, ``edge_feat``) are not stored (listed under
  ``source.not_stored``).
- Node datasets: ``labels`` int64 (-1 for NaN / unlabeled, e.g. ogbn-papers100M), ``num_classes`` from ogb's
  table, node splits from ``get_idx_split()``.
- Link datasets: ``train_edges`` / ``valid_edges`` / ``test_edges`` ``(k, 3)`` ``(src, rel, dst)`` from
  ``get_edge_split()``; evaluation negatives kept as extra keys in the shape ogb gives them:
  ``<split>_edges_neg`` ``(k', 2)`` ``(src, dst)`` pairs (collab, ppa, ddi), ``<split>_dst_neg`` ``(k, c)``
  candidate destinations of row ``i`` of ``<split>_edges`` (citation2 ``target_node_neg``, wikikg2
  ``tail_neg``), ``<split>_src_neg`` ``(k, c)`` candidate sources (wikikg2 ``head_neg``); other per-edge split
  fields as ``<split>_edges_<field>`` (collab ``weight`` and ``year``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import pickle
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from suite.errors import DataError
from suite.data.csr import write_csrs
from suite.data.loaders.raw_files import LOADERS, check_ids, edge_chunks, raw_source
from suite.data.store import GraphStore, StoreWriter, create_store

NODE_DATASETS = ("ogbn-arxiv", "ogbn-products", "ogbn-papers100M")
LINK_DATASETS = ("ogbl-collab", "ogbl-ppa", "ogbl-ddi", "ogbl-citation2", "ogbl-wikikg2")
_MISSING = object()
_NEGATIVE_KEYS = {"edge_neg": "edges_neg", "target_node_neg": "dst_neg", "tail_neg": "dst_neg",
                  "head_neg": "src_neg"}
_READ_ERRORS = (OSError, RuntimeError, ValueError, KeyError, IndexError, EOFError, AssertionError,
                pickle.UnpicklingError, zipfile.BadZipFile, pd.errors.ParserError, pd.errors.EmptyDataError)


# ---------------------------------------------------------------------------------------------- ogb access
def import_ogb() -> Any:
    """Import ``ogb`` (with its node and link dataset modules) without its import-time PyPI version check.

    ``ogb/version.py`` starts a thread that queries PyPI through the ``outdated`` package; hiding ``outdated``
    while ogb is first imported makes that import fail, which ogb handles by skipping the check.

    Returns:
        The ``ogb`` module.
    """
    if "ogb.version" not in sys.modules:
        saved = sys.modules.get("outdated", _MISSING)
        sys.modules["outdated"] = None  # type: ignore[assignment]  # `from outdated import ...` -> ImportError
        try:
            importlib.import_module("ogb.version")
        finally:
            if saved is _MISSING:
                sys.modules.pop("outdated", None)
            else:
                sys.modules["outdated"] = saved  # type: ignore[assignment]
    importlib.import_module("ogb.nodeproppred")
    importlib.import_module("ogb.linkproppred")
    return importlib.import_module("ogb")


def dataset_meta(name: str) -> dict[str, str]:
    """ogb's table entry (``master.csv``) of dataset ``name``: version, split, add_inverse_edge, binary..."""
    ogb = import_ogb()
    kind = "nodeproppred" if name.startswith("ogbn-") else "linkproppred"
    master = pd.read_csv(Path(ogb.__file__).parent / kind / "master.csv", index_col=0, keep_default_na=False)
    if name not in master:
        raise DataError(f"{name}: not a dataset of the installed ogb {ogb.__version__} ({kind}/master.csv)")
    return {str(key): str(value) for key, value in master[name].items()}


def _meta_files(value: str) -> list[str]:
    return [] if value == "None" else value.split(",")


def numpy_safe_globals() -> list[Any]:
    """What ``torch.load(weights_only=True)`` needs to rebuild plain numpy arrays and scalars."""
    multiarray = np._core.multiarray if hasattr(np, "_core") else np.core.multiarray  # numpy 2 / 1
    dtypes = [type(np.dtype(code)) for code in ("?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8",
                                                "f2", "f4", "f8")]
    return [multiarray._reconstruct, multiarray.scalar, np.ndarray, np.dtype, *dtypes]


def _one_line(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextlib.contextmanager
def _ogb_call(folder: Path, name: str, progress: bool) -> Iterator[None]:
    """Run ogb code: quiet unless ``progress``, numpy allowed in ``torch.load``, errors as one-line DataError."""
    sink = io.StringIO()
    with contextlib.ExitStack() as stack:
        if not progress:
            stack.enter_context(contextlib.redirect_stdout(sink))
            stack.enter_context(contextlib.redirect_stderr(sink))
        safe_globals = getattr(torch.serialization, "safe_globals", None)
        if safe_globals is not None:
            stack.enter_context(safe_globals(numpy_safe_globals()))
        try:
            yield
        except DataError:
            raise
        except pickle.UnpicklingError as err:
            raise DataError(
                f"{folder}: ogb could not unpickle a file of {name} with torch.load(weights_only=True) "
                f"({_one_line(err, 160)}); if you trust the files, set TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1"
            ) from None
        except _READ_ERRORS as err:
            raise DataError(f"{folder}: ogb could not read {name} ({type(err).__name__}: {_one_line(err)})") from None


def _read_raw_graph(dataset: Any) -> dict[str, Any]:
    """The single graph of an ogb dataset, from its raw files with ogb's readers (no processed cache)."""
    from ogb.io.read_graph_raw import read_binary_graph_raw, read_csv_graph_raw

    raw_dir = str(Path(dataset.root) / "raw")
    add_inverse_edge = dataset.meta_info["add_inverse_edge"] == "True"
    if dataset.binary:
        return read_binary_graph_raw(raw_dir, add_inverse_edge=add_inverse_edge)[0]
    return read_csv_graph_raw(
        raw_dir, add_inverse_edge=add_inverse_edge,
        additional_node_files=_meta_files(dataset.meta_info["additional node files"]),
        additional_edge_files=_meta_files(dataset.meta_info["additional edge files"]),
    )[0]


def _read_raw_labels(dataset: Any) -> np.ndarray:
    """Node labels of an ogb node dataset from its raw files, as ogb's ``pre_process`` reads them."""
    raw_dir = Path(dataset.root) / "raw"
    if dataset.binary:
        with np.load(raw_dir / "node-label.npz") as archive:
            return archive["node_label"]
    return pd.read_csv(raw_dir / "node-label.csv.gz", compression="gzip", header=None).values


@functools.cache
def _dataset_classes() -> tuple[type, type]:
    """ogb's dataset classes with ``pre_process`` reading the raw files directly (see the module docstring)."""
    import_ogb()
    from ogb.linkproppred import LinkPropPredDataset
    from ogb.nodeproppred import NodePropPredDataset

    class RawNodePropPredDataset(NodePropPredDataset):
        def pre_process(self) -> None:
            self.graph = _read_raw_graph(self)
            self.labels = _read_raw_labels(self)

    class RawLinkPropPredDataset(LinkPropPredDataset):
        def pre_process(self) -> None:
            self.graph = _read_raw_graph(self)

    return RawNodePropPredDataset, RawLinkPropPredDataset


# ---------------------------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class OgbLayout:
    """Where an ogb dataset lies on disk and its entry in ogb's table.

    Attributes:
        name: ogb name, e.g. ``ogbn-arxiv``.
        ogb_root: the folder ogb calls ``root`` (parent of ``folder``).
        folder: the dataset folder (``<ogb_root>/ogbn_arxiv``).
        meta: ogb's ``master.csv`` column of the dataset.
    """

    name: str
    ogb_root: Path
    folder: Path
    meta: dict[str, str]

    @property
    def raw_dir(self) -> Path:
        """``raw/`` folder."""
        return self.folder / "raw"

    @property
    def split_dir(self) -> Path:
        """``split/<split_type>/`` folder of the default split."""
        return self.folder / "split" / self.meta["split"]

    @property
    def is_node_task(self) -> bool:
        """Node property prediction (``ogbn-*``) rather than link prediction."""
        return self.name.startswith("ogbn-")

    def required_files(self) -> list[Path]:
        """Files that must exist for ogb to read the dataset without downloading anything."""
        raw = self.raw_dir
        if self.meta["binary"] == "True":
            files = [raw / "data.npz"] + ([raw / "node-label.npz"] if self.is_node_task else [])
        else:
            files = [raw / "edge.csv.gz", raw / "num-node-list.csv.gz", raw / "num-edge-list.csv.gz"]
            files += [raw / f"{extra}.csv.gz" for extra in _meta_files(self.meta["additional node files"])]
            files += [raw / f"{extra}.csv.gz" for extra in _meta_files(self.meta["additional edge files"])]
            if self.is_node_task:
                files.append(raw / "node-label.csv.gz")
        if not (self.split_dir / "split_dict.pt").is_file():
            suffix = ".csv.gz" if self.is_node_task else ".pt"
            files += [self.split_dir / f"{split}{suffix}" for split in ("train", "valid", "test")]
        return files

    def input_files(self) -> list[Path]:
        """Every file under ``raw/`` and the split folder (recorded as provenance)."""
        return [path for folder in (self.raw_dir, self.split_dir) for path in folder.rglob("*") if path.is_file()]


def locate(root: Path, name: str) -> OgbLayout:
    """Find dataset ``name`` under ``root`` and check that ogb can read it offline.

    Args:
        root: the folder holding ``<dir_name>/`` (e.g. ``ogbn_arxiv/``), or that folder itself.
        name: ogb dataset name.

    Raises:
        DataError: naming the missing folder or file (ogb would otherwise download or prompt).
    """
    meta = dataset_meta(name)
    if meta.get("is hetero") == "True":
        raise DataError(f"{name}: heterogeneous ogb datasets are not supported by this loader")
    dir_name = name.replace("-", "_")
    if (root / dir_name).is_dir():
        layout = OgbLayout(name, root, root / dir_name, meta)
    elif root.name == dir_name and root.is_dir():
        layout = OgbLayout(name, root.parent, root, meta)
    else:
        raise DataError(
            f"{root / dir_name}: missing ({name} in ogb's layout; download it once with ogb where internet is "
            "available and pass the folder that holds it)"
        )
    release = layout.folder / f"RELEASE_v{meta['version']}.txt"
    if not release.is_file():
        raise DataError(f"{release}: missing (the dataset folder is not ogb's release {meta['version']} of {name})")
    for path in layout.required_files():
        if not path.is_file():
            raise DataError(f"{path}: missing (file of {name} that ogb needs; this loader does not download)")
    return layout


# ---------------------------------------------------------------------------------------------- conversion
def _numpy(value: Any) -> np.ndarray:
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def _column(value: Any) -> np.ndarray:
    """A ``(n,)`` view of an ``(n,)`` or ``(n, 1)`` array."""
    array = _numpy(value)
    return array[:, 0] if array.ndim == 2 and array.shape[1] == 1 else array


def labels_to_int64(labels: Any, num_nodes: int, num_classes: int, where: str) -> np.ndarray:
    """ogb labels (``(n,)`` or ``(n, 1)``, int or float with NaN) as ``(n,)`` int64 with -1 for unlabeled.

    Raises:
        DataError: wrong shape (e.g. multi-task labels), non-integer values or a class outside
            ``[0, num_classes)``.
    """
    array = _column(labels)
    if array.shape != (num_nodes,):
        raise DataError(f"{where}: labels have shape {array.shape}; expected ({num_nodes},) or ({num_nodes}, 1)")
    if array.dtype.kind == "f":
        missing = np.isnan(array)
        known = array[~missing]
        if known.size and not np.array_equal(known, np.floor(known)):
            raise DataError(f"{where}: labels must be whole numbers (class ids) or NaN")
        array = np.where(missing, -1, array).astype(np.int64)
    else:
        array = array.astype(np.int64)
    bad = (array < -1) | (array >= num_classes)
    if bad.any():
        node = int(np.flatnonzero(bad)[0])
        raise DataError(f"{where}: label {int(array[node])} of node {node} is out of range [-1, {num_classes})")
    return array


def _node_arrays(graph: dict[str, Any], num_nodes: int) -> dict[str, np.ndarray]:
    """Per-node arrays of an ogb graph other than ``node_feat`` (e.g. ``node_year``), as ``(n,)`` when 1-wide."""
    arrays = {}
    for key, value in graph.items():
        if key.startswith("node_") and key != "node_feat" and value is not None:
            array = _column(value)
            if array.shape[:1] == (num_nodes,) and array.dtype.kind in "biuf":
                arrays[key] = array.astype(np.int64) if array.dtype.kind in "biu" else array.astype(np.float32)
    return arrays


def _not_stored(graph: dict[str, Any]) -> list[str]:
    return sorted(key for key, value in graph.items() if key.startswith("edge_") and key != "edge_index"
                  and key != "edge_reltype" and value is not None)


@dataclass(frozen=True)
class LinkSplit:
    """One link-prediction split: ``edges`` ``(k, 3)`` ``(src, rel, dst)`` plus extra arrays by store key."""

    edges: np.ndarray
    extras: dict[str, np.ndarray]


def split_edges(part: dict[str, Any], split: str, where: str) -> LinkSplit:
    """Convert one split of ``get_edge_split()`` (dict of tensors or arrays) to the store layout.

    Args:
        part: e.g. ``{"edge": (k, 2), "edge_neg": (k', 2)}``, ``{"source_node", "target_node",
            "target_node_neg"}`` or ``{"head", "relation", "tail", "head_neg", "tail_neg"}``.
        split: ``train``, ``valid`` or ``test`` (prefix of the extra keys).
        where: the file it came from, for messages.
    """
    fields = {key: _numpy(value) for key, value in part.items()}
    if "edge" in fields:
        pairs = fields.pop("edge")
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise DataError(f"{where}: '{split}' field 'edge' has shape {pairs.shape}, expected (k, 2)")
        src, dst, rel = pairs[:, 0], pairs[:, 1], np.zeros(len(pairs), np.int64)
    elif {"source_node", "target_node"} <= fields.keys():
        src, dst = fields.pop("source_node"), fields.pop("target_node")
        rel = np.zeros(len(src), np.int64)
    elif {"head", "relation", "tail"} <= fields.keys():
        src, rel, dst = fields.pop("head"), fields.pop("relation"), fields.pop("tail")
    else:
        raise DataError(
            f"{where}: '{split}' has none of the edge fields edge / source_node+target_node / "
            f"head+relation+tail (found {', '.join(sorted(fields)) or 'nothing'})"
        )
    if not (src.shape == dst.shape == rel.shape) or src.ndim != 1:
        raise DataError(f"{where}: '{split}' edge fields differ in shape: {src.shape}, {rel.shape}, {dst.shape}")
    edges = np.stack([src, rel, dst], axis=1).astype(np.int64)
    extras = {}
    for key, value in fields.items():
        if value.dtype.kind not in "biuf":
            continue
        suffix = _NEGATIVE_KEYS.get(key, f"edges_{key}")
        extras[f"{split}_{suffix}"] = value.astype(np.int64 if value.dtype.kind in "biu" else np.float32)
    return LinkSplit(edges, extras)


def _split_source(layout: OgbLayout, split: str) -> str:
    folder = layout.split_dir
    return str(folder / "split_dict.pt") if (folder / "split_dict.pt").is_file() else str(
        folder / f"{split}{'.csv.gz' if layout.is_node_task else '.pt'}")


def _write_graph(writer: StoreWriter, layout: OgbLayout, graph: dict[str, Any], num_nodes: int,
                 relations: np.ndarray | None, num_relations: int) -> int:
    """Write the CSRs (and features / per-node arrays) of an ogb graph; return the number of edges."""
    edge_index = _numpy(graph["edge_index"])
    where = layout.raw_dir / ("data.npz" if layout.meta["binary"] == "True" else "edge.csv.gz")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise DataError(f"{where}: edge_index has shape {edge_index.shape}, expected (2, m)")
    try:  # write_csrs checks every chunk's ids against num_nodes and num_relations
        num_edges = write_csrs(writer, edge_chunks(edge_index[0], edge_index[1], relations), num_nodes,
                               num_relations=num_relations)
    except ValueError as err:
        raise DataError(f"{where}: {err}") from None
    features = graph.get("node_feat")
    if features is not None:
        writer.write_array("features", _numpy(features).astype(np.float32, copy=False))
    elif layout.meta.get("has_node_attr") == "True":
        raise DataError(f"{layout.raw_dir}: node features of {layout.name} are missing (node-feat.csv.gz or "
                        "node_feat in data.npz)")
    for key, array in _node_arrays(graph, num_nodes).items():
        writer.write_array(key, array)
    return num_edges


def _feature_dim(graph: dict[str, Any]) -> int:
    """Feature dimension of an ogb graph (0 without ``node_feat``)."""
    features = graph.get("node_feat")
    return 0 if features is None else int(np.shape(features)[1])


def _source(layout: OgbLayout, graph: dict[str, Any], reader: str) -> dict[str, Any]:
    described = raw_source(
        "ogb", layout.folder, layout.input_files(), checksum=False, reader=reader, dataset=layout.name,
        release=int(layout.meta["version"]), split=layout.meta["split"], task_type=layout.meta["task type"],
        eval_metric=layout.meta["eval metric"],
    )
    return {**described, "not_stored": _not_stored(graph)}


# ---------------------------------------------------------------------------------------------- loaders
def load_ogb_node(root: Path, out: Path, *, overwrite: bool, progress: bool, name: str) -> GraphStore:
    """Build the store of an ogb node property prediction dataset (``ogbn-arxiv``, ``-products``...).

    Args:
        root: folder holding the dataset folder (``ogbn_arxiv/``) in ogb's layout, or that folder.
        out: store folder to create.
        overwrite: replace an existing store.
        progress: show ogb's output and progress bars.
        name: ogb dataset name.

    Returns:
        The opened store with features, int64 labels (-1 unlabeled) and the node split.

    Raises:
        DataError: a file is missing or unreadable, or its contents are inconsistent.
    """
    layout = locate(root, name)
    node_class, _ = _dataset_classes()
    with _ogb_call(layout.folder, name, progress):
        dataset = node_class(name=name, root=str(layout.ogb_root))
        graph, raw_labels = dataset[0]
        split = dataset.get_idx_split()
    num_nodes = int(graph["num_nodes"])
    num_classes = int(dataset.num_classes)
    labels = labels_to_int64(raw_labels, num_nodes, num_classes, str(layout.raw_dir / "node-label"))
    node_splits = {}
    for key, store_key in (("train", "train_nodes"), ("valid", "valid_nodes"), ("test", "test_nodes")):
        node_splits[store_key] = _column(split[key]).astype(np.int64)
        check_ids(node_splits[store_key], num_nodes, _split_source(layout, key), "node id")
    source = _source(layout, graph, "ogb.nodeproppred.NodePropPredDataset (raw files)")
    with create_store(out, overwrite) as writer:
        num_edges = _write_graph(writer, layout, graph, num_nodes, None, 1)
        writer.write_array("labels", labels)
        for key, array in node_splits.items():
            writer.write_array(key, array)
        writer.finalize(
            name=name, num_nodes=num_nodes, num_edges=num_edges,
            directed=layout.meta["add_inverse_edge"] != "True", num_classes=num_classes,
            feature_dim=_feature_dim(graph), source=source, labeled_nodes=int((labels >= 0).sum()),
        )
    return GraphStore.open(out)


def load_ogb_link(root: Path, out: Path, *, overwrite: bool, progress: bool, name: str) -> GraphStore:
    """Build the store of an ogb link property prediction dataset (``ogbl-collab``, ``-citation2``...).

    Args:
        root: folder holding the dataset folder (``ogbl_collab/``) in ogb's layout, or that folder.
        out: store folder to create.
        overwrite: replace an existing store.
        progress: show ogb's output and progress bars.
        name: ogb dataset name.

    Returns:
        The opened store: the training graph as CSRs, edge splits ``(src, rel, dst)`` and the evaluation
        negatives as extra keys (see the module docstring).

    Raises:
        DataError: a file is missing or unreadable, or its contents are inconsistent.
    """
    layout = locate(root, name)
    _, link_class = _dataset_classes()
    with _ogb_call(layout.folder, name, progress):
        dataset = link_class(name=name, root=str(layout.ogb_root))
        graph = dataset[0]
        raw_splits = dataset.get_edge_split()
    num_nodes = int(graph["num_nodes"])
    splits = {key: split_edges(raw_splits[key], key, _split_source(layout, key)) for key in ("train", "valid", "test")}
    relations = graph.get("edge_reltype")
    relations = None if relations is None else _column(relations).astype(np.int64)
    num_relations = 1
    if relations is not None:
        highest = [int(relations.max(initial=0))] + [int(s.edges[:, 1].max(initial=0)) for s in splits.values()]
        num_relations = max(highest) + 1
    for key, part in splits.items():
        where = _split_source(layout, key)
        check_ids(part.edges[:, [0, 2]], num_nodes, where, "node id")
        check_ids(part.edges[:, 1], num_relations, where, "relation id")
        for extra_key, array in part.extras.items():
            if extra_key.endswith("_neg"):
                check_ids(array, num_nodes, f"{where} ({extra_key})", "node id")
    source = _source(layout, graph, "ogb.linkproppred.LinkPropPredDataset (raw files)")
    with create_store(out, overwrite) as writer:
        num_edges = _write_graph(writer, layout, graph, num_nodes, relations if num_relations > 1 else None,
                                 num_relations)
        for key, part in splits.items():
            writer.write_array(f"{key}_edges", part.edges)
            for extra_key, array in part.extras.items():
                writer.write_array(extra_key, array)
        writer.finalize(
            name=name, num_nodes=num_nodes, num_edges=num_edges,
            directed=layout.meta["add_inverse_edge"] != "True", num_relations=num_relations,
            feature_dim=_feature_dim(graph), source=source,
        )
    return GraphStore.open(out)


for _name in NODE_DATASETS:
    LOADERS.register(_name, load_ogb_node)
for _name in LINK_DATASETS:
    LOADERS.register(_name, load_ogb_link)
