"""The PyG baseline system: PyG's NeighborLoader + GraphSAGE loop, recorded like every system; Cora accuracy.

Runs only where PyG can sample (the peer wheels installed: ``make peers``); elsewhere skipped with the reason,
except the checks of the errors.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import pytest
import torch

from suite.config import RunSpec, validate_system_options
from suite.errors import ConfigError
from suite.data import GraphStore
from suite.recorder import Recorder, read_records
from suite.registry import SYSTEMS
from suite.run_contract import RunOutcome
from systems import pyg_baseline
from suite.run_contract import RunOutcome
from systems.pyg_baseline import PygSystem
from systems.sampling.pyg import missing_reason
from tests.support.in_memory import make_spec as in_memory_spec
from tests.support.systems import run_class

MISSING = missing_reason()
needs_pyg = pytest.mark.skipif(MISSING is not None, reason=f"pyg system: {MISSING}")


def make_spec(**sections: Any) -> RunSpec:
    """The in-memory tests' spec (:func:`tests.support.in_memory.make_spec`) on the ``pyg`` system."""
    return in_memory_spec(**{**sections, "system": {"name": "pyg", **sections.get("system", {})}})


def run(spec: RunSpec, store: GraphStore, out: Path) -> tuple[RunOutcome, Recorder]:
    return run_class(PygSystem, spec, store, out)



def test_registered():
    assert SYSTEMS.get("pyg") is PygSystem


@pytest.mark.parametrize(("sections", "message"), [
    ({"training": {"task": "link_prediction"}, "model": {"decoder": "distmult"}},
     r"^training\.task: the pyg system trains node classification"),
    ({"model": {"encoder": "gat"}}, r"^model\.encoder: the pyg system runs PyG's GraphSAGE"),
])
def test_unsupported_specs_are_config_errors(easy_store, tmp_path, sections, message):
    with pytest.raises(ConfigError, match=message):
        PygSystem(make_spec(**sections), easy_store, torch.device("cpu"), Recorder(tmp_path, make_spec()))


def test_options_validated_by_name():
    with pytest.raises(ConfigError, match=r"^<spec>: system\.options\.loader_threads: unknown field"):
        validate_system_options(make_spec(system={"options": {"loader_threads": 2}}), "<spec>")


def test_missing_backend_is_a_config_error(easy_store, tmp_path, monkeypatch):
    monkeypatch.setattr(pyg_baseline, "missing_reason", lambda: "pyg-lib/torch-sparse not installed")
    with pytest.raises(ConfigError, match=r"^system\.name: 'pyg' needs PyG's sampling backend"):
        PygSystem(make_spec(), easy_store, torch.device("cpu"), Recorder(tmp_path, make_spec()))


@needs_pyg
def test_records_epochs_stages_and_learns(easy_store, tmp_path):
    outcome, recorder = run(make_spec(), easy_store, tmp_path)
    records = read_records(recorder.run_dir)
    epochs = [r for r in records if r["kind"] == "epoch"]
    assert [r["epoch"] for r in epochs] == list(range(8))
    assert [(r["epoch"], r["split"]) for r in records if r["kind"] == "eval"] == [(3, "valid"), (7, "valid"),
                                                                                  (7, "test")]
    train_size = len(easy_store.split("train"))
    for stats, record in zip(outcome.epochs, epochs):
        assert stats.examples == record["examples"] == train_size
        assert stats.sampled_edges == record["sampled_edges"] > 0
        assert set(stats.stage_busy_s) == {"load", "transfer", "compute"}
        assert record["loader"].startswith("NeighborLoader (")
    losses = [e.loss for e in outcome.epochs]
    assert losses[0] == pytest.approx(math.log(3), rel=0.2) and losses[-1] < 0.5 * losses[0]
    assert outcome.test_metrics["accuracy"] >= 0.8  # chance is 1/3 (the in-memory system's bar on this graph)


@needs_pyg
def test_deterministic_with_same_seed_and_evaluation_does_not_disturb_training(easy_store, tmp_path):
    first, _ = run(make_spec(training={"epochs": 3}), easy_store, tmp_path / "a")
    second, _ = run(make_spec(training={"epochs": 3}), easy_store, tmp_path / "b")
    assert [e.loss for e in first.epochs] == [e.loss for e in second.epochs]
    assert first.test_metrics == second.test_metrics
    no_eval, _ = run(make_spec(training={"epochs": 3}, evaluation={"splits": []}), easy_store, tmp_path / "c")
    assert [e.loss for e in no_eval.epochs] == [e.loss for e in first.epochs]
    other, _ = run(make_spec(training={"epochs": 3}, seed=1), easy_store, tmp_path / "d")
    assert [e.loss for e in other.epochs] != [e.loss for e in first.epochs]


@needs_pyg
def test_limit_batches_and_directions(easy_store, tmp_path):
    limited, _ = run(make_spec(training={"epochs": 1, "limit_batches": 2}, evaluation={"splits": []}), easy_store,
                     tmp_path / "a")
    assert limited.epochs[0].examples == 128
    for direction in ("out", "both"):
        outcome, _ = run(make_spec(training={"epochs": 1}, sampler={"direction": direction, "replace": True},
                                   evaluation={"splits": []}), easy_store, tmp_path / direction)
        assert outcome.epochs[0].sampled_edges > 0


@needs_pyg
def test_summary_has_the_fields_of_the_in_memory_system(easy_store, tmp_path, monkeypatch):
    from suite import runner

    monkeypatch.setattr("suite.datasets.open_dataset", lambda spec, progress=False: easy_store)
    spec = make_spec(training={"epochs": 1}, evaluation={"every": 1})
    pyg = runner.run_spec(spec, tmp_path)
    base = runner.run_spec(spec.model_copy(update={"system": spec.system.model_copy(update={"name": "in_memory"})}),
                           tmp_path)
    assert pyg["status"] == base["status"] == "completed"
    assert set(pyg) == set(base) and pyg["system"] == "pyg"
    assert set(pyg["metrics"]["test"]) == set(base["metrics"]["test"]) == {"accuracy"}


# ------------------------------------------------------------------ Cora
CORA_SETTINGS = {  # the in-memory system's Cora settings (tests/systems/test_in_memory.py)
    "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 128, "fanouts": (25, 10), "dropout": 0.8},
    "system": {"name": "pyg"},
    "training": {"batch_size": 64, "epochs": 30, "learning_rate": 0.005, "weight_decay": 5e-4},
    "evaluation": {"every": 30, "batch_size": 1000, "fanouts": (-1, -1)},
}


@needs_pyg
def test_pyg_graphsage_on_cora_reaches_published_accuracy(shared_datasets, tmp_path):
    from suite.data.loaders import prepare

    store = prepare("cora", shared_datasets / "planetoid", tmp_path / "cora")
    accuracies = []
    for seed in range(3):
        spec = RunSpec.model_validate({"dataset": {"name": "cora"}, "seed": seed, **CORA_SETTINGS})
        outcome, _ = run(spec, store, tmp_path / "runs")
        accuracies.append(outcome.test_metrics["accuracy"])
    assert statistics.mean(accuracies) >= 0.78, accuracies
