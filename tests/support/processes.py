"""Processes the tests start: the environment of a child (this checkout first on ``PYTHONPATH``), ``python -m
suite`` runs, tiny grids, and the scale-out engines (required, not skipped, where ``GNNSUITE_REQUIRE_ENGINES``
names them)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.paths import REPO_ROOT


def require_engine(module: str):
    """Import a scale-out engine; skip the test without it, unless ``GNNSUITE_REQUIRE_ENGINES`` (comma-separated
    module names; ``make test`` and CI set ``ray,submitit``) requires it: then fail."""
    required = {name.strip() for name in os.environ.get("GNNSUITE_REQUIRE_ENGINES", "").split(",") if name.strip()}
    try:
        return importlib.import_module(module)
    except ImportError:
        if module in required:
            pytest.fail(f"{module} is required here (GNNSUITE_REQUIRE_ENGINES={','.join(sorted(required))}) but "
                        f"cannot be imported; pip install -e '.[scale]'")
        pytest.skip(f"could not import {module!r} (pip install -e '.[scale]')")


def child_env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process the tests start: this checkout first on ``PYTHONPATH`` (the suite need not be
    installed, and an installed copy must not shadow it), plus ``extra``."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def write_grid(path: Path, cache_dir: Path, seeds: list[int], epochs: int = 1, batch_size: int | None = None,
               limit_batches: int | None = None) -> Path:
    """A grid of tiny MLP runs on the ``tiny`` synthetic store, one per seed."""
    training: dict = {"epochs": epochs}
    if batch_size:
        training["batch_size"] = batch_size
    if limit_batches:
        training["limit_batches"] = limit_batches
    grid = {"base": {"dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(cache_dir)},
                     "model": {"encoder": "mlp"}, "system": {"device": "cpu"}, "training": training,
                     "evaluation": {"splits": []}},
            "axes": {"seed": seeds}}
    path.write_text(yaml.safe_dump(grid))
    return path


def gnnsuite(argv: list[str], env: dict[str, str], prefix: list[str] | None = None, timeout: float = 300,
             cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m suite ARGV`` (inside ``prefix``, e.g. a network namespace) and capture its output."""
    return subprocess.run([*(prefix or []), sys.executable, "-m", "suite", *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


__all__ = ["child_env", "gnnsuite", "require_engine", "write_grid"]
