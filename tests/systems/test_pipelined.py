"""The pipelined system: equivalence with the baseline in sync mode, records, async learning, faults, options."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from suite.config import RunSpec, spec_from_dict
from suite.errors import ConfigError
from suite.data import GraphStore
from suite.recorder import Recorder, read_records
from suite.registry import SYSTEMS
from suite.run_contract import RunOutcome
from systems.batch import Batch
from systems.pipelined import PipelinedSystem
from systems.tasks.node_classification import NodeClassificationTask
from tests.support.graphs import planted_partition, write_node_store


def make_spec(system: str = "pipelined", options: dict[str, Any] | None = None, **fields: Any) -> RunSpec:
    data: dict[str, Any] = {
        "dataset": {"name": "store"},
        "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 32, "fanouts": (10, 5), "dropout": 0.2},
        "sampler": {"name": fields.pop("sampler", "naive")},
        "system": {"name": system, "options": options or {}},
        "training": {"batch_size": fields.pop("batch_size", 32), "epochs": fields.pop("epochs", 3),
                     "learning_rate": 0.01},
        "evaluation": {"every": 3, "batch_size": 256},
        "seed": fields.pop("seed", 0),
    }
    return RunSpec.model_validate(data)


def run(spec: RunSpec, store: GraphStore, out: Path, system_class=None) -> tuple[RunOutcome, Recorder]:
    recorder = Recorder(out, spec)
    system_class = system_class or SYSTEMS.get(spec.system.name)
    try:
        outcome = system_class(spec, store, torch.device("cpu"), recorder).run()
    finally:
        recorder.close()
    return outcome, recorder


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> GraphStore:
    graph = planted_partition(num_nodes=500, num_classes=3, signal=0.4, seed=1)
    return write_node_store(tmp_path_factory.mktemp("pp") / "store", graph.src, graph.dst, graph.features,
                            graph.labels, graph.splits, name="planted")


@pytest.fixture(scope="module")
def baseline(store, tmp_path_factory) -> RunOutcome:
    return run(make_spec("in_memory"), store, tmp_path_factory.mktemp("base"))[0]


def losses(outcome: RunOutcome) -> list[float]:
    return [stats.loss for stats in outcome.epochs]


def test_registered():
    assert SYSTEMS.get("pipelined") is PipelinedSystem


@pytest.mark.parametrize("options", [
    {"sync": True},
    {"staleness_bound": 1, "batch_loader_threads": 1, "batch_transfer_threads": 1},
    {"sync": True, "loader_workers": "process"},
], ids=["sync", "bound-1", "sync-processes"])
def test_sync_equals_the_in_memory_baseline(store, baseline, tmp_path, options):
    outcome, _ = run(make_spec(options=options), store, tmp_path)
    assert losses(outcome) == losses(baseline)
    assert outcome.valid_metrics == baseline.valid_metrics
    assert outcome.test_metrics == baseline.test_metrics
    assert [s.sampled_edges for s in outcome.epochs] == [s.sampled_edges for s in baseline.epochs]
    assert all(value == 0 for stats in outcome.epochs for value in stats.staleness)


def test_async_records_batches_queues_and_pipeline_measures(store, baseline, tmp_path):
    options = {"batch_loader_threads": 3, "batch_host_queue_size": 2, "batch_device_queue_size": 2,
               "staleness_bound": 4, "in_order_compute": False}
    outcome, recorder = run(make_spec(options=options), store, tmp_path)
    records = read_records(recorder.run_dir)
    batches = [r for r in records if r["kind"] == "batch"]
    per_epoch = len(baseline.epochs[0].staleness)
    assert len(batches) == 3 * per_epoch
    for record in batches:
        assert 0 <= record["admitted"] <= record["load_start"] <= record["load_end"] <= record["transfer_start"]
        assert record["transfer_end"] <= record["compute_start"] <= record["compute_end"]
        assert record["staleness"] >= 0
        assert record["staleness"] == record["version_applied"] - record["version_read"]
    queues = [r for r in records if r["kind"] == "queues"]
    assert [q["epoch"] for q in queues] == [0, 1, 2]
    assert max(size for _, size in queues[0]["occupancy"]["compute"]) <= 2
    epoch = [r for r in records if r["kind"] == "epoch"][0]
    assert epoch["bottleneck_stage"] in {"load", "transfer", "compute"}
    assert epoch["pipeline_efficiency"] >= 1.0 - 1e-6
    assert 0 < epoch["compute_utilization"] <= 1.0
    assert set(epoch["stage_busy_s"]) == {"load", "transfer", "compute"}
    # Async changes only the order in which gradients are applied: it still learns as well.
    assert abs(outcome.test_metrics["accuracy"] - baseline.test_metrics["accuracy"]) < 0.05
    assert outcome.epochs[-1].examples == baseline.epochs[-1].examples


def test_in_order_async_node_classification_computes_what_sync_does(store, baseline, tmp_path):
    """Features are fixed: with compute in admission order, overlap changes timing, not the arithmetic."""
    outcome, _ = run(make_spec(options={"batch_loader_threads": 3, "staleness_bound": 6}), store, tmp_path)
    assert losses(outcome) == losses(baseline)
    assert outcome.test_metrics == baseline.test_metrics
    assert max(outcome.epochs[-1].staleness) <= 5


def test_dense_sampler_and_process_loaders_run_async(store, tmp_path):
    outcome, _ = run(make_spec(options={"loader_workers": "process", "batch_loader_threads": 2},
                               sampler="dense", epochs=2), store, tmp_path)
    assert outcome.test_metrics["accuracy"] > 0.6
    assert max(outcome.epochs[-1].staleness) <= 15


def test_many_workers_tiny_queues_and_few_batches_finish(store, tmp_path):
    options = {"batch_loader_threads": 8, "batch_transfer_threads": 8, "batch_host_queue_size": 1,
               "batch_device_queue_size": 1, "staleness_bound": 1}
    started = time.perf_counter()
    outcome, _ = run(make_spec(options=options, batch_size=100, epochs=2), store, tmp_path)
    assert len(outcome.epochs) == 2 and time.perf_counter() - started < 30


class _FailingSampleTask(NodeClassificationTask):
    """Node classification whose sampling fails on the fourth batch of the second epoch."""

    def sample(self, batch: Batch) -> None:
        if batch.epoch == 1 and batch.index == 3:
            raise RuntimeError("sampler exploded")
        super().sample(batch)


class _FailingLoad(PipelinedSystem):
    def __init__(self, spec, store, device, recorder):
        super().__init__(spec, store, device, recorder)
        self.task = _FailingSampleTask(spec, store, device)


def test_a_loader_exception_stops_the_run_with_the_original_error(store, tmp_path):
    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="sampler exploded") as info:
        run(make_spec(options={"batch_loader_threads": 4}), store, tmp_path, system_class=_FailingLoad)
    assert time.perf_counter() - started < 30
    assert info.traceback[-1].name == "sample"
    assert not [t for t in threading.enumerate() if t.name.startswith("pipeline-")]


def test_a_loader_process_exception_stops_the_run_and_its_processes(store, tmp_path):
    import multiprocessing

    started = time.perf_counter()
    with pytest.raises(RuntimeError, match="sampler exploded"):
        run(make_spec(options={"loader_workers": "process", "batch_loader_threads": 2}), store, tmp_path,
            system_class=_FailingLoad)
    assert time.perf_counter() - started < 30
    deadline = time.perf_counter() + 5
    while multiprocessing.active_children() and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert not multiprocessing.active_children()
    assert not [t for t in threading.enumerate() if t.name.startswith("pipeline-")]


def test_options_are_validated_on_load_naming_file_and_field():
    data = make_spec(options={"staleness_bound": 0}).model_dump()
    with pytest.raises(ConfigError, match=r"^grid.yaml: system.options.staleness_bound: .*greater than or equal"):
        spec_from_dict(data, source="grid.yaml")
    data["system"]["options"] = {"batch_loader_thread": 2}
    with pytest.raises(ConfigError, match=r"^x.yaml: system.options.batch_loader_thread: unknown field"):
        spec_from_dict(data, source="x.yaml")
