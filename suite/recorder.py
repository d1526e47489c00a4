"""Structured records of one run: ``config.yaml``, ``records.jsonl`` and ``summary.json`` under ``OUT/<run_id>/``.

- ``config.yaml``: the fully resolved spec, written (atomically) when the run starts.
- ``records.jsonl``: one JSON object per line (``{"kind": "epoch", ...}``, ``{"kind": "eval", ...}``), flushed
  as it goes, so a killed run keeps what it had recorded.
- ``summary.json``: written atomically at the end; its ``status`` is ``"completed"``, ``"failed"`` or
  ``"diverged"`` (the training loss became NaN or infinite; the run stopped there). A run is complete exactly
  when ``summary.json`` exists with status ``completed``; a folder without it is redone.

One writer per run folder: the recorder holds the folder's lock file (``.lock``, with the writer's pid) from
:meth:`Recorder.open` until the summary is written or :meth:`Recorder.close`; a second process writing the same run
gets a one-line :class:`~suite.errors.LockedError` naming the first one's pid, before it changes anything. The lock
of a writer that died is taken over.

Strict JSON: every file and record is written with ``allow_nan=False``. A non-finite number (a NaN accuracy of a
missing split, say) is written as ``null`` and listed under ``non_finite`` (``{"metrics.test.accuracy": "nan"}``)
in the same record or summary, so readers see both that it is missing and why.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from suite.config import RunSpec
from suite.errors import DataError, DivergedError, describe_os_error
from suite.io import (atomic_write_bytes, atomic_write_json, close_quietly, exclusive_lock, flush_to, json_safe,
                      open_write, write_to)

SUMMARY_FILE = "summary.json"
RECORDS_FILE = "records.jsonl"
CONFIG_FILE = "config.yaml"
LOCK_FILE = ".lock"
COMPLETED = "completed"
FAILED = "failed"
DIVERGED = "diverged"


def read_summary(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The run's summary, or None when the run has none (never finished) or it cannot be read or parsed."""
    path = Path(run_dir) / SUMMARY_FILE
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def is_complete(run_dir: str | os.PathLike) -> bool:
    """Whether the run finished successfully (its summary says ``completed``)."""
    summary = read_summary(run_dir)
    return summary is not None and summary.get("status") == COMPLETED


def completed_run(out: str | os.PathLike, spec: RunSpec) -> Path | None:
    """The folder under ``out`` holding a completed run of ``spec``: ``out/<run_id>``, or a folder recorded before
    run ids came from :meth:`RunSpec.identity` (``out/<legacy_run_id>``, still read and skipped); None if neither.
    """
    for run_id in dict.fromkeys((spec.run_id, spec.legacy_run_id)):
        if is_complete(Path(out) / run_id):
            return Path(out) / run_id
    return None


def read_records(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """Every record of a run, in order; a torn last line (a killed run) is ignored."""
    path = Path(run_dir) / RECORDS_FILE
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


def strict_record(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` ready for strict JSON: non-finite numbers as ``None``, listed under ``non_finite``."""
    clean, non_finite = json_safe(fields)
    if non_finite:
        clean["non_finite"] = {**clean.get("non_finite", {}), **non_finite} \
            if isinstance(clean.get("non_finite"), dict) else non_finite
    return clean


class Recorder:
    """Writes one run's folder. Create it at the start of the run; call :meth:`finish`, :meth:`diverge` or
    :meth:`fail` at the end.

    Args:
        out: the results folder; the run goes to ``out/<spec.run_id>``.
        spec: the run's spec.
        open: create the folder, take its lock and write ``config.yaml`` now (:meth:`open`); the runner passes
            False and opens it once everything was validated, so bad input never leaves a folder.

    Raises:
        LockedError: another live process is writing this run folder.
    """

    def __init__(self, out: str | os.PathLike, spec: RunSpec, open: bool = True, log_to: tuple[str, ...] = ()):
        self.spec = spec
        self.run_id = spec.run_id
        self.run_dir = Path(out) / self.run_id
        self._records = None
        self._lock: contextlib.ExitStack | None = None
        self.log_to = tuple(log_to)
        self._trackers = None
        self.started = time.time()
        if open:
            self.open()

    def open(self) -> None:
        """Create the run folder, take its lock, remove an old summary, write ``config.yaml``, start the records."""
        if self._lock is not None:
            return
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            lock = contextlib.ExitStack()
            lock.enter_context(exclusive_lock(self.run_dir / LOCK_FILE, f"run folder {self.run_dir}"))
        except OSError as err:
            raise DataError(f"{self.run_dir}: cannot create the run folder ({describe_os_error(err)})") from None
        try:
            (self.run_dir / SUMMARY_FILE).unlink(missing_ok=True)
            atomic_write_bytes(self.run_dir / CONFIG_FILE, self.spec.to_yaml().encode())
            self._records = open_write(self.run_dir / RECORDS_FILE, "w")
        except OSError as err:
            lock.close()
            raise DataError(f"{err.filename or self.run_dir}: cannot write the run folder "
                            f"({describe_os_error(err)})") from None
        except BaseException:
            lock.close()
            raise
        self._lock = lock
        self.started = time.time()
        if self.log_to:  # trackers (suite.tracking) mirror the records; they never fail the run
            from suite.tracking import TrackerFanout, make_trackers

            try:
                self._trackers = TrackerFanout(make_trackers(self.log_to, self.run_dir, self.spec))
            except BaseException:
                self.close()
                raise

    def record(self, kind: str, **fields: Any) -> None:
        """Append one record (``kind`` plus fields, with a wall-clock ``time``) and flush it."""
        record = strict_record({"kind": kind, "time": time.time(), **fields})
        line = json.dumps(record, allow_nan=False)
        write_to(self._records, line + "\n", self.run_dir / RECORDS_FILE)
        flush_to(self._records, self.run_dir / RECORDS_FILE)
        if self._trackers is not None:
            self._trackers.record(kind, record)

    def finish(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Write ``summary.json`` with status ``completed``; return it."""
        return self._write_summary({**summary, "status": COMPLETED})

    def fail(self, error: BaseException, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write ``summary.json`` with status ``failed`` and the error; return it."""
        return self._write_summary({**(summary or {}), "status": FAILED, "error": f"{type(error).__name__}: {error}"})

    def diverge(self, error: DivergedError, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write ``summary.json`` with status ``diverged``, the error and where the loss became non-finite."""
        return self._write_summary({**(summary or {}), "status": DIVERGED, "error": f"{type(error).__name__}: {error}",
                                    "diverged": {"epoch": error.epoch, "batch": error.batch, "loss": error.loss}})

    def _write_summary(self, summary: dict[str, Any]) -> dict[str, Any]:
        self.open()  # a run that failed before it started still gets its folder (the grid records failures)
        try:
            close_quietly(self._records)  # every record was flushed when written
            summary = strict_record({"run_id": self.run_id, **summary})
            atomic_write_json(self.run_dir / SUMMARY_FILE, summary)
            if self._trackers is not None:
                self._trackers.summary(summary)
            return summary
        finally:
            self._release()

    def close(self) -> None:
        """Close the records file and release the folder's lock (idempotent)."""
        if self._records is not None:
            self._records.close()
        self._release()

    def _release(self) -> None:
        if self._trackers is not None:
            self._trackers.close()
            self._trackers = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
