"""The System contract: ``run()`` is a template calling ``setup`` / ``train_epoch`` / ``evaluate`` / ``teardown``.

A system is registered by name (``@SYSTEMS.register("in_memory")``) and constructed by the runner with the run's
spec, the opened :class:`~suite.graph.GraphStore`, the torch device and the :class:`~suite.recorder.Recorder`.
It returns plain measurements; the runner turns them into ``summary.json`` (throughput, utilization, cost,
provenance), so every system is summarized the same way.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import torch

from suite.config import RunSpec
from suite.graph import GraphStore
from suite.metrics import StageTimer
from suite.recorder import Recorder


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
    """

    epoch_time_s: list[float] = field(default_factory=list)
    epochs: list[EpochStats] = field(default_factory=list)
    valid_metrics: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    test_metrics: dict[str, float] = field(default_factory=dict)
    io_read_bytes: int = 0
    io_write_bytes: int = 0
    partition_swaps: int = 0


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
        self.setup()
        try:
            epochs = self.spec.training.epochs
            done = self.completed_epochs()
            for epoch, (elapsed, stats, metrics) in enumerate(done):
                self._record_epoch(outcome, epoch, elapsed, stats, metrics, resumed=True)
            for epoch in range(len(done), epochs):
                started = time.perf_counter()
                stats = self.train_epoch(epoch, progress=progress)
                if not math.isfinite(stats.loss):  # systems whose tasks do not check every batch's loss
                    from systems.tasks.base import diverged

                    raise diverged(stats.loss, epoch)
                elapsed = time.perf_counter() - started
                metrics = None
                splits = self.spec.evaluation.splits
                if "valid" in splits and ((epoch + 1) % self.spec.evaluation.every == 0 or epoch + 1 == epochs):
                    metrics = self.evaluate("valid")
                self._record_epoch(outcome, epoch, elapsed, stats, metrics)
                self.checkpoint(epoch, elapsed, stats, metrics)
            if "test" in self.spec.evaluation.splits:
                outcome.test_metrics = self.evaluate("test")
                self.recorder.record("eval", epoch=epochs - 1, split="test", **outcome.test_metrics)
            self.collect_io(outcome)
        finally:
            self.teardown()
        return outcome

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


def _mean(values: list[int]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


__all__ = ["EpochStats", "RunOutcome", "StageTimer", "System"]
