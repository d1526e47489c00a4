"""``python -m suite ARGV`` in processes forked from a server that has imported the heavy libraries once.

A command line of the suite spends seconds importing torch, PyG, pandas and numba before it does anything (about 5 s
a process on 2 cores). Jobs that run many short commands, each in a process of its own (the node-classification
runs of the disk and feature-cache figures, one process per run so that each run's peak memory and start are its
own; the fault sweep of the tests), start them with :func:`forked_runner`: each command runs in a child of the
standard library's fork server (:mod:`multiprocessing`, ``forkserver``) that has :data:`PRELOADED` imported and none
of the suite's modules. The child takes the command's environment, working folder and arguments, sends its stdout
and stderr to files, and runs ``python -m suite`` as the interpreter does (``runpy``, then the interpreter's exit:
non-daemon threads joined, ``atexit`` handlers run), so its exit status, output and files are the command's own.
It starts as a fresh interpreter would after those imports: no run has trained in it, no thread pool exists.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

PRELOADED = ["numpy", "torch", "torch_geometric", "pandas", "numba", "scipy.sparse", "yaml", "pydantic", "tqdm",
             "pyarrow"]
"""What the server imports once (third-party only: a suite module imported there would not see a child's
environment)."""
SUITE_PACKAGES = ("suite", "systems", "simulators")


def forked_runner(fresh_suite: bool = False) -> Callable[..., subprocess.CompletedProcess]:
    """A runner of ``python -m suite ARGV``: ``run(argv, env, cwd=None, timeout=None)`` returns what
    :func:`subprocess.run` with ``capture_output=True, text=True`` would (a timed-out command is killed with what it
    started: exit status ``-SIGKILL``). The fork server is this process's (one per process, started on first use
    with :data:`PRELOADED`).

    ``fresh_suite``: the child refuses to run (an assertion) if a module of the suite was imported before its
    environment was set, for commands whose modules read the environment when imported (``GNNSUITE_FAULT``).
    Multiprocessing imports the parent's main module into each child unless it is a package's ``__main__``
    (``python -m suite``, pytest's): a script whose main module imports the suite trips it.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOADED)

    def run(argv: Sequence[str], env: dict[str, str], cwd: Path | None = None,
            timeout: float | None = None) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="forked-cli-") as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            process = context.Process(target=_command, args=(list(argv), dict(env), str(cwd or os.getcwd()),
                                                             str(out), str(err), fresh_suite))
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


def _command(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str, fresh_suite: bool) -> None:
    """In the forked child: become the command (environment, folder, output, arguments) and exit as it does."""
    import runpy
    import threading

    if fresh_suite:
        # this module and its light package (suite/__init__.py imports suite.version only), which read no
        # environment, are what the child unpickled its target from
        loaded = sorted(name for name in sys.modules
                        if name.split(".")[0] in SUITE_PACKAGES and name not in ("suite", "suite.version", __name__))
        assert not loaded, (f"the suite was imported before the command's environment was set: {loaded} "
                            "(multiprocessing imports the main module into each child: a script must import the "
                            "suite inside functions)")
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


__all__ = ["PRELOADED", "forked_runner"]
