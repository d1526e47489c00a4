"""Stage timing of pipelined batches, shared by what measures it and what simulates it: the stamp of one stage on
one batch, the per-stage fields of a ``batch`` record, and the arithmetic of a trace (busy time per stage, the
bottleneck stage, pipeline efficiency).

The pipelined system (:mod:`systems.stage_pipeline`) stamps real batches with ``perf_counter`` times; the pipeline
simulator (:mod:`simulators.trace`) stamps its own batches with simulated times. Both write the same ``batch``
records and compute their traces' numbers here, so measured and simulated runs go through the same tables.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StageStamp:
    """When a stage worked on a batch.

    Attributes:
        start: when the stage started working on the batch (``time.perf_counter()`` in a real run: a system-wide
            monotonic clock on Linux, so stamps taken in worker processes compare with the main process's;
            simulated seconds in a simulation).
        end: when it finished.
        worker: ``"<stage>-<index>"`` of the worker (thread or process) that did the work.
    """

    start: float
    end: float
    worker: str

    @property
    def seconds(self) -> float:
        """Busy seconds of the stage on this batch."""
        return self.end - self.start


def stage_fields(stamps: Mapping[str, StageStamp], origin: float = 0.0) -> dict[str, Any]:
    """``<stage>_start``, ``<stage>_end`` (seconds from ``origin``) and ``<stage>_worker`` of every stamp: the
    per-stage part of a ``batch`` record."""
    fields: dict[str, Any] = {}
    for stage, stamp in stamps.items():
        fields.update({f"{stage}_start": stamp.start - origin, f"{stage}_end": stamp.end - origin,
                       f"{stage}_worker": stamp.worker})
    return fields


class StageTraceStats:
    """The numbers of a trace of stamped batches. Mixed into a trace that has ``batches`` (each with ``stamps``,
    stage -> :class:`StageStamp`), ``workers`` (stage -> number of workers) and ``wall_s``."""

    batches: Any
    workers: dict[str, int]
    wall_s: float

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


__all__ = ["StageStamp", "StageTraceStats", "stage_fields"]
