"""Data-parallel training with ``torch.distributed``: ``world_size`` ranks, one model replica each.

Any system built on the Task contract (``in_memory``, ``pipelined``) runs data-parallel when its
``system.options.world_size`` is above 1 (options :class:`DistributedOptions`):

- **Launch** (the harness's part, :mod:`suite.ranks`). ``gnnsuite run SPEC`` (:func:`suite.runner.run_spec`) spawns
  the ranks itself (:func:`suite.ranks.launch`: one
  process per rank, a TCP rendezvous on 127.0.0.1) and waits for them; under ``torchrun`` (``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT`` in the environment) each process is one rank
  already and joins the group from the environment (``WORLD_SIZE`` must equal the spec's ``world_size``).
  Backend: ``gloo`` on the CPU, ``nccl`` on CUDA (``dist_backend: auto``); rank ``r`` uses ``cuda:<local rank>``.
- **Data.** Every rank plans the same epoch (the task's :meth:`~systems.tasks.task.Task.plan_epoch`, a function of
  ``(seed, epoch)``) and takes its share of every global batch (:meth:`~systems.tasks.task.Task.shard`: a
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

import os
import socket
import time
from typing import TYPE_CHECKING, Any

import torch

from suite.errors import ConfigError
from suite.ranks import (DistributedOptions, NullRecorder, RankContext, RankFailure, collective, current,
                         init_rank, is_main_rank, is_rank_process, launch, options_of, shutdown_rank, world_size_of)

if TYPE_CHECKING:  # pragma: no cover
    from systems.system import EpochStats
    from systems.batch import Batch
    from systems.tasks.task import Task

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
        collective("all_reduce of the gradients", dist.all_reduce, flat)
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
        collective("all_gather of the embedding rows' counts", dist.all_gather, counts,
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
        collective("all_gather of the embedding rows' ids", dist.all_gather, ids, padded_ids, group=self.group)
        collective("all_gather of the embedding gradients", dist.all_gather, rows, padded_rows, group=self.group)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        self.bytes += world * width * (8 + 4 * self.dim)
        return (torch.cat([i[:n] for i, n in zip(ids, sizes)]), torch.cat([r[:n] for r, n in zip(rows, sizes)]))


def broadcast_parameters(module: torch.nn.Module) -> None:
    """Copy rank 0's parameters and buffers to every rank (the replicas start equal whatever their seeds did)."""
    import torch.distributed as dist

    with torch.no_grad():
        for tensor in list(module.parameters()) + list(module.buffers()):
            collective("broadcast of the parameters", dist.broadcast, tensor.data, 0)


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
                collective("broadcast of the embedding table", dist.broadcast, embeddings.weight, 0)
                collective("broadcast of the embedding state", dist.broadcast, embeddings.state, 0)
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
        validates_within_epoch = False  # every rank would have to stop at the same batch

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

        def run(self, progress: bool = False):
            outcome = super().run(progress=progress)
            outcome.summary_extra["data_parallel"] = summarize_ranks(self.context, outcome)
            return outcome

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

    from systems.system import EpochStats

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
    collective("gathering the epoch's numbers", dist.all_gather_object, ranks, mine)
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


__all__ = [
    "DataParallelTask", "EmbeddingExchange", "GradientAllReduce", "broadcast_parameters", "data_parallel",
    "gather_epoch", "summarize_ranks",
    # the harness's part, re-exported for callers of the earlier single module
    "DistributedOptions", "NullRecorder", "RankContext", "RankFailure", "current", "init_rank", "is_main_rank",
    "is_rank_process", "launch", "options_of", "shutdown_rank", "world_size_of",
]
