"""Link prediction from disk: learnable embedding partitions move through the buffer and are written back.

The disk system's variant for ``training.task: link_prediction`` (declared in
:data:`systems.disk.disk_system.DISK_TASKS`). Every node's embedding and Adagrad state live on disk in generations
(:class:`~systems.disk.disk_embeddings.EmbeddingStore`, in the run's folder under ``disk-embeddings/``); the buffer's
frames hold whole partitions of ``[weight | state]`` rows, ``c`` of them at a time. Per epoch the policy's plan
(``beta``, ``comet``, ``random`` or ``in_memory``; examples are the ``p x p`` edge buckets of the training edges)
gives the states, which :meth:`systems.disk.disk_system.DiskSystem.train_epoch` walks; for each state, in order:

1. the state's new partitions become resident: an evicted partition is copied out of its frame and written back
   to the epoch's new generation by the writer thread (asynchronously); the loaded ones were read into free frames
   by the prefetch thread while the previous state computed (reading the latest generation, after a pending
   write-back of the same partition finished), or are read now;
2. the edge buckets inside the buffer are held (read when a partition they need arrives), and with a GNN encoder
   their CSR over buffer rows is built: sampling sees only the buffer;
3. the state's buckets' edges, shuffled together, train in batches through the link-prediction task's stages
   (:class:`~systems.tasks.link_prediction.LinkPredictionTask`, bound to the state by
   :meth:`DiskLinkPrediction.bind_training_state` with an :class:`~systems.tasks.link_prediction.EdgeView`), with
   node ids being buffer rows: the embedding table bound to the task is a view of the buffer
   (:meth:`~systems.models.embeddings.EmbeddingTable.wrap`), so sparse Adagrad updates the frames in place;
   negatives are drawn uniformly from the nodes in the buffer (and by degree from the state's edges): *negative
   sampling sees only the buffer*.

At the end of the epoch (:meth:`DiskLinkPrediction.finish_training_pass`) every resident partition is written back and the new generation is flushed (so every epoch
starts from an empty buffer, as a resumed run does); after the
validation the harness's checkpoint commits it (dense state, then manifest, atomically). A killed run resumes
after its last committed epoch (``resume``), replaying the recorded epochs into its records.

Evaluation ranks against all entities and so reads the whole latest table into memory (in partition-sized
checked reads); the ranking itself is the in-memory task's (filtered MRR, Hits@k).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import torch

from suite.config import RunSpec
from suite.errors import ConfigError, DataError
from suite.data import GraphStore
from suite.io import evict_page_cache
from suite.recorder import Recorder
from systems.system import EpochStats
from systems.disk.buffer import FeatureBuffer
from systems.disk.disk_embeddings import EmbeddingStore
from systems.disk.plan import BufferPlan
from systems.disk.policies import PolicySpec, make_plan
from systems.disk.graph import BufferedGraph
from systems.disk.disk_system import DISK_TASKS, DiskSystem, PassKey, StateData, Step, partitioned_store
from systems.models.embeddings import EmbeddingTable
from systems.models.rgcn import relation_modules
from systems.sampling.sampler import SamplingGraph
from systems.tasks.link_prediction import EdgeView, LinkPredictionTask, check_edge_split

_EMBEDDING_SEED_OFFSET = 0xE3B
EMBEDDINGS_FOLDER = "disk-embeddings"


class EmbeddingBuffer(FeatureBuffer):
    """Buffer frames of ``[weight | Adagrad state]`` rows read from, and written back to, an
    :class:`~systems.disk.disk_embeddings.EmbeddingStore`; evicting a frame writes its partition back."""

    def __init__(self, store: EmbeddingStore, capacity: int, frames: int | None = None):
        self.store = store
        self.offsets = store.offsets
        self.capacity = capacity
        self.num_frames = max(capacity, frames or capacity)
        self.max_rows = int(np.diff(self.offsets).max())
        self.frames = torch.zeros((self.num_frames, self.max_rows, store.width), dtype=torch.float32)
        self._frames_np = self.frames.numpy()
        self.frame_partition = np.full(self.num_frames, -1, dtype=np.int64)
        self.node_row = torch.full((int(self.offsets[-1]),), -1, dtype=torch.int64)

    def read(self, partition: int, out: torch.Tensor) -> int:
        """Read ``partition``'s latest rows (checked) into ``out``."""
        return self.store.read(partition, out)

    parallel_reads = False  # the embedding store serves one read at a time (it may hold newer rows in memory)

    def _read_planned(self, partitions: list[int], frames: list[int], start: int, targets: list[np.ndarray]) -> int:
        """Read each partition's latest rows (checked) into its frame (the store may hold newer rows in memory)."""
        return sum(self.read(int(partition), self.frames[int(frame)]) for partition, frame in zip(partitions, frames))

    def evict(self, frame: int) -> None:
        """Write the frame's partition back (asynchronously, from a copy), then empty the frame."""
        partition = int(self.frame_partition[frame])
        if partition >= 0:
            start, stop = self.partition_rows(partition)
            self.store.write_async(partition, self.frames[frame, : stop - start].clone())
        super().evict(frame)


class DiskLinkPrediction(DiskSystem):
    """Link prediction from disk (see the module docstring); options: :class:`~systems.disk.disk_system.DiskOptions`.

    Every epoch starts from an empty buffer (its partitions were written back to the committed generation), so a
    resumed run enters each epoch as an uninterrupted one does.
    """

    keeps_resident = False
    pipelines_states = False  # a state's batches run one at a time (``options.pipeline`` is node classification's)
    read_kind = "embeddings"
    keeps_own_checkpoints = True  # the committed generation (saved_state), not checkpoints/last.pt
    restores_best = False  # the embedding table is on disk; its earlier generations are not kept

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder):
        super().__init__(spec, store, device, recorder)
        if not spec.model.learnable_embeddings:
            raise ConfigError("model.learnable_embeddings: the disk system's link prediction moves learnable "
                            "embedding partitions; set it to true")
        if spec.training.negatives.subset_fraction is not None:
            raise ConfigError("training.negatives.subset_fraction: the disk system's negatives come from the "
                              "partitions in its buffer already; leave it null")
        if spec.evaluation.graph != "full":
            raise ConfigError("evaluation.graph: the disk system's link prediction evaluates over the whole graph "
                              "and embedding table (full); 'buffer' is for node classification")

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """Partition the store (cached), open or create the embedding generations, build the model; restore the
        dense state of a resumed run."""
        spec, options = self.spec, self.options
        self.pstore = partitioned_store(self.store, options.num_partitions, options.order,
                                         options.order_seed(spec.seed))
        if not self.pstore.has("bucket_edges"):
            raise DataError(f"{self.pstore.path}: store has no 'bucket_edges'; the disk system needs it")
        for split in ("valid", "test"):
            check_edge_split(self.pstore, split, required=False)
        if options.evict_page_cache:
            evict_page_cache(self.pstore.file("bucket_edges"), sync=True)
        dim = spec.model.embedding_dim
        folder = self.recorder.run_dir / EMBEDDINGS_FOLDER
        if not options.resume and not self.reevaluating:
            for old in folder.glob("*"):
                old.unlink()
        self.embedding_store = EmbeddingStore(folder, self.pstore.array("partition_offsets"), 2 * dim,
                                              self.counters, evict=options.evict_page_cache,
                                              verify=options.verify_checksums,
                                              max_pending_writes=max(1, options.buffer_capacity - 1))
        self.resumed = self.embedding_store.open(self._initial_rows)
        if self.resumed and len(self.embedding_store.history) >= spec.training.epochs and not self.reevaluating:
            self.embedding_store.reset(self._initial_rows)  # a finished run run again: start over
            self.resumed = False
        self.buffer = EmbeddingBuffer(self.embedding_store, options.buffer_capacity, options.frames)
        task = LinkPredictionTask(spec, self.pstore, self.device)
        encoder = task.build_model(dim)
        self.needs_graph = getattr(encoder, "uses_neighbours", True)
        self.edges = BufferedGraph(self.pstore, spec.sampler.direction, self.counters, options.evict_page_cache,
                                   verify=options.verify_checksums, coalesce_bytes=options.coalesce_bytes,
                                   typed=bool(relation_modules(encoder)))
        rows = self.buffer.rows
        task.bind_embeddings(EmbeddingTable.wrap(rows[:, :dim], rows[:, dim:],
                                                 spec.training.embedding_learning_rate or spec.training.learning_rate))
        self.task = task
        dense = self.embedding_store.dense_state()
        if dense is not None:
            self._restore(dense)

    def _initial_rows(self, partition: int) -> torch.Tensor:
        """Partition ``partition``'s first rows: normal weights (``embedding_init_scale``, a generator seeded
        from the run's seed and the partition), zero Adagrad state."""
        model = self.spec.model
        start, stop = (int(x) for x in self.pstore.array("partition_offsets")[partition:partition + 2])
        generator = torch.Generator().manual_seed(self.spec.seed + _EMBEDDING_SEED_OFFSET + partition)
        weight = torch.randn(stop - start, model.embedding_dim, generator=generator).mul_(model.embedding_init_scale)
        return torch.cat([weight, torch.zeros_like(weight)], dim=1)

    def _dense(self) -> dict:
        """The task's state without its embedding table (that is the generation's), and the global RNG's."""
        state = self.task.state_dict()
        return {"model": state["model"], "optimizer": state["optimizer"],
                "optimizer_steps": state["optimizer_steps"], "torch_rng": torch.get_rng_state()}

    def _restore(self, dense: dict) -> None:
        self.task.load_state_dict({key: dense[key] for key in ("model", "optimizer", "optimizer_steps")})
        torch.set_rng_state(dense["torch_rng"])

    def saved_state(self) -> dict:
        """The committed generation as a state in the suite's checkpoint format (:mod:`suite.checkpoint`), for
        ``suite.load_model``: the dense state, and the whole embedding table with its Adagrad state in the
        *original* node order (the partitioned store's ``node_map``), read into memory. Call after :meth:`setup`
        with :attr:`reevaluating` set (a finished run's generation is then kept, not reset)."""
        import json

        dense = self.embedding_store.dense_state()
        if dense is None:
            raise DataError(f"{self.embedding_store.folder}: no committed epoch (the run was killed before its "
                            f"first)")
        dim = self.spec.model.embedding_dim
        rows = self.embedding_store.load_all()
        order = torch.from_numpy(np.asarray(self.pstore.array("node_map"), dtype=np.int64))
        weight, state = torch.empty(len(rows), dim), torch.empty(len(rows), dim)
        weight[order], state[order] = rows[:, :dim], rows[:, dim:]
        history = [{"epoch": record["epoch"], "epoch_time_s": record["epoch_time_s"], "stats": record["stats"],
                    "valid": record["valid"], "test": None} for record in self.embedding_store.history]
        return {"format": 1, "run_id": self.spec.run_id, "epoch": len(history) - 1,
                "epochs": self.spec.training.epochs,
                "task": {"model": dense["model"], "optimizer": dense["optimizer"],
                         "optimizer_steps": dense["optimizer_steps"],
                         "embeddings": {"weight": weight, "state": state,
                                        "updates": torch.tensor([int(dense["optimizer_steps"])])}},
                "rng": {"torch": dense["torch_rng"]}, "history_json": json.dumps(history),
                "best": {"metric": "mrr", "value": None, "epoch": None}}

    def restore_checkpoint(self, state: dict, check_run: bool = True) -> None:
        """Nothing: :meth:`setup` restored the committed generation and its dense state."""

    def completed_epochs(self) -> list[tuple[float, EpochStats, dict[str, float] | None]]:
        """The epochs the committed generation holds (a resumed run continues after them)."""
        return [(record["epoch_time_s"], EpochStats(**record["stats"]), record["valid"])
                for record in self.embedding_store.history]

    def checkpoint(self, epoch: int, epoch_time_s: float, stats: EpochStats,
                   valid_metrics: dict[str, float] | None, test_metrics: dict[str, float] | None = None) -> None:
        """Commit the epoch's generation with the dense state and the epoch's record."""
        self.embedding_store.commit(self._dense(), {"epoch": epoch, "epoch_time_s": epoch_time_s,
                                                    "stats": dataclasses.asdict(stats), "valid": valid_metrics})

    def plan(self, epoch: int) -> BufferPlan:
        """The policy's plan of the edge buckets for ``epoch``."""
        options = self.options
        spec = PolicySpec(num_partitions=options.num_partitions, capacity=options.buffer_capacity,
                          task="link_prediction", fine_to_coarse_ratio=options.fine_to_coarse_ratio)
        return make_plan(options.policy, spec, seed=self.spec.seed, epoch=epoch)

    def pass_plan(self, key: PassKey, layout: np.ndarray) -> BufferPlan:
        """A training epoch's plan (evaluation reads the whole table and walks no plan)."""
        return self.plan(key[1])

    # ------------------------------------------------------------------ training
    def state_examples(self, plan: BufferPlan, step: Step) -> torch.Tensor:
        """The edges of the state's buckets as buffer rows of its layout (taken while its buckets are held: the
        prefetch of the next state drops some of them)."""
        ids, offsets = plan.examples_by_state()
        k = step.index
        return self.edges.bucket_edges(ids[offsets[k]:offsets[k + 1]], step.layout, self.buffer.max_rows)

    def start_training_pass(self, epoch: int) -> None:
        """Open the epoch's new generation (partitions evicted during the pass are written to it)."""
        self._counted = self.counters.snapshot()
        self.embedding_store.begin_epoch()

    def bind_training_state(self, data: StateData, plan: BufferPlan, shuffle: torch.Generator) -> torch.Tensor:
        """Bind the task to the state: its buckets' edges (buffer rows) shuffled, negatives from the resident rows,
        a sampler over the in-buffer CSR; the roots are positions into those edges."""
        edges = data.examples
        edges = edges[torch.randperm(len(edges), generator=shuffle)]
        self.task.bind_state(EdgeView(edges, self.buffer.resident_rows(), data.graph, data.relation_lookup))
        return torch.arange(len(edges))

    def finish_training_pass(self) -> dict[str, Any]:
        """Write every resident partition back, flush the new generation, unbind the task from the buffer; the
        flush's seconds and the pass's writes."""
        flushed = time.perf_counter()
        for frame in range(self.buffer.num_frames):
            self.buffer.evict(frame)
        self.embedding_store.finish_epoch()
        flush_s = time.perf_counter() - flushed
        self.edges.clear()
        self.task.release_state()
        after = self.counters.snapshot()
        return {"flush_s": flush_s, "io_write_bytes": after["bytes_written"] - self._counted["bytes_written"],
                "io_write_s": after["write_s"] - self._counted["write_s"]}

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        """Filtered and unfiltered MRR and Hits@k of ``split``, from the latest table read whole from disk."""
        task, spec = self.task, self.spec
        dim = spec.model.embedding_dim
        rows = self.embedding_store.load_all()
        in_buffer = task.embeddings
        task.bind_embeddings(EmbeddingTable.wrap(rows[:, :dim], rows[:, dim:], in_buffer.learning_rate))
        if self.needs_graph:  # global ids, not buffer rows
            task.bind_evaluation_graph(SamplingGraph.from_store(self.pstore, spec.sampler.direction))
        try:
            return task.evaluate(split)
        finally:
            task.bind_embeddings(in_buffer)
            task.bind_evaluation_graph(None)

    def own_threads(self) -> int:
        """The prefetch thread (when on) and the write-back thread."""
        return super().own_threads() + 1

    def close_files(self) -> None:
        """Stop the writer thread and close the embedding and bucket files."""
        if getattr(self, "embedding_store", None) is not None:
            self.embedding_store.close()
        super().close_files()

__all__ = ["DiskLinkPrediction", "EmbeddingBuffer"]
