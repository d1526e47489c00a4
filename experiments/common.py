"""What every experiment shares: the modes, where outputs go by default, what a figure is (:class:`Figure`), CSV
writing with provenance columns, and the common command-line options.

A figure is one module: a typed ``run(*, mode, results, ...)`` and a thin ``main(argv)`` that parses flags (built
with :func:`add_common_options`) and calls ``run``; its plot function(s), its claims (:func:`experiments.report.claim`)
and the table specs ``report --against`` compares (:class:`experiments.compare.TableSpec`), all listed in the
module's ``FIGURE`` (a :class:`Figure`), which one line of :data:`experiments.plugins.FIGURES` registers.
Tables are written by :func:`write_csv` (the harness's atomic writer, :func:`suite.results.export`); their
provenance columns come from :func:`provenance`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import os
import platform
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    import pandas as pd

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout holding ``experiments/`` (its specs and the default ``out/`` and ``data/`` folders)."""

SPECS = REPO_ROOT / "experiments" / "specs"
"""The experiments' specs and grids (YAML)."""

RESULTS = REPO_ROOT / "out" / "results"
"""Default folder of the tables and figures of the command lines (never the tracked ``results/``)."""

DATA = REPO_ROOT / "data"
"""Default dataset cache."""

Mode = Literal["quick", "full"]
"""How much an experiment runs: ``quick`` (small settings, minutes) or ``full`` (the paper-scale settings)."""

MODES: tuple[Mode, ...] = get_args(Mode)


@dataclass(frozen=True)
class Paths:
    """Where a job reads and writes: ``results`` (tables and figures), ``runs`` (run folders), ``data``."""

    results: Path
    runs: Path
    data: Path


@dataclass(frozen=True)
class Plot:
    """One figure drawn from a table: ``draw(csv_path, out_png) -> Path`` writes ``<name>.png`` from ``table``
    (a second table, if it needs one, is found beside the first)."""

    name: str
    draw: Callable[..., Path]
    table: str


@dataclass(frozen=True)
class Figure:
    """One figure's job, as ``gnnsuite reproduce`` runs it and ``gnnsuite report`` reads it.

    Attributes:
        name: the figure's name (``--only NAME``), its line of :data:`experiments.plugins.FIGURES`.
        title: what the figure shows.
        run: ``run(mode, paths)`` calls the experiment's typed ``run(*, mode, ...)`` with where its outputs go
            under ``paths``.
        outputs: file names the job writes under ``paths.results``.
        full_cost: expected time and disk of the full mode, on a 2-core machine.
        experiment: the module of the experiment (``experiments.figures.sampling``); ``python -m <module>`` is
            its command line.
        plots: the figures it draws (``python experiments/draw.py NAME`` redraws one).
        claims: the paper's claims (and those against peers) its tables decide (:class:`experiments.report.Claim`).
        tables: the tables ``report --against`` compares, by file name (:class:`experiments.compare.TableSpec`).
    """

    name: str
    title: str
    run: Callable[[Mode, Paths], None]
    outputs: tuple[str, ...]
    full_cost: str
    experiment: str
    plots: tuple[Plot, ...] = ()
    claims: tuple[Any, ...] = ()
    tables: Mapping[str, Any] = field(default_factory=dict)


class JobFailed(RuntimeError):
    """An experiment could not produce its outputs (failed runs, nothing recorded); the message says why, ``status``
    is the exit status of its command line (1, or 2 for what the user must do first)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def check_failed(failed: Sequence[dict]) -> None:
    """Name every failed run's summary (``suite.grid.failures``) on stderr and raise :class:`JobFailed` if any."""
    for summary in failed:
        print(f"failed: {summary.get('run_id')}: {summary.get('error')}", file=sys.stderr)
    if failed:
        raise JobFailed(f"{len(failed)} runs failed")


# ---------------------------------------------------------------------------------------------- tables
def has_runs(folder: Path) -> bool:
    """Whether ``folder`` holds at least one recorded run (a run folder with its ``summary.json``)."""
    return folder.is_dir() and any((run / "summary.json").is_file() for run in folder.iterdir())


def write_csv(table: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write ``table`` to ``path`` as CSV, atomically, creating its folder (:func:`suite.results.export`)."""
    from suite.results import export

    return export(table, path)


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def _git_sha() -> str | None:
    from suite.provenance import git_sha

    return git_sha()


def _cpu_model() -> str:
    from suite.provenance import _cpu_model as cpu_model

    return cpu_model()


PROVENANCE_FIELDS: dict[str, Callable[[], Any]] = {
    "git_sha": _git_sha,
    "threads": _threads,
    "python": platform.python_version,
    "cpu_model": _cpu_model,
    "cpu_cores": os.cpu_count,
    "date": lambda: _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
}
"""Provenance column -> how it is read; any other column name is a package's version (``torch``, ``simpy``)."""


def provenance(*names: str, **given: Any) -> dict[str, Any]:
    """Provenance columns in the order of ``names``: ``given`` values first, then :data:`PROVENANCE_FIELDS`, else
    the version of the package of that name (``provenance("git_sha", "torch", "date")``)."""
    def value(name: str) -> Any:
        if name in given:
            return given[name]
        if name in PROVENANCE_FIELDS:
            return PROVENANCE_FIELDS[name]()
        return importlib.import_module(name).__version__

    return {name: value(name) for name in names}


# ---------------------------------------------------------------------------------------------- command line
def add_common_options(parser: argparse.ArgumentParser, *, quick: str | None = None,
                       results: Sequence[str] = (), results_default: Path | None = RESULTS,
                       runs: Sequence[str] = (), runs_help: str = "run folders", data: Sequence[str] = (),
                       data_default: Path | None = DATA, seed: int | None = None,
                       seeds: Sequence[int] | None = None, plot: bool = False, quiet: bool = False,
                       no_run: str | None = None) -> argparse.ArgumentParser:
    """Add the options every experiment spells the same way, each only where its argument is given.

    Args:
        quick: help of ``--quick`` (stored as ``mode``: ``quick``, else ``full``).
        results: flags of the folder of the tables and figures (``("--results",)``), dest ``results``.
        runs: flags of the run folders (``("--out",)`` or ``("--runs",)``), dest ``runs``, help ``runs_help``.
        data: flags of the dataset cache (``("--data-dir",)``), dest ``data``.
        seed: default of ``--seed`` (one seed); seeds: default of ``--seeds`` (several).
        plot: add ``--no-plot`` (dest ``plot``, true unless given); quiet: add ``--quiet``.
        no_run: help of ``--no-run`` (dest ``execute``, true unless given: only tabulate what is recorded).
    """
    if quick is not None:
        parser.add_argument("--quick", dest="mode", action="store_const", const="quick", default="full", help=quick)
    if results:
        parser.add_argument(*results, dest="results", type=Path, default=results_default,
                            help="folder of the tables and figures (default: %(default)s)")
    if runs:
        parser.add_argument(*runs, dest="runs", type=Path, help=runs_help)
    if data:
        parser.add_argument(*data, dest="data", type=Path, default=data_default,
                            help="dataset cache (default: " + ("%(default)s)" if data_default else "the specs' own)"))
    if seed is not None:
        parser.add_argument("--seed", type=int, default=seed)
    if seeds is not None:
        parser.add_argument("--seeds", nargs="+", type=int, default=list(seeds), help="default: %(default)s")
    if plot:
        parser.add_argument("--no-plot", dest="plot", action="store_false", help="do not draw the figure")
    if quiet:
        parser.add_argument("--quiet", action="store_true", help="no progress lines")
    if no_run is not None:
        parser.add_argument("--no-run", dest="execute", action="store_false", help=no_run)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None, *, no_quick: Sequence[str] = ()
          ) -> argparse.Namespace:
    """Parse ``argv``, refusing ``--quick`` beside any of the flags ``no_quick`` (settings without a quick variant)."""
    args = parser.parse_args(argv)
    for flag in no_quick:
        if getattr(args, flag.removeprefix("--").replace("-", "_")) and args.mode == "quick":
            parser.error(f"{flag} has no quick setting")
    return args


def cli(run: Callable[..., object], options: dict[str, Any], name: str) -> int:
    """Call ``run(**options)`` for a command line: 0, or the failure's status with its reason on stderr (one line,
    ``NAME: reason``) when the job failed (:class:`JobFailed`)."""
    try:
        run(**options)
    except JobFailed as err:
        print(f"{name}: {err}", file=sys.stderr)
        return err.status
    return 0


__all__ = ["DATA", "Figure", "JobFailed", "MODES", "Mode", "PROVENANCE_FIELDS", "Paths", "Plot", "REPO_ROOT",
           "RESULTS", "SPECS", "add_common_options", "check_failed", "cli", "has_runs", "parse", "provenance",
           "write_csv"]
