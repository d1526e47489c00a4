"""Thread budgets and the machine's foreign load.

Torch's intra-op pool (OpenMP) spins at its barriers: any other busy thread on its cores (a loader, the prefetch
thread, another process) makes one of its threads late, and the whole team waits for it. On a small machine that
slows compute by an order of magnitude, erratically. Every system therefore sizes the pools to the cores its own
threads leave free (:func:`plan_budget`, :func:`apply_budget`), and every run records that choice and how busy the
rest of the machine was while it ran (:class:`suite.load.LoadMonitor`), so that a timing taken under foreign load is flagged
rather than silently compared. A budget also gives way to foreign load (:func:`adapt_budget`): the cores other
processes kept busy during setup, or during the last epoch, are left to them for the next one (one busy process
beside a two-thread pool on two cores made warm epochs three times slower here; one thread, 1.3 times).

Foreign load (:mod:`suite.load`) is the CPU time that processes other than this one (and its children) spent
while the run ran, divided by the wall time: the number of cores others kept busy on average.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch

from suite.errors import ConfigError
from suite.load import MachineLoad


CORES_ENV = "GNNSUITE_CORES"
"""At most this many cores for this process's budgets: a grid's pool of ``jobs`` workers sets it to each worker's
share (:mod:`suite.execution`), so that two runs side by side on two cores do not each start with two compute
threads (measured: in-memory link-prediction epochs of 14-20 s instead of 5-7 s until the load adapted the
budget)."""


OMP_ENV = "OMP_NUM_THREADS"
"""A user's thread count for the libraries (``OMP_NUM_THREADS=1 gnnsuite run ...``); a budget respects it like
:data:`CORES_ENV` (torch's own default does; without this the budget gave torch every core regardless)."""


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1, at most :data:`CORES_ENV` when set, and at most
    :data:`OMP_ENV`'s first count when that is a positive integer (OpenMP's lists such as ``4,2`` give the outer
    level; anything else the libraries would not read either is left alone)."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        cores = max(1, os.cpu_count() or 1)
    omp = os.environ.get(OMP_ENV, "").split(",")[0].strip()
    if omp.isdigit() and int(omp) >= 1:
        cores = min(cores, int(omp))
    share = os.environ.get(CORES_ENV)
    if share is None:
        return cores
    if not share.isdigit() or int(share) < 1:
        raise ConfigError(f"{CORES_ENV}: expected a positive number of cores, got {share!r}")
    return min(cores, int(share))


@dataclass(frozen=True)
class ThreadBudget:
    """How many threads a run gives torch.

    Attributes:
        cores: usable cores.
        own_threads: the system's own busy threads besides compute (loaders, prefetch, writer).
        compute: torch intra-op threads (and numba's, for compiled kernels called from compute).
        interop: torch inter-op threads.
        source: ``default`` (cores minus own threads) or ``option`` (``system.options.compute_threads``).
    """

    cores: int
    own_threads: int
    compute: int
    interop: int
    source: str

    def record(self) -> dict[str, Any]:
        """The budget as ``summary.json``'s ``threads`` field."""
        return asdict(self)


def plan_budget(own_threads: int, requested: int | None = None, cores: int | None = None,
                foreign_cores: float = 0.0) -> ThreadBudget:
    """The budget of a system that runs ``own_threads`` busy threads beside compute: the cores they and other
    processes (``foreign_cores`` busy on average, rounded) leave free, at least 1; or ``requested`` when given."""
    cores = usable_cores() if cores is None else cores
    if requested is not None:
        return ThreadBudget(cores, own_threads, max(1, requested), 1, "option")
    taken = own_threads + int(math.floor(foreign_cores + 0.5)) if foreign_cores == foreign_cores else own_threads
    return ThreadBudget(cores, own_threads, max(1, cores - taken), 1, "default")


MIN_LOAD_WINDOW_S = 0.5
"""Shortest interval whose foreign load resizes a budget (``/proc/stat`` counts in 10 ms ticks)."""


def adapt_budget(budget: ThreadBudget, load: "MachineLoad | None") -> ThreadBudget:
    """``budget`` resized to the foreign load measured over the last interval (a budget the run's options fix,
    and loads over intervals shorter than :data:`MIN_LOAD_WINDOW_S`, leave it as it is)."""
    if budget.source == "option" or load is None or not load.wall_s >= MIN_LOAD_WINDOW_S:
        return budget
    return plan_budget(budget.own_threads, cores=budget.cores, foreign_cores=load.foreign_cores)


def apply_budget(budget: ThreadBudget) -> ThreadBudget:
    """Size torch's pools (and numba's, where it is used) to ``budget``; return the budget as applied.

    Torch fixes its inter-op pool at its first use; where that already happened the recorded ``interop`` is the
    pool's actual size.
    """
    torch.set_num_threads(budget.compute)
    try:
        torch.set_num_interop_threads(budget.interop)
    except RuntimeError:  # already started (set once per process)
        pass
    _set_numba_threads(budget.compute)
    return ThreadBudget(budget.cores, budget.own_threads, torch.get_num_threads(), torch.get_num_interop_threads(),
                        budget.source)


def _set_numba_threads(count: int) -> None:
    try:
        import numba
    except ImportError:
        return
    numba.set_num_threads(max(1, min(count, numba.config.NUMBA_NUM_THREADS)))


def _numba_threads() -> int | None:
    try:
        import numba
    except ImportError:
        return None
    return numba.get_num_threads()


@contextlib.contextmanager
def budget_applied(budget: ThreadBudget) -> Iterator[ThreadBudget]:
    """Apply ``budget`` for the block (yielding it as applied), then restore the previous intra-op sizes."""
    previous = torch.get_num_threads(), _numba_threads()
    try:
        yield apply_budget(budget)
    finally:
        torch.set_num_threads(previous[0])
        if previous[1] is not None:
            _set_numba_threads(previous[1])


__all__ = ["CORES_ENV", "MIN_LOAD_WINDOW_S", "ThreadBudget", "adapt_budget", "apply_budget", "budget_applied",
           "plan_budget", "usable_cores"]
