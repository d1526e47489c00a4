"""Provenance recorded with every result: versions, the suite's git SHA, the machine, process counters."""

from __future__ import annotations

import functools
import os
import platform
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def git_sha() -> str | None:
    """The suite's git commit (with ``-dirty`` when the tree has uncommitted changes), or None outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha


NOT_CODE = (":(exclude)results", ":(exclude)docs", ":(exclude,glob)**/*.md")
"""What no run executes, as git pathspecs: the recorded results and the documentation (``docs/``, every ``.md``);
commits that differ only there (a regenerated reference, a corrected sentence) run the same code."""


def same_code(measured: str, current: str, root: Path = REPO_ROOT) -> bool:
    """Whether the commits ``measured`` and ``current`` hold the same code: equal, or differing only in the recorded
    results and the documentation (:data:`NOT_CODE`), so a reference regenerated job by job at one code commit is
    one measurement. False for uncommitted code (``-dirty``), an unknown commit, or outside git."""
    if measured.endswith("-dirty") or current.endswith("-dirty"):
        return False
    if measured == current:
        return True
    try:
        diff = subprocess.run(["git", "diff", "--quiet", measured, current, "--", ".", *NOT_CODE], cwd=root,
                              capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return diff.returncode == 0


def versions() -> dict[str, Any]:
    """Versions of Python, torch, PyG, numpy, ogb and the suite, and the suite's git SHA."""
    import numpy
    import torch_geometric

    from suite.version import __version__

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        "numpy": numpy.__version__,
        "ogb": _distribution_version("ogb"),  # from its metadata: importing ogb (and sklearn) takes seconds
        "gnnsuite": __version__,
        "git_sha": git_sha(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _distribution_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """CPU model, cores, memory and GPU of this machine."""
    gpu = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = {"name": props.name, "count": torch.cuda.device_count(), "memory_bytes": props.total_memory}
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_bytes": psutil.virtual_memory().total,
        "gpu": gpu,
    }


def status_kib(key: str, status: str | os.PathLike = "/proc/self/status") -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM`` ...), or None where there is none."""
    try:
        for line in Path(status).read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def reset_peak_rss() -> bool:
    """Reset the kernel's peak resident set of this process (``VmHWM``) to its current size, so that
    :func:`peak_rss_bytes` measures from now on (Linux's ``/proc/self/clear_refs``); False where that is not
    possible. A grid that runs several runs in one process resets it at the start of each run."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int:
    """Peak resident set size of this process since its start or the last :func:`reset_peak_rss` (``VmHWM``;
    where there is no ``/proc``, ``ru_maxrss``: since the start, which Linux reports in KiB)."""
    hwm = status_kib("VmHWM")
    if hwm is not None:
        return hwm * 1024
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def io_counters() -> tuple[int, int]:
    """Bytes this process has read from and written to storage (``/proc/self/io``), or zeros where unknown."""
    try:
        counters = psutil.Process().io_counters()
    except (AttributeError, psutil.Error):
        return 0, 0
    return counters.read_bytes, counters.write_bytes
