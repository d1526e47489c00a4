"""R-GCN over sampled blocks: PyG's RGCNConv semantics, relation types of sampled edges, both layouts, runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.nn import RGCNConv

from suite.config import ModelSpec, RunSpec
from suite.errors import ConfigError
from suite.graph import GraphStore, create_store
from suite.graph.csr import EdgeChunk, write_csrs
from suite.recorder import Recorder
from suite.registry import MODELS, SYSTEMS
import systems.disk.disk_system  # noqa: F401  (registers the systems)
import systems.in_memory  # noqa: F401
import systems.pipelined  # noqa: F401
from systems.models.rgcn import RGCN, RelationLookup, _rgcn_conv_class, build_encoder
from systems.sampling.sampler import SamplingGraph
from systems.sampling.dense import DenseSampler
from systems.sampling.naive import NaiveSampler

# typed edges (src, rel, dst) of a 5-node graph with parallel edges 0 -> 1 of relations 0 and 1
TRIPLES = [(0, 0, 1), (0, 1, 1), (2, 1, 1), (3, 0, 2), (1, 2, 0), (4, 2, 0), (0, 0, 3)]


def typed_store(path: Path, triples=TRIPLES, num_nodes: int = 5, num_relations: int = 3,
                features: bool = True) -> GraphStore:
    edges = np.array(triples, dtype=np.int64)
    with create_store(path) as writer:
        count = write_csrs(writer, [EdgeChunk(edges[:, 0], edges[:, 2], edges[:, 1])], num_nodes,
                           num_relations=num_relations)
        writer.write_array("train_edges", edges)
        writer.write_array("valid_edges", edges[:2])
        writer.write_array("test_edges", edges[2:4])
        if features:
            writer.write_array("features", np.eye(num_nodes, dtype=np.float32))
        writer.finalize(name="typed", num_nodes=num_nodes, num_edges=count, directed=True,
                        num_relations=num_relations, feature_dim=num_nodes if features else 0)
    return GraphStore.open(path)


@pytest.mark.parametrize("bases", [None, 4])
@pytest.mark.parametrize("aggregation", ["mean", "add"])
def test_block_conv_equals_pyg_rgcnconv(bases, aggregation) -> None:
    torch.manual_seed(0)
    reference = RGCNConv(6, 5, 7, num_bases=bases, aggr=aggregation)
    block_conv = _rgcn_conv_class()(6, 5, 7, num_bases=bases, aggr=aggregation)
    block_conv.load_state_dict(reference.state_dict())
    x = torch.randn(20, 6)
    edge_index = torch.stack([torch.randint(0, 20, (60,)), torch.randint(0, 8, (60,))])
    edge_type = torch.randint(0, 7, (60,))
    expected = reference((x, x[:8]), edge_index, edge_type)
    got = block_conv((x, x[:8]), edge_index, edge_type)
    assert torch.allclose(got, expected, atol=1e-5)
    expected.square().sum().backward()
    got.square().sum().backward()
    for name, parameter in reference.named_parameters():
        assert torch.allclose(dict(block_conv.named_parameters())[name].grad, parameter.grad, atol=1e-4), name


def test_lookup_types_by_hand(tmp_path: Path) -> None:
    store = typed_store(tmp_path / "s")
    lookup = RelationLookup.from_store(store, "both")
    assert lookup.num_types == 6
    # block: destination 1 with in-neighbours 0, 0, 2 (in-edges: r 0, r 1, r 1) and out-neighbour 0 (1 -> 0: r 2
    # as seen from 1's out-list, a reverse edge: 2 + 3 = 5)
    from systems.sampling.sampler import LayerBlock

    block = LayerBlock(torch.tensor([1, 0, 2]), 1, torch.tensor([[1, 1, 2, 1], [0, 0, 0, 0]]))
    assert lookup.edge_types(block).tolist() == [0, 1, 1, 5]
    # a third copy of 0 -> 1 wraps around to the first relation
    block = LayerBlock(torch.tensor([1, 0]), 1, torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]]))
    assert sorted(lookup.edge_types(block).tolist()) == [0, 0, 1, 5]


@pytest.mark.parametrize("sampler", [NaiveSampler, DenseSampler])
def test_all_neighbours_sample_gets_exactly_the_typed_edges(tmp_path: Path, sampler) -> None:
    store = typed_store(tmp_path / "s")
    graph = SamplingGraph.from_store(store, "in")
    lookup = RelationLookup.from_store(store, "in")
    sample = sampler(graph, [-1]).sample(torch.tensor([1, 0]), torch.Generator().manual_seed(0))
    block = sample.blocks[0]
    src, dst = block.edge_index
    triples = sorted(zip(block.src_nodes[src].tolist(), lookup.edge_types(block).tolist(),
                         block.src_nodes[dst + block.dst_start].tolist()))
    assert triples == sorted(t for t in TRIPLES if t[2] in (0, 1))


def test_rgcn_layer_equals_full_graph_rgcnconv_in_both_layouts(tmp_path: Path) -> None:
    store = typed_store(tmp_path / "s")
    spec = ModelSpec(encoder="rgcn", num_layers=2, hidden_dim=4, fanouts=(-1, -1), dropout=0.0, num_bases=2)
    torch.manual_seed(0)
    model = build_encoder(spec, 5, 3, store).eval()
    model.relation_lookup = RelationLookup.from_store(store, "in")
    x = torch.randn(5, 5)
    edges = torch.tensor(TRIPLES)
    full = x
    for layer, conv in enumerate(model.convs):
        reference = RGCNConv(conv.in_channels_l, conv.out_channels, conv.num_relations, num_bases=2)
        reference.load_state_dict(conv.state_dict())
        full = reference(full, edges[:, [0, 2]].T, edges[:, 1])
        full = torch.relu(full) if layer == 0 else full
    graph = SamplingGraph.from_store(store, "in")
    roots = torch.tensor([2, 0, 1])
    for sampler in (NaiveSampler(graph, [-1, -1]), DenseSampler(graph, [-1, -1])):
        sample = sampler.sample(roots, torch.Generator().manual_seed(0))
        out = model(x[sample.input_nodes], sample)
        assert torch.allclose(out, full[roots], atol=1e-5), type(sampler).__name__


def test_registered_builders_and_errors(tmp_path: Path) -> None:
    store = typed_store(tmp_path / "s")
    for name in ("rgcn", "rgcn_fast"):
        assert getattr(MODELS.get(name), "needs_relations", False)
        model = build_encoder(ModelSpec(encoder=name, num_layers=1, fanouts=(5,)), 5, 3, store)
        assert isinstance(model, RGCN) and model.num_relations == 6
    with pytest.raises(ConfigError, match="model.num_bases: rgcn has 6 relation types"):
        build_encoder(ModelSpec(encoder="rgcn", num_layers=1, fanouts=(5,), num_bases=7), 5, 3, store)


def _spec(system: str, encoder: str = "rgcn", **training) -> RunSpec:
    return RunSpec.model_validate({
        "dataset": {"name": "store"},
        "model": {"encoder": encoder, "num_layers": 1, "hidden_dim": 8, "fanouts": [3], "decoder": "distmult",
                  "embedding_dim": 8, "learnable_embeddings": True, "dropout": 0.0, "num_bases": 2},
        "sampler": {"name": "dense", "direction": "both"},
        "system": {"name": system, "options": {"policy": "beta", "num_partitions": 3, "buffer_capacity": 2}
                   if system == "disk"
                   else {}},
        "training": {"task": "link_prediction", "batch_size": 4, "epochs": 2, "optimizer": "adagrad",
                     "learning_rate": 0.1, "negatives": {"num_chunks": 1, "negatives_per_positive": 3},
                     **training},
        "evaluation": {"every": 1, "batch_size": 8},
    })


@pytest.mark.parametrize("system", ["in_memory", "pipelined", "disk"])
@pytest.mark.parametrize("encoder", ["rgcn", "rgcn_fast"])
def test_rgcn_distmult_link_prediction_runs(tmp_path: Path, system: str, encoder: str) -> None:
    store = typed_store(tmp_path / "s", features=False)
    spec = _spec(system, encoder)
    recorder = Recorder(tmp_path / "run", spec)
    try:
        outcome = SYSTEMS.get(system)(spec, store, torch.device("cpu"), recorder).run()
    finally:
        recorder.close()
    assert len(outcome.epochs) == 2 and all(np.isfinite(e.loss) for e in outcome.epochs)
    assert 0.0 < outcome.test_metrics["filtered_mrr"] <= 1.0
    assert 0.0 <= outcome.test_metrics["self_rank_fraction"] <= 1.0


def test_rgcn_node_classification_runs(tmp_path: Path) -> None:
    edges = np.array(TRIPLES, dtype=np.int64)
    with create_store(tmp_path / "nc") as writer:
        count = write_csrs(writer, [EdgeChunk(edges[:, 0], edges[:, 2], edges[:, 1])], 5, num_relations=3)
        writer.write_array("features", np.eye(5, dtype=np.float32))
        writer.write_array("labels", np.array([0, 1, 0, 1, 0]))
        for split, nodes in (("train", [0, 1, 2]), ("valid", [3]), ("test", [4])):
            writer.write_array(f"{split}_nodes", np.array(nodes, dtype=np.int64))
        writer.finalize(name="nc", num_nodes=5, num_edges=count, directed=True, num_relations=3, num_classes=2,
                        feature_dim=5)
    store = GraphStore.open(tmp_path / "nc")
    spec = RunSpec.model_validate({
        "dataset": {"name": "store"}, "model": {"encoder": "rgcn", "num_layers": 2, "hidden_dim": 4,
                                                "fanouts": [-1, -1], "dropout": 0.0},
        "sampler": {"name": "dense"}, "training": {"batch_size": 2, "epochs": 30, "learning_rate": 0.05},
        "evaluation": {"every": 30}})
    recorder = Recorder(tmp_path / "run", spec)
    try:
        outcome = SYSTEMS.get("in_memory")(spec, store, torch.device("cpu"), recorder).run()
    finally:
        recorder.close()
    assert outcome.epochs[-1].loss < outcome.epochs[0].loss
