"""Loading results folders into tables: run folders written by hand, as the recorder lays them out."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from suite.config import spec_from_dict
from suite.errors import ConfigError, DataError
from suite.results import export, flatten, load_epochs, load_evals, load_runs, load_table, run_dirs


def _spec(encoder: str, seed: int, learning_rate: float = 0.01):
    return spec_from_dict({
        "dataset": {"name": "synthetic", "preset": "tiny"},
        "model": {"encoder": encoder},
        "training": {"epochs": 2, "learning_rate": learning_rate},
        "seed": seed,
    })


def _write_run(out: Path, spec, summary: dict | None, records: list[dict], torn_tail: str = "") -> Path:
    run_dir = out / spec.run_id
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(spec.to_yaml())
    lines = "".join(json.dumps(record) + "\n" for record in records)
    (run_dir / "records.jsonl").write_text(lines + torn_tail)
    if summary is not None:
        (run_dir / "summary.json").write_text(json.dumps({"run_id": spec.run_id, **summary}, indent=2))
    return run_dir


def _epoch(epoch: int, seconds: float, loss: float) -> dict:
    return {"kind": "epoch", "time": 1.0 + epoch, "epoch": epoch, "epoch_time_s": seconds, "examples": 100,
            "sampled_edges": 1000, "loss": loss, "stage_busy_s": {"sample": 0.1, "compute": seconds / 2}}


def _summary(status: str, accuracy: float, seed: int, encoder: str) -> dict:
    return {
        "status": status, "system": "in_memory", "dataset": "tiny", "task": "node_classification",
        "model": encoder, "sampler": "naive", "seed": seed, "epochs": 2, "epoch_time_s": [1.0, 2.0],
        "train_examples_per_s": 66.7, "stage_busy_s": {"sample": 0.2, "compute": 1.5},
        "compute_utilization": 0.5, "gpu_utilization": None, "staleness": {"mean": 0.0, "max": 0},
        "metrics": {"main": "accuracy", "valid": {"accuracy": accuracy - 0.1}, "test": {"accuracy": accuracy},
                    "valid_curve": [{"epoch": 1, "accuracy": accuracy - 0.1}]},
        "cost_usd": {"profile": "local", "hourly_usd": 1.0, "run": 0.001, "per_epoch": 0.0004, "to_target": None},
        "machine": {"cpu_cores": 2, "gpu": None},
    }


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Three runs: completed, failed (one folder deeper), and incomplete (killed: a torn last record)."""
    out = tmp_path / "results"
    sage = _spec("graphsage", 0)
    _write_run(out / "grid-a", sage, _summary("completed", 0.8, 0, "graphsage"), [
        _epoch(0, 1.0, 1.5), _epoch(1, 2.0, 1.2),
        {"kind": "eval", "time": 5.0, "epoch": 1, "split": "valid", "accuracy": 0.7},
        {"kind": "eval", "time": 6.0, "epoch": 1, "split": "test", "accuracy": 0.8},
    ])
    failed = _spec("mlp", 1, learning_rate=0.1)
    _write_run(out / "grid-b" / "nested", failed,
               {"status": "failed", "error": "RuntimeError: boom", "started_at": "2026-01-01T00:00:00+00:00"},
               [_epoch(0, 3.0, 2.0)])
    incomplete = _spec("mlp", 2)
    _write_run(out / "grid-a", incomplete, None, [_epoch(0, 4.0, 1.9)], torn_tail='{"kind": "epo')
    # a hidden staging folder is not a run
    hidden = out / ".staging" / "x"
    hidden.mkdir(parents=True)
    (hidden / "summary.json").write_text("{}")
    return out


def test_flatten():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": {}, "f": None}) == {
        "a.b": 1, "a.c.d": [1, 2], "e": {}, "f": None}


def test_run_dirs_recursive(results: Path):
    dirs = run_dirs(results)
    assert len(dirs) == 3
    assert all(".staging" not in str(d) for d in dirs)


def test_load_runs_flattens_summaries(results: Path):
    runs = load_runs(results)
    assert len(runs) == 3
    assert list(runs.columns[:3]) == ["run_id", "status", "run_dir"]
    for column in ("metrics.test.accuracy", "metrics.valid.accuracy", "cost_usd.run", "cost_usd.profile",
                   "stage_busy_s.compute", "staleness.max", "machine.cpu_cores", "config.training.learning_rate",
                   "config.model.encoder", "config.seed"):
        assert column in runs.columns, column
    by_status = runs.set_index("status")
    assert sorted(runs["status"]) == ["completed", "failed", "incomplete"]

    done = by_status.loc["completed"]
    assert done["metrics.test.accuracy"] == pytest.approx(0.8)
    assert done["cost_usd.run"] == pytest.approx(0.001)
    assert done["stage_busy_s.compute"] == pytest.approx(1.5)
    assert done["epoch_time_s"] == [1.0, 2.0]  # lists stay lists
    assert done["config.model.encoder"] == "graphsage"
    assert Path(done["run_dir"]).name == done["run_id"]
    assert Path(done["run_dir"]).parent.name == "grid-a"

    failed = by_status.loc["failed"]
    assert failed["error"] == "RuntimeError: boom"
    assert failed["config.training.learning_rate"] == pytest.approx(0.1)
    assert pd.isna(failed["metrics.test.accuracy"])

    incomplete = by_status.loc["incomplete"]
    assert incomplete["model"] == "mlp" and incomplete["seed"] == 2  # key fields from config.yaml
    assert incomplete["run_id"] == _spec("mlp", 2).run_id
    assert pd.isna(incomplete["metrics.test.accuracy"])


def test_load_runs_without_incomplete(results: Path):
    runs = load_runs(results, include_incomplete=False)
    assert sorted(runs["status"]) == ["completed", "failed"]


def test_load_runs_of_an_empty_folder(tmp_path: Path):
    runs = load_runs(tmp_path)
    assert runs.empty
    assert list(runs.columns) == ["run_id", "status", "run_dir"]


def test_missing_folder_is_a_data_error(tmp_path: Path):
    missing = tmp_path / "nope"
    for load in (load_runs, load_epochs, load_evals):
        with pytest.raises(DataError, match=f"{missing}: results folder not found"):
            load(missing)


def test_corrupt_summary_names_the_file(results: Path):
    run_dir = next(d for d in run_dirs(results) if (d / "summary.json").exists())
    (run_dir / "summary.json").write_text('{"status": "completed", ')
    with pytest.raises(DataError) as err:
        load_runs(results)
    message = str(err.value)
    assert str(run_dir / "summary.json") in message and "corrupt summary" in message
    assert "\n" not in message
    (run_dir / "summary.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="expected a JSON object"):
        load_runs(results)


def test_corrupt_config_names_the_file(results: Path):
    run_dir = run_dirs(results)[0]
    (run_dir / "config.yaml").write_text("model: [unclosed\n")
    with pytest.raises(DataError, match=f"{run_dir / 'config.yaml'}: corrupt run config"):
        load_runs(results)


def test_load_epochs(results: Path):
    epochs = load_epochs(results, config_fields=["training.learning_rate"])
    assert len(epochs) == 4  # 2 + 1 + 1 (the torn record of the killed run is dropped)
    assert list(epochs.columns[:12]) == [
        "run_id", "status", "name", "system", "dataset", "task", "model", "sampler", "seed",
        "config.training.learning_rate", "run_dir", "epoch"]
    assert "stage_busy_s.compute" in epochs.columns and "kind" not in epochs.columns
    sage = epochs[epochs["model"] == "graphsage"].sort_values("epoch")
    assert list(sage["epoch"]) == [0, 1]
    assert list(sage["loss"]) == [1.5, 1.2]
    assert list(sage["epoch_time_s"]) == [1.0, 2.0]
    assert set(sage["status"]) == {"completed"}
    assert set(sage["dataset"]) == {"tiny"} and set(sage["system"]) == {"in_memory"}
    killed = epochs[epochs["seed"] == 2]
    assert list(killed["status"]) == ["incomplete"]
    failed = epochs[epochs["status"] == "failed"]
    assert list(failed["config.training.learning_rate"]) == [0.1]


def test_load_evals(results: Path):
    evals = load_evals(results)
    assert len(evals) == 2
    assert list(evals["split"]) == ["valid", "test"]
    assert list(evals["accuracy"]) == [0.7, 0.8]
    assert set(evals["model"]) == {"graphsage"}


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_export_round_trip(results: Path, tmp_path: Path, suffix: str):
    runs = load_runs(results)
    path = export(runs, tmp_path / "tables" / f"runs{suffix}")
    assert path.exists()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind
    back = load_table(path)
    assert list(back.columns) == list(runs.columns)
    assert len(back) == len(runs)
    for column in ("run_id", "status", "metrics.test.accuracy", "cost_usd.run", "stage_busy_s.compute",
                   "config.training.learning_rate", "seed"):
        pd.testing.assert_series_equal(back[column], runs[column], check_dtype=False, check_names=True)
    # lists are written as JSON text
    done = back[back["status"] == "completed"].iloc[0]
    assert json.loads(done["epoch_time_s"]) == [1.0, 2.0]


def test_export_epochs_round_trip(results: Path, tmp_path: Path):
    epochs = load_epochs(results)
    back = load_table(export(epochs, tmp_path / "epochs.parquet"))
    pd.testing.assert_frame_equal(back.reset_index(drop=True), epochs.reset_index(drop=True), check_dtype=False)


def test_export_rejects_unknown_suffix(results: Path, tmp_path: Path):
    with pytest.raises(ConfigError, match=r"runs\.xlsx: unsupported table format '\.xlsx'"):
        export(load_runs(results), tmp_path / "runs.xlsx")
    with pytest.raises(DataError, match="table not found"):
        load_table(tmp_path / "missing.csv")
