"""Thread budgets and the machine's foreign load.

Torch's intra-op pool (OpenMP) spins at its barriers: any other busy thread on its cores (a loader, the prefetch
thread, another process) makes one of its threads late, and the whole team waits for it. On a small machine that
slows compute by an order of magnitude, erratically. Every system therefore sizes the pools to the cores its own
threads leave free (:func:`plan_budget`, :func:`apply_budget`), and every run records that choice and how busy the
rest of the machine was while it ran (:class:`LoadMeter`), so that a timing taken under foreign load is flagged
rather than silently compared. A budget also gives way to foreign load (:func:`adapt_budget`): the cores other
processes kept busy during setup, or during the last epoch, are left to them for the next one (one busy process
beside a two-thread pool on two cores made warm epochs three times slower here; one thread, 1.3 times).

Foreign load is the CPU time that processes other than this one (and its children) spent while the run ran, from
``/proc/stat`` (all CPUs) minus this process tree's own CPU time (``/proc/self/stat`` and its children), divided by
the wall time: the number of cores others kept busy on average.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import psutil
import torch

UNDER_LOAD_CORES = 0.25
"""Foreign load (in cores, averaged over a run) from which the run counts as measured under load."""

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


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


# ----------------------------------------------------------------------------------------------- foreign load
def machine_busy_seconds() -> float:
    """CPU seconds all CPUs spent busy since boot (``/proc/stat``: user, nice, system, irq, softirq; steal and
    idle/iowait excluded), or NaN where ``/proc/stat`` is missing."""
    try:
        with open("/proc/stat") as handle:
            fields = handle.readline().split()
    except OSError:
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / _CLOCK_TICKS


def own_cpu_seconds() -> float:
    """CPU seconds of this process, its reaped children and its live descendants."""
    process = psutil.Process()
    times = process.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    for child in process.children(recursive=True):
        try:
            child_times = child.cpu_times()
        except psutil.Error:
            continue
        total += child_times.user + child_times.system
    return total


@dataclass(frozen=True)
class MachineLoad:
    """Other processes' CPU use over an interval.

    Attributes:
        wall_s: the interval.
        foreign_cpu_s: CPU seconds of processes other than this one and its descendants.
        foreign_cores: ``foreign_cpu_s / wall_s``, the cores others kept busy on average.
        under_load: ``foreign_cores >= UNDER_LOAD_CORES``.
    """

    wall_s: float
    foreign_cpu_s: float
    foreign_cores: float
    under_load: bool

    def record(self) -> dict[str, Any]:
        """The load as ``summary.json``'s ``machine_load`` field."""
        return {"foreign_cpu_s": round(self.foreign_cpu_s, 3), "foreign_cores": round(self.foreign_cores, 3),
                "under_load": self.under_load}


class LoadMeter:
    """Measures the machine's foreign load between :meth:`start` and :meth:`stop` (or as a context manager)."""

    def __init__(self) -> None:
        self._start: tuple[float, float, float] | None = None
        self.result: MachineLoad | None = None

    def start(self) -> "LoadMeter":
        """Take the starting counters."""
        self._start = (time.perf_counter(), machine_busy_seconds(), own_cpu_seconds())
        return self

    def stop(self) -> MachineLoad:
        """The foreign load since :meth:`start`."""
        started, busy, own = self._start
        wall = time.perf_counter() - started
        foreign = max(0.0, (machine_busy_seconds() - busy) - (own_cpu_seconds() - own))
        if foreign != foreign:  # NaN: no /proc/stat
            self.result = MachineLoad(wall, float("nan"), float("nan"), False)
        else:
            cores = foreign / wall if wall > 0 else 0.0
            self.result = MachineLoad(wall, foreign, cores, cores >= UNDER_LOAD_CORES)
        return self.result

    def __enter__(self) -> "LoadMeter":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = ["LoadMeter", "MIN_LOAD_WINDOW_S", "MachineLoad", "ThreadBudget", "UNDER_LOAD_CORES", "adapt_budget",
           "apply_budget", "budget_applied",
           "machine_busy_seconds",
           "own_cpu_seconds", "plan_budget", "usable_cores"]
