"""What every system does with a batch: run it through a task's stages one after another, and sum an epoch's
batches into :class:`~systems.system.EpochStats`.

The in-memory baseline (:mod:`systems.in_memory`), the pipelined system (:mod:`systems.pipelined`) and the disk
system's variants (:mod:`systems.disk`) share these; a new system imports them from here.
"""

from __future__ import annotations

from suite.metrics import StageTimer
from systems.system import EpochStats
from systems.batch import Batch


def run_stages(task, batch: Batch, timer: StageTimer) -> None:
    """Run ``batch`` through the task's stages one after the other (sample, gather, transfer, compute, and update
    when the task has one), each timed under its name."""
    with timer.stage("sample"):
        task.sample(batch)
    with timer.stage("gather"):
        task.gather(batch)
    with timer.stage("transfer"):
        task.transfer(batch)
    with timer.stage("compute"):
        task.compute(batch)
    if task.has_update:
        with timer.stage("update"):
            task.update(batch)


def epoch_stats(batches: list[Batch], stage_busy_s: dict[str, float], **extra) -> EpochStats:
    """Examples, sampled edges, mean loss (summed in planned order) and staleness of an epoch's batches."""
    ordered = sorted(batches, key=lambda b: b.index)
    examples = sum(b.num_examples for b in ordered)
    total_loss = 0.0
    for batch in ordered:
        total_loss += batch.loss * batch.num_examples
    sampled_edges = sum(b.sample.num_sampled_edges for b in ordered if b.sample is not None)
    return EpochStats(examples=examples, sampled_edges=sampled_edges, loss=total_loss / max(examples, 1),
                      stage_busy_s=stage_busy_s, staleness=[b.staleness for b in ordered], extra=extra)


__all__ = ["epoch_stats", "run_stages"]
