"""``python -m suite`` in processes forked from a server that has imported the heavy libraries once, for the tests.

The fault sweep (tests/suite/test_fault_injection.py) starts the CLI twice for every operation of every command it
sweeps, thousands of times. :func:`forked_cli` runs each command through :func:`suite.forked.forked_runner` with the
check that no module of the suite was imported in the child before its environment was set (the suite reads
``GNNSUITE_FAULT`` when :mod:`suite.faults` is imported).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from suite.forked import PRELOADED, forked_runner


def forked_cli() -> Callable[..., subprocess.CompletedProcess]:
    """A runner of ``python -m suite ARGV``: ``run(argv, env, cwd=None, timeout=300)`` returns what
    :func:`subprocess.run` with ``capture_output=True, text=True`` would (a timed-out command is killed with what it
    started: exit status ``-SIGKILL``)."""
    runner = forked_runner(fresh_suite=True)

    def run(argv: list[str], env: dict[str, str], cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        return runner(argv, env, cwd, timeout)

    return run


__all__ = ["PRELOADED", "forked_cli"]
