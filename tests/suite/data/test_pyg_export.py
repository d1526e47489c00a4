"""Export of stores to PyG ``Data``: round trip on Cora, typed graphs, size limits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from suite.errors import DataError
from suite.data import GraphStore
from suite.data.loaders import prepare
from suite.data.pyg_export import estimated_bytes, to_pyg_data
from tests.support.graphs import TINY_DST, TINY_REL, TINY_SRC


def edge_keys(edge_index: torch.Tensor, num_nodes: int) -> np.ndarray:
    src, dst = edge_index.numpy().astype(np.int64)
    return np.sort(src * num_nodes + dst)


@pytest.fixture(scope="module")
def cora(shared_datasets: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    return prepare("cora", shared_datasets / "planetoid", tmp_path_factory.mktemp("stores") / "cora")


def test_cora_round_trip(cora: GraphStore, shared_datasets: Path) -> None:
    from torch_geometric.io import read_planetoid_data

    reference = read_planetoid_data(str(shared_datasets / "planetoid"), "cora")
    data = to_pyg_data(cora)
    assert data.num_nodes == 2708 and data.edge_index.shape == (2, 10556)
    assert data.edge_index.dtype == torch.int64 and "edge_type" not in data
    assert np.array_equal(edge_keys(data.edge_index, 2708), edge_keys(reference.edge_index, 2708))
    assert torch.equal(data.x, reference.x) and data.x.dtype == torch.float32
    assert torch.equal(data.y, reference.y)
    for mask in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(data[mask], reference[mask])
    data.validate(raise_on_error=True)


def test_cora_gcn_forward(cora: GraphStore) -> None:
    from torch_geometric.nn import GCNConv

    data = to_pyg_data(cora)
    torch.manual_seed(0)
    conv = GCNConv(cora.feature_dim, 16)
    out = conv(data.x, data.edge_index)
    assert out.shape == (2708, 16) and torch.isfinite(out).all()
    out[data.train_mask].sum().backward()
    assert conv.lin.weight.grad is not None


def test_directions_give_the_same_edges(cora: GraphStore, tiny_store: GraphStore) -> None:
    for store in (cora, tiny_store):
        by_dst, by_src = to_pyg_data(store, direction="in"), to_pyg_data(store, direction="out")
        n = store.num_nodes
        assert np.array_equal(edge_keys(by_dst.edge_index, n), edge_keys(by_src.edge_index, n))
        assert torch.all(by_dst.edge_index[1][1:] >= by_dst.edge_index[1][:-1])  # grouped by destination
    with pytest.raises(ValueError, match="direction"):
        to_pyg_data(cora, direction="both")


def test_typed_store(tiny_store: GraphStore) -> None:
    data = to_pyg_data(tiny_store)
    triples = sorted(zip(data.edge_index[0].tolist(), data.edge_type.tolist(), data.edge_index[1].tolist()))
    assert triples == sorted(zip(TINY_SRC.tolist(), TINY_REL.tolist(), TINY_DST.tolist()))
    assert data.edge_type.dtype == torch.int64
    assert data.train_edges.tolist() == np.stack([TINY_SRC, TINY_REL, TINY_DST], axis=1).tolist()
    assert data.y.tolist() == [0, 1, -1, 1]
    assert data.train_mask.tolist() == [True, True, False, False] and not data.test_mask.any()
    # the Data owns its memory: writing to it never reaches the store
    data.x[0, 0] = 99.0
    assert tiny_store.features[0, 0] == 0.0


def test_size_limits(cora: GraphStore) -> None:
    with pytest.raises(DataError, match=r"10556 edges exceed max_edges=10000") as info:
        to_pyg_data(cora, max_edges=10_000)
    assert str(cora.path) in str(info.value)
    with pytest.raises(DataError, match="max_bytes"):
        to_pyg_data(cora, max_bytes=estimated_bytes(cora) - 1)
    assert to_pyg_data(cora, max_edges=None, max_bytes=None).num_edges == 10556
