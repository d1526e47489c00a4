"""A real memory cap for the commands an experiment or a test starts: a cgroup v1 memory cgroup, made for the
occasion and removed afterwards.

cgroup v1's ``memory.limit_in_bytes`` counts the page cache a process brings in, not only its anonymous memory, so
a command that reads a file larger than the limit stays inside only when the kernel can reclaim what it read; one
that holds more than the limit is OOM-killed (exit status 137). :class:`MemoryCgroup` runs commands inside such a
cgroup (a small Python wrapper writes its own pid to ``cgroup.procs`` and then execs the command) and reads what
the cgroup saw: the peak of its usage (``memory.max_usage_in_bytes``), how often it hit the limit and whether the
kernel killed for it.

The cgroup v2 unified hierarchy is not handled: where it has a memory controller, use ``systemd-run --scope -p
MemoryMax=``; this module is for machines that mount cgroup v1's memory controller (root needed to create one).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CGROUP_V1_MEMORY = Path("/sys/fs/cgroup/memory")

_JOIN_AND_EXEC = ("import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
                  "os.execvp(sys.argv[2], sys.argv[2:])")


def memory_cgroup_unavailable(root: Path = CGROUP_V1_MEMORY) -> str | None:
    """Why a cgroup v1 memory cgroup cannot be made here (None when it can): not root, or no memory controller."""
    if os.geteuid() != 0:
        return "creating a memory cgroup needs root"
    if not (root / "memory.limit_in_bytes").is_file():
        return f"no cgroup v1 memory controller mounted at {root}"
    if not os.access(root, os.W_OK):
        return f"{root} is not writable"
    return None


@dataclass(frozen=True)
class MemoryCgroup:
    """A cgroup v1 memory cgroup at ``path`` (made by :func:`memory_cgroup`)."""

    path: Path
    limit_bytes: int

    @property
    def prefix(self) -> list[str]:
        """The command-line prefix that runs a command inside this cgroup (``[*prefix, *command]``)."""
        return [sys.executable, "-c", _JOIN_AND_EXEC, str(self.path / "cgroup.procs")]

    def _read(self, name: str) -> str:
        return (self.path / name).read_text()

    @property
    def peak_bytes(self) -> int:
        """The cgroup's peak charge (``memory.max_usage_in_bytes``: anonymous memory and page cache)."""
        return int(self._read("memory.max_usage_in_bytes"))

    @property
    def usage_bytes(self) -> int:
        """The cgroup's charge now (``memory.usage_in_bytes``)."""
        return int(self._read("memory.usage_in_bytes"))

    @property
    def limit_hits(self) -> int:
        """How many times a charge met the limit (``memory.failcnt``; reclaim followed, or an OOM kill)."""
        return int(self._read("memory.failcnt"))

    @property
    def oom_kills(self) -> int:
        """Processes the kernel killed for this cgroup's limit (``oom_kill`` of ``memory.oom_control``; 0 where the
        kernel does not count them)."""
        fields = dict(line.split() for line in self._read("memory.oom_control").splitlines() if line.strip())
        return int(fields.get("oom_kill", 0))

    def stat(self) -> dict[str, int]:
        """``memory.stat`` as ``{name: value}`` (``rss``, ``cache``, ``max_rss``... bytes)."""
        return {name: int(value) for name, value in
                (line.split() for line in self._read("memory.stat").splitlines() if line.strip())}

    def reset_peak(self) -> None:
        """Start a new peak (``memory.max_usage_in_bytes`` back to the usage now)."""
        (self.path / "memory.max_usage_in_bytes").write_text("0")

    def processes(self) -> list[int]:
        """The pids in the cgroup now."""
        return [int(pid) for pid in self._read("cgroup.procs").split()]


@contextlib.contextmanager
def memory_cgroup(limit_bytes: int, name: str | None = None,
                  root: Path = CGROUP_V1_MEMORY) -> Iterator[MemoryCgroup]:
    """A fresh cgroup v1 memory cgroup ``root/name`` (default ``gnnsuite-<pid>-<time>``) limited to
    ``limit_bytes``; on exit every process still in it is killed (only processes started into it: the cgroup is new)
    and the cgroup removed.

    Raises:
        OSError: the cgroup cannot be made (:func:`memory_cgroup_unavailable` says why beforehand).
    """
    path = root / (name or f"gnnsuite-{os.getpid()}-{time.monotonic_ns()}")
    path.mkdir()
    try:
        (path / "memory.limit_in_bytes").write_text(str(int(limit_bytes)))
        with contextlib.suppress(OSError):  # no swap accounting on many kernels: then there is nothing to cap
            (path / "memory.memsw.limit_in_bytes").write_text(str(int(limit_bytes)))
        cgroup = MemoryCgroup(path, int((path / "memory.limit_in_bytes").read_text()))
        yield cgroup
    finally:
        _remove(path)


def _remove(path: Path, attempts: int = 50) -> None:
    """Kill what is left in the cgroup ``path`` and remove it (a cgroup is removable once it holds no process)."""
    for _ in range(attempts):
        with contextlib.suppress(FileNotFoundError):
            pids = [int(pid) for pid in (path / "cgroup.procs").read_text().split()]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if not pids:
                with contextlib.suppress(OSError):  # EBUSY while an exiting process is still charged
                    path.rmdir()
                    return
        if not path.exists():
            return
        time.sleep(0.1)
    path.rmdir()  # raises, naming the cgroup that could not be removed


__all__ = ["CGROUP_V1_MEMORY", "MemoryCgroup", "memory_cgroup", "memory_cgroup_unavailable"]
