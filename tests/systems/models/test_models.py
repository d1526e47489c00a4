"""Encoders: registration, GraphSAGE's checks and dropout; the MLP ignores neighbours (GraphSAGE over
all-neighbour blocks equals full-graph GraphSAGE: tests/systems/models/test_gcn_gat.py)."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from suite.config import ModelSpec
from suite.errors import ConfigError
from suite.registry import MODELS
from systems.models.encoder import build_model
from systems.models.graphsage import GraphSAGE
from systems.models.mlp import MLP
from systems.sampling.naive import NaiveSampler
from tests.support.graphs import graph_from_lists, in_graph

NUM_NODES, NUM_EDGES, IN_DIM, OUT_DIM = 40, 160, 8, 3


def random_edges(seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, NUM_NODES, (2, NUM_EDGES), generator=generator)


def test_registered_builders():
    assert {"graphsage", "mlp"} <= set(MODELS.names())
    spec = ModelSpec(encoder="graphsage", num_layers=2, hidden_dim=16, fanouts=(5, 5))
    assert isinstance(build_model(spec, IN_DIM, OUT_DIM), GraphSAGE)
    assert isinstance(build_model(spec.model_copy(update={"encoder": "mlp"}), IN_DIM, OUT_DIM), MLP)


def test_graphsage_rejects_wrong_number_of_blocks():
    model = build_model(ModelSpec(num_layers=2, fanouts=(2, 2)), IN_DIM, OUT_DIM)
    sample = NaiveSampler(graph_from_lists([[1], [0]]), (2,)).sample(torch.tensor([0]), torch.Generator())
    with pytest.raises(ValueError, match="2 layers but the sample has 1 blocks"):
        model(torch.randn(2, IN_DIM), sample)


def test_graphsage_dropout_only_in_training():
    torch.manual_seed(0)
    edge_index = random_edges(1)
    x = torch.randn(NUM_NODES, IN_DIM)
    model = build_model(ModelSpec(num_layers=2, hidden_dim=32, fanouts=(-1, -1), dropout=0.5), IN_DIM, OUT_DIM)
    sample = NaiveSampler(in_graph(edge_index, NUM_NODES), (-1, -1)).sample(torch.arange(10), torch.Generator())
    features = x[sample.input_nodes]
    model.eval()
    assert torch.equal(model(features, sample), model(features, sample))
    model.train()
    assert not torch.equal(model(features, sample), model(features, sample))


@pytest.mark.parametrize("encoder", ["graphsage", "mlp"])
def test_zero_layers_rejected(encoder):
    with pytest.raises(ConfigError, match="model.num_layers"):
        build_model(ModelSpec(encoder=encoder, num_layers=0, fanouts=()), IN_DIM, OUT_DIM)


def test_mlp_ignores_neighbours():
    torch.manual_seed(0)
    spec = ModelSpec(encoder="mlp", num_layers=2, hidden_dim=16, fanouts=(-1, -1))
    model = build_model(spec, IN_DIM, OUT_DIM).eval()
    x = torch.randn(NUM_NODES, IN_DIM)
    roots = torch.tensor([4, 2, 11])
    with_blocks = NaiveSampler(in_graph(random_edges(), NUM_NODES), (-1, -1)).sample(roots, torch.Generator())
    other_blocks = NaiveSampler(in_graph(random_edges(5), NUM_NODES), (-1, -1)).sample(roots, torch.Generator())
    without = NaiveSampler(in_graph(random_edges(), NUM_NODES), ()).sample(roots, torch.Generator())
    assert not torch.equal(with_blocks.input_nodes, other_blocks.input_nodes)
    with torch.no_grad():
        expected = model.lins[1](F.relu(model.lins[0](x[roots])))
        for sample in (with_blocks, other_blocks, without):
            rows = x[sample.input_nodes]
            garbage = rows.clone()
            garbage[len(roots):] = 1e3  # the neighbours' features do not matter
            torch.testing.assert_close(model(rows, sample), expected)
            torch.testing.assert_close(model(garbage, sample), expected)
    assert MLP.uses_neighbours is False and GraphSAGE.uses_neighbours is True



@pytest.mark.parametrize("encoder", ["graphsage", "gcn", "mlp"])
def test_input_dropout_drops_input_features_in_training_only(encoder):
    torch.manual_seed(0)
    x = torch.rand(NUM_NODES, IN_DIM) + 0.5
    sample = NaiveSampler(in_graph(random_edges(2), NUM_NODES), (-1, -1)).sample(torch.arange(10), torch.Generator())
    features = x[sample.input_nodes]
    plain = build_model(ModelSpec(encoder=encoder, num_layers=2, hidden_dim=16, fanouts=(-1, -1), dropout=0.0),
                        IN_DIM, OUT_DIM)
    plain.train()
    assert torch.equal(plain(features, sample), plain(features, sample))  # no dropout anywhere: deterministic
    dropping = build_model(ModelSpec(encoder=encoder, num_layers=2, hidden_dim=16, fanouts=(-1, -1), dropout=0.0,
                                     input_dropout=0.5), IN_DIM, OUT_DIM)
    assert dropping.input_dropout == 0.5
    dropping.train()
    assert not torch.equal(dropping(features, sample), dropping(features, sample))
    dropping.eval()
    assert torch.equal(dropping(features, sample), dropping(features, sample))


def test_input_dropout_on_an_encoder_without_one_is_a_config_error():
    spec = ModelSpec(encoder="shallow", num_layers=0, fanouts=(), input_dropout=0.5)
    with pytest.raises(ConfigError, match="model.input_dropout: the encoder 'shallow' applies no input dropout"):
        build_model(spec, IN_DIM, IN_DIM)
