"""Process groups and rank processes of data-parallel runs (``torch.distributed``): the harness's part.

:func:`suite.runner.run_spec` runs a spec whose ``system.options.world_size`` is above 1 on that many ranks:
:func:`launch` spawns one process per rank (``python -m suite.runner PAYLOAD``, a TCP rendezvous on 127.0.0.1) and
waits for them, each rank joins the group (:func:`init_rank`) and runs the spec again as one rank; under
``torchrun`` each process is a rank already. A rank that fails or dies fails the run (:class:`RankFailure`,
:func:`record_failure`); ranks die with their launcher.

What a rank trains with, the data-parallel variant of a system (gradient all-reduce, embedding exchange, per-rank
epoch records), belongs to the systems layer (:mod:`systems.distributed`, registered in
:data:`suite.registry.SYSTEM_VARIANTS` as ``data_parallel``); this module knows no system.
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from suite.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from suite.config import RunSpec

# Environment variables of a rank (the ones torchrun sets).
_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class DistributedOptions(BaseModel):
    """The data-parallel part of ``system.options`` (shared by ``in_memory`` and ``pipelined``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    world_size: int = Field(1, ge=1, description="data-parallel ranks (1: no torch.distributed)")
    dist_backend: Literal["auto", "gloo", "nccl"] = Field("auto", description="auto: nccl on CUDA, else gloo")
    dist_timeout_s: float = Field(300.0, gt=0, description="seconds a collective waits for the other ranks")


class RankFailure(RuntimeError):
    """A rank of a data-parallel run failed or died (the message names the rank and what happened)."""


@dataclass(frozen=True)
class RankContext:
    """Who this process is in a data-parallel run.

    Attributes:
        rank: global rank (0 records the run).
        world_size: number of ranks.
        local_rank: rank on this machine (its CUDA device index).
        backend: ``gloo`` or ``nccl``.
    """

    rank: int
    world_size: int
    local_rank: int
    backend: str


_CONTEXT: RankContext | None = None


# ---------------------------------------------------------------------------------------------- options
def options_of(spec: "RunSpec") -> DistributedOptions:
    """The spec's validated data-parallel options (defaults for systems without them)."""
    from suite.config import validate_system_options

    options = validate_system_options(spec)
    if isinstance(options, DistributedOptions):
        return options
    return DistributedOptions()


def world_size_of(spec: "RunSpec") -> int:
    """``system.options.world_size`` of the spec (1 for systems without data-parallel options)."""
    return options_of(spec).world_size


def current() -> RankContext | None:
    """This process's rank context, once the process group is up (None outside data-parallel runs)."""
    return _CONTEXT


def is_rank_process() -> bool:
    """Whether this process is a rank already (spawned by :func:`launch`, or by ``torchrun``)."""
    return _CONTEXT is not None or ("RANK" in os.environ and "WORLD_SIZE" in os.environ)


def is_main_rank() -> bool:
    """Rank 0, or no data-parallel run at all."""
    return _CONTEXT is None or _CONTEXT.rank == 0


def _backend(options: DistributedOptions, device_type: str) -> str:
    if options.dist_backend != "auto":
        return options.dist_backend
    return "nccl" if device_type == "cuda" else "gloo"


# ---------------------------------------------------------------------------------------------- process group
def init_rank(spec: "RunSpec", device: torch.device) -> tuple[RankContext, torch.device]:
    """Join the process group from the environment (``RANK``, ``WORLD_SIZE``, ...); return the context and this
    rank's device (``cuda:<local rank>`` on CUDA)."""
    global _CONTEXT
    import torch.distributed as dist

    options = options_of(spec)
    world = int(os.environ["WORLD_SIZE"])
    if world != options.world_size:
        raise ConfigError(f"system.options.world_size: the spec says {options.world_size} but the launcher "
                          f"started {world} ranks (WORLD_SIZE)")
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    backend = _backend(options, device.type)
    if not dist.is_initialized():
        dist.init_process_group(backend, rank=rank, world_size=world,
                                timeout=_dt.timedelta(seconds=options.dist_timeout_s),
                                **({"device_id": device} if backend == "nccl" else {}))
    _CONTEXT = RankContext(rank=rank, world_size=world, local_rank=local_rank, backend=backend)
    return _CONTEXT, device


def shutdown_rank() -> None:
    """Leave the process group (idempotent)."""
    global _CONTEXT
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    _CONTEXT = None


def collective(what: str, fn, *args, **kwargs):
    """Run a collective; a peer that died or timed out becomes a :class:`RankFailure` naming this rank."""
    try:
        return fn(*args, **kwargs)
    except RuntimeError as err:  # DistBackendError, gloo/nccl errors, timeouts
        rank = _CONTEXT.rank if _CONTEXT else "?"
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RankFailure(f"rank {rank}: {what} failed: another rank died or timed out ({first})") from err



# ---------------------------------------------------------------------------------------------- launching
class NullRecorder:
    """The recorder of ranks other than 0: records nothing."""

    def __init__(self, out: str | os.PathLike, spec: "RunSpec"):
        self.spec = spec
        self.run_id = spec.run_id
        self.run_dir = Path(out) / spec.run_id

    def open(self) -> None:
        """Nothing to open."""

    def record(self, kind: str, **fields: Any) -> None:
        """Drop the record."""

    def finish(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The summary, not written."""
        return {"run_id": self.run_id, **summary, "status": "completed"}

    def fail(self, error: BaseException, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        """The failure, not written."""
        return {"run_id": self.run_id, **(summary or {}), "status": "failed", "error": f"{type(error).__name__}: "
                                                                                        f"{error}"}

    def diverge(self, error: BaseException, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        """The divergence, not written."""
        return {**self.fail(error, summary), "status": "diverged"}

    def close(self) -> None:
        """Nothing to close."""


def _pythonpath() -> str:
    """``PYTHONPATH`` for the ranks: this checkout first (the suite need not be installed), then the caller's."""
    root = str(Path(__file__).resolve().parents[1])
    return os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (a rank must not outlive its launcher)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: ranks notice through the collectives' timeout instead
        pass


def rank_main(payload_path: str, run_spec: Callable[..., dict[str, Any]]) -> int:
    """Body of a rank started by :func:`launch`: run the spec of the payload with ``run_spec`` (which joins the
    group through the environment), write the outcome beside the payload; the exit status says how it went."""
    import pickle

    _die_with_parent()
    with open(payload_path, "rb") as file:
        job = pickle.load(file)
    rank, world = job["rank"], job["world"]
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(job["port"]))
    torch.set_num_threads(job["threads"])
    try:
        summary = run_spec(job["spec"], job["out"], overwrite=job["overwrite"], progress=job["progress"] and rank == 0,
                           placement=job.get("placement"))
        outcome: tuple = ("ok", summary if rank == 0 else None)
    except BaseException as err:  # noqa: BLE001  (reported to the launcher, which fails the run)
        outcome = ("error", f"{type(err).__name__}: {err}", traceback.format_exc())
    from suite.io import atomic_write_bytes

    atomic_write_bytes(Path(job["result"]), pickle.dumps(outcome))
    if outcome[0] != "ok":
        sys.stderr.write(outcome[2])
        sys.stderr.flush()
        os._exit(1)  # a failed rank skips the exit handlers: a broken process group may hang in them
    return 0


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def launch(spec: "RunSpec", out: str | os.PathLike, *, device: torch.device, rank_module: str,
           overwrite: bool = False, progress: bool = False, grace_s: float = 5.0,
           placement: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run a data-parallel spec on ``world_size`` spawned processes on this machine; return rank 0's summary.

    Each rank is ``python -m RANK_MODULE PAYLOAD``, a module whose ``__main__`` calls :func:`rank_main` with the
    function that runs a spec (:mod:`suite.runner`); ``device`` is the spec's resolved device.

    The dataset is opened (generated or prepared if needed) here first, so the ranks find it cached. When a rank
    fails or dies, the others get ``grace_s`` to notice and exit, then are killed; the run is recorded as
    ``failed`` with ``rank R of W died (...)`` and :class:`RankFailure` is raised.
    """
    import pickle
    import shutil
    import subprocess
    import tempfile

    from suite.datasets import open_dataset

    options = options_of(spec)
    world = options.world_size
    if device.type == "cuda" and torch.cuda.device_count() < world:
        raise ConfigError(f"system.options.world_size: {world} ranks need {world} CUDA devices, "
                          f"{torch.cuda.device_count()} available")
    open_dataset(spec.dataset, progress=progress)
    threads = max(1, torch.get_num_threads() // world)
    port = _free_port()
    scratch = Path(tempfile.mkdtemp(prefix="gnnsuite-ranks-"))
    processes: list[subprocess.Popen] = []
    messages: dict[int, tuple] = {}
    first_failure: int | None = None
    try:
        for rank in range(world):
            payload = scratch / f"rank{rank}.pkl"
            payload.write_bytes(pickle.dumps({
                "rank": rank, "world": world, "port": port, "threads": threads, "spec": spec, "out": str(out),
                "overwrite": overwrite, "progress": progress, "result": str(scratch / f"rank{rank}.result"),
                "placement": dict(placement) if placement else None,
            }))
            processes.append(subprocess.Popen([sys.executable, "-m", rank_module, str(payload)],
                                              cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": _pythonpath()}))
        failed_at = 0.0
        while True:
            codes = [process.poll() for process in processes]
            if first_failure is None:
                first_failure = next((rank for rank, code in enumerate(codes) if code not in (None, 0)), None)
                failed_at = time.monotonic()
            if all(code is not None for code in codes):
                break
            if first_failure is not None and time.monotonic() - failed_at > grace_s:
                for process in processes:
                    if process.poll() is None:
                        process.kill()
            time.sleep(0.05)
        for rank in range(world):
            result = scratch / f"rank{rank}.result"
            if result.exists():
                messages[rank] = pickle.loads(result.read_bytes())
    except BaseException:
        for process in processes:
            if process.poll() is None:
                process.kill()
        raise
    finally:
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(scratch, ignore_errors=True)

    codes = [process.returncode for process in processes]
    if first_failure is None and all(code == 0 for code in codes) and messages.get(0, ("",))[0] == "ok":
        return messages[0][1]
    error, notes = _failure(world, codes, messages, first_failure)
    record_failure(spec, out, error, notes)
    raise error


def _failure(world: int, codes: list[int | None], messages: dict[int, tuple],
             first_failure: int | None) -> tuple[RankFailure, list[str]]:
    """The run's error: the rank that caused it (one that died without a word, else one whose own error was not
    a lost peer, else the first to exit), and the other ranks' errors as notes."""
    def priority(rank: int) -> tuple[int, int]:
        message = messages.get(rank)
        if codes[rank] in (None, 0) and message and message[0] == "ok":
            return (9, rank)
        if not message or message[0] != "error":
            return (0, rank)  # died: killed, or exited without reporting
        return (2 if message[1].startswith("RankFailure") else 1, rank)

    candidates = sorted(range(world), key=priority)
    culprit = candidates[0] if priority(candidates[0])[0] < 9 else (first_failure or 0)
    message = messages.get(culprit)
    if message and message[0] == "error":
        error = RankFailure(f"rank {culprit} of {world} failed: {message[1]}")
    else:
        error = RankFailure(f"rank {culprit} of {world} died ({_exit_reason(codes[culprit])})")
    notes = [f"rank {r}: {messages[r][1]}" for r in sorted(messages) if r != culprit and messages[r][0] == "error"]
    return error, notes


def record_failure(spec: "RunSpec", out: str | os.PathLike, error: BaseException, notes: list[str]) -> None:
    """Write the run's ``failed`` summary (keeping what rank 0 recorded, records included)."""
    from suite.io import atomic_write_json
    from suite.recorder import FAILED, SUMMARY_FILE, Recorder, read_summary

    run_dir = Path(out) / spec.run_id
    previous = read_summary(run_dir) if run_dir.exists() else None
    if not run_dir.exists():
        Recorder(out, spec).fail(error)
        previous = read_summary(run_dir)
    summary = {**(previous or {"run_id": spec.run_id}), "status": FAILED, "error": f"RankFailure: {error}"}
    if notes:
        summary["rank_errors"] = notes
    atomic_write_json(run_dir / SUMMARY_FILE, summary)


__all__ = [
    "DistributedOptions", "NullRecorder", "RankContext", "RankFailure", "collective", "current", "init_rank",
    "is_main_rank", "is_rank_process", "launch", "options_of", "rank_main", "record_failure", "shutdown_rank",
    "world_size_of",
]
