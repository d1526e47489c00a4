"""Folders built once per test run and shared by its pytest-xdist workers (``make test`` runs two)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name``, filled by ``build(folder)`` once for the whole test run: without xdist a fresh
    temporary folder; under xdist a folder beside the workers' own temporary folders, which the first worker to
    get here builds (under a file lock) while the others wait for it and then read what it built."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    folder = tmp_path_factory.getbasetemp().parent / name  # the run's folder, shared by its workers
    done = folder / ".built"
    with FileLock(f"{folder}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed half-way is redone
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


__all__ = ["built_once"]
