"""The SimPy model of the asynchronous GNN pipeline (see :mod:`simulators.async_gnn_model`): one mode of a spec.

:func:`simulate` runs one mode over a partitioned graph with given forward durations (by default from the spec);
the result holds every task's interval, every read's staleness and the summary (:func:`summarize`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import simpy

from simulators.async_gnn_model.durations import stage_durations
from simulators.async_gnn_model.partitions import PartitionedGraph, build_partitions
from simulators.async_gnn_model.spec import MODE_NAMES, STAGES, AsyncSpec, PipelineSpec
from suite.errors import ConfigError

INITIAL_VERSION = -1
"""Version of a value before any iteration produced it (the initial features, weights or gradients)."""


@dataclasses.dataclass(frozen=True)
class Mode:
    """An execution mode: asynchronous micro-pipeline (within a layer) and/or macro-pipeline (across layers)."""

    micro_async: bool
    macro_async: bool

    @classmethod
    def parse(cls, name: str) -> "Mode":
        """``"<micro>-<macro>"`` with ``sync`` or ``async`` each, e.g. ``"async-sync"``."""
        if name not in MODE_NAMES:
            raise ConfigError(f"unknown mode {name!r} (known: {', '.join(MODE_NAMES)})")
        micro, macro = name.split("-")
        return cls(micro == "async", macro == "async")

    @property
    def name(self) -> str:
        """``<micro>-<macro>``."""
        return f"{'async' if self.micro_async else 'sync'}-{'async' if self.macro_async else 'sync'}"


@dataclasses.dataclass(frozen=True)
class SimulationResult:
    """One mode's simulation.

    Attributes:
        mode: the mode's name.
        tasks: one row per task: ``phase`` (forward/backward), ``iteration``, ``layer``, ``stage``, ``partition``,
            ``worker`` (``L<layer>/<stage>/<index>``), ``start``, ``end`` (seconds).
        reads: one row per read of another partition's output or of the weights: ``kind`` (feature, gradient,
            weight), ``iteration``, ``layer``, ``partition``, ``source`` (partition read, -1 for weights),
            ``staleness`` (iterations behind).
        summary: makespan, throughput, utilization and staleness statistics.
    """

    mode: str
    tasks: pd.DataFrame
    reads: pd.DataFrame
    summary: dict[str, Any]


class _Versions:
    """Completion events of every version of one kind of value, per key (e.g. (layer, partition))."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self._events: dict[tuple, simpy.Event] = {}
        self.latest: dict[tuple, int] = {}

    def event(self, key: tuple, version: int) -> simpy.Event:
        """The event that fires when ``version`` of ``key`` is published (already fired for the initial one)."""
        if (key, version) not in self._events:
            event = self.env.event()
            if version <= INITIAL_VERSION:
                event.succeed()
            self._events[(key, version)] = event
        return self._events[(key, version)]

    def publish(self, key: tuple, version: int) -> None:
        """Mark ``version`` of ``key`` available now."""
        self.latest[key] = max(self.latest.get(key, INITIAL_VERSION), version)
        self.event(key, version).succeed()

    def newest(self, key: tuple, at_most: int) -> int:
        """The newest published version of ``key`` not newer than ``at_most``."""
        for version in range(at_most, INITIAL_VERSION, -1):
            event = self._events.get((key, version))
            if event is not None and event.triggered:
                return version
        return INITIAL_VERSION


class _Dependencies:
    """When a task may start: the versions of every output published so far, the rules of the mode for reading
    them (barriers, or neighbours' versions within the staleness bound), and the staleness of every read."""

    def __init__(self, env: simpy.Environment, mode: Mode, pipe: PipelineSpec, num_layers: int, num_parts: int):
        self.env, self.mode, self.pipe = env, mode, pipe
        self.num_layers, self.num_parts = num_layers, num_parts
        self.done = _Versions(env)  # (phase, layer, stage, partition) -> iteration versions
        self.weights = _Versions(env)  # (layer,) -> version = iteration whose update produced it
        self.reads: list[dict] = []

    def everywhere(self, phase: str, iteration: int, layer: int, stage: str) -> simpy.Event:
        """Fires once every partition finished ``(phase, layer, stage)`` of ``iteration`` (a barrier)."""
        return simpy.AllOf(self.env, [self.done.event((phase, layer, stage, q), iteration)
                                      for q in range(self.num_parts)])

    def neighbour_reads(self, kind: str, phase: str, iteration: int, layer: int, stage: str, part: int,
                        sources: np.ndarray):
        """Wait for ``part``'s own current input and (macro-async) neighbours' versions within the bound; record
        staleness. Macro-sync: every partition's current version (a barrier)."""
        if not self.mode.macro_async:
            yield self.everywhere(phase, iteration, layer, stage)
            return
        bound = self.pipe.staleness_bound
        waits = [self.done.event((phase, layer, stage, part), iteration)]
        for q in sources:
            if q != part:
                oldest = max(iteration - bound, INITIAL_VERSION)
                waits.append(simpy.AnyOf(self.env, [self.done.event((phase, layer, stage, q), v)
                                                    for v in range(oldest, iteration + 1)]))
        yield simpy.AllOf(self.env, waits)
        for q in sources:
            if q != part:
                version = self.done.newest((phase, layer, stage, q), iteration)
                self.reads.append({"kind": kind, "iteration": iteration, "layer": layer, "partition": part,
                                   "source": int(q), "staleness": iteration - version})

    def previous_stage(self, phase: str, iteration: int, layer: int, stage: str, part: int) -> simpy.Event:
        """The previous stage's output: the partition's own (micro-async) or every partition's (micro-sync)."""
        if self.mode.micro_async:
            return self.done.event((phase, layer, stage, part), iteration)
        return self.everywhere(phase, iteration, layer, stage)

    def iteration_start(self, t: int, part: int):
        """Wait until partition ``part`` may start iteration ``t``."""
        if t == 0:
            return
        if self.pipe.fb_pipeline:
            # pipelined iterations: the forward of iteration t follows iteration t-1's through the same workers;
            # the weight-staleness bound (in the update stage) limits how far it runs ahead
            yield self.done.event(("forward", 0, "aggregate", part), t - 1)
            return
        # synchronous: iteration t starts once iteration t-1 is complete everywhere
        last = ("backward", 0, "aggregate") if self.pipe.backward else ("forward", self.num_layers - 1, "activation")
        yield self.everywhere(last[0], t - 1, last[1], last[2])

    def weight_read(self, t: int, layer: int, part: int):
        """Wait for layer ``layer``'s weights within the bound; record the read's staleness."""
        wanted = t - 1  # the weights after iteration t-1's update
        oldest = wanted - (self.pipe.staleness_bound if self.pipe.fb_pipeline else 0)
        if oldest > INITIAL_VERSION:
            yield simpy.AnyOf(self.env, [self.weights.event((layer,), v) for v in range(oldest, wanted + 1)])
        version = self.weights.newest((layer,), wanted)
        self.reads.append({"kind": "weight", "iteration": t, "layer": layer, "partition": part, "source": -1,
                           "staleness": wanted - version})


class _Simulation:
    """The SimPy model of one mode (see the module docstring): the tasks, their workers and durations, waiting
    on :class:`_Dependencies`; :meth:`run` returns the result."""

    def __init__(self, spec: AsyncSpec, graph: PartitionedGraph, durations: Mapping[str, np.ndarray], mode: Mode):
        self.spec, self.graph, self.mode = spec, graph, mode
        self.pipe = spec.pipeline
        self.env = simpy.Environment()
        self.num_layers, self.num_parts = self.pipe.layers, graph.num_partitions
        self.pools = {}
        for layer in range(self.num_layers):
            for stage in STAGES:
                pool = simpy.Store(self.env)
                pool.items.extend(f"L{layer}/{stage}/{w}" for w in range(self.pipe.workers[stage]))
                self.pools[layer, stage] = pool
        rng = np.random.default_rng(spec.seed)
        shape = (self.pipe.iterations, 2, self.num_layers, len(STAGES), self.num_parts)
        self.noise = np.exp(rng.normal(0.0, self.pipe.jitter, size=shape)) if self.pipe.jitter else np.ones(shape)
        self.durations = durations
        self.deps = _Dependencies(self.env, mode, self.pipe, self.num_layers, self.num_parts)
        self.tasks: list[dict] = []

    def _duration(self, phase: str, iteration: int, layer: int, stage: str, part: int) -> float:
        base = float(self.durations[stage][part])
        if phase == "backward":
            base *= self.pipe.backward_factor[stage]
        return base * float(self.noise[iteration, int(phase == "backward"), layer, STAGES.index(stage), part])

    def _execute(self, phase: str, iteration: int, layer: int, stage: str, part: int):
        pool = self.pools[layer, stage]
        worker = yield pool.get()
        start = self.env.now
        yield self.env.timeout(self._duration(phase, iteration, layer, stage, part))
        yield pool.put(worker)
        self.tasks.append({"phase": phase, "iteration": iteration, "layer": layer, "stage": stage,
                           "partition": part, "worker": worker, "start": start, "end": self.env.now})
        self.deps.done.publish((phase, layer, stage, part), iteration)

    def _forward(self, t: int, layer: int, stage: str, part: int):
        deps = self.deps
        if stage == "aggregate":
            if layer == 0:
                yield from deps.iteration_start(t, part)
            else:
                yield from deps.neighbour_reads("feature", "forward", t, layer - 1, "activation", part,
                                                np.flatnonzero(self.graph.reads[part]))
        else:
            yield deps.previous_stage("forward", t, layer, STAGES[STAGES.index(stage) - 1], part)
        if stage == "update" and self.pipe.backward:
            yield from deps.weight_read(t, layer, part)
        yield from self._execute("forward", t, layer, stage, part)

    def _backward(self, t: int, layer: int, stage: str, part: int):
        deps, order = self.deps, STAGES[::-1]
        if stage == "activation":
            if layer == self.num_layers - 1:
                # the loss gradient of the partition's own outputs; macro-sync waits for the whole forward
                yield (deps.done.event(("forward", layer, "activation", part), t) if self.mode.macro_async
                       else deps.everywhere("forward", t, layer, "activation"))
            else:
                # gradients w.r.t. this layer's outputs come from every partition that aggregated them
                yield from deps.neighbour_reads("gradient", "backward", t, layer + 1, "aggregate", part,
                                                np.flatnonzero(self.graph.reads[:, part]))
        else:
            yield deps.previous_stage("backward", t, layer, order[order.index(stage) - 1], part)
        yield from self._execute("backward", t, layer, stage, part)

    def _weight_update(self, t: int, layer: int):
        yield self.deps.everywhere("backward", t, layer, "update")
        self.deps.weights.publish((layer,), t)

    def _start_tasks(self) -> int:
        """Create every task process (and weight update); return the number of tasks."""
        for t in range(self.pipe.iterations):
            for layer in range(self.num_layers):
                for stage in STAGES:
                    for part in range(self.num_parts):
                        self.env.process(self._forward(t, layer, stage, part))
                        if self.pipe.backward:
                            self.env.process(self._backward(t, layer, stage, part))
                if self.pipe.backward:
                    self.env.process(self._weight_update(t, layer))
        return self.pipe.iterations * self.num_layers * len(STAGES) * self.num_parts * (2 if self.pipe.backward else 1)

    def run(self) -> SimulationResult:
        """Create every task process, run to completion, and summarize."""
        expected = self._start_tasks()
        self.env.run()
        if len(self.tasks) != expected:  # a dependency that never fires would leave tasks waiting
            raise RuntimeError(f"simulation stalled: {len(self.tasks)} of {expected} tasks ran")
        tasks = pd.DataFrame(self.tasks).sort_values(["start", "worker"], kind="stable").reset_index(drop=True)
        reads = pd.DataFrame(self.deps.reads,
                             columns=["kind", "iteration", "layer", "partition", "source", "staleness"])
        return SimulationResult(self.mode.name, tasks, reads, summarize(tasks, reads, self.spec, self.graph,
                                                                       self.mode))


def summarize(tasks: pd.DataFrame, reads: pd.DataFrame, spec: AsyncSpec, graph: PartitionedGraph,
              mode: Mode) -> dict[str, Any]:
    """Makespan, throughput, per-worker utilization and staleness statistics of one simulated mode."""
    makespan = float(tasks["end"].max())
    busy = (tasks["end"] - tasks["start"]).groupby(tasks["worker"]).sum()
    utilization = busy / makespan
    iterations = spec.pipeline.iterations
    summary: dict[str, Any] = {
        "mode": mode.name, "micro": "async" if mode.micro_async else "sync",
        "macro": "async" if mode.macro_async else "sync", "fb_pipeline": spec.pipeline.fb_pipeline,
        "staleness_bound": spec.pipeline.staleness_bound, "iterations": iterations,
        "layers": spec.pipeline.layers, "partitions": graph.num_partitions, "tasks": len(tasks),
        "makespan_s": makespan, "iterations_per_s": iterations / makespan,
        "nodes_per_s": iterations * int(graph.nodes.sum()) / makespan,
        "busy_s": float(busy.sum()), "utilization_mean": float(utilization.mean()),
        "utilization_min": float(utilization.min()), "utilization_max": float(utilization.max()),
        "worker_utilization": {worker: float(u) for worker, u in utilization.items()},
    }
    for kind in ("feature", "gradient", "weight"):
        values = reads.loc[reads["kind"] == kind, "staleness"]
        summary[f"{kind}_reads"] = int(values.size)
        summary[f"{kind}_staleness_mean"] = float(values.mean()) if values.size else 0.0
        summary[f"{kind}_staleness_max"] = int(values.max()) if values.size else 0
        summary[f"{kind}_stale_fraction"] = float((values > 0).mean()) if values.size else 0.0
    return summary


def simulate(spec: AsyncSpec, mode: str | Mode, graph: PartitionedGraph | None = None,
             durations: Mapping[str, np.ndarray] | None = None) -> SimulationResult:
    """Simulate one mode of a spec.

    Args:
        spec: the validated spec.
        mode: a mode name (``"async-sync"``...) or :class:`Mode`.
        graph: the partitioned graph (default: built from the spec).
        durations: forward seconds per stage and partition (default: from the spec's duration source).

    Returns:
        The tasks, reads and summary.
    """
    mode = Mode.parse(mode) if isinstance(mode, str) else mode
    graph = graph if graph is not None else build_partitions(spec)
    durations = durations if durations is not None else stage_durations(spec, graph)
    return _Simulation(spec, graph, durations, mode).run()


def simulate_modes(spec: AsyncSpec, graph: PartitionedGraph | None = None,
                   durations: Mapping[str, np.ndarray] | None = None) -> list[SimulationResult]:
    """Simulate every mode of ``spec.modes`` on the same graph and durations (given, or built once from the
    spec)."""
    graph = graph if graph is not None else build_partitions(spec)
    durations = durations if durations is not None else stage_durations(spec, graph)
    return [simulate(spec, mode, graph, durations) for mode in spec.modes]


__all__ = ["INITIAL_VERSION", "Mode", "SimulationResult", "simulate", "simulate_modes", "summarize"]
