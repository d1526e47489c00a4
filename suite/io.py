"""File helpers: atomic writes, streaming checksums and folders that appear only when complete.

Nothing here leaves a half-written file under its final name: files are written beside their destination and
renamed into place (``os.replace`` is atomic on POSIX), folders are built under a hidden temporary name and
renamed at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHECKSUM_ALGORITHM = "sha256"
_HASH_BLOCK = 8 << 20


def file_checksum(path: str | os.PathLike, algorithm: str = CHECKSUM_ALGORITHM) -> str:
    """Return ``"<algorithm>:<hex digest>"`` of a file's bytes, read in 8 MiB blocks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb", buffering=0) as handle:
        buffer = bytearray(_HASH_BLOCK)
        view = memoryview(buffer)
        while True:
            read = handle.readinto(buffer)
            if not read:
                break
            digest.update(view[:read])
    return f"{algorithm}:{digest.hexdigest()}"


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a directory entry to disk so that a rename inside it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary sibling and an atomic rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Serialize ``obj`` as indented JSON and write it atomically."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())


@contextlib.contextmanager
def staged_directory(final: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary folder that becomes ``final`` only if the block finishes without an exception.

    The temporary folder is a hidden sibling of ``final`` (same file system, so the rename is atomic). On any
    exception, including ``KeyboardInterrupt``, it is removed and ``final`` is left untouched. With
    ``overwrite``, an existing ``final`` is replaced; otherwise it is an error.
    """
    final = Path(final)
    if final.exists() and not overwrite:
        from suite.errors import DataError

        raise DataError(f"{final}: output already exists (pass --overwrite to replace it)")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.partial-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        yield tmp
        if final.exists():
            old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(final, old)
            os.replace(tmp, final)
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink()
        else:
            os.replace(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
