"""Foreign load on the machine during a measurement: CPU time other processes took while we were timing.

A timing taken while other processes kept the cores busy is not comparable with one taken on a quiet machine
(torch's intra-op pool stalls on a descheduled worker; see DESIGN.md, *Measuring honestly*). Every run's
``summary.json`` carries::

    "machine_load": {"foreign_cpu_s": float, "foreign_cores": float, "under_load": bool}

where ``foreign_cpu_s`` is the CPU time of every other process during the run, ``foreign_cores`` that time / the
run's wall time, and ``under_load`` is true when ``foreign_cores >= UNDER_LOAD_CORES``. Tables carry it per row
(:func:`load_columns`), flag the rows measured under load, and timing claims leave them out. Old runs without the
field read as unknown (``None``): not flagged.

Measured (:class:`LoadMonitor`) from ``/proc/stat`` (CPU time of the whole machine: user, nice, system, irq,
softirq, steal) minus the CPU time of this process, of the children it waited for and of its live descendants
(``psutil``) over the same window. Where ``/proc/stat`` is absent
(not Linux) the load is unknown (``None``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

UNDER_LOAD_CORES = 0.25
"""Other processes' CPU time per wall second above which a timing counts as taken under load."""

_PROC_STAT = Path("/proc/stat")
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal (guest time is inside user)


@dataclass(frozen=True)
class MachineLoad:
    """Other processes' CPU use during one measurement window (the ``machine_load`` of a summary)."""

    foreign_cpu_s: float
    foreign_cores: float
    under_load: bool
    wall_s: float = field(default=math.nan, compare=False)
    """The window's length (not stored in summaries)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, as stored in ``summary.json``."""
        return {"foreign_cpu_s": round(self.foreign_cpu_s, 3), "foreign_cores": round(self.foreign_cores, 3),
                "under_load": self.under_load}


def machine_busy_seconds() -> float | None:
    """CPU seconds every core of the machine spent busy since boot (``/proc/stat``), or None where unknown."""
    try:
        with open(_PROC_STAT) as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(value) for value in fields[1:]]
    return sum(ticks[i] for i in _BUSY_FIELDS if i < len(ticks)) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU seconds of this process (all its threads), of the children it has waited for and of its live
    descendants (a run's loader processes, a benchmark's probes)."""
    import psutil

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


def machine_load(foreign_cpu_s: float, wall_s: float) -> MachineLoad:
    """The load record of a window of ``wall_s`` seconds in which other processes used ``foreign_cpu_s``."""
    foreign = round(max(0.0, float(foreign_cpu_s)), 6)  # clock ticks are 10 ms: no sub-microsecond residue
    cores = foreign / wall_s if wall_s > 0 else 0.0
    return MachineLoad(foreign_cpu_s=foreign, foreign_cores=cores, under_load=cores >= UNDER_LOAD_CORES,
                       wall_s=wall_s)


class LoadMonitor:
    """Measures the foreign load over a window: ``with LoadMonitor() as monitor: ...``, then ``monitor.result``
    (a :class:`MachineLoad`, or None where the machine's CPU time cannot be read). Also usable as
    ``monitor.start()`` / ``monitor.stop()``."""

    def __init__(self) -> None:
        self.result: MachineLoad | None = None
        self._start: tuple[float | None, float, float] | None = None

    def start(self) -> LoadMonitor:
        """Open the window."""
        self._start = (machine_busy_seconds(), own_cpu_seconds(), time.perf_counter())
        self.result = None
        return self

    def stop(self) -> MachineLoad | None:
        """Close the window; return (and keep in ``result``) the load measured over it."""
        if self._start is None:
            raise RuntimeError("LoadMonitor.stop() before start()")
        busy_before, own_before, started = self._start
        busy_after, own_after = machine_busy_seconds(), own_cpu_seconds()
        wall = time.perf_counter() - started
        if busy_before is None or busy_after is None:
            self.result = None
        else:
            self.result = machine_load((busy_after - busy_before) - (own_after - own_before), wall)
        return self.result

    def __enter__(self) -> LoadMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def load_of(summary: Mapping[str, Any] | None) -> MachineLoad | None:
    """The ``machine_load`` of a run's summary (nested, or flattened as by :func:`suite.results.load_runs`:
    ``machine_load.foreign_cores``...), or None when it has none (an old run: unknown, not flagged) or it is
    malformed."""
    summary = summary or {}
    record = summary.get("machine_load")
    if not isinstance(record, Mapping):
        prefix = "machine_load."
        record = {key[len(prefix):]: value for key, value in summary.items()
                  if isinstance(key, str) and key.startswith(prefix)}
        if not record or record.get("foreign_cores") is None or record.get("foreign_cores") != record.get(
                "foreign_cores"):  # absent, or NaN in a table row
            return None
    try:
        cores = float(record["foreign_cores"])
        return MachineLoad(foreign_cpu_s=float(record.get("foreign_cpu_s", math.nan)), foreign_cores=cores,
                           under_load=bool(record.get("under_load", cores >= UNDER_LOAD_CORES)))
    except (KeyError, TypeError, ValueError):
        return None


def load_columns(load: MachineLoad | Mapping[str, Any] | None) -> dict[str, Any]:
    """The table columns of a load: ``foreign_cores`` (NaN when unknown) and ``under_load`` (None when unknown).

    Accepts a :class:`MachineLoad`, a run summary (reads its ``machine_load``) or None.
    """
    if isinstance(load, Mapping):
        load = load_of(load)
    if load is None:
        return {"foreign_cores": math.nan, "under_load": None}
    return {"foreign_cores": load.foreign_cores, "under_load": load.under_load}


def measured_under_load(value: Any) -> bool:
    """Whether a table's ``under_load`` cell says the row was measured under load (unknown and missing: no)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if isinstance(value, str):
        return value.strip().lower() == "true"
    try:
        return bool(value) is True and value == value  # pandas NA raises in bool()
    except TypeError:
        return False


__all__ = ["LoadMonitor", "MachineLoad", "UNDER_LOAD_CORES", "load_columns", "load_of", "machine_busy_seconds",
           "machine_load", "measured_under_load", "own_cpu_seconds"]
