"""The architecture's rules, checked on the import graph: the import-linter contracts of ``pyproject.toml``
(layers suite < systems < simulators < experiments, and the layers inside suite and systems), no import cycle
between modules, and upper layers reaching the harness only through its entry points."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import grimp
import pytest

PACKAGES = ("suite", "systems", "simulators", "experiments")
REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """The import graph of the four packages (imports inside functions included)."""
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def strongly_connected(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of two or more nodes that reach each other (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_strongly_connected_finds_a_hand_made_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(sorted(edges), edges) == [["a", "b", "c"]]
    assert strongly_connected(["x", "y"], {"x": {"y"}, "y": set()}) == []


def test_no_import_cycles(graph: grimp.ImportGraph) -> None:
    modules = sorted(graph.modules)
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i != m} for m in modules}
    cycles = strongly_connected(modules, edges)
    assert cycles == [], f"{len(cycles)} import cycle(s): {cycles}"


def test_the_harness_imports_nothing_above_it(graph: grimp.ImportGraph) -> None:
    upward = [(m, i) for m in graph.modules if m.split(".")[0] == "suite"
              for i in graph.find_modules_directly_imported_by(m) if i.split(".")[0] in PACKAGES[1:]]
    assert upward == []


def test_import_linter_contracts_are_kept() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "lint-imports (import-linter) is not installed"
    done = subprocess.run([lint, "--no-cache"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(("module", "imported", "reported"), [
    ("suite/errors.py", "experiments.common", "suite.errors -> experiments.common"),
    ("experiments/figures/buffer_io.py", "experiments.figures.cost",
     "experiments.figures.buffer_io -> experiments.figures.cost"),
], ids=["upward", "between-figure-jobs"])
def test_import_linter_catches_a_forbidden_import(tmp_path: Path, module: str, imported: str, reported: str) -> None:
    """The same contracts on a copy of the packages in which one module gains a forbidden import (the harness an
    experiment's, a figure job another's): broken."""
    for package in PACKAGES:
        for source in (REPO_ROOT / package).rglob("*.py"):
            target = tmp_path / source.relative_to(REPO_ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    (tmp_path / "pyproject.toml").write_bytes((REPO_ROOT / "pyproject.toml").read_bytes())
    source = tmp_path / module
    source.write_text(source.read_text() + f"\n\ndef _forbidden():\n    import {imported}  # noqa: F401\n")
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    done = subprocess.run([lint, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode != 0, done.stdout
    assert reported in done.stdout


def test_upper_layers_plug_in_through_entry_points() -> None:
    plugins = {entry.value for entry in entry_points(group="gnnsuite.plugins")}
    commands = {entry.value.split(":")[0] for entry in entry_points(group="gnnsuite.commands")}
    assert "systems.plugins:TABLES" in plugins
    assert {"simulators.commands", "experiments.reproduce", "experiments.simulator_commands"} <= commands


def test_every_layer_s_command_is_on_the_command_line() -> None:
    from suite.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001
    assert {"run", "grid", "simulate", "simulate-async", "workdepth", "reproduce", "report"} <= set(commands)
