"""What a simulated pipeline epoch produces: per batch its admission, versions and stage intervals, and the trace.

These are the simulator's own record types. They write the same flat ``batch`` records as the real system's
batches (:meth:`systems.batch.Batch.record`: ``admitted``, ``version_read``, ``version_applied``, ``staleness``,
``<stage>_start``/``_end``/``_worker``), so simulated and measured runs go through the same tables; the simulator
never builds the real system's batches (which carry tensors) or traces.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StageInterval:
    """When a simulated stage worked on a batch (simulated seconds) and which worker did (``<stage>-<index>``)."""

    start: float
    end: float
    worker: str

    @property
    def seconds(self) -> float:
        """Busy seconds of the stage on this batch."""
        return self.end - self.start


@dataclass
class SimulatedBatch:
    """One simulated batch.

    Attributes:
        epoch / index: the epoch and the batch's position in its planned order.
        admitted: when it took a staleness token.
        version_read: optimizer steps applied when it was admitted.
        version_applied: optimizer steps applied before its own step.
        stamps: per stage, when it worked on the batch.
    """

    epoch: int
    index: int
    admitted: float = 0.0
    version_read: int = 0
    version_applied: int = 0
    stamps: dict[str, StageInterval] = field(default_factory=dict)

    @property
    def staleness(self) -> int:
        """Optimizer steps between the state the batch read and the step its gradient was applied to."""
        return self.version_applied - self.version_read

    def record(self) -> dict[str, Any]:
        """The batch as one flat ``batch`` record, in the real system's schema (no examples, no loss)."""
        record: dict[str, Any] = {"epoch": self.epoch, "index": self.index, "examples": 0,
                                  "admitted": self.admitted, "version_read": self.version_read,
                                  "version_applied": self.version_applied, "staleness": self.staleness,
                                  "loss": None}
        for stage, stamp in self.stamps.items():
            record.update({f"{stage}_start": stamp.start, f"{stage}_end": stamp.end, f"{stage}_worker": stamp.worker})
        return record


@dataclass
class SimulatedTrace:
    """One simulated epoch, from 0 to the completion of the last batch.

    Attributes:
        wall_s: simulated seconds until the last batch completed.
        batches: the batches in completion order.
        workers: workers per stage.
        queue_occupancy: per queue (named after the stage it feeds), ``(time, size)`` after every put and get.
    """

    wall_s: float
    batches: list[SimulatedBatch]
    workers: dict[str, int]
    queue_occupancy: dict[str, list[tuple[float, int]]] = field(default_factory=dict)

    def busy_s(self) -> dict[str, float]:
        """Busy seconds per stage, summed over its workers."""
        busy: dict[str, float] = defaultdict(float)
        for batch in self.batches:
            for stage, stamp in batch.stamps.items():
                busy[stage] += stamp.seconds
        return {stage: busy.get(stage, 0.0) for stage in self.workers}

    def bottleneck(self) -> tuple[str, float]:
        """The stage with the most busy time per worker, and that time: no schedule can finish sooner."""
        per_worker = {stage: busy / self.workers[stage] for stage, busy in self.busy_s().items()}
        stage = max(per_worker, key=per_worker.get)
        return stage, per_worker[stage]

    def efficiency(self) -> float:
        """Pipeline efficiency: wall time / the bottleneck stage's busy time per worker (1.0 is ideal)."""
        _, busy = self.bottleneck()
        return self.wall_s / busy if busy > 0 else float("nan")


__all__ = ["SimulatedBatch", "SimulatedTrace", "StageInterval"]
