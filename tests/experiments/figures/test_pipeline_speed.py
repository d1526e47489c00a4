"""The pipeline experiment (experiments/figures/pipeline_speed.py) end to end on the tiny preset."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments import pipeline_runs
from experiments.figures import pipeline_speed
from systems.sampling.pyg import missing_reason


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipeline")
    status = pipeline_speed.main(["--smoke", "--out", str(root / "runs"), "--results", str(root), "--data-dir",
                            str(root / "data"), "--quiet"])
    assert status == 0
    return root


def test_speed_table_has_every_configuration_with_sane_measures(recorded):
    table = pd.read_csv(recorded / "pipeline_speed.csv")
    assert len(table) == 13  # 6 configurations x 2 samplers on one (quick) dataset, and the peer pyg once
    assert set(table["sampler"]) == {"naive", "dense", "pyg"}
    peer = table[table["sampler"] == "pyg"].iloc[0]
    assert peer["system"] == peer["configuration"] == "pyg"
    if missing_reason() is None:
        assert peer["status"] == "ok" and peer["epoch_time_s"] > 0 and peer["ratio_baseline"] == "in_memory/dense"
        dense_base = table[(table["sampler"] == "dense") & (table["system"] == "in_memory")]["epoch_time_s"].iloc[0]
        assert peer["time_ratio_vs_in_memory"] == pytest.approx(peer["epoch_time_s"] / dense_base)
    else:
        assert peer["status"] == "skipped" and peer["reason"] == missing_reason()
    table = table[table["sampler"] != "pyg"]
    assert list(table[table["sampler"] == "dense"]["configuration"]) == [
        "in_memory", "sync", "1T 1X q2/2 b2", "2T 1X q4/4 b8", "4T 2X q4/4 b16", "2P 1X q4/4 b8"]
    assert (table[table["system"] == "in_memory"]["time_ratio_vs_in_memory"] == 1.0).all()
    pipelined = table[table["system"] == "pipelined"]
    assert (pipelined["pipeline_efficiency"] >= 1.0 - 1e-6).all()
    assert table["compute_utilization"].between(0, 1).all()
    assert (pipelined["staleness_max"] < pipelined["configuration"].map(
        lambda label: 1 if label == "sync" else int(label.split()[3].removeprefix("b")))).all()
    assert (recorded / "pipeline_speed.png").stat().st_size > 10_000


def test_accuracy_table_compares_sync_and_async(recorded):
    table = pd.read_csv(recorded / "pipeline_accuracy.csv")
    assert sorted(table["configuration"]) == ["4T 2X q4/4 b16", "4T 2X q4/4 b16 ooo", "sync"]
    assert table["test_accuracy"].between(0, 1).all()
    assert (table[table["configuration"] == "sync"]["staleness_max"] == 0).all()


def test_measured_epochs_by_hand():
    """The last epoch, or the mean of every epoch but the first (the only one where a run has one)."""
    epochs = pd.DataFrame({
        "run_dir": ["a", "a", "a", "b"], "epoch": [2, 0, 1, 0], "epoch_time_s": [3.0, 9.0, 5.0, 7.0],
        "examples": [10, 10, 10, 4], "stage_busy_s.compute": [2.0, 8.0, 4.0, 6.0],
        "staleness_max": [1, 0, 3, 2], "bottleneck_stage": ["load", "compute", "compute", "load"]})
    last = pipeline_runs.measured_epochs(epochs, "last")
    assert last.loc["a", "epoch_time_s"] == 3.0 and last.loc["b", "epoch_time_s"] == 7.0
    warm = pipeline_runs.measured_epochs(epochs, "warm")
    assert warm.loc["a", "epoch_time_s"] == 4.0 and warm.loc["a", "stage_busy_s.compute"] == 3.0
    assert warm.loc["a", "staleness_max"] == 3 and warm.loc["a", "bottleneck_stage"] == "load"
    assert list(warm["measured_epochs"]) == [2, 1] and warm.loc["b", "epoch_time_s"] == 7.0
    with pytest.raises(ValueError, match="which"):
        pipeline_runs.measured_epochs(epochs, "first")


def test_configuration_labels():
    assert pipeline_runs.configuration("in_memory", {}) == "in_memory"
    assert pipeline_runs.configuration("pipelined", {"sync": True, "staleness_bound": 3}) == "sync"
    assert pipeline_runs.configuration("pipelined", {}) == "4T 2X q4/4 b16"
    assert pipeline_runs.configuration("pipelined", {"loader_workers": "process", "batch_loader_threads": 3,
                                                "batch_host_queue_size": 2}) == "3P 2X q2/4 b16"
    assert pipeline_runs.configuration("pipelined", {"in_order_compute": False}) == "4T 2X q4/4 b16 ooo"
    assert pipeline_runs.configuration("pyg", {}) == "pyg"
    labels = ["pyg", "2P 1X q4/4 b8", "sync", "in_memory", "1T 1X q2/2 b2"]
    assert sorted(labels, key=pipeline_runs.configuration_order) == ["in_memory", "sync", "1T 1X q2/2 b2",
                                                                     "2P 1X q4/4 b8", "pyg"]


def test_pyg_runs_once_per_dataset_as_sampler_pyg_or_is_skipped_with_the_reason(monkeypatch):
    specs, skipped = pipeline_speed.grid_specs(pipeline_speed.SPEED_GRID, "smoke")
    peers = [spec for spec in specs if spec.system.name == "pyg"] + [spec for spec, _ in skipped]
    assert len(peers) == 1 and peers[0].sampler.name == "pyg"
    assert len(specs) + len(skipped) == 13
    monkeypatch.setattr("systems.sampling.pyg.missing_reason", lambda: "pyg-lib/torch-sparse not installed")
    specs, skipped = pipeline_speed.grid_specs(pipeline_speed.SPEED_GRID, "smoke")
    assert len(specs) == 12 and all(spec.system.name != "pyg" for spec in specs)
    assert [(spec.system.name, reason) for spec, reason in skipped] == [("pyg", "pyg-lib/torch-sparse not installed")]
    row = pipeline_speed.skipped_rows(skipped).iloc[0]
    assert (row["configuration"], row["status"], row["sampler"]) == ("pyg", "skipped", "pyg")


@pytest.mark.parametrize("quick", [False, True])
def test_validation_without_its_runs_says_what_to_run_first(tmp_path, capsys, quick):
    from experiments.figures import pipeline_validation

    argv = ["--results", str(tmp_path / "results")] + (["--quick"] if quick else [])
    if not quick:
        argv += ["--runs", str(tmp_path / "missing")]
    elif (pipeline_validation.QUICK_DEFAULTS["runs"]).exists():
        argv += ["--runs", str(tmp_path / "missing")]
    assert pipeline_validation.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    command = "python -m experiments.figures.pipeline_validation --run-grid" + (" --quick" if quick else "")
    expected = f"{command}` first"
    assert len(err) == 1 and expected in err[0], err
    assert not (tmp_path / "results").exists()


def test_full_mode_runs_the_accuracy_grid_shrunk_and_every_configuration_on_three_seeds():
    """Full mode: the speed grid as the spec says; the accuracy grid at 50,000 nodes and 4 epochs (its whole-graph
    setting is for gnnsuite grid), sync, async in order (the check) and out of order, seeds 0-2."""
    specs, _ = pipeline_speed.grid_specs(pipeline_speed.ACCURACY_GRID, "full")
    assert {(spec.dataset.params or {}).get("num_nodes") for spec in specs} == {50000}
    assert {spec.training.epochs for spec in specs} == {4}
    by_configuration = {}
    for spec in specs:
        key = (spec.system.options.get("sync", False), pipeline_speed.in_order_async(spec))
        by_configuration.setdefault(key, set()).add(spec.seed)
    assert by_configuration == {(True, False): {0, 1, 2}, (False, True): {0, 1, 2}, (False, False): {0, 1, 2}}
    speed, _ = pipeline_speed.grid_specs(pipeline_speed.SPEED_GRID, "full")
    assert {spec.training.limit_batches for spec in speed} == {12, 4}
