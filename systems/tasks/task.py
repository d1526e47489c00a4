"""The Task contract: the per-batch work of a training task, split into the suite's stages.

A system builds the registered task of ``training.task`` with the run's spec, store and device, calls
:meth:`Task.setup` once, then per epoch :meth:`Task.plan_epoch` and, per batch, the stage methods in order:
``sample`` and ``gather`` (together the pipeline's ``load``; CPU), ``transfer`` (to the device), ``compute``
(forward, loss, backward, optimizer step) and, for tasks with learnable state outside the model
(``has_update``), ``update`` (write it back). Every method works on the one message type
:class:`~systems.batch.Batch`. The stage methods for different batches may run concurrently in different threads,
except ``compute`` (one at a time, unless the task sets ``concurrent_compute``) and ``update`` (one at a time);
``sample`` and ``gather`` read only state that training does not change, or state versioned by
``optimizer_steps``.

What systems call, and nothing else (no system sets a task's attributes or calls its private methods):

- every system: ``setup``, ``plan_epoch``, the stage methods, ``train``, ``evaluate``, ``teardown``,
  ``state_dict`` / ``load_state_dict`` (checkpoints), ``shard`` (data-parallel);
- a system that runs ``compute`` in several workers: :meth:`Task.set_compute_workers`;
- a system that holds the data elsewhere (the disk system) skips ``setup`` and *binds* what it holds instead:
  ``build_model``, then per buffer state ``bind_state(view)`` and ``release_state()``, with ``predict`` (node
  classification) or ``bind_embeddings`` / ``bind_evaluation_graph`` (link prediction); see
  :class:`~systems.tasks.node_classification.NodeView` and :class:`~systems.tasks.link_prediction.EdgeView`.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod

import torch

from suite.config import RunSpec
from suite.errors import ConfigError, DivergedError
from suite.data import GraphStore
from systems.batch import Batch


def non_finite_name(value: float) -> str:
    """``"nan"``, ``"inf"`` or ``"-inf"``."""
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def diverged(loss: float, epoch: int, batch: int | None = None) -> DivergedError:
    """The error that stops a run whose training loss became ``loss`` (non-finite) at ``epoch`` (and ``batch``)."""
    where = f"epoch {epoch}" + (f", batch {batch}" if batch is not None else "")
    name = non_finite_name(loss)
    return DivergedError(f"training diverged: the loss became {name} at {where} (status 'diverged'; try a smaller "
                         f"training.learning_rate)", epoch=epoch, batch=batch, loss=name)


def check_loss(loss: float, batch: Batch) -> float:
    """``loss`` (a batch's training loss) when it is finite; else raise :class:`~suite.errors.DivergedError` naming
    the batch, which stops the run with status ``diverged``.

    An empty batch (no examples: e.g. a distributed worker with no share of the roots) has no loss (the mean over
    zero examples is NaN); it is 0.0, which weighs nothing in the epoch's example-weighted mean.
    """
    if batch.num_examples == 0:
        return 0.0
    if not math.isfinite(loss):
        raise diverged(loss, batch.epoch, batch.index)
    return loss


class Task(ABC):
    """Base class of training tasks.

    Args:
        spec: the run spec.
        store: the opened graph store.
        device: where ``compute`` runs.

    Attributes:
        optimizer_steps: optimizer steps applied so far (the version of the learnable state).
        has_update: whether the task has an ``update`` stage.
    """

    has_update: bool = False
    concurrent_compute: bool = False
    """Whether ``compute`` may run for several batches at once (in threads): the task's gradients never go through
    shared ``.grad`` fields and its optimizer steps are serialized (link prediction); see the pipelined system's
    ``compute_workers``."""
    compute_workers: int = 1
    """How many compute workers call ``compute`` at once (set by the pipeline's stages)."""

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device):
        self.spec = spec
        self.store = store
        self.device = device
        self.optimizer_steps = 0

    def set_compute_workers(self, workers: int) -> None:
        """Run ``compute`` in ``workers`` workers at once from now on.

        Raises:
            ConfigError: ``workers`` > 1 for a task that computes one batch at a time (``concurrent_compute``).
        """
        if workers > 1 and not self.concurrent_compute:
            raise ConfigError(f"system.options.compute_workers: task {type(self).__name__} computes one batch at a "
                              f"time (got {workers})")
        self.compute_workers = workers

    @abstractmethod
    def setup(self) -> None:
        """Load what the task needs into memory; build samplers, model and optimizer (seeded by ``spec.seed``)."""

    @abstractmethod
    def plan_epoch(self, epoch: int) -> list[Batch]:
        """The epoch's batches, in order (a function of ``(seed, epoch)`` only)."""

    def shard(self, batch: Batch, rank: int, world_size: int) -> Batch:
        """Rank ``rank``'s share of a global batch, for data-parallel training (:mod:`systems.distributed`).

        Default: a contiguous ``1/world_size`` of the roots (possibly empty for a tiny last batch), the same epoch
        and index (so the same per-batch generator), and ``extra["global_examples"]``, the global batch's size,
        by which the share's gradient is weighted. Tasks whose planned batches carry more than roots override it.
        """
        share = batch.roots.tensor_split(world_size)[rank]
        return Batch(epoch=batch.epoch, index=batch.index, roots=share,
                     extra={"global_examples": batch.num_examples})

    @classmethod
    def check_inputs(cls, spec: RunSpec, store: GraphStore) -> None:
        """Check that ``store`` holds what the task needs for ``spec`` (files, splits), before a run starts: the
        runner calls it before the run folder exists, so missing inputs leave no output.

        Raises:
            DataError / ConfigError: one line naming the store file or spec field.
        """

    @abstractmethod
    def sample(self, batch: Batch) -> None:
        """Sample what the batch needs from the graph (neighbourhoods, negatives): sets ``batch.sample``."""

    @abstractmethod
    def gather(self, batch: Batch, pin: bool | None = None) -> None:
        """Gather the batch's inputs on the host (features, labels, embedding rows); page-locked when ``pin``
        (default: when the device is CUDA)."""

    def transfer(self, batch: Batch, stream: "torch.cuda.Stream | None" = None) -> None:
        """Move ``x``, ``y`` and ``sample`` to the device (non-blocking on ``stream`` if given).

        With a stream, the copies are queued on it, the caller waits for them (so its busy time is the copy's),
        and ``batch.ready`` is an event the compute stream waits on before reading the tensors.
        """
        if self.device.type != "cuda":
            batch.x = batch.x.to(self.device) if batch.x is not None else None
            batch.y = batch.y.to(self.device) if batch.y is not None else None
            batch.sample = batch.sample.to(self.device) if batch.sample is not None else None
            return
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            batch.x = batch.x.to(self.device, non_blocking=True) if batch.x is not None else None
            batch.y = batch.y.to(self.device, non_blocking=True) if batch.y is not None else None
            batch.sample = batch.sample.to(self.device, non_blocking=True) if batch.sample is not None else None
            batch.ready = torch.cuda.Event()
            batch.ready.record()
        batch.ready.synchronize()

    @abstractmethod
    def compute(self, batch: Batch) -> None:
        """Forward, loss, backward, one optimizer step: sets ``batch.loss`` and ``batch.version_applied``."""

    def update(self, batch: Batch) -> None:
        """Write the batch's updates of learnable state outside the model back (tasks with ``has_update``)."""

    def train(self) -> None:
        """Put the model in training mode (before an epoch)."""

    @abstractmethod
    def evaluate(self, split: str) -> dict[str, float]:
        """Metrics on ``split`` (``valid`` or ``test``)."""

    def teardown(self) -> None:
        """Drop what ``setup`` loaded (the trained model may stay)."""

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """The learnable state of the task (checkpoints, :mod:`suite.checkpoint`): the model's and the optimizer's
        state dicts, the optimizer step count, and a learnable embedding table with its Adagrad state (tasks that
        have one)."""
        model, optimizer = getattr(self, "model", None), getattr(self, "optimizer", None)
        embeddings = getattr(self, "embeddings", None)
        return {
            "model": model.state_dict() if model is not None else None,
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
            "optimizer_steps": int(self.optimizer_steps),
            "embeddings": ({"weight": embeddings.weight, "state": embeddings.state,
                            "updates": embeddings.updates} if embeddings is not None else None),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned (after :meth:`setup`, which built model and optimizer)."""
        model, optimizer = getattr(self, "model", None), getattr(self, "optimizer", None)
        if model is not None and state.get("model") is not None:
            model.load_state_dict(state["model"])
        if optimizer is not None and state.get("optimizer") is not None:
            optimizer.load_state_dict(state["optimizer"])
        self.optimizer_steps = int(state.get("optimizer_steps", 0))
        embeddings = getattr(self, "embeddings", None)
        if embeddings is not None and state.get("embeddings") is not None:
            saved = state["embeddings"]
            with torch.no_grad():
                embeddings.weight.copy_(saved["weight"])
                embeddings.state.copy_(saved["state"])
                embeddings.updates.copy_(saved["updates"])


__all__ = ["Task", "check_loss", "diverged", "non_finite_name"]
