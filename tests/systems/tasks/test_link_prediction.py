"""Link prediction: decoders, negatives (also from a node subset, as a partition buffer draws them), loss, sparse Adagrad, evaluation by hand, and training end to end in the
in-memory and pipelined systems (learnable embeddings, GraphSAGE over DENSE), plus bad input."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from scipy import stats

from suite.config import RunSpec, spec_from_dict
from suite.errors import ConfigError, DataError
from suite.data import GraphStore, create_store
from suite.data.csr import EdgeChunk, write_csrs
from suite.recorder import Recorder, read_records
from suite.registry import DECODERS, SYSTEMS, TASKS
from suite.run_contract import RunOutcome
from systems.pipelined import PipelinedSystem
from systems.models.decoders import ComplEx, DistMult, Dot, build_decoder
from systems.models.embeddings import EmbeddingTable
from systems.tasks.link_prediction import (LinkPredictionTask, embedding_penalty, link_prediction_loss,
                                          validation_sample)
from systems.tasks.negatives import NegativeSampler, chunked_scores, chunking, node_subset

pytestmark = pytest.mark.usefixtures("one_thread")  # fixtures one_thread and tiny: tests/systems/conftest.py


# ---------------------------------------------------------------------------------------------- helpers
def write_lp_store(path: Path, num_nodes: int, train: list[tuple[int, int, int]],
                   valid: list[tuple[int, int, int]] | None = None, test: list[tuple[int, int, int]] | None = None,
                   num_relations: int = 1, features: np.ndarray | None = None) -> GraphStore:
    """A directed link-prediction store from ``(src, rel, dst)`` lists (written as given, unchecked)."""
    train_array = np.array(train, dtype=np.int64).reshape(-1, 3)
    with create_store(path) as writer:
        valid_rows = train_array[(train_array[:, 0] >= 0) & (train_array[:, 0] < num_nodes)
                                 & (train_array[:, 2] >= 0) & (train_array[:, 2] < num_nodes)]
        num_edges = write_csrs(writer, [EdgeChunk(valid_rows[:, 0], valid_rows[:, 2],
                                                  np.clip(valid_rows[:, 1], 0, num_relations - 1))],
                               num_nodes, num_relations=num_relations)
        writer.write_array("train_edges", train_array)
        for split, rows in (("valid", valid), ("test", test)):
            if rows is not None:
                writer.write_array(f"{split}_edges", np.array(rows, dtype=np.int64).reshape(-1, 3))
        if features is not None:
            writer.write_array("features", features.astype(np.float32))
        writer.finalize(name="lp-test", num_nodes=num_nodes, num_edges=num_edges, directed=True,
                        num_relations=num_relations, feature_dim=0 if features is None else features.shape[1])
    return GraphStore.open(path)


def make_spec(**sections: Any) -> RunSpec:
    """Shallow DistMult on the test store; ``sections`` override fields of sections (``model={...}``)."""
    data: dict[str, Any] = {
        "dataset": {"name": "store"},
        "model": {"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": "distmult", "embedding_dim": 32,
                  "learnable_embeddings": True, "dropout": 0.0},
        "training": {"task": "link_prediction", "batch_size": 64, "epochs": 12, "optimizer": "adagrad",
                     "learning_rate": 0.1, "negatives": {"num_chunks": 4, "negatives_per_positive": 50,
                                                         "degree_fraction": 0.5}},
        "evaluation": {"every": 6, "batch_size": 128},
        # one compute thread, whatever else the machine is doing: runs compared bitwise reduce in the same order
        "system": {"name": "in_memory", "options": {"compute_threads": 1}},
        "seed": 0,
    }
    for key, value in sections.items():
        if isinstance(value, dict):
            merged = {**data.get(key, {})}
            for field, inner in value.items():
                merged[field] = {**merged.get(field, {}), **inner} if isinstance(inner, dict) else inner
            data[key] = merged
        else:
            data[key] = value
    return RunSpec.model_validate(data)


def run(spec: RunSpec, store: GraphStore, out: Path, with_system: bool = False):
    """Run ``spec`` with its system; returns ``(outcome, recorder)`` (and the system with ``with_system``)."""
    recorder = Recorder(out, spec)
    system = SYSTEMS.get(spec.system.name)(spec, store, torch.device("cpu"), recorder)
    if with_system:
        system.task.teardown = lambda: None  # keep what evaluation needs, to evaluate again afterwards
    try:
        outcome = system.run()
    finally:
        recorder.close()
    return (outcome, recorder, system) if with_system else (outcome, recorder)


@pytest.fixture(scope="module")
def trained(tiny, tmp_path_factory):
    """``(outcome, system)`` of shallow DistMult trained in memory on ``tiny``."""
    outcome, _, system = run(make_spec(), tiny, tmp_path_factory.mktemp("base"), with_system=True)
    return outcome, system


@pytest.fixture(scope="module")
def baseline(trained) -> RunOutcome:
    return trained[0]


# ---------------------------------------------------------------------------------------------- decoders
def test_registered() -> None:
    assert TASKS.get("link_prediction") is LinkPredictionTask
    assert DECODERS.names() == ["complex", "distmult", "dot", "transe", "transe_l1", "transe_l2"]


def _random_triples(dim: int, relations: int = 3, count: int = 7, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    heads, tails = torch.randn(count, dim, generator=generator), torch.randn(count, dim, generator=generator)
    rel = torch.randint(relations, (count,), generator=generator)
    return heads, rel, tails


def test_distmult_closed_form() -> None:
    decoder = DistMult(3, 6)
    with torch.no_grad():
        decoder.relations.normal_()
    heads, rel, tails = _random_triples(6)
    expected = (heads * decoder.relations[rel] * tails).sum(-1)
    torch.testing.assert_close(decoder(heads, rel, tails), expected)
    torch.testing.assert_close((decoder.head_query(tails, rel) * heads).sum(-1), expected)


def test_complex_closed_form() -> None:
    decoder = ComplEx(3, 8)
    with torch.no_grad():
        decoder.relations.normal_()
    heads, rel, tails = _random_triples(8)

    def as_complex(x: torch.Tensor) -> torch.Tensor:
        return torch.complex(x[..., :4].double(), x[..., 4:].double())

    expected = (as_complex(heads) * as_complex(decoder.relations[rel]) * as_complex(tails).conj()).sum(-1).real
    torch.testing.assert_close(decoder(heads, rel, tails).double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close((decoder.head_query(tails, rel) * heads).sum(-1).double(), expected, rtol=1e-5,
                               atol=1e-5)
    # untrained relations are 1 + 0i: the score is the real dot product
    fresh = ComplEx(3, 8)
    torch.testing.assert_close(fresh(heads, rel, tails), (heads * tails).sum(-1))


def test_dot_and_decoder_errors() -> None:
    heads, rel, tails = _random_triples(4)
    torch.testing.assert_close(Dot(1, 4)(heads, rel, tails), (heads * tails).sum(-1))
    assert list(Dot(5, 4).parameters()) == []
    with pytest.raises(ConfigError, match=r"model\.embedding_dim: ComplEx needs an even width"):
        build_decoder("complex", 2, 5)
    with pytest.raises(ConfigError, match=r"model\.decoder: unknown decoder 'rotate'"):
        build_decoder("rotate", 2, 4)


# ---------------------------------------------------------------------------------------------- negatives
@pytest.mark.parametrize(("positives", "requested", "chunks", "size"),
                         [(25, 4, 4, 7), (3, 10, 3, 1), (100, 10, 10, 10), (7, 1, 1, 7), (10, 6, 5, 2)])
def test_chunking(positives: int, requested: int, chunks: int, size: int) -> None:
    assert chunking(positives, requested) == (chunks, size)
    assert (chunks - 1) * size < positives <= chunks * size


def test_negatives_are_shared_within_chunks() -> None:
    heads, tails = torch.arange(10), torch.arange(10, 20)
    sampler = NegativeSampler(50, heads, tails, num_chunks=4, negatives_per_positive=6, degree_fraction=0.5)
    negatives = sampler.sample(25, torch.Generator().manual_seed(0))
    assert negatives.tails.shape == negatives.heads.shape == (4, 6) and negatives.chunk_size == 7
    assert ((negatives.tails >= 0) & (negatives.tails < 50)).all()
    # the last 3 of every row are by degree: endpoints of training edges of the corrupted side
    assert ((negatives.tails[:, 3:] >= 10) & (negatives.tails[:, 3:] < 20)).all()
    assert (negatives.heads[:, 3:] < 10).all()
    again = sampler.sample(25, torch.Generator().manual_seed(0))
    assert torch.equal(again.tails, negatives.tails) and torch.equal(again.heads, negatives.heads)


def test_degree_fraction_statistics() -> None:
    # in-degrees of the 5 nodes in the training edges: 8, 4, 2, 1, 1 (out of 16)
    tails = torch.tensor([0] * 8 + [1] * 4 + [2] * 2 + [3, 4])
    heads = torch.zeros(16, dtype=torch.int64)
    sampler = NegativeSampler(5, heads, tails, num_chunks=50, negatives_per_positive=400, degree_fraction=0.25)
    negatives = sampler.sample(1000, torch.Generator().manual_seed(1)).tails
    assert sampler.num_by_degree == 100
    observed = torch.bincount(negatives.reshape(-1), minlength=5).double()
    degree = torch.tensor([8, 4, 2, 1, 1], dtype=torch.float64) / 16
    expected = (0.75 * torch.full((5,), 0.2, dtype=torch.float64) + 0.25 * degree) * negatives.numel()
    assert stats.chisquare(observed.numpy(), expected.numpy()).pvalue > 1e-3
    by_degree = torch.bincount(negatives[:, 300:].reshape(-1), minlength=5).double()
    assert stats.chisquare(by_degree.numpy(), (degree * by_degree.sum()).numpy()).pvalue > 1e-3
    uniform_only = NegativeSampler(5, heads, tails, 2, 10, 0.0).sample(4, torch.Generator().manual_seed(0))
    assert uniform_only.tails.shape == (2, 10)


# negatives from a node subset (training.negatives.subset_fraction): a partition buffer's distribution
# 10 nodes; training edges 0->1, 1->2, 4->5, 5->4, 4->5, 8->9. Inside the subset {1, 4, 5, 7}: 4->5, 5->4, 4->5,
# so by degree the tails inside are 5, 4, 5 (5 with probability 2/3) and so are the heads the other way round.
HEADS = torch.tensor([0, 1, 4, 5, 4, 8])
TAILS = torch.tensor([1, 2, 5, 4, 5, 9])
SUBSET = torch.tensor([1, 4, 5, 7])


def test_node_subset_is_a_sorted_sample_without_replacement_of_the_fraction():
    subset = node_subset(10, 0.4, torch.Generator().manual_seed(0))
    assert len(subset) == 4 and len(set(subset.tolist())) == 4 and subset.tolist() == sorted(subset.tolist())
    assert ((subset >= 0) & (subset < 10)).all()
    assert torch.equal(subset, node_subset(10, 0.4, torch.Generator().manual_seed(0)))
    assert len(node_subset(10, 0.01, torch.Generator().manual_seed(0))) == 1  # at least one node
    # every node is in a subset with probability 0.4
    generator = torch.Generator().manual_seed(1)
    counts = torch.bincount(torch.cat([node_subset(10, 0.4, generator) for _ in range(2000)]), minlength=10)
    assert stats.chisquare(counts.numpy(), [800.0] * 10).pvalue > 1e-3


def test_within_draws_uniform_negatives_from_the_subset_and_by_degree_from_the_edges_inside_it():
    sampler = NegativeSampler(10, HEADS, TAILS, num_chunks=100, negatives_per_positive=8, degree_fraction=0.5)
    restricted = sampler.within(SUBSET)
    assert restricted.num_by_degree == 4 and restricted.heads.tolist() == [4, 5, 4]
    negatives = restricted.sample(1000, torch.Generator().manual_seed(0))
    assert negatives.tails.shape == (100, 8)
    uniform = negatives.tails[:, :4].reshape(-1)
    assert set(uniform.tolist()) <= {1, 4, 5, 7}
    counts = torch.bincount(uniform, minlength=10)[SUBSET]
    assert stats.chisquare(counts.numpy(), [100.0] * 4).pvalue > 1e-3  # 400 draws, 1/4 each
    by_degree = negatives.tails[:, 4:].reshape(-1)
    assert set(by_degree.tolist()) <= {4, 5}
    assert stats.binomtest(int((by_degree == 5).sum()), 400, 2 / 3).pvalue > 1e-3
    heads = negatives.heads[:, 4:].reshape(-1)
    assert stats.binomtest(int((heads == 4).sum()), 400, 2 / 3).pvalue > 1e-3


def test_within_a_subset_without_edges_draws_every_negative_uniformly():
    sampler = NegativeSampler(10, HEADS, TAILS, num_chunks=2, negatives_per_positive=8, degree_fraction=0.5)
    restricted = sampler.within(torch.tensor([3, 6]))
    assert restricted.num_by_degree == 0
    negatives = restricted.sample(10, torch.Generator().manual_seed(0))
    assert set(negatives.tails.reshape(-1).tolist()) | set(negatives.heads.reshape(-1).tolist()) <= {3, 6}
    with pytest.raises(ValueError, match="already restricted"):
        restricted.within(torch.tensor([3]))


def test_in_memory_batches_of_a_block_share_one_subset_of_the_fraction(tiny, tmp_path):
    spec = make_spec(training={"batch_size": 16, "negatives": {"subset_fraction": 0.25, "subset_batches": 3,
                                                               "degree_fraction": 0.0}})
    system = SYSTEMS.get("in_memory")(spec, tiny, torch.device("cpu"), Recorder(tmp_path, spec))
    system.setup()
    task = system.task
    batches = task.plan_epoch(0)[:6]
    subsets = [task.negative_subset(0, batch.index) for batch in batches]
    assert all(len(s) == round(0.25 * tiny.num_nodes) for s in subsets)
    assert torch.equal(subsets[0], subsets[2]) and not torch.equal(subsets[2], subsets[3])
    assert torch.equal(subsets[3], subsets[5])
    assert not torch.equal(task.negative_subset(1, 0), subsets[0])  # a new draw every epoch
    for batch, subset in zip(batches, subsets):
        task.sample(batch)
        nodes = batch.sample.roots
        negatives = torch.cat([batch.extra["tail_neg"].reshape(-1), batch.extra["head_neg"].reshape(-1)])
        assert set(nodes[negatives].tolist()) <= set(subset.tolist())


def test_subset_negatives_need_sampled_negatives(tiny, tmp_path):
    spec = make_spec(training={"negatives": {"mode": "all", "subset_fraction": 0.5}})
    system = SYSTEMS.get("in_memory")(spec, tiny, torch.device("cpu"), Recorder(tmp_path, spec))
    with pytest.raises(ConfigError, match="training.negatives.subset_fraction: .*mode 'all'"):
        system.setup()


def test_chunked_scores_match_brute_force() -> None:
    generator = torch.Generator().manual_seed(0)
    queries, negatives = torch.randn(10, 4, generator=generator), torch.randn(4, 6, 4, generator=generator)
    scores = chunked_scores(queries, negatives, chunk_size=3)
    expected = torch.stack([negatives[i // 3] @ queries[i] for i in range(10)])
    torch.testing.assert_close(scores, expected)
    with pytest.raises(ValueError, match="cannot hold"):
        chunked_scores(queries, negatives, chunk_size=2)


# ---------------------------------------------------------------------------------------------- loss
def _reference_loss(decoder, z, src, rel, dst, tail_neg, head_neg, chunk_size, kind, margin):
    total = 0.0
    for i in range(len(src)):
        h, t, r, c = z[src[i]], z[dst[i]], rel[i : i + 1], i // chunk_size
        for negatives, corrupt_tail in ((tail_neg[c], True), (head_neg[c], False)):
            if corrupt_tail:  # tail prediction: <tail_query(h, r), t'>
                positive = decoder(h[None], r, t[None])[0]
                scores = torch.stack([decoder(h[None], r, z[n][None])[0] for n in negatives])
            else:  # head prediction: <head_query(t, r), h'> (the inverse relation's parameters, if any)
                positive = (decoder.head_query(t[None], r) * h).sum()
                scores = torch.stack([(decoder.head_query(t[None], r) * z[n]).sum() for n in negatives])
            if kind == "softmax":
                total += -torch.log_softmax(torch.cat([positive[None], scores]), 0)[0] / (2 * len(src))
            else:
                total += torch.relu(margin - positive + scores).mean() / (2 * len(src))
    return total


@pytest.mark.parametrize("kind", ["softmax", "margin"])
@pytest.mark.parametrize(("decoder_name", "inverse"), [("distmult", False), ("complex", False), ("distmult", True)])
def test_loss_matches_reference(kind: str, decoder_name: str, inverse: bool) -> None:
    generator = torch.Generator().manual_seed(3)
    decoder = build_decoder(decoder_name, 2, 4, inverse_relations=inverse)
    with torch.no_grad():
        decoder.relations.normal_(generator=generator)
    z = torch.randn(8, 4, generator=generator)
    src, dst = torch.tensor([0, 1, 2, 3, 4]), torch.tensor([5, 6, 7, 0, 1])
    rel = torch.tensor([0, 1, 1, 0, 1])
    tail_neg, head_neg = torch.tensor([[2, 3, 7], [1, 5, 6]]), torch.tensor([[4, 4, 0], [2, 6, 3]])
    loss = link_prediction_loss(decoder, z, src, rel, dst, tail_neg, head_neg, 3, kind, margin=1.5)
    expected = _reference_loss(decoder, z, src, rel, dst, tail_neg, head_neg, 3, kind, 1.5)
    torch.testing.assert_close(loss, expected)


# ---------------------------------------------------------------------------------------------- sparse Adagrad
def test_sparse_adagrad_equals_dense_torch_adagrad() -> None:
    generator = torch.Generator().manual_seed(0)
    table = EmbeddingTable(20, 5, 0.1, learning_rate=0.3, generator=generator)
    dense = torch.nn.Parameter(table.weight.clone())
    reference = torch.optim.Adagrad([dense], lr=0.3)
    for step in range(5):
        nodes = torch.randint(20, (8,), generator=generator)  # duplicates included
        grad = torch.randn(8, 5, generator=generator)
        table.adagrad_update(nodes, grad)
        dense.grad = torch.zeros(20, 5).index_add_(0, nodes, grad)
        reference.step()
        assert table.version == step + 1
    torch.testing.assert_close(table.weight, dense.detach())
    torch.testing.assert_close(table.state, reference.state[dense]["sum"])


def test_gather_copies_rows() -> None:
    table = EmbeddingTable(4, 2, 1.0, 0.1, torch.Generator().manual_seed(0))
    rows = table.gather(torch.tensor([2, 0]))
    torch.testing.assert_close(rows, table.weight[[2, 0]])
    rows.add_(1.0)
    assert not torch.equal(rows, table.weight[[2, 0]])


# ---------------------------------------------------------------------------------------------- evaluation by hand
def test_evaluation_by_hand(tmp_path: Path) -> None:
    # known triples: train (0,0,2), (3,0,1); test (0,0,1). Embeddings: nodes 0-2 = e1, node 3 = e2; DistMult with
    # unit relations scores <z_h, z_t>: ties everywhere except with node 3.
    store = write_lp_store(tmp_path / "s", 4, train=[(0, 0, 2), (3, 0, 1)], test=[(0, 0, 1)], valid=[(0, 0, 1)])
    spec = make_spec(model={"embedding_dim": 2})
    task = LinkPredictionTask(spec, store, torch.device("cpu"))
    task.setup()
    task.embeddings.weight.copy_(torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    metrics = task.evaluate("test")
    # tail query (0, 0, ?): scores 1, 1, 1, 0 -> target 1 ties with 0 and 2: rank 2; filtered (2 is known): 1.5
    # head query (?, 0, 1): scores 1, 1, 1, 0 -> target 0 ties with 1 and 2: rank 2; filtered: (3,0,1) scores 0,
    # so still rank 2
    assert math.isclose(metrics["unfiltered_mrr"], 0.5)
    assert math.isclose(metrics["filtered_mrr"], (1 / 1.5 + 1 / 2) / 2)
    assert metrics["mrr"] == metrics["filtered_mrr"] and metrics["filtered_hits@1"] == 0.0
    assert metrics["filtered_hits@3"] == 1.0
    unfiltered = LinkPredictionTask(make_spec(model={"embedding_dim": 2}, evaluation={"filtered": False}), store,
                                    torch.device("cpu"))
    unfiltered.setup()
    unfiltered.embeddings.weight.copy_(task.embeddings.weight)
    assert unfiltered.evaluate("test")["mrr"] == 0.5


def test_validation_sample_is_fixed_and_the_task_validates_on_it(tmp_path: Path) -> None:
    edges = torch.arange(30).view(10, 3)
    sample = validation_sample(edges, 4)
    assert len(sample) == 4 and torch.equal(sample, validation_sample(edges, 4))  # the same rows every call
    assert (sample[1:, 0] > sample[:-1, 0]).all()  # in their original order
    assert torch.equal(validation_sample(edges, 10), edges) and torch.equal(validation_sample(edges, None), edges)
    assert not torch.equal(validation_sample(edges, 4, seed=1), sample)
    # z = 1, 2, 0, -1 (one dimension that counts), unit relations: score(h, t) = z_h * z_t.
    # valid (0,0,1): tail query scores 1 2 0 -1 -> rank 1; head query scores 2 4 0 -2 -> rank 2: MRR 0.75.
    # valid (3,0,0): tail query scores -1 -2 0 1 -> rank 3; head query scores 1 2 0 -1 -> rank 4: MRR 7/24.
    store = write_lp_store(tmp_path / "s", 4, train=[(0, 0, 2)], valid=[(0, 0, 1), (3, 0, 0)], test=[(0, 0, 1)])
    table = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 0.0], [-1.0, 0.0]])
    chosen = validation_sample(store.edges("valid"), 1)
    for size, expected in ((None, (0.75 + 7 / 24) / 2), (1, 0.75 if chosen[0, 0] == 0 else 7 / 24)):
        task = LinkPredictionTask(make_spec(model={"embedding_dim": 2}, evaluation={"valid_sample": size}),
                                  store, torch.device("cpu"))
        task.setup()
        task.embeddings.weight.copy_(table)
        assert math.isclose(task.evaluate("valid")["filtered_mrr"], expected), size


def test_the_task_tests_on_a_fixed_test_sample_and_validates_on_its_own(tmp_path: Path) -> None:
    # The valid/test triples of the test above, swapped: test_sample picks the test rows, valid_sample leaves them.
    store = write_lp_store(tmp_path / "s", 4, train=[(0, 0, 2)], valid=[(0, 0, 1)], test=[(0, 0, 1), (3, 0, 0)])
    table = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 0.0], [-1.0, 0.0]])
    chosen = validation_sample(store.edges("test"), 1)
    cases = (({"test_sample": None}, (0.75 + 7 / 24) / 2), ({"valid_sample": 1}, (0.75 + 7 / 24) / 2),
             ({"test_sample": 1}, 0.75 if chosen[0, 0] == 0 else 7 / 24))
    for evaluation, expected in cases:
        task = LinkPredictionTask(make_spec(model={"embedding_dim": 2}, evaluation=evaluation), store,
                                  torch.device("cpu"))
        task.setup()
        task.embeddings.weight.copy_(table)
        assert math.isclose(task.evaluate("test")["filtered_mrr"], expected), evaluation
        assert math.isclose(task.evaluate("valid")["filtered_mrr"], 0.75), evaluation  # one triple: never sampled


# ---------------------------------------------------------------------------------------------- training
def test_in_memory_learns(trained) -> None:
    baseline, system = trained
    losses = [stats.loss for stats in baseline.epochs]
    assert losses[-1] < losses[0] * 0.8
    # The training edges are fitted (a random scorer over 300 entities has MRR ~ 0.02). The held-out edges of
    # this random community graph are predictable only up to the community: above random, far from 1.
    fitted = system.task.evaluate("train")
    assert fitted["filtered_mrr"] > 0.2 and fitted["filtered_hits@10"] > 0.6, fitted
    test = baseline.test_metrics
    assert test["filtered_mrr"] > 0.025, test
    assert test["filtered_mrr"] >= test["unfiltered_mrr"] and test["filtered_hits@10"] >= test["unfiltered_hits@10"]
    assert baseline.epochs[0].stage_busy_s.keys() == {"sample", "gather", "transfer", "compute", "update"}
    assert baseline.epochs[0].examples == 855 and baseline.epochs[0].staleness == [0] * 14


def test_embedding_dropout_drops_scored_rows_in_training_only(tiny, baseline, tmp_path) -> None:
    task = LinkPredictionTask(make_spec(model={"embedding_dropout": 0.5}), tiny, torch.device("cpu"))
    task.setup()
    rows = torch.ones(2000, 32)
    task.model.train()
    dropped = task.model.embedding_dropout(rows)
    assert set(dropped.unique().tolist()) == {0.0, 2.0}  # inverted dropout: kept rows scaled by 1 / (1 - p)
    assert 0.45 < (dropped == 0).float().mean() < 0.55
    task.model.eval()
    assert torch.equal(task.model.embedding_dropout(rows), rows)
    # It trains, and differently from the run without it; at 0 the run (and its id) is the one without the field.
    outcome, _ = run(make_spec(model={"embedding_dropout": 0.3}), tiny, tmp_path / "dropout")
    assert outcome.test_metrics != baseline.test_metrics and outcome.test_metrics["filtered_mrr"] > 0.025
    assert make_spec(model={"embedding_dropout": 0.0}).run_id == make_spec().run_id
    assert make_spec(model={"embedding_dropout": 0.3}).run_id != make_spec().run_id


def test_relation_dropout_drops_relation_embeddings_in_training_only(tiny, baseline, tmp_path) -> None:
    task = LinkPredictionTask(make_spec(model={"relation_dropout": 0.5}), tiny, torch.device("cpu"))
    task.setup()
    decoder = task.model.decoder
    with torch.no_grad():
        decoder.relations.fill_(1.0)
    task.model.train()
    dropped = decoder.relation_table()
    assert set(dropped.unique().tolist()) == {0.0, 2.0} and 0.3 < (dropped == 0).float().mean() < 0.7
    relations = torch.arange(decoder.relation_rows())
    assert not torch.equal(decoder.relation_rows_of(relations), decoder.relation_rows_of(relations))  # fresh masks
    task.model.eval()
    assert torch.equal(decoder.relation_rows_of(relations), decoder.relations[relations])
    # DistMult's fused softmax loss sees the dropped table too: it trains, and differently from the run without it
    outcome, _ = run(make_spec(model={"relation_dropout": 0.3}), tiny, tmp_path / "dropout")
    assert outcome.epochs[0].loss != baseline.epochs[0].loss and outcome.test_metrics["filtered_mrr"] > 0.025
    assert make_spec(model={"relation_dropout": 0.0}).run_id == make_spec().run_id
    assert make_spec(model={"relation_dropout": 0.3}).run_id != make_spec().run_id
    # the N3 penalty weighs the stored relation rows, dropout or not; a decoder without relations refuses the field
    rel = torch.arange(decoder.relation_rows())
    task.model.train()
    z = torch.ones(3, 32)
    src = dst = torch.zeros(len(rel), dtype=torch.int64)
    assert embedding_penalty(decoder, z, src, rel, dst, "n3").item() == pytest.approx(3 * 32)
    with pytest.raises(ConfigError, match="model.relation_dropout"):
        LinkPredictionTask(make_spec(model={"relation_dropout": 0.3, "decoder": "dot"}), tiny,
                           torch.device("cpu")).setup()


def test_deterministic(tiny, baseline, tmp_path) -> None:
    again, _ = run(make_spec(), tiny, tmp_path)
    assert [s.loss for s in again.epochs] == [s.loss for s in baseline.epochs]
    assert again.test_metrics == baseline.test_metrics


def test_pipelined_sync_equals_in_memory(tiny, baseline, tmp_path) -> None:
    spec = make_spec(system={"name": "pipelined", "options": {"sync": True}})
    outcome, _ = run(spec, tiny, tmp_path)
    assert [s.loss for s in outcome.epochs] == [s.loss for s in baseline.epochs]
    assert outcome.test_metrics == baseline.test_metrics


def test_pipelined_async_records_embedding_staleness(tiny, baseline, tmp_path) -> None:
    spec = make_spec(system={"name": "pipelined", "options": {"staleness_bound": 4, "batch_loader_threads": 2}})
    outcome, recorder = run(spec, tiny, tmp_path)
    batches = [r for r in read_records(recorder.run_dir) if r["kind"] == "batch"]
    assert len(batches) == 14 * 12
    # embedding rows miss the updates of every batch still in flight (computed or not): fewer than the bound
    assert all(0 <= r["staleness"] < 4 and 0 <= r["embedding_staleness"] < 4 for r in batches)
    assert any(r["embedding_staleness"] > 0 for r in batches)
    assert {"update_start", "update_end"} <= batches[0].keys()
    assert abs(outcome.test_metrics["filtered_mrr"] - baseline.test_metrics["filtered_mrr"]) < 0.02


def test_pipelined_parallel_compute_workers_train(tiny, baseline, tmp_path) -> None:
    # two compute threads, each stepping its own batches (Hogwild-style, dense steps under a lock): every batch is
    # stepped once, the version counter counts them all, staleness stays below the bound, and it learns as well
    spec = make_spec(system={"name": "pipelined", "options": {"compute_workers": 2, "in_order_compute": False,
                                                              "staleness_bound": 4}})
    outcome, recorder, system = run(spec, tiny, tmp_path, with_system=True)
    batches = [r for r in read_records(recorder.run_dir) if r["kind"] == "batch"]
    assert len(batches) == 14 * 12 and system.task.optimizer_steps == 14 * 12
    assert sorted(r["version_applied"] for r in batches) == list(range(14 * 12))
    assert {r["compute_worker"] for r in batches} == {"compute-0", "compute-1"}
    # out of admission order the bound is no guarantee (in_order_compute makes it one): a batch misses the updates
    # of at most 3 batches in flight when it was admitted, plus those of the later batches that overtook it
    for epoch in {r["epoch"] for r in batches}:
        steps = {r["index"]: r["version_applied"] for r in batches if r["epoch"] == epoch}
        for r in (r for r in batches if r["epoch"] == epoch):
            overtaken_by = sum(1 for index, applied in steps.items()
                               if index > r["index"] and applied < r["version_applied"])
            assert 0 <= r["embedding_staleness"] <= 4 - 1 + overtaken_by, (r["index"], overtaken_by)
    assert abs(outcome.test_metrics["filtered_mrr"] - baseline.test_metrics["filtered_mrr"]) < 0.02


def test_parallel_compute_needs_out_of_order_compute_and_a_concurrent_task(tiny, tmp_path) -> None:
    with pytest.raises(ConfigError, match="compute_workers: more than one compute worker needs in_order_compute"):
        run(make_spec(system={"name": "pipelined", "options": {"compute_workers": 2}}), tiny, tmp_path)
    spec = RunSpec.model_validate({"dataset": {"name": "store"}, "system": {"name": "pipelined", "options": {
        "compute_workers": 2, "in_order_compute": False}}, "model": {"encoder": "mlp", "num_layers": 1,
                                                                               "fanouts": [5]}})
    with pytest.raises(ConfigError, match=r"^system\.options\.compute_workers: task 'node_classification' computes "
                                          r"one batch at a time"):
        PipelinedSystem(spec, tiny, torch.device("cpu"), Recorder(tmp_path, spec))


def test_pipelined_process_loaders_see_updates(tiny, baseline, tmp_path) -> None:
    spec = make_spec(system={"name": "pipelined", "options": {"loader_workers": "process", "batch_loader_threads": 2,
                                                              "staleness_bound": 4}})
    outcome, recorder, system = run(spec, tiny, tmp_path, with_system=True)
    # The workers read the shared table and update counter (a private copy would stay at version 0): their rows
    # miss fewer updates than the bound plus the DataLoader's prefetch ahead of admission (host queue of 4).
    batches = [r for r in read_records(recorder.run_dir) if r["kind"] == "batch"]
    assert all(0 <= r["embedding_staleness"] < 4 + 4 for r in batches)
    assert batches[-1]["embedding_version"] >= len(batches) - 8
    assert system.task.evaluate("train")["filtered_mrr"] > 0.2


@pytest.mark.parametrize("learnable", [False, True])
def test_graphsage_over_dense(tiny, tmp_path, learnable: bool) -> None:
    spec = make_spec(model={"encoder": "graphsage", "num_layers": 1, "fanouts": [5], "hidden_dim": 16,
                            "learnable_embeddings": learnable},
                     sampler={"name": "dense", "direction": "both"},
                     training={"epochs": 6, "optimizer": "adam", "learning_rate": 0.01,
                               "embedding_learning_rate": 0.1},
                     evaluation={"every": 6})
    outcome, _, system = run(spec, tiny, tmp_path, with_system=True)
    assert outcome.epochs[0].sampled_edges > 0
    assert ("update" in outcome.epochs[0].stage_busy_s) == learnable
    assert outcome.epochs[-1].loss < outcome.epochs[0].loss
    assert system.task.evaluate("train")["filtered_mrr"] > 0.1


def test_complex_and_margin_loss_learn(tiny, tmp_path) -> None:
    spec = make_spec(model={"decoder": "complex", "inverse_relations": True},
                     training={"loss": "margin", "margin": 1.0})
    outcome, _, system = run(spec, tiny, tmp_path, with_system=True)
    assert system.model.decoder.relations.shape == (6, 32)
    assert system.task.evaluate("train")["filtered_mrr"] > 0.15


def test_sampled_negative_evaluation(tiny, tmp_path) -> None:
    spec = make_spec(evaluation={"negatives": 50}, training={"epochs": 3}, )
    outcome, _ = run(spec, tiny, tmp_path)
    metrics = outcome.test_metrics
    assert 0.0 < metrics["unfiltered_mrr"] <= metrics["filtered_mrr"] <= 1.0
    assert metrics["mrr"] == metrics["filtered_mrr"]


def test_limit_batches(tiny) -> None:
    task = LinkPredictionTask(make_spec(training={"limit_batches": 3}), tiny, torch.device("cpu"))
    task.setup()
    batches = task.plan_epoch(0)
    assert len(batches) == 3 and all(b.num_examples == 64 for b in batches)


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("train", "valid", "expected"),
    [
        ([(0, 0, 1), (1, 0, 7)], None, r"train_edges\.npy: row 1: destination node id 7 is out of range \[0, 4\)"),
        ([(0, 0, 1), (-1, 0, 2)], None, r"train_edges\.npy: row 1: source node id -1 is out of range"),
        ([(0, 0, 1), (1, 2, 2)], None, r"train_edges\.npy: row 1: relation id 2 is out of range \[0, 2\) "
                                       r"\(num_relations"),
        ([], None, r"train_edges\.npy: the train split is empty"),
        ([(0, 0, 1)], [], r"valid_edges\.npy: the valid split is empty"),
        ([(0, 0, 1)], [(0, 5, 1)], r"valid_edges\.npy: row 0: relation id 5"),
    ],
)
def test_bad_edges(tmp_path: Path, train, valid, expected: str) -> None:
    store = write_lp_store(tmp_path / "s", 4, train=train, valid=valid, num_relations=2)
    task = LinkPredictionTask(make_spec(), store, torch.device("cpu"))
    with pytest.raises(DataError, match=expected) as info:
        task.setup()
    assert str(tmp_path / "s") in str(info.value) and "\n" not in str(info.value)


def test_missing_train_edges_and_features(tmp_path: Path, tiny: GraphStore) -> None:
    with create_store(tmp_path / "none") as writer:
        num_edges = write_csrs(writer, [EdgeChunk(np.array([0]), np.array([1]))], 2)
        writer.finalize(name="x", num_nodes=2, num_edges=num_edges, directed=True)
    with pytest.raises(DataError, match=r"store has no 'train_edges'; link prediction needs it"):
        LinkPredictionTask(make_spec(), GraphStore.open(tmp_path / "none"), torch.device("cpu")).setup()
    store = write_lp_store(tmp_path / "nofeat", 4, train=[(0, 0, 1)])
    spec = make_spec(model={"encoder": "graphsage", "num_layers": 1, "fanouts": [5], "learnable_embeddings": False})
    with pytest.raises(DataError, match=r"store has no 'features'; set model\.learnable_embeddings: true"):
        LinkPredictionTask(spec, store, torch.device("cpu")).setup()


def test_config_errors(tiny: GraphStore) -> None:
    cases = [
        (make_spec(model={"decoder": None}), r"model\.decoder: link prediction needs a decoder"),
        (make_spec(model={"num_layers": 1, "fanouts": [5]}), r"model\.num_layers: the shallow encoder has no layers"),
        (make_spec(model={"learnable_embeddings": False}), r"model\.embedding_dim: the shallow encoder passes its "
                                                           r"input rows through: input width 16 != output width 32"),
        (make_spec(model={"learnable_embeddings": False, "embedding_dim": 16}),
         r"model\.learnable_embeddings: encoder 'shallow' reads only the nodes' own rows"),
        (make_spec(model={"decoder": "complex", "embedding_dim": 7}), r"model\.embedding_dim: ComplEx needs an even"),
    ]
    for spec, expected in cases:
        with pytest.raises(ConfigError, match=expected):
            LinkPredictionTask(spec, tiny, torch.device("cpu")).setup()
    data = make_spec().model_dump(mode="json")
    data["model"]["decoder"] = "rotate"
    with pytest.raises(ConfigError, match=r"spec\.yaml: model\.decoder: unknown decoder 'rotate' \(known: complex"):
        spec_from_dict(data, source="spec.yaml")
    data["model"]["decoder"] = "distmult"
    data["training"]["negatives"]["degree_fraction"] = 1.5
    with pytest.raises(ConfigError, match=r"spec\.yaml: training\.negatives\.degree_fraction: .*less than or equal"):
        spec_from_dict(data, source="spec.yaml")


def test_bfloat16_scores_train_and_apply_to_sampled_softmax_with_dot_products_only(tiny, baseline, tmp_path):
    outcome, _ = run(make_spec(training={"score_precision": "bfloat16"}), tiny, tmp_path / "bf16")
    assert outcome.epochs[0].loss != baseline.epochs[0].loss and outcome.test_metrics["filtered_mrr"] > 0.025
    assert make_spec(training={"score_precision": "float32"}).run_id == make_spec().run_id
    assert make_spec(training={"score_precision": "bfloat16"}).run_id != make_spec().run_id
    for sections in ({"model": {"decoder": "transe"}}, {"training": {"loss": "margin"}},
                     {"training": {"negatives": {"mode": "all"}}}):
        spec = make_spec(**sections)
        spec = spec.model_copy(update={"training": spec.training.model_copy(update={"score_precision": "bfloat16"})})
        with pytest.raises(ConfigError, match="training.score_precision: bfloat16 applies to the softmax loss"):
            LinkPredictionTask.check_inputs(spec, tiny)
