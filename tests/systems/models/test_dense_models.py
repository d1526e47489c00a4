"""Every encoder over the DENSE sampler's output equals the same encoder over the naive sampler's (all neighbours)."""

from __future__ import annotations

import pytest
import torch

from suite.config import ModelSpec
from systems.models.encoder import build_model
from systems.sampling.dense import DenseSampler
from systems.sampling.naive import NaiveSampler
from tests.support.graphs import in_graph

IN_DIM, OUT_DIM = 8, 3


def random_graph(seed: int) -> tuple[torch.Tensor, int]:
    """A random multigraph (repeats and self-loops possible) of 30 to 80 nodes, average in-degree 2 to 6."""
    generator = torch.Generator().manual_seed(seed)
    num_nodes = int(torch.randint(30, 81, (1,), generator=generator))
    num_edges = num_nodes * int(torch.randint(2, 7, (1,), generator=generator))
    return torch.randint(0, num_nodes, (2, num_edges), generator=generator), num_nodes


@pytest.mark.parametrize("encoder", ["graphsage", "gcn", "gat"])
@pytest.mark.parametrize("seed", range(4))
def test_three_layers_over_dense_equal_naive_with_all_neighbours(encoder, seed):
    edge_index, num_nodes = random_graph(seed)
    graph = in_graph(edge_index, num_nodes)
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, IN_DIM, generator=generator)
    roots = torch.randperm(num_nodes, generator=generator)[:7]
    torch.manual_seed(seed)
    spec = ModelSpec(encoder=encoder, num_layers=3, hidden_dim=16, fanouts=(-1, -1, -1))
    model = build_model(spec, IN_DIM, OUT_DIM).eval()
    naive = NaiveSampler(graph, spec.fanouts).sample(roots, torch.Generator().manual_seed(0))
    dense = DenseSampler(graph, spec.fanouts).sample(roots, torch.Generator().manual_seed(0))
    assert dense.root_start == len(dense.input_nodes) - len(roots)
    assert all(block.dst_start == len(block.src_nodes) - block.num_dst for block in dense.blocks)
    with torch.no_grad():
        naive_out = model(x[naive.input_nodes], naive)
        dense_out = model(x[dense.input_nodes], dense)
    torch.testing.assert_close(dense_out, naive_out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("encoder", ["graphsage", "gcn", "gat", "mlp"])
def test_encoders_train_on_dense_samples(encoder):
    # Sampled (not all) neighbours: outputs differ from naive's, but shapes, finiteness and gradients hold.
    edge_index, num_nodes = random_graph(7)
    graph = in_graph(edge_index, num_nodes)
    torch.manual_seed(0)
    model = build_model(ModelSpec(encoder=encoder, num_layers=3, hidden_dim=16, fanouts=(3, 2, 2)), IN_DIM, OUT_DIM)
    roots = torch.arange(10)
    sample = DenseSampler(graph, (3, 2, 2) if model.uses_neighbours else ()).sample(roots, torch.Generator())
    logits = model(torch.randn(len(sample.input_nodes), IN_DIM), sample)
    assert logits.shape == (len(roots), OUT_DIM) and torch.isfinite(logits).all()
    logits.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
