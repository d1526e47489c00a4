"""``python -m suite`` in processes forked from a server that has imported the heavy libraries once.

A command line of the suite spends seconds importing torch, PyG, pandas and numba before it does anything (about 5 s
a process on these 2 cores); the fault sweep (tests/suite/test_fault_injection.py) starts the CLI twice for every
operation of every command it sweeps, thousands of times. :func:`forked_cli` runs each command in a process of the
standard library's fork server (:mod:`multiprocessing`, ``forkserver``) with those libraries preloaded, and none of
the suite's modules: the suite is imported in each child after its environment is set, since it reads
``GNNSUITE_FAULT`` when :mod:`suite.faults` is imported. The child takes the command's environment, working folder
and arguments, sends its stdout and stderr to files, and runs ``python -m suite`` as the interpreter does
(``runpy``, then the interpreter's exit: non-daemon threads joined, ``atexit`` handlers run), so its exit status,
output and files are the command's own.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

PRELOADED = ["numpy", "torch", "torch_geometric", "pandas", "numba", "scipy.sparse", "yaml", "pydantic", "tqdm",
             "pyarrow"]
"""What the server imports once (third-party only: a suite module imported there would not see a child's
environment)."""


def forked_cli() -> Callable[..., subprocess.CompletedProcess]:
    """A runner of ``python -m suite ARGV``: ``run(argv, env, cwd=None, timeout=300)`` returns what
    :func:`subprocess.run` with ``capture_output=True, text=True`` would (a timed-out command is killed with what it
    started: exit status ``-SIGKILL``). The fork server is this process's (one per process, started on first use
    with :data:`PRELOADED`)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOADED)

    def run(argv: list[str], env: dict[str, str], cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="forked-cli-") as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            process = context.Process(target=_command, args=(list(argv), dict(env), str(cwd or os.getcwd()),
                                                             str(out), str(err)))
            process.start()
            process.join(timeout)
            if process.exitcode is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:  # killed before its own process group was made
                    process.kill()
                process.join()
            return subprocess.CompletedProcess([sys.executable, "-m", "suite", *argv], process.exitcode,
                                               out.read_text(errors="replace") if out.exists() else "",
                                               err.read_text(errors="replace") if err.exists() else "")

    return run


def _command(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """In the forked child: become the command (environment, folder, output, arguments) and exit as it does."""
    import runpy
    import threading

    loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("suite", "systems", "simulators"))
    assert not loaded, (f"the suite was imported before the command's environment was set: {loaded} (multiprocessing "
                        "imports the main module into each child: a script must import the suite inside functions)")
    os.setpgid(0, 0)  # its own process group: a timeout kills the command and what it started
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = ["-m", *argv]
    sys.path.insert(0, cwd)  # as `python -m` puts it first
    code = 0
    try:
        runpy.run_module("suite", run_name="__main__", alter_sys=True)
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            code = done.code or 0
        else:
            print(done.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - the interpreter's own handling of an uncaught exception
        import traceback

        traceback.print_exc()
        code = 1
    try:  # the interpreter's exit: non-daemon threads first, then the atexit handlers
        threading._shutdown()  # type: ignore[attr-defined]
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


__all__ = ["PRELOADED", "forked_cli"]
