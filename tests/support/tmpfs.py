"""A real full disk: a size-limited tmpfs mounted for a test (root only) and unmounted afterwards, and a filler
file that takes all but a given number of its bytes."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def tmpfs_unavailable(probe: Path) -> str | None:
    """Why a tmpfs cannot be mounted here (None when it can): not root, or the mount is refused (probed at the
    empty folder ``probe``, unmounted again)."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    probe.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        return f"mount -t tmpfs refused: {done.stderr.strip() or done.returncode}"
    subprocess.run(["umount", str(probe)], check=True)
    return None


@contextlib.contextmanager
def tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of ``size_bytes`` (rounded up to pages) mounted at ``path``; unmounted on exit (lazily when busy)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=True)


def resize(path: Path, size_bytes: int) -> None:
    """Grow (or shrink) the tmpfs mounted at ``path`` to ``size_bytes``, keeping its files."""
    subprocess.run(["mount", "-o", f"remount,size={size_bytes}", str(path)], check=True)


def fill(mount: Path, leave_bytes: int, name: str = "filler") -> Path:
    """Write a file ``mount/name`` that takes all the free space of the file system at ``mount`` but
    ``leave_bytes`` (rounded down to pages)."""
    stat = os.statvfs(mount)
    free = stat.f_bavail * stat.f_frsize
    size = max(free - leave_bytes // PAGE * PAGE, 0)
    filler = mount / name
    with open(filler, "wb") as handle:
        handle.write(b"\0" * size)
    return filler


def tree_bytes(path: Path) -> int:
    """Bytes a folder's files take on a page-granular file system (each file rounded up to whole pages)."""
    return sum(-(-p.stat().st_size // PAGE) * PAGE for p in path.rglob("*") if p.is_file())


__all__ = ["PAGE", "fill", "resize", "tmpfs", "tmpfs_unavailable", "tree_bytes"]
