"""The contract between the runner and a training system: what the runner constructs and calls (:class:`System`),
what a run hands back (:class:`RunOutcome`, one :class:`EpochStats` per epoch) and the metric a run is judged by
(:func:`main_metric`).

The runner (:mod:`suite.runner`) builds ``summary.json`` from a :class:`RunOutcome` alone, the same way for every
system; the systems layer implements the contract (:class:`systems.system.System` is the base class of the built-in
systems).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from suite.config import RunSpec
    from suite.data import GraphStore
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
        valid_metrics: ``(epoch, metrics)`` of every validation after an epoch.
        valid_points: every validation of this process, within epochs (``evaluation.validations_per_epoch``) and
            after them, in order: ``{epoch, batches, of_batches, train_s, **metrics}``, ``train_s`` the run's
            training seconds done at it (``batches`` None where the epoch did not validate within).
        test_metrics: the final test metrics.
        io_read_bytes / io_write_bytes / partition_swaps: storage traffic the system caused (0 in memory).
        test_curve: ``(epoch, metrics)`` of every test evaluation (``evaluation.test_every``, and the last epoch).
        threads: the thread budget the run used (:meth:`suite.threads.ThreadBudget.record`).
        eval_time_s: ``{epoch, split, seconds}`` of every evaluation this process made (not counted in
            ``epoch_time_s``; a resumed run's earlier ones are not repeated).
        summary_extra: entries a system variant adds to ``summary.json`` as they are (the data-parallel variant's
            ``data_parallel``).
    """

    epoch_time_s: list[float] = field(default_factory=list)
    epochs: list[EpochStats] = field(default_factory=list)
    valid_metrics: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    valid_points: list[dict[str, Any]] = field(default_factory=list)
    test_metrics: dict[str, float] = field(default_factory=dict)
    test_curve: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    io_read_bytes: int = 0
    io_write_bytes: int = 0
    partition_swaps: int = 0
    threads: dict[str, Any] = field(default_factory=dict)
    eval_time_s: list[dict[str, Any]] = field(default_factory=list)
    summary_extra: dict[str, Any] = field(default_factory=dict)


class System(Protocol):
    """What the runner needs of a training system: constructed with the run's spec, the opened store, the device
    and the recorder (validating its options, before the run folder exists), told whether to resume from the run
    folder's checkpoint, then run once.

    A registered system (``SYSTEMS``) is a class of this shape; :class:`systems.system.System` implements it.
    """

    resume: bool
    """Continue from the run folder's last checkpoint (False: redo the run, ``--overwrite``)."""

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder) -> None: ...

    def run(self, progress: bool = False) -> RunOutcome:
        """Train, validate and test as the spec says; return what was measured."""
        ...


NODE_CLASSIFICATION_METRIC = "accuracy"
RANKING_METRIC = "mrr"


def main_metric(task: str) -> str:
    """The metric a run of ``training.task`` is judged by: ``accuracy`` for node classification, ``mrr`` (mean
    reciprocal rank) for every other task (link prediction)."""
    return NODE_CLASSIFICATION_METRIC if task == "node_classification" else RANKING_METRIC


__all__ = ["EpochStats", "RunOutcome", "System", "main_metric"]
