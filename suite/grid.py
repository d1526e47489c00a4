"""Experiment grids: expand a grid file into run specs, run them once each, resume after a kill.

Grid file schema (YAML; every key but ``base`` optional)::

    name: fig7-arxiv            # a label for the grid (default: the file's stem); not part of run ids
    base:                       # a run spec mapping (see suite.config.RunSpec), or the path of a run spec
      dataset: {name: synthetic, preset: tiny}   # YAML file, relative to the grid file
      training: {epochs: 5}
    axes:                       # cartesian product: every combination of these values
      model.encoder: [graphsage, mlp]
      seed: [0, 1, 2]
    zip:                        # each group: values taken together, position by position
      - training.learning_rate: [0.01, 0.003]
        training.batch_size:    [1000, 4000]

Keys of ``axes`` and of each ``zip`` group are dotted field paths of the run spec (as ``--set``); each value list
is non-empty, values are YAML (scalars, lists, mappings). The lists of one zip group must have equal lengths. The
grid's points are the product of the axes (in file order, the last axis varying fastest) and of the zip groups;
each point sets its values on ``base``, then the command line's ``--set`` overrides are applied (they win over
the grid), then the result is validated as a :class:`~suite.config.RunSpec`. A field may be set by only one axis
or zip group. Points that resolve to the same run id (for instance after an override fixed an axis) are
collapsed into one, in first-seen order. Errors are one line naming the grid file and the field:
``grids/fig7.yaml: zip[0].training.batch_size: expected 2 values (as zip[0].training.learning_rate), got 3``.

Running (:func:`run_grid`): each spec once through :func:`suite.runner.run_spec`, into ``out/<run_id>/``.
A run is complete when its ``summary.json`` says ``completed`` (written atomically at the end of the run), and a
complete run is never repeated unless ``overwrite``: killing a grid and starting it again loses nothing finished
and repeats nothing finished (the run that was cut off resumes from its last checkpoint, :mod:`suite.checkpoint`). A run that fails is recorded with status
``failed`` (and the error) and the grid goes on; failures are in the returned summaries and are retried the next
time the grid runs. Executors are registered by name in :data:`EXECUTORS` (``local``: the runs in this process,
or on a pool of ``jobs`` processes started with ``spawn``, since torch and ``fork`` do not mix; ``ray`` and
``slurm`` (submitit), in :mod:`suite.executors`: one task or job per run, with its resource request, writing into the
same folder, so the resume semantics are the same; they also retry, once and within the grid, a run whose worker,
node or job died, and record where every run ran in its summary's ``placement``). To stop a grid running on a pool, signal its whole process
group (as Ctrl-C or a job scheduler does): a worker whose parent alone was killed finishes its current run before
it notices.
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suite.config import RunSpec, apply_overrides, parse_override, read_yaml, spec_from_dict
from suite.errors import ConfigError
from suite.execution import EXECUTORS, Executor, failed_summary, local_executor, run_one  # noqa: F401  (API)
from suite.recorder import COMPLETED, completed_run, read_summary

GRID_KEYS = ("name", "base", "axes", "zip")


# ---------------------------------------------------------------------------------------------- expansion
@dataclass(frozen=True)
class GridPoint:
    """One point of a grid before validation: the fields it sets, as ``(dotted path, value)`` pairs."""

    values: tuple[tuple[str, Any], ...]

    def label(self) -> str:
        """``model.encoder=mlp, seed=1`` (for messages)."""
        return ", ".join(f"{key}={json.dumps(value)}" for key, value in self.values) or "base"


@dataclass(frozen=True)
class Grid:
    """A parsed grid file.

    Attributes:
        name: the grid's label.
        source: where it came from (the file, for messages).
        base: the base run spec mapping.
        points: every point, in expansion order.
    """

    name: str
    source: str
    base: dict[str, Any]
    points: tuple[GridPoint, ...]


def _check_values(source: str, where: str, values: Any) -> list[Any]:
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{source}: {where}: expected a non-empty list of values, got {values!r}")
    return values


def _check_field(source: str, where: str, key: Any, owners: dict[str, str]) -> str:
    if not isinstance(key, str) or not key or not all(key.split(".")):
        raise ConfigError(f"{source}: {where}: expected a dotted field path like training.batch_size, got {key!r}")
    if key in owners:
        raise ConfigError(f"{source}: {where}: field also set by {owners[key]}")
    return key


def parse_grid(data: Any, source: str = "<grid>", base_dir: str | os.PathLike | None = None) -> Grid:
    """Validate a grid mapping (schema in the module docstring) and expand its points.

    Args:
        data: the grid mapping, as read from YAML.
        source: the grid file (named in errors; its stem is the default ``name``).
        base_dir: where a ``base`` given as a path is resolved from (default: the current folder).

    Raises:
        ConfigError: naming ``source`` and the field at fault.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    for key in data:
        if key not in GRID_KEYS:
            raise ConfigError(f"{source}: {key}: unknown field (a grid has {', '.join(GRID_KEYS)})")
    name = data.get("name") or Path(source).stem
    if not isinstance(name, str):
        raise ConfigError(f"{source}: name: expected a string, got {name!r}")

    if "base" not in data:
        raise ConfigError(f"{source}: base: required field is missing")
    base = data["base"]
    if isinstance(base, str):
        base_path = Path(base_dir or ".") / base
        base = read_yaml(base_path)
        if not isinstance(base, dict):
            raise ConfigError(f"{base_path}: expected a run spec mapping at the top level")
    elif base is None:
        base = {}
    if not isinstance(base, dict):
        raise ConfigError(f"{source}: base: expected a run spec mapping or a path, got {type(base).__name__}")

    owners: dict[str, str] = {}
    factors: list[list[tuple[tuple[str, Any], ...]]] = []
    axes = data.get("axes") or {}
    if not isinstance(axes, dict):
        raise ConfigError(f"{source}: axes: expected a mapping of field paths to value lists")
    for key, values in axes.items():
        where = f"axes.{key}"
        key = _check_field(source, where, key, owners)
        values = _check_values(source, where, values)
        owners[key] = where
        factors.append([((key, value),) for value in values])

    groups = data.get("zip") or []
    if not isinstance(groups, list):
        raise ConfigError(f"{source}: zip: expected a list of groups (mappings of field paths to value lists)")
    for index, group in enumerate(groups):
        if not isinstance(group, dict) or not group:
            raise ConfigError(f"{source}: zip[{index}]: expected a non-empty mapping of field paths to value lists")
        first: tuple[str, int] | None = None
        columns = []
        for key, values in group.items():
            where = f"zip[{index}].{key}"
            key = _check_field(source, where, key, owners)
            values = _check_values(source, where, values)
            if first is None:
                first = (where, len(values))
            elif len(values) != first[1]:
                raise ConfigError(
                    f"{source}: {where}: expected {first[1]} values (as {first[0]}), got {len(values)}"
                )
            owners[key] = where
            columns.append([(key, value) for value in values])
        factors.append([tuple(row) for row in zip(*columns)])

    points = tuple(GridPoint(tuple(itertools.chain.from_iterable(combo))) for combo in itertools.product(*factors))
    return Grid(name=name, source=source, base=base, points=points)


def load_grid(path: str | os.PathLike) -> Grid:
    """Read and parse a grid file (``base`` paths resolve from the grid file's folder)."""
    path = Path(path)
    return parse_grid(read_yaml(path), source=str(path), base_dir=path.parent)


def _apply_point(grid: Grid, point: GridPoint) -> dict[str, Any]:
    data = grid.base
    for key, value in point.values:
        text = f"{key}={json.dumps(value)}"
        try:
            data = apply_overrides(data, [text])
        except ConfigError as err:
            message = str(err).removeprefix(f"--set {text}: ")
            raise ConfigError(f"{grid.source}: {key}: {message} (grid point {point.label()})") from None
    return data


def expand_grid(grid: str | os.PathLike | Mapping[str, Any] | Grid,
                overrides: Sequence[str] = ()) -> list[RunSpec]:
    """The validated run specs of a grid, duplicates (equal run ids) collapsed, in expansion order.

    Args:
        grid: a grid file path, a grid mapping, or a parsed :class:`Grid`.
        overrides: ``a.b=value`` strings applied to every point after the grid's values (they win).

    Raises:
        ConfigError: one line naming the grid file, the field path and, for a spec that does not validate,
            the grid point.
    """
    if isinstance(grid, Grid):
        parsed = grid
    elif isinstance(grid, Mapping):
        parsed = parse_grid(dict(grid))
    else:
        parsed = load_grid(grid)
    specs: dict[str, RunSpec] = {}
    for point in parsed.points:
        data = apply_overrides(_apply_point(parsed, point), list(overrides))
        try:
            spec = spec_from_dict(data, source=parsed.source)
        except ConfigError as err:
            raise ConfigError(f"{err} (grid point {point.label()})") from None
        specs.setdefault(spec.run_id, spec)
    return list(specs.values())


def select_specs(specs: Sequence[RunSpec], conditions: Sequence[str]) -> list[RunSpec]:
    """The specs whose fields equal every ``a.b=value`` condition (the value read as YAML, as ``--set`` reads it),
    in order: a part of a grid (``gnnsuite grid --where dataset.name=coauthor-physics``).

    Raises:
        ConfigError: a condition that is not ``a.b=value`` or names a field the specs do not have.
    """
    parsed = []
    for text in conditions:
        try:
            path, value = parse_override(text)
        except ConfigError as err:
            raise ConfigError(str(err).replace("--set", "--where", 1)) from None
        parsed.append((path, _plain(value), text))
    kept = []
    for spec in specs:
        data = spec.model_dump(mode="json")
        matches = True
        for path, value, text in parsed:
            node: Any = data
            for part in path:
                if not isinstance(node, Mapping) or part not in node:
                    raise ConfigError(f"--where {text}: no field {'.'.join(path)!r} in the grid's specs")
                node = node[part]
            matches = matches and _plain(node) == value
        if matches:
            kept.append(spec)
    return kept


def _plain(value: Any) -> Any:
    """``value`` with tuples as lists (a spec's fanouts are a tuple, YAML's a list)."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def run_grid(specs: Iterable[RunSpec], out: str | os.PathLike, *, jobs: int | None = 1, overwrite: bool = False,
             progress: bool = True, executor: str = "local", executor_options: Any = None) -> list[dict[str, Any]]:
    """Run every spec once into ``out/<run_id>/``; completed runs are skipped unless ``overwrite``.

    Args:
        specs: the runs (duplicates by run id are run once).
        out: the results folder.
        jobs: runs at a time (``local``: a process pool when > 1; ``ray``/``slurm``: tasks or jobs in flight);
            None: the executor's default (``local``: 1; ``ray``/``slurm``: no limit but the cluster's resources).
        overwrite: run completed runs again.
        progress: a progress bar over runs on stderr, and, when runs go one at a time, the system's bar over
            batches.
        executor: a name registered in :data:`EXECUTORS`.
        executor_options: a :class:`suite.executors.ExecutorOptions` (address, resources per run, ...), passed to
            the executor as ``options`` when given.

    Returns:
        One summary per distinct spec, in order: completed (``"skipped": True`` when it was already complete),
        or ``failed`` (with ``error``). See :func:`failures`.

    Raises:
        ConfigError: unknown executor or ``jobs < 1``.
    """
    from tqdm import tqdm

    import suite.executors  # noqa: F401  (registers ray and slurm)

    if jobs is not None and jobs < 1:
        raise ConfigError(f"--jobs: expected at least 1, got {jobs}")
    run = EXECUTORS.get(executor)
    extra = {"options": executor_options} if executor_options is not None else {}
    unique = list({spec.run_id: spec for spec in specs}.values())
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    results: dict[str, dict[str, Any]] = {}
    todo = []
    for spec in unique:
        done = None if overwrite else completed_run(out, spec)
        if done is not None:
            results[spec.run_id] = {**read_summary(done), "skipped": True}
        else:
            todo.append(spec)

    failed = 0
    with tqdm(total=len(unique), initial=len(unique) - len(todo), desc="grid", unit="run", disable=not progress,
              file=sys.stderr, dynamic_ncols=True) as bar:
        if len(todo) < len(unique):
            bar.set_postfix(skipped=len(unique) - len(todo), refresh=True)

        def on_result(summary: dict[str, Any]) -> None:
            nonlocal failed
            if summary.get("status") != COMPLETED:
                failed += 1
                bar.write(f"run {summary.get('run_id')} failed: {summary.get('error', 'unknown error')}",
                          file=sys.stderr)
                bar.set_postfix(failed=failed, refresh=False)
            bar.update(1)

        def on_note(text: str) -> None:
            bar.write(text, file=sys.stderr)

        if _accepts(run, "on_note"):  # executors registered before notes existed do without them
            extra["on_note"] = on_note
        # nothing left to run: no executor is started (a Ray instance, Slurm jobs)
        for summary in run(todo, out, jobs=jobs, overwrite=overwrite, progress=progress, on_result=on_result,
                           **extra) if todo else []:
            results[summary["run_id"]] = summary
    return [results[spec.run_id] for spec in unique]


def _accepts(function: Callable[..., Any], name: str) -> bool:
    parameters = inspect.signature(function).parameters
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def failures(summaries: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The summaries of runs that did not complete."""
    return [summary for summary in summaries if summary.get("status") != COMPLETED]


__all__ = [
    "EXECUTORS", "Grid", "GridPoint", "expand_grid", "failed_summary", "failures", "load_grid", "parse_grid",
    "run_grid", "run_one",
]
