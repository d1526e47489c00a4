"""Export of a (small) :class:`~suite.data.store.GraphStore` to one in-memory PyTorch Geometric ``Data``.

The export materializes everything in memory (copies, independent of the store's files), so it refuses graphs
above a size limit; large graphs are for the samplers and the disk-based system, which read the store directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from suite.errors import DataError
from suite.data.store import EDGE_SPLITS, NODE_SPLITS, GraphStore

if TYPE_CHECKING:
    from torch_geometric.data import Data

DEFAULT_MAX_EDGES = 1 << 27  # 134M directed edges: ~2 GiB of int64 edge_index
DEFAULT_MAX_BYTES = 8 << 30
_PYG_SPLIT = {"train": "train", "valid": "val", "test": "test"}  # store split name -> PyG attribute prefix


def estimated_bytes(store: GraphStore) -> int:
    """Memory :func:`to_pyg_data` would allocate for ``store`` (edge index, relations, features, labels, splits)."""
    n, m = store.num_nodes, store.num_edges
    total = 16 * m + (8 * m if store.num_relations > 1 else 0) + 4 * n * store.feature_dim
    total += 8 * n if store.has("labels") else 0
    total += n * sum(store.has(key) for key in NODE_SPLITS)
    total += sum(24 * store.metadata["files"][key]["shape"][0] for key in EDGE_SPLITS if store.has(key))
    return total


def _copy(store: GraphStore, key: str, dtype: torch.dtype) -> torch.Tensor:
    return torch.from_numpy(np.array(store.array(key))).to(dtype)


def _edge_index(store: GraphStore, direction: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(2, m)`` int64 ``(src, dst)`` from one CSR, and the int64 relation of each edge (or None)."""
    csr = store.csr(direction)
    rows = torch.repeat_interleave(torch.arange(store.num_nodes, dtype=torch.int64), csr.degrees())
    cols = csr.indices.to(torch.int64)  # .to() copies out of the memory map
    edge_index = torch.stack([cols, rows] if direction == "in" else [rows, cols])
    relations = None if csr.relations is None else csr.relations.to(torch.int64)
    return edge_index, relations


def _mask(index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    mask = torch.zeros(num_nodes, dtype=torch.bool)
    mask[index.to(torch.int64)] = True
    return mask


def to_pyg_data(
    store: GraphStore,
    *,
    direction: str = "in",
    max_edges: int | None = DEFAULT_MAX_EDGES,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> Data:
    """Materialize a store as a PyG ``Data`` object.

    Args:
        store: the store.
        direction: CSR the edges are read from: ``"in"`` (edges grouped by destination, as PyG's
            ``flow="source_to_target"`` aggregates) or ``"out"`` (grouped by source). Both give the same edge set.
        max_edges: refuse stores with more directed edges (None: no limit).
        max_bytes: refuse stores whose export would allocate more memory (None: no limit).

    Returns:
        ``Data`` with ``num_nodes``; ``edge_index`` ``(2, m)`` int64 ``(src, dst)``; ``edge_type`` ``(m,)`` int64
        for typed graphs; ``x`` ``(n, d)`` float32 when the store has features; ``y`` ``(n,)`` int64 (-1 =
        unlabeled) when it has labels; ``train_mask`` / ``val_mask`` / ``test_mask`` from the node splits; and
        ``train_edges`` / ``val_edges`` / ``test_edges`` ``(k, 3)`` int64 ``(src, rel, dst)`` from the edge splits.

    Raises:
        DataError: the store is larger than ``max_edges`` or ``max_bytes``.
        ValueError: ``direction`` is neither ``"in"`` nor ``"out"``.
    """
    from torch_geometric.data import Data

    if direction not in ("in", "out"):
        raise ValueError(f"direction must be 'in' or 'out', got {direction!r}")
    if max_edges is not None and store.num_edges > max_edges:
        raise DataError(
            f"{store.path}: {store.num_edges} edges exceed max_edges={max_edges}; to_pyg_data materializes the "
            "whole graph (raise the limit, or sample from the store instead)"
        )
    needed = estimated_bytes(store)
    if max_bytes is not None and needed > max_bytes:
        raise DataError(
            f"{store.path}: exporting needs about {needed / 2**30:.1f} GiB, over max_bytes={max_bytes / 2**30:.1f} "
            "GiB; to_pyg_data materializes the whole graph (raise the limit, or sample from the store instead)"
        )
    edge_index, relations = _edge_index(store, direction)
    data = Data(edge_index=edge_index, num_nodes=store.num_nodes)
    if relations is not None:
        data.edge_type = relations
    if store.has("features"):
        data.x = _copy(store, "features", torch.float32)
    if store.has("labels"):
        data.y = _copy(store, "labels", torch.int64)
    for split, prefix in _PYG_SPLIT.items():
        if store.has(f"{split}_nodes"):
            data[f"{prefix}_mask"] = _mask(store.tensor(f"{split}_nodes"), store.num_nodes)
        if store.has(f"{split}_edges"):
            data[f"{prefix}_edges"] = _copy(store, f"{split}_edges", torch.int64)
    return data
