"""Grid executors on Ray (a local instance) and submitit (its local executor): same folder layout, resume
semantics, a killed worker failing only its run, resource requests, and the one-line error without Ray."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from suite.cli import build_parser
from suite.config import spec_from_dict
from suite.errors import ConfigError
from suite.executors import ExecutorOptions, Resources, parse_memory, run_resources
from suite.grid import expand_grid, run_grid
from suite.recorder import is_complete, read_records, read_summary


def _grid(cache_dir: Path, slow_epochs: int | None = None) -> list:
    grid = {"base": {"dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(cache_dir)},
                     "model": {"encoder": "mlp"}, "system": {"device": "cpu"}, "training": {"epochs": 1}},
            "axes": {"seed": [0, 1]}}
    specs = expand_grid(grid)
    if slow_epochs:  # a third run that lasts long enough to be killed
        slow = {**grid["base"], "seed": 7, "training": {"epochs": slow_epochs, "batch_size": 4},
                "evaluation": {"splits": []}}
        specs.append(spec_from_dict(slow))
    return specs


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("exec-data")


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def _check_layout(out: Path, specs: list, summaries: list) -> None:
    assert [s["run_id"] for s in summaries] == [spec.run_id for spec in specs]
    for spec in specs:
        assert sorted(p.name for p in (out / spec.run_id).iterdir()) == ["config.yaml", "records.jsonl",
                                                                         "summary.json"]
        assert is_complete(out / spec.run_id)


def _kill_run_when_started(out: Path, run_id: str, match: str) -> threading.Thread:
    """Kill (SIGKILL) the worker process that holds ``out/run_id/records.jsonl`` open, once its first epoch is
    recorded; ``match`` narrows the search to processes whose command line contains it."""
    records = str(out / run_id / "records.jsonl")

    def kill() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if (out / run_id).exists() and any(r["kind"] == "epoch" for r in read_records(out / run_id)):
                for process in psutil.process_iter(["cmdline"]):
                    try:
                        if match in " ".join(process.info["cmdline"] or []) and any(
                                f.path == records for f in process.open_files()):
                            os.kill(process.pid, signal.SIGKILL)
                            return
                    except (psutil.Error, OSError):
                        continue
            time.sleep(0.1)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


# ---------------------------------------------------------------------------------------------- ray
def test_ray_grid_runs_into_the_same_layout_and_resumes(tmp_path: Path, cache_dir: Path, local_ray):
    specs = _grid(cache_dir)
    out = tmp_path / "out"
    summaries = run_grid(specs, out, executor="ray", progress=False)
    assert [s["status"] for s in summaries] == ["completed", "completed"]
    _check_layout(out, specs, summaries)
    again = run_grid(specs, out, executor="ray", progress=False, executor_options=ExecutorOptions(cpus_per_run=1))
    assert all(s.get("skipped") for s in again)
    local = run_grid(specs, out, executor="local", progress=False)  # the local executor sees them complete too
    assert all(s.get("skipped") for s in local)


@pytest.mark.slow
def test_ray_killed_worker_fails_its_run_and_the_grid_resumes(tmp_path: Path, cache_dir: Path, local_ray):
    specs = _grid(cache_dir, slow_epochs=40)
    out = tmp_path / "out"
    killer = _kill_run_when_started(out, specs[2].run_id, "ray::")
    summaries = run_grid(specs, out, executor="ray", progress=False)
    killer.join(timeout=5)
    assert [s["status"] for s in summaries] == ["completed", "completed", "failed"]
    assert "WorkerFailure: Ray worker died while running " + specs[2].run_id in summaries[2]["error"]
    assert read_summary(out / specs[2].run_id)["status"] == "failed"
    stamps = {spec.run_id: (out / spec.run_id / "summary.json").stat().st_mtime_ns for spec in specs[:2]}

    again = run_grid(specs, out, executor="ray", progress=False)
    assert [bool(s.get("skipped")) for s in again] == [True, True, False]
    assert all(s["status"] == "completed" for s in again)
    assert {spec.run_id: (out / spec.run_id / "summary.json").stat().st_mtime_ns for spec in specs[:2]} == stamps


# ---------------------------------------------------------------------------------------------- submitit
def test_submitit_local_grid_runs_and_resumes(tmp_path: Path, cache_dir: Path):
    pytest.importorskip("submitit")
    specs = _grid(cache_dir)
    out = tmp_path / "out"
    options = ExecutorOptions(submitit_cluster="local", timeout_min=10)
    summaries = run_grid(specs, out, executor="slurm", progress=False, executor_options=options)
    assert [s["status"] for s in summaries] == ["completed", "completed"]
    _check_layout(out, specs, summaries)
    assert (out / ".submitit").is_dir()  # the jobs' own files, out of the way of the runs
    again = run_grid(specs, out, executor="slurm", progress=False, executor_options=options)
    assert all(s.get("skipped") for s in again)


@pytest.mark.slow
def test_submitit_killed_job_fails_its_run_and_the_grid_resumes(tmp_path: Path, cache_dir: Path):
    pytest.importorskip("submitit")
    specs = _grid(cache_dir, slow_epochs=40)
    out = tmp_path / "out"
    options = ExecutorOptions(submitit_cluster="local", timeout_min=10)
    killer = _kill_run_when_started(out, specs[2].run_id, "submitit")
    summaries = run_grid(specs, out, executor="slurm", jobs=2, progress=False, executor_options=options)
    killer.join(timeout=5)
    assert [s["status"] for s in summaries] == ["completed", "completed", "failed"]
    assert "WorkerFailure: local job" in summaries[2]["error"] and specs[2].run_id in summaries[2]["error"]
    again = run_grid(specs, out, executor="slurm", progress=False, executor_options=options)
    assert [bool(s.get("skipped")) for s in again] == [True, True, False]
    assert all(s["status"] == "completed" for s in again)


# ---------------------------------------------------------------------------------------------- no engines
def test_resources_per_run(tmp_path: Path):
    base = {"dataset": {"name": "synthetic", "preset": "tiny"}}
    plain = spec_from_dict(base)
    assert run_resources(plain, ExecutorOptions()) == Resources(cpus=1.0, gpus=0.0, memory=None)
    dp = spec_from_dict({**base, "system": {"name": "pipelined", "device": "cuda", "options": {"world_size": 2}}})
    resources = run_resources(dp, ExecutorOptions(memory_per_run=parse_memory("1.5G")))
    assert (resources.cpus, resources.gpus, resources.memory) == (2.0, 2.0, 3 << 29)
    resources = run_resources(dp, ExecutorOptions(cpus_per_run=4, gpus_per_run=0))
    assert (resources.cpus, resources.gpus) == (4, 0)
    assert parse_memory("512M") == 512 << 20 and parse_memory("1024") == 1024 and parse_memory(None) is None
    with pytest.raises(ConfigError, match="--memory-per-run: expected a size"):
        parse_memory("lots")
    with pytest.raises(ConfigError, match="--cpus-per-run: expected a non-negative number"):
        ExecutorOptions(cpus_per_run=-1)


def test_missing_ray_is_a_one_line_error(tmp_path: Path, cache_dir: Path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ConfigError, match=r"^--executor ray: needs the 'ray' package \(pip install 'gnnsuite\[scale\]'\)$"):
        run_grid(_grid(cache_dir), tmp_path / "out", executor="ray", progress=False)


def test_cli_grid_options():
    args = build_parser().parse_args(["grid", "g.yaml", "--executor", "ray", "--address", "auto", "--cpus-per-run",
                                      "2", "--gpus-per-run", "1", "--memory-per-run", "8G"])
    assert (args.executor, args.address, args.cpus_per_run, args.gpus_per_run, args.memory_per_run, args.jobs) == \
        ("ray", "auto", 2.0, 1.0, "8G", None)
    args = build_parser().parse_args(["grid", "g.yaml", "--executor", "slurm", "--slurm-partition", "gpu",
                                      "--submitit-cluster", "local", "--timeout-min", "30"])
    assert (args.slurm_partition, args.submitit_cluster, args.timeout_min) == ("gpu", "local", 30)
