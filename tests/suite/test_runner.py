"""The runner end to end on the tiny synthetic preset: summary contents, skipping, failures, determinism."""

from __future__ import annotations

import json

import pytest

from suite.config import apply_overrides, spec_from_dict
from suite.errors import ConfigError, DataError, DivergedError
from suite.recorder import is_complete, read_records
from suite.runner import run_spec

SUMMARY_FIELDS = (
    "run_id status system dataset task model sampler seed epochs epoch_time_s train_examples_per_s "
    "sampled_edges_per_s stage_busy_s compute_utilization gpu_utilization staleness io_read_bytes io_write_bytes "
    "partition_swaps peak_rss_bytes metrics time_to_target cost_usd machine versions started_at finished_at"
).split()


def _spec(tmp_path, *overrides: str):
    base = {"dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(tmp_path / "data")},
            "model": {"num_layers": 2, "fanouts": [5, 5], "hidden_dim": 16},
            "training": {"epochs": 2, "batch_size": 32}, "machine": {"profile": "p3.2xlarge"}}
    return spec_from_dict(apply_overrides(base, list(overrides)))


def test_summary_has_every_field_and_records_every_epoch(tmp_path):
    spec = _spec(tmp_path)
    summary = run_spec(spec, tmp_path / "runs")
    run_dir = tmp_path / "runs" / spec.run_id
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    for field in SUMMARY_FIELDS:
        assert field in on_disk, field
    assert on_disk["status"] == "completed" and on_disk["epochs"] == 2 and len(on_disk["epoch_time_s"]) == 2
    assert set(on_disk["stage_busy_s"]) == {"sample", "gather", "transfer", "compute"}
    assert 0 < on_disk["compute_utilization"] <= 1
    assert on_disk["gpu_utilization"] is None  # no CUDA here
    assert 0 <= on_disk["metrics"]["test"]["accuracy"] <= 1
    assert on_disk["time_to_target"] is None  # no evaluation.target_metric
    cost = on_disk["cost_usd"]
    assert cost["hourly_usd"] == 3.06 and cost["run"] == pytest.approx(on_disk["wall_time_s"] / 3600 * 3.06)
    assert on_disk["versions"]["torch"] and "git_sha" in on_disk["versions"]
    kinds = [record["kind"] for record in read_records(run_dir)]
    assert kinds == ["epoch", "eval", "epoch", "eval", "eval"]
    assert (run_dir / "config.yaml").read_text().startswith("name: null\ndataset:")


def test_same_seed_same_metrics_and_completed_runs_are_skipped(tmp_path):
    spec = _spec(tmp_path)
    first = run_spec(spec, tmp_path / "a")
    again = run_spec(spec, tmp_path / "b")
    assert first["metrics"] == again["metrics"] and first["loss"] == again["loss"]
    skipped = run_spec(spec, tmp_path / "a")
    assert skipped["skipped"] is True and skipped["finished_at"] == first["finished_at"]
    other_seed = run_spec(_spec(tmp_path, "seed=1"), tmp_path / "a")
    assert other_seed["loss"] != first["loss"]


def test_bad_dataset_leaves_no_run_folder(tmp_path):
    spec = _spec(tmp_path, "dataset.name=store", f"dataset.root={tmp_path / 'missing'}")
    with pytest.raises(DataError, match=r"dataset\.root: .*missing: not a graph store folder"):
        run_spec(spec, tmp_path / "runs")
    assert not (tmp_path / "runs").exists()
    with pytest.raises(ConfigError, match=r"dataset\.params\.nodes: unknown generator parameter"):
        run_spec(_spec(tmp_path, "dataset.params.nodes=5"), tmp_path / "runs")


def test_failure_during_training_is_recorded_as_failed(tmp_path, monkeypatch):
    from systems.tasks.node_classification import NodeClassificationTask

    def broken(self, batch):
        raise RuntimeError("the device fell over")

    monkeypatch.setattr(NodeClassificationTask, "compute", broken)
    spec = _spec(tmp_path)
    with pytest.raises(RuntimeError, match="the device fell over"):
        run_spec(spec, tmp_path / "runs")
    run_dir = tmp_path / "runs" / spec.run_id
    assert not is_complete(run_dir) and not (run_dir / ".lock").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"] == "RuntimeError: the device fell over"


def test_inputs_the_task_lacks_fail_before_the_run_folder_exists(tmp_path):
    with pytest.raises(ConfigError, match=r"model\.decoder: link prediction needs a decoder"):
        run_spec(_spec(tmp_path, "training.task=link_prediction"), tmp_path / "runs")
    with pytest.raises(DataError, match=r"store has no 'labels'; node classification needs it"):
        run_spec(_spec(tmp_path, "dataset.params.label_rate=0.0"), tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def _store_with(tmp_path, **arrays):
    """The tiny synthetic store copied, with some arrays replaced (metadata checksums and counts kept consistent:
    a store a buggy writer produced, not a corrupted one)."""
    import numpy as np

    from suite.datasets import open_dataset
    from suite.data import GraphStore, create_store

    source = open_dataset(_spec(tmp_path).dataset)
    with create_store(tmp_path / "store") as writer:
        for key in source.metadata["files"]:
            writer.write_array(key, arrays.get(key, np.asarray(source.array(key))))
        meta = source.metadata
        writer.finalize(name="bad", num_nodes=meta["num_nodes"], num_edges=meta["num_edges"],
                        directed=meta["directed"], num_relations=meta["num_relations"], num_classes=meta["num_classes"],
                        feature_dim=meta["feature_dim"])
    return GraphStore.open(tmp_path / "store")


@pytest.mark.parametrize("case", ["nan-feature", "id-out-of-range", "label-out-of-range"])
@pytest.mark.parametrize("sampler", ["naive", "dense", "naive-torch"])
def test_bad_values_are_refused_before_the_run_folder_exists(tmp_path, monkeypatch, case, sampler):
    import numpy as np

    from suite.datasets import open_dataset

    source = open_dataset(_spec(tmp_path).dataset)
    if case == "nan-feature":
        features = np.array(source.array("features"))
        features[17, 3] = np.nan
        store, message = _store_with(tmp_path, features=features), r"features\.npy: 1 non-finite values"
    elif case == "id-out-of-range":
        indices = np.array(source.array("in_indices"))
        indices[5] = 2_000_000_000
        store, message = _store_with(tmp_path, in_indices=indices), r"in_indices\.npy: row 5: node id 2000000000"
    else:
        labels = np.array(source.array("labels"))
        labels[int(source.array("train_nodes")[0])] = 99
        store, message = _store_with(tmp_path, labels=labels), r"labels\.npy: row \d+: label 99 is out of range"
    if sampler == "naive-torch":
        monkeypatch.setenv("GNNSUITE_SAMPLER_BACKEND", "torch")
    spec = _spec(tmp_path, "dataset.name=store", f"dataset.root={store.path}", "dataset.preset=null",
                 f"sampler.name={sampler.split('-')[0]}")
    with pytest.raises(DataError, match=message):
        run_spec(spec, tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_a_loss_that_becomes_non_finite_stops_the_run_as_diverged(tmp_path):
    spec = _spec(tmp_path, "training.optimizer=sgd", "training.learning_rate=1.0e+38", "training.batch_size=16",
                 "training.epochs=3")
    with pytest.raises(DivergedError, match=r"training diverged: the loss became (nan|inf|-inf) at epoch 0, batch"):
        run_spec(spec, tmp_path / "runs")
    run_dir = tmp_path / "runs" / spec.run_id
    text = (run_dir / "summary.json").read_text()
    summary = json.loads(text, parse_constant=lambda name: pytest.fail(f"bare {name} in summary.json"))
    assert summary["status"] == "diverged" and summary["diverged"]["epoch"] == 0
    assert summary["diverged"]["loss"] in ("nan", "inf", "-inf") and not is_complete(run_dir)
    assert not (run_dir / ".lock").exists()
    for line in (run_dir / "records.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda name: pytest.fail(f"bare {name} in records.jsonl"))


def test_non_finite_metrics_are_null_with_their_status(tmp_path):
    summary = run_spec(_spec(tmp_path, "training.epochs=1", "dataset.params={train_fraction: 0.8, valid_fraction: 0.2, "
                                        "test_fraction: 0.0}"), tmp_path / "runs")
    on_disk = json.loads((tmp_path / "runs" / summary["run_id"] / "summary.json").read_text())
    assert on_disk["metrics"]["test"]["accuracy"] is None
    # the final test metrics and the test curve's (one epoch) point
    assert on_disk["non_finite"] == {"metrics.test.accuracy": "nan", "metrics.test_curve[0].accuracy": "nan"}
    records = read_records(tmp_path / "runs" / summary["run_id"])
    assert records[-1]["accuracy"] is None and records[-1]["non_finite"] == {"accuracy": "nan"}


def test_a_second_writer_of_a_run_folder_is_refused_and_changes_nothing(tmp_path):
    import os

    from suite.errors import LockedError
    from suite.recorder import Recorder

    spec = _spec(tmp_path, "training.epochs=1")
    with Recorder(tmp_path / "runs", spec) as first:
        first.record("epoch", epoch=0, loss=1.0)
        with pytest.raises(LockedError, match=rf"run folder .*{spec.run_id}: in use by process {os.getpid()}"):
            run_spec(spec, tmp_path / "runs")
        assert read_records(first.run_dir) == [{"kind": "epoch", "time": pytest.approx(0, abs=1e10), "epoch": 0,
                                                "loss": 1.0}]
    assert run_spec(spec, tmp_path / "runs")["status"] == "completed"  # free again


def test_an_invalid_disk_option_fails_before_the_run_folder_exists(tmp_path):
    with pytest.raises(ConfigError, match=r"system\.options\.buffer_capacity: 8 exceeds num_partitions 4"):
        _spec(tmp_path, "system.name=disk", "system.options={num_partitions: 4, buffer_capacity: 8}")
    with pytest.raises(ConfigError, match=r"training\.learning_rate: Input should be a finite number"):
        _spec(tmp_path, "training.learning_rate=.nan")
    with pytest.raises(ConfigError, match=r"system\.options\.dist_timeout_s: must be a finite number"):
        _spec(tmp_path, "system.options.dist_timeout_s=.inf")


def test_time_to_target_is_the_training_time_before_the_first_validation_at_the_target(tmp_path):
    summary = run_spec(_spec(tmp_path, "evaluation.target_metric=0.0"), tmp_path / "runs")
    assert summary["time_to_target"] == {"target": 0.0, "reached": True, "epochs": 1,
                                         "train_s": pytest.approx(summary["epoch_time_s"][0])}
    never = run_spec(_spec(tmp_path, "evaluation.target_metric=1.01"), tmp_path / "runs")
    assert never["time_to_target"]["reached"] is False and never["time_to_target"]["train_s"] is None


def test_peak_rss_is_the_runs_own_when_one_process_runs_several(tmp_path):
    """A grid running runs one after another in one process records each run's own peak, not the process's."""
    import gc

    import torch

    from suite.provenance import reset_peak_rss, status_kib

    if not reset_peak_rss() or status_kib("VmRSS") is None:
        pytest.skip("no /proc/self/clear_refs or /proc/self/status here")
    block = torch.ones(100_000_000)  # 400 MB, touched
    held = status_kib("VmRSS") * 1024
    del block
    gc.collect()
    summary = run_spec(_spec(tmp_path, "training.epochs=1"), tmp_path / "runs")
    assert summary["peak_rss_since"] == "run start"
    assert summary["peak_rss_bytes"] < held - 200_000_000  # the freed block is not the run's peak
