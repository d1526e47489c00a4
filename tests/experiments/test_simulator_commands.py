"""``gnnsuite simulate`` and ``gnnsuite simulate-async`` (experiments/simulator_commands.py): recorded run folders,
one-line errors, stored contention measurements, measured kernel durations and the Gantt chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulators.contention_model import Contention, ContentionTable
from suite.cli import main

SLOW = ContentionTable({(True, 1): {"compute": 0.5, "load": 0.8}, (True, 2): {"compute": 0.25, "load": 0.5},
                        (False, 3): {"load": 0.9}})


@pytest.fixture
def recorded_sync_run(sync_pipelined_run):
    """The run folder of the shared sync pipelined run (tests/conftest.py)."""
    return sync_pipelined_run[1]


def _one_line_error(capsys, *fragments: str) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gnnsuite: error: "), err
    for fragment in fragments:
        assert fragment in err[0], err[0]


def _spec_file(tmp_path, options: dict, run_dir: str, num_layers: int = 2, **training) -> str:
    """A what-if spec of the workload of the calibration run ``run_dir`` (its dataset, written as it was)."""
    import yaml

    from suite.config import read_yaml

    dataset = read_yaml(Path(run_dir) / "config.yaml")["dataset"]
    spec = {"name": "whatif", "dataset": dataset,
            "model": {"encoder": "graphsage", "num_layers": num_layers, "hidden_dim": 16,
                      "fanouts": [5] * num_layers},
            "system": {"name": "pipelined", "options": options},
            "training": {"batch_size": 16, "epochs": 2, "limit_batches": 12, **training}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def test_simulate_command_records_a_run_folder_like_a_real_run(recorded_sync_run, tmp_path):
    from suite.recorder import read_records, read_summary
    from suite.results import load_batches, load_runs
    spec = _spec_file(tmp_path, {"staleness_bound": 4}, recorded_sync_run)
    assert main(["simulate", spec, "--calibrate-from", recorded_sync_run, "--out", str(tmp_path / "sim")]) == 0
    assert main(["simulate", spec, "--calibrate-from", recorded_sync_run, "--out", str(tmp_path / "sim"),
                 "--profile", "p3.2xlarge"]) == 0
    runs = load_runs(tmp_path / "sim")
    assert len(runs) == 2 and runs["simulated"].all() and (runs["status"] == "completed").all()
    summary = read_summary(runs["run_dir"].iloc[0])
    assert summary["epochs"] == 2 and summary["batches_per_epoch"] == 12 and summary["staleness"]["max"] <= 3
    batches = load_batches(tmp_path / "sim")
    assert len(batches) == 2 * 2 * 12 and {"load_start", "compute_end", "staleness"} <= set(batches.columns)
    kinds = {r["kind"] for r in read_records(runs["run_dir"].iloc[0])}
    assert kinds == {"batch", "queues", "epoch"}


def test_simulate_command_errors_are_one_line(recorded_sync_run, tmp_path, capsys):

    spec = _spec_file(tmp_path, {"staleness_bound": 0}, recorded_sync_run)
    assert main(["simulate", spec, "--calibrate-from", recorded_sync_run]) == 2
    assert "system.options.staleness_bound" in capsys.readouterr().err
    spec = _spec_file(tmp_path, {}, recorded_sync_run)
    assert main(["simulate", spec, "--calibrate-from", str(tmp_path / "missing")]) == 2
    assert "--calibrate-from" in capsys.readouterr().err
    assert main(["simulate", spec, "--calibrate-from", recorded_sync_run, "--profile", "cray-1"]) == 2
    assert "unknown hardware 'cray-1'" in capsys.readouterr().err


def test_simulate_refuses_a_calibration_run_of_another_workload(recorded_sync_run, tmp_path, capsys):

    spec = _spec_file(tmp_path, {}, recorded_sync_run, num_layers=3)  # the run trained 2 layers
    assert main(["simulate", spec, "--calibrate-from", recorded_sync_run, "--out", str(tmp_path / "sim")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "recorded another workload (model.fanouts: [5, 5] in the run, [5, 5, 5] in the spec)" \
        in err[0], err
    assert not (tmp_path / "sim").exists()


def test_simulate_finds_the_sync_run_in_a_results_folder_and_writes_under_out(recorded_sync_run, tmp_path,
                                                                                monkeypatch, capsys):
    """``--calibrate-from RUNS``: the sync run of the same workload in a results folder; a folder without one is
    a one-line error saying what to record first; the default output is out/simulated (never results/)."""

    spec = _spec_file(tmp_path, {"staleness_bound": 4}, recorded_sync_run)
    monkeypatch.chdir(tmp_path)
    runs = str(Path(recorded_sync_run).parent)
    assert main(["simulate", spec, "--calibrate-from", runs]) == 0
    assert f"calibrating on {recorded_sync_run}" in capsys.readouterr().out
    assert len(list((tmp_path / "out" / "simulated").glob("whatif-sim-s0-*/summary.json"))) == 1
    assert not (tmp_path / "results").exists()
    (tmp_path / "empty").mkdir()
    assert main(["simulate", spec, "--calibrate-from", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no completed sync pipelined run of this spec's workload" in err[0], err


def test_simulate_command_with_a_stored_contention_measurement(recorded_sync_run, tmp_path, capsys):
    from suite.recorder import read_summary
    from suite.results import load_runs

    stored = tmp_path / "contention.json"
    contention = Contention(tables={"thread": SLOW}, cores=1, compute_cores=1, provenance={"measured_at": "t"})
    stored.write_text(json.dumps({"tables": {Path(recorded_sync_run).name: contention.to_dict()}}))
    spec = _spec_file(tmp_path, {"staleness_bound": 4}, recorded_sync_run, epochs=1)
    out = tmp_path / "sim"
    assert main(["simulate", spec, "--calibrate-from", recorded_sync_run, "--out", str(out),
                 "--contention", str(stored)]) == 0
    summary = read_summary(load_runs(out)["run_dir"].iloc[0])
    assert "microbenchmark" in summary["contention"]
    capsys.readouterr()
    assert main(["simulate", spec, "--calibrate-from", recorded_sync_run, "--out", str(out),
                 "--contention", str(tmp_path / "missing.json")]) == 2
    _one_line_error(capsys, "--contention:", "expected 'measure' or a stored measurement")


def test_simulate_async_writes_outputs(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("graph: {kind: uniform, num_nodes: 400, num_edges: 4000, max_degree: 20, num_partitions: 4}\n"
                    "durations: {source: fixed, forward: {aggregate: 1.0, update: 2.0, activation: 0.5}}\n"
                    "pipeline: {layers: 2, iterations: 2}\n")
    assert main(["simulate-async", str(spec), "--out", str(tmp_path / "out"), "--set", "pipeline.staleness_bound=2"]
                ) == 0
    out = capsys.readouterr().out
    assert "async-async" in out and "sync-sync" in out
    assert (tmp_path / "out" / "summary.csv").exists() and (tmp_path / "out" / "tasks.csv").exists()


def test_simulate_async_bad_field_is_one_line(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text("graph: {kind: uniform, num_nodes: 400, num_edges: 4000, max_degree: 20, num_partitions: 4}\n"
                    "durations: {source: fixed, forward: {aggregate: 1.0, update: 2.0, activation: 0.5}}\n"
                    "pipeline: {layers: 2, staleness_bound: -1}\n")
    assert main(["simulate-async", str(spec)]) == 2
    _one_line_error(capsys, f"{spec}: pipeline.staleness_bound:")
    assert main(["simulate-async", str(tmp_path / "missing.yaml")]) == 2
    _one_line_error(capsys, "missing.yaml: file not found")


_UNIFORM = ("graph: {kind: uniform, num_nodes: 400, num_edges: 4000, max_degree: 20, num_partitions: 2}\n"
            "durations: {source: fixed, forward: {aggregate: 1.0, update: 2.0, activation: 0.5}}\n"
            "pipeline: {layers: 2, iterations: 2}\n")


@pytest.mark.parametrize("with_out", [True, False])
def test_simulate_async_draws_the_gantt_chart_from_the_tasks_table(tmp_path, capsys, with_out):
    spec = tmp_path / "spec.yaml"
    spec.write_text(_UNIFORM)
    out = ["--out", str(tmp_path / "out")] if with_out else []
    assert main(["simulate-async", str(spec), "--gantt", str(tmp_path / "gantt.png"), *out]) == 0
    assert (tmp_path / "gantt.png").stat().st_size > 1000
    assert (tmp_path / "out" / "tasks.csv").exists() == with_out  # without --out nothing but the chart is left


def test_simulate_async_times_the_kernels_when_the_spec_asks_for_measured_durations(tmp_path, capsys):
    """``durations.source: measured``: the kernels are timed by experiments.measure.kernel_timing (not the simulator)
    on the dataset's partitions, and the modes are simulated with those durations."""
    import pandas as pd

    spec = tmp_path / "spec.yaml"
    spec.write_text("graph: {kind: dataset, dataset: {name: synthetic, preset: tiny}, num_partitions: 2}\n"
                    "durations: {source: measured, features: 8, repeats: 1}\n"
                    "pipeline: {layers: 1, iterations: 1, backward: false}\nmodes: [sync-sync]\n")
    assert main(["simulate-async", str(spec), "--out", str(tmp_path / "out")]) == 0
    tasks = pd.read_csv(tmp_path / "out" / "tasks.csv")
    assert len(tasks) == 3 * 2 and ((tasks["end"] - tasks["start"]) > 0).all()
