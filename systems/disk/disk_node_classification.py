"""Node classification from disk: feature partitions move through the buffer; training nodes stay resident.

The disk system's variant for ``training.task: node_classification`` (declared in
:data:`systems.disk.disk_system.DISK_TASKS`). The node-classification task (:mod:`systems.tasks.node_classification`)
runs its own stage methods over the buffer: for each state it is bound
(:meth:`~systems.tasks.node_classification.NodeClassificationTask.bind_state`) to a
:class:`~systems.tasks.node_classification.NodeView` whose graph is the in-buffer CSR, whose features are the
buffer's rows and whose labels are the state's nodes' labels by buffer row, so ``sample`` sees only the buffer and
``gather`` reads from it. A state's training nodes, shuffled, run one batch at a time (as in memory) or through the
staged pipeline (``system.options.pipeline``: bounded staleness, drained before the next state): the disk system's
:meth:`~systems.disk.disk_system.DiskSystem.train_epoch` drives the states; this variant supplies the plans and
binds each state (:meth:`DiskNodeClassification.bind_training_state`).

Passes: a training epoch follows the policy's plan of the training nodes. With ``sequential`` (MariusGNN) the
partitions holding training nodes stay in the buffer and the other slots are a fresh random draw every epoch
(:func:`systems.disk.policies.node_policies.random_fill`; ``sequential_rotation``: a seeded rotation,
:func:`~systems.disk.policies.node_policies.rotation_window`), so over epochs sampling sees every neighbourhood.

Evaluation (``evaluation.graph``). ``full`` (the default, MariusGNN's ``storage.full_graph_evaluation``): the
split's nodes are predicted over the whole graph, leaving the buffer as it is: the task is bound to the
partitioned store's CSR and to its feature rows read from disk batch by batch
(:class:`~systems.disk.buffer.RowsOnDemand`), and predicts with
:meth:`~systems.tasks.node_classification.NodeClassificationTask.predict_nodes`, so the predictions are the ones
the in-memory system makes with the same weights on the same store. Evaluations are then no buffer passes.
``buffer``: an evaluation pass plans the split's nodes with ``eval_policy`` (default ``sequential`` when their
partitions fit in the buffer, filled first with the partitions already resident: with a ``labeled-first`` order
the evaluated nodes are resident and an evaluation reads nothing), each node predicted in its state, sampling only
inside it. Either way each evaluation writes a ``pass_io`` record (its reads, apart from training's, its
``eval_graph`` and ``eval_s``), and ``summary.json`` says under ``evaluation`` which graph was evaluated over and
what all evaluations read.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from suite.errors import DataError
from suite.metrics import accuracy
from systems.disk.buffer import FeatureBuffer, PartitionArray, RowsOnDemand
from systems.disk.graph import BufferedGraph
from systems.disk.plan import BufferPlan
from systems.disk.policies import PolicySpec, make_plan
from systems.disk.disk_system import DISK_TASKS, DiskSystem, PassKey, StateData, partitioned_store, plan_steps
from systems.models.rgcn import RelationLookup, relation_modules
from systems.sampling.sampler import SamplingGraph
from systems.tasks.node_classification import NodeClassificationTask, NodeView, labeled

_EVAL_SEED_OFFSET = 0xE7A1


class DiskNodeClassification(DiskSystem):
    """Node classification from disk (see the module docstring); options:
    :class:`~systems.disk.disk_system.DiskOptions`.

    Attributes set by :meth:`setup`: ``train_nodes`` (the labeled training nodes, ids of the partitioned store),
    ``labels`` (every node's), ``task`` (model and optimizer built; bound to one buffer state at a time).
    """

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """Partition the store (cached), open the feature and bucket files, build the model; no feature is read."""
        spec, options = self.spec, self.options
        self.pstore = partitioned_store(self.store, options.num_partitions, options.order,
                                         options.order_seed(spec.seed))
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
        self.train_nodes = labeled(self.pstore.split("train").to(torch.int64), self.labels)
        if len(self.train_nodes) == 0:
            raise DataError(f"{self.pstore.path}: the train split has no labeled node")
        torch.manual_seed(spec.seed)
        task.build_model(self.pstore.feature_dim, self.pstore.num_classes or int(self.labels.max()) + 1)
        self.task = task
        self.needs_graph = getattr(task.model, "uses_neighbours", True)
        self.edges = BufferedGraph(self.pstore, spec.sampler.direction, self.counters, evict,
                                   verify=options.verify_checksums, coalesce_bytes=options.coalesce_bytes,
                                   typed=bool(relation_modules(task.model)))
        self.node_partition = np.searchsorted(self.buffer.offsets, np.arange(self.pstore.num_nodes),
                                              side="right") - 1
        self.labels_by_row = torch.full((self.buffer.rows.shape[0],), -1, dtype=torch.int64)
        self._eval_nodes: dict[str, torch.Tensor] = {}
        self._eval_io = {"io_read_bytes": 0, "io_read_s": 0.0, "eval_s": 0.0}
        self._whole_graph: tuple[SamplingGraph | None, RelationLookup | None] | None = None
        if self.full_graph_evaluation:  # evaluations leave the buffer alone: only training passes walk it
            self._schedule = [key for key in self._schedule if key[0] == "train"]

    @property
    def full_graph_evaluation(self) -> bool:
        """Whether evaluations sample over the whole graph (``evaluation.graph: full``), not the buffer."""
        return self.spec.evaluation.graph == "full"

    # ------------------------------------------------------------------ plans
    def pass_plan(self, key: PassKey, layout: np.ndarray) -> BufferPlan:
        """Training: the policy's plan of the training nodes for the epoch. Evaluation: ``eval_policy``'s plan of
        the split's nodes, filled with the resident partitions first."""
        kind, epoch = key
        if kind == "train":
            return self._plan(self.options.policy, self.train_nodes, epoch, self.spec.seed)
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
    def bind_training_state(self, data: StateData, plan: BufferPlan, shuffle: torch.Generator) -> torch.Tensor:
        """The state's training nodes, shuffled, as buffer rows; the task bound to the state."""
        ids, offsets = plan.examples_by_state()
        k = data.step.index
        nodes = self.train_nodes[torch.from_numpy(ids[offsets[k]:offsets[k + 1]])]
        order = torch.randperm(len(nodes), generator=shuffle)
        return self._bind_state(data, nodes[order], evaluation=False)

    def _bind_state(self, data: StateData, nodes: torch.Tensor, evaluation: bool) -> torch.Tensor:
        """Bind the task to the buffer (its graph, rows, and the labels of ``nodes`` by buffer row; the training or
        the evaluation sampler over the graph); return the buffer rows of ``nodes``."""
        rows = self.buffer.node_row[nodes]
        if (rows < 0).any():
            raise RuntimeError("a node of the state is not in the buffer (the plan and the buffer disagree)")
        self.labels_by_row.fill_(-1)
        self.labels_by_row[rows] = self.labels[nodes]
        self.task.bind_state(NodeView(data.graph, self.buffer.rows, self.labels_by_row, data.relation_lookup),
                             evaluation=evaluation)
        return rows

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        """Accuracy on ``split``, over the whole graph or inside the buffer (``evaluation.graph``)."""
        nodes = self._split_nodes(split)
        if len(nodes) == 0:
            return {"accuracy": math.nan}
        from suite.io import process_io_bytes

        disk_before, started = process_io_bytes(), time.perf_counter()
        if self.full_graph_evaluation:
            predicted, io = self.predict_over_whole_graph(nodes)
        else:
            predicted, io = self._predict_in_buffer(split, nodes)
        disk = process_io_bytes() - disk_before
        io.update(eval_graph=self.spec.evaluation.graph, eval_s=time.perf_counter() - started,
                  disk_read_bytes=disk.read_bytes, disk_write_bytes=disk.write_bytes, disk_rchar=disk.rchar)
        for measure in self._eval_io:
            self._eval_io[measure] += io[measure]
        self.recorder.record("pass_io", **{"pass": split}, epoch=self.last_epoch(), **io)
        return {"accuracy": accuracy(predicted, self.labels[nodes])}

    def predict_over_whole_graph(self, nodes: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """What a full-graph evaluation predicts for ``nodes`` (ids of the partitioned store): the task's
        predictions over the store's CSR, its feature rows read on demand; and the reads (``io_read_bytes``,
        ``io_read_s``, ``io_reads``). The buffer is left as it is."""
        task = self.task
        rows = RowsOnDemand(PartitionArray(self.pstore.file("features"), self.counters,
                                           self.options.evict_page_cache))
        graph, lookup = self._whole_graph_structure()
        try:
            task.bind_state(NodeView(graph, rows, self.labels, lookup), evaluation=True)
            predicted = task.predict_nodes(nodes)
        finally:
            rows.source.close()
            task.release_state()
        return predicted, {"io_read_bytes": rows.bytes_read, "io_read_s": rows.read_s, "io_reads": rows.reads}

    def _whole_graph_structure(self) -> tuple[SamplingGraph | None, RelationLookup | None]:
        """The store's whole CSR (and its relation types, for a model that reads them), read once for the
        evaluations that follow one another (validation, then test) and dropped when training resumes."""
        if self._whole_graph is None:
            direction = self.spec.sampler.direction
            lookup = RelationLookup.from_store(self.pstore, direction) if relation_modules(self.task.model) else None
            graph = SamplingGraph.from_store(self.pstore, direction) if self.needs_graph else None
            self._whole_graph = (graph, lookup)
        return self._whole_graph

    def start_training_pass(self, epoch: int) -> None:
        """Drop the whole graph of the evaluations before this pass: training holds only the buffer."""
        self._whole_graph = None

    def _predict_in_buffer(self, split: str, nodes: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """Predictions for ``nodes`` by an evaluation pass over the buffer (each node in its state); and the
        pass's reads."""
        task = self.task
        epoch = self.last_epoch()
        key = (split, epoch)
        plan, steps, first = self.begin_pass(key)
        ids, offsets = plan.examples_by_state()
        predicted = torch.empty(len(nodes), dtype=torch.int64)
        generator = torch.Generator().manual_seed(self.spec.seed + _EVAL_SEED_OFFSET)
        task.model.eval()
        timelines = []
        for data, timeline in self.walk(key, plan, steps, first):
            k = data.step.index
            chosen = torch.from_numpy(ids[offsets[k]:offsets[k + 1]])
            started = time.perf_counter()
            rows = self._bind_state(data, nodes[chosen], evaluation=True)
            size = self.spec.evaluation.batch_size
            for part, roots in zip(chosen.split(size), rows.split(size)):
                predicted[part] = task.predict(roots, generator)
            timeline.compute = (started, time.perf_counter())
            timeline.batches = -(-len(chosen) // size)
            self.record_state(timeline)
            timelines.append(timeline)
        return predicted, self.state_io(timelines)

    def collect_io(self, outcome) -> None:
        """The run's IO (:meth:`DiskSystem.collect_io`), and under ``evaluation`` in the summary the graph the
        evaluations sampled over and what they read, in all."""
        super().collect_io(outcome)
        outcome.summary_extra["evaluation"] = {"graph": self.spec.evaluation.graph, **self._eval_io}

    def enter_pass(self, key: PassKey) -> None:
        """Fill the buffer as an uninterrupted run has it before pass ``key``: the layout is a function of the
        plans of the passes before it (:func:`~systems.disk.disk_system.plan_steps`: frames never depend on timing), so
        it is replayed from them and its partitions are read into their frames (a resumed run, or a
        re-evaluation, then samples from the same buffer rows). A full-graph evaluation needs no buffer."""
        if key[0] != "train" and self.full_graph_evaluation:
            self._epoch = key[1]
            return
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
        frames = np.flatnonzero(layout >= 0)
        frames = frames[np.argsort(layout[frames], kind="stable")]
        self._read_partitions(layout[frames], frames)  # one read per run of adjacent partitions
        for frame in frames.tolist():
            self.buffer.install(frame, int(layout[frame]), read=False)

    def teardown(self) -> None:
        """Finish the prefetch, close the files, unbind the task from the buffer."""
        super().teardown()
        self._whole_graph = None
        if self.task is not None:
            self.task.release_state()

    def close_files(self) -> None:
        """Close the feature and bucket files."""
        if self.buffer is not None:
            self.buffer.source.close()
        super().close_files()

__all__ = ["DiskNodeClassification"]
