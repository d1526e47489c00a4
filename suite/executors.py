"""Grid executors on engines users already run: Ray (``ray``) and Slurm through submitit (``slurm``).

Both run every spec of a grid as one task (Ray) or job (Slurm) through :func:`suite.grid.run_one`, which writes
``OUT/<run_id>/`` exactly as the local executor does; ``OUT`` must therefore be on a file system the workers share
with the driver (one machine, or a cluster's shared storage).

Guarantees (the same for both engines):

- **Resume.** A run is complete when its ``summary.json`` says ``completed`` (written atomically at its end); a
  grid started again after a kill (of the driver, of a worker, of a node) skips those and redoes the rest.
- **Retry once, elsewhere.** A task or job whose worker, node or job dies (``WorkerFailure``: Ray's
  ``NodeDiedError``/``WorkerCrashedError``, a Slurm job killed, pre-empted or timed out) is submitted again, up to
  ``--retries`` times (default 1), within the same grid: on Ray away from the node it died on (when another node
  is alive), on Slurm with that node excluded. A run whose retries are spent is recorded as ``failed`` with
  ``WorkerFailure: ...`` and every attempt, and the grid goes on (it is redone the next time the grid runs). A run
  that *fails by itself* (an exception in training) is not retried: it would fail again. Ray's own task retries
  are off (``max_retries=0``) so that every attempt is seen and recorded here.
- **Exactly once.** Each attempt holds an exclusive lock on ``OUT/.attempts/<run_id>.lock`` while it runs (an
  ``flock``, released by the kernel when its process dies), so two attempts of a run never write its folder at
  once, even when a node declared dead is still running its attempt; a retry that finds the run completed by an
  earlier attempt of the same grid takes that result instead of running again. So every run of a grid ends with
  one run folder, one ``records.jsonl`` (of the attempt that completed) and one ``completed`` summary.
- **Placement.** Every summary records where its run ran: ``placement`` = ``{executor, node_name, node_id,
  node_ip, host, pid, attempt, attempt_id, previous_attempts: [{attempt, node_name, ..., error}, ...]}``
  (``node_name`` is the Ray node's ``node-name`` label, else its IP; on Slurm the node's host name). An attempt
  writes its placement to ``OUT/.attempts/<run_id>.<attempt>.json`` when it starts, so the attempts of a dead
  worker are known too. ``gnnsuite results OUT --columns run_id,status,placement.node_name,placement.attempt``
  shows them.

Resources per run (:func:`run_resources`): CPUs ``--cpus-per-run`` (default: the spec's data-parallel
``world_size``, else 1), GPUs ``--gpus-per-run`` (default: ``world_size`` when ``system.device`` is ``cuda...``,
else 0), memory ``--memory-per-run`` (``8G``, ``512M`` or bytes; default: none requested). ``--jobs N`` caps the
runs in flight (default: as many as the cluster's resources allow).

Ray: ``--address`` connects to a running cluster (``auto``, ``host:6379``, ``ray://host:10001``); without it a
local instance is started for the grid and stopped after it (an instance already initialized in the process, e.g.
``ray.init(num_cpus=2)``, is used as it is). Slurm: jobs are submitted by ``submitit.AutoExecutor`` into
``OUT/.submitit/`` (``--slurm-partition``, ``--timeout-min``, ``--slurm-account``, ``--slurm-qos``,
``--slurm-constraint``, ``--slurm-setup``); ``--submitit-cluster local`` runs them as local processes instead
(submitit's local executor, the same interface: for trying a grid out, and for the tests).

Ray and submitit are optional (``pip install 'gnnsuite[scale]'``). Without them, without a cluster at
``--address``, or without ``sbatch`` for ``--executor slurm``, these executors fail with a one-line
:class:`~suite.errors.ConfigError` (exit status 2) before any run starts.
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

from suite.config import RunSpec
from suite.errors import ConfigError
from suite.execution import EXECUTORS, failed_summary, run_one

ATTEMPTS_DIR = ".attempts"
LOCK_WAIT_S = 600.0  # how long an attempt waits for an earlier attempt of its run (still running) to let go


class WorkerFailure(RuntimeError):
    """A Ray worker or node, or a Slurm job, died (or was cancelled) while running a spec.

    Attributes:
        retryable: whether running the spec again can help (the process died; the run itself did not raise).
    """

    def __init__(self, message: str, retryable: bool = True):
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class ExecutorOptions:
    """Options of the ``ray`` and ``slurm`` executors (the local one ignores them).

    Attributes:
        address: Ray cluster address (None: a local instance started for the grid).
        cpus_per_run: CPUs requested per run (None: the spec's ``world_size``).
        gpus_per_run: GPUs requested per run (None: ``world_size`` for ``system.device: cuda...``, else 0).
        memory_per_run: bytes of memory requested per run (None: nothing requested).
        retries: times a run whose worker, node or job died is submitted again within the grid.
        slurm_partition: the Slurm partition (None: the cluster's default).
        slurm_account: the Slurm account to charge (None: the user's default).
        slurm_qos: the Slurm quality of service (None: the default).
        slurm_constraint: Slurm node features required (``--constraint``), e.g. ``a100``.
        slurm_setup: shell lines run in the job before Python starts (``module load ...``, ``source venv``).
        timeout_min: a Slurm job's time limit, in minutes.
        submitit_cluster: ``slurm``, or ``local`` / ``debug`` to run submitit's jobs on this machine.
    """

    address: str | None = None
    cpus_per_run: float | None = None
    gpus_per_run: float | None = None
    memory_per_run: int | None = None
    retries: int = 1
    slurm_partition: str | None = None
    slurm_account: str | None = None
    slurm_qos: str | None = None
    slurm_constraint: str | None = None
    slurm_setup: tuple[str, ...] = ()
    timeout_min: int = 24 * 60
    submitit_cluster: Literal["slurm", "local", "debug"] = "slurm"

    def __post_init__(self) -> None:
        for name in ("cpus_per_run", "gpus_per_run", "memory_per_run"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"--{name.replace('_', '-')}: expected a non-negative number, got {value}")
        if self.retries < 0:
            raise ConfigError(f"--retries: expected a non-negative number, got {self.retries}")
        if self.timeout_min <= 0:
            raise ConfigError(f"--timeout-min: expected a positive number of minutes, got {self.timeout_min}")
        if self.submitit_cluster not in ("slurm", "local", "debug"):
            raise ConfigError(f"--submitit-cluster: expected slurm, local or debug, got {self.submitit_cluster!r}")


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_memory(text: str | int | None, option: str = "--memory-per-run") -> int | None:
    """``8G``, ``512M``, ``1.5G``, ``1024`` (bytes) -> bytes; None stays None."""
    import re

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
    from suite.ranks import world_size_of

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


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# ---------------------------------------------------------------------------------------------- attempts
@dataclass(frozen=True)
class Attempt:
    """One submission of a run.

    Attributes:
        number: 1 for the first submission, 2 for the first retry, ...
        attempt_id: unique id (recorded in the summary's ``placement``).
        previous: the earlier attempts of this run in this grid, as recorded (placement and error).
    """

    number: int = 1
    attempt_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    previous: tuple[dict[str, Any], ...] = ()

    def retry(self, record: dict[str, Any]) -> "Attempt":
        """The next attempt, after this one failed as ``record`` says."""
        return Attempt(self.number + 1, previous=self.previous + (record,))

    @property
    def ids(self) -> set[str]:
        """The ids of the earlier attempts."""
        return {p["attempt_id"] for p in self.previous if p.get("attempt_id")}


def _attempt_file(out: Path, run_id: str, number: int) -> Path:
    return out / ATTEMPTS_DIR / f"{run_id}.{number}.json"


def started_placement(out: Path, run_id: str, attempt: Attempt) -> dict[str, Any]:
    """The placement an attempt wrote when it started (``{}`` if it never started)."""
    try:
        placement = json.loads(_attempt_file(out, run_id, attempt.number).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return placement if placement.get("attempt_id") == attempt.attempt_id else {}


def completed_by(out: Path, run_id: str, attempt_ids: set[str]) -> dict[str, Any] | None:
    """The run's summary when it is complete and was written by one of ``attempt_ids`` (else None)."""
    from suite.recorder import COMPLETED, read_summary

    summary = read_summary(out / run_id)
    if summary and summary.get("status") == COMPLETED and \
            (summary.get("placement") or {}).get("attempt_id") in attempt_ids:
        return summary
    return None


@contextmanager
def run_lock(out: Path, run_id: str, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold ``OUT/.attempts/<run_id>.lock`` (exclusive ``flock``; released by the kernel if this process dies)."""
    path = out / ATTEMPTS_DIR / f"{run_id}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    handle.seek(0)
                    raise RuntimeError(f"{path}: another attempt of {run_id} still holds the run "
                                       f"({handle.read().strip() or 'unknown holder'}) after {wait_s:.0f} s") from None
                time.sleep(0.2)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _engine_placement(engine: str) -> dict[str, Any]:
    """Where this process runs, as the engine names it."""
    host = socket.gethostname()
    placement: dict[str, Any] = {"executor": engine, "host": host, "pid": os.getpid()}
    if engine == "ray":
        import ray

        context = ray.get_runtime_context()
        labels = context.get_node_labels() or {}
        node_ip = ray.util.get_node_ip_address()
        placement.update(node_id=context.get_node_id(), node_ip=node_ip,
                         node_name=labels.get("node-name") or node_ip, worker_id=context.get_worker_id())
    elif engine == "slurm":
        import submitit

        try:
            env = submitit.JobEnvironment()
            placement.update(job_id=str(env.job_id), node_name=env.hostname, cluster=env.cluster)
        except RuntimeError:  # not inside a submitit job
            placement.update(node_name=host)
    return placement


def run_attempt(cwd: str, spec: RunSpec, out: str, overwrite: bool, attempt: Attempt,
                engine: str) -> dict[str, Any]:
    """A task's or job's body: one attempt at one run (see the module docstring: placement, lock, exactly once).

    Runs from the driver's working folder (relative dataset paths resolve as there).
    """
    from suite.io import atomic_write_json

    if os.path.isdir(cwd):
        os.chdir(cwd)
    out_path = Path(out)
    placement = {**_engine_placement(engine), "attempt": attempt.number, "attempt_id": attempt.attempt_id,
                 "previous_attempts": list(attempt.previous)}
    marker = _attempt_file(out_path, spec.run_id, attempt.number)
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(marker, placement)
    with run_lock(out_path, spec.run_id):
        done = completed_by(out_path, spec.run_id, attempt.ids)
        if done is not None:  # an earlier attempt finished after all (its worker died after writing the summary)
            return done
        return run_one(spec, out_path, overwrite, placement=placement)


def _drive(specs: Sequence[RunSpec], out: Path, jobs: int | None, retries: int,
           submit: Callable[[RunSpec, Attempt], Any], wait: Callable[[list[Any]], list[Any]],
           result: Callable[[Any, RunSpec], dict[str, Any]], on_result: Callable[[dict[str, Any]], None],
           on_retry: Callable[[RunSpec, dict[str, Any]], None]) -> list[dict[str, Any]]:
    """Submit the specs (at most ``jobs`` in flight), collect each as it finishes, retry those whose worker died
    (at most ``retries`` times each); summaries in spec order."""
    queue: list[tuple[RunSpec, Attempt]] = [(spec, Attempt()) for spec in specs]
    pending: dict[Any, tuple[RunSpec, Attempt]] = {}
    results: dict[str, dict[str, Any]] = {}
    while queue or pending:
        while queue and (jobs is None or len(pending) < jobs):
            spec, attempt = queue.pop(0)
            pending[submit(spec, attempt)] = (spec, attempt)
        for handle in wait(list(pending)):
            spec, attempt = pending.pop(handle)
            try:
                summary = result(handle, spec)
            except WorkerFailure as err:
                record = {**started_placement(out, spec.run_id, attempt), "attempt": attempt.number,
                          "attempt_id": attempt.attempt_id, "error": f"WorkerFailure: {err}"}
                record.pop("previous_attempts", None)
                done = completed_by(out, spec.run_id, attempt.ids | {attempt.attempt_id})
                if done is not None:
                    summary = done
                elif err.retryable and attempt.number <= retries:
                    on_retry(spec, record)
                    queue.insert(0, (spec, attempt.retry(record)))  # first in line: it has waited already
                    continue
                else:
                    summary = failed_summary(spec, out, err)
                    summary = _with_attempts(out, spec, summary, list(attempt.previous) + [record])
            results[spec.run_id] = summary
            on_result(summary)
    return [results[spec.run_id] for spec in specs]


def _with_attempts(out: Path, spec: RunSpec, summary: dict[str, Any], attempts: list[dict]) -> dict[str, Any]:
    """Add every attempt of a run that ran out of retries to its ``failed`` summary (written atomically)."""
    from suite.io import atomic_write_json
    from suite.recorder import SUMMARY_FILE

    summary = {**summary, "placement": {**attempts[-1], "previous_attempts": attempts[:-1]}}
    atomic_write_json(out / spec.run_id / SUMMARY_FILE, summary)
    return summary


def _retry_note(spec: RunSpec, record: dict[str, Any], retries: int) -> str:
    where = record.get("node_name") or record.get("host") or "an unknown node"
    return (f"run {spec.run_id}: attempt {record['attempt']} on {where} died ({record['error']}); "
            f"retrying (attempt {record['attempt'] + 1} of {retries + 1})")


# ---------------------------------------------------------------------------------------------- ray
# Failures of the process or node that ran a task (retrying may help), as opposed to the task's own exception.
_RAY_SYSTEM_FAILURES = ("WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
                        "OutOfMemoryError", "LocalRayletDiedError", "RaySystemError")


def _check_ray_address(address: str, target: str) -> None:
    """The cluster at ``target`` (``host:port`` or ``ray://host:port``; what ``--address address`` resolved to)
    must accept connections: ``ray.init`` would otherwise wait for minutes."""
    host_port = target.removeprefix("ray://").rsplit(":", 1)
    if len(host_port) != 2 or not host_port[1].isdigit():
        raise ConfigError(f"--address {address}: expected auto, HOST:PORT or ray://HOST:PORT")
    try:
        with socket.create_connection((host_port[0] or "127.0.0.1", int(host_port[1])), timeout=5):
            pass
    except OSError as err:
        found = f" at {target}" if target != address else ""
        raise ConfigError(f"--executor ray --address {address}: no Ray cluster answers{found} "
                          f"({err.strerror or err}); start one with `ray start --head`") from None


def _connect_ray(ray, options: ExecutorOptions) -> None:
    """Connect to the cluster at ``--address`` (checked first), or start a local instance without it."""
    address = options.address
    no_cluster = ConfigError(f"--executor ray --address {address}: no running Ray cluster found; start one with "
                             f"`ray start --head`, or leave --address out for a local instance")
    if address is not None and address != "local":
        target = address
        if address == "auto":  # RAY_ADDRESS, the last cluster started here, or any running one (as Ray resolves it)
            from ray._private import services

            try:
                target = services.canonicalize_bootstrap_address_or_die("auto")
            except ConnectionError:
                raise no_cluster from None
        _check_ray_address(address, target)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except ConnectionError:
        raise no_cluster from None


@EXECUTORS.register("ray")
def ray_executor(specs: Sequence[RunSpec], out: Path, *, jobs: int | None, overwrite: bool, progress: bool,
                 on_result: Callable[[dict[str, Any]], None], options: ExecutorOptions | None = None,
                 on_note: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """One Ray task per attempt at a run, with its resource request (:func:`run_resources`); see the module
    docstring."""
    ray = _require("ray", "ray")
    options = options or ExecutorOptions()
    out = Path(out).resolve()
    started_here = not ray.is_initialized()
    if started_here:
        _connect_ray(ray, options)
    task = ray.remote(run_attempt)
    cwd = os.getcwd()
    pending_refs: list[Any] = []
    note = on_note or (lambda text: None)

    def submit(spec: RunSpec, attempt: Attempt):
        resources = run_resources(spec, options)
        extra: dict[str, Any] = {}
        dead_on = {p.get("node_id") for p in attempt.previous} - {None}
        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")} if dead_on else set()
        if dead_on and alive - dead_on:  # elsewhere: not on a node where an attempt died, while others are alive
            extra["label_selector"] = {"ray.io/node-id": f"!in({','.join(sorted(dead_on))})"}
        ref = task.options(num_cpus=resources.cpus, num_gpus=resources.gpus, memory=resources.memory,
                           max_retries=0, name=f"gnnsuite:{spec.run_id}:{attempt.number}", **extra).remote(
            cwd, spec, str(out), overwrite, attempt, "ray")
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
            kind = type(err).__name__
            raise WorkerFailure(f"Ray worker died while running {spec.run_id} ({kind}: {_first_line(err)})",
                                retryable=kind in _RAY_SYSTEM_FAILURES) from None

    try:
        return _drive(specs, out, jobs, options.retries, submit, wait, result, on_result,
                      lambda spec, record: note(_retry_note(spec, record, options.retries)))
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
def slurm_parameters(resources: Resources, options: ExecutorOptions, spec: RunSpec,
                     exclude: Sequence[str] = ()) -> dict[str, Any]:
    """submitit's parameters of one job (``slurm_*`` ones are ignored by its local executor)."""
    parameters: dict[str, Any] = {"name": f"gnnsuite-{spec.run_id}", "timeout_min": options.timeout_min,
                                  "cpus_per_task": max(1, int(round(resources.cpus))),
                                  "gpus_per_node": int(round(resources.gpus)), "tasks_per_node": 1, "nodes": 1}
    if resources.memory is not None:
        parameters["mem_gb"] = max(1, -(-resources.memory // (1 << 30)))
    for name in ("partition", "account", "qos", "constraint"):
        value = getattr(options, f"slurm_{name}")
        if value:
            parameters[f"slurm_{name}"] = value
    if options.slurm_setup:
        parameters["slurm_setup"] = list(options.slurm_setup)
    if exclude:
        parameters["slurm_exclude"] = ",".join(sorted(set(exclude)))
    return parameters


@EXECUTORS.register("slurm")
def slurm_executor(specs: Sequence[RunSpec], out: Path, *, jobs: int | None, overwrite: bool, progress: bool,
                   on_result: Callable[[dict[str, Any]], None], options: ExecutorOptions | None = None,
                   on_note: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """One submitit job per attempt at a run (Slurm, or submitit's local executor); see the module docstring."""
    submitit = _require("submitit", "slurm")
    options = options or ExecutorOptions()
    if options.submitit_cluster == "slurm" and shutil.which("sbatch") is None:
        raise ConfigError("--executor slurm: no Slurm here (sbatch is not on PATH); run the grid on a Slurm login "
                          "node, or add --submitit-cluster local to run its jobs on this machine")
    out = Path(out).resolve()
    executor = submitit.AutoExecutor(folder=out / ".submitit", cluster=options.submitit_cluster)
    cwd = os.getcwd()
    submitted: list[Any] = []
    note = on_note or (lambda text: None)

    def submit(spec: RunSpec, attempt: Attempt):
        exclude = [p["node_name"] for p in attempt.previous if p.get("node_name")] \
            if options.submitit_cluster == "slurm" else []
        executor.update_parameters(**slurm_parameters(run_resources(spec, options), options, spec, exclude))
        job = executor.submit(run_attempt, cwd, spec, str(out), overwrite, attempt, "slurm")
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
        except Exception as err:  # noqa: BLE001  (UncompletedJobError: killed/timed out; FailedJobError: raised)
            kind = type(err).__name__
            raise WorkerFailure(f"{options.submitit_cluster} job {job.job_id} died while running {spec.run_id} "
                                f"({kind}: {_first_line(err)})", retryable=kind != "FailedJobError") from None

    try:
        return _drive(specs, out, jobs, options.retries, submit, wait, result, on_result,
                      lambda spec, record: note(_retry_note(spec, record, options.retries)))
    except BaseException:
        for job in submitted:
            try:
                job.cancel(check=False)
            except Exception:  # noqa: BLE001
                pass
        raise


__all__ = ["Attempt", "ExecutorOptions", "Resources", "WorkerFailure", "completed_by", "parse_memory",
           "ray_executor", "run_attempt", "run_lock", "run_resources", "slurm_executor", "slurm_parameters",
           "started_placement"]
