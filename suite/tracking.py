"""Experiment trackers: mirror a run's records to TensorBoard (or MLflow) while it runs.

The recorder (:mod:`suite.recorder`) stays the source of truth: a tracker only sees each record after it was
written to ``records.jsonl`` (:meth:`Tracker.record`) and the summary at the end, and a tracker that fails never
fails the run (its error is reported once on stderr and it stops tracking).

``gnnsuite run SPEC --log-to tensorboard`` (or ``suite.run(..., log_to=["tensorboard"])``) writes TensorBoard
event files into ``RUN_DIR/tensorboard/`` (``tensorboard --logdir OUT``), with one scalar per step = epoch:

- ``train/loss``, ``train/epoch_time_s``, ``train/examples_per_s``, ``train/sampled_edges_per_s``;
- ``stage_busy_s/<stage>`` (``sample``, ``gather``, ``transfer``, ``compute``, ``update``, ``load``, ...);
- ``staleness/mean``, ``staleness/max``; ``io/<field>`` for the disk system's IO fields (``io_read_bytes``,
  ``io_wait_s``, ``swaps``, ...); ``threads/compute_threads``, ``threads/foreign_cores``;
- ``<split>/<metric>`` for every evaluation (``valid/accuracy``, ``test/mrr``, ``valid/hits@10``, ...).

``--log-to mlflow`` logs the same scalars (names with ``/`` as MLflow allows them) and the run's spec as
parameters to the active MLflow tracking URI (``MLFLOW_TRACKING_URI``; default ``./mlruns``); MLflow is an optional
extra (``pip install 'gnnsuite[mlflow]'``). Trackers are registered by name in :data:`TRACKERS`.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from suite.errors import ConfigError
from suite.registry import Registry

TRACKERS: Registry[type] = Registry("tracker")
"""Tracker classes by name (``--log-to NAME``): ``cls(run_dir, spec)`` with ``record``, ``summary``, ``close``."""

_IO_FIELDS = ("io_read_bytes", "io_write_bytes", "io_read_s", "io_write_s", "io_wait_s", "io_reads", "swaps",
              "states", "partitions_read", "disk_read_bytes", "disk_write_bytes", "prepare_s", "flush_s")


def epoch_scalars(record: dict[str, Any]) -> dict[str, float]:
    """The scalars of an ``epoch`` record (names as in the module docstring); non-numbers are left out."""
    scalars: dict[str, Any] = {"train/loss": record.get("loss"), "train/epoch_time_s": record.get("epoch_time_s")}
    seconds = record.get("epoch_time_s")
    if isinstance(seconds, (int, float)) and seconds > 0:
        scalars["train/examples_per_s"] = record.get("examples", 0) / seconds
        scalars["train/sampled_edges_per_s"] = record.get("sampled_edges", 0) / seconds
    for stage, busy in (record.get("stage_busy_s") or {}).items():
        scalars[f"stage_busy_s/{stage}"] = busy
    scalars["staleness/mean"] = record.get("staleness_mean")
    scalars["staleness/max"] = record.get("staleness_max")
    for key in _IO_FIELDS:
        scalars[f"io/{key}"] = record.get(key)
    for key in ("compute_threads", "foreign_cores"):
        scalars[f"threads/{key}"] = record.get(key)
    for key in ("pipeline_efficiency", "compute_utilization", "gpu_utilization"):
        scalars[f"pipeline/{key}"] = record.get(key)
    return {name: float(value) for name, value in scalars.items() if _number(value)}


def eval_scalars(record: dict[str, Any]) -> dict[str, float]:
    """``<split>/<metric>`` of an ``eval`` record."""
    skip = {"kind", "time", "epoch", "split", "resumed", "non_finite", "compute_threads"}
    split = record.get("split", "eval")
    return {f"{split}/{key}": float(value) for key, value in record.items() if key not in skip and _number(value)}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class Tracker:
    """Base tracker: turns ``epoch`` and ``eval`` records into scalars at step = epoch; subclasses write them."""

    def __init__(self, run_dir: Path, spec: Any):
        self.run_dir = Path(run_dir)
        self.spec = spec

    def record(self, kind: str, record: dict[str, Any]) -> None:
        """Receive one record (already written to ``records.jsonl``)."""
        if kind == "epoch":
            self.scalars(epoch_scalars(record), int(record["epoch"]))
        elif kind == "eval":
            self.scalars(eval_scalars(record), int(record["epoch"]))

    def scalars(self, values: dict[str, float], step: int) -> None:
        """Write ``values`` at ``step``."""
        raise NotImplementedError

    def summary(self, summary: dict[str, Any]) -> None:
        """Receive the run's final summary."""

    def close(self) -> None:
        """Flush and close."""


@TRACKERS.register("tensorboard")
class TensorBoardTracker(Tracker):
    """Event files in ``RUN_DIR/tensorboard/`` through torch's ``SummaryWriter``."""

    folder = "tensorboard"

    def __init__(self, run_dir: Path, spec: Any):
        super().__init__(run_dir, spec)
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(self.run_dir / self.folder))
        self.writer.add_text("spec", "```\n" + spec.to_yaml() + "\n```", 0)

    def scalars(self, values: dict[str, float], step: int) -> None:
        for name, value in values.items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()

    def summary(self, summary: dict[str, Any]) -> None:
        for key in ("train_examples_per_s", "sampled_edges_per_s", "wall_time_s", "compute_utilization"):
            if _number(summary.get(key)):
                self.writer.add_scalar(f"summary/{key}", float(summary[key]), 0)

    def close(self) -> None:
        self.writer.close()


@TRACKERS.register("mlflow")
class MlflowTracker(Tracker):
    """Scalars and the spec as parameters to MLflow's active tracking URI (optional extra ``mlflow``)."""

    def __init__(self, run_dir: Path, spec: Any):
        super().__init__(run_dir, spec)
        try:
            import mlflow
        except ImportError:
            raise ConfigError("--log-to mlflow: MLflow is not installed (pip install 'gnnsuite[mlflow]')") from None
        from suite.config import flatten

        self.mlflow = mlflow
        self.run = mlflow.start_run(run_name=spec.run_id)
        params = {key: str(value)[:500] for key, value in flatten(spec.resolved()).items()}
        mlflow.log_params(params)

    def scalars(self, values: dict[str, float], step: int) -> None:
        self.mlflow.log_metrics({name.replace("@", "_at_"): value for name, value in values.items()}, step=step)

    def summary(self, summary: dict[str, Any]) -> None:
        self.mlflow.set_tag("status", str(summary.get("status")))

    def close(self) -> None:
        self.mlflow.end_run()


def make_trackers(names: list[str] | tuple[str, ...], run_dir: Path, spec: Any) -> list[Tracker]:
    """The trackers ``names`` (each once) for a run.

    Raises:
        ConfigError: an unknown tracker name (``--log-to``), or a tracker whose package is missing.
    """
    trackers = []
    for name in dict.fromkeys(names):
        if name not in TRACKERS:
            raise ConfigError(f"--log-to: unknown tracker {name!r} (known: {', '.join(TRACKERS.names())})")
        trackers.append(TRACKERS.get(name)(run_dir, spec))
    return trackers


def check_trackers(names: list[str] | tuple[str, ...]) -> None:
    """Fail early (before any run starts) on an unknown tracker name."""
    for name in names:
        if name not in TRACKERS:
            raise ConfigError(f"--log-to: unknown tracker {name!r} (known: {', '.join(TRACKERS.names())})")


class TrackerFanout:
    """Forwards records to trackers; a tracker that raises is reported once and dropped (never fails the run)."""

    def __init__(self, trackers: list[Tracker]):
        self.trackers = list(trackers)

    def _each(self, method: str, *args: Any) -> None:
        for tracker in list(self.trackers):
            try:
                getattr(tracker, method)(*args)
            except Exception as err:  # noqa: BLE001  (tracking is best effort; the records are the truth)
                print(f"gnnsuite: warning: tracker {type(tracker).__name__} stopped: {type(err).__name__}: {err}",
                      file=sys.stderr)
                self.trackers.remove(tracker)

    def record(self, kind: str, record: dict[str, Any]) -> None:
        self._each("record", kind, record)

    def summary(self, summary: dict[str, Any]) -> None:
        self._each("summary", summary)

    def close(self) -> None:
        self._each("close")
        self.trackers = []


__all__ = ["MlflowTracker", "TRACKERS", "TensorBoardTracker", "Tracker", "TrackerFanout", "check_trackers",
           "epoch_scalars", "eval_scalars", "make_trackers"]
