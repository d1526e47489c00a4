"""A tiny hand-made store used across graph tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suite.graph import GraphStore, create_store
from suite.graph.csr import EdgeChunk, write_csrs

# 4 nodes, directed edges 0->1, 0->2, 1->2, 2->0, 3->2 with relations 0, 1, 0, 1, 1.
TINY_SRC = np.array([0, 0, 1, 2, 3])
TINY_DST = np.array([1, 2, 2, 0, 2])
TINY_REL = np.array([0, 1, 0, 1, 1])


def write_tiny_store(path: Path, **finalize_overrides) -> GraphStore:
    """Write the tiny typed store with features, labels and splits; return it opened."""
    with create_store(path) as writer:
        num_edges = write_csrs(writer, [EdgeChunk(TINY_SRC, TINY_DST, TINY_REL)], 4, num_relations=2)
        writer.write_array("features", np.arange(12, dtype=np.float32).reshape(4, 3))
        writer.write_array("labels", np.array([0, 1, -1, 1], dtype=np.int64))
        writer.write_array("train_nodes", np.array([0, 1], dtype=np.int64))
        writer.write_array("valid_nodes", np.array([3], dtype=np.int64))
        writer.write_array("test_nodes", np.array([], dtype=np.int64))
        writer.write_array("train_edges", np.stack([TINY_SRC, TINY_REL, TINY_DST], axis=1).astype(np.int64))
        fields = dict(name="tiny-hand", num_nodes=4, num_edges=num_edges, directed=True, num_relations=2,
                      num_classes=2, feature_dim=3, source={"made": "by hand"})
        fields.update(finalize_overrides)
        writer.finalize(**fields)
    return GraphStore.open(path)


@pytest.fixture
def tiny_store(tmp_path: Path) -> GraphStore:
    """The tiny typed store, freshly written."""
    return write_tiny_store(tmp_path / "tiny")
