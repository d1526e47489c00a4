"""``gnnsuite report DIR --against REF``: a reproduction against the committed reference, claim by claim and table
by table, as a researcher checks it after changing a system.

- **Claims**: every registered claim (:mod:`experiments.report`) is evaluated on both folders; a changed verdict
  is shown, and every estimate the claims decided on is matched by name: a change is **flagged** when its interval
  does not overlap the reference's (overlapping intervals, or one that is not defined, are no evidence of a
  change).
- **Tables**: every table a registered figure lists (:func:`tables`) present in either folder; rows are matched on
  the table's key columns. Every interval column (``X`` stored with ``X_ci_low`` and ``X_ci_high``) is compared row
  by row, a change flagged when the intervals do not overlap, except absolute times and rates (seconds, bytes per
  second: :func:`machine_dependent`), which move with the machine's speed: they are listed, never flagged, and the
  ratios and accuracies beside them carry the comparison (so are the columns a table names in
  ``TableSpec.machine_dependent`` and, among the claims, the estimates marked ``machine_dependent``: a simulator's
  projection calibrated on this machine's measured stages, whose interval covers the simulator's seeds only); the
  value columns of deterministic tables (simulations, formulas, exact counts: ``exact``) are flagged when they
  differ by more than a relative 1e-6; rows present on one side only are listed (and flagged). Tables without
  intervals or exact columns are compared by their rows only.

The comparison is pure (it reads the two folders' tables). :func:`compare` returns a :class:`Comparison` whose
``text()`` is what the command prints; ``flagged`` counts the changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from experiments.report import Finding, findings
from suite.errors import DataError
from suite.stats import Interval


@dataclass(frozen=True)
class TableSpec:
    """How to compare one table: the columns that identify a row, the value columns compared exactly, and interval
    columns that move with the machine although they are not absolute times (listed, never flagged, as
    :func:`machine_dependent` columns are)."""

    keys: tuple[str, ...]
    exact: tuple[str, ...] = ()
    machine_dependent: tuple[str, ...] = ()


def tables() -> dict[str, TableSpec]:
    """The tables compared, by file name: those listed by every registered figure
    (:data:`experiments.plugins.FIGURES`), in its order."""
    from experiments.plugins import figures

    return {name: spec for figure in figures() for name, spec in figure.tables.items()}

RELATIVE_TOLERANCE = 1e-6


@dataclass
class Comparison:
    """The outcome: lines of text per section, and how many changes were flagged."""

    new: Path
    reference: Path
    claims: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    flagged: int = 0

    def text(self) -> str:
        """The comparison as plain text (what ``gnnsuite report --against`` prints)."""
        head = [f"comparison of {self.new} against the reference {self.reference}",
                f"{self.flagged} change(s) flagged (intervals that do not overlap the reference's, changed "
                "verdicts, changed exact values, rows on one side only)", ""]
        return "\n".join(head + ["claims:"] + self.claims + ["", "tables:"] + self.tables) + "\n"


def results_folder(path: str | Path) -> Path:
    """The folder holding the tables: ``path`` itself, or ``path/results`` for a reproduction folder
    (``gnnsuite reproduce --out DIR``). ``DataError`` when neither holds a table."""
    path = Path(path)
    for candidate in (path, path / "results"):
        if candidate.is_dir() and (any(candidate.glob("*.csv")) or (candidate / "REPORT.md").exists()):
            return candidate
    raise DataError(f"{path}: no results folder (no tables, no REPORT.md, and no results/ inside)")


def _estimates(finding: Finding) -> dict[str, Interval]:
    return {estimate.name: estimate.interval for estimate in finding.estimates}


def compare_claims(new: dict[str, Finding], reference: dict[str, Finding]) -> tuple[list[str], int]:
    """Lines and flag count of the claim-by-claim comparison."""
    lines, flagged = [], 0
    for name in dict.fromkeys([*reference, *new]):
        old, now = reference.get(name), new.get(name)
        if old is None or now is None:
            lines.append(f"  {name}: only in the {'reproduction' if old is None else 'reference'}  [FLAGGED]")
            flagged += 1
            continue
        changed = old.verdict != now.verdict
        flagged += changed
        lines.append(f"  {name}: {old.verdict} -> {now.verdict}" + ("  [FLAGGED: verdict changed]" if changed
                                                                      else ""))
        before, after = _estimates(old), _estimates(now)
        moves_with_machine = {e.name for finding in (old, now) for e in finding.estimates if e.machine_dependent}
        for key in dict.fromkeys([*before, *after]):
            if key not in before or key not in after:
                lines.append(f"    {key}: {'new' if key not in before else 'gone'}")
                continue
            if key in moves_with_machine:
                lines.append(f"    {key}: {before[key]} -> {after[key]}  (moves with the machine: not flagged)")
                continue
            moved = not after[key].overlaps(before[key])
            flagged += moved
            lines.append(f"    {key}: {before[key]} -> {after[key]}" + ("  [FLAGGED: intervals do not overlap]"
                                                                        if moved else ""))
    return lines, flagged


def _interval_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if f"{c}_ci_low" in table.columns and f"{c}_ci_high" in table.columns]


def machine_dependent(column: str) -> bool:
    """Whether a column measures an absolute time or rate (``epoch_time_s``, ``time_s``, ``..._bytes_per_s``,
    ``..._bandwidth...``): its value moves with the machine, so a reproduction elsewhere is not compared on it."""
    return column.endswith(("_s", "_seconds")) or "bandwidth" in column


def _row_label(keys: Sequence[str], index) -> str:
    values = index if isinstance(index, tuple) else (index,)
    return ", ".join(f"{k}={v}" for k, v in zip(keys, values))


def _close(a, b) -> bool:
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)
    if math.isnan(x) and math.isnan(y):
        return True
    return math.isclose(x, y, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-12)


def compare_table(name: str, new: pd.DataFrame, reference: pd.DataFrame, spec: TableSpec) -> tuple[list[str], int]:
    """Lines and flag count of one table's comparison (see the module docstring)."""
    keys = [k for k in spec.keys if k in new.columns and k in reference.columns]
    if not keys:
        return [f"  {name}: no key columns in common; not compared"], 0
    old = reference.drop_duplicates(keys).set_index(keys)
    now = new.drop_duplicates(keys).set_index(keys)
    lines, flagged = [], 0
    only_new = [i for i in now.index if i not in old.index]
    only_old = [i for i in old.index if i not in now.index]
    for index in only_new:
        lines.append(f"    {_row_label(keys, index)}: only in the reproduction  [FLAGGED]")
    for index in only_old:
        lines.append(f"    {_row_label(keys, index)}: only in the reference  [FLAGGED]")
    flagged += len(only_new) + len(only_old)
    common = [i for i in now.index if i in old.index]
    shared = [c for c in _interval_columns(now) if c in _interval_columns(old)]
    absolute = [c for c in shared if machine_dependent(c)]
    calibrated = [c for c in shared if c in spec.machine_dependent and c not in absolute]
    columns = [c for c in shared if c not in absolute and c not in calibrated]
    compared = 0
    for index in common:
        for column in columns:
            before = _interval(old.loc[index], column)
            after = _interval(now.loc[index], column)
            if not (before.defined and after.defined):
                continue
            compared += 1
            if not after.overlaps(before):
                flagged += 1
                lines.append(f"    {_row_label(keys, index)}: {column} {before} -> {after}  [FLAGGED: intervals do "
                             "not overlap]")
        for column in spec.exact:
            if column in old.columns and column in now.columns:
                compared += 1
                if not _close(old.loc[index, column], now.loc[index, column]):
                    flagged += 1
                    lines.append(f"    {_row_label(keys, index)}: {column} {old.loc[index, column]} -> "
                                 f"{now.loc[index, column]}  [FLAGGED: exact value changed]")
    what = (f"{len(common)} rows matched, {compared} intervals/exact values compared"
            + (f" ({', '.join(columns + [c for c in spec.exact if c in now.columns])})" if compared else
               " (no intervals or exact values in common)"))
    if absolute:
        what += f"; absolute times not compared ({', '.join(absolute)}: they move with the machine)"
    if calibrated:
        what += f"; not compared ({', '.join(calibrated)}: they move with the machine the table was calibrated on)"
    changed = sum(1 for line in lines if "[FLAGGED" in line)
    return [f"  {name}: {what}; {changed} flagged"] + lines, flagged


def _interval(row: pd.Series, column: str) -> Interval:
    def number(key: str) -> float:
        value = row.get(key)
        try:
            return float(value)
        except (TypeError, ValueError):
            return math.nan

    return Interval(number(column), number(f"{column}_ci_low"), number(f"{column}_ci_high"), 2, "table")


def compare(new: str | Path, reference: str | Path) -> Comparison:
    """Compare the results folder (or reproduction folder) ``new`` with ``reference``."""
    new_dir, reference_dir = results_folder(new), results_folder(reference)
    result = Comparison(new_dir, reference_dir)
    result.claims, flagged = compare_claims(findings(new_dir), findings(reference_dir))
    result.flagged += flagged
    for name, spec in tables().items():
        paths = new_dir / name, reference_dir / name
        present = [p.exists() for p in paths]
        if not any(present):
            continue
        if not all(present):
            result.tables.append(f"  {name}: only in the {'reproduction' if present[0] else 'reference'}  "
                                 "[FLAGGED]")
            result.flagged += 1
            continue
        lines, flagged = compare_table(name, pd.read_csv(paths[0]), pd.read_csv(paths[1]), spec)
        result.tables += lines
        result.flagged += flagged
    return result


__all__ = ["Comparison", "TableSpec", "compare", "compare_claims", "compare_table", "results_folder", "tables"]
