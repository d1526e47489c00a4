"""What a simulated pipeline epoch produces: per batch its admission, versions and stage intervals, and the trace.

These are the simulator's own record types. They write the same flat ``batch`` records as the real system's
batches (:meth:`systems.batch.Batch.record`: ``admitted``, ``version_read``, ``version_applied``, ``staleness``,
``<stage>_start``/``_end``/``_worker``), so simulated and measured runs go through the same tables; the simulator
never builds the real system's batches (which carry tensors) or traces. Stamps, record fields and the trace's
numbers come from the harness (:mod:`suite.stage_trace`), as the real system's do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from suite.stage_trace import StageStamp, StageTraceStats, stage_fields


# A simulated stage interval is a stamp in simulated seconds.
StageInterval = StageStamp


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
        record.update(stage_fields(self.stamps))
        return record


@dataclass
class SimulatedTrace(StageTraceStats):
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



__all__ = ["SimulatedBatch", "SimulatedTrace", "StageInterval"]
