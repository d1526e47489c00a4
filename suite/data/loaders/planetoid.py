"""Planetoid citation graphs (Cora, CiteSeer, PubMed) from their raw ``ind.<name>.*`` files.

The files are parsed by :func:`torch_geometric.io.read_planetoid_data`, which also builds the public split
(20 training nodes per class, 500 validation and 1000 test nodes). The store is undirected (both directions of
every citation; PyG already returns a symmetric, deduplicated ``edge_index``), with float32 bag-of-words
features, int64 labels and the public split as ``train_nodes`` / ``valid_nodes`` / ``test_nodes``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from suite.errors import DataError
from suite.data.csr import EdgeChunk, write_csrs
from suite.data.loaders.raw_files import LOADERS, raw_source, require_files
from suite.data.store import GraphStore, create_store

PLANETOID_SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
PLANETOID_NAMES = ("cora", "citeseer", "pubmed")


def planetoid_files(root: Path, name: str) -> list[Path]:
    """The eight raw files ``ind.<name>.*`` in ``root``; raises :class:`DataError` naming a missing one."""
    return require_files(root, [f"ind.{name}.{suffix}" for suffix in PLANETOID_SUFFIXES],
                         f"Planetoid raw file of {name}")


def symmetric_edge_index(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """``edge_index`` itself when it already holds both directions of every edge, else its symmetrization."""
    from torch_geometric.utils import is_undirected, to_undirected

    if is_undirected(edge_index, num_nodes=num_nodes):
        return edge_index
    return to_undirected(edge_index, num_nodes=num_nodes)


def _mask_to_index(mask: torch.Tensor) -> np.ndarray:
    return mask.nonzero().view(-1).numpy().astype(np.int64)


@LOADERS.register("cora")
def load_planetoid(root: Path, out: Path, *, overwrite: bool, progress: bool, name: str = "cora") -> GraphStore:
    """Build the store of a Planetoid graph from the raw files ``ind.<name>.*`` in ``root``.

    Args:
        root: folder holding ``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``.
        out: store folder to create.
        overwrite: replace an existing store.
        progress: unused (the files are small).
        name: ``cora``, ``citeseer`` or ``pubmed`` (the file prefix).

    Returns:
        The opened store: undirected, with features, labels and the public node split.

    Raises:
        DataError: a raw file is missing or cannot be parsed, or a split would be empty (e.g. an empty
            ``ind.<name>.test.index``).
    """
    from torch_geometric.io import read_planetoid_data

    del progress
    paths = planetoid_files(root, name)
    try:
        data = read_planetoid_data(str(root), name)
    except Exception as err:  # pickle, shape or index errors of a corrupt file
        raise DataError(f"{root}: cannot read Planetoid files ind.{name}.* ({type(err).__name__}: {err})") from None
    num_nodes = int(data.num_nodes)
    for mask, file, what in ((data.train_mask, "y", "training nodes (the labeled rows of ind.{name}.y)"),
                             (data.val_mask, "ally", "validation nodes (the 500 rows after ind.{name}.y)"),
                             (data.test_mask, "test.index", "test node ids")):
        if not bool(mask.any()):
            raise DataError(f"{root / f'ind.{name}.{file}'}: gives no {what.format(name=name)}; the split would be "
                            f"empty")
    edge_index = symmetric_edge_index(data.edge_index, num_nodes)
    features = data.x.numpy().astype(np.float32, copy=False)
    labels = data.y.numpy().astype(np.int64, copy=False)
    num_classes = int(labels.max()) + 1 if len(labels) else 0
    source = raw_source("planetoid", root, paths, reader="torch_geometric.io.read_planetoid_data")
    with create_store(out, overwrite) as writer:
        src, dst = edge_index.numpy()
        num_edges = write_csrs(writer, [EdgeChunk(src, dst)], num_nodes)
        writer.write_array("features", features)
        writer.write_array("labels", labels)
        for key, mask in (("train_nodes", data.train_mask), ("valid_nodes", data.val_mask),
                          ("test_nodes", data.test_mask)):
            writer.write_array(key, _mask_to_index(mask))
        writer.finalize(
            name=name, num_nodes=num_nodes, num_edges=num_edges, directed=False, num_classes=num_classes,
            feature_dim=features.shape[1], source=source, labeled_nodes=int((labels >= 0).sum()),
        )
    return GraphStore.open(out)


for _other in PLANETOID_NAMES[1:]:
    LOADERS.register(_other, load_planetoid)
