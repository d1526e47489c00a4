"""The feature-cache system (Ginex, GNNDrive, GraphBolt's ``DiskBasedFeature``): the graph structure and the labels
in memory, the feature rows on disk, read through a cache of a given budget.

Sampling is the in-memory system's, over the whole graph: the same epoch plan (:func:`systems.batch.plan_epoch`),
the same task (:class:`~systems.tasks.node_classification.NodeClassificationTask`: its samplers, each batch drawing
from its own generator, its model built after ``torch.manual_seed(seed)``, its ``compute``), so, seed for seed, the
batches are the in-memory system's; only the feature rows come another way. A batch's rows are gathered through the
:class:`~systems.feature_cache.cache.FeatureCache`: hits from memory, misses read from the store's ``features.npy``
with ``O_DIRECT`` (sorted, merged into extents, read by a pool of threads; :mod:`systems.feature_cache.direct_io`),
the registered cache policy (``system.options.policy``, :mod:`systems.feature_cache.policies`) deciding which rows
stay. The cache holds ``cache_bytes`` of rows, or ``cache_fraction`` of the feature table (default 25 %).

Per epoch: the batches run through the staged pipeline (:mod:`systems.stage_pipeline`) with one ``load`` worker
(sample ahead, gather through the cache: reads overlap the previous batches' compute), ``transfer`` and ``compute``
(in admission order, so the result is the synchronous one); ``prefetch: false`` runs one batch and one stage at a
time instead. A policy that looks ahead (``belady``) is given the distinct rows of the next ``lookahead_batches - 1``
batches, sampled ahead by the same worker (each batch is sampled once: the sample is kept for its turn). The cache
serves batches one at a time in planned order, so hits and bytes depend only on the seed.

With ``pack`` (DiskGNN) each epoch is sampled ahead before its first batch trains, its batches' distinct rows are
written contiguously to a packed file (:mod:`systems.feature_cache.packing`, under the run folder's ``packed/``),
and the batches' misses are read from their stretch of it; the pass runs inside the epoch (so its time counts in
time to accuracy) and is recorded (``pack_s``, ``pack_sample_s``, ``pack_read_bytes``, ``pack_write_bytes``,
``packed_rows``). With ``record_trace`` every lookup's distinct rows go to ``cache_trace.npz`` in the run folder
(:mod:`systems.feature_cache.trace`), what the cache simulator replays.

Evaluations predict as the in-memory system does (:meth:`~NodeClassificationTask.predict_nodes`), their rows read
through the same cache (:class:`~systems.feature_cache.cache.CachedRows`); their IO is recorded apart (``pass_io``
records, ``feature_cache.evaluation`` in the summary).

Recorded per epoch: the policy, cache rows, hits, misses, hit rate, rows admitted, rows and extents read, bytes read
(``io_read_bytes``, what the reads covered in the file, aligned blocks included) and their seconds, the pinned rows
read first (``fill_rows``, in epoch 0), and what ``/proc/self/io`` says the process read (``disk_read_bytes``: with
``O_DIRECT`` about ``io_read_bytes``). A resumed run starts with a cold cache.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import Field, field_validator, model_validator

from suite.config import RunSpec, validate_system_options
from suite.data import GraphStore
from suite.errors import ConfigError, DataError
from suite.io import IOCounters, process_io_bytes
from suite.metrics import StageTimer
from suite.recorder import Recorder
from systems.batch import Batch, plan_epoch
from systems.feature_cache.cache import CachedRows, FeatureCache
from systems.feature_cache.direct_io import (DEFAULT_IO_THREADS, DEFAULT_MERGE_GAP_BYTES, ExtentReader,
                                             ReadStats)
from systems.feature_cache.packing import PackedEpoch, PackStats, pack_epoch
from systems.feature_cache.policies import CACHE_POLICIES, CacheContext
from systems.feature_cache.trace import TRACE_FILE, build_trace
from systems.models.rgcn import RelationLookup, relation_modules
from systems.pipelined import StageOptions, task_stages
from systems.sampling.sampler import SamplingGraph
from systems.stage_pipeline import Pipeline, Stage
from systems.stages import epoch_stats
from systems.system import EpochStats, System, SystemOptions
from systems.tasks.node_classification import NodeClassificationTask, NodeView, labeled

DEFAULT_CACHE_FRACTION = 0.25


class FeatureCacheOptions(SystemOptions):
    """``system.options`` of the ``feature_cache`` system."""

    policy: str = Field("s3fifo", description="registered feature-cache policy (none, static_degree, lru, s3fifo, "
                                              "belady)")
    cache_bytes: int | None = Field(None, ge=0, description="cache budget in bytes of feature rows (exclusive "
                                                            "with cache_fraction)")
    cache_fraction: float | None = Field(None, ge=0.0, le=1.0, description="cache budget as a fraction of the "
                                                                           "feature table (default 0.25)")
    lookahead_batches: int = Field(16, ge=1, description="batches a look-ahead policy (belady) sees: the current "
                                                         "one and the next ones, sampled ahead")
    direct_io: bool = Field(True, description="read with O_DIRECT (page cache bypassed) where the file system "
                                              "allows it")
    io_threads: int = Field(DEFAULT_IO_THREADS, ge=1, description="threads issuing a batch's reads")
    merge_gap_bytes: int = Field(DEFAULT_MERGE_GAP_BYTES, ge=0,
                                 description="read neighbouring rows at most this many bytes apart as one extent (the "
                                             "gap is read too)")
    prefetch: bool = Field(True, description="load (sample, read) in a background stage while earlier batches "
                                             "compute; false: one batch and one stage at a time")
    prefetch_depth: int = Field(4, ge=1, description="batches in flight at most (loaded ahead of compute)")
    pack: bool = Field(False, description="DiskGNN-style: sample each epoch ahead, write each batch's rows "
                                          "contiguously to a packed file (the pass counted in the epoch's time), "
                                          "read the batches' misses from it")
    record_trace: bool = Field(False, description="write every lookup's distinct rows to cache_trace.npz in the run "
                                                  "folder (what simulators.cache_model replays)")

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        if value not in CACHE_POLICIES:
            raise ValueError(f"unknown cache policy {value!r} (known: {', '.join(CACHE_POLICIES.names())})")
        return value

    @model_validator(mode="after")
    def _one_budget(self) -> "FeatureCacheOptions":
        if self.cache_bytes is not None and self.cache_fraction is not None:
            raise ValueError("cache_bytes: give cache_bytes or cache_fraction, not both")
        return self

    def cache_rows(self, num_rows: int, row_bytes: int) -> int:
        """Rows the budget holds (at most the table's)."""
        if self.cache_bytes is not None:
            rows = self.cache_bytes // max(row_bytes, 1)
        else:
            fraction = DEFAULT_CACHE_FRACTION if self.cache_fraction is None else self.cache_fraction
            rows = int(fraction * num_rows)
        return int(min(rows, num_rows))


class LookAhead:
    """An epoch's batches sampled ahead, in order, by the one load worker: :meth:`window` samples through batch
    ``index + size - 1`` (each once) and gives the distinct input rows of the batches after ``index``."""

    def __init__(self, task: NodeClassificationTask, batches: list[Batch], size: int):
        self.task, self.batches, self.size = task, batches, size
        self.sampled = 0
        self.rows: dict[int, np.ndarray] = {}

    def window(self, index: int, wanted: bool) -> list[np.ndarray]:
        """Sample batches up to ``index + size - 1``; return the distinct rows of ``index + 1 ...`` (``wanted``)."""
        last = min(len(self.batches), index + (self.size if wanted else 1))
        while self.sampled < last:
            self._sample_next(keep=wanted)
        self.rows.pop(index, None)
        return [self.rows[i] for i in range(index + 1, last)] if wanted else []

    def sample_all(self) -> list[np.ndarray]:
        """Sample every batch (before the first :meth:`window`); the distinct input rows of each, in order."""
        while self.sampled < len(self.batches):
            self._sample_next(keep=True)
        return [self.rows[i] for i in range(len(self.batches))]

    def _sample_next(self, keep: bool) -> None:
        batch = self.batches[self.sampled]
        started = time.perf_counter()
        self.task.sample(batch)
        batch.extra["sample_s"] = time.perf_counter() - started
        if keep:
            self.rows[self.sampled] = torch.unique(batch.sample.input_nodes).numpy().astype(np.int64)
        self.sampled += 1


class FeatureCacheSystem(System):
    """Node classification with features on disk behind a cache (see the module docstring); options:
    :class:`FeatureCacheOptions`.

    Attributes set by :meth:`setup`: ``graph`` (the whole CSR), ``labels``, ``train_nodes``, ``cache``, ``task``
    (bound to the whole graph, its features the cache).
    """

    options_model = FeatureCacheOptions

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder):
        super().__init__(spec, store, device, recorder)
        self.options: FeatureCacheOptions = validate_system_options(spec)
        if spec.training.task != "node_classification":
            raise ConfigError(f"training.task: the feature_cache system runs node_classification only, got "
                              f"{spec.training.task!r}")
        self.task = NodeClassificationTask(spec, store, device)
        self.counters = IOCounters()
        self.cache: FeatureCache | None = None
        self._eval_totals: dict[str, float] = {}
        self._train_totals: dict[str, float] = {}
        self._epochs_trained = 0
        self._pack_totals: dict[str, float] = {}
        self._pack_source: ExtentReader | None = None
        self._pack_dir: Path | None = None
        self._pack_dir_owned = False
        self._packed: PackedEpoch | None = None

    def own_threads(self) -> int:
        """The load worker, when loading runs beside compute (the IO threads wait on the disk)."""
        return int(self.options.prefetch)

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """The graph and labels into memory, the feature file opened (nothing read), the model built as the
        in-memory system builds it, the task bound to the whole graph with the cache as its features."""
        spec, store, options = self.spec, self.store, self.options
        NodeClassificationTask.check_inputs(spec, store)
        self.labels = store.labels.to(torch.int64, copy=True)
        self.train_nodes = labeled(store.split("train").to(torch.int64), self.labels)
        task = self.task
        torch.manual_seed(spec.seed)
        task.build_model(store.feature_dim, store.num_classes or int(self.labels.max()) + 1)
        direction = spec.sampler.direction
        self.graph = SamplingGraph.from_store(store, direction)
        lookup = RelationLookup.from_store(store, direction) if relation_modules(task.model) else None
        reader = ExtentReader(store.file("features"), self.counters, direct=options.direct_io,
                              io_threads=options.io_threads, merge_gap_bytes=options.merge_gap_bytes)
        if reader.shape[0] != store.num_nodes:
            reader.close()
            raise DataError(f"{reader.path}: {reader.shape[0]} rows, expected one per node ({store.num_nodes})")
        capacity = options.cache_rows(reader.shape[0], reader.row_bytes)
        degrees = (self.graph.indptr[1:] - self.graph.indptr[:-1]).numpy()
        policy = CACHE_POLICIES.get(options.policy)(CacheContext(capacity, reader.shape[0], degrees))
        self.cache = FeatureCache(reader, policy)
        self.degrees = degrees
        if options.record_trace:
            self.cache.trace = []
        if options.pack:
            self._pack_source = ExtentReader(store.file("features"), self.counters, direct=options.direct_io,
                                             io_threads=options.io_threads, merge_gap_bytes=options.merge_gap_bytes)
            run_dir = getattr(self.recorder, "run_dir", None)
            self._pack_dir_owned = run_dir is None or not run_dir.is_dir()
            self._pack_dir = (Path(tempfile.mkdtemp(prefix="feature-pack-")) if self._pack_dir_owned
                              else run_dir / "packed")
        view = NodeView(self.graph, CachedRows(self.cache), self.labels, lookup)
        task.bind_state(view)
        task.bind_state(view, evaluation=True)

    # ------------------------------------------------------------------ training
    def plan(self, epoch: int) -> list[Batch]:
        """The epoch's batches: the in-memory task's plan (same seed, same order, same ``limit_batches``)."""
        batches = plan_epoch(self.train_nodes, self.spec.training.batch_size, epoch, self.spec.seed)
        return batches[: self.spec.training.limit_batches]

    def train_epoch(self, epoch: int, progress: bool = False) -> EpochStats:
        """The epoch's batches through sample-ahead, the cache, transfer and compute (pipelined unless
        ``prefetch`` is off); the cache's and the reads' measures in the epoch record."""
        disk_before = process_io_bytes()
        self.cache.segment = f"train:{epoch}"
        fill_started = time.perf_counter()
        fill_rows = self.cache.fill()
        fill_s = time.perf_counter() - fill_started
        batches = self.plan(epoch)
        self.task.train()
        ahead = LookAhead(self.task, batches, self.options.lookahead_batches)
        wanted = self.cache.policy.looks_ahead
        packing = self._pack(epoch, ahead) if self.options.pack else {}
        try:
            if self.options.prefetch:
                busy, extra = self._pipelined(batches, ahead, wanted)
            else:
                busy, extra = self._one_at_a_time(batches, ahead, wanted)
            measures = self._period_measures(disk_before)
        finally:
            if self._packed is not None:
                self._packed.close()
                self._packed = None
        self._epochs_trained += 1
        for key in ("cache_hits", "cache_misses", "io_read_bytes", "rows_read"):
            self._train_totals[key] = self._train_totals.get(key, 0) + measures[key]
        return epoch_stats(batches, busy, **measures, **extra, **packing, fill_rows=fill_rows, fill_s=fill_s,
                           **self.describe())

    def _pack(self, epoch: int, ahead: LookAhead) -> dict[str, Any]:
        """Sample the whole epoch, write its packed file, open it for the batches; the pass's cost."""
        started = time.perf_counter()
        rows = ahead.sample_all()
        sampled_s = time.perf_counter() - started
        path = self._pack_dir / f"epoch-{epoch}.npy"
        self._pack_source.take_stats()
        stats: PackStats = pack_epoch(rows, self._pack_source, path)
        options = self.options
        self._packed = PackedEpoch(path, rows, self.counters, options.direct_io, options.io_threads,
                                   options.merge_gap_bytes)
        self._pack_totals["pack_s"] = self._pack_totals.get("pack_s", 0.0) + sampled_s + stats.seconds
        for key, value in stats.as_dict().items():
            if key != "pack_s":
                self._pack_totals[key] = self._pack_totals.get(key, 0) + value
        return {**stats.as_dict(), "pack_sample_s": sampled_s}

    def _packed_batch(self, batch: Batch):
        return None if self._packed is None else self._packed.batch(batch.index)

    def _load(self, batch: Batch, ahead: LookAhead, wanted: bool) -> None:
        future = ahead.window(batch.index, wanted)
        started = time.perf_counter()
        x = self.cache.gather(batch.sample.input_nodes, future, self._packed_batch(batch)).float()
        y = self.labels[batch.roots]
        if self.device.type == "cuda":
            x, y = x.pin_memory(), y.pin_memory()
        batch.x, batch.y = x, y
        batch.extra["gather_s"] = time.perf_counter() - started

    def _pipelined(self, batches: list[Batch], ahead: LookAhead, wanted: bool) -> tuple[dict, dict]:
        depth = self.options.prefetch_depth
        stage_options = StageOptions(batch_loader_threads=1, batch_transfer_threads=1, staleness_bound=depth,
                                     batch_host_queue_size=depth, batch_device_queue_size=depth,
                                     record_batches=False)
        task = self.task
        load = Stage("load", lambda batch, worker: self._load(batch, ahead, wanted), workers=1)
        stages = task_stages(task, stage_options, lambda batch, worker: task.transfer(batch), load)

        def admit(batch: Batch) -> None:
            batch.version_read = task.optimizer_steps

        trace = Pipeline(stages, depth, on_admit=admit).run(batches)
        return trace.busy_s(), {"pipeline_wall_s": trace.wall_s,
                                "load_sample_s": sum(b.extra.get("sample_s", 0.0) for b in batches),
                                "load_gather_s": sum(b.extra.get("gather_s", 0.0) for b in batches)}

    def _one_at_a_time(self, batches: list[Batch], ahead: LookAhead, wanted: bool) -> tuple[dict, dict]:
        task, timer = self.task, StageTimer(self.device)
        for batch in batches:
            batch.version_read = task.optimizer_steps
            with timer.stage("sample"):
                future = ahead.window(batch.index, wanted)
            with timer.stage("gather"):
                batch.x = self.cache.gather(batch.sample.input_nodes, future, self._packed_batch(batch)).float()
                batch.y = self.labels[batch.roots]
            with timer.stage("transfer"):
                task.transfer(batch)
            with timer.stage("compute"):
                task.compute(batch)
        return timer.snapshot(), {}

    def _period_measures(self, disk_before: Any) -> dict[str, Any]:
        """The cache's and the reader's measures since the last period, and the process's disk reads since
        ``disk_before``."""
        disk = process_io_bytes() - disk_before
        reads = ReadStats()
        for reader in (self.cache.reader, None if self._packed is None else self._packed.reader):
            if reader is not None:
                taken = reader.take_stats()
                reads.add(taken.rows, taken.extents, taken.bytes, taken.seconds)
        return {**self.cache.take_stats().as_dict(), **reads.as_dict(),
                "disk_read_bytes": disk.read_bytes, "disk_rchar": disk.rchar}

    def describe(self) -> dict[str, Any]:
        """The cache's configuration: policy, rows, bytes, share of the table, read path."""
        reader = self.cache.reader
        table = reader.shape[0] * reader.row_bytes
        return {"policy": self.options.policy, "cache_rows": self.cache.capacity, "cache_bytes": self.cache.slot_bytes,
                "cache_share": self.cache.slot_bytes / table if table else 0.0, "direct_io": reader.direct}

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, split: str) -> dict[str, float]:
        """The in-memory system's evaluation, its rows read through the cache (recorded as a ``pass_io``)."""
        disk_before, started = process_io_bytes(), time.perf_counter()
        self.cache.take_stats(), self.cache.reader.take_stats()  # training's were taken at the end of its epoch
        self.cache.segment = f"eval:{split}:{self._epochs_trained}"
        metrics = self.task.evaluate(split)
        measures = {**self._period_measures(disk_before), "eval_s": time.perf_counter() - started}
        for key in ("cache_hits", "cache_misses", "io_read_bytes", "rows_read", "eval_s"):
            self._eval_totals[key] = self._eval_totals.get(key, 0) + measures[key]
        self.recorder.record("pass_io", **{"pass": split}, **measures)
        return metrics

    # ------------------------------------------------------------------ measures
    def collect_io(self, outcome) -> None:
        """Bytes read over the run; under ``feature_cache`` in the summary the cache's configuration, the read path
        and the training and evaluation totals."""
        outcome.io_read_bytes = self.counters.snapshot()["bytes_read"]
        train, evaluation = dict(self._train_totals), dict(self._eval_totals)
        for totals in (train, evaluation):
            lookups = totals.get("cache_hits", 0) + totals.get("cache_misses", 0)
            totals["hit_rate"] = totals.get("cache_hits", 0) / lookups if lookups else None
        outcome.summary_extra["feature_cache"] = {**self.describe(), "io_note": self.cache.reader.note,
                                                  "lookahead_batches": self.options.lookahead_batches,
                                                  "train": train, "evaluation": evaluation,
                                                  "pack": dict(self._pack_totals) if self.options.pack else None}
        if self.cache.trace is not None:
            self._write_trace()

    def _write_trace(self) -> None:
        """The lookups recorded over the run, as ``cache_trace.npz`` in the run folder (none without a folder)."""
        run_dir = getattr(self.recorder, "run_dir", None)
        if run_dir is None or not run_dir.is_dir():
            return
        reader = self.cache.reader
        trace = build_trace(self.cache.trace, self.degrees, self.cache.fill_at, num_rows=reader.shape[0],
                            row_bytes=reader.row_bytes, data_offset=reader.data_offset, file_size=reader.file_size,
                            capacity=self.cache.capacity, merge_gap_bytes=reader.merge_gap_bytes,
                            lookahead_batches=self.options.lookahead_batches, policy=self.options.policy)
        trace.save(run_dir / TRACE_FILE)

    def teardown(self) -> None:
        """Close the feature file and its threads; unbind the task (the model stays)."""
        if self.cache is not None:
            self.cache.close()
        if self._packed is not None:
            self._packed.close()
        if self._pack_source is not None:
            self._pack_source.close()
        if self._pack_dir is not None:
            if self._pack_dir_owned:
                shutil.rmtree(self._pack_dir, ignore_errors=True)
            elif self._pack_dir.is_dir() and not any(self._pack_dir.iterdir()):
                self._pack_dir.rmdir()
        self.task.release_state()


__all__ = ["FeatureCacheOptions", "FeatureCacheSystem", "LookAhead"]
