"""Running specs for grids: the :class:`Executor` contract, the executor registry and the ``local`` executor.

:func:`suite.grid.run_grid` picks an executor from :data:`EXECUTORS` by name; ``ray`` and ``slurm`` register in
:mod:`suite.executors`. Every executor runs each spec through :func:`run_one`, which records a failed run instead
of raising, so a grid goes on past a failure.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Protocol

from suite.config import RunSpec
from suite.errors import LockedError
from suite.recorder import DIVERGED, FAILED, Recorder, read_summary
from suite.registry import Registry

class Executor(Protocol):
    """Runs specs that are not complete yet; calls ``on_result`` with each summary as it arrives.

    ``jobs`` is the most runs at once (None: the executor's default). Executors that take options (Ray's address,
    resources per run) also get ``options``, a :class:`suite.executors.ExecutorOptions`, when the caller gave any.
    ``on_note`` (optional: passed to executors that take it) takes one-line notes for the user (a retried run).
    Returns the summaries in the order of ``specs``.
    """

    def __call__(self, specs: Sequence[RunSpec], out: Path, *, jobs: int | None, overwrite: bool, progress: bool,
                 on_result: Callable[[dict[str, Any]], None],
                 on_note: Callable[[str], None] | None = None) -> list[dict[str, Any]]: ...


EXECUTORS: Registry = Registry("executor")


def failed_summary(spec: RunSpec, out: str | os.PathLike, error: BaseException,
                   placement: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run's ``failed`` summary: the one the runner wrote, or one written now if the run left none.

    A run can fail before its folder exists (a dataset that cannot be opened); it is then recorded here, so every
    failure of a grid has a ``summary.json`` with status ``failed`` and the error (and ``placement``, when given).
    """
    summary = read_summary(Path(out) / spec.run_id)
    if summary is not None and summary.get("status") in (FAILED, DIVERGED):
        return summary
    failure = {"run_id": spec.run_id, "status": FAILED, "error": f"{type(error).__name__}: {error}",
               **({"placement": dict(placement)} if placement else {})}
    if isinstance(error, LockedError):  # another process writes that run folder: leave it alone
        return failure
    try:
        return Recorder(out, spec).fail(error, {"placement": dict(placement)} if placement else None)
    except LockedError:
        return failure


def run_one(spec: RunSpec, out: str | os.PathLike, overwrite: bool = False, progress: bool = False,
            placement: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run one spec through :func:`suite.runner.run_spec`; never raises for a failed run (returns its summary).

    ``placement`` (where the run runs: executor, node, attempt) goes into its summary. ``KeyboardInterrupt`` and
    ``SystemExit`` propagate (after the runner recorded the run as failed).
    """
    from suite.runner import run_spec

    try:
        return run_spec(spec, out, overwrite=overwrite, progress=progress, placement=placement)
    except Exception as err:  # noqa: BLE001  (any failure of a run is recorded, and the grid goes on)
        return failed_summary(spec, out, err, placement)


def _limit_threads(jobs: int) -> None:
    """In a pool worker: share the CPU cores among ``jobs`` workers (before torch is imported): the libraries'
    thread variables, and the cores the runs' thread budgets plan with (:data:`suite.threads.CORES_ENV`)."""
    from suite.threads import CORES_ENV

    threads = str(max(1, (os.cpu_count() or 1) // jobs))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", CORES_ENV):
        os.environ.setdefault(name, threads)


@EXECUTORS.register("local")
def local_executor(specs: Sequence[RunSpec], out: Path, *, jobs: int | None, overwrite: bool, progress: bool,
                   on_result: Callable[[dict[str, Any]], None], options: Any = None,
                   on_note: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Run the specs here (``jobs`` 1 or None, with per-batch progress bars) or on a pool of ``jobs`` spawned
    processes, one run per task (no per-batch bars: they would interleave). ``options`` and ``on_note`` are not
    used."""
    jobs = jobs or 1
    results: dict[str, dict[str, Any]] = {}
    if jobs <= 1 or len(specs) <= 1:
        for spec in specs:
            results[spec.run_id] = run_one(spec, out, overwrite, progress)
            on_result(results[spec.run_id])
        return [results[spec.run_id] for spec in specs]

    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(specs)), mp_context=context,
                               initializer=_limit_threads, initargs=(jobs,))
    try:
        pending: dict[Future, RunSpec] = {pool.submit(run_one, spec, out, overwrite): spec for spec in specs}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                spec = pending.pop(future)
                try:
                    summary = future.result()
                except Exception as err:  # noqa: BLE001  (a worker died: record the run as failed)
                    summary = failed_summary(spec, out, err)
                results[spec.run_id] = summary
                on_result(summary)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [results[spec.run_id] for spec in specs]


__all__ = ["EXECUTORS", "Executor", "failed_summary", "local_executor", "run_one"]
