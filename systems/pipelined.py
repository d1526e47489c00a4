"""The pipelined CPU-GPU system (MariusGNN/Marius): staged workers, bounded queues, bounded staleness.

Per mini-batch the stages of the in-memory baseline run as a pipeline (:mod:`systems.stage_pipeline`), each with its own
workers, so that preparing batch ``i + 1`` overlaps computing batch ``i``:

- ``load`` (``batch_loader_threads`` workers): sample and gather features and labels (into pinned memory on CUDA);
- ``transfer`` (``batch_transfer_threads``): host to device, non-blocking on one side CUDA stream per worker;
- ``compute`` (one worker: one device; on the CPU, ``compute_workers`` threads for tasks whose compute may run
  concurrently, link prediction: each worker computes its own batches, Hogwild-style, with optimizer steps
  serialized): forward, backward, optimizer step;
- ``update`` (one worker, for tasks with learnable state outside the model): write it back.

What each stage does is the task's (:mod:`systems.tasks`). Queues: ``batch_host_queue_size`` between load and
transfer, ``batch_device_queue_size`` between transfer and compute (and between compute and update).

A batch is admitted (takes a token) only while fewer than ``staleness_bound`` are in flight; its staleness is the
number of optimizer steps applied between its admission and its own step. ``compute`` takes batches in admission
order (``in_order_compute``, the default), which makes ``staleness < staleness_bound`` a guarantee; with
``in_order_compute: false`` a batch that finished loading early overtakes slower ones (no wait for stragglers,
but a batch overtaken by many is staler than the bound). For node classification from fixed features nothing a
batch reads while loading depends on the model, so in-order async training computes exactly what synchronous
training does; the schedule matters out of order, or with learnable embeddings. ``sync: true`` runs
the same stages with one worker each and a bound of 1, i.e. the in-memory baseline's schedule: with the same
seed it gives exactly the baseline's losses and metrics (batches sample from per-batch generators, see
:mod:`systems.batch`).

Loader workers are threads by default (torch operations and the numba sampling kernels release the GIL);
``loader_workers: process`` loads in worker processes instead (a ``torch.utils.data.DataLoader`` over the
epoch's batches; forked after setup, they share graph, features and labels copy-on-write), whose results a
single feeder thread admits in planned order; the workers' own timestamps are the ``load`` stamps. The
DataLoader prefetches up to ``batch_host_queue_size`` batches ahead of admission (loading reads nothing the
model changes for node classification).
``experiments/figures/pipeline_speed.py`` measures both.

Recorded per epoch, besides the epoch record: one ``batch`` record per batch (admission, per-stage start/end and
worker, staleness; times in seconds from the epoch's start), one ``queues`` record (occupancy of each queue after
every put and get), and in the epoch record ``pipeline_efficiency`` (epoch time / busy time per worker of the
busiest stage), ``bottleneck_stage``, ``compute_utilization``, ``gpu_utilization`` (NVML, CUDA only) and the
load stage's split into sample and gather.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from suite.config import RunSpec, validate_system_options
from suite.errors import ConfigError
from suite.metrics import GpuUtilizationSampler
from suite.data import GraphStore
from suite.recorder import Recorder
from systems.system import EpochStats, SystemOptions
from systems.batch import Batch, StageStamp
from suite.ranks import DistributedOptions
from systems.in_memory import InMemorySystem
from systems.tasks.task import Task
from systems.stage_pipeline import Pipeline, PipelineTrace, Stage
from systems.stages import epoch_stats


class StageOptions(BaseModel):
    """The pipeline's own options (Marius's names and defaults): workers, queues, the staleness bound. The
    ``pipelined`` system takes them at the top of ``system.options``; the ``disk`` system under
    ``system.options.pipeline``."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    batch_loader_threads: int = Field(4, ge=1, description="load workers (sample + gather)")
    batch_transfer_threads: int = Field(2, ge=1, description="host-to-device transfer workers")
    batch_host_queue_size: int = Field(4, ge=1, description="capacity of the queue between load and transfer")
    batch_device_queue_size: int = Field(4, ge=1, description="capacity of the queue between transfer and compute")
    staleness_bound: int = Field(16, ge=1, description="batches in flight at most (admitted, not yet completed)")
    sync: bool = Field(False, description="no overlap: one worker per stage and a staleness bound of 1")
    loader_workers: Literal["thread", "process"] = Field("thread", description="load workers as threads or processes")
    in_order_compute: bool = Field(True, description="compute takes batches in admission order (staleness < bound "
                                                     "guaranteed); false: whichever is ready first")
    compute_workers: int = Field(1, ge=1, description="compute workers (threads; CPU, Hogwild-style: each steps "
                                                      "its own batches); > 1 needs in_order_compute: false and a "
                                                      "task with concurrent compute (link prediction)")
    record_batches: bool = Field(True, description="write one 'batch' record per batch and a 'queues' record")

    def effective(self):
        """The options actually used: ``sync`` means one worker per stage and a bound of 1."""
        if not self.sync:
            return self
        return self.model_copy(update={"batch_loader_threads": 1, "batch_transfer_threads": 1,
                                       "staleness_bound": 1, "compute_workers": 1, "in_order_compute": True})

    @model_validator(mode="after")
    def _parallel_compute_out_of_order(self):
        if self.compute_workers > 1 and self.in_order_compute:
            raise ValueError("compute_workers: more than one compute worker needs in_order_compute: false")
        return self


class PipelineOptions(StageOptions, DistributedOptions, SystemOptions):
    """``system.options`` of the ``pipelined`` system: :class:`StageOptions`, ``compute_threads``, and
    ``world_size``, ``dist_backend`` and ``dist_timeout_s`` for data-parallel training (:mod:`systems.distributed`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    @model_validator(mode="after")
    def _data_parallel_in_order(self) -> "PipelineOptions":
        if self.world_size > 1 and not self.in_order_compute:
            raise ValueError("in_order_compute: must be true with world_size > 1 (every rank steps the batches in "
                             "the same order)")
        return self


def task_stages(task: Task, options: StageOptions, transfer: Callable[[Batch, int], None],
                load: Stage | None = None) -> list[Stage]:
    """The stages of a task's batches: ``load`` (sample + gather, in ``batch_loader_threads`` threads unless
    ``load`` is given), ``transfer``, ``compute`` (one worker, in admission order unless told otherwise) and,
    for tasks that have one, ``update``."""
    task.set_compute_workers(options.compute_workers)
    if load is None:
        load = Stage("load", lambda batch, worker: load_batch(task, batch), workers=options.batch_loader_threads)
    stages = [
        load,
        Stage("transfer", transfer, workers=options.batch_transfer_threads, queue_size=options.batch_host_queue_size),
        Stage("compute", lambda batch, worker: task.compute(batch), workers=options.compute_workers,
              queue_size=options.batch_device_queue_size, in_order=options.in_order_compute),
    ]
    if task.has_update:
        stages.append(Stage("update", lambda batch, worker: task.update(batch), workers=1,
                            queue_size=options.batch_device_queue_size))
    return stages


def pipeline_extra(trace: PipelineTrace, options: StageOptions, gpu_utilization: float | None) -> dict:
    """The pipeline measures of an epoch record (efficiency, bottleneck, utilization, load split, workers)."""
    busy = trace.busy_s()
    bottleneck, bottleneck_s = trace.bottleneck()
    wall = trace.wall_s
    return {
        "pipeline_efficiency": trace.efficiency(),
        "bottleneck_stage": bottleneck,
        "bottleneck_busy_per_worker_s": bottleneck_s,
        "pipeline_wall_s": wall,
        "compute_utilization": busy["compute"] / wall if wall > 0 else None,
        "gpu_utilization": gpu_utilization,
        "load_sample_s": sum(b.extra.get("sample_s", 0.0) for b in trace.batches),
        "load_gather_s": sum(b.extra.get("gather_s", 0.0) for b in trace.batches),
        "workers": trace.workers,
        "staleness_bound": options.staleness_bound,
        "loader_workers": options.loader_workers,
    }


class PipelinedSystem(InMemorySystem):
    """Mini-batch training with loading, transfer and compute overlapped in a bounded pipeline.

    Runs any registered task (``training.task``); options: :class:`PipelineOptions`.
    """

    label = "pipelined (in memory)"
    """How figures name it."""

    validates_within_epoch = False  # its stages run ahead of the batch that would pause for validation

    options_model = PipelineOptions

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder):
        super().__init__(spec, store, device, recorder)
        self.options = validate_system_options(spec, source="<spec>").effective()
        if self.options.compute_workers > 1 and not getattr(self.task, "concurrent_compute", False):
            raise ConfigError(f"system.options.compute_workers: task {spec.training.task!r} computes one batch at a "
                              f"time (got {self.options.compute_workers})")
        self._streams: list = []
        self._process_loader: _ProcessLoader | None = None

    def own_threads(self) -> int:
        """The loader workers, and the update worker of tasks with an update stage (transfer workers only wait
        on copies)."""
        return self.options.batch_loader_threads + int(self.task.has_update)

    def setup(self) -> None:
        """The in-memory setup, plus CUDA streams for the transfer workers and (optionally) loader processes."""
        super().setup()
        options = self.options
        if self.device.type == "cuda":
            self._streams = [torch.cuda.Stream(self.device) for _ in range(options.batch_transfer_threads)]
        if options.loader_workers == "process":
            self._process_loader = _ProcessLoader(self.task, options.batch_loader_threads,
                                                  options.batch_host_queue_size)

    # ------------------------------------------------------------------ one epoch
    def train_epoch(self, epoch: int, progress: bool = False) -> EpochStats:
        """Run the epoch's batches through the pipeline; record batches, queues and pipeline measures."""
        batches = self.task.plan_epoch(epoch)
        self.task.train()
        bar = _ProgressHook(len(batches), epoch, progress)
        pipeline = Pipeline(self.stages(batches), self.options.staleness_bound,
                            on_admit=self._admit, on_complete=bar)
        try:
            with GpuUtilizationSampler(self.device) as gpu:
                trace = pipeline.run(batches)
        finally:
            bar.close()
        return self._epoch_stats(trace, gpu.mean())

    def stages(self, batches: list[Batch]) -> list[Stage]:
        """The stages of one epoch (:func:`task_stages`), loading in threads or through the loader processes."""
        load = None
        if self._process_loader is not None:
            load = Stage("load", self._process_loader.epoch(batches), workers=1, self_timed=True)
        return task_stages(self.task, self.options, self._transfer, load)

    def _admit(self, batch: Batch) -> None:
        batch.version_read = self.task.optimizer_steps

    def _transfer(self, batch: Batch, worker: int) -> None:
        self.task.transfer(batch, self._streams[worker] if self._streams else None)

    # ------------------------------------------------------------------ records
    def _epoch_stats(self, trace: PipelineTrace, gpu_utilization: float | None) -> EpochStats:
        if self.options.record_batches:
            record_trace(self.recorder, trace)
        return epoch_stats(trace.batches, trace.busy_s(), **pipeline_extra(trace, self.options, gpu_utilization))

    def teardown(self) -> None:
        """Stop the loader processes (if any), then the in-memory teardown."""
        if self._process_loader is not None:
            self._process_loader.close()
            self._process_loader = None
        super().teardown()


def record_trace(recorder: Recorder, trace: PipelineTrace) -> None:
    """One ``batch`` record per batch of ``trace`` (times from its start) and one ``queues`` record."""
    origin = trace.started
    for batch in sorted(trace.batches, key=lambda b: b.index):
        record = batch.record(origin)
        record.update({k: v for k, v in batch.extra.items() if isinstance(v, (int, float, str))})
        recorder.record("batch", **record)
    epoch = trace.batches[0].epoch if trace.batches else None
    recorder.record("queues", epoch=epoch, occupancy={
        name: [[round(t - origin, 6), size] for t, size in samples]
        for name, samples in trace.queue_occupancy.items()
    })


def load_batch(task: Task, batch: Batch, pin: bool | None = None) -> None:
    """The ``load`` stage: the task's ``sample`` then ``gather``, their durations kept in ``batch.extra``."""
    started = time.perf_counter()
    task.sample(batch)
    sampled = time.perf_counter()
    task.gather(batch, pin=pin)
    batch.extra["sample_s"] = sampled - started
    batch.extra["gather_s"] = time.perf_counter() - sampled


# ---------------------------------------------------------------------------------------------- processes
class _LoadDataset(torch.utils.data.Dataset):
    """Loads one batch per key ``(epoch, index, roots)`` in a worker process (stamps its own ``load``)."""

    def __init__(self, task: Task):
        self.task = task

    def __getitem__(self, key: tuple[int, int, torch.Tensor]) -> Batch:
        epoch, index, roots = key
        batch = Batch(epoch=epoch, index=index, roots=roots)
        started = time.perf_counter()
        load_batch(self.task, batch, pin=False)  # no CUDA in a forked worker: the DataLoader pins
        info = torch.utils.data.get_worker_info()
        batch.stamps["load"] = StageStamp(started, time.perf_counter(), f"load-p{info.id if info else 0}")
        return batch


class _EpochKeys(torch.utils.data.Sampler):
    """The keys of the current epoch's batches, in planned order (reset before every epoch)."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, int, torch.Tensor]] = []

    def __iter__(self):
        return iter(self.keys)

    def __len__(self) -> int:
        return len(self.keys)


def _identity(batch: Batch) -> Batch:
    return batch


class _ProcessLoader:
    """Loader worker processes (persistent across epochs), forked after setup.

    The workers share the task's graph, features and labels with the main process through fork's copy-on-write
    pages: nothing is copied, since loaders only read them. (Moving the tensors to shared memory afterwards with
    ``share_memory_()`` would swap their storage under the samplers' cached views.)
    """

    def __init__(self, task: Task, workers: int, queue_size: int):
        self.keys = _EpochKeys()
        self.loader = torch.utils.data.DataLoader(
            _LoadDataset(task), sampler=self.keys, batch_size=None, collate_fn=_identity, num_workers=workers,
            prefetch_factor=max(1, queue_size // workers), persistent_workers=True,
            multiprocessing_context="fork", pin_memory=task.device.type == "cuda",
            # Worker seeds come from this generator, not from the global one that dropout draws from.
            generator=torch.Generator().manual_seed(task.spec.seed),
        )
        self._iterator = None

    def epoch(self, batches: list[Batch]):
        """The ``load`` work of one epoch: take the next loaded batch (in planned order) into ``batch``."""
        self.keys.keys = [(b.epoch, b.index, b.roots) for b in batches]
        self._iterator = iter(self.loader)

        def feed(batch: Batch, worker: int) -> None:
            loaded = next(self._iterator)
            if loaded.index != batch.index:
                raise RuntimeError(f"loader processes returned batch {loaded.index}, expected {batch.index}")
            batch.sample, batch.x, batch.y = loaded.sample, loaded.x, loaded.y
            batch.stamps["load"] = loaded.stamps["load"]
            batch.extra.update(loaded.extra)

        return feed

    def close(self) -> None:
        """Shut the worker processes down now (not whenever the iterator happens to be garbage-collected: a
        traceback that keeps it alive would keep the workers alive too)."""
        iterator = self._iterator or getattr(self.loader, "_iterator", None)
        shutdown = getattr(iterator, "_shutdown_workers", None)  # torch's own clean shutdown of its workers
        if shutdown is not None:
            shutdown()
        self._iterator = None
        self.loader = None


class _ProgressHook:
    """``on_complete`` hook: a tqdm bar over the epoch's batches (a no-op without progress)."""

    def __init__(self, total: int, epoch: int, enabled: bool):
        self._bar = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=f"epoch {epoch}", unit="batch", leave=False)

    def __call__(self, batch: Batch) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


__all__ = ["PipelineOptions", "PipelinedSystem", "StageOptions", "load_batch", "pipeline_extra", "record_trace",
           "task_stages"]
