"""Grid executors on engines users already run: Ray (``ray``) and Slurm through submitit (``slurm``).

Both run every spec of a grid as one task (Ray) or job (Slurm) through :func:`suite.grid.run_one`, which writes
``OUT/<run_id>/`` exactly as the local executor does; ``OUT`` must therefore be on a file system the workers share
with the driver (a local Ray instance, or a cluster's shared storage). Resume semantics are those of
:func:`suite.grid.run_grid`: a run is complete when its ``summary.json`` says ``completed``; a grid started again
after a kill (of the driver, or of a worker) skips those and redoes the rest. A task or job whose worker dies is
recorded as ``failed`` with ``WorkerFailure: Ray worker died while running <run_id> (...)`` and the grid goes on;
it is retried the next time the grid runs (Ray tasks are submitted with ``max_retries=0`` for this reason).

Resources per run (:func:`run_resources`): CPUs ``--cpus-per-run`` (default: the spec's data-parallel
``world_size``, else 1), GPUs ``--gpus-per-run`` (default: ``world_size`` when ``system.device`` is ``cuda...``,
else 0), memory ``--memory-per-run`` (``8G``, ``512M`` or bytes; default: none requested). ``--jobs N`` caps the
runs in flight (default: as many as the cluster's resources allow).

Ray: ``--address`` connects to a running cluster (``auto``, ``ray://host:10001``, ``host:6379``); without it a
local instance is started for the grid and stopped after it (an instance already initialized in the process, e.g.
``ray.init(num_cpus=2)``, is used as it is). Slurm: jobs are submitted by ``submitit.AutoExecutor`` into
``OUT/.submitit/`` (``--slurm-partition``, ``--timeout-min``); ``--submitit-cluster local`` runs them as local
processes instead (submitit's local executor: for trying a grid out, and for the tests).

Ray and submitit are optional (``pip install 'gnnsuite[scale]'``); without them these executors fail with a
one-line :class:`~suite.errors.ConfigError`.
"""

from __future__ import annotations

import importlib
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from suite.config import RunSpec
from suite.errors import ConfigError
from suite.grid import EXECUTORS, failed_summary, run_one


class WorkerFailure(RuntimeError):
    """A Ray worker or a Slurm job died (or was cancelled) while running a spec."""


@dataclass(frozen=True)
class ExecutorOptions:
    """Options of the ``ray`` and ``slurm`` executors (the local one ignores them).

    Attributes:
        address: Ray cluster address (None: a local instance started for the grid).
        cpus_per_run: CPUs requested per run (None: the spec's ``world_size``).
        gpus_per_run: GPUs requested per run (None: ``world_size`` for ``system.device: cuda...``, else 0).
        memory_per_run: bytes of memory requested per run (None: nothing requested).
        slurm_partition: the Slurm partition (None: the cluster's default).
        timeout_min: a Slurm job's time limit, in minutes.
        submitit_cluster: ``slurm``, or ``local`` / ``debug`` to run submitit's jobs on this machine.
    """

    address: str | None = None
    cpus_per_run: float | None = None
    gpus_per_run: float | None = None
    memory_per_run: int | None = None
    slurm_partition: str | None = None
    timeout_min: int = 24 * 60
    submitit_cluster: Literal["slurm", "local", "debug"] = "slurm"

    def __post_init__(self) -> None:
        for name in ("cpus_per_run", "gpus_per_run", "memory_per_run"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"--{name.replace('_', '-')}: expected a non-negative number, got {value}")
        if self.timeout_min <= 0:
            raise ConfigError(f"--timeout-min: expected a positive number of minutes, got {self.timeout_min}")
        if self.submitit_cluster not in ("slurm", "local", "debug"):
            raise ConfigError(f"--submitit-cluster: expected slurm, local or debug, got {self.submitit_cluster!r}")


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_memory(text: str | int | None, option: str = "--memory-per-run") -> int | None:
    """``8G``, ``512M``, ``1.5G``, ``1024`` (bytes) -> bytes; None stays None."""
    if text is None or isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)i?B?\s*", str(text), flags=re.IGNORECASE)
    if not match:
        raise ConfigError(f"{option}: expected a size like 8G, 512M or a number of bytes, got {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


@dataclass(frozen=True)
class Resources:
    """What one run asks of the cluster."""

    cpus: float
    gpus: float
    memory: int | None


def run_resources(spec: RunSpec, options: ExecutorOptions) -> Resources:
    """The resource request of one run (see the module docstring for the defaults)."""
    from systems.distributed import world_size_of

    world = world_size_of(spec)
    on_cuda = spec.system.device.startswith("cuda")
    cpus = options.cpus_per_run if options.cpus_per_run is not None else float(world)
    gpus = options.gpus_per_run if options.gpus_per_run is not None else (float(world) if on_cuda else 0.0)
    return Resources(cpus=cpus, gpus=gpus, memory=options.memory_per_run)


def _require(module: str, executor: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"--executor {executor}: needs the '{module}' package (pip install 'gnnsuite[scale]')") \
            from None


def _run_in(cwd: str, spec: RunSpec, out: str, overwrite: bool) -> dict[str, Any]:
    """A task's body: run one spec from the driver's working folder (relative dataset paths resolve as there)."""
    if os.path.isdir(cwd):
        os.chdir(cwd)
    return run_one(spec, out, overwrite)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _drive(specs: Sequence[RunSpec], out: Path, jobs: int | None, submit: Callable[[RunSpec], Any],
           wait: Callable[[list[Any]], list[Any]], result: Callable[[Any, RunSpec], dict[str, Any]],
           on_result: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """Submit the specs (at most ``jobs`` in flight), collect each as it finishes; summaries in spec order."""
    queue = list(specs)
    pending: dict[Any, RunSpec] = {}
    results: dict[str, dict[str, Any]] = {}
    while queue or pending:
        while queue and (jobs is None or len(pending) < jobs):
            spec = queue.pop(0)
            pending[submit(spec)] = spec
        for handle in wait(list(pending)):
            spec = pending.pop(handle)
            try:
                summary = result(handle, spec)
            except WorkerFailure as err:
                summary = failed_summary(spec, out, err)
            results[spec.run_id] = summary
            on_result(summary)
    return [results[spec.run_id] for spec in specs]


# ---------------------------------------------------------------------------------------------- ray
@EXECUTORS.register("ray")
def ray_executor(specs: Sequence[RunSpec], out: Path, *, jobs: int | None, overwrite: bool, progress: bool,
                 on_result: Callable[[dict[str, Any]], None],
                 options: ExecutorOptions | None = None) -> list[dict[str, Any]]:
    """One Ray task per run, with its resource request (:func:`run_resources`); see the module docstring."""
    ray = _require("ray", "ray")
    options = options or ExecutorOptions()
    out = Path(out).resolve()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=options.address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    task = ray.remote(_run_in)
    cwd = os.getcwd()
    pending_refs: list[Any] = []

    def submit(spec: RunSpec):
        resources = run_resources(spec, options)
        ref = task.options(num_cpus=resources.cpus, num_gpus=resources.gpus, memory=resources.memory,
                           max_retries=0, name=f"gnnsuite:{spec.run_id}").remote(cwd, spec, str(out), overwrite)
        pending_refs.append(ref)
        return ref

    def wait(refs: list[Any]) -> list[Any]:
        done, _ = ray.wait(refs, num_returns=1)
        return done

    def result(ref, spec: RunSpec) -> dict[str, Any]:
        pending_refs.remove(ref)
        try:
            return ray.get(ref)
        except ray.exceptions.RayError as err:
            raise WorkerFailure(f"Ray worker died while running {spec.run_id} ({type(err).__name__}: "
                                f"{_first_line(err)})") from None

    try:
        return _drive(specs, out, jobs, submit, wait, result, on_result)
    except BaseException:
        for ref in pending_refs:  # an interrupted driver takes its runs down with it (they redo next time)
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001
                pass
        raise
    finally:
        if started_here:
            ray.shutdown()


# ---------------------------------------------------------------------------------------------- slurm
@EXECUTORS.register("slurm")
def slurm_executor(specs: Sequence[RunSpec], out: Path, *, jobs: int | None, overwrite: bool, progress: bool,
                   on_result: Callable[[dict[str, Any]], None],
                   options: ExecutorOptions | None = None) -> list[dict[str, Any]]:
    """One submitit job per run (Slurm, or submitit's local executor); see the module docstring."""
    submitit = _require("submitit", "slurm")
    options = options or ExecutorOptions()
    out = Path(out).resolve()
    executor = submitit.AutoExecutor(folder=out / ".submitit", cluster=options.submitit_cluster)
    cwd = os.getcwd()
    submitted: list[Any] = []

    def submit(spec: RunSpec):
        resources = run_resources(spec, options)
        parameters: dict[str, Any] = {"name": f"gnnsuite-{spec.run_id}", "timeout_min": options.timeout_min,
                                      "cpus_per_task": max(1, int(round(resources.cpus))),
                                      "gpus_per_node": int(round(resources.gpus)), "tasks_per_node": 1, "nodes": 1}
        if resources.memory is not None:
            parameters["mem_gb"] = max(1, -(-resources.memory // (1 << 30)))
        if options.slurm_partition:
            parameters["slurm_partition"] = options.slurm_partition
        executor.update_parameters(**parameters)
        job = executor.submit(_run_in, cwd, spec, str(out), overwrite)
        submitted.append(job)
        return job

    def wait(handles: list[Any]) -> list[Any]:
        while True:
            done = [job for job in handles if job.done()]
            if done:
                return done
            time.sleep(0.5)

    def result(job, spec: RunSpec) -> dict[str, Any]:
        submitted.remove(job)
        try:
            return job.result()
        except Exception as err:  # noqa: BLE001  (UncompletedJobError, FailedJobError: the job died)
            raise WorkerFailure(f"{options.submitit_cluster} job {job.job_id} died while running {spec.run_id} "
                                f"({type(err).__name__}: {_first_line(err)})") from None

    try:
        return _drive(specs, out, jobs, submit, wait, result, on_result)
    except BaseException:
        for job in submitted:
            try:
                job.cancel(check=False)
            except Exception:  # noqa: BLE001
                pass
        raise


__all__ = ["ExecutorOptions", "Resources", "WorkerFailure", "parse_memory", "ray_executor", "run_resources",
           "slurm_executor"]
