"""A SimPy discrete-event simulator of the pipelined training system (:mod:`systems.pipelined`).

It mirrors the real pipeline piece by piece (:mod:`systems.stage_pipeline`), with the same names:

- stages with pools of ``workers`` processes; the first stage admits batches, in planned order, each taking a
  token from a ``simpy.Container`` of ``staleness_bound`` tokens, returned when the last stage finishes it;
- bounded queues between stages (``simpy.Store(capacity=queue_size)``, the capacity of the queue that *feeds*
  a stage), and the reorder buffer of an ``in_order`` stage (early batches leave the queue and wait beside it);
- per batch, a service time per stage drawn from a :class:`ServiceTime` model (fixed, empirical from recorded
  batches, or log-normal).

One thing the real system has that a plain queueing model lacks is contention: on a CPU-only machine the loader
threads and the compute stage share the same cores. :class:`SharedCpu` models it as processor sharing: a job of
``work`` seconds (its duration when it runs alone) that can use ``cores`` cores progresses, while others run, at
the rate (cores it gets / cores it wants), the machine's cores being shared max-min fairly (water-filling).
Stages with ``cores = 0`` (a GPU, a DMA engine, a disk) do not take CPU time. ``cpu_cores = None`` turns the
contention off (every stage runs at full speed), which is the textbook pipeline whose epoch time is
fill + batches x bottleneck time for fixed service times and unbounded queues.

Sharing cores is not all that oversubscription costs (OpenMP barriers of torch's intra-op threads, the GIL,
memory bandwidth): a model's ``contention`` (:class:`ContentionModel`, e.g. a table of
:mod:`simulators.contention_model` measured on the machine by :mod:`experiments.measure.contention`) multiplies each
job's max-min rate by a factor for its stage and the stages running beside it, capped at 1. It is consulted only
while the running jobs want more cores than there are; otherwise every factor is 1, so without oversubscription
(and for ``contention = None``) the rates are plain max-min sharing.

Outputs are the simulator's own records (:mod:`simulators.trace`) in the real system's record schema (the stamps
of :class:`systems.batch.Batch`, the measures of :class:`systems.stage_pipeline.PipelineTrace`): per-batch admission,
per-stage start/end/worker, staleness (optimizer steps are counted where the ``compute`` stage finishes a batch),
queue occupancy after every put and get, busy time per stage, and the same derived measures (bottleneck,
efficiency), so that simulated and measured runs go through the same tables.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import simpy

from simulators.contention_model import max_min_rates
from simulators.trace import SimulatedBatch, SimulatedTrace, StageInterval


# ---------------------------------------------------------------------------------------------- service times
class ServiceTime(Protocol):
    """Draws the service time (seconds of work, when the stage runs alone) of a stage for one batch."""

    def draw(self, rng: np.random.Generator, index: int) -> float: ...

    def mean(self) -> float: ...


@dataclass(frozen=True)
class Fixed:
    """The same service time for every batch."""

    seconds: float

    def draw(self, rng: np.random.Generator, index: int) -> float:
        """``seconds``."""
        return self.seconds

    def mean(self) -> float:
        """``seconds``."""
        return self.seconds


@dataclass(frozen=True)
class Empirical:
    """Resampled (with replacement, uniformly) from measured service times, scaled by ``scale``."""

    samples: tuple[float, ...]
    scale: float = 1.0

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError("an empirical service time needs at least one sample")

    def draw(self, rng: np.random.Generator, index: int) -> float:
        """One of the samples, times ``scale``."""
        return self.samples[int(rng.integers(len(self.samples)))] * self.scale

    def mean(self) -> float:
        """The samples' mean times ``scale``."""
        return float(np.mean(self.samples)) * self.scale


@dataclass(frozen=True)
class LogNormal:
    """Log-normal service times with the given mean and coefficient of variation (std / mean)."""

    mean_s: float
    cv: float

    def draw(self, rng: np.random.Generator, index: int) -> float:
        """A log-normal draw with mean ``mean_s`` and coefficient of variation ``cv``."""
        if self.cv <= 0:
            return self.mean_s
        sigma2 = math.log1p(self.cv**2)
        return float(rng.lognormal(math.log(self.mean_s) - sigma2 / 2, math.sqrt(sigma2)))

    def mean(self) -> float:
        """``mean_s``."""
        return self.mean_s


# ---------------------------------------------------------------------------------------------- model
class ContentionModel(Protocol):
    """Slowdown, beyond max-min sharing, of a job of stage ``kind`` while ``running`` (CPU jobs per stage name,
    itself included) run and oversubscribe the cores; 1.0 = none (:class:`simulators.contention_model.ContentionTable`)."""

    def factor(self, kind: str, running: Mapping[str, int]) -> float: ...


@dataclass(frozen=True)
class StageModel:
    """One simulated stage.

    Attributes:
        name: the stage's name (``load``, ``transfer``, ``compute``, ``update``).
        service: its service time per batch.
        workers: worker processes of the stage.
        queue_size: capacity of the queue that feeds it (unused for the first stage).
        cores: CPU cores one job of the stage uses when alone (0: it does not use the CPU).
        in_order: take batches in admission order (one worker), as the real ``compute`` stage does by default.
        handoff: the delay, using no core, between a worker taking a batch (from the queue, or its admission
            token) and starting on it: the queue hand-off and thread wake-up the recorded runs show as the gap
            between a batch's previous stage ending and this one starting (None: no delay).
    """

    name: str
    service: ServiceTime
    workers: int = 1
    queue_size: int = 4
    cores: float = 1.0
    in_order: bool = False
    handoff: ServiceTime | None = None


@dataclass(frozen=True)
class PipelineModel:
    """A simulated pipeline: stages, the staleness bound, the machine's CPU cores (None: no contention) and the
    slowdown of oversubscribed jobs beyond sharing the cores (None: none, plain max-min sharing)."""

    stages: tuple[StageModel, ...]
    staleness_bound: int
    cpu_cores: float | None = None
    steps_at: str = "compute"
    contention: ContentionModel | None = None

    def __post_init__(self) -> None:
        if self.staleness_bound < 1:
            raise ValueError(f"staleness_bound must be >= 1, got {self.staleness_bound}")
        if any(s.workers < 1 or s.queue_size < 1 for s in self.stages):
            raise ValueError("every stage needs workers >= 1 and queue_size >= 1")
        if any(s.in_order and s.workers != 1 for s in self.stages):
            raise ValueError("an in-order stage has exactly one worker")


# ---------------------------------------------------------------------------------------------- shared CPU
@dataclass(eq=False)
class _Job:
    remaining: float
    demand: float
    done: simpy.Event
    rate: float = 0.0
    kind: str = ""


class SharedCpu:
    """Processor sharing of ``cores`` cores among running jobs, max-min fair (water-filling).

    A job that wants ``demand`` cores and gets ``a`` of them progresses at rate ``a / demand`` (1.0 = as fast as
    alone). Rates change only when a job starts or ends; one timeout is pending at any time, for the next end.
    With a ``contention`` model, while the running jobs want more than ``cores`` cores in all, each rate is then
    multiplied by ``contention.factor(kind, running)`` and capped at 1.
    """

    def __init__(self, env: simpy.Environment, cores: float, contention: ContentionModel | None = None):
        self.env = env
        self.cores = cores
        self.contention = contention
        self.jobs: list[_Job] = []
        self._updated = 0.0
        self._version = 0

    def execute(self, work: float, demand: float, kind: str = ""):
        """A SimPy process body: run ``work`` seconds (alone) of a job of stage ``kind`` wanting ``demand``
        cores."""
        if work <= 0:
            return
        if demand <= 0:
            yield self.env.timeout(work)
            return
        job = _Job(remaining=work, demand=demand, done=self.env.event(), kind=kind)
        self._advance()
        self.jobs.append(job)
        self._reschedule()
        yield job.done

    def _advance(self) -> None:
        elapsed = self.env.now - self._updated
        if elapsed > 0:
            for job in self.jobs:
                job.remaining -= job.rate * elapsed
        self._updated = self.env.now

    def _reschedule(self) -> None:
        self._allocate()
        self._version += 1
        if self.jobs:
            delay = max(min(job.remaining / job.rate for job in self.jobs), 0.0)
            self.env.process(self._wake(delay, self._version))

    def _allocate(self) -> None:
        for job, rate in zip(self.jobs, max_min_rates([job.demand for job in self.jobs], self.cores)):
            job.rate = rate
        if self.contention is not None and sum(job.demand for job in self.jobs) > self.cores * (1 + 1e-12):
            running: dict[str, int] = defaultdict(int)
            for job in self.jobs:
                running[job.kind] += 1
            for job in self.jobs:
                job.rate = min(1.0, job.rate * self.contention.factor(job.kind, running))

    def _wake(self, delay: float, version: int):
        yield self.env.timeout(delay)
        if version != self._version:
            return  # the job set changed since: a newer wake-up is pending
        self._advance()
        finished = [job for job in self.jobs if job.remaining <= 1e-12 * max(1.0, job.demand)]
        if not finished:  # floating point: the earliest job is a hair short; finish it anyway
            finished = [min(self.jobs, key=lambda j: j.remaining)]
        for job in finished:
            self.jobs.remove(job)
            job.done.succeed()
        self._reschedule()


# ---------------------------------------------------------------------------------------------- simulation
@dataclass
class _Run:
    env: simpy.Environment
    model: PipelineModel
    batches: list[SimulatedBatch]
    rng: np.random.Generator
    cpu: SharedCpu | None
    tokens: simpy.Container
    queues: list[simpy.Store | None]
    next_index: int = 0
    steps: int = 0
    completed: list[SimulatedBatch] = field(default_factory=list)
    occupancy: dict[str, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    early: dict[int, dict[int, SimulatedBatch]] = field(default_factory=lambda: defaultdict(dict))
    expected: dict[int, int] = field(default_factory=lambda: defaultdict(int))


def simulate(model: PipelineModel, num_batches: int, *, seed: int = 0, epoch: int = 0,
             batch_examples: int = 0) -> SimulatedTrace:
    """Simulate one epoch of ``num_batches`` batches through ``model``.

    Args:
        model: the pipeline.
        num_batches: batches in the epoch.
        seed: seed of the service-time draws.
        epoch: the epoch number written into the batches.
        batch_examples: not simulated; kept for records (examples per batch are not known to the simulator).

    Returns:
        The trace, in simulated seconds from 0: batches in completion order with their stamps, admission times
        and versions, queue occupancy, workers per stage (:class:`simulators.trace.SimulatedTrace`).
    """
    env = simpy.Environment()
    run = _Run(
        env=env, model=model, rng=np.random.default_rng(seed),
        batches=[SimulatedBatch(epoch=epoch, index=i) for i in range(num_batches)],
        cpu=SharedCpu(env, model.cpu_cores, model.contention) if model.cpu_cores else None,
        tokens=simpy.Container(env, capacity=model.staleness_bound, init=model.staleness_bound),
        queues=[None] + [simpy.Store(env, capacity=stage.queue_size) for stage in model.stages[1:]],
    )
    for position, stage in enumerate(model.stages):
        for worker in range(stage.workers):
            env.process(_worker(run, position, worker))
    env.run()
    finished = max((b.stamps[model.stages[-1].name].end for b in run.completed), default=0.0)
    return SimulatedTrace(wall_s=finished, batches=run.completed, workers={s.name: s.workers for s in model.stages},
                          queue_occupancy=dict(run.occupancy))


def _worker(run: _Run, position: int, worker: int):
    stage = run.model.stages[position]
    env = run.env
    while True:
        if position == 0:
            yield run.tokens.get(1)
            if run.next_index >= len(run.batches):
                yield run.tokens.put(1)
                return
            batch = run.batches[run.next_index]
            run.next_index += 1
            batch.admitted = env.now
            batch.version_read = run.steps
        else:
            batch = yield from _take(run, position)
        if stage.handoff is not None:
            yield env.timeout(stage.handoff.draw(run.rng, batch.index))
        started = env.now
        work = stage.service.draw(run.rng, batch.index)
        if run.cpu is not None:
            yield from run.cpu.execute(work, stage.cores, stage.name)
        else:
            yield env.timeout(work)
        if stage.name == run.model.steps_at:
            batch.version_applied = run.steps
            run.steps += 1
        batch.stamps[stage.name] = StageInterval(started, env.now, f"{stage.name}-{worker}")
        if position + 1 == len(run.model.stages):
            run.completed.append(batch)
            yield run.tokens.put(1)
        else:
            target = run.queues[position + 1]
            yield target.put(batch)
            run.occupancy[run.model.stages[position + 1].name].append((env.now, len(target.items)))


def _take(run: _Run, position: int):
    stage, source = run.model.stages[position], run.queues[position]
    while True:
        if stage.in_order and run.expected[position] in run.early[position]:
            expected = run.expected[position]
            run.expected[position] = expected + 1
            return run.early[position].pop(expected)
        batch = yield source.get()
        run.occupancy[stage.name].append((run.env.now, len(source.items)))
        if not stage.in_order:
            return batch
        run.early[position][batch.index] = batch


def closed_form_epoch_time(service_s: Sequence[float], num_batches: int) -> float:
    """Epoch time of a pipeline of one-worker stages with fixed service times, unbounded queues and staleness
    bound, and no contention: the first batch's way through every stage (the fill) plus ``num_batches - 1``
    times the bottleneck's service time (the textbook result the simulator must reproduce)."""
    return sum(service_s) + (num_batches - 1) * max(service_s)


__all__ = ["ContentionModel", "Empirical", "Fixed", "LogNormal", "PipelineModel", "ServiceTime", "SharedCpu",
           "StageModel", "closed_form_epoch_time", "simulate"]
