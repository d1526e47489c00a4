"""The in-memory baseline with the DENSE sampler and with the GCN and GAT encoders: it learns, deterministically."""

from __future__ import annotations

import pytest
import torch

from suite.recorder import Recorder
from systems.in_memory import InMemorySystem
from tests.support.in_memory import make_spec, run



@pytest.mark.parametrize("encoder", ["graphsage", "gcn", "gat"])
@pytest.mark.parametrize("sampler", ["naive", "dense"])
def test_encoder_and_sampler_learn(easy_store, tmp_path, encoder, sampler):
    spec = make_spec(model={"encoder": encoder}, sampler={"name": sampler})
    outcome, _ = run(spec, easy_store, tmp_path)
    assert outcome.epochs[-1].loss < 0.5 * outcome.epochs[0].loss
    assert outcome.test_metrics["accuracy"] >= 0.8  # chance is 1/3; the MLP reaches about 0.6
    assert all(e.sampled_edges > 0 for e in outcome.epochs)


@pytest.mark.parametrize("sampler", [{"name": "dense"}, {"name": "dense", "replace": True},
                                     {"name": "dense", "direction": "both"}])
def test_dense_is_deterministic(easy_store, tmp_path, sampler):
    spec = make_spec(sampler=sampler, training={"epochs": 2})
    first, _ = run(spec, easy_store, tmp_path / "a")
    second, _ = run(spec, easy_store, tmp_path / "b")
    assert [e.loss for e in first.epochs] == [e.loss for e in second.epochs]
    assert [e.sampled_edges for e in first.epochs] == [e.sampled_edges for e in second.epochs]
    assert first.test_metrics == second.test_metrics


def test_dense_samples_fewer_edges_than_naive(easy_store, tmp_path):
    # Same fanouts: DENSE samples each node's neighbourhood once per batch, the naive sampler once per hop.
    naive, _ = run(make_spec(training={"epochs": 1}), easy_store, tmp_path / "naive")
    dense, _ = run(make_spec(sampler={"name": "dense"}, training={"epochs": 1}), easy_store, tmp_path / "dense")
    assert dense.epochs[0].sampled_edges < naive.epochs[0].sampled_edges


@pytest.mark.parametrize("encoder", ["graphsage", "gcn", "gat"])
def test_all_neighbour_evaluation_does_not_depend_on_the_sampler(easy_store, tmp_path, encoder):
    # One trained model, evaluated with all neighbours through the naive and through the DENSE sampler.
    spec = make_spec(model={"encoder": encoder}, evaluation={"fanouts": (-1, -1)})
    recorder = Recorder(tmp_path, spec)
    system = InMemorySystem(spec, easy_store, torch.device("cpu"), recorder)
    try:
        system.setup()
        system.train_epoch(0)
        task = system.task
        task.model.eval()
        nodes = easy_store.split("test").to(torch.int64)
        logits, metrics = {}, {}
        for name in ("naive", "dense"):
            task.set_eval_sampler(name, (-1, -1))
            metrics[name] = system.evaluate("test")
            logits[name] = task.node_outputs(nodes, torch.Generator())
        torch.testing.assert_close(logits["dense"], logits["naive"], atol=1e-5, rtol=1e-5)
        assert metrics["dense"] == metrics["naive"]
    finally:
        system.teardown()
        recorder.close()
