"""What co-running stages cost on a shared CPU beyond sharing its cores: the measured factors, applied in the simulator.

Why. :class:`simulators.pipeline_model.SharedCpu` shares the cores max-min fairly: jobs that want more cores than the
machine has lose exactly the cores they do not get, and no more. Pipelined runs on a CPU lose more than that: the
compute stage's torch intra-op (OpenMP) threads meet at a barrier after every operator, so one of them preempted
to let a loader run stalls all of them; loader threads and the compute thread take turns holding the GIL; the
loaders' feature gathers and the compute's kernels share the memory bandwidth. Max-min sharing alone therefore
predicts pipelined runs optimistically.

What. A :class:`ContentionTable` gives, per *state* of the shared CPU (whether a compute job is running, and how
many load jobs are) and per stage *kind* (``compute``, ``load``), a slowdown factor: the progress rate of that kind
measured in that state divided by the rate max-min sharing gives it (:func:`max_min_rates`). The simulator
multiplies the max-min rates by these factors, capped at 1 (a job never runs faster than alone), **only while the
running jobs want more cores than there are**; with as many cores as wanted every factor is 1 by construction
(the model is neutral), so fixed times, closed forms and plain processor sharing stay exact. Kinds the table does
not know (``transfer``, a GPU compute) get 1; a state with more loaders than measured gets the most loaders
measured (with or without compute, as the state).

How it is measured: by a microbenchmark of the calibration run's own kinds of work on the machine
(:func:`experiments.measure.contention.measure_contention`; compute steps beside busy loaders run as threads or as
processes), outside this layer: the simulator only reads the measured factors, as a :class:`Contention` passed in
or stored as JSON (:func:`load_contention`). A second measured figure, :attr:`Contention.load_scale`: a loader
*process* spends longer per batch than the load a calibration run records in a thread.

Nothing of the runs to be predicted enters: only the calibration run's spec (sampler, model, batch size,
optimizer), its dataset's shape (nodes, edges, feature width, from its summary) and its batches' mean input nodes.
The result keeps its provenance (machine, torch threads, load of other processes, date, every raw time;
:meth:`Contention.to_dict`), so a table can be stored and reused (:meth:`Contention.from_dict`,
:func:`load_contention`) and its origin checked. The factors belong to the machine they were measured on:
what-if simulation on other hardware does not use them.

:class:`UniformSlowdown` is the one-parameter alternative (one factor for every oversubscribed job), which
``experiments/figures/pipeline_validation.py --contention loo`` fits leave-one-out on held-out runs, for comparison.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COMPUTE, LOAD = "compute", "load"
LOADER_KINDS = ("thread", "process")


# ---------------------------------------------------------------------------------------------- the model
def max_min_rates(demands: Sequence[float], cores: float) -> list[float]:
    """Progress rates (1.0 = as fast as alone) of jobs wanting ``demands`` cores on ``cores`` cores, shared max-min
    fairly (water-filling), in the order given: the allocation :class:`simulators.pipeline_model.SharedCpu` makes."""
    rates = [0.0] * len(demands)
    left = float(cores)
    pending = sorted(range(len(demands)), key=lambda i: demands[i])
    while pending:
        share = left / len(pending)
        i = pending.pop(0)
        granted = min(demands[i], share)
        rates[i] = granted / demands[i] if demands[i] > 0 else 1.0
        left -= granted
    return rates


@dataclass(frozen=True)
class ContentionTable:
    """Slowdown factors relative to max-min sharing, per state and stage kind (see the module docstring).

    Attributes:
        factors: ``{(compute_running, loaders_running): {kind: factor}}``.
        loader_kind: ``thread`` or ``process``: how the loaders ran when measured.
        compute_kind / load_kind: the stage names the states count.
    """

    factors: Mapping[tuple[bool, int], Mapping[str, float]]
    loader_kind: str = "thread"
    compute_kind: str = COMPUTE
    load_kind: str = LOAD

    def __post_init__(self) -> None:
        bad = [(state, kind, value) for state, row in self.factors.items() for kind, value in row.items()
               if not (value > 0 and math.isfinite(value))]
        if bad:
            raise ValueError(f"contention factors must be positive and finite, got {bad}")

    def factor(self, kind: str, running: Mapping[str, int]) -> float:
        """The factor of a job of stage ``kind`` while ``running`` (jobs per stage kind, itself included) run.

        Only called while the jobs oversubscribe the cores (the caller keeps 1 otherwise)."""
        if kind not in (self.compute_kind, self.load_kind):
            return 1.0
        state = (running.get(self.compute_kind, 0) > 0, running.get(self.load_kind, 0))
        row = self.factors.get(state)
        if row is None:
            measured = [k for compute, k in self.factors if compute == state[0]]
            below = [k for k in measured if k <= state[1]]
            if not below:
                return 1.0
            row = self.factors[(state[0], max(below))]
        return float(row.get(kind, 1.0))


@dataclass(frozen=True)
class UniformSlowdown:
    """One factor for every CPU job while the cores are oversubscribed: the one-parameter model that
    ``experiments/figures/pipeline_validation.py --contention loo`` fits leave-one-out (never on the run it predicts)."""

    value: float

    def __post_init__(self) -> None:
        if not (self.value > 0 and math.isfinite(self.value)):
            raise ValueError(f"a slowdown factor must be positive and finite, got {self.value}")

    def factor(self, kind: str, running: Mapping[str, int]) -> float:
        """``value``, whatever the kind and state."""
        return self.value


@dataclass(frozen=True)
class Contention:
    """A contention measurement: one table per loader kind, and where it comes from.

    Attributes:
        tables: ``{"thread": ContentionTable, "process": ContentionTable}`` (the kinds measured).
        cores: the cores the factors were measured on (max-min rates use them).
        compute_cores: cores a compute job wants (torch's intra-op threads, at most ``cores``).
        provenance: machine, torch threads, date, load averages, workload and every raw time.
        load_scale: per loader kind, the time a loader of that kind spends per batch, alone, over a load in a
            thread (which is what a calibration run records): 1 for threads; for processes the load with one
            torch thread plus handing the batch over (``thread`` = 1 when absent).
    """

    tables: Mapping[str, ContentionTable]
    cores: float
    compute_cores: float
    provenance: Mapping[str, Any] = field(default_factory=dict)
    load_scale: Mapping[str, float] = field(default_factory=dict)

    def table(self, loader_kind: str) -> ContentionTable | None:
        """The table for loaders run as ``loader_kind`` (``thread`` or ``process``), or None if not measured."""
        return self.tables.get(loader_kind)

    def describe(self) -> str:
        """One line saying how the factors were obtained (for tables and summaries)."""
        p = self.provenance
        return (f"microbenchmark ({p.get('method', 'experiments.measure.contention.measure_contention')}) on "
                f"{p.get('machine', {}).get('cpu_model', '?')} x{self.cores:g} cores, "
                f"{p.get('measured_at', '?')}; not fitted on predicted runs")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form (states as rows)."""
        return {
            "cores": self.cores, "compute_cores": self.compute_cores, "load_scale": dict(self.load_scale),
            "tables": {kind: [{"compute_running": c, "loaders_running": k, **dict(row)}
                              for (c, k), row in sorted(t.factors.items())] for kind, t in self.tables.items()},
            "provenance": dict(self.provenance),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Contention":
        """The inverse of :meth:`to_dict`."""
        tables = {}
        for kind, rows in data["tables"].items():
            factors = {(bool(r["compute_running"]), int(r["loaders_running"])):
                       {k: float(r[k]) for k in (COMPUTE, LOAD) if k in r} for r in rows}
            tables[kind] = ContentionTable(factors, loader_kind=kind)
        return cls(tables=tables, cores=float(data["cores"]), compute_cores=float(data["compute_cores"]),
                   provenance=dict(data.get("provenance") or {}),
                   load_scale={k: float(v) for k, v in (data.get("load_scale") or {}).items()})


def load_contention(path: str | os.PathLike, run: str | os.PathLike | None = None) -> Contention:
    """A :class:`Contention` stored as JSON by :meth:`Contention.to_dict`, or one of those stored per calibration
    run (``{"tables": {run folder name: ...}}``, as ``experiments/figures/pipeline_validation.py`` writes them): the one of
    ``run``'s folder name, or the only one."""
    data = json.loads(Path(path).read_text())
    if "cores" in data:
        return Contention.from_dict(data)
    stored = data.get("tables") or {}
    name = Path(run).name if run is not None else None
    if name in stored:
        return Contention.from_dict(stored[name])
    if len(stored) == 1 and name is None:
        return Contention.from_dict(next(iter(stored.values())))
    raise ValueError(f"{path}: no contention measurement for {name or 'an unnamed run'} "
                     f"(it has {', '.join(sorted(stored)) or 'none'})")


__all__ = ["COMPUTE", "Contention", "ContentionTable", "LOAD", "LOADER_KINDS", "UniformSlowdown", "load_contention",
           "max_min_rates"]
