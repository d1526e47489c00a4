"""The System contract: ``run()`` is a template calling ``setup`` / ``train_epoch`` / ``evaluate`` / ``teardown``.

A system is declared by name (a line of the ``systems`` table in :mod:`systems.plugins`) and constructed by the runner with the run's
spec, the opened :class:`~suite.data.GraphStore`, the torch device and the :class:`~suite.recorder.Recorder`.
It returns plain measurements; the runner turns them into ``summary.json`` (throughput, utilization, cost,
provenance), so every system is summarized the same way.

Checkpoints: after every epoch (and its evaluations) ``run()`` calls :meth:`System.checkpoint`, which writes the
task's state, the RNG state and the epoch history (:mod:`suite.checkpoint`); after ``setup`` it calls
:meth:`System.completed_epochs`, which restores the run folder's last checkpoint, replays the finished epochs into
the records, and :meth:`System.enter_pass` puts what the system keeps between passes where an uninterrupted run
has it (the disk system's buffer layout). Systems with their own durable state override these hooks (the disk
system's link prediction commits embedding generations).

Model selection (``evaluation.restore_best``): the template keeps a copy of the learnable state
(:meth:`System.parameter_state`) of the epoch with the best main validation metric (:class:`BestParameters`) and
puts it back (:meth:`System.load_parameter_state`) before the test evaluation after the last epoch.

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
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from suite.config import RunSpec
from suite.data import GraphStore
from suite.metrics import StageTimer
from suite.recorder import Recorder
from suite.run_contract import EpochStats, RunOutcome, main_metric
from suite.load import LoadMonitor, MachineLoad
from suite.threads import (ThreadBudget, adapt_budget, apply_budget, budget_applied,
                           plan_budget, usable_cores)


class SystemOptions(BaseModel):
    """``system.options`` every system takes (each system's options model extends it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    compute_threads: int | None = Field(None, ge=1, description="torch intra-op threads (default: the cores the "
                                                                "system's own loader/prefetch/writer threads leave "
                                                                "free)")


class System(ABC):
    """Base class of training systems: implements the runner's contract (:class:`suite.run_contract.System`;
    the outcome types :class:`~suite.run_contract.RunOutcome` and :class:`~suite.run_contract.EpochStats` are the
    harness's).

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
        if spec.evaluation.restore_best and not self.restores_best:
            from suite.errors import ConfigError

            raise ConfigError(f"evaluation.restore_best: the {spec.system.name} system cannot restore earlier "
                              f"parameters for {spec.training.task} (its learnable state is not held in memory)")
        if spec.evaluation.validations_per_epoch > 1 and not self.validates_within_epoch:
            from suite.errors import ConfigError

            raise ConfigError(f"evaluation.validations_per_epoch: the {type(self).__name__} system validates only "
                              f"between epochs (1), got {spec.evaluation.validations_per_epoch}")
        self._within_epoch: list[dict[str, Any]] = []  # this epoch's validations between its batches

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
                self._add_valid_points(outcome, epoch, metrics)
                if stats.extra.get("compute_threads") is not None:
                    outcome.threads["per_epoch"].append(stats.extra["compute_threads"])
            for epoch, metrics, threads in self.completed_tests():
                outcome.test_curve.append((epoch, metrics))
                self.recorder.record("eval", epoch=epoch, split="test", **metrics, resumed=True,
                                     **({"compute_threads": threads} if threads else {}))
            if done and len(done) < epochs:
                self.enter_pass(("train", len(done)))
            best = self._best_parameters(resumed=bool(done)) if self.spec.evaluation.restore_best else None
            schedule = pass_schedule(self.spec)
            for epoch in range(len(done), epochs):
                started = time.perf_counter()
                meter.start()
                threads = self._budget.compute
                stats = self.train_epoch(epoch, progress=progress)
                if not math.isfinite(stats.loss):  # systems whose tasks do not check every batch's loss
                    from systems.tasks.task import diverged

                    raise diverged(stats.loss, epoch)
                elapsed = time.perf_counter() - started - float(stats.extra.get("within_epoch_eval_s", 0.0))
                load = meter.stop()
                stats.extra.update(compute_threads=threads,
                                   foreign_cores=round(load.foreign_cores, 3) if load is not None else None)
                outcome.threads["per_epoch"].append(threads)
                self._adapt_threads(load)
                evaluated = self._evaluate_after(epoch, schedule, best, outcome)
                self._record_epoch(outcome, epoch, elapsed, stats, evaluated.get("valid"))
                self._add_valid_points(outcome, epoch, evaluated.get("valid"))
                if "test" in evaluated:
                    outcome.test_curve.append((epoch, evaluated["test"]))
                    self.recorder.record("eval", epoch=epoch, split="test", **evaluated["test"],
                                         compute_threads=self._budget.compute)
                self.checkpoint(epoch, elapsed, stats, evaluated.get("valid"), test_metrics=evaluated.get("test"))
            if outcome.test_curve and outcome.test_curve[-1][0] == epochs - 1:
                outcome.test_metrics = outcome.test_curve[-1][1]
            if best is not None:
                outcome.summary_extra["restored_best"] = best.describe()
            self.collect_io(outcome)
        finally:
            self.teardown()

    def _evaluate_after(self, epoch: int, schedule: list[PassKey], best: BestParameters | None,
                        outcome: RunOutcome) -> dict[str, dict[str, float]]:
        """The evaluations scheduled after ``epoch``, in order (each one's time into ``outcome.eval_time_s``); with
        ``best`` (``evaluation.restore_best``) each validation result is offered to it, and the best parameters are
        restored before the final test."""
        evaluated: dict[str, dict[str, float]] = {}
        final = epoch + 1 == self.spec.training.epochs
        for split, after in schedule:
            if after != epoch or split == "train":
                continue
            if split == "test" and final and best is not None:
                best.restore(self)
            started = time.perf_counter()
            evaluated[split] = self.evaluate(split)
            # apart from the epoch's training time (time to target counts training only)
            outcome.eval_time_s.append({"epoch": epoch, "split": split, "seconds": time.perf_counter() - started})
            if split == "valid" and best is not None:
                best.offer(epoch, evaluated[split], self)
        return evaluated

    # ------------------------------------------------------------------ validations within an epoch
    validates_within_epoch: bool = False
    """Whether :meth:`train_epoch` can validate between its batches (``evaluation.validations_per_epoch`` > 1,
    through :meth:`within_epoch_validations` and :meth:`validate_within_epoch`); systems that cannot refuse it."""

    def within_epoch_validations(self, num_batches: int) -> set[int]:
        """The batch counts of an epoch of ``num_batches`` after which it validates before its end: the
        ``evaluation.validations_per_epoch`` evenly spaced points but the last (the epoch's end), none empty."""
        points = self.spec.evaluation.validations_per_epoch
        return {round(num_batches * k / points) for k in range(1, points)} - {0, num_batches}

    def validate_within_epoch(self, epoch: int, batches: int, num_batches: int, train_s: float) -> float:
        """Validate after ``batches`` of the epoch's ``num_batches`` batches, ``train_s`` seconds of its training
        done; record the point (kind ``within_epoch_eval``) and return the evaluation's seconds, which the caller
        keeps out of the epoch's training time (``EpochStats.extra["within_epoch_eval_s"]``). The caller puts the
        task back into training mode."""
        started = time.perf_counter()
        metrics = self.evaluate("valid")
        seconds = time.perf_counter() - started
        self._within_epoch.append({"epoch": epoch, "batches": batches, "of_batches": num_batches,
                                   "epoch_train_s": train_s, "seconds": seconds, "metrics": metrics})
        self.recorder.record("within_epoch_eval", epoch=epoch, split="valid", batches=batches,
                             of_batches=num_batches, epoch_train_s=train_s, seconds=seconds, **metrics)
        return seconds

    def _add_valid_points(self, outcome: RunOutcome, epoch: int, metrics: dict[str, float] | None) -> None:
        """The epoch's validations, within it and at its end, into ``outcome.valid_points`` with the run's
        training seconds done at each (earlier epochs' training time plus the epoch's own so far)."""
        before = sum(outcome.epoch_time_s[:-1])
        for point in self._within_epoch:
            outcome.eval_time_s.append({"epoch": epoch, "split": "valid", "seconds": point["seconds"],
                                        "batches": point["batches"]})
            outcome.valid_points.append({"epoch": epoch, "batches": point["batches"],
                                         "of_batches": point["of_batches"],
                                         "train_s": before + point["epoch_train_s"], **point["metrics"]})
        if metrics is not None:
            batches = self._within_epoch[0]["of_batches"] if self._within_epoch else None
            outcome.valid_points.append({"epoch": epoch, "batches": batches, "of_batches": batches,
                                         "train_s": before + outcome.epoch_time_s[-1], **metrics})
        self._within_epoch = []

    def _best_parameters(self, resumed: bool) -> BestParameters:
        """The tracker of ``evaluation.restore_best``; a resumed run starts from the best checkpoint the killed
        run wrote (its best epoch may lie before the resume)."""
        best = BestParameters(main_metric(self.spec.training.task))
        run_dir = self._checkpoint_dir()
        if resumed and run_dir is not None and self.checkpoint_task() is not None:
            from suite.checkpoint import checkpoint_path, load_checkpoint

            path = checkpoint_path(run_dir, "best")
            if path.exists():
                state = load_checkpoint(path, map_location=self.device)
                best.seed(state["best"]["epoch"], state["best"]["value"], state["task"])
        return best

    # ------------------------------------------------------------------ best-validation parameters
    restores_best: bool = True
    """Whether the system can restore earlier parameters (``evaluation.restore_best``); False for systems whose
    learnable state lives outside memory (the disk system's link prediction)."""

    def parameter_state(self) -> dict[str, Any]:
        """A copy of the learnable state the evaluations read (the task's, :meth:`Task.state_dict`)."""
        import copy

        return copy.deepcopy(self.task.state_dict())

    def load_parameter_state(self, state: dict[str, Any]) -> None:
        """Put back a state :meth:`parameter_state` returned."""
        self.task.load_state_dict(state)

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
            threads = {} if resumed else {"compute_threads": self._budget.compute}  # what `gnnsuite eval` reuses
            self.recorder.record("eval", epoch=epoch, split="valid", **metrics, **flag, **threads)

    # ------------------------------------------------------------------ checkpoints
    resume: bool = True
    """Continue from the run folder's last checkpoint (the runner sets it False to redo a run, ``--overwrite``)."""

    reevaluating: bool = False
    """Set up to re-evaluate a finished run (``suite.load_model``): keep whatever the run left on disk."""

    def saved_state(self) -> dict[str, Any] | None:
        """A state in the checkpoint format (:mod:`suite.checkpoint`) that the system keeps itself, read after
        :meth:`setup` (the disk system's link prediction: its committed embedding generation); None: the run
        folder's checkpoint files hold it."""
        return None

    def checkpoint_task(self) -> Any:
        """The task whose state the suite's checkpoints save (:mod:`suite.checkpoint`): the system's ``task``,
        unless ``training.checkpoint_every`` is 0 or the run is data-parallel (ranks do not checkpoint). Systems
        that keep their own checkpoints (the disk system's link prediction) override the hooks below instead."""
        options = getattr(self, "options", None)
        if not self.spec.training.checkpoint_every or getattr(options, "world_size", 1) > 1:
            return None
        return getattr(self, "task", None)

    def _checkpoint_dir(self) -> Any:
        """The run folder the checkpoints go into (None for a recorder without one)."""
        return getattr(self.recorder, "run_dir", None)

    def completed_epochs(self) -> list[tuple[float, EpochStats, dict[str, float] | None]]:
        """Epochs a resumed run already finished, as ``(epoch_time_s, stats, valid_metrics or None)`` (called after
        :meth:`setup`; training continues after them): those of the run folder's last checkpoint, whose state
        (task, RNG) is restored here. None without a checkpoint (or with :attr:`resume` off)."""
        from suite.checkpoint import checkpoint_path, load_checkpoint

        task, run_dir = self.checkpoint_task(), self._checkpoint_dir()
        self._history: list[dict[str, Any]] = []
        self._best: dict[str, Any] = {"metric": main_metric(self.spec.training.task), "value": None,
                                      "epoch": None}
        if task is None or run_dir is None or not self.resume:
            return []
        path = checkpoint_path(run_dir, "last")
        if not path.exists():
            return []
        state = load_checkpoint(path, map_location=self.device)
        self.restore_checkpoint(state)
        return [(entry["epoch_time_s"], EpochStats(**entry["stats"]), entry["valid"]) for entry in self._history]

    def restore_checkpoint(self, state: dict[str, Any], check_run: bool = True) -> None:
        """Load a checkpoint's task state, RNG state, history and best value into this (set-up) system
        (``check_run``: the checkpoint must be of this spec's run)."""
        import json

        from suite.errors import DataError
        from suite.checkpoint import set_rng_state

        if check_run and state.get("run_id") != self.spec.run_id:
            raise DataError(f"{self._checkpoint_dir()}: the checkpoint is of run {state.get('run_id')!r}, not "
                            f"{self.spec.run_id!r}")
        (self.checkpoint_task() or self.task).load_state_dict(state["task"])
        set_rng_state(state["rng"])
        self._history = json.loads(state["history_json"])
        self._best = dict(state["best"])

    def completed_tests(self) -> list[tuple[int, dict[str, float], int | None]]:
        """``(epoch, test metrics, compute threads)`` of the test evaluations of the epochs
        :meth:`completed_epochs` restored."""
        return [(entry["epoch"], entry["test"], entry.get("eval_threads"))
                for entry in getattr(self, "_history", []) if entry.get("test")]

    def enter_pass(self, key: PassKey) -> None:
        """Put what the system keeps between passes (beyond the task's state) where an uninterrupted run has it
        before pass ``key`` (after a resume, or before a re-evaluation; nothing by default)."""

    def checkpoint(self, epoch: int, epoch_time_s: float, stats: EpochStats,
                   valid_metrics: dict[str, float] | None, test_metrics: dict[str, float] | None = None) -> None:
        """Make the state after ``epoch`` (and its evaluations) durable, so a killed run can resume after it: the
        best checkpoint when the main validation metric improved, the last one every ``checkpoint_every`` epochs
        and after the last epoch (nothing for systems without checkpoints)."""
        import dataclasses
        import json

        from suite.checkpoint import checkpoint_path, improved, rng_state, save_atomically

        task, run_dir = self.checkpoint_task(), self._checkpoint_dir()
        if task is None or run_dir is None:
            return
        if not hasattr(self, "_history"):
            self._history = []
            self._best = {"metric": main_metric(self.spec.training.task), "value": None, "epoch": None}
        self._history.append({"epoch": epoch, "epoch_time_s": epoch_time_s, "stats": dataclasses.asdict(stats),
                              "valid": valid_metrics, "test": test_metrics,
                              "eval_threads": getattr(getattr(self, "_budget", None), "compute", None)})
        value = (valid_metrics or {}).get(self._best["metric"])
        better = improved(value, self._best["value"])
        if better:
            self._best = {**self._best, "value": float(value), "epoch": epoch}
        every, epochs = self.spec.training.checkpoint_every, self.spec.training.epochs
        last = (epoch + 1) % every == 0 or epoch + 1 == epochs
        if not (better or last):
            return
        state = {"format": 1, "run_id": self.spec.run_id, "epoch": epoch, "epochs": epochs,
                 "task": task.state_dict(), "rng": rng_state(),
                 "history_json": json.dumps(self._history, default=_plain), "best": self._best}
        if better:
            save_atomically(state, checkpoint_path(run_dir, "best"))
        if last:
            save_atomically(state, checkpoint_path(run_dir, "last"))

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


class BestParameters:
    """The parameters of the epoch with the best validation ``metric`` so far (the first of equals), kept in memory
    for ``evaluation.restore_best``.

    Args:
        metric: the validation metric compared (higher is better; NaN never counts).
    """

    def __init__(self, metric: str):
        self.metric = metric
        self.epoch: int | None = None
        self.value: float | None = None
        self.state: dict[str, Any] | None = None
        self.restored = False

    def seed(self, epoch: int | None, value: float | None, state: dict[str, Any]) -> None:
        """Start from an earlier best (a resumed run's best checkpoint)."""
        if epoch is not None and value is not None:
            self.epoch, self.value, self.state = int(epoch), float(value), state

    def offer(self, epoch: int, metrics: dict[str, float] | None, system: System) -> bool:
        """Keep ``system``'s parameters when ``metrics`` beat the best so far; whether they did."""
        from suite.checkpoint import improved

        value = (metrics or {}).get(self.metric)
        if not improved(value, self.value):
            return False
        self.epoch, self.value, self.state = epoch, float(value), system.parameter_state()
        return True

    def restore(self, system: System) -> None:
        """Put the best parameters back into ``system`` (nothing when no validation result counted)."""
        if self.state is not None:
            system.load_parameter_state(self.state)
            self.restored = True

    def describe(self) -> dict[str, Any]:
        """What the summary records: the epoch restored, its validation value, the metric."""
        return {"metric": self.metric, "epoch": self.epoch, "valid": self.value, "restored": self.restored}


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


def _plain(value: Any) -> Any:
    """JSON for numpy scalars and other stragglers in epoch stats."""
    return value.item() if hasattr(value, "item") else str(value)


def _mean(values: list[int]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


__all__ = ["BestParameters", "EpochStats", "PassKey", "RunOutcome", "StageTimer", "System", "SystemOptions", "pass_schedule"]
