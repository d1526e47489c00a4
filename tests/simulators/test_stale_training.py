"""Bounded-staleness training (simulators/stale_training.py) on a small random graph."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv

from simulators.stale_training import StaleTrainingConfig, _gcn_layer, sparse_adjacencies, train_stale


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(0)
    n = 200
    y = torch.randint(0, 3, (n,), generator=gen)
    x = torch.randn(n, 8, generator=gen) + 2 * torch.nn.functional.one_hot(y, 8).float()
    src = torch.randint(0, n, (1000,), generator=gen)
    dst = torch.randint(0, n, (1000,), generator=gen)
    same = y[src] == y[dst]
    edge_index = torch.stack([src[same], dst[same]])
    edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    masks = torch.rand(n, generator=gen)
    return Data(x=x, y=y, edge_index=edge_index, num_nodes=n, train_mask=masks < 0.5,
                val_mask=(masks >= 0.5) & (masks < 0.7), test_mask=masks >= 0.7)


def test_layer_equals_pyg_gcnconv(data):
    conv = GCNConv(8, 4)
    adjacency, _ = sparse_adjacencies(data.edge_index, data.num_nodes)
    torch.testing.assert_close(_gcn_layer(conv, data.x, adjacency), conv(data.x, data.edge_index))


def test_staleness_is_bounded_and_sync_is_exact(data):
    base = dict(num_partitions=4, hidden=16, iterations=30, eval_every=10, dropout=0.0, seed=1)
    sync = train_stale(data, StaleTrainingConfig(staleness=0, **base))
    assert sync["max_staleness"] == 0 and sync["mean_staleness"] == 0
    assert sync["test_accuracy"] > 0.6
    stale = train_stale(data, StaleTrainingConfig(staleness=3, **base))
    assert stale["max_staleness"] == 3 and 1 <= stale["mean_staleness"] <= 3
    assert 0 < stale["cross_edge_fraction"] < 1


def test_one_partition_has_nothing_stale(data):
    """With one partition every neighbour is in the own partition: stale training equals synchronous training."""
    base = dict(num_partitions=1, hidden=16, iterations=15, eval_every=5, dropout=0.0, seed=2)
    sync = train_stale(data, StaleTrainingConfig(staleness=0, **base))
    stale = train_stale(data, StaleTrainingConfig(staleness=4, **base))
    assert stale["cross_edge_fraction"] == 0
    assert [c["loss"] for c in sync["curve"]] == pytest.approx([c["loss"] for c in stale["curve"]], rel=1e-5)
