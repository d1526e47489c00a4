"""GCN and GAT (and GraphSAGE) equal their full-graph computation with all neighbours; every encoder is
layout-independent."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from torch_geometric.nn import GATConv, GCNConv

from suite.config import ModelSpec
from suite.errors import ConfigError
from suite.registry import MODELS
from systems.models.encoder import attach_degrees, build_model
from systems.models.gat import GAT
from systems.models.gcn import GCN
from systems.models.graphsage import GraphSAGE
from systems.models.gat import HIDDEN_HEADS, block_edges_with_self_loops
from systems.sampling.naive import NaiveSampler
from systems.sampling.sampler import LayerBlock
from tests.support.graphs import graph_from_lists, in_graph
from tests.support.sampling import destinations_last

NUM_NODES, NUM_EDGES, IN_DIM, OUT_DIM = 40, 160, 8, 3
ENCODERS = ["graphsage", "gcn", "gat", "mlp"]


def random_edges(seed: int = 0, self_loops: bool = True) -> torch.Tensor:
    """``NUM_EDGES`` random edges (repeats possible; self-loops unless ``self_loops`` is False)."""
    generator = torch.Generator().manual_seed(seed)
    edges = torch.randint(0, NUM_NODES, (2, NUM_EDGES), generator=generator)
    return edges if self_loops else edges[:, edges[0] != edges[1]]


def full_graph_gcn(model: GCN, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """``W D^-1 (A + I) x + b`` per layer on a dense adjacency (``A[v, u]`` = edges ``u -> v``, repeats counted)."""
    adjacency = torch.zeros(NUM_NODES, NUM_NODES)
    adjacency.index_put_((edge_index[1], edge_index[0]), torch.ones(edge_index.shape[1]), accumulate=True)
    propagate = adjacency + torch.eye(NUM_NODES)
    propagate = propagate / propagate.sum(dim=1, keepdim=True)
    for layer, conv in enumerate(model.convs):
        x = propagate @ x @ conv.lin.weight.T + conv.bias
        if layer < len(model.convs) - 1:
            x = F.relu(x)
    return x


def full_graph_gcn_symmetric(model: GCN, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """``W D^-1/2 (A + I) D^-1/2 x + b`` per layer, ``D = diag(in-degree + 1)`` (Kipf & Welling's GCN)."""
    adjacency = torch.zeros(NUM_NODES, NUM_NODES)
    adjacency.index_put_((edge_index[1], edge_index[0]), torch.ones(edge_index.shape[1]), accumulate=True)
    scale = (adjacency.sum(dim=1) + 1).rsqrt()
    propagate = scale[:, None] * (adjacency + torch.eye(NUM_NODES)) * scale[None, :]
    for layer, conv in enumerate(model.convs):
        x = propagate @ x @ conv.lin.weight.T + conv.bias
        if layer < len(model.convs) - 1:
            x = F.relu(x)
    return x


def full_graph_gat(model: GAT, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """PyG's full-graph ``GATConv`` (its own self-loop handling) with the model's weights."""
    for layer, conv in enumerate(model.convs):
        full = GATConv(conv.in_channels, conv.out_channels, heads=conv.heads, concat=conv.concat)
        full.load_state_dict(conv.state_dict())
        x = full(x, edge_index)
        if layer < len(model.convs) - 1:
            x = F.elu(x)
    return x


def full_graph_sage(model: GraphSAGE, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """The same SAGEConv weights applied on the whole graph (PyG's usual full-batch call)."""
    for layer, conv in enumerate(model.convs):
        x = conv(x, edge_index)
        if layer < len(model.convs) - 1:
            x = F.relu(x)
    return x


def make_model(encoder: str, num_layers: int, fanouts: tuple[int, ...] | None = None, seed: int = 0, **options):
    torch.manual_seed(seed)
    spec = ModelSpec(encoder=encoder, num_layers=num_layers, hidden_dim=16, fanouts=fanouts or (-1,) * num_layers,
                     **options)
    return spec, build_model(spec, IN_DIM, OUT_DIM).eval()


def test_registered():
    assert {"gcn", "gat"} <= set(MODELS.names())
    assert isinstance(make_model("gcn", 2)[1], GCN) and isinstance(make_model("gat", 2)[1], GAT)
    assert GCN.uses_neighbours and GAT.uses_neighbours


@pytest.mark.parametrize(
    ("encoder", "options", "full_graph"),
    [("gcn", {}, full_graph_gcn), ("gcn", {"gcn_normalization": "symmetric"}, full_graph_gcn_symmetric),
     ("gat", {}, full_graph_gat),
     *(("graphsage", {"aggregation": aggregation}, full_graph_sage) for aggregation in ("mean", "max", "sum"))],
    ids=["gcn", "gcn-symmetric", "gat", "graphsage-mean", "graphsage-max", "graphsage-sum"],
)
@pytest.mark.parametrize("num_layers", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_on_all_neighbour_blocks_equals_full_graph(encoder, options, full_graph, num_layers, seed):
    edge_index = random_edges(seed)  # with self-loops and repeated edges, which GATConv handles its own way
    assert (edge_index[0] == edge_index[1]).any()
    x = torch.randn(NUM_NODES, IN_DIM, generator=torch.Generator().manual_seed(seed))
    spec, model = make_model(encoder, num_layers, seed=seed, **options)
    roots = torch.tensor([3, 7, 0, 19, 25])
    graph = in_graph(edge_index, NUM_NODES)
    attach_degrees(model, graph)
    sample = NaiveSampler(graph, spec.fanouts).sample(roots, torch.Generator())
    with torch.no_grad():
        blocks_out = model(x[sample.input_nodes], sample)
        full_out = full_graph(model, x, edge_index)[roots]
    assert blocks_out.shape == (len(roots), OUT_DIM)
    torch.testing.assert_close(blocks_out, full_out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("aggregation", ["mean", "sum"])
@pytest.mark.parametrize("seed", [0, 1])
def test_graphsage_on_wide_rows_as_a_sparse_product_equals_full_graph_and_its_gradients(aggregation, seed):
    """Input rows of SPARSE_MIN_WIDTH features: the first layer aggregates as a sparse-dense product (repeated
    edges and self-loops counted as PyG's edge list counts them); outputs and weight gradients equal the full-graph
    SAGEConv's."""
    from systems.models.sparse_aggregation import SPARSE_MIN_WIDTH, uses_sparse_product

    assert uses_sparse_product(aggregation, SPARSE_MIN_WIDTH) and not uses_sparse_product("max", SPARSE_MIN_WIDTH)
    edge_index = random_edges(seed)
    x = torch.randn(NUM_NODES, SPARSE_MIN_WIDTH, generator=torch.Generator().manual_seed(seed))
    torch.manual_seed(seed)
    model = GraphSAGE(SPARSE_MIN_WIDTH, 16, OUT_DIM, num_layers=2, aggregation=aggregation, dropout=0.0)
    roots = torch.tensor([3, 7, 0, 19, 25])
    sample = NaiveSampler(in_graph(edge_index, NUM_NODES), (-1, -1)).sample(roots, torch.Generator())
    blocks_out = model(x[sample.input_nodes], sample)
    blocks_grads = torch.autograd.grad(blocks_out.square().sum(), list(model.parameters()))
    full_out = full_graph_sage(model, x, edge_index)[roots]
    full_grads = torch.autograd.grad(full_out.square().sum(), list(model.parameters()))
    torch.testing.assert_close(blocks_out, full_out, atol=1e-4, rtol=1e-4)
    for got, expected in zip(blocks_grads, full_grads):
        torch.testing.assert_close(got, expected, atol=1e-3, rtol=1e-4)


def test_symmetric_gcn_layer_equals_pyg_gcnconv_on_an_undirected_graph():
    """Without self-loops in the graph, the symmetric layer is PyG's GCNConv (self-loops added, D^-1/2 A D^-1/2)."""
    edge_index = random_edges(3, self_loops=False)
    edge_index = torch.unique(torch.cat([edge_index, edge_index.flip(0)], dim=1), dim=1)  # undirected, no repeats
    x = torch.randn(NUM_NODES, IN_DIM, generator=torch.Generator().manual_seed(3))
    spec, model = make_model("gcn", 1, seed=3, gcn_normalization="symmetric")
    graph = in_graph(edge_index, NUM_NODES)
    attach_degrees(model, graph)
    conv = GCNConv(IN_DIM, OUT_DIM)
    with torch.no_grad():
        conv.lin.weight.copy_(model.convs[0].lin.weight)
        conv.bias.copy_(model.convs[0].bias)
        roots = torch.arange(NUM_NODES)
        sample = NaiveSampler(graph, spec.fanouts).sample(roots, torch.Generator())
        torch.testing.assert_close(model(x[sample.input_nodes], sample), conv(x, edge_index), atol=1e-5, rtol=1e-5)


def test_symmetric_gcn_needs_degrees_and_other_encoders_refuse_it():
    spec, model = make_model("gcn", 1, gcn_normalization="symmetric")
    sample = NaiveSampler(in_graph(random_edges(), NUM_NODES), spec.fanouts).sample(torch.tensor([1]),
                                                                                    torch.Generator())
    with pytest.raises(RuntimeError, match="degrees"):
        model(torch.randn(len(sample.input_nodes), IN_DIM), sample)
    with pytest.raises(ConfigError, match="model.gcn_normalization"):
        make_model("graphsage", 1, gcn_normalization="symmetric")


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("fanouts", [(-1, -1, -1), (3, 2, 4), (1, 1, 1)])
def test_naive_and_destinations_last_layouts_agree(encoder, fanouts):
    edge_index = random_edges(2)
    x = torch.randn(NUM_NODES, IN_DIM, generator=torch.Generator().manual_seed(2))
    _, model = make_model(encoder, 3, fanouts)
    roots = torch.tensor([5, 1, 30, 12])
    naive = NaiveSampler(in_graph(edge_index, NUM_NODES), fanouts).sample(roots, torch.Generator().manual_seed(0))
    dense = destinations_last(naive, torch.Generator().manual_seed(1))
    assert [b.dst_start for b in dense.blocks] == [len(b.src_nodes) - b.num_dst for b in dense.blocks]
    assert dense.root_start == len(dense.input_nodes) - len(roots) > 0
    assert torch.equal(dense.input_nodes[dense.root_start:], roots)
    assert torch.equal(dense.input_nodes.sort().values, naive.input_nodes.sort().values)
    with torch.no_grad():
        naive_out = model(x[naive.input_nodes], naive)
        dense_out = model(x[dense.input_nodes], dense)
    torch.testing.assert_close(dense_out, naive_out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("encoder", ["gcn", "gat"])
def test_gradients_agree_across_layouts(encoder):
    edge_index = random_edges(3)
    x = torch.randn(NUM_NODES, IN_DIM, generator=torch.Generator().manual_seed(3))
    _, model = make_model(encoder, 2, (4, 4))
    roots = torch.tensor([2, 9, 17])
    naive = NaiveSampler(in_graph(edge_index, NUM_NODES), (4, 4)).sample(roots, torch.Generator().manual_seed(0))
    grads = []
    for sample in (naive, destinations_last(naive, torch.Generator().manual_seed(5))):
        model.zero_grad()
        model(x[sample.input_nodes], sample).square().sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for naive_grad, dense_grad in zip(*grads):
        torch.testing.assert_close(dense_grad, naive_grad, atol=1e-5, rtol=1e-5)


def test_gat_self_loops_follow_the_destinations():
    # Destinations last: global ids [7, 3 | 5, 9]; destination 0 is node 5 (row 2), destination 1 is node 9 (row 3).
    block = LayerBlock(torch.tensor([7, 3, 5, 9]), 2, torch.tensor([[0, 2, 1, 3], [0, 0, 1, 0]]), dst_start=2)
    edges = block_edges_with_self_loops(block)
    # The edge from row 2 (node 5) to destination 0 (node 5) is a self-loop: dropped, then added once.
    assert edges.tolist() == [[0, 1, 3, 2, 3], [0, 1, 0, 0, 1]]


def test_gat_heads_and_errors():
    _, model = make_model("gat", 2)
    assert model.convs[0].heads == HIDDEN_HEADS and model.convs[0].concat
    assert model.convs[1].heads == 1
    with pytest.raises(ConfigError, match="model.hidden_dim"):
        build_model(ModelSpec(encoder="gat", num_layers=2, hidden_dim=10, fanouts=(2, 2)), IN_DIM, OUT_DIM)
    build_model(ModelSpec(encoder="gat", num_layers=1, hidden_dim=10, fanouts=(2,)), IN_DIM, OUT_DIM)


def test_gat_heads_from_the_spec():
    model = build_model(ModelSpec(encoder="gat", num_layers=3, hidden_dim=12, heads=3, fanouts=(2, 2, 2)), IN_DIM,
                        OUT_DIM)
    assert [conv.heads for conv in model.convs] == [3, 3, 1]
    assert model.convs[0].out_channels == 4  # 12 wide in all, 3 heads of 4
    with pytest.raises(ConfigError, match="model.hidden_dim: gat splits it over model.heads=5 heads"):
        build_model(ModelSpec(encoder="gat", num_layers=2, hidden_dim=12, heads=5, fanouts=(2, 2)), IN_DIM, OUT_DIM)


@pytest.mark.parametrize("encoder", ["gcn", "gat"])
def test_rejects_other_aggregations_and_wrong_blocks(encoder):
    with pytest.raises(ConfigError, match="model.aggregation"):
        build_model(ModelSpec(encoder=encoder, num_layers=1, fanouts=(2,), aggregation="max"), IN_DIM, OUT_DIM)
    with pytest.raises(ConfigError, match="model.num_layers"):
        build_model(ModelSpec(encoder=encoder, num_layers=0, fanouts=()), IN_DIM, OUT_DIM)
    _, model = make_model(encoder, 2)
    sample = NaiveSampler(graph_from_lists([[1], [0]]), (2,)).sample(torch.tensor([0]), torch.Generator())
    with pytest.raises(ValueError, match="2 layers but the sample has 1 blocks"):
        model(torch.randn(2, IN_DIM), sample)


@pytest.mark.parametrize("encoder", ["gcn", "gat"])
def test_dropout_only_in_training(encoder):
    _, model = make_model(encoder, 2)
    x = torch.randn(NUM_NODES, IN_DIM)
    sample = NaiveSampler(in_graph(random_edges(1), NUM_NODES), (-1, -1)).sample(torch.arange(10), torch.Generator())
    features = x[sample.input_nodes]
    assert torch.equal(model(features, sample), model(features, sample))
    model.train()
    assert not torch.equal(model(features, sample), model(features, sample))


def test_isolated_destination_keeps_its_own_features():
    # Node 0 has no neighbour: GCN's mean is over the node itself; GAT attends to itself only.
    graph = graph_from_lists([[], [0]])
    sample = NaiveSampler(graph, (-1,)).sample(torch.tensor([0]), torch.Generator())
    x = torch.randn(1, IN_DIM)
    for encoder in ("gcn", "gat"):
        _, model = make_model(encoder, 1)
        conv = model.convs[0]
        with torch.no_grad():
            expected = conv.lin(x) + conv.bias
            torch.testing.assert_close(model(x, sample), expected)
