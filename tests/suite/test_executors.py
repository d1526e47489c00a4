"""Grid executors on real engines: a 2-node Ray cluster (``ray start`` processes on loopback), a local Ray instance,
and submitit's local executor (Slurm's interface). Same folder layout, resume, a killed node or job retried once
elsewhere with every run completed exactly once, placement recorded, and one-line errors without an engine."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from suite.cli import build_parser, main
from suite.config import spec_from_dict
from suite.errors import ConfigError
from suite.executors import ExecutorOptions, Resources, parse_memory, run_lock, run_resources, slurm_parameters
from suite.grid import expand_grid, run_grid
from suite.recorder import is_complete, read_records, read_summary
from tests.support.processes import child_env, gnnsuite, require_engine, write_grid


def _specs(grid: Path) -> list:
    return expand_grid(grid)


def _check_exactly_once(out: Path, specs: list, epochs: int) -> None:
    """Every run: one folder in the usual layout, completed, with one attempt's epochs (each epoch once)."""
    for spec in specs:
        run_dir = out / spec.run_id
        assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoints", "config.yaml", "records.jsonl",
                                                             "summary.json"]
        assert is_complete(run_dir)
        epochs_seen = [r["epoch"] for r in read_records(run_dir) if r["kind"] == "epoch"]
        assert epochs_seen == list(range(epochs)), (spec.run_id, epochs_seen)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(s.run_id for s in specs)


def _results_table(out: Path, env: dict, prefix: list[str] | None = None) -> list[list[str]]:
    done = gnnsuite(["results", str(out), "--columns", "run_id,status,placement.node_name,placement.attempt"], env,
                    prefix)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].split() == ["run_id", "status", "placement.node_name", "placement.attempt"]
    return [line.split() for line in lines[1:]]


def _open_by(processes: list[psutil.Process], path: Path) -> bool:
    for process in processes:
        try:
            if any(f.path == str(path) for f in process.open_files()):
                return True
        except psutil.Error:
            continue
    return False


# ---------------------------------------------------------------------------------------------- ray cluster
@pytest.mark.executor("ray-cluster (2 nodes)")
def test_ray_cluster_grid_spreads_over_both_nodes(tmp_path: Path, cache_dir: Path, ray_cluster):
    grid = write_grid(tmp_path / "grid.yaml", cache_dir, seeds=[0, 1, 2, 3])
    out = tmp_path / "out"
    env = ray_cluster.env(child_env())
    argv = ["grid", str(grid), "--out", str(out), "--executor", "ray", "--address", ray_cluster.address, "--quiet"]
    done = gnnsuite(argv, env, ray_cluster.command([]))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "4 ran, 0 already complete, 0 failed" in done.stdout
    specs = _specs(grid)
    _check_exactly_once(out, specs, epochs=1)
    placements = [read_summary(out / spec.run_id)["placement"] for spec in specs]
    assert {p["node_name"] for p in placements} == {"head", "worker1"}  # 1 CPU per node: both nodes take runs
    assert all(p["executor"] == "ray" and p["attempt"] == 1 and p["node_id"] for p in placements)
    assert len({p["node_id"] for p in placements}) == 2

    table = _results_table(out, env)  # one table of every run, wherever it ran
    assert sorted(row[0] for row in table) == sorted(spec.run_id for spec in specs)
    assert {row[2] for row in table} == {"head", "worker1"} and {row[1] for row in table} == {"completed"}
    print("\n".join(" ".join(row) for row in table))

    again = gnnsuite(argv, env, ray_cluster.command([]))  # resume: nothing is run twice
    assert again.returncode == 0 and "0 ran, 4 already complete, 0 failed" in again.stdout


@pytest.mark.executor("ray-cluster (2 nodes)")
def test_ray_cluster_worker_node_killed_mid_grid(tmp_path: Path, cache_dir: Path, ray_cluster):
    """The worker node dies (every process of it SIGKILLed) while it runs a run: that run is retried once, on the
    head node, and the grid completes with every run exactly once."""
    epochs = 6
    grid = write_grid(tmp_path / "grid.yaml", cache_dir, seeds=[10, 11, 12, 13], epochs=epochs, batch_size=8,
                      limit_batches=8)
    specs = _specs(grid)
    out = tmp_path / "out"
    env = ray_cluster.env(child_env())
    argv = ["grid", str(grid), "--out", str(out), "--executor", "ray", "--address", ray_cluster.address, "--quiet"]
    driver = subprocess.Popen([*ray_cluster.command([]), sys.executable, "-m", "suite", *argv], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    killed: dict = {}
    try:
        deadline = time.monotonic() + 180
        while not killed and driver.poll() is None and time.monotonic() < deadline:
            for spec in specs:  # a run that the worker node runs now, past its first epoch
                run_dir = out / spec.run_id
                if not any(r["kind"] == "epoch" for r in read_records(run_dir)) or is_complete(run_dir):
                    continue
                if _open_by(ray_cluster.node_processes("worker1"), run_dir / "records.jsonl"):
                    killed = {"run_id": spec.run_id, "pids": ray_cluster.kill_node("worker1")}
                    break
            time.sleep(0.1)
        stdout, stderr = driver.communicate(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
        if "worker1" not in ray_cluster.nodes:  # a fresh worker node for the tests after this one
            ray_cluster.add_node("worker1", num_cpus=1)
    assert killed, f"no run was seen on worker1 before the grid ended:\n{stderr[-3000:]}"
    assert driver.returncode == 0, stderr[-3000:]
    assert "4 ran, 0 already complete, 0 failed" in stdout
    retried = [line for line in stderr.splitlines() if "retrying (attempt 2 of 2)" in line]
    assert any(f"run {killed['run_id']}: attempt 1 on worker1 died" in line and "NodeDiedError" in line
               for line in retried), stderr[-3000:]

    _check_exactly_once(out, specs, epochs)
    summaries = {spec.run_id: read_summary(out / spec.run_id) for spec in specs}
    victim = summaries[killed["run_id"]]["placement"]
    assert victim["attempt"] == 2 and victim["node_name"] == "head"
    assert [p["node_name"] for p in victim["previous_attempts"]] == ["worker1"]
    assert "NodeDiedError" in victim["previous_attempts"][0]["error"]
    retried_runs = sorted(run_id for run_id, s in summaries.items() if s["placement"]["attempt"] > 1)
    # (a run queued on worker1 that had not started yet has no node in its first attempt's record)
    assert all(summaries[r]["placement"]["previous_attempts"][0].get("node_name", "worker1") == "worker1"
               for r in retried_runs)
    assert all(s["placement"]["attempt"] <= 2 for s in summaries.values())  # retried once, no more
    print(f"\nkilled worker1 ({len(killed['pids'])} processes) while it ran {killed['run_id']}")
    print("\n".join(retried))
    for run_id, summary in summaries.items():
        p = summary["placement"]
        print(f"{run_id}: {summary['status']} on {p['node_name']}, attempt {p['attempt']}"
              + (f" (before: {p['previous_attempts'][0].get('node_name', 'not started')})"
                 if p["previous_attempts"] else ""))
    print(f"runs retried: {len(retried_runs)}; completed: {sum(s['status'] == 'completed' for s in summaries.values())}"
          f" of {len(specs)}, each once")


# ---------------------------------------------------------------------------------------------- ray, one machine
@pytest.mark.executor("ray (local instance)")
def test_ray_local_instance_grid_runs_and_resumes(tmp_path: Path, cache_dir: Path):
    """Without --address the executor starts (and stops) a Ray instance of its own for the grid."""
    require_engine("ray")
    from suite.ray_cluster import LoopbackNamespace

    grid = write_grid(tmp_path / "grid.yaml", cache_dir, seeds=[0, 1])
    out = tmp_path / "out"
    ray_tmp = Path(tempfile.mkdtemp(prefix="ray-"))  # short: Ray's socket paths must fit in 107 bytes
    env = child_env({"RAY_TMPDIR": str(ray_tmp), "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"})
    env.pop("RAY_ADDRESS", None)
    namespace = LoopbackNamespace() if LoopbackNamespace.available() else None
    prefix = namespace.command([]) if namespace else []
    try:
        argv = ["grid", str(grid), "--out", str(out), "--executor", "ray", "--cpus-per-run", "1", "--quiet"]
        done = gnnsuite(argv, env, prefix)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "2 ran, 0 already complete, 0 failed" in done.stdout
        _check_exactly_once(out, _specs(grid), epochs=1)
        again = gnnsuite(argv, env, prefix)
        assert again.returncode == 0 and "0 ran, 2 already complete, 0 failed" in again.stdout
        local = run_grid(_specs(grid), out, executor="local", progress=False)  # the local executor agrees
        assert all(s.get("skipped") for s in local)
    finally:
        if namespace:
            namespace.close()
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.mark.executor("ray (local instance)")
def test_ray_without_a_cluster_is_a_one_line_error(tmp_path: Path, cache_dir: Path, monkeypatch, capsys):
    require_engine("ray")
    from suite.ray_cluster import LoopbackNamespace, free_port

    grid = write_grid(tmp_path / "grid.yaml", cache_dir, seeds=[0])
    out = tmp_path / "out"
    # --address auto: Ray also finds clusters by their running processes (another test's, say), so the driver
    # runs where it sees none: its own PID namespace (and loopback-only network, where it can be made)
    env = child_env({"RAY_TMPDIR": str(tmp_path)})
    env.pop("RAY_ADDRESS", None)
    namespace = LoopbackNamespace() if LoopbackNamespace.available() else None
    try:
        prefix = (namespace.command([]) if namespace else []) + ["unshare", "--pid", "--fork", "--mount-proc"]
        done = gnnsuite(["grid", str(grid), "--out", str(out), "--executor", "ray", "--address", "auto",
                         "--quiet"], env, prefix if LoopbackNamespace.available() else None, timeout=120)
    finally:
        if namespace:
            namespace.close()
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert err[-1].startswith("gnnsuite: error: --executor ray --address auto: no running Ray cluster found"), err
    assert not any("Traceback" in line for line in err)

    # an address where nothing listens (loopback): refused at once, not after Ray's minutes of retries
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    address = f"127.0.0.1:{free_port()}"
    status = main(["grid", str(grid), "--out", str(out), "--executor", "ray", "--address", address, "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert err[-1].startswith(f"gnnsuite: error: --executor ray --address {address}: no Ray cluster answers"), err
    assert not out.exists() or not [p for p in out.iterdir() if not p.name.startswith(".")]


# ---------------------------------------------------------------------------------------------- submitit
def _kill_run_when_started(out: Path, run_id: str, match: str) -> threading.Thread:
    """SIGKILL the process holding ``out/run_id/records.jsonl`` open, once its first epoch is recorded; ``match``
    narrows the search to processes whose command line contains it.

    The process is found while its run starts (a scan of every process is slow on a busy machine) and killed by
    pid the moment the first epoch appears, so a short run cannot finish between the two."""
    records = str(out / run_id / "records.jsonl")

    def holder() -> int | None:
        for process in psutil.process_iter(["cmdline"]):
            try:
                if match in " ".join(process.info["cmdline"] or []) and any(
                        f.path == records for f in process.open_files()):
                    return process.pid
            except (psutil.Error, OSError):
                continue
        return None

    def kill() -> None:
        deadline = time.monotonic() + 240
        pid = None
        while time.monotonic() < deadline:
            if pid is None and Path(records).exists():
                pid = holder()
            if pid is not None and any(r["kind"] == "epoch" for r in read_records(out / run_id)):
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


@pytest.mark.executor("slurm (submitit local)")
def test_submitit_local_grid_runs_resumes_and_records_placement(tmp_path: Path, cache_dir: Path):
    require_engine("submitit")
    specs = _specs(write_grid(tmp_path / "grid.yaml", cache_dir, seeds=[0, 1]))
    out = tmp_path / "out"
    options = ExecutorOptions(submitit_cluster="local", timeout_min=10)
    summaries = run_grid(specs, out, executor="slurm", progress=False, executor_options=options)
    assert [s["status"] for s in summaries] == ["completed", "completed"]
    _check_exactly_once(out, specs, epochs=1)
    assert (out / ".submitit").is_dir()  # the jobs' own files, out of the way of the runs
    for summary in summaries:
        placement = summary["placement"]
        assert placement["executor"] == "slurm" and placement["cluster"] == "local" and placement["attempt"] == 1
        assert placement["job_id"] and placement["node_name"] and placement["pid"] != os.getpid()
    again = run_grid(specs, out, executor="slurm", progress=False, executor_options=options)
    assert all(s.get("skipped") for s in again)


@pytest.mark.executor("slurm (submitit local)")
def test_submitit_killed_job_is_retried_once_and_every_run_completes_once(tmp_path: Path, cache_dir: Path):
    require_engine("submitit")
    epochs = 20
    specs = _specs(write_grid(tmp_path / "grid.yaml", cache_dir, seeds=[0, 1], epochs=epochs, batch_size=8,
                              limit_batches=8))
    out = tmp_path / "out"
    notes: list[str] = []
    killer = _kill_run_when_started(out, specs[1].run_id, "submitit")
    from suite.executors import slurm_executor

    summaries = slurm_executor(specs, out.resolve(), jobs=2, overwrite=False, progress=False,
                               on_result=lambda s: None, on_note=notes.append,
                               options=ExecutorOptions(submitit_cluster="local", timeout_min=10))
    killer.join(timeout=5)
    assert [s["status"] for s in summaries] == ["completed"] * 2
    assert len(notes) == 1 and f"run {specs[1].run_id}: attempt 1 on" in notes[0]
    assert "UncompletedJobError" in notes[0] and "retrying (attempt 2 of 2)" in notes[0]
    _check_exactly_once(out, specs, epochs)
    placement = read_summary(out / specs[1].run_id)["placement"]
    assert placement["attempt"] == 2 and len(placement["previous_attempts"]) == 1
    assert placement["previous_attempts"][0]["job_id"] != placement["job_id"]
    assert read_summary(out / specs[0].run_id)["placement"]["attempt"] == 1
    print("\n" + notes[0])


@pytest.mark.slow
@pytest.mark.executor("slurm (submitit local)")
def test_submitit_no_retries_fails_the_run_and_the_grid_resumes(tmp_path: Path, cache_dir: Path):
    require_engine("submitit")
    specs = _specs(write_grid(tmp_path / "grid.yaml", cache_dir, seeds=[0, 1, 2], epochs=20, batch_size=8,
                              limit_batches=8))
    out = tmp_path / "out"
    options = ExecutorOptions(submitit_cluster="local", timeout_min=10, retries=0)
    killer = _kill_run_when_started(out, specs[2].run_id, "submitit")
    summaries = run_grid(specs, out, executor="slurm", jobs=2, progress=False, executor_options=options)
    killer.join(timeout=5)
    assert [s["status"] for s in summaries] == ["completed", "completed", "failed"]
    assert "WorkerFailure: local job" in summaries[2]["error"] and specs[2].run_id in summaries[2]["error"]
    assert read_summary(out / specs[2].run_id)["placement"]["attempt"] == 1
    stamps = {spec.run_id: (out / spec.run_id / "summary.json").stat().st_mtime_ns for spec in specs[:2]}
    again = run_grid(specs, out, executor="slurm", progress=False, executor_options=options)
    assert [bool(s.get("skipped")) for s in again] == [True, True, False]
    assert all(s["status"] == "completed" for s in again)
    assert {spec.run_id: (out / spec.run_id / "summary.json").stat().st_mtime_ns for spec in specs[:2]} == stamps


@pytest.mark.executor("slurm (submitit local)")
def test_submitit_driver_killed_mid_grid_resumes_and_runs_nothing_twice(tmp_path: Path, cache_dir: Path):
    """SIGKILL the grid's driver alone: its submitit jobs go on in the background; the grid started again waits for
    each run they hold (the run's lock), reuses what they completed and runs the rest, each run once."""
    require_engine("submitit")
    epochs = 5
    grid = write_grid(tmp_path / "grid.yaml", cache_dir, seeds=[0, 1], epochs=epochs, batch_size=8, limit_batches=8)
    specs = _specs(grid)
    out = tmp_path / "out"
    argv = ["grid", str(grid), "--out", str(out), "--executor", "slurm", "--submitit-cluster", "local", "--jobs", "1",
            "--quiet"]
    env = child_env()
    driver = subprocess.Popen([sys.executable, "-m", "suite", *argv], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 180
    while not any(any(r["kind"] == "epoch" for r in read_records(out / s.run_id)) for s in specs):
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()[1][-3000:]
        time.sleep(0.1)
    orphans = [p for p in psutil.Process(driver.pid).children(recursive=True)]
    driver.kill()
    driver.communicate()
    done = gnnsuite(argv, env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    _check_exactly_once(out, specs, epochs)
    summaries = [read_summary(out / s.run_id) for s in specs]
    # the run the killed driver had started was completed by its orphaned job, not run again
    assert summaries[0]["placement"]["pid"] in {p.pid for p in orphans}
    assert summaries[1]["placement"]["pid"] not in {p.pid for p in orphans}
    assert not [p for p in orphans if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


# ---------------------------------------------------------------------------------------------- no engines
def test_slurm_without_sbatch_is_a_one_line_error(tmp_path: Path, cache_dir: Path, monkeypatch, capsys):
    require_engine("submitit")
    grid = write_grid(tmp_path / "grid.yaml", cache_dir, seeds=[0])
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch on it
    status = main(["grid", str(grid), "--out", str(tmp_path / "out"), "--executor", "slurm", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len([line for line in err if line.startswith("gnnsuite: error:")]) == 1
    assert err[-1] == ("gnnsuite: error: --executor slurm: no Slurm here (sbatch is not on PATH); run the grid on a "
                       "Slurm login node, or add --submitit-cluster local to run its jobs on this machine")


def _hold_lock(out: str, run_id: str, ready: str) -> None:
    with run_lock(Path(out), run_id):
        Path(ready).touch()
        time.sleep(3)


def test_run_lock_excludes_a_second_attempt_until_the_first_lets_go(tmp_path: Path):
    import multiprocessing

    ready = tmp_path / "ready"
    holder = multiprocessing.get_context("spawn").Process(target=_hold_lock, args=(str(tmp_path), "r1", str(ready)))
    holder.start()
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(RuntimeError, match=r"another attempt of r1 still holds the run \(pid \d+"):
            with run_lock(tmp_path, "r1", wait_s=0.5):
                pass
        started = time.monotonic()
        with run_lock(tmp_path, "r1", wait_s=30):  # granted once the holder exits
            assert not holder.is_alive() or time.monotonic() - started > 0
        holder.join(timeout=10)
        assert holder.exitcode == 0
    finally:
        holder.kill()


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
    with pytest.raises(ConfigError, match="--retries: expected a non-negative number"):
        ExecutorOptions(retries=-1)
    options = ExecutorOptions(slurm_partition="gpu", slurm_account="lab", slurm_qos="high", slurm_constraint="a100",
                              slurm_setup=("module load cuda",), timeout_min=90)
    parameters = slurm_parameters(Resources(cpus=4, gpus=0, memory=3 << 29), options, dp, exclude=["node7"])
    assert parameters == {"name": f"gnnsuite-{dp.run_id}", "timeout_min": 90, "cpus_per_task": 4, "gpus_per_node": 0,
                          "tasks_per_node": 1, "nodes": 1, "mem_gb": 2, "slurm_partition": "gpu",
                          "slurm_account": "lab", "slurm_qos": "high", "slurm_constraint": "a100",
                          "slurm_setup": ["module load cuda"], "slurm_exclude": "node7"}


def test_slurm_settings_reach_the_sbatch_script(tmp_path: Path, monkeypatch):
    """The README's Slurm settings, through submitit's real Slurm executor, into the sbatch script it would submit
    (submitit builds that executor only where ``srun`` exists: a stub on PATH, never run)."""
    submitit = require_engine("submitit")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "srun").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "bin" / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    spec = spec_from_dict({"dataset": {"name": "synthetic", "preset": "tiny"}})
    options = ExecutorOptions(slurm_partition="gpu", slurm_account="lab", slurm_qos="high", slurm_constraint="a100",
                              slurm_setup=("module load cuda/12.4",), timeout_min=120)
    executor = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="slurm")
    executor.update_parameters(**slurm_parameters(Resources(cpus=8, gpus=1, memory=32 << 30), options, spec,
                                                  exclude=["node7"]))
    script = executor._executor._make_submission_file_text("python -m suite", "uid")
    for line in ("#SBATCH --partition=gpu", "#SBATCH --account=lab", "#SBATCH --qos=high", "#SBATCH --constraint=a100",
                 "#SBATCH --cpus-per-task=8", "#SBATCH --gpus-per-node=1", "#SBATCH --mem=32GB", "#SBATCH --time=120",
                 "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1", "#SBATCH --exclude=node7",
                 f"#SBATCH --job-name=gnnsuite-{spec.run_id}", "module load cuda/12.4"):
        assert line in script.splitlines(), line


def test_missing_ray_is_a_one_line_error(tmp_path: Path, cache_dir: Path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    specs = _specs(write_grid(tmp_path / "grid.yaml", cache_dir, seeds=[0]))
    with pytest.raises(ConfigError, match=r"^--executor ray: needs the 'ray' package \(pip install 'gnnsuite\[scale\]'\)$"):
        run_grid(specs, tmp_path / "out", executor="ray", progress=False)


def test_cli_grid_options():
    args = build_parser().parse_args(["grid", "g.yaml", "--executor", "ray", "--address", "auto", "--cpus-per-run",
                                      "2", "--gpus-per-run", "1", "--memory-per-run", "8G"])
    assert (args.executor, args.address, args.cpus_per_run, args.gpus_per_run, args.memory_per_run, args.jobs,
            args.retries) == ("ray", "auto", 2.0, 1.0, "8G", None, 1)
    args = build_parser().parse_args(["grid", "g.yaml", "--executor", "slurm", "--slurm-partition", "gpu",
                                      "--submitit-cluster", "local", "--timeout-min", "30", "--retries", "0",
                                      "--slurm-setup", "module load cuda", "--slurm-setup", "source venv/bin/activate"])
    assert (args.slurm_partition, args.submitit_cluster, args.timeout_min, args.retries, args.slurm_setup) == \
        ("gpu", "local", 30, 0, ["module load cuda", "source venv/bin/activate"])
