"""The disk-based system: train from a partitioned store through a buffer of ``c`` partitions (MariusGNN).

Setup partitions the run's store into ``p`` partitions (cached beside the dataset, :func:`partitioned_store`):
node rows partition-contiguous, edges in ``p x p`` buckets. Per epoch the registered policy
(:mod:`systems.disk.policies`) gives a plan: a sequence of buffer states and the state of every training node.
For each state, in order:

1. the transition's partitions enter their slots (:class:`~systems.disk.buffer.FeatureBuffer`): copied from
   staging memory where a prefetch thread read them while the previous state computed (``prefetch: true``), or
   read now; evicted partitions are dropped (features are read-only: nothing to write back);
2. the in-buffer subgraph is the CSR of every edge bucket ``(i, j)`` with both partitions in the buffer, over
   buffer rows (``slot * max_rows + row``); buckets stay in memory while both their partitions are resident, so a
   state reads only the buckets of the partitions it loads; the CSR is built in the prefetch thread too, so
   sampling sees only the buffer;
3. the state's training nodes, shuffled, run through the node-classification task's stages (one batch at a
   time: the pipeline is drained before the next swap by construction);
4. the reads of state ``k + 2`` are scheduled.

Recorded per epoch: states, swaps (partitions read after the initial fill), bytes the suite read (features and
edge buckets) beside what ``/proc/self/io`` says the process read from storage, IO wait (time the compute waited
for the buffer: the initial fill, and any prefetch not finished in time) and its fraction of the epoch.
Evaluation walks the same policy over the split's nodes (its IO is not counted in the epoch's).

This module holds the system's common machinery (options, the partitioned store, the in-buffer graph, the state
walk with its prefetch thread) and node classification. Link prediction (learnable embedding partitions with
asynchronous write-back and crash-consistent generations) is :mod:`systems.disk.link_prediction`; the variant is
looked up by ``training.task`` in :data:`DISK_TASKS` when the system is created.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from suite.config import RunSpec, validate_system_options
from suite.errors import ConfigError, DataError
from suite.graph import GraphStore
from suite.graph.partition import bucket_checksums, check_bucket_crc
from suite.io import IOCounters, evict_page_cache, process_io_bytes
from suite.metrics import StageTimer, accuracy
from suite.recorder import Recorder
from suite.registry import POLICIES, SAMPLERS, SYSTEMS, Registry
import systems.disk.policies  # noqa: F401  (registers the policies)
from systems.base import EpochStats, System
from systems.batch import Batch, batch_seed
from systems.disk.buffer import FeatureBuffer, PartitionArray
from systems.disk.policies import BufferPlan, PolicySpec, make_plan
from systems.in_memory import epoch_stats
from systems.sampling.base import SamplingGraph
from systems.tasks.node_classification import NodeClassificationTask, labeled

_EVAL_SEED_OFFSET = 0xE7A1

DISK_TASKS: Registry[type] = Registry("disk-system task")
"""The disk system's variant for each ``training.task``."""


class DiskOptions(BaseModel):
    """``system.options`` of the ``disk`` system."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    policy: str = Field("sequential", description="registered partition-buffer policy")
    num_partitions: int = Field(16, ge=1, description="p: node partitions on disk")
    buffer_capacity: int = Field(4, ge=1, description="c: partitions held in memory")
    fine_to_coarse_ratio: int = Field(1, ge=1, description="physical partitions per logical one (comet, dispersed)")
    order: str = Field("train-first", description="node ordering of the partitioning ('random', 'train-first')")
    prefetch: bool = Field(True, description="read the next state's partitions while the current one computes")
    evict_page_cache: bool = Field(True, description="drop every range read from the page cache (reads hit disk)")
    eval_policy: str | None = Field(None, description="policy of evaluation passes (default: the training "
                                                      "policy; 'dispersed' for 'sequential')")
    verify_checksums: bool = Field(True, description="check every partition read (features, embeddings) against "
                                                     "its CRC-32 (features: where the partitioned store has them)")
    resume: bool = Field(True, description="link prediction: continue a killed run from its last committed epoch")

    @field_validator("policy", "eval_policy")
    @classmethod
    def _known_policy(cls, value: str | None) -> str | None:
        if value is not None and value not in POLICIES:
            raise ValueError(f"unknown policy {value!r} (known: {', '.join(POLICIES.names())})")
        return value

    @model_validator(mode="after")
    def _buffer_fits(self) -> "DiskOptions":  # checked when the spec is loaded, before any output exists
        if self.buffer_capacity > self.num_partitions:
            raise ValueError(f"buffer_capacity: {self.buffer_capacity} exceeds num_partitions {self.num_partitions}")
        return self


def partitioned_store_path(store: GraphStore, num_partitions: int, order: str, seed: int) -> Path:
    """Where :func:`partitioned_store` keeps ``store`` partitioned into ``num_partitions`` (next to it)."""
    return store.path.parent / f"{store.path.name}-p{num_partitions}-{order}-s{seed}"


def partitioned_store(store: GraphStore, num_partitions: int, order: str, seed: int) -> GraphStore:
    """The store partitioned into ``num_partitions`` (cached next to it, created once, atomically)."""
    from suite.datasets import cached_store
    from suite.graph.partition import partition_store

    path = partitioned_store_path(store, num_partitions, order, seed)  # runs needing it at once wait for one build
    return cached_store(path, lambda out: partition_store(store, out, num_partitions, order=order, seed=seed))


@dataclass
class StateData:
    """Everything one buffer state needs besides the resident partitions, prepared ahead.

    Attributes:
        index: the state.
        slots / partitions: where each loaded partition goes; ``staged[j]`` holds partition ``partitions[j]``.
        staged: the loaded partitions' rows (None: not read ahead; read at install time).
        graph: the in-buffer CSR over buffer rows (None when the model reads no neighbours).
        read_s: seconds spent reading and building.
        examples: what the variant took from the state's in-buffer data (link prediction: its edges).
    """

    index: int
    slots: np.ndarray
    partitions: np.ndarray
    staged: torch.Tensor | None
    graph: SamplingGraph | None
    read_s: float
    examples: torch.Tensor | None = None


class BufferedGraph:
    """Reads edge buckets and builds the in-buffer CSR of a state (over buffer rows).

    Args:
        store: the partitioned store.
        direction: ``in`` (a node's neighbours are its in-edges' sources), ``out`` or ``both``.
        counters: where read bytes are counted.
        evict: drop read ranges from the page cache.
    """

    def __init__(self, store: GraphStore, direction: str, counters: IOCounters, evict: bool):
        self.edges = PartitionArray(store.file("bucket_edges"), counters, evict=evict)
        self.bucket_crc32 = bucket_checksums(store)
        self.bucket_offsets = store.array("bucket_offsets").astype(np.int64)
        self.partition_offsets = store.array("partition_offsets").astype(np.int64)
        self.p = len(self.partition_offsets) - 1
        self.direction = direction
        self.cache: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def load(self, slot_partition: np.ndarray) -> dict[int, int]:
        """Hold every bucket inside the buffer ``slot_partition`` (reading only those not held yet, dropping those
        with a partition outside it); return ``{partition: slot}``."""
        resident = {int(part): slot for slot, part in enumerate(slot_partition) if part >= 0}
        needed = {(i, j) for i in resident for j in resident}
        for key in [key for key in self.cache if key not in needed]:
            del self.cache[key]
        for i, j in sorted(needed - self.cache.keys()):
            start, stop = int(self.bucket_offsets[i * self.p + j]), int(self.bucket_offsets[i * self.p + j + 1])
            block = torch.empty((stop - start, 3), dtype=torch.int64)
            if stop > start:
                self.edges.read_rows(start, stop, block)
            check_bucket_crc(self.bucket_crc32, i, j, block, self.edges.path)
            self.cache[(i, j)] = (block[:, 0] - int(self.partition_offsets[i]), block[:, 1],
                                  block[:, 2] - int(self.partition_offsets[j]))
        return resident

    def build(self, slot_partition: np.ndarray, max_rows: int) -> SamplingGraph:
        """The CSR over ``len(slot_partition) * max_rows`` buffer rows of every bucket inside the buffer.

        Buckets stay in memory while both their partitions are resident: a state reads only the buckets of the
        partitions it loads (those with a partition it evicts are dropped).
        """
        resident = self.load(slot_partition)
        src_parts, dst_parts = [], []
        for (i, j), (src, _, dst) in self.cache.items():
            src_parts.append(src + resident[i] * max_rows)
            dst_parts.append(dst + resident[j] * max_rows)
        rows = len(slot_partition) * max_rows
        src = torch.cat(src_parts) if src_parts else torch.empty(0, dtype=torch.int64)
        dst = torch.cat(dst_parts) if dst_parts else torch.empty(0, dtype=torch.int64)
        pairs = {"in": [(dst, src)], "out": [(src, dst)], "both": [(dst, src), (src, dst)]}[self.direction]
        key = torch.cat([k for k, _ in pairs])
        value = torch.cat([v for _, v in pairs])
        order = torch.argsort(key, stable=True)
        indptr = torch.zeros(rows + 1, dtype=torch.int64)
        torch.cumsum(torch.bincount(key, minlength=rows), 0, out=indptr[1:])
        return SamplingGraph(indptr, value[order])

    def bucket_edges(self, buckets: np.ndarray, slot_partition: np.ndarray, max_rows: int) -> torch.Tensor:
        """``(k, 3)`` ``(src, rel, dst)`` rows of the held ``buckets`` (ids ``i * p + j``), endpoints as buffer rows
        of the layout ``slot_partition``."""
        slot_of = {int(part): slot for slot, part in enumerate(slot_partition) if part >= 0}
        parts = []
        for bucket in buckets.tolist():
            i, j = divmod(bucket, self.p)
            src, rel, dst = self.cache[(i, j)]
            parts.append(torch.stack([src + slot_of[i] * max_rows, rel, dst + slot_of[j] * max_rows], dim=1))
        return torch.cat(parts) if parts else torch.empty((0, 3), dtype=torch.int64)

    def clear(self) -> None:
        """Forget the cached buckets (the buffer was emptied)."""
        self.cache.clear()

    def close(self) -> None:
        """Close the bucket file."""
        self.edges.close()


@SYSTEMS.register("disk")
class DiskSystem(System):
    """Training from disk through a partition buffer (options: :class:`DiskOptions`): node classification here,
    other tasks by the variant :data:`DISK_TASKS` registers for ``training.task``."""

    options_model = DiskOptions
    needs_graph = True  # whether states build the in-buffer CSR (a variant turns it off for models without hops)

    def __new__(cls, spec: RunSpec, *args, **kwargs):
        if cls is DiskSystem:
            try:
                cls = DISK_TASKS.get(spec.training.task)
            except ConfigError as err:
                raise ConfigError(f"training.task: {err}") from None
        return super().__new__(cls)

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder):
        super().__init__(spec, store, device, recorder)
        self.options: DiskOptions = validate_system_options(spec)
        options = self.options
        if options.buffer_capacity > options.num_partitions:
            raise ConfigError(f"system.options.buffer_capacity: {options.buffer_capacity} exceeds num_partitions "
                              f"{options.num_partitions}")
        self.counters = IOCounters()
        self.task: NodeClassificationTask | None = None
        self._reader = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="disk-prefetch")

    @property
    def model(self) -> torch.nn.Module | None:
        """The task's model."""
        return self.task.model if self.task else None

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """Partition the store (cached), open the feature and bucket files, build the model; no feature is read."""
        spec, options = self.spec, self.options
        self.pstore = partitioned_store(self.store, options.num_partitions, options.order, spec.seed)
        for key in ("features", "labels", "train_nodes", "bucket_edges"):
            if not self.pstore.has(key):
                raise DataError(f"{self.pstore.path}: store has no '{key}'; the disk system needs it")
        evict = options.evict_page_cache
        if evict:  # start cold: flush (the store may be freshly written) and drop the files from the page cache
            for key in ("features", "bucket_edges"):
                evict_page_cache(self.pstore.file(key), sync=True)
        checksums = (self.pstore.metadata.get("partitioning", {}).get("feature_crc32")
                     if options.verify_checksums else None)
        self.buffer = FeatureBuffer(PartitionArray(self.pstore.file("features"), self.counters, evict),
                                    self.pstore.array("partition_offsets"), options.buffer_capacity, checksums)
        self.edges = BufferedGraph(self.pstore, spec.sampler.direction, self.counters, evict)
        task = NodeClassificationTask(spec, self.pstore, self.device)
        task.labels = self.pstore.labels.to(torch.int64, copy=True)
        task.train_nodes = labeled(self.pstore.split("train").to(torch.int64), task.labels)
        if len(task.train_nodes) == 0:
            raise DataError(f"{self.pstore.path}: the train split has no labeled node")
        torch.manual_seed(spec.seed)
        out_dim = self.pstore.num_classes or int(task.labels.max()) + 1
        task.build_model(self.pstore.feature_dim, out_dim)
        self.task = task
        self.node_partition = np.searchsorted(self.buffer.offsets, np.arange(self.pstore.num_nodes),
                                              side="right") - 1

    def plan(self, nodes: torch.Tensor, epoch: int, evaluation: bool = False) -> BufferPlan:
        """The policy's plan for one pass over ``nodes`` (training nodes, or an evaluation split).

        Sequential keeps the training nodes' partitions resident, which an evaluation split spread over the
        graph may not fit in: evaluation passes use ``eval_policy`` (default ``dispersed`` then).
        """
        options = self.options
        policy = options.policy
        if evaluation:
            policy = options.eval_policy or ("dispersed" if policy == "sequential" else policy)
        spec = PolicySpec(num_partitions=options.num_partitions, capacity=options.buffer_capacity,
                          task="node_classification", fine_to_coarse_ratio=options.fine_to_coarse_ratio,
                          train_partitions=self.node_partition[nodes.numpy()])
        seed = self.spec.seed + (_EVAL_SEED_OFFSET if evaluation else 0)
        return make_plan(policy, spec, seed=seed, epoch=epoch)

    # ------------------------------------------------------------------ states
    def _prepare(self, plan: BufferPlan, k: int, stage: bool) -> StateData:
        """Read state ``k``'s new partitions (into staging if ``stage``) and build its in-buffer CSR."""
        started = time.perf_counter()
        transition = plan.transition(k)
        loaded = transition.loaded >= 0
        slots, partitions = transition.slots[loaded], transition.loaded[loaded]
        staged = None
        if stage and len(partitions):
            staged = self.buffer.staging(len(partitions))
            for j, partition in enumerate(partitions):
                self.buffer.read(int(partition), staged[j])
        layout = self.buffer.slot_partition.copy()
        layout[transition.slots] = transition.loaded
        if self.needs_graph:
            graph = self.edges.build(layout, self.buffer.max_rows)
        else:  # the model reads no neighbours: hold the buckets (the examples), build no CSR
            self.edges.load(layout)
            graph = None
        examples = self._state_examples(plan, k, layout)
        return StateData(k, slots, partitions, staged, graph, time.perf_counter() - started, examples)

    def _state_examples(self, plan: BufferPlan, k: int, layout: np.ndarray) -> torch.Tensor | None:
        """What a variant takes from the in-buffer data of state ``k`` while it is prepared (with the buckets
        of its ``layout`` held): nothing for node classification."""
        return None

    def _install(self, plan: BufferPlan, data: StateData) -> None:
        transition = plan.transition(data.index)
        for slot in transition.slots[transition.loaded < 0]:
            self.buffer.evict(int(slot))
        for j, (slot, partition) in enumerate(zip(data.slots, data.partitions)):
            staged = data.staged[j] if data.staged is not None else None
            self.buffer.install(int(slot), int(partition), staged)

    def _states(self, plan: BufferPlan):
        """Yield ``(k, StateData, io_wait_s)`` with the buffer holding state ``k``; prefetches one state ahead."""
        prefetch = self.options.prefetch
        pending = None
        for slot in range(self.buffer.capacity):  # a plan starts from an empty buffer (its state 0 is a fill)
            self.buffer.evict(slot)
        self.edges.clear()
        for k in range(plan.num_states):
            waited = time.perf_counter()
            if pending is not None:
                data = pending.result()
            else:
                data = self._prepare(plan, k, stage=False)  # nothing to overlap: read straight into the slots
            self._install(plan, data)
            io_wait = time.perf_counter() - waited
            pending = (self._reader.submit(self._prepare, plan, k + 1, True)
                       if prefetch and k + 1 < plan.num_states else None)
            try:
                yield k, data, io_wait
            except GeneratorExit:
                if pending is not None:
                    pending.result()
                raise

    def _use_state(self, data: StateData, fanouts: tuple[int, ...]) -> None:
        """Point the task at the buffer: its graph, rows and labels by buffer row; a sampler over it."""
        task = self.task
        task.graph = data.graph
        task.features = self.buffer.rows
        sampler_cls = SAMPLERS.get(self.spec.sampler.name)
        if not getattr(task.model, "uses_neighbours", True):
            fanouts = ()
        task.train_sampler = sampler_cls(data.graph, fanouts, replace=self.spec.sampler.replace)

    def _local(self, nodes: torch.Tensor) -> torch.Tensor:
        rows = self.buffer.node_row[nodes]
        if (rows < 0).any():
            raise RuntimeError("a node of the state is not in the buffer (the plan and the buffer disagree)")
        return rows

    # ------------------------------------------------------------------ training
    def train_epoch(self, epoch: int, progress: bool = False) -> EpochStats:
        """One pass of the policy's plan: per state, swap partitions in, then train on the state's nodes."""
        task, spec = self.task, self.spec
        plan = self.plan(task.train_nodes, epoch)
        ids, offsets = plan.examples_by_state()
        timer = StageTimer(self.device)
        counted, disk_before = self.counters.snapshot(), process_io_bytes()
        task.train()
        batches: list[Batch] = []
        io_wait = rebuild = 0.0
        labels_by_row = torch.full((self.buffer.rows.shape[0],), -1, dtype=torch.int64)
        for k, data, waited in self._states(plan):
            io_wait += waited
            rebuild += data.read_s
            self._use_state(data, spec.model.fanouts)
            nodes = task.train_nodes[torch.from_numpy(ids[offsets[k]:offsets[k + 1]])]
            order = torch.randperm(len(nodes), generator=torch.Generator().manual_seed(batch_seed(spec.seed, epoch,
                                                                                                    -2 - k)))
            local = self._local(nodes[order])
            labels_by_row.fill_(-1)
            labels_by_row[local] = task.labels[nodes[order]]
            self._labels_by_row = labels_by_row
            for roots in local.split(spec.training.batch_size):
                if spec.training.limit_batches is not None and len(batches) >= spec.training.limit_batches:
                    break
                batch = Batch(epoch=epoch, index=len(batches), roots=roots, version_read=task.optimizer_steps)
                self._run_batch(batch, timer)
                batches.append(batch)
        counted_after, disk_after = self.counters.snapshot(), process_io_bytes()
        disk = disk_after - disk_before
        return epoch_stats(batches, timer.snapshot(), states=plan.num_states, swaps=plan.swaps,
                           partitions_read=plan.partitions_loaded, io_wait_s=io_wait, prepare_s=rebuild,
                           io_read_bytes=counted_after["bytes_read"] - counted["bytes_read"],
                           io_read_s=counted_after["read_s"] - counted["read_s"],
                           io_reads=counted_after["reads"] - counted["reads"],
                           disk_read_bytes=disk.read_bytes, disk_rchar=disk.rchar, policy=self.options.policy)

    def _run_batch(self, batch: Batch, timer: StageTimer) -> None:
        task = self.task
        with timer.stage("sample"):
            task.sample(batch)
        with timer.stage("gather"):
            nodes = batch.sample.input_nodes
            batch.x = self.buffer.rows.index_select(0, nodes).to(torch.float32)
            batch.y = self._labels_by_row[batch.roots]
        with timer.stage("transfer"):
            task.transfer(batch)
        with timer.stage("compute"):
            task.compute(batch)

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        """Accuracy on ``split``: the same policy walks the split's nodes, each predicted in its state."""
        task = self.task
        nodes = self.pstore.split(split)
        if nodes is None:
            return {"accuracy": math.nan}
        nodes = labeled(nodes.to(torch.int64), task.labels)
        if len(nodes) == 0:
            return {"accuracy": math.nan}
        task.model.eval()
        plan = self.plan(nodes, epoch=0, evaluation=True)
        ids, offsets = plan.examples_by_state()
        fanouts = self.spec.evaluation.fanouts or self.spec.model.fanouts
        predicted = torch.empty(len(nodes), dtype=torch.int64)
        generator = torch.Generator().manual_seed(self.spec.seed + _EVAL_SEED_OFFSET)
        with contextlib.closing(self._states(plan)) as states:
            for k, data, _ in states:
                self._use_state(data, fanouts)
                chosen = torch.from_numpy(ids[offsets[k]:offsets[k + 1]])
                local = self._local(nodes[chosen])
                for part, roots in zip(chosen.split(self.spec.evaluation.batch_size),
                                       local.split(self.spec.evaluation.batch_size)):
                    sample = task.train_sampler.sample(roots, generator)
                    x = self.buffer.rows.index_select(0, sample.input_nodes).to(torch.float32).to(self.device)
                    predicted[part] = task.model(x, sample.to(self.device)).argmax(dim=-1).cpu()
        return {"accuracy": accuracy(predicted, task.labels[nodes])}

    def collect_io(self, outcome) -> None:
        """Bytes read by the suite over the run (training and evaluation) and partitions swapped in training."""
        outcome.io_read_bytes = self.counters.snapshot()["bytes_read"]
        outcome.partition_swaps = sum(int(stats.extra.get("swaps", 0)) for stats in outcome.epochs)

    def teardown(self) -> None:
        """Stop the prefetch thread and close the files."""
        self._reader.shutdown(wait=True)
        if getattr(self, "buffer", None) is not None:
            self.buffer.source.close()
            self.edges.close()


DISK_TASKS.register("node_classification", DiskSystem)
import systems.disk.link_prediction  # noqa: E402,F401  (registers the link-prediction variant)

__all__ = ["DISK_TASKS", "BufferedGraph", "DiskOptions", "DiskSystem", "StateData", "partitioned_store",
           "partitioned_store_path"]
