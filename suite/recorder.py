"""Structured records of one run: ``config.yaml``, ``records.jsonl`` and ``summary.json`` under ``OUT/<run_id>/``.

- ``config.yaml``: the fully resolved spec, written (atomically) when the run starts.
- ``records.jsonl``: one JSON object per line (``{"kind": "epoch", ...}``, ``{"kind": "eval", ...}``), flushed
  as it goes, so a killed run keeps what it had recorded.
- ``summary.json``: written atomically at the end; its ``status`` is ``"completed"`` or ``"failed"``. A run is
  complete exactly when ``summary.json`` exists with status ``completed``; a folder without it is redone.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from suite.config import RunSpec
from suite.io import atomic_write_bytes, atomic_write_json

SUMMARY_FILE = "summary.json"
RECORDS_FILE = "records.jsonl"
CONFIG_FILE = "config.yaml"
COMPLETED = "completed"
FAILED = "failed"


def read_summary(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The run's summary, or None when the run has none (never finished) or it cannot be parsed."""
    path = Path(run_dir) / SUMMARY_FILE
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def is_complete(run_dir: str | os.PathLike) -> bool:
    """Whether the run finished successfully (its summary says ``completed``)."""
    summary = read_summary(run_dir)
    return summary is not None and summary.get("status") == COMPLETED


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


class Recorder:
    """Writes one run's folder. Create it at the start of the run; call :meth:`finish` or :meth:`fail` at the end.

    Args:
        out: the results folder; the run goes to ``out/<spec.run_id>``.
        spec: the run's spec.
    """

    def __init__(self, out: str | os.PathLike, spec: RunSpec):
        self.spec = spec
        self.run_id = spec.run_id
        self.run_dir = Path(out) / self.run_id
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / SUMMARY_FILE).unlink(missing_ok=True)
        atomic_write_bytes(self.run_dir / CONFIG_FILE, spec.to_yaml().encode())
        self._records = open(self.run_dir / RECORDS_FILE, "w")
        self.started = time.time()

    def record(self, kind: str, **fields: Any) -> None:
        """Append one record (``kind`` plus fields, with a wall-clock ``time``) and flush it."""
        line = json.dumps({"kind": kind, "time": time.time(), **fields}, default=_jsonable)
        self._records.write(line + "\n")
        self._records.flush()

    def finish(self, summary: dict[str, Any]) -> dict[str, Any]:
        """Write ``summary.json`` with status ``completed``; return it."""
        return self._write_summary({**summary, "status": COMPLETED})

    def fail(self, error: BaseException, summary: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write ``summary.json`` with status ``failed`` and the error; return it."""
        return self._write_summary({**(summary or {}), "status": FAILED, "error": f"{type(error).__name__}: {error}"})

    def _write_summary(self, summary: dict[str, Any]) -> dict[str, Any]:
        self._records.close()
        summary = {"run_id": self.run_id, **summary}
        atomic_write_json(self.run_dir / SUMMARY_FILE, json.loads(json.dumps(summary, default=_jsonable)))
        return summary

    def close(self) -> None:
        """Close the records file (idempotent)."""
        self._records.close()


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
