"""Grids: expansion (axes x zip, errors naming the file and field, duplicates) and execution through the real
runner (skip, failures, executors, and a grid killed halfway and restarted)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from suite.errors import ConfigError
from suite.grid import EXECUTORS, expand_grid, failures, load_grid, run_grid, select_specs
from suite.recorder import is_complete, read_records, read_summary

REPO_ROOT = Path(__file__).resolve().parents[2]


def _base(cache_dir: Path | str = "data") -> dict:
    return {"dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(cache_dir)},
            "training": {"epochs": 1}}


def _write(path: Path, grid: dict) -> Path:
    path.write_text(yaml.safe_dump(grid, sort_keys=False))
    return path


# ---------------------------------------------------------------------------------------------- expansion
def test_axes_times_zip(tmp_path: Path):
    grid = {
        "name": "demo",
        "base": _base(),
        "axes": {"model.encoder": ["graphsage", "mlp"], "seed": [0, 1, 2]},
        "zip": [{"training.learning_rate": [0.01, 0.003], "training.batch_size": [100, 400]}],
    }
    specs = expand_grid(_write(tmp_path / "demo.yaml", grid))
    assert len(specs) == 2 * 3 * 2
    combos = [(s.model.encoder, s.seed, s.training.learning_rate, s.training.batch_size) for s in specs]
    assert len(set(combos)) == 12
    # zipped values go together, never crossed
    assert {(lr, bs) for *_, lr, bs in combos} == {(0.01, 100), (0.003, 400)}
    # the axes in file order, the last varying fastest, then the zip groups
    assert combos[:3] == [("graphsage", 0, 0.01, 100), ("graphsage", 0, 0.003, 400), ("graphsage", 1, 0.01, 100)]
    assert {s.model.encoder for s in specs} == {"graphsage", "mlp"}
    # the base is kept
    assert all(s.dataset.preset == "tiny" and s.training.epochs == 1 for s in specs)
    assert len({s.run_id for s in specs}) == 12


def test_two_zip_groups_multiply():
    grid = {"base": _base(), "zip": [{"seed": [0, 1, 2]},
                                     {"training.learning_rate": [0.1, 0.2], "training.batch_size": [10, 20]}]}
    assert len(expand_grid(grid)) == 6


def test_where_keeps_the_points_whose_fields_equal_every_value():
    grid = {"base": _base(), "axes": {"model.encoder": ["graphsage", "mlp"], "seed": [0, 1, 2],
                                      "model.fanouts": [[5, 5], [10, 10]]}}
    specs = expand_grid(grid)
    kept = select_specs(specs, ["model.encoder=mlp", "seed=1"])
    assert [(s.model.encoder, s.seed) for s in kept] == [("mlp", 1), ("mlp", 1)]
    assert [s.model.fanouts for s in select_specs(specs, ["model.fanouts=[10, 10]", "seed=0"])] == [(10, 10)] * 2
    assert select_specs(specs, []) == specs and select_specs(specs, ["seed=7"]) == []
    with pytest.raises(ConfigError, match=r"--where model\.nonsense=1: no field 'model.nonsense'"):
        select_specs(specs, ["model.nonsense=1"])
    with pytest.raises(ConfigError, match="--where"):
        select_specs(specs, ["seed"])


def test_grid_without_axes_is_its_base():
    specs = expand_grid({"base": _base()})
    assert len(specs) == 1 and specs[0].model.encoder == "graphsage"


def test_load_grid_name_defaults_to_the_stem(tmp_path: Path):
    assert load_grid(_write(tmp_path / "fig7.yaml", {"base": _base()})).name == "fig7"
    assert load_grid(_write(tmp_path / "g.yaml", {"name": "arxiv", "base": _base()})).name == "arxiv"


def test_zip_length_mismatch_names_the_field(tmp_path: Path):
    path = _write(tmp_path / "bad.yaml", {"base": _base(), "zip": [
        {"training.learning_rate": [0.1, 0.2], "training.batch_size": [10, 20, 30]}]})
    with pytest.raises(ConfigError) as err:
        expand_grid(path)
    assert str(err.value) == (f"{path}: zip[0].training.batch_size: expected 2 values "
                              f"(as zip[0].training.learning_rate), got 3")


def test_unknown_spec_field_names_the_grid_file_and_the_field(tmp_path: Path):
    path = _write(tmp_path / "typo.yaml", {"base": _base(), "axes": {"model.encodr": ["mlp"]}})
    with pytest.raises(ConfigError) as err:
        expand_grid(path)
    message = str(err.value)
    assert message.startswith(f"{path}: model.encodr: unknown field")
    assert "model.encodr=\"mlp\"" in message and "\n" not in message


def test_invalid_value_names_the_field_and_the_point(tmp_path: Path):
    path = _write(tmp_path / "layers.yaml", {"base": _base(), "axes": {"model.num_layers": [2, 3]}})
    with pytest.raises(ConfigError, match=rf"^{path}: model.fanouts: expected 3 entries.*grid point model.num_layers=3"):
        expand_grid(path)
    path = _write(tmp_path / "encoder.yaml", {"base": _base(), "axes": {"model.encoder": ["mlp", "nope"]}})
    with pytest.raises(ConfigError, match=rf"^{path}: model.encoder: unknown model 'nope'"):
        expand_grid(path)


def test_grid_schema_errors(tmp_path: Path):
    cases = [
        ({"base": _base(), "axis": {"seed": [1]}}, "axis: unknown field"),
        ({"axes": {"seed": [1]}}, "base: required field is missing"),
        ({"base": _base(), "axes": {"seed": []}}, "axes.seed: expected a non-empty list of values"),
        ({"base": _base(), "axes": {"seed": 3}}, "axes.seed: expected a non-empty list of values"),
        ({"base": _base(), "axes": ["seed"]}, "axes: expected a mapping"),
        ({"base": _base(), "zip": {"seed": [1]}}, "zip: expected a list of groups"),
        ({"base": _base(), "axes": {"seed": [0, 1]}, "zip": [{"seed": [2, 3]}]},
         "zip[0].seed: field also set by axes.seed"),
        ({"base": _base(), "axes": {"training.epochs.x": [1]}},
         "training.epochs.x: training.epochs is not a mapping (grid point training.epochs.x=1)"),
        ({"base": _base(), "axes": {"model..encoder": [1]}}, "axes.model..encoder: expected a dotted field path"),
        ([1, 2], "expected a mapping at the top level"),
    ]
    for grid, expected in cases:
        path = _write(tmp_path / "g.yaml", grid)
        with pytest.raises(ConfigError) as err:
            expand_grid(path)
        assert str(err.value).startswith(f"{path}: "), err.value
        assert expected in str(err.value), err.value


def test_missing_grid_file(tmp_path: Path):
    with pytest.raises(ConfigError, match="nope.yaml: file not found"):
        expand_grid(tmp_path / "nope.yaml")


def test_duplicates_collapse():
    grid = {"base": _base(), "axes": {"seed": [0, 1, 0], "model.encoder": ["mlp"]}}
    specs = expand_grid(grid)
    assert [s.seed for s in specs] == [0, 1]
    # an override fixing an axis collapses its points; overrides win over the grid's values
    grid = {"base": _base(), "axes": {"seed": [0, 1, 2], "model.encoder": ["graphsage", "mlp"]}}
    specs = expand_grid(grid, overrides=["seed=7", "training.epochs=3"])
    assert [(s.seed, s.model.encoder, s.training.epochs) for s in specs] == [(7, "graphsage", 3), (7, "mlp", 3)]


def test_base_from_a_run_spec_file(tmp_path: Path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "base.yaml").write_text(yaml.safe_dump(_base()))
    path = _write(tmp_path / "g.yaml", {"base": "specs/base.yaml", "axes": {"seed": [0, 1]}})
    assert [s.seed for s in expand_grid(path)] == [0, 1]


def test_values_may_be_lists_and_mappings():
    grid = {"base": _base(), "zip": [{"model.num_layers": [1, 2], "model.fanouts": [[5], [5, 5]]}],
            "axes": {"dataset.params": [{"num_nodes": 200}]}}
    specs = expand_grid(grid)
    assert [s.model.fanouts for s in specs] == [(5,), (5, 5)]
    assert specs[0].dataset.params == {"num_nodes": 200}


# ---------------------------------------------------------------------------------------------- running
@pytest.fixture
def tiny_grid(tmp_path: Path) -> list:
    return expand_grid({"base": _base(tmp_path / "data"), "axes": {"model.encoder": ["mlp"], "seed": [0, 1]}})


def test_run_grid_runs_once_and_skips_completed(tmp_path: Path, tiny_grid: list):
    out = tmp_path / "out"
    first = run_grid(tiny_grid, out, progress=False)
    assert [s["status"] for s in first] == ["completed", "completed"]
    assert [s["run_id"] for s in first] == [spec.run_id for spec in tiny_grid]
    assert not any(s.get("skipped") for s in first)
    mtimes = {spec.run_id: (out / spec.run_id / "summary.json").stat().st_mtime_ns for spec in tiny_grid}

    again = run_grid(tiny_grid + tiny_grid, out, progress=False)  # duplicates are run once
    assert len(again) == 2 and all(s.get("skipped") for s in again)
    assert {spec.run_id: (out / spec.run_id / "summary.json").stat().st_mtime_ns for spec in tiny_grid} == mtimes

    redone = run_grid(tiny_grid[:1], out, overwrite=True, progress=False)
    assert redone[0]["status"] == "completed" and not redone[0].get("skipped")
    assert (out / tiny_grid[0].run_id / "summary.json").stat().st_mtime_ns != mtimes[tiny_grid[0].run_id]


def test_failed_run_is_recorded_and_the_grid_goes_on(tmp_path: Path, tiny_grid: list):
    out = tmp_path / "out"
    broken = expand_grid({"base": {"dataset": {"name": "store", "root": str(tmp_path / "no-such-store")}}})[0]
    specs = [tiny_grid[0], broken, tiny_grid[1]]
    summaries = run_grid(specs, out, progress=False)
    assert [s["status"] for s in summaries] == ["completed", "failed", "completed"]
    assert [s["run_id"] for s in failures(summaries)] == [broken.run_id]
    recorded = read_summary(out / broken.run_id)
    assert recorded["status"] == "failed" and "no-such-store" in recorded["error"]
    assert not is_complete(out / broken.run_id)

    # the next time, the failed run is retried and nothing finished is repeated
    again = run_grid(specs, out, progress=False)
    assert [bool(s.get("skipped")) for s in again] == [True, False, True]
    assert again[1]["status"] == "failed"


def test_executors_are_registered_by_name(tmp_path: Path, tiny_grid: list):
    with pytest.raises(ConfigError, match="unknown executor 'nope'.*local"):
        run_grid(tiny_grid, tmp_path / "out", executor="nope", progress=False)
    with pytest.raises(ConfigError, match="--jobs"):
        run_grid(tiny_grid, tmp_path / "out", jobs=0, progress=False)

    calls = []

    def recording(specs, out, *, jobs, overwrite, progress, on_result):
        calls.append(([s.run_id for s in specs], jobs, overwrite))
        summaries = [{"run_id": s.run_id, "status": "completed"} for s in specs]
        for summary in summaries:
            on_result(summary)
        return summaries

    if "test-recording" not in EXECUTORS:
        EXECUTORS.register("test-recording", recording)
    else:  # the test ran before in this process
        EXECUTORS._items["test-recording"] = recording
    summaries = run_grid(tiny_grid, tmp_path / "out", jobs=3, executor="test-recording", progress=False)
    assert calls == [([s.run_id for s in tiny_grid], 3, False)]
    assert [s["status"] for s in summaries] == ["completed", "completed"]


# ---------------------------------------------------------------------------------------------- kill and resume
_DRIVER = """
import json, sys
from suite.grid import expand_grid, run_grid
summaries = run_grid(expand_grid(sys.argv[1]), sys.argv[2], jobs=int(sys.argv[3]), progress=False)
print(json.dumps([{"run_id": s["run_id"], "status": s["status"], "skipped": bool(s.get("skipped"))}
                  for s in summaries]))
"""


def _driver(tmp_path: Path, grid: Path, out: Path, jobs: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
           "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen([sys.executable, "-c", _DRIVER, str(grid), str(out), str(jobs)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _complete(out: Path, run_ids: list[str]) -> list[str]:
    return [run_id for run_id in run_ids if is_complete(out / run_id)]


def _kill_halfway_and_resume(tmp_path: Path, jobs: int) -> None:
    # 6 runs of a few hundred milliseconds each, so that the kill lands while runs are still to do
    grid = _write(tmp_path / "grid.yaml", {
        "name": "resume",
        "base": {"dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(tmp_path / "data")},
                 "training": {"epochs": 2, "batch_size": 16}},
        "axes": {"model.encoder": ["mlp", "graphsage"], "seed": [0, 1, 2]},
    })
    specs = expand_grid(grid)
    run_ids = [spec.run_id for spec in specs]
    assert len(run_ids) == 6
    out = tmp_path / "out"

    driver = _driver(tmp_path, grid, out, jobs)
    deadline = time.monotonic() + 240
    while len(_complete(out, run_ids)) < 3:
        if driver.poll() is not None:
            pytest.fail(f"the grid ended before it could be killed: {driver.communicate()}")
        assert time.monotonic() < deadline, "the grid did not complete 3 runs in time"
        time.sleep(0.01)
    os.killpg(driver.pid, signal.SIGKILL)  # the grid and its workers, as a kill of the job would
    driver.communicate()
    done_before = _complete(out, run_ids)
    assert 3 <= len(done_before) < 6, "the kill did not land halfway"
    stamps = {run_id: ((out / run_id / "summary.json").stat().st_mtime_ns,
                       (out / run_id / "records.jsonl").stat().st_mtime_ns,
                       (out / run_id / "summary.json").read_bytes()) for run_id in done_before}

    driver = _driver(tmp_path, grid, out, jobs)
    stdout, stderr = driver.communicate(timeout=240)
    assert driver.returncode == 0, stderr
    summaries = json.loads(stdout.strip().splitlines()[-1])

    # every run is complete, exactly once
    assert [s["run_id"] for s in summaries] == run_ids
    assert all(s["status"] == "completed" for s in summaries)
    assert {s["run_id"] for s in summaries if s["skipped"]} == set(done_before)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(run_ids)
    for run_id in run_ids:
        assert is_complete(out / run_id)
        records = read_records(out / run_id)
        assert [r["epoch"] for r in records if r["kind"] == "epoch"] == [0, 1], run_id  # one training pass
        assert [r["split"] for r in records if r["kind"] == "eval"] == ["valid"] * 2 + ["test"], run_id
    # runs finished before the kill were not touched by the restart
    for run_id, (summary_mtime, records_mtime, content) in stamps.items():
        assert (out / run_id / "summary.json").stat().st_mtime_ns == summary_mtime
        assert (out / run_id / "records.jsonl").stat().st_mtime_ns == records_mtime
        assert (out / run_id / "summary.json").read_bytes() == content


def test_grid_killed_halfway_resumes_without_repeating(tmp_path: Path):
    _kill_halfway_and_resume(tmp_path, jobs=1)


@pytest.mark.slow
def test_grid_on_a_process_pool_killed_halfway_resumes_without_repeating(tmp_path: Path):
    _kill_halfway_and_resume(tmp_path, jobs=2)
