"""The System contract: ``run()`` is a template calling ``setup`` / ``train_epoch`` / ``evaluate`` / ``teardown``.

A system is registered by name (``@SYSTEMS.register("in_memory")``) and constructed by the runner with the run's
spec, the opened :class:`~suite.graph.GraphStore`, the torch device and the :class:`~suite.recorder.Recorder`.
It returns plain measurements; the runner turns them into ``summary.json`` (throughput, utilization, cost,
provenance), so every system is summarized the same way.

Thread budget: before ``setup``, ``run()`` sizes torch's pools to the cores the system's own busy threads
(:meth:`System.own_threads`: loaders, prefetch, writer) leave free, or to ``system.options.compute_threads``
(:mod:`suite.threads`), and restores the previous sizes afterwards. Without the option the budget also gives
way to foreign load: the cores other processes kept busy during setup, or during the last epoch, are left to them
for the next epoch. The budget is recorded in the outcome, and each epoch's thread count and foreign load in its
record.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from suite.config import RunSpec
from suite.graph import GraphStore
from suite.metrics import StageTimer
from suite.recorder import Recorder
from suite.load import LoadMonitor, MachineLoad
from suite.threads import (ThreadBudget, adapt_budget, apply_budget, budget_applied,
                           plan_budget, usable_cores)


class SystemOptions(BaseModel):
    """``system.options`` every system takes (each system's options model extends it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    compute_threads: int | None = Field(None, ge=1, description="torch intra-op threads (default: the cores the "
                                                                "system's own loader/prefetch/writer threads leave "
                                                                "free)")


@dataclass
class EpochStats:
    """What one training epoch measured.

    Attributes:
        examples: training examples (roots or edges) processed.
        sampled_edges: edges in all sampled subgraphs of the epoch.
        loss: mean training loss.
        stage_busy_s: busy seconds per stage (``sample``, ``gather``, ``transfer``, ``compute``, ...).
        staleness: per-batch staleness values (empty for synchronous systems).
        extra: system-specific numbers (recorded as they are).
    """

    examples: int
    sampled_edges: int
    loss: float
    stage_busy_s: dict[str, float]
    staleness: list[int] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunOutcome:
    """Everything a system measured over a run, before summarizing.

    Attributes:
        epoch_time_s: wall time of every training epoch (evaluation excluded).
        epochs: the stats of every epoch.
        valid_metrics: ``(epoch, metrics)`` of every validation.
        test_metrics: the final test metrics.
        io_read_bytes / io_write_bytes / partition_swaps: storage traffic the system caused (0 in memory).
        test_curve: ``(epoch, metrics)`` of every test evaluation (``evaluation.test_every``, and the last epoch).
        threads: the thread budget the run used (:meth:`suite.threads.ThreadBudget.record`).
    """

    epoch_time_s: list[float] = field(default_factory=list)
    epochs: list[EpochStats] = field(default_factory=list)
    valid_metrics: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    test_metrics: dict[str, float] = field(default_factory=dict)
    test_curve: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    io_read_bytes: int = 0
    io_write_bytes: int = 0
    partition_swaps: int = 0
    threads: dict[str, Any] = field(default_factory=dict)


class System(ABC):
    """Base class of training systems.

    Args:
        spec: the run spec.
        store: the opened graph store.
        device: where compute runs.
        recorder: where epoch and evaluation records go.
    """

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder):
        self.spec = spec
        self.store = store
        self.device = device
        self.recorder = recorder

    def run(self, progress: bool = False) -> RunOutcome:
        """Train for ``spec.training.epochs`` epochs, validating every ``spec.evaluation.every``, then test.

        Only the splits in ``spec.evaluation.splits`` are evaluated.
        """
        outcome = RunOutcome()
        with budget_applied(self.thread_budget()) as budget:
            self._budget = budget
            outcome.threads = {**budget.record(), "per_epoch": []}
            self._run(outcome, progress)
        return outcome

    def _adapt_threads(self, load: MachineLoad) -> None:
        """Resize the thread budget to the foreign load of the last interval (:func:`suite.threads.adapt_budget`)."""
        adapted = adapt_budget(self._budget, load)
        if adapted.compute != self._budget.compute:
            self._budget = apply_budget(adapted)

    def thread_budget(self) -> ThreadBudget:
        """The cores left free by :meth:`own_threads` (shared among data-parallel ranks on this machine), or
        ``system.options.compute_threads``."""
        options = getattr(self, "options", None)
        ranks = max(1, getattr(options, "world_size", 1))
        return plan_budget(self.own_threads(), getattr(options, "compute_threads", None),
                           cores=max(1, usable_cores() // ranks))

    def own_threads(self) -> int:
        """Busy threads (or worker processes) the system runs beside compute (none by default)."""
        return 0

    def _run(self, outcome: RunOutcome, progress: bool) -> None:
        meter = LoadMonitor().start()
        self.setup()
        self._adapt_threads(meter.stop())
        try:
            epochs = self.spec.training.epochs
            done = self.completed_epochs()
            for epoch, (elapsed, stats, metrics) in enumerate(done):
                self._record_epoch(outcome, epoch, elapsed, stats, metrics, resumed=True)
            schedule = pass_schedule(self.spec)
            for epoch in range(len(done), epochs):
                started = time.perf_counter()
                meter.start()
                threads = self._budget.compute
                stats = self.train_epoch(epoch, progress=progress)
                if not math.isfinite(stats.loss):  # systems whose tasks do not check every batch's loss
                    from systems.tasks.base import diverged

                    raise diverged(stats.loss, epoch)
                elapsed = time.perf_counter() - started
                load = meter.stop()
                stats.extra.update(compute_threads=threads,
                                   foreign_cores=round(load.foreign_cores, 3) if load is not None else None)
                outcome.threads["per_epoch"].append(threads)
                self._adapt_threads(load)
                evaluated = {split: self.evaluate(split) for split, after in schedule
                             if after == epoch and split != "train"}
                self._record_epoch(outcome, epoch, elapsed, stats, evaluated.get("valid"))
                if "test" in evaluated:
                    outcome.test_curve.append((epoch, evaluated["test"]))
                    self.recorder.record("eval", epoch=epoch, split="test", **evaluated["test"])
                self.checkpoint(epoch, elapsed, stats, evaluated.get("valid"))
            if outcome.test_curve and outcome.test_curve[-1][0] == epochs - 1:
                outcome.test_metrics = outcome.test_curve[-1][1]
            self.collect_io(outcome)
        finally:
            self.teardown()

    def _record_epoch(self, outcome: RunOutcome, epoch: int, elapsed: float, stats: EpochStats,
                      metrics: dict[str, float] | None, resumed: bool = False) -> None:
        outcome.epoch_time_s.append(elapsed)
        outcome.epochs.append(stats)
        flag = {"resumed": True} if resumed else {}
        self.recorder.record(
            "epoch", epoch=epoch, epoch_time_s=elapsed, examples=stats.examples,
            sampled_edges=stats.sampled_edges, loss=stats.loss, stage_busy_s=stats.stage_busy_s,
            staleness_mean=_mean(stats.staleness), staleness_max=max(stats.staleness, default=0),
            **stats.extra, **flag,
        )
        if metrics is not None:
            outcome.valid_metrics.append((epoch, metrics))
            self.recorder.record("eval", epoch=epoch, split="valid", **metrics, **flag)

    def completed_epochs(self) -> list[tuple[float, EpochStats, dict[str, float] | None]]:
        """Epochs a resumed run already finished, as ``(epoch_time_s, stats, valid_metrics or None)`` (called after
        :meth:`setup`; training continues after them). Systems without checkpoints finish none."""
        return []

    def checkpoint(self, epoch: int, epoch_time_s: float, stats: EpochStats,
                   valid_metrics: dict[str, float] | None) -> None:
        """Make the state after ``epoch`` (and its validation) durable, so a killed run can resume after it
        (nothing for systems without checkpoints)."""

    @abstractmethod
    def setup(self) -> None:
        """Load what the system needs (graph, features, model, optimizer)."""

    @abstractmethod
    def train_epoch(self, epoch: int, progress: bool = False) -> EpochStats:
        """Run one training epoch."""

    @abstractmethod
    def evaluate(self, split: str) -> dict[str, float]:
        """Metrics on ``split`` (``valid`` or ``test``), e.g. ``{"accuracy": 0.8}``."""

    def collect_io(self, outcome: RunOutcome) -> None:
        """Fill the storage counters of ``outcome`` (nothing for in-memory systems)."""

    def teardown(self) -> None:
        """Release threads, files and memory."""


PassKey = tuple[str, int]
"""A pass of a run: ``("train", epoch)``, or ``("valid" | "test", epoch)`` for an evaluation after ``epoch``."""


def pass_schedule(spec: RunSpec) -> list[PassKey]:
    """The run's passes in order: every training epoch, each followed by its evaluations: ``valid`` every
    ``evaluation.every`` epochs and after the last, ``test`` every ``evaluation.test_every`` epochs (the test
    curve) and after the last; only the splits in ``evaluation.splits``."""
    evaluation, epochs = spec.evaluation, spec.training.epochs
    schedule: list[PassKey] = []
    for epoch in range(epochs):
        schedule.append(("train", epoch))
        last = epoch + 1 == epochs
        if "valid" in evaluation.splits and (last or (epoch + 1) % evaluation.every == 0):
            schedule.append(("valid", epoch))
        if "test" in evaluation.splits and (last or (evaluation.test_every and (epoch + 1) % evaluation.test_every == 0)):
            schedule.append(("test", epoch))
    return schedule


def _mean(values: list[int]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


__all__ = ["EpochStats", "PassKey", "RunOutcome", "StageTimer", "System", "SystemOptions", "pass_schedule"]
