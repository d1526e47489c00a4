"""The disk-based system: train from a partitioned store through a buffer of ``c`` partitions (MariusGNN).

Setup partitions the run's store into ``p`` partitions (cached beside the dataset, :func:`partitioned_store`):
node rows partition-contiguous, edges in ``p x p`` buckets sorted by destination. A run is a sequence of
*passes* (:func:`systems.system.pass_schedule`: every training epoch, and the evaluations after it); each pass
follows a plan (:mod:`systems.disk.plan`) of the registered policy (:mod:`systems.disk.policies`), a sequence of buffer states. This module
holds what every task variant shares, the *walk* over a pass's states:

1. **Residency.** A state's partitions occupy *frames* of the buffer (:class:`~systems.disk.buffer.FeatureBuffer`:
   ``c`` frames for a state plus frames to read ahead into). Entering a state reads only the partitions it does
   not hold yet; with ``keeps_resident`` (node classification) partitions stay resident from one pass to the next,
   so an evaluation over resident nodes, or an epoch of the same state, reads nothing (:func:`plan_steps`). A
   state without examples is not entered (it would compute nothing): the walk reads for the next state entered
   only what it holds that is not resident.
2. **Prefetch.** While state ``k`` computes, the prefetch thread reads state ``k + 1``'s partitions into free
   frames, reads the buckets between its partitions and assembles its in-buffer CSR
   (:mod:`systems.disk.graph`: IO and numba code that release the interpreter). At a pass's last state it
   prepares the next passes the same way (their plans are known ahead: the schedule is fixed), through passes
   that read nothing, up to the first that does: the next epoch's new partitions are read while this epoch's last
   state computes, and a warm epoch starts without a fill wait.
3. **Timeline.** Every state is recorded (``state`` records in ``records.jsonl``, read by
   :func:`suite.results.load_timeline`): each read (what, start, end, bytes, and whether the prefetch thread did
   it), the CSR build, how long compute waited and on what, and the compute interval; times in seconds from the
   start of the run.

Variants by ``training.task`` are declared in :data:`DISK_TASKS` (the ``disk_tasks`` table of :mod:`systems.plugins`) (node classification:
:mod:`systems.disk.disk_node_classification`; link prediction: :mod:`systems.disk.disk_link_prediction`); the
factory :func:`disk_system`, declared as the ``disk`` system, builds the variant of a spec. A training epoch
reads top-down in :meth:`DiskSystem.train_epoch`: the system drives the plan's states and the variant supplies
the per-state hook (bind the task to the state, return its batch roots) and the hooks around the pass. Recorded
per epoch: states, swaps (partitions read after a pass's first state), bytes read by the suite and what
``/proc/self/io`` says the process read, IO wait (time compute waited for the buffer) and the CSR build time.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import Field, field_validator, model_validator

from suite.config import RunSpec, validate_system_options
from suite.errors import ConfigError
from suite.data import GraphStore
from suite.io import IOCounters
from suite.metrics import StageTimer
from suite.recorder import Recorder
from suite.registry import Registry
from systems.batch import Batch, batch_seed
from systems.system import EpochStats, PassKey, System, SystemOptions, pass_schedule
from systems.disk.buffer import FeatureBuffer, partition_runs
from systems.disk.graph import BufferedGraph, ReadEvent
from systems.disk.plan import BufferPlan
from systems.disk.policies.policy import POLICIES
from systems.models.rgcn import RelationLookup
from systems.pipelined import StageOptions, pipeline_extra, record_trace, task_stages
from systems.sampling.sampler import SamplingGraph
from systems.stage_pipeline import Pipeline
from systems.stages import epoch_stats, run_stages

DISK_TASKS: Registry[type] = Registry("disk-system task", plugin_table="disk_tasks")
"""The disk system's variant (a :class:`DiskSystem` subclass) for each ``training.task`` (the ``disk_tasks`` plugin
table, :mod:`systems.plugins`); :func:`disk_system` chooses from it."""


class DiskOptions(SystemOptions):
    """``system.options`` of the ``disk`` system."""

    policy: str = Field("sequential", description="registered partition-buffer policy")
    num_partitions: int = Field(16, ge=1, description="p: node partitions on disk")
    buffer_capacity: int = Field(4, ge=1, description="c: partitions held in memory")
    fine_to_coarse_ratio: int = Field(1, ge=1, description="physical partitions per logical one (comet, dispersed)")
    order: str = Field("train-first", description="node ordering of the partitioning ('random', 'train-first', "
                                                  "'labeled-first', 'neighborhood-first')")
    ADDED_OPTIONS: ClassVar[dict[str, Any]] = {"partition_seed": None, "read_threads": 16, "coalesce_bytes": 256 << 10}
    """Options added after disk runs were recorded: at these values they are left out of the run id (how the
    store is read, or the earlier default), so those runs keep their ids."""

    partition_seed: int | None = Field(None, ge=0, description="seed of the node order that partitions the "
                                       "store (default: the run's seed); runs that give the same one share one "
                                       "partitioned copy, as MariusGNN preprocesses a graph once for all runs")
    prefetch: bool = Field(True, description="read the next state's partitions while the current one computes")
    read_ahead_frames: int | None = Field(None, ge=1, description="buffer frames beyond c to read ahead into "
                                                                  "(default c - 1, at least 1)")
    evict_page_cache: bool = Field(True, description="drop every range read from the page cache (reads hit disk)")
    eval_policy: str | None = Field(None, description="policy of evaluation passes (default: 'sequential' when "
                                                      "the split's partitions fit in the buffer, else 'dispersed' "
                                                      "for node classification; the training policy for links)")
    verify_checksums: bool = Field(True, description="check every partition and bucket read (features, "
                                                     "embeddings, edges) against its CRC-32 (where the partitioned "
                                                     "store has them)")
    read_threads: int = Field(16, ge=1, description="threads reading a state's runs of adjacent partitions at once "
                                                   "(requests in flight: at fine granularity a state is many small "
                                                   "runs; 1: one after another)")
    coalesce_bytes: int = Field(256 << 10, ge=0, description="edge buckets closer than this on disk are read as "
                                                              "one extent, the rows between them dropped (0: "
                                                              "read exactly the buckets needed)")
    resume: bool = Field(True, description="link prediction: continue a killed run from its last committed epoch")
    pipeline: StageOptions | None = Field(None, description="run each state's batches through the staged pipeline "
                                                            "with these options (bounded staleness; drained "
                                                            "before every swap); None: one batch at a time")

    @field_validator("policy", "eval_policy")
    @classmethod
    def _known_policy(cls, value: str | None) -> str | None:
        if value is not None and value not in POLICIES:
            raise ValueError(f"unknown policy {value!r} (known: {', '.join(POLICIES.names())})")
        return value

    @field_validator("pipeline")
    @classmethod
    def _threads_only(cls, value: StageOptions | None) -> StageOptions | None:
        if value is not None and value.loader_workers != "thread":
            raise ValueError("loader_workers: the disk system loads in threads (the buffer changes between states)")
        return value

    @property
    def frames(self) -> int:
        """Buffer frames: ``c`` plus the read-ahead frames (with or without prefetch: where a partition goes, and
        so every buffer row, must not depend on timing)."""
        return self.buffer_capacity + (self.read_ahead_frames or max(1, self.buffer_capacity - 1))

    @model_validator(mode="after")
    def _buffer_fits(self) -> "DiskOptions":  # checked when the spec is loaded, before any output exists
        if self.buffer_capacity > self.num_partitions:
            raise ValueError(f"buffer_capacity: {self.buffer_capacity} exceeds num_partitions {self.num_partitions}")
        return self

    def order_seed(self, run_seed: int) -> int:
        """The seed of the partitioning's node order: :attr:`partition_seed`, else the run's."""
        return run_seed if self.partition_seed is None else self.partition_seed


def partitioned_store_path(store: GraphStore, num_partitions: int, order: str, seed: int) -> Path:
    """Where :func:`partitioned_store` keeps ``store`` partitioned into ``num_partitions`` (next to it)."""
    return store.path.parent / f"{store.path.name}-p{num_partitions}-{order}-s{seed}"


def current_layout(metadata: dict) -> bool:
    """Whether a partitioned store's metadata records the current layout (:data:`suite.data.partition.LAYOUT_VERSION`;
    an older one is rebuilt)."""
    from suite.data.partition import LAYOUT_VERSION

    return metadata.get("partitioning", {}).get("layout_version") == LAYOUT_VERSION


def needs_partitioning(store: GraphStore, num_partitions: int, order: str, seed: int) -> bool:
    """Whether :func:`partitioned_store` will partition ``store`` (no cached copy of the current layout yet)."""
    from suite.data.store import METADATA_FILE

    try:
        metadata = json.loads((partitioned_store_path(store, num_partitions, order, seed) / METADATA_FILE).read_text())
    except (OSError, ValueError):
        return True
    return not current_layout(metadata)


def partitioned_store(store: GraphStore, num_partitions: int, order: str, seed: int) -> GraphStore:
    """The store partitioned into ``num_partitions`` (cached next to it, created once, atomically: runs needing it
    at once wait for one build; a cached store of an older layout version is rebuilt)."""
    from suite.datasets import cache_lock, cached_store
    from suite.data.partition import partition_store
    from suite.memory import memory_budget

    path = partitioned_store_path(store, num_partitions, order, seed)
    build = lambda out, overwrite=False: partition_store(store, out, num_partitions, order=order,  # noqa: E731
                                                         seed=seed, overwrite=overwrite, memory=memory_budget())
    cached = cached_store(path, build)
    if current_layout(cached.metadata):
        return cached
    with cache_lock(path):
        if not current_layout(GraphStore.open(path).metadata):
            build(path, overwrite=True)
    return cached_store(path, build)


def state_bar(states: int, epoch: int, enabled: bool):
    """A tqdm bar over an epoch's buffer states (disabled without ``progress``)."""
    from tqdm import tqdm

    return tqdm(total=states, desc=f"epoch {epoch}", unit="state", disable=not enabled, leave=False)


def state_batches_of(roots: torch.Tensor, batch_size: int, epoch: int, first_index: int) -> list[Batch]:
    """A state's batch roots (in training order) cut into batches of ``batch_size``, numbered from
    ``first_index``; none for a state without roots. A state holding no training example must take no optimizer
    step: ``torch.split`` of an empty tensor gives one empty batch, whose zero gradient still moves every weight
    under Adam (its momentum), once per such state (``dispersed`` holds the training partitions in few of its
    states)."""
    return [Batch(epoch=epoch, index=first_index + i, roots=part)
            for i, part in enumerate(roots.split(batch_size)) if len(part)]


# ------------------------------------------------------------------------------------------------ the walk
@dataclass(frozen=True)
class Step:
    """Entering one state of a pass, in frames.

    Attributes:
        index: the state.
        loads: partitions read for the state (ascending).
        frames: the frame each load goes to.
        ahead: per load, whether its frame is free before the state is entered (so it can be read ahead).
        evicts: frames emptied on entering (their partitions leave).
        layout: ``(frames,)`` partition per frame once the state is entered (-1: empty).
    """

    index: int
    loads: np.ndarray
    frames: np.ndarray
    ahead: np.ndarray
    evicts: np.ndarray
    layout: np.ndarray


def plan_steps(plan: BufferPlan, layout: np.ndarray) -> list[Step]:
    """The frame-level steps of ``plan`` starting from ``layout`` (partition per frame, -1 empty).

    A pass enters only the states that hold examples (:meth:`BufferPlan.states_with_examples`): a state without
    any would compute nothing. Entering a state reads the partitions it holds that are not resident; the resident
    ones it does not hold leave (so the reads of a skipped state are made only for those of its partitions that
    are still held by the next state entered). A read goes to the lowest frame that is empty before the state
    (readable ahead while the previous state computes), or, when there is none, to the lowest frame the state
    empties (read on entering). Frames depend only on the plan and the starting layout, never on timing.
    """
    layout = np.asarray(layout, dtype=np.int64).copy()
    p = plan.num_partitions
    held = np.zeros(p, dtype=bool)  # resident in the frames
    held[layout[layout >= 0]] = True
    member = np.zeros(p, dtype=bool)  # held by the plan's current state
    frame_of = np.full(p, -1, dtype=np.int64)
    frame_of[layout[layout >= 0]] = np.flatnonzero(layout >= 0)
    enter = np.zeros(plan.num_states, dtype=bool)
    enter[plan.states_with_examples()] = True
    changed: list[np.ndarray] = []  # partitions whose membership changed since the last state entered
    steps = []
    for k, transition in enumerate(plan.iter_transitions()):
        loaded, evicted = transition.partitions_loaded, transition.partitions_evicted
        if k == 0:  # the plan's state 0 is a fill: what it does not load leaves
            member[:] = False
            changed.append(np.flatnonzero(held))
        else:
            member[evicted] = False
        member[loaded] = True
        changed += [loaded, evicted]
        if not enter[k]:
            continue
        touched = np.unique(np.concatenate(changed)).astype(np.int64)
        changed = []
        loads = touched[member[touched] & ~held[touched]]
        leaving = touched[held[touched] & ~member[touched]]
        evicts = np.sort(frame_of[leaving])
        free = np.flatnonzero(layout < 0)
        frames = np.concatenate([free, evicts])[:len(loads)]
        if len(frames) < len(loads):
            raise ConfigError(f"plan {plan.policy}: state {k} holds more partitions than the buffer has frames")
        ahead = np.arange(len(loads)) < len(free)
        layout[evicts] = -1
        frame_of[leaving] = -1
        layout[frames] = loads
        frame_of[loads] = frames
        held[leaving] = False
        held[loads] = True
        steps.append(Step(k, loads.astype(np.int64), frames.astype(np.int64), ahead, evicts.astype(np.int64),
                          layout.copy()))
    return steps


@dataclass
class StateData:
    """What entering a state needs besides the resident partitions, prepared ahead (or on entering).

    Attributes:
        step: the state's step.
        graph: its in-buffer CSR (None when the model reads no neighbours).
        relation_lookup: the relation types of ``graph``'s edges, for an encoder that reads them (else None).
        examples: what the variant takes from the state's in-buffer data (link prediction: its edges).
        reads: the reads done while preparing (partitions read ahead, buckets).
        build: ``(start, end)`` of the CSR assembly (or of holding the buckets).
        ahead: whether the prefetch thread prepared it.
        in_buffer_edges: edges in the held buckets.
    """

    step: Step
    graph: SamplingGraph | None
    examples: torch.Tensor | None
    reads: list[ReadEvent]
    build: tuple[float, float]
    ahead: bool
    in_buffer_edges: int = 0
    relation_lookup: RelationLookup | None = None


@dataclass
class StateTimeline:
    """One state's timeline (``state`` record): reads, build, wait, compute; ``perf_counter`` times."""

    key: PassKey
    step: Step
    reads: list[tuple[ReadEvent, bool]]
    build: tuple[float, float]
    build_ahead: bool
    wait: tuple[float, float]
    waited_on: str
    compute: tuple[float, float] = (0.0, 0.0)
    batches: int = 0
    in_buffer_edges: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def record(self, origin: float) -> dict[str, Any]:
        """The fields of the ``state`` record, times in seconds from ``origin``."""
        def at(t: float) -> float:
            return round(t - origin, 6)

        return {
            "pass": self.key[0], "epoch": self.key[1], "state": self.step.index,
            "loads": self.step.loads.tolist(), "evicted_frames": self.step.evicts.tolist(),
            "reads": [{"what": event.kind, "partition": event.partition, "start": at(event.start),
                       "end": at(event.end), "bytes": event.bytes, "ahead": ahead} for event, ahead in self.reads],
            "build_start": at(self.build[0]), "build_end": at(self.build[1]), "build_ahead": self.build_ahead,
            "wait_start": at(self.wait[0]), "wait_end": at(self.wait[1]), "waited_on": self.waited_on,
            "compute_start": at(self.compute[0]), "compute_end": at(self.compute[1]),
            "batches": self.batches, "in_buffer_edges": self.in_buffer_edges, **self.extra,
        }


@dataclass
class _Carried:
    """A pass prepared ahead: its plan, steps and the prepare of its first state (None: not submitted)."""

    key: PassKey
    plan: BufferPlan
    steps: list[Step]
    first: concurrent.futures.Future | None


class DiskSystem(System):
    """Training from disk through a partition buffer (options: :class:`DiskOptions`): what every task variant
    shares. Build one with :func:`disk_system`, which picks the variant of ``training.task`` from
    :data:`DISK_TASKS`.

    A variant sets up ``self.buffer`` (frames), ``self.edges`` (:class:`BufferedGraph`), ``self.pstore`` and its
    task (built with the task's ``build_model``, never its ``setup``) in :meth:`setup`, and provides
    :meth:`pass_plan` and the per-state hook :meth:`bind_training_state` (plus, where it needs them,
    :meth:`state_examples`, :meth:`start_training_pass` and :meth:`finish_training_pass`). A training epoch
    (:meth:`train_epoch`), top-down:

    1. ``start_training_pass(epoch)`` (the variant's: link prediction opens the epoch's generation);
    2. :meth:`begin_pass`: the pass's plan (the variant's :meth:`pass_plan`) and its frame-level steps;
    3. per state, :meth:`walk` enters it (reads what is not resident, holds its buckets, builds its CSR, prefetches
       the next) and the epoch then calls ``bind_training_state`` (the variant binds its task to the state and
       returns the state's batch roots, shuffled), cuts the roots into batches and runs them through the task's
       stages (one at a time, or through the staged pipeline, drained before the next state), and records the
       state's timeline;
    4. ``finish_training_pass()`` (the variant's: link prediction writes every partition back and flushes) and
       the pass's IO measures.

    Evaluation is the variant's (:meth:`evaluate`).
    """

    options_model = DiskOptions
    needs_graph = True  # whether states build the in-buffer CSR (a variant turns it off for models without hops)
    keeps_resident = True  # whether partitions stay in the buffer from one pass to the next
    pipelines_states = True  # whether ``options.pipeline`` runs a state's batches through the staged pipeline

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder):
        super().__init__(spec, store, device, recorder)
        self.options: DiskOptions = validate_system_options(spec)
        options = self.options
        if spec.training.task == "link_prediction" and spec.training.negatives.mode != "chunked":
            raise ConfigError(f"training.negatives.mode: {spec.training.negatives.mode!r} scores every entity, "
                              "which the disk system holds "
                              "only a buffer of (use chunked negatives)")
        if options.buffer_capacity > options.num_partitions:
            raise ConfigError(f"system.options.buffer_capacity: {options.buffer_capacity} exceeds num_partitions "
                              f"{options.num_partitions}")
        self.counters = IOCounters()
        self.task = None
        self.buffer: FeatureBuffer | None = None
        self.edges: BufferedGraph | None = None
        self._reader = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="disk-prefetch")
        self._io_pool = (concurrent.futures.ThreadPoolExecutor(options.read_threads, thread_name_prefix="disk-read")
                         if options.read_threads > 1 else None)
        self._carried: list[_Carried] = []
        self._origin = time.perf_counter()
        self._schedule = pass_schedule(spec)
        self._last_graph: tuple[tuple[int, ...], SamplingGraph, RelationLookup | None] | None = None
        self._epoch = 0

    @property
    def model(self) -> torch.nn.Module | None:
        """The task's model."""
        return self.task.model if self.task else None

    def own_threads(self) -> int:
        """The prefetch thread (when on) and the pipeline's loader threads (when pipelined)."""
        pipeline = self.options.pipeline
        return int(self.options.prefetch) + (pipeline.effective().batch_loader_threads if pipeline else 0)

    # ------------------------------------------------------------------ the variant's hooks
    @abstractmethod
    def pass_plan(self, key: PassKey, layout: np.ndarray) -> BufferPlan:
        """The plan of pass ``key`` when the buffer holds ``layout`` before it."""

    @abstractmethod
    def bind_training_state(self, data: StateData, plan: BufferPlan, shuffle: torch.Generator) -> torch.Tensor:
        """Bind the task to the entered state ``data`` of a training pass of ``plan``: its training examples,
        shuffled by ``torch.randperm`` drawing from ``shuffle``, and what the buffer holds; return the state's batch
        roots in training order (cut into batches of ``training.batch_size`` by :meth:`train_epoch`)."""

    def start_training_pass(self, epoch: int) -> None:
        """Called before a training pass begins (nothing by default)."""

    def finish_training_pass(self) -> dict[str, Any]:
        """Called after a training pass's last state; returns measures added to the epoch's (a ``flush_s``, the
        pass-end write-back that training waited for, also counts in ``io_wait_s``). Nothing by default."""
        return {}

    def state_examples(self, plan: BufferPlan, step: Step) -> torch.Tensor | None:
        """What a variant takes from the in-buffer data of a state while it is prepared (with its buckets held):
        nothing by default."""
        return None

    # ------------------------------------------------------------------ training
    def train_epoch(self, epoch: int, progress: bool = False) -> EpochStats:
        """One pass of the policy's plan: per state, enter it (reading only what is not resident), bind the task to
        it and train on its batches, one at a time or pipelined (see the class docstring)."""
        from suite.io import process_io_bytes

        spec, task, key = self.spec, self.task, ("train", epoch)
        disk_before = process_io_bytes()
        self.start_training_pass(epoch)
        plan, steps, first = self.begin_pass(key)
        plan.examples_by_state()  # computed here, before the prefetch thread uses it
        timer = StageTimer(self.device)
        task.train()
        batches: list[Batch] = []
        timelines = []
        pipelined: dict = {}
        bar = state_bar(len(steps), epoch, progress)
        for data, timeline in self.walk(key, plan, steps, first):
            shuffle = torch.Generator().manual_seed(batch_seed(spec.seed, epoch, -2 - data.step.index))
            roots = self.bind_training_state(data, plan, shuffle)
            state_batches = state_batches_of(roots, spec.training.batch_size, epoch, len(batches))
            if spec.training.limit_batches is not None:
                state_batches = state_batches[:max(0, spec.training.limit_batches - len(batches))]
            started = time.perf_counter()
            self._train_state(state_batches, timer, pipelined)
            timeline.compute = (started, time.perf_counter())
            timeline.batches = len(state_batches)
            self.record_state(timeline)
            timelines.append(timeline)
            batches.extend(state_batches)
            bar.update(1)
        bar.close()
        finished = self.finish_training_pass()
        io = self.pass_io(timelines, disk_before)
        io.update(io_wait_s=io["io_wait_s"] + finished.get("flush_s", 0.0), **finished)
        return epoch_stats(batches, {**timer.snapshot(), **pipelined.pop("busy", {})}, states=plan.num_states,
                           states_entered=len(timelines), swaps=plan.swaps, policy=self.options.policy, **io,
                           **pipelined)

    def _train_state(self, batches: list[Batch], timer: StageTimer, pipelined: dict) -> None:
        """Train on one state's batches: one at a time, or through the pipeline (drained at the end)."""
        task = self.task
        options = self.options.pipeline if self.pipelines_states else None
        if options is None:
            for batch in batches:
                batch.version_read = task.optimizer_steps
                run_stages(task, batch, timer)
            return
        options = options.effective()

        def admit(batch: Batch) -> None:
            batch.version_read = task.optimizer_steps

        trace = Pipeline(task_stages(task, options, lambda batch, worker: task.transfer(batch)),
                         options.staleness_bound, on_admit=admit).run(batches)
        if options.record_batches:
            record_trace(self.recorder, trace)
        busy = pipelined.setdefault("busy", {})
        for stage, seconds in trace.busy_s().items():
            busy[stage] = busy.get(stage, 0.0) + seconds
        extra = pipeline_extra(trace, options, None)
        pipelined["staleness_bound"] = extra["staleness_bound"]
        pipelined["pipeline_wall_s"] = pipelined.get("pipeline_wall_s", 0.0) + extra["pipeline_wall_s"]

    # ------------------------------------------------------------------ passes

    def begin_pass(self, key: PassKey) -> tuple[BufferPlan, list[Step], concurrent.futures.Future | None]:
        """The plan and steps of pass ``key``, and its first state's prepare if it was submitted ahead."""
        layout = self._starting_layout()
        while self._carried:
            carried = self._carried.pop(0)
            if carried.key == key:
                return carried.plan, carried.steps, carried.first
            if carried.first is not None:
                carried.first.result()  # it read only into free frames: let it finish, then forget it
        self._carried.clear()
        plan = self.pass_plan(key, layout)
        return plan, plan_steps(plan, layout), None

    def _starting_layout(self) -> np.ndarray:
        if self.keeps_resident:
            return self.buffer.frame_partition.copy()
        for frame in range(self.buffer.num_frames):  # start from an empty buffer
            self.buffer.evict(frame)
        self.edges.clear()
        return self.buffer.frame_partition.copy()

    def walk(self, key: PassKey, plan: BufferPlan, steps: list[Step],
             first: concurrent.futures.Future | None = None) -> Iterator[tuple[StateData, StateTimeline]]:
        """Enter the states of ``steps`` in turn (those with examples: :func:`plan_steps`; the buffer holds each
        while the caller computes), prefetching the next; yield its data and its timeline (the caller fills in
        ``compute`` and records it with :meth:`record_state`). A training pass's epoch is remembered: the
        evaluations after it follow it."""
        if key[0] == "train":
            self._epoch = key[1]
        pending = first
        prefetch = self.options.prefetch
        for k, step in enumerate(steps):
            waited = time.perf_counter()
            data = pending.result() if pending is not None else self._prepare(plan, step, ahead=False)
            pending = None
            late = self._enter(step, data)
            entered = time.perf_counter()
            if prefetch:
                if k + 1 < len(steps):
                    pending = self._reader.submit(self._prepare, plan, steps[k + 1], True)
                else:
                    self._carry(key, step.layout)
            timeline = StateTimeline(
                key, step, [(event, data.ahead) for event in data.reads] + [(event, False) for event in late],
                data.build, data.ahead, (waited, entered),
                "prefetch" if data.ahead else ("read" if len(step.loads) else "none"),
                in_buffer_edges=data.in_buffer_edges)
            try:
                yield data, timeline
            except GeneratorExit:
                if pending is not None:
                    pending.result()
                raise

    def record_state(self, timeline: StateTimeline) -> None:
        """Write the state's timeline as a ``state`` record."""
        self.recorder.record("state", **timeline.record(self._origin))

    def _prepare(self, plan: BufferPlan, step: Step, ahead: bool) -> StateData:
        """Read the step's loads whose frames are free (when ``ahead``), hold its buckets and build its CSR."""
        reads = []
        if ahead:
            reads.extend(self._read_partitions(step.loads[step.ahead], step.frames[step.ahead]))
        reads.extend(self.edges.hold(step.layout))
        started = time.perf_counter()
        graph, lookup = self._graph(step.layout) if self.needs_graph else (None, None)
        examples = self.state_examples(plan, step)
        return StateData(step, graph, examples, reads, (started, time.perf_counter()), ahead, self.edges.held_edges,
                         lookup)

    def _graph(self, layout: np.ndarray) -> tuple[SamplingGraph, RelationLookup | None]:
        """The in-buffer CSR of ``layout`` and, when it carries relation types, their lookup (the last ones again
        when the layout is the same)."""
        key = np.asarray(layout, dtype=np.int64).tobytes()
        if self._last_graph is None or self._last_graph[0] != key:
            graph = self.edges.build(layout, self.buffer.max_rows)
            lookup = (RelationLookup.from_graph(graph, 2 * self.edges.relations) if graph.relations is not None
                      else None)
            self._last_graph = (key, graph, lookup)
        return self._last_graph[1], self._last_graph[2]

    def _read_partitions(self, partitions: np.ndarray, frames: np.ndarray) -> list[ReadEvent]:
        """Read ``partitions`` (ascending) into ``frames``: one read per run of consecutive partitions (adjacent
        on disk), runs read concurrently by ``read_threads`` threads (:meth:`FeatureBuffer.read_partitions`)."""
        return [ReadEvent(self.read_kind, first, started, ended, nbytes, count) for first, count, started, ended, nbytes
                in self.buffer.read_partitions(partitions, frames, self._io_pool)]

    read_kind = "features"

    def _enter(self, step: Step, data: StateData) -> list[ReadEvent]:
        """Make the step's layout resident: empty the frames it evicts, read what was not read ahead."""
        for frame in step.evicts:
            self.buffer.evict(int(frame))
        late_reads = ~step.ahead if data.ahead else np.ones(len(step.loads), dtype=bool)
        late = self._read_partitions(step.loads[late_reads], step.frames[late_reads])
        for partition, frame in zip(step.loads.tolist(), step.frames.tolist()):
            self.buffer.install(frame, partition, read=False)
        return late

    def _carry(self, key: PassKey, layout: np.ndarray) -> None:
        """Prepare the passes after ``key`` ahead: each single-state pass that reads nothing, then the first pass
        that reads (its first state), whose reads then overlap this state's compute."""
        if self._carried or not self.keeps_resident:  # the passes ahead are prepared already (or start empty)
            return
        position = self._schedule.index(key) if key in self._schedule else len(self._schedule)
        for next_key in self._schedule[position + 1:position + 4]:
            plan = self.pass_plan(next_key, layout)
            steps = plan_steps(plan, layout)
            first = self._reader.submit(self._prepare, plan, steps[0], True)
            self._carried.append(_Carried(next_key, plan, steps, first))
            if len(steps) > 1 or len(steps[0].loads):
                return
            layout = steps[0].layout

    def last_epoch(self) -> int:
        """The epoch the latest evaluation follows (the last training pass walked; 0 before any)."""
        return self._epoch

    # ------------------------------------------------------------------ measures
    def pass_io(self, timelines: list[StateTimeline], before: Any) -> dict[str, Any]:
        """A pass's reads: bytes, seconds and count of the reads its states needed (whenever the prefetch thread
        did them, so a read ahead for the next pass counts there), IO wait and build time; and what
        ``/proc/self/io`` says the process read and wrote since ``before`` (:func:`suite.io.process_io_bytes`,
        a window that includes reads ahead for the next pass)."""
        from suite.io import process_io_bytes

        disk = process_io_bytes() - before
        return {**self.state_io(timelines),
                "disk_read_bytes": disk.read_bytes, "disk_write_bytes": disk.write_bytes, "disk_rchar": disk.rchar}

    @staticmethod
    def state_io(timelines: list[StateTimeline]) -> dict[str, Any]:
        """The reads of a pass's states (bytes, seconds, count, partitions), their IO wait and build time."""
        reads = [event for timeline in timelines for event, _ in timeline.reads]
        return {"io_read_bytes": sum(event.bytes for event in reads),
                "io_read_s": sum(event.end - event.start for event in reads), "io_reads": len(reads),
                "io_wait_s": sum(t.wait[1] - t.wait[0] for t in timelines),
                "prepare_s": sum(t.build[1] - t.build[0] for t in timelines),
                "partitions_read": sum(len(t.step.loads) for t in timelines)}

    def collect_io(self, outcome) -> None:
        """Bytes read and written by the suite over the run, and partitions swapped in training."""
        snapshot = self.counters.snapshot()
        outcome.io_read_bytes = snapshot["bytes_read"]
        outcome.io_write_bytes = snapshot["bytes_written"]
        outcome.partition_swaps = sum(int(stats.extra.get("swaps", 0)) for stats in outcome.epochs)

    def teardown(self) -> None:
        """Let what the prefetch thread was doing finish (its errors belong to passes that never ran), stop it, and
        close the files."""
        concurrent.futures.wait([c.first for c in self._carried if c.first is not None])
        self._carried.clear()
        self._reader.shutdown(wait=True)
        if self._io_pool is not None:
            self._io_pool.shutdown(wait=True)
        self.close_files()

    def close_files(self) -> None:
        """Close the variant's files (the bucket file here)."""
        if self.edges is not None:
            self.edges.close()


def disk_system(spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder) -> DiskSystem:
    """The ``disk`` system for ``spec``: the variant of ``training.task`` from :data:`DISK_TASKS`, constructed
    (its options model, :class:`DiskOptions`, is this factory's ``options_model``).

    Raises:
        ConfigError: no disk variant for ``training.task``.
    """
    try:
        variant = DISK_TASKS.get(spec.training.task)
    except ConfigError as err:
        raise ConfigError(f"training.task: {err}") from None
    return variant(spec, store, device, recorder)


disk_system.options_model = DiskOptions  # what suite.config validates system.options against

__all__ = ["DISK_TASKS", "DiskOptions", "DiskSystem", "PassKey", "disk_system", "StateData", "StateTimeline", "Step",
           "current_layout", "needs_partitioning", "partitioned_store", "partitioned_store_path", "plan_steps",
           "state_bar", "state_batches_of"]
