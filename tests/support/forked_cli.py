"""``python -m suite`` in forked children of one process that has imported the heavy libraries once.

A command line of the suite spends seconds importing torch, PyG, pandas and numba before it does anything (about 5 s
a process on these 2 cores); the fault sweep (tests/suite/test_fault_injection.py) starts the CLI twice for every
operation of every command it sweeps, thousands of times. :class:`ForkedCli` starts one server process (this module
run with ``-m``) with the tests' child environment; the server imports those libraries, and none of the suite's
modules, then forks one child per command. The child takes the command's environment, working folder and
arguments, sends its stdout and stderr to files, and runs ``python -m suite`` as the interpreter does (``runpy``,
then the interpreter's exit: non-daemon threads joined, ``atexit`` handlers run), so its exit status, output and
files are the command's own. The suite itself is imported in each child, after its environment is set: it reads
``GNNSUITE_FAULT`` when :mod:`suite.faults` is imported.

The protocol is one JSON line a command on the server's stdin (``argv``, ``env``, ``cwd``, ``stdout``, ``stderr``
paths, ``timeout``) and one JSON line back (``returncode``: the exit status, or minus the signal that ended the
child, as :mod:`subprocess` reports it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRELOADED = ("numpy", "torch", "torch_geometric", "pandas", "numba", "scipy.sparse", "yaml", "pydantic", "tqdm",
             "pyarrow")
"""What the server imports once (third-party only: a suite module imported here would not see a child's
environment)."""
SUITE_PACKAGES = ("suite", "systems", "simulators", "experiments")


class ForkedCli:
    """Runs ``python -m suite ARGV`` in children forked from one server that has the libraries imported.

    Args:
        env: the server's environment (the children's are given per command; libraries that read environment
            variables when imported see this one, so give the tests' child environment without per-command
            variables).
    """

    def __init__(self, env: dict[str, str]) -> None:
        self._server = subprocess.Popen([sys.executable, "-m", "tests.support.forked_cli"], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        cwd=Path(__file__).resolve().parents[2])
        ready = self._server.stdout.readline()
        if json.loads(ready or "{}").get("ready") is not True:
            raise RuntimeError(f"the forked-CLI server did not start (exit {self._server.poll()})")

    def run(self, argv: list[str], env: dict[str, str], cwd: Path | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        """Run one command; its output captured as :func:`subprocess.run` with ``capture_output=True, text=True``
        would."""
        with tempfile.TemporaryDirectory(prefix="forked-cli-") as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            request = {"argv": list(argv), "env": dict(env), "cwd": str(cwd or os.getcwd()), "stdout": str(out),
                       "stderr": str(err), "timeout": timeout}
            self._server.stdin.write(json.dumps(request) + "\n")
            self._server.stdin.flush()
            reply = self._server.stdout.readline()
            if not reply:
                raise RuntimeError(f"the forked-CLI server ended (exit {self._server.poll()})")
            code = json.loads(reply)["returncode"]
            return subprocess.CompletedProcess([sys.executable, "-m", "suite", *argv], code,
                                               out.read_text(errors="replace"), err.read_text(errors="replace"))

    def close(self) -> None:
        """Stop the server."""
        if self._server.poll() is None:
            self._server.stdin.close()
            try:
                self._server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        self._server.stdout.close()

    def __enter__(self) -> ForkedCli:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------- the server
def _child(request: dict) -> None:
    """In the forked child: become the command (environment, folder, output, arguments) and exit as it does."""
    import runpy
    import threading

    os.setpgid(0, 0)  # its own process group: a timeout kills the command and what it started
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                            (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
        opened = os.open(path, flags | (os.O_TRUNC if fd else 0), 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = ["-m", *request["argv"]]
    sys.path[0] = os.getcwd()  # as `python -m` puts it
    code: int = 0
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


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -signal.SIGKILL
        time.sleep(0.005)


def serve() -> None:
    """Import :data:`PRELOADED`, then run each command of stdin in a forked child and answer with its status."""
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    loaded = sorted(name for name in sys.modules if name.split(".")[0] in SUITE_PACKAGES)
    assert not loaded, f"the server must not import the suite's modules before forking: {loaded}"
    replies = os.fdopen(os.dup(1), "w")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # a library printing in the server cannot corrupt the replies
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request)
        replies.write(json.dumps({"returncode": _wait(pid, float(request["timeout"]))}) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve()


__all__ = ["ForkedCli", "PRELOADED"]
