"""TransE (L1/L2), 1vsAll training (``training.negatives: all``), N3, and the self-rank fraction, by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from suite.config import RunSpec, spec_from_dict
from suite.errors import ConfigError
from suite.graph import GraphStore
from suite.recorder import Recorder
from suite.registry import DECODERS, SYSTEMS
import systems.disk.disk_system  # noqa: F401  (registers the systems)
import systems.in_memory  # noqa: F401
import systems.pipelined  # noqa: F401
from systems.models.decoders import DistMult, TransE, TransEL2, build_decoder
from systems.tasks.link_prediction import (all_entities_loss, embedding_penalty, link_prediction_loss,
                                           rank_triples)
from tests.support.systems import run_system


def test_transe_scores_by_hand() -> None:
    decoder = build_decoder("transe", 2, 2)
    assert isinstance(decoder, TransE) and DECODERS.get("transe_l2") is TransEL2
    with torch.no_grad():
        decoder.relations.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
    h, t = torch.tensor([[0.0, 0.0]]), torch.tensor([[1.0, 3.0]])
    # h + r0 - t = (0, -3): L1 3, L2 3; h + r1 - t = (-1, -1): L1 2, L2 sqrt 2
    assert decoder(h, torch.tensor([0]), t).item() == -3.0
    assert decoder(h, torch.tensor([1]), t).item() == -2.0
    l2 = build_decoder("transe_l2", 2, 2)
    l2.load_state_dict(decoder.state_dict())
    assert math.isclose(l2(h, torch.tensor([1]), t).item(), -math.sqrt(2), rel_tol=1e-6)
    # head queries: t - r scored against h
    assert decoder.pair_scores(decoder.head_query(t, torch.tensor([1])), h).item() == -2.0


@pytest.mark.parametrize("name", ["transe", "transe_l2", "distmult"])
def test_score_shapes_agree(name: str) -> None:
    torch.manual_seed(0)
    decoder = build_decoder(name, 3, 4)
    queries, candidates = torch.randn(5, 4), torch.randn(7, 4)
    full = decoder.all_scores(queries, candidates)
    pairs = decoder.pair_scores(queries[:, None, :], candidates[None, :, :])
    assert torch.allclose(full, pairs, atol=1e-5)
    picked = torch.randint(0, 7, (5, 3))
    assert torch.allclose(decoder.batched_scores(queries, candidates[picked]), full.gather(1, picked), atol=1e-5)
    chunked = decoder.chunk_scores(queries, candidates[None, :3].expand(2, 3, 4).contiguous(), 3)
    assert torch.allclose(chunked, full[:, :3], atol=1e-5)


def test_transe_softmax_loss_equals_cross_entropy() -> None:
    torch.manual_seed(0)
    decoder = build_decoder("transe", 2, 4)
    z = torch.randn(6, 4, requires_grad=True)
    src, rel, dst = torch.tensor([0, 1, 2]), torch.tensor([0, 1, 0]), torch.tensor([3, 4, 5])
    tail_neg, head_neg = torch.tensor([[1, 2], [0, 5]]), torch.tensor([[4, 3], [2, 2]])
    loss = link_prediction_loss(decoder, z, src, rel, dst, tail_neg, head_neg, 2)
    expected = 0
    for b in range(3):
        chunk = b // 2
        q_t = decoder.tail_query(z[src[b]], rel[b:b + 1])[0]
        scores = [decoder.pair_scores(q_t, z[dst[b]])] + [decoder.pair_scores(q_t, z[n]) for n in tail_neg[chunk]]
        expected = expected + F.cross_entropy(torch.stack(scores)[None], torch.tensor([0])) / 6
        q_h = decoder.head_query(z[dst[b]], rel[b:b + 1])[0]
        scores = [decoder.pair_scores(q_h, z[src[b]])] + [decoder.pair_scores(q_h, z[n]) for n in head_neg[chunk]]
        expected = expected + F.cross_entropy(torch.stack(scores)[None], torch.tensor([0])) / 6
    assert torch.allclose(loss, expected, atol=1e-5)
    loss.backward()
    assert torch.isfinite(z.grad).all()


def test_all_entities_loss_is_cross_entropy_over_every_entity() -> None:
    torch.manual_seed(0)
    decoder = DistMult(2, 3)
    z = torch.randn(5, 3)
    src, rel, dst = torch.tensor([0, 4]), torch.tensor([1, 0]), torch.tensor([2, 2])
    tails = F.cross_entropy(decoder.tail_query(z[src], rel) @ z.T, dst)
    heads = F.cross_entropy(decoder.head_query(z[dst], rel) @ z.T, src)
    assert torch.allclose(all_entities_loss(decoder, z, src, rel, dst), (tails + heads) / 2)
    assert torch.allclose(link_prediction_loss(decoder, z, src, rel, dst, None, None, 0), (tails + heads) / 2)


def test_n3_penalty_by_hand() -> None:
    decoder = DistMult(1, 2)
    z = torch.tensor([[1.0, -2.0], [0.5, 0.0]])
    # |h|^3 + |r|^3 + |t|^3 = (1 + 8) + (1 + 1) + 0.125 = 11.125
    value = embedding_penalty(decoder, z, torch.tensor([0]), torch.tensor([0]), torch.tensor([1]), "n3")
    assert math.isclose(value.item(), 11.125)
    assert math.isclose(embedding_penalty(decoder, z, torch.tensor([0]), torch.tensor([0]), torch.tensor([1]),
                                          "l2").item(), 5.25)


def test_self_rank_fraction_by_hand() -> None:
    # DistMult with unit relations scores <z_h, z_t>; node 0 is long, so it is the top candidate of its own query
    decoder = DistMult(1, 2)
    z = torch.tensor([[3.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    edges = torch.tensor([[0, 0, 1], [2, 0, 1]])
    metrics = rank_triples(decoder, z, edges, _filter(edges, 3), batch_size=8)
    # tail queries: (0, ?) top = 0 (itself); (2, ?) top = 2 (itself); head queries of t = 1: top = 0 (not 1)
    assert metrics["self_rank_fraction"] == 0.5


def _filter(edges: torch.Tensor, num_nodes: int):
    from suite.metrics import TripleFilter

    return TripleFilter(edges, num_nodes, 1)


def test_negatives_all_shorthand_and_run_ids() -> None:
    base = {"dataset": {"name": "store"}, "training": {"task": "link_prediction"}}
    spec = spec_from_dict({**base, "training": {"task": "link_prediction", "negatives": "1vsAll"}})
    assert spec.training.negatives.mode == "all"
    with pytest.raises(ConfigError, match="training.negatives: expected 'all', '1vsAll', 'KvsAll' or a mapping"):
        spec_from_dict({**base, "training": {"task": "link_prediction", "negatives": "some"}})
    # fields added by this issue, left at their defaults, do not change run ids
    plain = spec_from_dict(base)
    explicit = spec_from_dict({**base, "model": {"heads": 4}, "training": {"task": "link_prediction",
                                                                           "regularizer": "l2"}})
    assert plain.run_id == explicit.run_id
    assert spec_from_dict({**base, "model": {"heads": 2}}).run_id != plain.run_id
    assert "heads" in plain.resolved()["model"]


def _lp_spec(system: str, **training) -> RunSpec:
    return RunSpec.model_validate({
        "dataset": {"name": "store"},
        "model": {"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": training.pop("decoder", "distmult"),
                  "embedding_dim": 16, "learnable_embeddings": True, "dropout": 0.0, "embedding_init_scale": 0.1},
        "system": {"name": system},
        "training": {"task": "link_prediction", "batch_size": 64, "epochs": 4, "optimizer": "adagrad",
                     "learning_rate": 0.1, **training},
        "evaluation": {"every": 4, "batch_size": 128},
    })


@pytest.mark.parametrize("system", ["in_memory", "pipelined"])
@pytest.mark.parametrize("decoder", ["distmult", "transe"])
def test_all_entity_training_learns(tiny: GraphStore, tmp_path: Path, system: str, decoder: str) -> None:
    outcome = run_system(_lp_spec(system, negatives="all", regularizer="n3", regularization=0.001, decoder=decoder),
                   tiny, tmp_path)
    losses = [epoch.loss for epoch in outcome.epochs]
    assert losses[-1] < losses[0], losses
    # random ranking among 300 entities: MRR about 0.02
    assert outcome.test_metrics["filtered_mrr"] > 0.03, outcome.test_metrics
    assert 0.0 <= outcome.test_metrics["self_rank_fraction"] <= 1.0


def test_transe_with_sampled_negatives_learns(tiny: GraphStore, tmp_path: Path) -> None:
    outcome = run_system(_lp_spec("in_memory", decoder="transe_l2", loss="margin",
                            negatives={"num_chunks": 2, "negatives_per_positive": 20}), tiny, tmp_path)
    losses = [epoch.loss for epoch in outcome.epochs]
    assert losses[-1] < losses[0] and outcome.test_metrics["filtered_mrr"] > 0.03


def test_disk_system_refuses_all_entities(tiny: GraphStore, tmp_path: Path) -> None:
    spec = _lp_spec("disk", negatives="all")
    spec = RunSpec.model_validate({**spec.resolved(), "system": {"name": "disk", "options": {
        "num_partitions": 2, "buffer_capacity": 2}}})
    with pytest.raises(ConfigError, match="training.negatives.mode: 'all'"):
        SYSTEMS.get("disk")(spec, tiny, torch.device("cpu"), Recorder(tmp_path / "r", spec))
