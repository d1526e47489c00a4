"""``REPORT.md``: the paper's claims, each decided from the recorded tables of a results folder, with intervals.

A claim (:class:`Claim`, made with :func:`claim` in its figure's module and listed in that module's
:class:`~experiments.common.Figure`; :func:`claims` gathers those of every figure registered in
:data:`experiments.plugins.FIGURES`) names the paper's statement, the tables it reads, and one pure function of the
results folder that returns a :class:`Finding`: what was measured (each figure with its 95 % confidence interval),
in which setting, the named :class:`Estimate` objects it decided from (``gnnsuite report --against`` compares them
with the reference's), and a verdict (:mod:`suite.stats`):

- ``holds`` / ``does not hold``: the interval of every quantity the claim needs lies on one side of its threshold;
- ``inconclusive``: an interval straddles its threshold, is not defined (one seed, one repeat), or comes from
  fewer seeds than the claim needs (3 for accuracy);
- ``not testable here``: the machine lacks what the claim needs (an accelerator), or its table was not recorded;
  the finding says why (``reason``) and, where the simulator can, shows its projection for a named machine
  profile, labelled as a projection.

No verdict comes from a point estimate: a ``holds`` or ``does not hold`` without one defined interval among the
finding's estimates is turned into ``inconclusive`` (:meth:`Claim.evaluate`). Timing claims leave out the rows
measured under foreign load (``under_load``, :mod:`suite.load`) and say how many they left out.

To add a claim: one more function in its figure's module that reads its table(s) and returns a :class:`Finding`,
decorated with :func:`claim` and listed in the module's ``FIGURE``. Every number in the report comes from the
tables; the report is written atomically.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from suite.io import atomic_write_bytes
from suite.load import measured_under_load
from suite.registry import Registry
from suite.stats import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, VERDICTS, Interval, below, combine, within

MIN_SEEDS = 3
"""Seeds an accuracy claim needs before it can hold or fail."""


@dataclass(frozen=True)
class Estimate:
    """One quantity a claim is decided on: its name (stable across runs: ``report --against`` matches on it),
    its interval, and the condition it is held to (``> 1``, ``<= 0.10``...)."""

    name: str
    interval: Interval
    condition: str = ""
    machine_dependent: bool = False
    """Moves with the machine it was measured on beyond what its interval covers (a projection calibrated on this
    machine's measured stages, its interval over simulator seeds only): ``report --against`` lists it, never flags
    it."""


@dataclass(frozen=True)
class Finding:
    """What a claim's check found.

    Attributes:
        measured: the measured figures, each with its 95 % interval, as text.
        setting: the setting they were measured in.
        verdict: one of :data:`suite.stats.VERDICTS`.
        estimates: the quantities the verdict was decided on.
        reason: why the claim is not testable here, or why it is inconclusive.
        excluded: what was left out (runs measured under load), as text.
    """

    measured: str
    setting: str
    verdict: str
    estimates: tuple[Estimate, ...] = ()
    reason: str = ""
    excluded: str = ""


@dataclass(frozen=True)
class Claim:
    """A claim of the paper and its check.

    Attributes:
        name: short identifier.
        statement: what the paper claims (and where).
        source: the table(s) it needs; a missing one makes it ``not testable here``.
        check: ``check(results_dir) -> Finding``; called only when every source file exists.
        peer: a claim against an outside system (a peer) rather than one of the paper's: the report lists it after
            the paper's claims.
    """

    name: str
    statement: str
    source: tuple[str, ...]
    check: Callable[[Path], Finding]
    peer: bool = False

    def evaluate(self, results: Path) -> Finding:
        """The finding on the tables under ``results`` (see the module docstring for the rules it enforces)."""
        missing = [name for name in self.source if not (Path(results) / name).exists()]
        if missing:
            return Finding("not measured", "", NOT_TESTABLE,
                           reason=f"{', '.join(missing)} missing (the job that writes it did not run)")
        try:
            finding = self.check(Path(results))
        except KeyError as err:  # a table written by an older version, without the columns the check needs
            return Finding("cannot be decided from these tables", "", INCONCLUSIVE,
                           reason=f"column {err} missing (a table recorded before intervals were added?)")
        if finding.verdict not in VERDICTS:
            raise ValueError(f"claim {self.name}: verdict {finding.verdict!r} is not one of {', '.join(VERDICTS)}")
        if finding.verdict in (HOLDS, FAILS) and not any(e.interval.defined for e in finding.estimates):
            return replace(finding, verdict=INCONCLUSIVE,
                           reason=(finding.reason + "; " if finding.reason else "")
                           + "no interval behind the verdict (a point estimate decides nothing)")
        if finding.verdict == INCONCLUSIVE and not finding.reason:
            undecided = [e for e in finding.estimates if undecided_by(e)]
            if undecided:
                return replace(finding, reason="undecided: " + "; ".join(
                    f"{e.name} {e.interval} vs {e.condition}" for e in undecided))
        return finding


def claim(name: str, statement: str, source: tuple[str, ...], *, peer: bool = False):
    """Make the decorated ``check(results) -> Finding`` a :class:`Claim` (list it in its module's ``FIGURE``)."""
    def make(check: Callable[[Path], Finding]) -> Claim:
        return Claim(name, statement, source, check, peer)
    return make


def claims() -> Registry:
    """Every registered figure's claims by name: the paper's, then those against peers, each in the order of
    :data:`experiments.plugins.FIGURES` and of the figure's list (the order of the report)."""
    from experiments.plugins import figures

    registry: Registry = Registry("claim")
    listed = [item for figure in figures() for item in figure.claims]
    for item in [c for c in listed if not c.peer] + [c for c in listed if c.peer]:
        registry.register(item.name, item)
    return registry


# ---------------------------------------------------------------------------------------------- helpers
def undecided_by(estimate: Estimate) -> bool:
    """Whether ``estimate`` leaves its condition (``> 1``, ``<= 0.10``...) undecided: its interval straddles the
    threshold or is not defined. Estimates without a condition (context) never do."""
    import re

    match = re.fullmatch(r"\s*(>=|<=|>|<)\s*(-?[0-9.]+)\s*", estimate.condition or "")
    if not match:
        return False
    interval, threshold = estimate.interval, float(match.group(2))
    return not interval.defined or interval.low <= threshold <= interval.high


def table_interval(row: pd.Series, column: str, n_column: str | None = None, method: str = "") -> Interval:
    """The interval a table stores as ``column`` with ``column_ci_low`` / ``column_ci_high`` (NaN bounds when the
    table has none for this row)."""
    def number(name: str) -> float:
        value = row.get(name)
        return float(value) if value is not None and pd.notna(value) else math.nan

    n = row.get(n_column) if n_column else None
    return Interval(number(column), number(f"{column}_ci_low"), number(f"{column}_ci_high"),
                    int(n) if n is not None and pd.notna(n) else 0, method)


def split_under_load(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows to use, rows measured under foreign load) of a timing table; without ``under_load``, all are used."""
    if "under_load" not in table:
        return table, table.iloc[0:0]
    flagged = table["under_load"].map(measured_under_load).astype(bool)
    return table[~flagged], table[flagged]


def load_exclusions(rows: pd.DataFrame, label: Callable[[pd.Series], str]) -> str:
    """What a finding left out: the rows measured under foreign load, each named by ``label(row)``."""
    if rows.empty:
        return ""
    return (f"{len(rows)} measured under foreign load, left out: "
            + ", ".join(label(row) for _, row in rows.iterrows()))


def percent(interval: Interval) -> str:
    """An interval of a fraction, in percent with one decimal."""
    return interval.format(1, percent=True)


MEDIAN_GOAL, P90_GOAL, BIAS_GOAL = 0.05, 0.10, 0.03
"""The simulators' goals (issue 33): median and 90th-percentile absolute epoch-time error, and |mean signed error|."""


def epoch_time_error_verdict(errors: dict[str, Interval], min_n: int) -> str:
    """A simulator's epoch-time verdict from :func:`suite.stats.error_summary` of its relative errors: median
    <= 5 %, 90th percentile <= 10 %, |mean signed error| <= 3 % (:data:`MEDIAN_GOAL`...), each part decided on its
    whole interval (holds, does not hold, inconclusive)."""
    return combine([below(errors["median_abs"], MEDIAN_GOAL, min_n), below(errors["p90_abs"], P90_GOAL, min_n),
                    within(errors["bias"], BIAS_GOAL, min_n)])


def epoch_time_error_estimates(errors: dict[str, Interval]) -> tuple[Estimate, ...]:
    """The estimates :func:`epoch_time_error_verdict` decides on, with their conditions (for a finding)."""
    return (Estimate("median |epoch time error|", errors["median_abs"], f"<= {MEDIAN_GOAL:.2f}"),
            Estimate("p90 |epoch time error|", errors["p90_abs"], f"<= {P90_GOAL:.2f}"),
            Estimate("mean signed epoch time error", errors["bias"], f"within +-{BIAS_GOAL:.2f}"))


# ---------------------------------------------------------------------------------------------- the report
def _git_sha() -> str:
    from suite.provenance import versions

    return str(versions().get("git_sha", "unknown"))


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (a ``|`` would end the cell)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def table_commits(results: Path) -> dict[str, list[str]]:
    """Table name -> the distinct git commits its rows record (column ``git_sha``), for every CSV under ``results``
    that has the column."""
    import pandas as pd

    commits = {}
    for path in sorted(Path(results).glob("*.csv")):
        try:
            column = pd.read_csv(path, usecols=lambda name: name == "git_sha")
        except (ValueError, OSError, pd.errors.EmptyDataError):
            continue
        if "git_sha" in column:
            commits[path.name] = sorted({str(sha) for sha in column["git_sha"].dropna()})
    return commits


def _short_sha(sha: str) -> str:
    """A commit's first 12 hex digits, keeping a ``-dirty`` mark."""
    commit = sha.removesuffix("-dirty")
    return commit[:12] + sha[len(commit):]


def provenance_lines(commits: dict[str, list[str]], report_sha: str,
                     same_code: Callable[[str, str], bool] | None = None, side: frozenset[str] = frozenset()
                     ) -> list[str]:
    """The report's provenance section: which tables record rows of code other than the report's own commit (or of
    uncommitted code, ``-dirty``); empty when every row was measured at ``report_sha``'s code. ``same_code(measured,
    report_sha)`` says when another commit holds the same code (default: only the same commit; the report passes
    :func:`suite.provenance.same_code`, which accepts commits that differ only in the recorded results). Tables in
    ``side`` (no reproduction job writes them: side commands such as ``disk_nc --deep``) are listed apart."""
    def other(sha: str) -> bool:
        if sha.endswith("-dirty"):
            return True
        return sha != report_sha and not (same_code is not None and same_code(sha, report_sha))

    flagged = {name: [sha for sha in shas if other(sha)] for name, shas in commits.items()}
    flagged = {name: shas for name, shas in flagged.items() if shas}
    if not flagged:
        return []
    lines = ["", "## Provenance"]
    measured = [name for name in flagged if name not in side]
    if measured:
        lines += ["", f"Rows measured at other code than this report's commit ({report_sha[:12]}; commits that differ "
                  "from it only in `results/` count as its code) or from uncommitted code:", ""]
        lines += [f"- `{name}`: " + ", ".join(_short_sha(sha) for sha in flagged[name]) for name in measured]
    kept = [name for name in flagged if name in side]
    if kept:
        lines += ["", "Tables no job of the reproduction writes (from side commands; a reproduction keeps them as "
                  "they were):", ""]
        lines += [f"- `{name}`: " + ", ".join(_short_sha(sha) for sha in flagged[name]) for name in kept]
    return lines


def reproduced_tables() -> frozenset[str]:
    """The files the reproduction's jobs write (every registered figure's outputs)."""
    from experiments.plugins import figures

    return frozenset(name for figure in figures() for name in figure.outputs)


def findings(results: Path) -> dict[str, Finding]:
    """Every registered claim's finding on the tables under ``results``, in the report's order (:func:`claims`)."""
    return {item.name: item.evaluate(Path(results)) for item in claims().in_order()}


def render(results: Path, mode: str, job_times: dict[str, float] | None = None, sha: str | None = None) -> str:
    """The report's Markdown (pure: reads only the tables under ``results``), naming the commit ``sha`` (default:
    the checkout's, ``-dirty`` when it has uncommitted changes)."""
    results = Path(results)
    sha = sha or _git_sha()
    listed = claims().in_order()
    found = {item.name: item.evaluate(results) for item in listed}
    lines = [f"# Reproduction report ({mode})", "",
             f"Generated {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} from the tables in "
             f"this folder (git {sha[:12]}). Every number below is read from them by "
             "`experiments/report.py`; brackets are 95 % confidence intervals (t intervals over seeds or repeats, "
             "or a percentile bootstrap; `suite/stats.py`).", "",
             "| claim | paper | measured here (95 % CI) | setting | verdict |", "|---|---|---|---|---|"]
    for item in listed:
        finding = found[item.name]
        lines.append(f"| {item.name} | {_cell(item.statement)} | {_cell(finding.measured)} | "
                     f"{_cell(finding.setting)} | **{finding.verdict}** |")
    notes = [(name, f) for name, f in found.items() if f.reason or f.excluded]
    if notes:
        lines += ["", "## Notes", ""]
        for name, finding in notes:
            text = "; ".join(t for t in (finding.reason, finding.excluded) if t)
            lines.append(f"- **{name}** ({finding.verdict}): {text}")
    lines += ["", "Verdicts: **holds** / **does not hold** when the interval of every quantity the claim needs lies "
              "on one side of its threshold; **inconclusive** when one straddles it or is not defined (one seed or "
              f"repeat; accuracy claims need {MIN_SEEDS} seeds); **not testable here** when this machine lacks what "
              "the claim needs (a simulator projection, labelled PROJECTION, is shown instead where one exists). "
              "Timing claims leave out runs measured under foreign load (`under_load` in the tables)."]
    from suite.provenance import same_code

    commits = table_commits(results)
    outputs = reproduced_tables()
    side = frozenset(name for name in commits if name not in outputs)
    lines += provenance_lines(commits, sha, same_code, side)
    figures = sorted(p.name for p in results.glob("*.png"))
    lines += ["", "## Figures", ""] + [f"- [{name}]({name})" for name in figures]
    if job_times:
        lines += ["", "## Time per figure", "", "| figure | seconds |", "|---|---|"]
        lines += [f"| {name} | {seconds:.0f} |" for name, seconds in job_times.items()]
        lines += [f"| total | {sum(job_times.values()):.0f} |"]
    return "\n".join(lines) + "\n"


def write_report(results: Path, mode: str = "quick", job_times: dict[str, float] | None = None,
                 sha: str | None = None) -> Path:
    """Write ``results/REPORT.md`` atomically, naming the commit ``sha`` (default: the checkout's); return its
    path."""
    path = Path(results) / "REPORT.md"
    atomic_write_bytes(path, render(Path(results), mode, job_times, sha).encode())
    return path


def verdicts(results: Path) -> dict[str, str]:
    """Claim name -> verdict on the tables under ``results``."""
    return {name: finding.verdict for name, finding in findings(results).items()}


__all__ = ["BIAS_GOAL", "Claim", "Estimate", "FAILS", "Finding", "HOLDS", "INCONCLUSIVE", "MEDIAN_GOAL", "MIN_SEEDS",
           "NOT_TESTABLE", "P90_GOAL", "claim", "claims", "epoch_time_error_estimates", "epoch_time_error_verdict",
           "findings", "load_exclusions", "percent", "provenance_lines", "render", "split_under_load",
           "table_commits", "table_interval", "undecided_by", "verdicts", "write_report"]
