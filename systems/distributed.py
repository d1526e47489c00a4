"""Data-parallel training with ``torch.distributed``: ``world_size`` ranks, one model replica each.

Any system built on the Task contract (``in_memory``, ``pipelined``) runs data-parallel when its
``system.options.world_size`` is above 1 (options :class:`DistributedOptions`):

- **Launch.** ``gnnsuite run SPEC`` (:func:`suite.runner.run_spec`) spawns the ranks itself (:func:`launch`: one
  process per rank, a TCP rendezvous on 127.0.0.1) and waits for them; under ``torchrun`` (``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT`` in the environment) each process is one rank
  already and joins the group from the environment (``WORLD_SIZE`` must equal the spec's ``world_size``).
  Backend: ``gloo`` on the CPU, ``nccl`` on CUDA (``dist_backend: auto``); rank ``r`` uses ``cuda:<local rank>``.
- **Data.** Every rank plans the same epoch (the task's :meth:`~systems.tasks.base.Task.plan_epoch`, a function of
  ``(seed, epoch)``) and takes its share of every global batch (:meth:`~systems.tasks.base.Task.shard`: a
  contiguous ``1/world_size`` of the roots), so ``training.batch_size`` stays the *total* batch size and the
  number of optimizer steps per epoch is the single-rank one. Each rank runs its own system, i.e. its own
  sampling pipeline.
- **Gradients.** Before every optimizer step (an optimizer step pre-hook, :class:`GradientAllReduce`) the
  gradients of all parameters are flattened into one buffer, scaled by the rank's share of the global batch
  (``n_rank / n_batch``) and summed over the ranks with one ``all_reduce``. The result is the gradient of the
  global batch's mean loss, for any split of the batch (uneven last batches too): with dropout off and
  full-neighbourhood sampling, 2 ranks compute the 1-rank run's steps up to float rounding. The all-reduce is timed
  (``allreduce_s``; it is part of the ``compute`` stage's busy time).

  Why not ``torch.nn.parallel.DistributedDataParallel``: DDP must own the forward call, but tasks call their
  model's sub-modules directly (``model.encoder``, ``model.decoder``), and DDP averages gradients with equal
  weights, which is wrong for uneven shares. The price is that communication does not overlap the backward
  pass (DDP's bucketing), which matters little for GNN models of a few MB.
- **Records.** Rank 0 writes the run folder (``config.yaml``, ``records.jsonl``, ``summary.json``); the other ranks
  record nothing themselves. After every epoch each rank's numbers are gathered into rank 0's epoch record:
  ``ranks: [{rank, pid, host, examples, epoch_time_s, stage_busy_s, allreduce_s, allreduce_calls,
  allreduce_bytes, embedding_exchange_s, embedding_exchange_calls, embedding_exchange_bytes}, ...]``; the epoch's ``examples``, ``sampled_edges`` and ``loss`` are those of the global
  batches (sums, and the example-weighted mean loss); ``stage_busy_s`` stays rank 0's. Every rank evaluates the
  whole split with the same (synchronized) model, so they agree; rank 0's result is recorded.
- **Failures.** A rank that raises or dies fails the run: the launcher notices the first rank to exit non-zero,
  stops the others and records the run as ``failed`` with ``rank R of W died (...)``; a rank waiting in a
  collective for a peer that is gone fails after at most ``dist_timeout_s``. Ranks die with their launcher
  (``PR_SET_PDEATHSIG``), so killing the driver leaves no orphans and no ``completed`` summary for the cut run.

- **Link prediction with a learnable embedding table** (``model.learnable_embeddings``; the task's ``update``
  stage). Chosen: the table is *replicated* on every rank and its *sparse gradients are all-reduced*
  (:class:`EmbeddingExchange`), rather than partitioned by rank. Every rank samples the *global* batch (so its
  chunked negatives are the ones a single rank draws) and keeps whole chunks of it, positives with their negatives
  (the task's ``shard_sampled``); after the step, each rank's share-weighted gradient rows are gathered by all
  ranks (one ``all_gather`` of counts, one of ids, one of rows, on a gloo group of their own) and every rank
  applies the same sparse Adagrad update to the union (duplicate rows summed). Why: the replicas then stay
  identical and the run equals the 1-rank run up to float rounding (the order in which a row's gradient
  contributions are summed), evaluation can rank against every entity on any rank, and each batch costs one
  exchange of the rows it touched (``rows x (dim + 1)`` values per rank), where partitioning by rank would fetch
  every remote row before the step and send its gradient back after it (two all-to-alls per batch, and a rank
  reading rows its owner has not updated yet). The price is memory: every rank holds the whole table and its
  Adagrad state (``2 x num_nodes x dim`` floats); a table that does not fit one process belongs on the disk
  system. Encoders with neighbours sample the share's nodes again after the cut (the global sample is dropped), so
  runs with sampled (not full) neighbourhoods draw other neighbours than a single rank does. Per rank, each epoch
  record holds ``embedding_exchange_s``, ``_calls`` and ``_bytes``.

Not supported (a one-line error): learnable state outside the model other than an embedding table, sparse
gradients of model parameters, and ``in_order_compute: false`` (ranks must step their batches in the same order).
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from suite.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from suite.config import RunSpec
    from systems.base import EpochStats
    from systems.batch import Batch
    from systems.tasks.base import Task

# Environment variables of a rank (the ones torchrun sets).
_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class DistributedOptions(BaseModel):
    """The data-parallel part of ``system.options`` (shared by ``in_memory`` and ``pipelined``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    world_size: int = Field(1, ge=1, description="data-parallel ranks (1: no torch.distributed)")
    dist_backend: Literal["auto", "gloo", "nccl"] = Field("auto", description="auto: nccl on CUDA, else gloo")
    dist_timeout_s: float = Field(300.0, gt=0, description="seconds a collective waits for the other ranks")


class RankFailure(RuntimeError):
    """A rank of a data-parallel run failed or died (the message names the rank and what happened)."""


@dataclass(frozen=True)
class RankContext:
    """Who this process is in a data-parallel run.

    Attributes:
        rank: global rank (0 records the run).
        world_size: number of ranks.
        local_rank: rank on this machine (its CUDA device index).
        backend: ``gloo`` or ``nccl``.
    """

    rank: int
    world_size: int
    local_rank: int
    backend: str


_CONTEXT: RankContext | None = None


# ---------------------------------------------------------------------------------------------- options
def options_of(spec: "RunSpec") -> DistributedOptions:
    """The spec's validated data-parallel options (defaults for systems without them)."""
    from suite.config import validate_system_options

    options = validate_system_options(spec)
    if isinstance(options, DistributedOptions):
        return options
    return DistributedOptions()


def world_size_of(spec: "RunSpec") -> int:
    """``system.options.world_size`` of the spec (1 for systems without data-parallel options)."""
    return options_of(spec).world_size


def current() -> RankContext | None:
    """This process's rank context, once the process group is up (None outside data-parallel runs)."""
    return _CONTEXT


def is_rank_process() -> bool:
    """Whether this process is a rank already (spawned by :func:`launch`, or by ``torchrun``)."""
    return _CONTEXT is not None or ("RANK" in os.environ and "WORLD_SIZE" in os.environ)


def is_main_rank() -> bool:
    """Rank 0, or no data-parallel run at all."""
    return _CONTEXT is None or _CONTEXT.rank == 0


def _backend(options: DistributedOptions, device_type: str) -> str:
    if options.dist_backend != "auto":
        return options.dist_backend
    return "nccl" if device_type == "cuda" else "gloo"


# ---------------------------------------------------------------------------------------------- process group
def init_rank(spec: "RunSpec", device: torch.device) -> tuple[RankContext, torch.device]:
    """Join the process group from the environment (``RANK``, ``WORLD_SIZE``, ...); return the context and this
    rank's device (``cuda:<local rank>`` on CUDA)."""
    global _CONTEXT
    import torch.distributed as dist

    options = options_of(spec)
    world = int(os.environ["WORLD_SIZE"])
    if world != options.world_size:
        raise ConfigError(f"system.options.world_size: the spec says {options.world_size} but the launcher "
                          f"started {world} ranks (WORLD_SIZE)")
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    backend = _backend(options, device.type)
    if not dist.is_initialized():
        dist.init_process_group(backend, rank=rank, world_size=world,
                                timeout=_dt.timedelta(seconds=options.dist_timeout_s),
                                **({"device_id": device} if backend == "nccl" else {}))
    _CONTEXT = RankContext(rank=rank, world_size=world, local_rank=local_rank, backend=backend)
    return _CONTEXT, device


def shutdown_rank() -> None:
    """Leave the process group (idempotent)."""
    global _CONTEXT
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    _CONTEXT = None


def _collective(what: str, fn, *args, **kwargs):
    """Run a collective; a peer that died or timed out becomes a :class:`RankFailure` naming this rank."""
    try:
        return fn(*args, **kwargs)
    except RuntimeError as err:  # DistBackendError, gloo/nccl errors, timeouts
        rank = _CONTEXT.rank if _CONTEXT else "?"
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RankFailure(f"rank {rank}: {what} failed: another rank died or timed out ({first})") from err


# ---------------------------------------------------------------------------------------------- gradients
class GradientAllReduce:
    """Sums the share-weighted gradients over the ranks before every step of ``optimizer`` (a step pre-hook).

    Set :attr:`weight` (this rank's examples / the global batch's) before the batch's backward/step.

    Attributes:
        weight: the current batch's share of this rank.
        seconds: time spent in ``all_reduce`` (including the device synchronization on CUDA) since :meth:`reset`.
        calls: all-reduces since :meth:`reset`.
        bytes: bytes all-reduced since :meth:`reset`.
    """

    def __init__(self, optimizer: torch.optim.Optimizer | None, device: torch.device):
        self.optimizer = optimizer
        self.device = device
        self.weight = 1.0
        self.seconds = 0.0
        self.calls = 0
        self.bytes = 0
        # no optimizer (a model without dense parameters, e.g. learnable embeddings and a dot decoder): only weights
        self._handle = optimizer.register_step_pre_hook(self._hook) if optimizer is not None else None

    def parameters(self) -> list[torch.Tensor]:
        """The optimizer's parameters, in a fixed order (the same on every rank)."""
        if self.optimizer is None:
            return []
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def reset(self) -> None:
        """Zero the counters (before an epoch)."""
        self.seconds, self.calls, self.bytes = 0.0, 0, 0

    def _hook(self, optimizer, args, kwargs) -> None:
        import torch.distributed as dist

        params = self.parameters()
        grads = []
        for p in params:
            if p.grad is not None and p.grad.is_sparse:
                raise ConfigError("system.options.world_size: data-parallel training does not support sparse "
                                  "gradients")
            grads.append(p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), dtype=p.dtype,
                                                                                   device=p.device))
        present = torch.tensor([p.grad is not None for p in params], dtype=grads[0].dtype, device=grads[0].device)
        flat = torch.cat(grads + [present])
        flat[: -len(params)].mul_(self.weight)
        started = time.perf_counter()
        _collective("all_reduce of the gradients", dist.all_reduce, flat)
        if flat.device.type == "cuda":
            torch.cuda.synchronize(flat.device)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        self.bytes += flat.numel() * flat.element_size()
        offset = 0
        for p, seen in zip(params, flat[-len(params):].tolist()):
            size = p.numel()
            if seen > 0:
                p.grad = flat[offset: offset + size].view_as(p).clone()
            else:
                p.grad = None  # no rank produced a gradient: leave the parameter alone, as one rank would
            offset += size

    def remove(self) -> None:
        """Unregister the hook."""
        if self._handle is not None:
            self._handle.remove()


class EmbeddingExchange:
    """Sparse-gradient all-reduce of a replicated embedding table (:class:`~systems.models.embeddings.EmbeddingTable`).

    Every rank holds the whole table and its Adagrad state. After a batch's step, each rank contributes the rows
    its share touched and their share-weighted gradients; one ``all_gather`` of the counts and two of the padded
    ids and rows give every rank the union, and every rank applies the *same* sparse Adagrad update (duplicate rows
    summed), so the replicas stay identical and equal the 1-rank table up to float rounding. Runs on a process
    group of its own, so that it never interleaves with the dense all-reduce of another stage's thread (the
    pipelined system's ``update`` stage runs beside its ``compute`` stage).

    Attributes:
        seconds, calls, bytes: time in the collectives, exchanges, and bytes received since :meth:`reset`.
    """

    def __init__(self, dim: int, group: Any):
        self.dim = dim
        self.group = group
        self.seconds = 0.0
        self.calls = 0
        self.bytes = 0

    def reset(self) -> None:
        """Zero the counters (before an epoch)."""
        self.seconds, self.calls, self.bytes = 0.0, 0, 0

    def exchange(self, nodes: torch.Tensor, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """All ranks' ``(nodes, grad)`` rows, concatenated in rank order (each rank's own, unreduced)."""
        import torch.distributed as dist

        started = time.perf_counter()
        world = dist.get_world_size(self.group)
        nodes = nodes.to("cpu", torch.int64)
        grad = grad.to("cpu", torch.float32).reshape(-1, self.dim)
        counts = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        _collective("all_gather of the embedding rows' counts", dist.all_gather, counts,
                    torch.tensor([len(nodes)], dtype=torch.int64), group=self.group)
        sizes = [int(c) for c in counts]
        width = max(sizes)
        if width == 0:
            return nodes, grad
        ids = [torch.empty(width, dtype=torch.int64) for _ in range(world)]
        rows = [torch.empty(width, self.dim) for _ in range(world)]
        padded_ids = torch.zeros(width, dtype=torch.int64)
        padded_ids[: len(nodes)] = nodes
        padded_rows = torch.zeros(width, self.dim)
        padded_rows[: len(nodes)] = grad
        _collective("all_gather of the embedding rows' ids", dist.all_gather, ids, padded_ids, group=self.group)
        _collective("all_gather of the embedding gradients", dist.all_gather, rows, padded_rows, group=self.group)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        self.bytes += world * width * (8 + 4 * self.dim)
        return (torch.cat([i[:n] for i, n in zip(ids, sizes)]), torch.cat([r[:n] for r, n in zip(rows, sizes)]))


def broadcast_parameters(module: torch.nn.Module) -> None:
    """Copy rank 0's parameters and buffers to every rank (the replicas start equal whatever their seeds did)."""
    import torch.distributed as dist

    with torch.no_grad():
        for tensor in list(module.parameters()) + list(module.buffers()):
            _collective("broadcast of the parameters", dist.broadcast, tensor.data, 0)


# ---------------------------------------------------------------------------------------------- the task
class DataParallelTask:
    """A task as one rank sees it: its share of every batch, gradients summed over the ranks.

    Delegates everything to the wrapped task (``model``, ``optimizer``, ``evaluate``, ...) except
    :meth:`plan_epoch` (the rank's shares), the stage methods for empty shares (a rank whose share of a small
    last batch is empty still joins the step, with a zero gradient) and :meth:`compute` (sets the share's weight
    before the step).

    Args:
        task: the task of this rank's system.
        context: this rank.
    """

    _OWN = ("inner", "context", "sync", "exchange")

    def __init__(self, task: "Task", context: RankContext):
        self.__dict__["inner"] = task
        self.__dict__["context"] = context
        self.__dict__["sync"] = None
        self.__dict__["exchange"] = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            self.__dict__[name] = value
        else:
            setattr(self.inner, name, value)

    @property
    def _samples_globally(self) -> bool:
        """Whether the task cuts its batches after sampling them whole (``shard_sampled``: link prediction, whose
        chunked negatives are drawn for the global batch)."""
        return hasattr(self.inner, "shard_sampled")

    def setup(self) -> None:
        """The task's setup, then rank 0's parameters (and embedding table) on every rank, the gradient all-reduce
        hook, and, for a learnable embedding table, its sparse-gradient exchange."""
        import torch.distributed as dist

        from systems.models.embeddings import EmbeddingTable

        inner = self.inner
        inner.setup()
        embeddings = getattr(inner, "embeddings", None) if inner.has_update else None
        if inner.has_update and not isinstance(embeddings, EmbeddingTable):
            raise ConfigError(f"system.options.world_size: data-parallel training supports learnable state outside "
                              f"the model only as an embedding table ({inner.spec.training.task} keeps another kind)")
        optimizer = getattr(inner, "optimizer", None)
        if optimizer is None and embeddings is None:
            raise ConfigError(f"system.options.world_size: the {inner.spec.training.task} task has no optimizer of "
                              f"model parameters to synchronize")
        model = getattr(inner, "model", None)
        if model is not None:
            broadcast_parameters(model)
        self.sync = GradientAllReduce(optimizer, inner.device)
        if embeddings is not None:
            with torch.no_grad():
                _collective("broadcast of the embedding table", dist.broadcast, embeddings.weight, 0)
                _collective("broadcast of the embedding state", dist.broadcast, embeddings.state, 0)
            self.exchange = EmbeddingExchange(embeddings.weight.shape[1], dist.new_group(backend="gloo"))

    def plan_epoch(self, epoch: int) -> list["Batch"]:
        """The epoch's global batches (the same on every rank), each cut to this rank's share (after sampling, for
        tasks that sample the global batch: see :meth:`sample`)."""
        rank, world = self.context.rank, self.context.world_size
        if self._samples_globally:
            return self.inner.plan_epoch(epoch)
        return [self.inner.shard(batch, rank, world) for batch in self.inner.plan_epoch(epoch)]

    def sample(self, batch: "Batch") -> None:
        if self._samples_globally:  # the global batch's sample (its negatives), then this rank's share of it
            self.inner.sample(batch)
            self.inner.shard_sampled(batch, self.context.rank, self.context.world_size)
        elif batch.num_examples:
            self.inner.sample(batch)

    def gather(self, batch: "Batch", pin: bool | None = None) -> None:
        if batch.num_examples:
            self.inner.gather(batch, pin=pin)

    def transfer(self, batch: "Batch", stream=None) -> None:
        if batch.num_examples:
            self.inner.transfer(batch, stream)

    def compute(self, batch: "Batch") -> None:
        """The task's step on this rank's share, its gradient weighted by the share (all-reduced in the step)."""
        total = batch.extra.get("global_examples", batch.num_examples)
        self.sync.weight = batch.num_examples / total if total else 0.0
        batch.extra["share_weight"] = self.sync.weight
        if batch.num_examples:
            self.inner.compute(batch)
            return
        inner = self.inner  # an empty share: no forward, a zero gradient, the same step as the other ranks
        batch.version_applied = inner.optimizer_steps
        if inner.optimizer is not None:
            inner.optimizer.zero_grad(set_to_none=True)
            inner.optimizer.step()
        inner.optimizer_steps += 1
        batch.loss = 0.0

    def update(self, batch: "Batch") -> None:
        """Learnable embeddings: the share-weighted gradient rows of every rank (:class:`EmbeddingExchange`),
        applied by the task's own update on every rank alike. An empty share contributes no rows but joins."""
        extra = batch.extra
        grad = extra.pop("grad", None)
        nodes = extra.pop("input_nodes", None)
        if grad is None:
            nodes, grad = torch.zeros(0, dtype=torch.int64), torch.zeros(0, self.exchange.dim)
        grad = grad.cpu().mul_(extra.get("share_weight", 1.0))
        extra["input_nodes"], extra["grad"] = self.exchange.exchange(nodes, grad)
        extra["input_nodes_unique"] = False  # every rank's rows: the same node may come from several ranks
        if len(extra["input_nodes"]):
            self.inner.update(batch)
        else:
            extra.pop("input_nodes"), extra.pop("grad")


# ---------------------------------------------------------------------------------------------- the system
_DATA_PARALLEL_CLASSES: dict[type, type] = {}


def data_parallel(system_class: type) -> type:
    """The data-parallel variant of a Task-based system class (``in_memory``, ``pipelined``, ...).

    Its instances wrap their task in :class:`DataParallelTask` and gather every rank's epoch numbers into the epoch
    record (see the module docstring).
    """
    if system_class in _DATA_PARALLEL_CLASSES:
        return _DATA_PARALLEL_CLASSES[system_class]

    class DataParallelSystem(system_class):  # type: ignore[misc, valid-type]
        def __init__(self, spec, store, device, recorder):
            super().__init__(spec, store, device, recorder)
            context = current()
            if context is None:
                raise RuntimeError("data-parallel system built outside a rank (no process group)")
            if not hasattr(self, "task"):
                raise ConfigError(f"system.options.world_size: system {spec.system.name!r} does not run on the "
                                  f"Task contract; data-parallel training needs one that does")
            if getattr(getattr(self, "options", None), "in_order_compute", True) is False:
                raise ConfigError("system.options.in_order_compute: must be true with world_size > 1 (every rank "
                                  "must step the batches in the same order)")
            self.task = DataParallelTask(self.task, context)
            self.context = context

        def train_epoch(self, epoch: int, progress: bool = False) -> "EpochStats":
            self.task.sync.reset()
            if self.task.exchange is not None:
                self.task.exchange.reset()
            started = time.perf_counter()
            stats = super().train_epoch(epoch, progress=progress and self.context.rank == 0)
            return gather_epoch(self.context, stats, time.perf_counter() - started, self.task.sync,
                                self.task.exchange)

    DataParallelSystem.__name__ = DataParallelSystem.__qualname__ = f"DataParallel{system_class.__name__}"
    _DATA_PARALLEL_CLASSES[system_class] = DataParallelSystem
    return DataParallelSystem


def gather_epoch(context: RankContext, stats: "EpochStats", epoch_time_s: float,
                 sync: GradientAllReduce, exchange: EmbeddingExchange | None = None) -> "EpochStats":
    """This rank's epoch stats, with every rank's numbers gathered (``extra["ranks"]``) and the epoch's examples,
    sampled edges and loss made global."""
    import torch.distributed as dist

    from systems.base import EpochStats

    mine = {
        "rank": context.rank, "pid": os.getpid(), "host": socket.gethostname(), "examples": stats.examples,
        "sampled_edges": stats.sampled_edges, "loss_sum": stats.loss * stats.examples,
        "epoch_time_s": epoch_time_s, "stage_busy_s": dict(stats.stage_busy_s), "allreduce_s": sync.seconds,
        "allreduce_calls": sync.calls, "allreduce_bytes": sync.bytes,
        "embedding_exchange_s": exchange.seconds if exchange else 0.0,
        "embedding_exchange_calls": exchange.calls if exchange else 0,
        "embedding_exchange_bytes": exchange.bytes if exchange else 0,
    }
    ranks: list[Any] = [None] * context.world_size
    _collective("gathering the epoch's numbers", dist.all_gather_object, ranks, mine)
    examples = sum(r["examples"] for r in ranks)
    loss = sum(r.pop("loss_sum") for r in ranks) / max(examples, 1)
    extra = {**stats.extra, "world_size": context.world_size, "ranks": ranks, "allreduce_s": sync.seconds,
             "allreduce_s_max": max(r["allreduce_s"] for r in ranks)}
    return EpochStats(examples=examples, sampled_edges=sum(r["sampled_edges"] for r in ranks), loss=loss,
                      stage_busy_s=stats.stage_busy_s, staleness=stats.staleness, extra=extra)


_RANK_COUNTERS = ("allreduce_s", "allreduce_calls", "allreduce_bytes", "embedding_exchange_s",
                  "embedding_exchange_calls", "embedding_exchange_bytes")


def summarize_ranks(context: RankContext, outcome: Any) -> dict[str, Any]:
    """The ``data_parallel`` part of ``summary.json``: world size, backend, and per rank the summed stage busy
    time, all-reduce time, calls and bytes over the run's epochs."""
    totals: dict[int, dict[str, Any]] = {}
    for stats in outcome.epochs:
        for entry in stats.extra.get("ranks", []):
            total = totals.setdefault(entry["rank"], {"rank": entry["rank"], "examples": 0, "stage_busy_s": {},
                                                       **dict.fromkeys(_RANK_COUNTERS, 0)})
            total["examples"] += entry["examples"]
            for stage, seconds in entry["stage_busy_s"].items():
                total["stage_busy_s"][stage] = total["stage_busy_s"].get(stage, 0.0) + seconds
            for key in _RANK_COUNTERS:
                total[key] += entry.get(key, 0)
    ranks = [totals[rank] for rank in sorted(totals)]
    return {"world_size": context.world_size, "backend": context.backend, "ranks": ranks,
            "allreduce_s_max": max((r["allreduce_s"] for r in ranks), default=0.0)}


# ---------------------------------------------------------------------------------------------- launching
class NullRecorder:
    """The recorder of ranks other than 0: records nothing."""

    def __init__(self, out: str | os.PathLike, spec: "RunSpec"):
        self.spec = spec
        self.run_id = spec.run_id
        self.run_dir = Path(out) / spec.run_id

    def open(self) -> None:
        """Nothing to open."""

    def record(self, kind: str, **fields: Any) -> None:
        """Drop the record."""

    def finish(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The summary, not written."""
        return {"run_id": self.run_id, **summary, "status": "completed"}

    def fail(self, error: BaseException, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        """The failure, not written."""
        return {"run_id": self.run_id, **(summary or {}), "status": "failed", "error": f"{type(error).__name__}: "
                                                                                        f"{error}"}

    def diverge(self, error: BaseException, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        """The divergence, not written."""
        return {**self.fail(error, summary), "status": "diverged"}

    def close(self) -> None:
        """Nothing to close."""


def _pythonpath() -> str:
    """``PYTHONPATH`` for the ranks: this checkout first (the suite need not be installed), then the caller's."""
    root = str(Path(__file__).resolve().parents[1])
    return os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (a rank must not outlive its launcher)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: ranks notice through the collectives' timeout instead
        pass


def _rank_main(payload_path: str) -> int:
    """Entry point of a rank started by :func:`launch` (``python -m systems.distributed PAYLOAD``): join the group
    through the environment, run the spec, write the outcome beside the payload; the exit status says how it went."""
    import pickle

    _die_with_parent()
    with open(payload_path, "rb") as file:
        job = pickle.load(file)
    rank, world = job["rank"], job["world"]
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(job["port"]))
    torch.set_num_threads(job["threads"])
    try:
        from suite.runner import run_spec

        summary = run_spec(job["spec"], job["out"], overwrite=job["overwrite"], progress=job["progress"] and rank == 0,
                           placement=job.get("placement"))
        outcome: tuple = ("ok", summary if rank == 0 else None)
    except BaseException as err:  # noqa: BLE001  (reported to the launcher, which fails the run)
        outcome = ("error", f"{type(err).__name__}: {err}", traceback.format_exc())
    from suite.io import atomic_write_bytes

    atomic_write_bytes(Path(job["result"]), pickle.dumps(outcome))
    if outcome[0] != "ok":
        sys.stderr.write(outcome[2])
        sys.stderr.flush()
        os._exit(1)  # a failed rank skips the exit handlers: a broken process group may hang in them
    return 0


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def launch(spec: "RunSpec", out: str | os.PathLike, *, overwrite: bool = False, progress: bool = False,
           grace_s: float = 5.0, placement: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run a data-parallel spec on ``world_size`` spawned processes on this machine; return rank 0's summary.

    The dataset is opened (generated or prepared if needed) here first, so the ranks find it cached. When a rank
    fails or dies, the others get ``grace_s`` to notice and exit, then are killed; the run is recorded as
    ``failed`` with ``rank R of W died (...)`` and :class:`RankFailure` is raised.
    """
    import pickle
    import shutil
    import subprocess
    import tempfile

    from suite.datasets import open_dataset
    from suite.runner import resolve_device

    options = options_of(spec)
    world = options.world_size
    device = resolve_device(spec.system.device)
    if device.type == "cuda" and torch.cuda.device_count() < world:
        raise ConfigError(f"system.options.world_size: {world} ranks need {world} CUDA devices, "
                          f"{torch.cuda.device_count()} available")
    open_dataset(spec.dataset, progress=progress)
    threads = max(1, torch.get_num_threads() // world)
    port = _free_port()
    scratch = Path(tempfile.mkdtemp(prefix="gnnsuite-ranks-"))
    processes: list[subprocess.Popen] = []
    messages: dict[int, tuple] = {}
    first_failure: int | None = None
    try:
        for rank in range(world):
            payload = scratch / f"rank{rank}.pkl"
            payload.write_bytes(pickle.dumps({
                "rank": rank, "world": world, "port": port, "threads": threads, "spec": spec, "out": str(out),
                "overwrite": overwrite, "progress": progress, "result": str(scratch / f"rank{rank}.result"),
                "placement": dict(placement) if placement else None,
            }))
            processes.append(subprocess.Popen([sys.executable, "-m", "systems.distributed", str(payload)],
                                              cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": _pythonpath()}))
        failed_at = 0.0
        while True:
            codes = [process.poll() for process in processes]
            if first_failure is None:
                first_failure = next((rank for rank, code in enumerate(codes) if code not in (None, 0)), None)
                failed_at = time.monotonic()
            if all(code is not None for code in codes):
                break
            if first_failure is not None and time.monotonic() - failed_at > grace_s:
                for process in processes:
                    if process.poll() is None:
                        process.kill()
            time.sleep(0.05)
        for rank in range(world):
            result = scratch / f"rank{rank}.result"
            if result.exists():
                messages[rank] = pickle.loads(result.read_bytes())
    except BaseException:
        for process in processes:
            if process.poll() is None:
                process.kill()
        raise
    finally:
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(scratch, ignore_errors=True)

    codes = [process.returncode for process in processes]
    if first_failure is None and all(code == 0 for code in codes) and messages.get(0, ("",))[0] == "ok":
        return messages[0][1]
    error, notes = _failure(world, codes, messages, first_failure)
    record_failure(spec, out, error, notes)
    raise error


def _failure(world: int, codes: list[int | None], messages: dict[int, tuple],
             first_failure: int | None) -> tuple[RankFailure, list[str]]:
    """The run's error: the rank that caused it (one that died without a word, else one whose own error was not
    a lost peer, else the first to exit), and the other ranks' errors as notes."""
    def priority(rank: int) -> tuple[int, int]:
        message = messages.get(rank)
        if codes[rank] in (None, 0) and message and message[0] == "ok":
            return (9, rank)
        if not message or message[0] != "error":
            return (0, rank)  # died: killed, or exited without reporting
        return (2 if message[1].startswith("RankFailure") else 1, rank)

    candidates = sorted(range(world), key=priority)
    culprit = candidates[0] if priority(candidates[0])[0] < 9 else (first_failure or 0)
    message = messages.get(culprit)
    if message and message[0] == "error":
        error = RankFailure(f"rank {culprit} of {world} failed: {message[1]}")
    else:
        error = RankFailure(f"rank {culprit} of {world} died ({_exit_reason(codes[culprit])})")
    notes = [f"rank {r}: {messages[r][1]}" for r in sorted(messages) if r != culprit and messages[r][0] == "error"]
    return error, notes


def record_failure(spec: "RunSpec", out: str | os.PathLike, error: BaseException, notes: list[str]) -> None:
    """Write the run's ``failed`` summary (keeping what rank 0 recorded, records included)."""
    from suite.io import atomic_write_json
    from suite.recorder import FAILED, SUMMARY_FILE, Recorder, read_summary

    run_dir = Path(out) / spec.run_id
    previous = read_summary(run_dir) if run_dir.exists() else None
    if not run_dir.exists():
        Recorder(out, spec).fail(error)
        previous = read_summary(run_dir)
    summary = {**(previous or {"run_id": spec.run_id}), "status": FAILED, "error": f"RankFailure: {error}"}
    if notes:
        summary["rank_errors"] = notes
    atomic_write_json(run_dir / SUMMARY_FILE, summary)


__all__ = [
    "DataParallelTask", "DistributedOptions", "EmbeddingExchange", "GradientAllReduce", "NullRecorder",
    "RankContext", "RankFailure",
    "current", "data_parallel", "gather_epoch", "init_rank", "is_main_rank", "is_rank_process", "launch",
    "options_of", "shutdown_rank", "summarize_ranks", "world_size_of",
]


if __name__ == "__main__":  # a rank started by launch(); run in the imported module, whose globals the suite uses
    from systems.distributed import _rank_main as _main

    sys.exit(_main(sys.argv[1]))
