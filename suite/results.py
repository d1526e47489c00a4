"""Load a results folder into tidy pandas tables, and export them.

A results folder holds run folders (``OUT/<run_id>/`` with ``config.yaml``, ``records.jsonl`` and ``summary.json``,
see :mod:`suite.recorder`), at any depth: a grid's output, or a folder of grids. Three tables come out of it:

- :func:`load_runs`: one row per run. ``summary.json`` flattened (nested mappings become dotted columns:
  ``metrics.test.accuracy``, ``cost_usd.run``, ``stage_busy_s.compute``; lists such as ``epoch_time_s`` stay
  lists), the resolved spec flattened under ``config.`` (``config.training.learning_rate``: the grid axes), and
  ``run_dir``. Runs without ``summary.json`` (still running, or killed) have status ``"incomplete"``; they are
  included unless ``include_incomplete=False``. Failed runs have status ``"failed"`` and an ``error``.
- :func:`load_epochs`: one row per epoch record of ``records.jsonl`` (``epoch``, ``epoch_time_s``, ``examples``,
  ``sampled_edges``, ``loss``, ``stage_busy_s.<stage>``...), with the run's key fields.
- :func:`load_evals`: one row per evaluation record (``epoch``, ``split``, ``accuracy`` or ``mrr`` / ``hits@k``),
  with the run's key fields.

Key fields, on every row of the last two: ``run_id``, ``status``, ``name``, ``system``, ``dataset`` (the preset
or the dataset name), ``task``, ``model``, ``sampler``, ``seed``, plus any resolved-spec fields asked for with
``config_fields`` (dotted: ``training.learning_rate``), as ``config.<field>`` columns. They come from the run's
``config.yaml``, so incomplete runs have them too.

:func:`export` writes a table as CSV or Parquet (by the file's suffix), atomically; cells holding lists or
mappings are written as JSON text. :func:`load_table` reads such a file back.

A missing folder, or a ``summary.json`` / ``config.yaml`` that cannot be parsed, is a one-line
:class:`~suite.errors.DataError` naming the file.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from suite.errors import ConfigError, DataError
from suite.io import atomic_write_bytes, strict_json_dumps
from suite.config import flatten
from suite.recorder import CONFIG_FILE, RECORDS_FILE, SUMMARY_FILE, read_records

INCOMPLETE = "incomplete"
KEY_FIELDS = ("run_id", "status", "name", "system", "dataset", "task", "model", "sampler", "seed")
_CSV_SUFFIXES = (".csv",)
_PARQUET_SUFFIXES = (".parquet", ".pq")


# ---------------------------------------------------------------------------------------------- helpers
def run_dirs(root: str | os.PathLike) -> list[Path]:
    """Run folders under ``root`` (``root`` itself included), sorted; hidden folders are skipped.

    A run folder holds ``summary.json``, or ``config.yaml`` and ``records.jsonl`` (a run that started).

    Raises:
        DataError: ``root`` is not a folder.
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root}: results folder not found")
    found = []
    for current, dirs, files in os.walk(root):
        names = set(files)
        if SUMMARY_FILE in names or {CONFIG_FILE, RECORDS_FILE} <= names:
            found.append(Path(current))
            dirs[:] = []  # runs do not nest
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    return sorted(found)


def _read_summary(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / SUMMARY_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        summary = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: corrupt summary (invalid JSON at line {err.lineno}: {err.msg})") from None
    if not isinstance(summary, dict):
        raise DataError(f"{path}: corrupt summary (expected a JSON object, got {type(summary).__name__})")
    return summary


def _read_config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / CONFIG_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise DataError(f"{path}: corrupt run config ({getattr(err, 'problem', err)})") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise DataError(f"{path}: corrupt run config (expected a mapping, got {type(config).__name__})")
    return config


def _get(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _key_fields(run_dir: Path, config: Mapping[str, Any], summary: Mapping[str, Any] | None,
                config_fields: Sequence[str]) -> dict[str, Any]:
    """The key fields of a run, from its resolved spec (falling back on its summary)."""
    summary = summary or {}
    dataset = _get(config, "dataset.preset") or _get(config, "dataset.name")
    keys = {
        "run_id": summary.get("run_id") or run_dir.name,
        "status": summary.get("status", INCOMPLETE) if summary else INCOMPLETE,
        "name": config.get("name", summary.get("name")),
        "system": _get(config, "system.name") or summary.get("system"),
        "dataset": dataset or summary.get("dataset"),
        "task": _get(config, "training.task") or summary.get("task"),
        "model": _get(config, "model.encoder") or summary.get("model"),
        "sampler": _get(config, "sampler.name") or summary.get("sampler"),
        "seed": config.get("seed", summary.get("seed")),
    }
    for field in config_fields:
        keys[f"config.{field}"] = _get(config, field)
    return keys


def _frame(rows: list[dict[str, Any]], leading: Sequence[str]) -> pd.DataFrame:
    columns: dict[str, None] = dict.fromkeys(leading)
    for row in rows:
        columns.update(dict.fromkeys(row))
    return pd.DataFrame(rows, columns=list(columns))


# ---------------------------------------------------------------------------------------------- tables
def load_runs(root: str | os.PathLike, *, include_incomplete: bool = True) -> pd.DataFrame:
    """One row per run folder under ``root``: its summary flattened, its resolved spec as ``config.*`` columns.

    Args:
        root: a results folder (searched recursively).
        include_incomplete: keep runs without ``summary.json`` (status ``"incomplete"``, with their ``config.*``
            columns and no measurements); with False, only finished runs (completed or failed) are returned.

    Returns:
        A DataFrame with ``run_id``, ``status`` and ``run_dir`` first, then the summary's columns in their order,
        then ``config.*``; sorted by ``run_dir``.

    Raises:
        DataError: ``root`` is missing, or a ``summary.json`` or ``config.yaml`` is corrupt (the message names it).
    """
    rows = []
    for run_dir in run_dirs(root):
        summary = _read_summary(run_dir)
        if summary is None and not include_incomplete:
            continue
        config = _read_config(run_dir)
        row: dict[str, Any] = {
            "run_id": (summary or {}).get("run_id") or run_dir.name,
            "status": (summary or {}).get("status", INCOMPLETE) if summary else INCOMPLETE,
            "run_dir": str(run_dir),
        }
        if summary:
            row.update({k: v for k, v in flatten(summary).items() if k not in ("run_id", "run_dir")})
        else:
            keys = _key_fields(run_dir, config, None, ())
            row.update({k: v for k, v in keys.items() if k not in row})
        row.update(flatten(config, "config."))
        rows.append(row)
    return _frame(rows, ("run_id", "status", "run_dir"))


def _records(root: str | os.PathLike, kind: str, config_fields: Sequence[str]) -> Iterator[dict[str, Any]]:
    for run_dir in run_dirs(root):
        records = [r for r in read_records(run_dir) if r.get("kind") == kind]
        if not records:
            continue
        keys = _key_fields(run_dir, _read_config(run_dir), _read_summary(run_dir), config_fields)
        for record in records:
            fields = flatten({k: v for k, v in record.items() if k != "kind"})
            yield {**keys, "run_dir": str(run_dir), **fields}


def _record_frame(root: str | os.PathLike, kind: str, config_fields: Sequence[str],
                  first: Sequence[str]) -> pd.DataFrame:
    """The ``kind`` records of every run under ``root``: the key fields, the ``config.*`` fields, ``run_dir`` and
    ``first`` lead, the records' own fields follow."""
    leading = (*KEY_FIELDS, *(f"config.{f}" for f in config_fields), "run_dir", *first)
    return _frame(list(_records(root, kind, config_fields)), leading)


def load_epochs(root: str | os.PathLike, *, config_fields: Sequence[str] = ()) -> pd.DataFrame:
    """One row per epoch record of every run under ``root`` (long format), with the run's key fields.

    Args:
        root: a results folder (searched recursively).
        config_fields: dotted resolved-spec fields to add as ``config.<field>`` columns
            (``("training.learning_rate",)``).

    Returns:
        Columns: the key fields, ``run_dir``, then the record's (``epoch``, ``epoch_time_s``, ``examples``,
        ``sampled_edges``, ``loss``, ``stage_busy_s.<stage>``, ``time``...). Runs still going contribute the
        epochs they recorded.

    Raises:
        DataError: ``root`` is missing or a run's files are corrupt.
    """
    return _record_frame(root, "epoch", config_fields, ("epoch",))


def load_evals(root: str | os.PathLike, *, config_fields: Sequence[str] = ()) -> pd.DataFrame:
    """One row per evaluation record of every run under ``root``, with the run's key fields.

    Args:
        root: a results folder (searched recursively).
        config_fields: dotted resolved-spec fields to add as ``config.<field>`` columns.

    Returns:
        Columns: the key fields, ``run_dir``, ``epoch``, ``split`` (``valid`` / ``test``) and the metrics
        (``accuracy``, or ``mrr`` and ``hits@k``).

    Raises:
        DataError: ``root`` is missing or a run's files are corrupt.
    """
    return _record_frame(root, "eval", config_fields, ("epoch", "split"))


def load_batches(root: str | os.PathLike, *, config_fields: Sequence[str] = ()) -> pd.DataFrame:
    """One row per ``batch`` record (pipelined runs) of every run under ``root``, with the run's key fields.

    Args:
        root: a results folder (searched recursively).
        config_fields: dotted resolved-spec fields to add as ``config.<field>`` columns.

    Returns:
        Columns: the key fields, ``run_dir``, ``epoch``, ``index``, ``admitted``, ``<stage>_start``,
        ``<stage>_end``, ``<stage>_worker`` (seconds from the epoch's start), ``version_read``,
        ``version_applied``, ``staleness``, ``loss``, ``sampled_edges``...

    Raises:
        DataError: ``root`` is missing or a run's files are corrupt.
    """
    return _record_frame(root, "batch", config_fields, ("epoch", "index"))


def load_queue_occupancy(root: str | os.PathLike) -> pd.DataFrame:
    """One row per queue-occupancy sample of every pipelined run under ``root`` (long format).

    Returns:
        Columns: the key fields, ``run_dir``, ``epoch``, ``queue`` (the stage the queue feeds), ``time`` (seconds
        from the epoch's start) and ``size`` (batches in the queue after a put or get).
    """
    rows = []
    for record in _records(root, "queues", ()):
        keys = {k: v for k, v in record.items() if not k.startswith("occupancy.") and k != "time"}
        for name in (k for k in record if k.startswith("occupancy.")):
            rows.extend({**keys, "queue": name.removeprefix("occupancy."), "time": t, "size": size}
                        for t, size in record[name])
    return _frame(rows, (*KEY_FIELDS, "run_dir", "epoch", "queue"))


def load_timeline(root: str | os.PathLike) -> pd.DataFrame:
    """One row per interval of the disk system's state timelines (``state`` records) of every run under ``root``.

    Returns:
        Columns: the key fields, ``run_dir``, ``pass`` (``train``, ``valid``, ``test``), ``epoch``, ``state``,
        ``activity`` (``read``, ``build``, ``wait``, ``compute``), ``what`` (for reads: ``features``,
        ``embeddings`` or ``buckets``; for waits: what compute waited on), ``partition`` (reads of a partition),
        ``lane`` (``prefetch`` when the prefetch thread did it, else ``compute``), ``start`` and ``end`` (seconds
        from the run's start) and ``bytes``.
    """
    rows = []
    for record in _records(root, "state", ()):
        base = {k: record[k] for k in (*KEY_FIELDS, "run_dir", "pass", "epoch", "state") if k in record}
        for read in record.get("reads", []):
            rows.append({**base, "activity": "read", "what": read["what"], "partition": read["partition"],
                         "lane": "prefetch" if read["ahead"] else "compute", "start": read["start"],
                         "end": read["end"], "bytes": read["bytes"]})
        rows.append({**base, "activity": "build", "lane": "prefetch" if record["build_ahead"] else "compute",
                     "start": record["build_start"], "end": record["build_end"], "bytes": 0})
        rows.append({**base, "activity": "wait", "what": record["waited_on"], "lane": "compute",
                     "start": record["wait_start"], "end": record["wait_end"], "bytes": 0})
        rows.append({**base, "activity": "compute", "lane": "compute", "start": record["compute_start"],
                     "end": record["compute_end"], "bytes": 0})
    return _frame(rows, (*KEY_FIELDS, "run_dir", "pass", "epoch", "state", "activity"))


# ---------------------------------------------------------------------------------------------- files
def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in _CSV_SUFFIXES:
        return "csv"
    if suffix in _PARQUET_SUFFIXES:
        return "parquet"
    raise ConfigError(f"{path}: unsupported table format {suffix or '(no suffix)'!r} (use .csv or .parquet)")


def _as_text(value: Any) -> Any:
    if isinstance(value, (list, tuple, dict)):
        return strict_json_dumps(value, default=str)
    return value


def export(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``df`` to ``path`` as CSV (``.csv``) or Parquet (``.parquet``, ``.pq``), atomically.

    The index is not written. Cells holding lists or mappings (``epoch_time_s``, ``metrics.valid_curve``) are
    written as JSON text, in both formats. Parent folders are created.

    Returns:
        The path written.

    Raises:
        ConfigError: the suffix is neither.
    """
    path = Path(path)
    kind = _format(path)
    table = df.copy()
    for column in table.columns:
        if table[column].dtype == object:
            table[column] = table[column].map(_as_text)
    buffer = io.BytesIO()
    if kind == "csv":
        buffer.write(table.to_csv(index=False).encode())
    else:
        table.to_parquet(buffer, index=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buffer.getvalue())
    return path


def load_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a table written by :func:`export` (by suffix); JSON-text cells stay text.

    Raises:
        DataError: the file is missing or unreadable. ConfigError: the suffix is neither CSV nor Parquet.
    """
    path = Path(path)
    kind = _format(path)
    if not path.is_file():
        raise DataError(f"{path}: table not found")
    try:
        return pd.read_csv(path) if kind == "csv" else pd.read_parquet(path)
    except Exception as err:  # noqa: BLE001  (pandas/pyarrow raise many types for a bad file)
        raise DataError(f"{path}: cannot read {kind} table ({type(err).__name__}: {err})") from None


__all__ = ["KEY_FIELDS", "export", "flatten", "load_batches", "load_epochs", "load_evals", "load_queue_occupancy",
           "load_runs", "load_table", "load_timeline", "run_dirs"]
