"""Discrete-event simulation (SimPy) of synchronous and asynchronous GNN pipelines (after Besta and Hoefler).

A training iteration runs L layers; each layer has three stages, ``aggregate`` (sparse aggregation over the
in-neighbours), ``update`` (dense transform) and ``activation`` (non-linearity), over the P partitions of the
graph; the backward pass runs the layers in reverse, stages in reverse order. Every (layer, stage) has its own
pool of workers (a SimPy ``Store`` of worker tokens, so each task is on one named worker); a task is a SimPy
process that waits for its inputs, takes a worker of its pool (first come, first served), holds it for its
duration and publishes its output. Forward and backward tasks of a layer share that layer's workers.

Execution modes, ``<micro>-<macro>``:

- micro ``sync``: within a layer, a barrier after each stage (every partition finishes stage s before any
  starts s+1); micro ``async``: a partition moves to its next stage as soon as its own previous stage is done, so
  the stages of a layer pipeline over partitions.
- macro ``sync``: a barrier between layers (layer l+1 starts once every partition finished layer l); macro
  ``async``: partition p starts layer l+1 once its own layer-l output is ready, and reads its neighbour
  partitions' layer-l outputs as they are *then*: from this iteration if they are done, else the latest older
  version, at most ``staleness_bound`` iterations old (it waits otherwise; bound 0 = dataflow without staleness).
  Backward gradients from neighbour partitions follow the same rule.
- forward/backward pipelining (``fb_pipeline``): without it, iteration t+1 starts after iteration t's weight
  update (synchronous SGD); with it, iteration t+1's forward runs while iteration t's backward is in flight and
  layer l's update may use weights up to ``staleness_bound`` updates old.

Staleness is recorded per read of a neighbour partition's output (features in the forward, gradients in the
backward) and per weight read: how many iterations (equivalently, updates of that partition's output) behind
the current one the value read was. Outputs: makespan, throughput (iterations and nodes per second),
per-worker utilization (busy time / makespan), the staleness distribution and every task's interval (the Gantt
chart).

Task durations come from the work-depth costs of :mod:`simulators.work_depth` (Brent: ``W / rate + D x
latency`` per stage and partition), from kernels measured on the real partitioned graph (SpMM, GEMM, ReLU in
torch), from a per-partition table, or fixed per stage; optional seeded log-normal jitter.

Specs are YAML (:func:`load_async_spec`); errors name the file and the field on one line.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
import simpy
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from suite.config import DatasetSpec, _format_error, read_yaml
from suite.errors import ConfigError
from suite.registry import Registry

STAGES = ("aggregate", "update", "activation")
"""Stages of a layer in forward order (the backward runs them reversed)."""

Stage = Literal["aggregate", "update", "activation"]
INITIAL_VERSION = -1
"""Version of a value before any iteration produced it (the initial features, weights or gradients)."""


# ---------------------------------------------------------------------------------------------- spec
class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def _all_stages(mapping: Mapping[str, Any], field: str) -> None:
    missing = [stage for stage in STAGES if stage not in mapping]
    if missing:
        raise ValueError(f"{field}: missing stage(s) {', '.join(missing)} (need {', '.join(STAGES)})")


class UniformGraphSpec(_Spec):
    """P equal partitions of a graph given by its sizes; which partitions neighbour which is a pattern."""

    kind: Literal["uniform"]
    num_nodes: int = Field(gt=0)
    num_edges: int = Field(ge=0)
    max_degree: int = Field(gt=0, description="d of every partition")
    num_partitions: int = Field(gt=0)
    neighbours: Literal["all", "ring", "none"] = Field("all", description="partitions each one reads from")


class DatasetGraphSpec(_Spec):
    """A real graph (the dataset registry) cut into P partitions."""

    kind: Literal["dataset"]
    dataset: DatasetSpec
    num_partitions: int = Field(gt=0)
    partitioner: Literal["random", "contiguous"] = "random"


class FixedDurations(_Spec):
    """The same forward duration (seconds) for a stage in every layer and partition."""

    source: Literal["fixed"]
    forward: dict[Stage, Annotated[float, Field(gt=0)]]

    @model_validator(mode="after")
    def _complete(self) -> "FixedDurations":
        _all_stages(self.forward, "forward")
        return self


class TableDurations(_Spec):
    """Forward durations (seconds) per stage and partition (lists of P values), e.g. measured elsewhere."""

    source: Literal["table"]
    forward: dict[Stage, list[Annotated[float, Field(gt=0)]]]

    @model_validator(mode="after")
    def _complete(self) -> "TableDurations":
        _all_stages(self.forward, "forward")
        return self


class WorkDepthDurations(_Spec):
    """Durations from the work-depth costs of a model's stages: ``W / ops_per_s[stage] + D * op_latency_s``."""

    source: Literal["workdepth"]
    model: str = Field("gcn", description="a work-depth model with a stage split (gcn, graphsage, gin, gat...)")
    features: int = Field(128, gt=0, description="k")
    ops_per_s: dict[Stage, Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: {"aggregate": 2e9, "update": 2e10, "activation": 5e9})
    op_latency_s: float = Field(1e-8, ge=0, description="time of one dependent step (the depth term)")

    @model_validator(mode="after")
    def _complete(self) -> "WorkDepthDurations":
        _all_stages(self.ops_per_s, "ops_per_s")
        return self


class MeasuredDurations(_Spec):
    """Durations of torch kernels timed per partition on the real graph (needs ``graph.kind: dataset``)."""

    source: Literal["measured"]
    features: int = Field(128, gt=0, description="k")
    repeats: int = Field(5, gt=0, description="timed repeats per kernel (the median is used)")
    threads: int = Field(1, gt=0, description="torch threads while timing")


class PipelineSpec(_Spec):
    """Shape of the pipeline and its asynchrony bounds."""

    layers: int = Field(2, gt=0)
    iterations: int = Field(4, gt=0)
    workers: dict[Stage, Annotated[int, Field(gt=0)]] = Field(
        default_factory=lambda: {stage: 1 for stage in STAGES}, description="workers per (layer, stage)")
    backward: bool = Field(True, description="simulate the backward pass and the weight update")
    backward_factor: dict[Stage, Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: {"aggregate": 1.0, "update": 2.0, "activation": 1.0},
        description="backward duration / forward duration per stage")
    staleness_bound: int = Field(1, ge=0, description="iterations a read value may lag in asynchronous modes")
    fb_pipeline: bool = Field(False, description="overlap iteration t+1's forward with iteration t's backward")
    jitter: float = Field(0.0, ge=0, description="std of log-normal noise on every task's duration")

    @model_validator(mode="after")
    def _complete(self) -> "PipelineSpec":
        _all_stages(self.workers, "workers")
        _all_stages(self.backward_factor, "backward_factor")
        return self


MODE_NAMES = ("sync-sync", "async-sync", "sync-async", "async-async")
"""``<micro>-<macro>`` execution modes."""


class AsyncSpec(_Spec):
    """One asynchronous-pipeline simulation: a graph, durations, a pipeline and the modes to compare."""

    name: str = "async-gnn"
    graph: UniformGraphSpec | DatasetGraphSpec = Field(discriminator="kind")
    durations: FixedDurations | TableDurations | WorkDepthDurations | MeasuredDurations = Field(
        discriminator="source")
    pipeline: PipelineSpec = Field(default_factory=PipelineSpec)
    modes: list[Literal["sync-sync", "async-sync", "sync-async", "async-async"]] = Field(
        default_factory=lambda: list(MODE_NAMES))
    seed: int = 0

    @model_validator(mode="after")
    def _consistent(self) -> "AsyncSpec":
        if isinstance(self.durations, TableDurations):
            for stage, values in self.durations.forward.items():
                if len(values) != self.graph.num_partitions:
                    raise ValueError(f"durations: forward.{stage}: expected {self.graph.num_partitions} values (one "
                                     f"per partition, graph.num_partitions), got {len(values)}")
        if isinstance(self.durations, MeasuredDurations) and not isinstance(self.graph, DatasetGraphSpec):
            raise ValueError("durations: source 'measured' needs graph.kind 'dataset' (a real graph to time on)")
        if not self.modes:
            raise ValueError("modes: at least one mode")
        return self


def async_spec_from_dict(data: Any, source: str = "<spec>") -> AsyncSpec:
    """Validate plain data into an :class:`AsyncSpec`; errors name ``source`` and the field path on one line."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        spec = AsyncSpec.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(source, err)) from None
    if isinstance(spec.durations, WorkDepthDurations):
        from simulators.work_depth import MODELS

        if spec.durations.model not in MODELS or MODELS.get(spec.durations.model).stages is None:
            known = ", ".join(x for x in MODELS if MODELS.get(x).stages)
            raise ConfigError(f"{source}: durations.model: unknown or without a stage split: "
                              f"{spec.durations.model!r} (known: {known})")
    return spec


def load_async_spec(path: str | Path) -> AsyncSpec:
    """Load and validate a YAML spec (see ``experiments/specs/async_gnn.yaml``)."""
    return async_spec_from_dict(read_yaml(path), source=str(path))


# ---------------------------------------------------------------------------------------------- partitions
@dataclasses.dataclass(frozen=True)
class PartitionedGraph:
    """Per-partition sizes and the partition adjacency.

    Attributes:
        nodes: n_p per partition.
        edges: m_p, in-edges whose destination is in p.
        max_degree: d_p, the largest in-degree in p.
        reads: ``reads[p, q]`` is True when p aggregates from q (an edge q -> p); the diagonal is True.
        edge_index: the graph's ``(2, m)`` ``(src, dst)`` edges (dataset graphs only, for measured durations).
        assignment: the partition of every node (dataset graphs only).
    """

    nodes: np.ndarray
    edges: np.ndarray
    max_degree: np.ndarray
    reads: np.ndarray
    edge_index: np.ndarray | None = None
    assignment: np.ndarray | None = None

    @property
    def num_partitions(self) -> int:
        """P."""
        return int(self.nodes.shape[0])


def uniform_partitions(spec: UniformGraphSpec) -> PartitionedGraph:
    """P partitions of equal size (remainders to the first ones) with the spec's neighbour pattern."""
    p = spec.num_partitions
    nodes = np.full(p, spec.num_nodes // p, dtype=np.int64) + (np.arange(p) < spec.num_nodes % p)
    edges = np.full(p, spec.num_edges // p, dtype=np.int64) + (np.arange(p) < spec.num_edges % p)
    eye = np.eye(p, dtype=bool)
    reads = {"all": np.ones((p, p), dtype=bool), "none": eye,
             "ring": eye | np.roll(eye, 1, axis=1) | np.roll(eye, -1, axis=1)}[spec.neighbours]
    return PartitionedGraph(nodes, edges, np.full(p, spec.max_degree, dtype=np.int64), reads)


def partition_graph(edge_index: np.ndarray, num_nodes: int, num_partitions: int, partitioner: str = "random",
                    seed: int = 0) -> PartitionedGraph:
    """Cut a graph into partitions and measure them (vectorized).

    Args:
        edge_index: ``(2, m)`` ``(src, dst)``.
        num_nodes: n.
        num_partitions: P.
        partitioner: ``"random"`` (a seeded random balanced assignment) or ``"contiguous"`` (id ranges).
        seed: seed of the random assignment.

    Returns:
        The partitioned graph (with ``edge_index`` and ``assignment``).
    """
    p = num_partitions
    if partitioner == "random":
        assignment = np.empty(num_nodes, dtype=np.int64)
        assignment[np.random.default_rng(seed).permutation(num_nodes)] = np.arange(num_nodes) % p
    elif partitioner == "contiguous":
        assignment = (np.arange(num_nodes, dtype=np.int64) * p) // num_nodes
    else:
        raise ConfigError(f"graph.partitioner: unknown {partitioner!r} (known: contiguous, random)")
    src, dst = edge_index
    degrees = np.bincount(dst, minlength=num_nodes)
    max_degree = np.zeros(p, dtype=np.int64)
    np.maximum.at(max_degree, assignment, degrees)
    reads = np.zeros((p, p), dtype=bool)
    reads[assignment[dst], assignment[src]] = True
    reads |= np.eye(p, dtype=bool)
    return PartitionedGraph(np.bincount(assignment, minlength=p), np.bincount(assignment[dst], minlength=p),
                            max_degree, reads, edge_index, assignment)


def build_partitions(spec: AsyncSpec) -> PartitionedGraph:
    """The partitioned graph of a spec (a dataset graph is opened, or generated once, by the dataset registry)."""
    if isinstance(spec.graph, UniformGraphSpec):
        return uniform_partitions(spec.graph)
    from suite.datasets import open_dataset
    from suite.graph.pyg import to_pyg_data

    data = to_pyg_data(open_dataset(spec.graph.dataset))
    return partition_graph(data.edge_index.numpy(), int(data.num_nodes), spec.graph.num_partitions,
                           spec.graph.partitioner, spec.seed)


# ---------------------------------------------------------------------------------------------- durations
DURATION_SOURCES: Registry = Registry("duration source")
"""``source`` name -> ``(durations spec, partitioned graph) -> {stage: (P,) forward seconds}``."""


@DURATION_SOURCES.register("fixed")
def fixed_durations(spec: FixedDurations, graph: PartitionedGraph) -> dict[str, np.ndarray]:
    """The same duration for every partition."""
    return {stage: np.full(graph.num_partitions, spec.forward[stage]) for stage in STAGES}


@DURATION_SOURCES.register("table")
def table_durations(spec: TableDurations, graph: PartitionedGraph) -> dict[str, np.ndarray]:
    """The given per-partition durations."""
    return {stage: np.asarray(spec.forward[stage], dtype=np.float64) for stage in STAGES}


@DURATION_SOURCES.register("workdepth")
def workdepth_durations(spec: WorkDepthDurations, graph: PartitionedGraph) -> dict[str, np.ndarray]:
    """Brent's bound per stage and partition: ``W_p / ops_per_s[stage] + D_p * op_latency_s``."""
    from simulators.work_depth import MODELS

    model = MODELS.get(spec.model)
    out = {}
    for stage in STAGES:
        costs = [model.stage_cost(stage, n=float(n_p), m=float(max(m_p, 1)), k=float(spec.features),
                                  d=float(max(d_p, 1)))
                 for n_p, m_p, d_p in zip(graph.nodes, graph.edges, graph.max_degree)]
        out[stage] = np.array([w / spec.ops_per_s[stage] + dd * spec.op_latency_s for w, dd in costs])
    return out


@DURATION_SOURCES.register("measured")
def measured_durations(spec: MeasuredDurations, graph: PartitionedGraph) -> dict[str, np.ndarray]:
    """Median time of the real kernels per partition, in torch on this machine: the SpMM of the partition's
    in-edges with an ``n x k`` feature matrix (aggregate), the ``n_p x k`` by ``k x k`` GEMM (update) and a
    ReLU over ``n_p x k`` (activation)."""
    import torch

    if graph.edge_index is None or graph.assignment is None:
        raise ConfigError("durations: source 'measured' needs a dataset graph")
    previous = torch.get_num_threads()
    torch.set_num_threads(spec.threads)
    try:
        gen = torch.Generator().manual_seed(0)
        num_nodes = graph.assignment.shape[0]
        features = torch.randn(num_nodes, spec.features, generator=gen)
        weight = torch.randn(spec.features, spec.features, generator=gen)
        src, dst = (torch.from_numpy(np.ascontiguousarray(row)) for row in graph.edge_index)
        part_of_dst = torch.from_numpy(graph.assignment)[dst]
        out: dict[str, list[float]] = {stage: [] for stage in STAGES}
        for p in range(graph.num_partitions):
            nodes_p = torch.from_numpy(np.flatnonzero(graph.assignment == p))
            local = torch.full((num_nodes,), -1, dtype=torch.int64)
            local[nodes_p] = torch.arange(nodes_p.numel())
            keep = part_of_dst == p
            adjacency = torch.sparse_coo_tensor(torch.stack([local[dst[keep]], src[keep]]),
                                                torch.ones(int(keep.sum())), (nodes_p.numel(), num_nodes)
                                                ).coalesce().to_sparse_csr()
            rows = features[nodes_p]
            kernels = {"aggregate": lambda: torch.sparse.mm(adjacency, features),
                       "update": lambda: rows @ weight, "activation": lambda: torch.relu(rows)}
            for stage, kernel in kernels.items():
                out[stage].append(_median_time(kernel, spec.repeats))
    finally:
        torch.set_num_threads(previous)
    return {stage: np.asarray(values) for stage, values in out.items()}


def _median_time(kernel, repeats: int) -> float:
    kernel()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        kernel()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def stage_durations(spec: AsyncSpec, graph: PartitionedGraph) -> dict[str, np.ndarray]:
    """Forward seconds per stage and partition, ``{stage: (P,) array}``, from the spec's duration source."""
    return DURATION_SOURCES.get(spec.durations.source)(spec.durations, graph)


# ---------------------------------------------------------------------------------------------- simulation
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


class _Simulation:
    """The SimPy model of one mode (see the module docstring); :meth:`run` returns the result."""

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
        self.done = _Versions(self.env)  # (phase, layer, stage, partition) -> iteration versions
        self.weights = _Versions(self.env)  # (layer,) -> version = iteration whose update produced it
        self.tasks: list[dict] = []
        self.reads: list[dict] = []

    # ------------------------------------------------------------------------------------------- helpers
    def _all(self, phase: str, iteration: int, layer: int, stage: str) -> simpy.Event:
        return simpy.AllOf(self.env, [self.done.event((phase, layer, stage, q), iteration)
                                      for q in range(self.num_parts)])

    def _neighbour_reads(self, kind: str, phase: str, iteration: int, layer: int, stage: str, part: int,
                         sources: np.ndarray):
        """Wait for ``part``'s own current input and (macro-async) neighbours' versions within the bound; record
        staleness. Macro-sync: every partition's current version (a barrier)."""
        if not self.mode.macro_async:
            yield self._all(phase, iteration, layer, stage)
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
        self.done.publish((phase, layer, stage, part), iteration)

    def _previous_stage(self, phase: str, iteration: int, layer: int, stage: str, part: int) -> simpy.Event:
        if self.mode.micro_async:
            return self.done.event((phase, layer, stage, part), iteration)
        return self._all(phase, iteration, layer, stage)

    # ------------------------------------------------------------------------------------------- tasks
    def _forward(self, t: int, layer: int, stage: str, part: int):
        if stage == "aggregate":
            if layer == 0:
                yield from self._iteration_start(t, part)
            else:
                yield from self._neighbour_reads("feature", "forward", t, layer - 1, "activation", part,
                                                 np.flatnonzero(self.graph.reads[part]))
        else:
            previous = STAGES[STAGES.index(stage) - 1]
            yield self._previous_stage("forward", t, layer, previous, part)
        if stage == "update" and self.pipe.backward:
            yield from self._weight_read(t, layer, part)
        yield from self._execute("forward", t, layer, stage, part)

    def _iteration_start(self, t: int, part: int):
        if t == 0:
            return
        if self.pipe.fb_pipeline:
            # pipelined iterations: the forward of iteration t follows iteration t-1's through the same workers;
            # the weight-staleness bound (in the update stage) limits how far it runs ahead
            yield self.done.event(("forward", 0, "aggregate", part), t - 1)
            return
        # synchronous: iteration t starts once iteration t-1 is complete everywhere
        last = ("backward", 0, "aggregate") if self.pipe.backward else ("forward", self.num_layers - 1, "activation")
        yield self._all(last[0], t - 1, last[1], last[2])

    def _weight_read(self, t: int, layer: int, part: int):
        wanted = t - 1  # the weights after iteration t-1's update
        oldest = wanted - (self.pipe.staleness_bound if self.pipe.fb_pipeline else 0)
        if oldest > INITIAL_VERSION:
            yield simpy.AnyOf(self.env, [self.weights.event((layer,), v) for v in range(oldest, wanted + 1)])
        version = self.weights.newest((layer,), wanted)
        self.reads.append({"kind": "weight", "iteration": t, "layer": layer, "partition": part, "source": -1,
                           "staleness": wanted - version})

    def _backward(self, t: int, layer: int, stage: str, part: int):
        order = STAGES[::-1]
        if stage == "activation":
            if layer == self.num_layers - 1:
                # the loss gradient of the partition's own outputs; macro-sync waits for the whole forward
                yield (self.done.event(("forward", layer, "activation", part), t) if self.mode.macro_async
                       else self._all("forward", t, layer, "activation"))
            else:
                # gradients w.r.t. this layer's outputs come from every partition that aggregated them
                yield from self._neighbour_reads("gradient", "backward", t, layer + 1, "aggregate", part,
                                                 np.flatnonzero(self.graph.reads[:, part]))
        else:
            yield self._previous_stage("backward", t, layer, order[order.index(stage) - 1], part)
        yield from self._execute("backward", t, layer, stage, part)

    def _weight_update(self, t: int, layer: int):
        yield self._all("backward", t, layer, "update")
        self.weights.publish((layer,), t)

    def run(self) -> SimulationResult:
        """Create every task process, run to completion, and summarize."""
        for t in range(self.pipe.iterations):
            for layer in range(self.num_layers):
                for stage in STAGES:
                    for part in range(self.num_parts):
                        self.env.process(self._forward(t, layer, stage, part))
                        if self.pipe.backward:
                            self.env.process(self._backward(t, layer, stage, part))
                if self.pipe.backward:
                    self.env.process(self._weight_update(t, layer))
        self.env.run()
        expected = self.pipe.iterations * self.num_layers * len(STAGES) * self.num_parts * (
            2 if self.pipe.backward else 1)
        if len(self.tasks) != expected:  # a dependency that never fires would leave tasks waiting
            raise RuntimeError(f"simulation stalled: {len(self.tasks)} of {expected} tasks ran")
        tasks = pd.DataFrame(self.tasks).sort_values(["start", "worker"], kind="stable").reset_index(drop=True)
        reads = pd.DataFrame(self.reads, columns=["kind", "iteration", "layer", "partition", "source", "staleness"])
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


def simulate_modes(spec: AsyncSpec) -> list[SimulationResult]:
    """Simulate every mode of ``spec.modes`` on the same graph and durations (built once)."""
    graph = build_partitions(spec)
    durations = stage_durations(spec, graph)
    return [simulate(spec, mode, graph, durations) for mode in spec.modes]


def summary_table(results: Sequence[SimulationResult]) -> pd.DataFrame:
    """One row per mode (scalars of the summaries; per-worker utilization left out), with the speedup over the
    first mode."""
    rows = [{k: v for k, v in r.summary.items() if k != "worker_utilization"} for r in results]
    table = pd.DataFrame(rows)
    table["speedup"] = table["makespan_s"].iloc[0] / table["makespan_s"]
    return table


def tasks_table(results: Sequence[SimulationResult]) -> pd.DataFrame:
    """Every task of every mode (the Gantt data), tidy: ``mode`` first."""
    return pd.concat([r.tasks.assign(mode=r.mode) for r in results], ignore_index=True)[
        ["mode", "phase", "iteration", "layer", "stage", "partition", "worker", "start", "end"]]


@functools.cache
def _stage_colors() -> dict[str, str]:
    return {"aggregate": "tab:blue", "update": "tab:orange", "activation": "tab:green"}


def plot_gantt(tasks: pd.DataFrame, out_png: str | Path, title: str = "") -> Path:
    """Gantt charts, one panel per mode (rows: workers; colour: stage; hatched: backward; label: partition),
    each titled with its makespan. Reads only the tasks table (e.g. the recorded CSV).

    Args:
        tasks: :func:`tasks_table`'s rows.
        out_png: the figure's path (written atomically).
        title: an overall title.

    Returns:
        ``out_png``.
    """
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from suite.io import atomic_write_bytes

    modes = list(dict.fromkeys(tasks["mode"]))
    workers = sorted(tasks["worker"].unique(), key=lambda w: (int(w.split("/")[0][1:]),
                                                              STAGES.index(w.split("/")[1]), w))
    horizon = float(tasks["end"].max())
    fig, axes = plt.subplots(len(modes), 1, figsize=(12, 1.2 + 0.32 * len(workers) * len(modes)), sharex=True,
                             squeeze=False)
    colors = _stage_colors()
    for ax, mode in zip(axes[:, 0], modes):
        rows = tasks[tasks["mode"] == mode]
        for worker_row, (worker, group) in enumerate((w, rows[rows["worker"] == w]) for w in workers):
            for stage, by_stage in group.groupby("stage"):
                for phase, part in by_stage.groupby("phase"):
                    ax.broken_barh(list(zip(part["start"], part["end"] - part["start"])), (worker_row - 0.4, 0.8),
                                   facecolors=colors[stage], edgecolor="black", linewidth=0.3,
                                   hatch="///" if phase == "backward" else None, alpha=0.9)
            if len(group) <= 48:
                for _, task in group.iterrows():
                    ax.text((task["start"] + task["end"]) / 2, worker_row, str(task["partition"]), ha="center",
                            va="center", fontsize=5)
        makespan = float(rows["end"].max())
        ax.axvline(makespan, color="red", linewidth=0.8)
        ax.set_yticks(range(len(workers)), workers, fontsize=6)
        ax.invert_yaxis()
        ax.set_title(f"micro-{mode.split('-')[0]} / macro-{mode.split('-')[1]}: makespan {makespan:.4g} s",
                     fontsize=9, loc="left")
        ax.set_xlim(0, horizon * 1.01)
    axes[-1, 0].set_xlabel("simulated time (s)")
    handles = [Patch(facecolor=c, label=s) for s, c in colors.items()] + [
        Patch(facecolor="white", edgecolor="black", hatch="///", label="backward")]
    fig.legend(handles=handles, loc="upper right", ncol=4, fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=130)
    plt.close(fig)
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out_png, buffer.getvalue())
    return out_png


__all__ = ["AsyncSpec", "DURATION_SOURCES", "MODE_NAMES", "Mode", "PartitionedGraph", "STAGES", "SimulationResult",
           "async_spec_from_dict", "build_partitions", "load_async_spec", "partition_graph", "plot_gantt",
           "simulate", "simulate_modes", "stage_durations", "summary_table", "tasks_table", "uniform_partitions"]
