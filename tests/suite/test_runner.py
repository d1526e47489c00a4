"""The runner end to end on the tiny synthetic preset: summary contents, skipping, failures, determinism."""

from __future__ import annotations

import json

import pytest

from suite.config import apply_overrides, spec_from_dict
from suite.errors import ConfigError, DataError
from suite.recorder import is_complete, read_records
from suite.runner import run_spec

SUMMARY_FIELDS = (
    "run_id status system dataset task model sampler seed epochs epoch_time_s train_examples_per_s "
    "sampled_edges_per_s stage_busy_s compute_utilization gpu_utilization staleness io_read_bytes io_write_bytes "
    "partition_swaps peak_rss_bytes metrics cost_usd machine versions started_at finished_at"
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


def test_failure_during_training_is_recorded_as_failed(tmp_path):
    spec = _spec(tmp_path, "training.task=link_prediction")
    with pytest.raises(ConfigError):
        run_spec(spec, tmp_path / "runs")
    run_dir = tmp_path / "runs" / spec.run_id
    assert not is_complete(run_dir)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "failed"
