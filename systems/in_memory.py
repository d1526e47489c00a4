"""The synchronous in-memory baseline: the whole graph and its inputs in CPU memory, one batch at a time.

Per mini-batch, the registered task's stages (:mod:`systems.tasks`) run one after another, each timed under the
suite's stage names: ``sample`` (on the CPU) -> ``gather`` -> ``transfer`` (to the compute device) -> ``compute``
(forward, loss, backward, optimizer step) [-> ``update``, for tasks with learnable state outside the model]. No
stage overlaps another: this is the reference the pipelined and disk-based systems are compared with.

Two runs with the same spec give the same losses and metrics on the CPU (see the task's randomness).
"""

from __future__ import annotations

import time

import torch
from pydantic import ConfigDict

from suite.config import RunSpec, validate_system_options
from suite.errors import ConfigError
from suite.data import GraphStore
from suite.metrics import StageTimer
from suite.recorder import Recorder
from suite.registry import TASKS
from systems.system import EpochStats, System, SystemOptions
from suite.ranks import DistributedOptions
from systems.stages import epoch_stats, run_stages
from systems.tasks.task import Task
from systems.tasks.node_classification import make_optimizer


class InMemoryOptions(DistributedOptions, SystemOptions):
    """``system.options`` of ``in_memory``: ``compute_threads`` and the data-parallel ones
    (:mod:`systems.distributed`); any other key is an error naming it (a misspelt option must not be ignored
    silently)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class InMemorySystem(System):
    """Synchronous mini-batch training with graph and inputs held in CPU memory.

    Runs any registered task (``training.task``). Options: :class:`InMemoryOptions` (data parallelism only).

    Args:
        spec: the run spec.
        store: the opened graph store.
        device: where the model runs (sampling and gathering stay on the CPU).
        recorder: where epoch and evaluation records go.
    """

    options_model = InMemoryOptions

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder):
        super().__init__(spec, store, device, recorder)
        self.options = validate_system_options(spec)
        if spec.training.task not in TASKS:
            raise ConfigError(f"training.task: unknown task {spec.training.task!r} (known: {', '.join(TASKS.names())})")
        self.task: Task = TASKS.get(spec.training.task)(spec, store, device)

    @property
    def model(self) -> torch.nn.Module | None:
        """The task's model."""
        return getattr(self.task, "model", None)

    def setup(self) -> None:
        """Set the task up (load the graph and inputs, build model and optimizer)."""
        self.task.setup()

    validates_within_epoch = True

    def train_epoch(self, epoch: int, progress: bool = False) -> EpochStats:
        """One pass over the epoch's batches, one batch and one stage at a time (validating between batches where
        ``evaluation.validations_per_epoch`` asks, that time kept out of the epoch's)."""
        from tqdm import tqdm

        started, eval_s = time.perf_counter(), 0.0
        task = self.task
        timer = StageTimer(self.device)
        batches = task.plan_epoch(epoch)
        validate_after = self.within_epoch_validations(len(batches))
        task.train()
        for done, batch in enumerate(tqdm(batches, desc=f"epoch {epoch}", unit="batch", disable=not progress,
                                          leave=False), start=1):
            batch.version_read = task.optimizer_steps
            run_stages(task, batch, timer)
            if done in validate_after:
                eval_s += self.validate_within_epoch(epoch, done, len(batches),
                                                     time.perf_counter() - started - eval_s)
                task.train()
        stats = epoch_stats(batches, timer.snapshot())
        if validate_after:
            stats.extra["within_epoch_eval_s"] = eval_s
        return stats

    def evaluate(self, split: str) -> dict[str, float]:
        """The task's metrics on ``split``."""
        return self.task.evaluate(split)

    def teardown(self) -> None:
        """Release the task's data (the trained model stays)."""
        self.task.teardown()


__all__ = ["InMemoryOptions", "InMemorySystem", "make_optimizer"]
