"""Node classification from disk: feature partitions move through the buffer; training nodes stay resident.

The disk system's variant for ``training.task: node_classification`` (registered in
:data:`systems.disk.disk_system.DISK_TASKS`). The node-classification task (:mod:`systems.tasks.node_classification`)
runs its own stage methods over the buffer: for each state its graph is the in-buffer CSR, its features the
buffer's rows and its labels the state's nodes' labels by buffer row, so ``sample`` sees only the buffer and
``gather`` reads from it. A state's training nodes, shuffled, run one batch at a time (:func:`run_stages`, as in
memory) or through the staged pipeline (``system.options.pipeline``: bounded staleness, drained before the next
state).

Passes: a training epoch follows the policy's plan of the training nodes. With ``sequential`` (MariusGNN) the
partitions holding training nodes stay in the buffer and the other slots rotate across epochs (a seeded rotation,
:func:`systems.disk.policies.node_policies.rotation_window`), so over epochs sampling sees every neighbourhood. An evaluation
pass plans the split's nodes with ``eval_policy`` (default ``sequential`` when their partitions fit in the buffer,
filled first with the partitions already resident: with a ``labeled-first`` order the evaluated nodes are
resident and an evaluation reads nothing), each node predicted in its state.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from suite.errors import DataError
from suite.metrics import StageTimer, accuracy
from suite.registry import SAMPLERS
from systems.system import EpochStats
from systems.batch import Batch, batch_seed
from systems.disk.buffer import FeatureBuffer, PartitionArray
from systems.disk.graph import BufferedGraph
from systems.disk.plan import BufferPlan
from systems.disk.policies import PolicySpec, make_plan
from systems.disk.disk_system import (DISK_TASKS, DiskSystem, PassKey, StateData, partitioned_store, plan_steps,
                                 state_bar)
from systems.models.rgcn import attach_lookup, relation_modules
from systems.stage_pipeline import Pipeline
from systems.pipelined import pipeline_extra, record_trace, task_stages
from systems.stages import epoch_stats, run_stages
from systems.tasks.node_classification import NodeClassificationTask, labeled

_EVAL_SEED_OFFSET = 0xE7A1


@DISK_TASKS.register("node_classification")
class DiskNodeClassification(DiskSystem):
    """Node classification from disk (see the module docstring); options:
    :class:`~systems.disk.disk_system.DiskOptions`."""

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
            from suite.io import evict_page_cache

            for key in ("features", "bucket_edges"):
                evict_page_cache(self.pstore.file(key), sync=True)
        checksums = (self.pstore.metadata.get("partitioning", {}).get("feature_crc32")
                     if options.verify_checksums else None)
        self.buffer = FeatureBuffer(PartitionArray(self.pstore.file("features"), self.counters, evict),
                                    self.pstore.array("partition_offsets"), options.buffer_capacity,
                                    frames=options.frames, checksums=checksums)
        task = NodeClassificationTask(spec, self.pstore, self.device)
        self.labels = self.pstore.labels.to(torch.int64, copy=True)
        task.train_nodes = labeled(self.pstore.split("train").to(torch.int64), self.labels)
        if len(task.train_nodes) == 0:
            raise DataError(f"{self.pstore.path}: the train split has no labeled node")
        torch.manual_seed(spec.seed)
        task.build_model(self.pstore.feature_dim, self.pstore.num_classes or int(self.labels.max()) + 1)
        self.task = task
        self.needs_graph = getattr(task.model, "uses_neighbours", True)
        self.edges = BufferedGraph(self.pstore, spec.sampler.direction, self.counters, evict,
                                   pieces=self.needs_graph, verify=options.verify_checksums,
                                   typed=bool(relation_modules(task.model)))
        self.node_partition = np.searchsorted(self.buffer.offsets, np.arange(self.pstore.num_nodes),
                                              side="right") - 1
        self.labels_by_row = torch.full((self.buffer.rows.shape[0],), -1, dtype=torch.int64)
        self._eval_nodes: dict[str, torch.Tensor] = {}

    # ------------------------------------------------------------------ plans
    def pass_plan(self, key: PassKey, layout: np.ndarray) -> BufferPlan:
        """Training: the policy's plan of the training nodes for the epoch. Evaluation: ``eval_policy``'s plan of
        the split's nodes, filled with the resident partitions first."""
        kind, epoch = key
        if kind == "train":
            return self._plan(self.options.policy, self.task.train_nodes, epoch, self.spec.seed)
        nodes = self._split_nodes(kind)
        policy = self.options.eval_policy or self._default_eval_policy(nodes)
        return self._plan(policy, nodes, epoch, self.spec.seed, resident=layout[layout >= 0])

    def plan(self, nodes: torch.Tensor, epoch: int) -> BufferPlan:
        """The training policy's plan for one pass over ``nodes`` (for tests and tools)."""
        return self._plan(self.options.policy, nodes, epoch, self.spec.seed)

    def _plan(self, policy: str, nodes: torch.Tensor, epoch: int, seed: int,
              resident: np.ndarray | None = None) -> BufferPlan:
        options = self.options
        spec = PolicySpec(num_partitions=options.num_partitions, capacity=options.buffer_capacity,
                          task="node_classification", fine_to_coarse_ratio=options.fine_to_coarse_ratio,
                          train_partitions=self.node_partition[nodes.numpy()], resident=resident)
        return make_plan(policy, spec, seed=seed, epoch=epoch)

    def _default_eval_policy(self, nodes: torch.Tensor) -> str:
        fits = len(np.unique(self.node_partition[nodes.numpy()])) <= self.options.buffer_capacity
        return "sequential" if fits else "dispersed"

    def _split_nodes(self, split: str) -> torch.Tensor:
        if split not in self._eval_nodes:
            nodes = self.pstore.split(split)
            self._eval_nodes[split] = (labeled(nodes.to(torch.int64), self.labels) if nodes is not None
                                       else torch.empty(0, dtype=torch.int64))
        return self._eval_nodes[split]

    # ------------------------------------------------------------------ states
    def _use_state(self, data: StateData, fanouts: tuple[int, ...], nodes: torch.Tensor) -> torch.Tensor:
        """Point the task at the buffer (its graph, rows, labels by buffer row, a sampler over the graph);
        return the buffer rows of ``nodes``."""
        task = self.task
        rows = self.buffer.node_row[nodes]
        if (rows < 0).any():
            raise RuntimeError("a node of the state is not in the buffer (the plan and the buffer disagree)")
        task.graph = data.graph
        attach_lookup(task.model, data.relation_lookup)
        task.features = self.buffer.rows
        self.labels_by_row.fill_(-1)
        self.labels_by_row[rows] = self.labels[nodes]
        task.labels = self.labels_by_row
        if not self.needs_graph:
            fanouts = ()
        task.train_sampler = SAMPLERS.get(self.spec.sampler.name)(data.graph, fanouts,
                                                                  replace=self.spec.sampler.replace)
        return rows

    # ------------------------------------------------------------------ training
    def train_epoch(self, epoch: int, progress: bool = False) -> EpochStats:
        """One pass of the policy's plan: per state, enter it (reading only what is not resident), then train on
        its nodes, one batch at a time or pipelined."""
        from suite.io import process_io_bytes

        task, spec = self.task, self.spec
        disk_before = process_io_bytes()
        plan, steps, first = self.begin_pass(("train", epoch))
        ids, offsets = plan.examples_by_state()
        timer = StageTimer(self.device)
        task.train()
        batches: list[Batch] = []
        timelines = []
        pipelined: dict = {}
        bar = state_bar(len(steps), epoch, progress)
        for data, timeline in self.walk(("train", epoch), plan, steps, first):
            k = data.step.index
            nodes = task.train_nodes[torch.from_numpy(ids[offsets[k]:offsets[k + 1]])]
            order = torch.randperm(len(nodes), generator=torch.Generator().manual_seed(
                batch_seed(spec.seed, epoch, -2 - k)))
            rows = self._use_state(data, spec.model.fanouts, nodes[order])
            state_batches = [Batch(epoch=epoch, index=len(batches) + i, roots=roots)
                             for i, roots in enumerate(rows.split(spec.training.batch_size))]
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
        io = self.pass_io(timelines, disk_before)
        return epoch_stats(batches, {**timer.snapshot(), **pipelined.pop("busy", {})}, states=plan.num_states,
                           swaps=plan.swaps, policy=self.options.policy, **io, **pipelined)

    def _train_state(self, batches: list[Batch], timer: StageTimer, pipelined: dict) -> None:
        """Train on one state's batches: synchronously, or through the pipeline (drained at the end)."""
        task, options = self.task, self.options.pipeline
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

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        """Accuracy on ``split``: its pass walks the evaluation plan, each node predicted in its state."""
        from suite.io import process_io_bytes

        task = self.task
        nodes = self._split_nodes(split)
        if len(nodes) == 0:
            return {"accuracy": math.nan}
        epoch = self._last_epoch()
        key = (split, epoch)
        disk_before = process_io_bytes()
        plan, steps, first = self.begin_pass(key)
        ids, offsets = plan.examples_by_state()
        fanouts = self.spec.evaluation.fanouts or self.spec.model.fanouts
        predicted = torch.empty(len(nodes), dtype=torch.int64)
        generator = torch.Generator().manual_seed(self.spec.seed + _EVAL_SEED_OFFSET)
        task.model.eval()
        timelines = []
        for data, timeline in self.walk(key, plan, steps, first):
            k = data.step.index
            chosen = torch.from_numpy(ids[offsets[k]:offsets[k + 1]])
            started = time.perf_counter()
            rows = self._use_state(data, fanouts, nodes[chosen])
            task.eval_sampler = task.train_sampler
            size = self.spec.evaluation.batch_size
            for part, roots in zip(chosen.split(size), rows.split(size)):
                predicted[part] = task._predict(roots, generator)
            timeline.compute = (started, time.perf_counter())
            timeline.batches = -(-len(chosen) // size)
            self.record_state(timeline)
            timelines.append(timeline)
        self.recorder.record("pass_io", **{"pass": split}, epoch=epoch, **self.pass_io(timelines, disk_before))
        return {"accuracy": accuracy(predicted, self.labels[nodes])}

    def enter_pass(self, key: PassKey) -> None:
        """Fill the buffer as an uninterrupted run has it before pass ``key``: the layout is a function of the
        plans of the passes before it (:func:`~systems.disk.disk_system.plan_steps`: frames never depend on timing), so
        it is replayed from them and its partitions are read into their frames (a resumed run, or a
        re-evaluation, then samples from the same buffer rows)."""
        layout = np.full(self.buffer.num_frames, -1, dtype=np.int64)
        before = self._schedule[:self._schedule.index(key)] if key in self._schedule else self._schedule
        for past in before:
            if past[0] != "train" and len(self._split_nodes(past[0])) == 0:
                continue  # evaluate() returns NaN without walking a pass
            plan = self.pass_plan(past, layout)
            layout = plan_steps(plan, layout)[-1].layout
            if past[0] == "train":
                self._epoch = past[1]
        self._carried.clear()
        self.edges.clear()
        for frame in range(self.buffer.num_frames):
            self.buffer.evict(frame)
        for frame, partition in enumerate(layout.tolist()):
            if partition >= 0:
                self.buffer.install(frame, int(partition), read=True)

    def _last_epoch(self) -> int:
        """The epoch the latest evaluation follows (the last training pass walked)."""
        return getattr(self, "_epoch", 0)

    def walk(self, key, plan, steps, first=None):
        """The base walk, remembering the epoch of the latest training pass (evaluations follow it)."""
        if key[0] == "train":
            self._epoch = key[1]
        return super().walk(key, plan, steps, first)

    def teardown(self) -> None:
        """Finish the prefetch, close the files, drop the buffer's graph and features from the task."""
        super().teardown()
        if self.task is not None:
            self.task.graph = self.task.features = self.task.train_sampler = self.task.eval_sampler = None

    def close_files(self) -> None:
        """Close the feature and bucket files."""
        if self.buffer is not None:
            self.buffer.source.close()
        super().close_files()

__all__ = ["DiskNodeClassification"]
