"""File helpers: atomic writes, streaming checksums, folders that appear only when complete, and honest
positional IO.

Nothing here leaves a half-written file under its final name: files are written beside their destination and
renamed into place (``os.replace`` is atomic on POSIX), folders are built under a hidden temporary name and
renamed at the end.

Positional IO (:func:`pread_into`, :func:`pread_exact`, :func:`pwrite_all`) never returns short or wrong data:
it loops on short transfers and splits transfers larger than :data:`MAX_TRANSFER` (so > 2 GiB works); a read
past the end of the file is a :class:`~suite.errors.DataError` naming the file. For measurements that must hit
the disk, :func:`evict_page_cache` drops a file's pages (``posix_fadvise(POSIX_FADV_DONTNEED)``) and
:func:`pread_direct` reads with ``O_DIRECT``; :func:`process_io_bytes` gives the bytes really read and written
(``/proc/self/io``), to be recorded beside the suite's own :class:`IOCounters`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import hashlib
import json
import math
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from suite import faults as _faults

CHECKSUM_ALGORITHM = "sha256"
_HASH_BLOCK = 8 << 20


def file_checksum(path: str | os.PathLike, algorithm: str = CHECKSUM_ALGORITHM) -> str:
    """Return ``"<algorithm>:<hex digest>"`` of a file's bytes, read in 8 MiB blocks."""
    digest = hashlib.new(algorithm)
    with open_read(path, "rb", buffering=0) as handle:
        buffer = bytearray(_HASH_BLOCK)
        view = memoryview(buffer)
        while True:
            read = handle.readinto(buffer)
            if not read:
                break
            digest.update(view[:read])
    return f"{algorithm}:{digest.hexdigest()}"


# ----------------------------------------------------------------------------------------- the IO seam
#
# Every file write, fsync, rename and read of the suite goes through the functions below, so that (1) an OSError
# always names the file (a buffered ``write`` or ``flush`` that meets a full disk raises ENOSPC without a file
# name; these functions add it) and (2) :mod:`suite.faults` can count the operations and make the k-th fail
# (``GNNSUITE_FAULT``). When fault injection is off they add one boolean test per call.


def _named(err: OSError, path: str | os.PathLike) -> OSError:
    """``err`` with ``filename`` set to ``path`` when it has none."""
    if err.filename is None:
        return OSError(err.errno, err.strerror or str(err), str(path))
    return err


def open_write(path: str | os.PathLike, mode: str = "wb", **kwargs: Any) -> Any:
    """``open(path, mode)`` for writing (``wb``, ``w``, ``ab``, ``r+b`` ...) through the fault seam."""
    if _faults.ACTIVE:
        _faults.check("open", path)
    return open(path, mode, **kwargs)


def open_fd(path: str | os.PathLike, flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags)`` through the fault seam (an ``open`` operation when ``flags`` allow writing,
    a ``read`` otherwise)."""
    if _faults.ACTIVE:
        _faults.check("open" if flags & (os.O_WRONLY | os.O_RDWR) else "read", path)
    return os.open(path, flags, mode)


def open_read(path: str | os.PathLike, mode: str = "rb", **kwargs: Any) -> Any:
    """``open(path, mode)`` for reading through the fault seam (one ``read`` operation)."""
    if _faults.ACTIVE:
        _faults.check("read", path)
    return open(path, mode, **kwargs)


def check_read(path: str | os.PathLike) -> None:
    """Count one read of ``path`` (a memory map, ``np.load``, ``torch.load``) at the fault seam."""
    if _faults.ACTIVE:
        _faults.check("read", path)


def check_write(path: str | os.PathLike) -> None:
    """Count one write of ``path`` done by a library (pyarrow, a memory map) at the fault seam."""
    if _faults.ACTIVE:
        _faults.check("write", path)


def write_to(handle: Any, data: Any, path: str | os.PathLike) -> None:
    """``handle.write(data)`` (a file object opened by :func:`open_write`); an OSError names ``path``."""
    try:
        if _faults.ACTIVE:
            nbytes = len(data) if isinstance(data, str) else memoryview(data).nbytes
            keep = _faults.check("write", path, nbytes)
            if keep is not None:
                part = data[:keep] if isinstance(data, str) else memoryview(data).cast("B")[:keep]
                handle.write(part)
                handle.flush()
                raise _faults.short_write_error(path, keep, nbytes)
        handle.write(data)
    except OSError as err:
        raise _named(err, path) from None


def flush_to(handle: Any, path: str | os.PathLike) -> None:
    """``handle.flush()`` (buffered bytes reach the file: a write operation); an OSError names ``path``."""
    try:
        if _faults.ACTIVE:
            _faults.check("write", path)
        handle.flush()
    except OSError as err:
        raise _named(err, path) from None


def sync_file(handle: Any, path: str | os.PathLike) -> None:
    """Flush a file object (or take a file descriptor) and ``fsync`` it; an OSError names ``path``."""
    try:
        if not isinstance(handle, int):
            handle.flush()
        if _faults.ACTIVE:
            _faults.check("fsync", path)
        os.fsync(handle if isinstance(handle, int) else handle.fileno())
    except OSError as err:
        raise _named(err, path) from None


def close_file(handle: Any, path: str | os.PathLike) -> None:
    """Close a file object (its last buffered bytes are written); an OSError names ``path``."""
    try:
        handle.close()
    except OSError as err:
        raise _named(err, path) from None


def close_quietly(handle: Any) -> None:
    """Close a file object after a failure; buffered bytes that cannot be written are dropped (the file is
    incomplete anyway and its writer removes it), so the first error is the one reported."""
    with contextlib.suppress(OSError):
        handle.close()


@contextlib.contextmanager
def writing(path: str | os.PathLike, mode: str = "wb", *, sync: bool = False, **kwargs: Any) -> Iterator[Any]:
    """Open ``path`` for writing through the seam (:func:`open_write`); at the end of the block flush (and with
    ``sync`` fsync) and close it, every OSError naming ``path``. On an exception the file is closed quietly
    (:func:`close_quietly`) and the exception goes on."""
    handle = open_write(path, mode, **kwargs)
    try:
        yield handle
        if sync:
            sync_file(handle, path)
        else:
            flush_to(handle, path)
        close_file(handle, path)
    finally:
        if not handle.closed:
            close_quietly(handle)


def rename(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """``os.replace(src, dst)`` (atomic on POSIX) through the fault seam; an OSError names ``dst``."""
    try:
        if _faults.ACTIVE:
            _faults.check("rename", dst)
        os.replace(src, dst)
    except OSError as err:
        raise _named(err, dst) from None


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a directory entry to disk so that a rename inside it survives a crash."""
    try:
        if _faults.ACTIVE:
            _faults.check("fsync", path)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as err:
        raise _named(err, path) from None


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary sibling and an atomic rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        try:
            handle = open_write(tmp, "wb")
        except OSError as err:
            raise _named(err, path) from None
        with handle:
            write_to(handle, data, path)
            sync_file(handle, path)
        rename(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Serialize ``obj`` as indented strict JSON (no ``NaN``/``Infinity``: see :func:`strict_json_dumps`) and
    write it atomically."""
    atomic_write_bytes(path, (strict_json_dumps(obj, indent=2) + "\n").encode())


# ----------------------------------------------------------------------------------------- strict JSON
#
# JSON has no NaN or Infinity; Python's json module writes them as bare ``NaN``/``Infinity`` tokens that strict
# readers (jq, JavaScript, Go, most databases) refuse. The suite writes every JSON file and record with
# ``allow_nan=False``; a non-finite float is first replaced by ``null`` and its path listed (:func:`json_safe`),
# so that a record says *which* value was not a number instead of failing.


def json_safe(obj: Any, path: str = "") -> tuple[Any, dict[str, str]]:
    """``obj`` with every non-finite float replaced by ``None``, and ``{path: "nan"|"inf"|"-inf"}`` of those values.

    Paths join dict keys with ``.`` and list positions as ``[i]`` (``metrics.test.accuracy``, ``loss[2]``).
    Numpy and torch scalars and arrays are converted to Python values first (``.item()`` / ``.tolist()``).
    """
    non_finite: dict[str, str] = {}

    def clean(value: Any, where: str) -> Any:
        if isinstance(value, float):
            if math.isfinite(value):
                return value
            non_finite[where or "<root>"] = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
            return None
        if isinstance(value, dict):
            return {key: clean(item, f"{where}.{key}" if where else str(key)) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(item, f"{where}[{i}]") for i, item in enumerate(value)]
        if hasattr(value, "tolist") and hasattr(value, "shape"):  # numpy / torch scalars and arrays
            return clean(value.tolist(), where)
        if hasattr(value, "item") and not isinstance(value, (str, bytes, bool, int)):  # numpy scalar types
            return clean(value.item(), where)
        if isinstance(value, Path):
            return str(value)
        return value

    return clean(obj, path), non_finite


def strict_json_dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, allow_nan=False)`` after :func:`json_safe`: non-finite floats become ``null``."""
    clean, _ = json_safe(obj)
    return json.dumps(clean, allow_nan=False, **kwargs)


# ----------------------------------------------------------------------------------------- locks
#
# One writer at a time: a run folder, a store being written or a dataset cache entry is guarded by a lock file
# holding the writer's pid, locked with ``flock(2)``. The kernel releases the lock when its holder dies (even by
# SIGKILL), so a stale lock file of a dead writer is simply taken over; its pid is only there to name the holder in
# the error a second writer gets. The file is removed on release: its inode is checked after locking, so a waiter
# that locked a file just unlinked by the previous holder tries again on the new one.


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike, what: str, *, wait: bool = False) -> Iterator[Path]:
    """Hold the exclusive lock file ``path`` for the block; remove it afterwards.

    Args:
        path: the lock file (created; its parent must exist).
        what: what the lock guards, for the error message (e.g. ``"run folder out/run-1"``).
        wait: block until the holder releases it; otherwise a held lock is an error at once.

    Raises:
        LockedError: ``wait`` is false and another process (or another open of the file in this process) holds
            the lock: one line naming ``what``, the holder's pid and the lock file.
    """
    import fcntl

    from suite.errors import LockedError

    path = Path(path)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise LockedError(f"{what}: in use by {who} (lock file {path}); wait for it to finish or stop it")
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder removed the file while we waited for it: lock the current one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def _lock_holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def lock_path(target: str | os.PathLike) -> Path:
    """The lock file guarding the writing of ``target`` (a hidden sibling: ``.<name>.lock``)."""
    target = Path(target)
    return target.with_name(f".{target.name}.lock")


def _remove_leftovers(final: Path) -> None:
    """Remove staging folders (``.<name>.partial-*``) and replaced copies (``.<name>.old-*``) of ``final`` that
    writers killed before their cleanup left. Called with ``final``'s lock held, so no live writer owns them."""
    name = glob.escape(final.name)
    for pattern in (f".{name}.partial-*", f".{name}.old-*"):
        for leftover in final.parent.glob(pattern):
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


@contextlib.contextmanager
def staged_directory(final: str | os.PathLike, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary folder that becomes ``final`` only if the block finishes without an exception.

    The temporary folder is a hidden sibling of ``final`` (same file system, so the rename is atomic). On any
    exception, including ``KeyboardInterrupt``, it is removed and ``final`` is left untouched. With
    ``overwrite``, an existing ``final`` is replaced; otherwise it is an error, checked before any work and again
    at the rename.

    One writer at a time: the block runs holding ``final``'s lock (:func:`lock_path`); a second writer gets a
    :class:`~suite.errors.LockedError` naming the first one's pid at once. With the lock held, staging folders left
    by writers that were killed are removed first.
    """
    from suite.errors import DataError

    final = Path(final)
    if final.exists() and not overwrite:
        raise DataError(f"{final}: output already exists (pass --overwrite to replace it)")
    final.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(lock_path(final), f"{final}: output folder"):
        _remove_leftovers(final)
        if final.exists() and not overwrite:  # another writer finished it while we were checking
            raise DataError(f"{final}: output already exists (pass --overwrite to replace it)")
        tmp = final.with_name(f".{final.name}.partial-{uuid.uuid4().hex[:8]}")
        tmp.mkdir()
        try:
            yield tmp
            _publish(tmp, final, overwrite)
        except OSError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            raise _renamed_error(err, tmp, final) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _renamed_error(err: OSError, tmp: Path, final: Path) -> OSError:
    """``err`` naming the file as it would have been named in ``final`` (the staging folder ``tmp`` is gone)."""
    name = err.filename
    if not isinstance(name, str) or not (name == str(tmp) or name.startswith(f"{tmp}{os.sep}")):
        return err
    return OSError(err.errno, err.strerror, str(final) + name[len(str(tmp)):])


def _publish(tmp: Path, final: Path, overwrite: bool) -> None:
    """Rename the finished ``tmp`` to ``final`` (replacing it only with ``overwrite``) and flush the rename."""
    from suite.errors import DataError

    if final.exists():
        if not overwrite:
            raise DataError(f"{final}: output already exists (pass --overwrite to replace it)")
        old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
        rename(final, old)
        try:
            rename(tmp, final)
        except BaseException:
            rename(old, final)  # put the previous output back
            raise
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink()
    else:
        rename(tmp, final)
    fsync_dir(final.parent)


# ----------------------------------------------------------------------------------------- positional IO
#
# Honest positional reads and writes for the disk-based system and its measurements.
#
# * ``pread_into`` / ``pread_exact`` / ``pwrite_all`` never return short or wrong data: they loop on short
#   transfers (a read(2) or write(2) may move fewer bytes than asked: signals, pipes, network file systems,
#   and Linux caps every transfer at 0x7ffff000 bytes) and split requests into chunks of at most
#   ``MAX_TRANSFER`` bytes, so any size above 2 GiB works. A read that meets the end of the file before the
#   requested range is complete raises :class:`~suite.errors.DataError` naming the file.
# * ``evict_page_cache`` drops a file's pages from the page cache (``posix_fadvise(POSIX_FADV_DONTNEED)``,
#   after ``fdatasync`` so that dirty pages of a written file can be dropped too), so that the next read of
#   those bytes hits the disk; ``pread_direct`` reads with ``O_DIRECT`` (page cache bypassed; aligned bounce
#   buffer) where the file system supports it (:func:`direct_io_supported`).
# * ``process_io_bytes`` reads ``/proc/self/io``: ``read_bytes``/``write_bytes`` are the bytes this process
#   really moved to or from storage (what the disk saw), ``rchar``/``wchar`` the bytes that went through
#   read/write system calls (page-cache hits included). Record both beside the suite's own
#   :class:`IOCounters` (bytes the code asked for): ``read_bytes`` ~ ``IOCounters.bytes_read`` is the
#   evidence that a measurement read from disk.

MAX_TRANSFER = 1 << 30
"""Largest number of bytes passed to one read/write system call (1 GiB; Linux moves at most 0x7ffff000)."""

DIRECT_ALIGNMENT = 4096
"""Alignment of offsets, lengths and buffer addresses used for ``O_DIRECT`` (a multiple of every common
logical block size)."""

_DIRECT_CHUNK = 64 << 20


def _describe(fd: int, path: str | os.PathLike | None) -> str:
    if path is not None:
        return str(path)
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"file descriptor {fd}"


def _byte_view(buffer: Any, writable: bool) -> memoryview:
    """A flat unsigned-byte memoryview of a bytes-like object, numpy array or CPU torch tensor."""
    if hasattr(buffer, "numpy") and hasattr(buffer, "is_contiguous"):  # torch.Tensor, without importing torch
        if buffer.device.type != "cpu" or not buffer.is_contiguous():
            raise ValueError("positional IO needs a contiguous CPU tensor")
        buffer = buffer.detach().numpy()
    view = memoryview(buffer)
    if not view.c_contiguous:
        raise ValueError("positional IO needs a C-contiguous buffer")
    if writable and view.readonly:
        raise ValueError("cannot read into a read-only buffer")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def pread_into(fd: int, buffer: Any, offset: int, *, path: str | os.PathLike | None = None,
               max_transfer: int = MAX_TRANSFER) -> int:
    """Fill ``buffer`` with the bytes of ``fd`` starting at ``offset``; never returns short.

    Args:
        fd: an open file descriptor (read access).
        buffer: where the bytes go: a bytearray, a writable memoryview, a C-contiguous numpy array or a
            contiguous CPU torch tensor (its whole storage is filled; e.g. a preallocated buffer slot).
        offset: file offset of the first byte.
        path: the file's name for error messages (default: looked up from ``/proc/self/fd``).
        max_transfer: bytes per system call at most (requests are split into chunks of this size).

    Returns:
        The number of bytes read (``len`` of the buffer in bytes).

    Raises:
        DataError: the file ends before ``offset + nbytes``.
    """
    view = _byte_view(buffer, writable=True)
    total = view.nbytes
    if _faults.ACTIVE:
        _faults.check("read", _describe(fd, path))
    done = 0
    while done < total:
        chunk = min(total - done, max_transfer)
        try:
            got = os.preadv(fd, [view[done:done + chunk]], offset + done)
        except OSError as err:
            raise _named(err, _describe(fd, path)) from None
        if got == 0:
            raise _short_file(fd, path, offset, done, total)
        done += got
    return total


def _short_file(fd: int, path: str | os.PathLike | None, offset: int, done: int, total: int) -> Exception:
    """The error of a positional read that found the file's end after ``done`` of ``total`` bytes."""
    from suite.errors import DataError

    return DataError(f"{_describe(fd, path)}: file ends at byte {offset + done}, expected {total} bytes from "
                     f"offset {offset} (short file)")


_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def preadv_into(fd: int, buffers: list[Any], offset: int, *, path: str | os.PathLike | None = None,
                max_transfer: int = MAX_TRANSFER) -> int:
    """Fill ``buffers`` in turn with the consecutive bytes of ``fd`` from ``offset`` (a scatter read, ``preadv``);
    never returns short. One system call per ``IOV_MAX`` buffers or ``max_transfer`` bytes: a run of adjacent
    partitions on disk is read by one call into the buffer frames they go to, without a copy.

    Args: as :func:`pread_into`, with a list of buffers.

    Returns:
        The number of bytes read (their total size).

    Raises:
        DataError: the file ends before the buffers are full.
    """
    views = [view for view in (_byte_view(buffer, writable=True) for buffer in buffers) if view.nbytes]
    total = sum(view.nbytes for view in views)
    if _faults.ACTIVE:
        _faults.check("read", _describe(fd, path))
    done, first, skip = 0, 0, 0  # bytes read, first buffer not full, bytes of it already filled
    while done < total:
        iov, size = [], 0
        for view in views[first:first + _IOV_MAX]:
            part = view[skip:] if not iov else view
            part = part[:max_transfer - size]
            iov.append(part)
            size += part.nbytes
            if size >= max_transfer:
                break
        try:
            got = os.preadv(fd, iov, offset + done)
        except OSError as err:
            raise _named(err, _describe(fd, path)) from None
        if got == 0:
            raise _short_file(fd, path, offset, done, total)
        done += got
        while got:
            left = views[first].nbytes - skip
            if got >= left:
                got -= left
                first, skip = first + 1, 0
            else:
                skip, got = skip + got, 0
    return total


def pread_exact(fd: int, nbytes: int, offset: int, *, path: str | os.PathLike | None = None,
                max_transfer: int = MAX_TRANSFER) -> bytearray:
    """Read exactly ``nbytes`` bytes of ``fd`` at ``offset`` into a new bytearray (see :func:`pread_into`)."""
    if nbytes < 0 or offset < 0:
        raise ValueError(f"pread_exact: negative size or offset ({nbytes}, {offset})")
    out = bytearray(nbytes)
    pread_into(fd, out, offset, path=path, max_transfer=max_transfer)
    return out


def pwrite_all(fd: int, data: Any, offset: int, *, path: str | os.PathLike | None = None,
               max_transfer: int = MAX_TRANSFER) -> int:
    """Write all of ``data`` (bytes-like, numpy array or CPU tensor) to ``fd`` at ``offset``; never short.

    Returns:
        The number of bytes written.

    Raises:
        DataError: the system call wrote nothing (e.g. a full device reported as a zero-byte write).
    """
    view = _byte_view(data, writable=False)
    total = view.nbytes
    if _faults.ACTIVE:
        keep = _faults.check("write", _describe(fd, path), total)
        if keep is not None:
            os.pwrite(fd, view[:keep], offset)
            raise _faults.short_write_error(_describe(fd, path), keep, total)
    done = 0
    while done < total:
        chunk = min(total - done, max_transfer)
        try:
            put = os.pwrite(fd, view[done:done + chunk], offset + done)
        except OSError as err:
            raise _named(err, _describe(fd, path)) from None
        if put == 0:
            from suite.errors import DataError

            raise DataError(f"{_describe(fd, path)}: write at byte {offset + done} made no progress")
        done += put
    return total


def evict_page_cache(target: int | str | os.PathLike, offset: int = 0, length: int = 0, *,
                     sync: bool = True) -> None:
    """Drop the cached pages of a file range so that the next read of it comes from the disk.

    Args:
        target: an open file descriptor or a path.
        offset: first byte of the range.
        length: bytes in the range; 0 means to the end of the file.
        sync: flush dirty pages first (``fdatasync``); ``POSIX_FADV_DONTNEED`` cannot drop dirty pages, so a
            file just written stays cached without it.
    """
    if isinstance(target, int):
        if sync:
            os.fdatasync(target)
        os.posix_fadvise(target, offset, length, os.POSIX_FADV_DONTNEED)
        return
    fd = os.open(target, os.O_RDONLY)
    try:
        evict_page_cache(fd, offset, length, sync=sync)
    finally:
        os.close(fd)


def resident_pages(target: str | os.PathLike) -> tuple[int, int]:
    """``(resident, total)`` pages of a file in the page cache (``mincore``); ``(0, 0)`` for an empty file.

    A diagnostic for measurements (is a file really evicted?); Linux only.
    """
    import ctypes
    import mmap

    size = os.path.getsize(target)
    if size == 0:
        return 0, 0
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    fd = os.open(target, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"{target}: mmap failed")
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"{target}: mincore failed")
            flags = bytes(vec)
            resident = pages - flags.count(0)
        finally:
            libc.munmap(ctypes.c_void_p(addr), size)
    finally:
        os.close(fd)
    return resident, pages


def direct_io_supported(path: str | os.PathLike) -> bool:
    """Whether ``path`` (an existing file) can be opened with ``O_DIRECT`` and read with aligned transfers."""
    import mmap

    if not hasattr(os, "O_DIRECT"):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return False
    try:
        bounce = mmap.mmap(-1, DIRECT_ALIGNMENT)
        try:
            os.preadv(fd, [bounce], 0)
        finally:
            bounce.close()
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def pread_direct(path: str | os.PathLike, buffer: Any, offset: int, *, chunk: int = _DIRECT_CHUNK) -> int:
    """Fill ``buffer`` from ``path`` at ``offset`` with ``O_DIRECT`` reads (the page cache is bypassed).

    Any offset and length work: aligned spans of the file are read into a page-aligned bounce buffer (an
    anonymous mmap of ``chunk`` bytes) and the requested bytes copied out. Note that the disk reads up to
    ``DIRECT_ALIGNMENT - 1`` extra bytes at each end.

    Raises:
        DataError: the file ends before ``offset + nbytes`` or does not support ``O_DIRECT``.
    """
    import mmap

    from suite.errors import DataError

    view = _byte_view(buffer, writable=True)
    total = view.nbytes
    if total == 0:
        return 0
    chunk = max(DIRECT_ALIGNMENT, chunk // DIRECT_ALIGNMENT * DIRECT_ALIGNMENT)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as err:
        raise DataError(f"{path}: cannot open with O_DIRECT ({err.strerror})") from None
    bounce = mmap.mmap(-1, chunk)
    try:
        done = 0
        while done < total:
            start = offset + done
            aligned = start - start % DIRECT_ALIGNMENT
            skip = start - aligned
            want = min(chunk, -(-(skip + total - done) // DIRECT_ALIGNMENT) * DIRECT_ALIGNMENT)
            got = 0
            while got < want:
                try:
                    n = os.preadv(fd, [memoryview(bounce)[got:want]], aligned + got)
                except OSError as err:
                    raise DataError(f"{path}: O_DIRECT read failed at byte {aligned + got} ({err.strerror})") from None
                got += n
                if n == 0 or n % DIRECT_ALIGNMENT:  # end of file (a partial block can only be the last one)
                    break
            usable = min(got - skip, total - done)
            if usable > 0:
                view[done:done + usable] = memoryview(bounce)[skip:skip + usable]
                done += usable
            if got < want and done < total:
                raise DataError(f"{path}: file ends at byte {offset + done}, expected {total} bytes from "
                                f"offset {offset} (short file)")
    finally:
        bounce.close()
        os.close(fd)
    return total


_PROC_IO_FIELDS = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes", "cancelled_write_bytes")


@dataclasses.dataclass(frozen=True)
class ProcessIO:
    """A snapshot of ``/proc/self/io`` (all zeros where the file is missing, e.g. not on Linux).

    Attributes:
        read_bytes: bytes this process caused to be fetched from storage (page-cache misses, direct IO).
        write_bytes: bytes this process caused to be sent to storage (write-back of its dirty pages).
        rchar: bytes passed through read-like system calls (page-cache hits included).
        wchar: bytes passed through write-like system calls.
        syscr: read-like system calls.
        syscw: write-like system calls.
        cancelled_write_bytes: dirty bytes this process truncated away before they were written.
        available: whether ``/proc/self/io`` was readable.
    """

    rchar: int = 0
    wchar: int = 0
    syscr: int = 0
    syscw: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    cancelled_write_bytes: int = 0
    available: bool = False

    def __sub__(self, other: "ProcessIO") -> "ProcessIO":
        return ProcessIO(**{name: getattr(self, name) - getattr(other, name) for name in _PROC_IO_FIELDS},
                         available=self.available and other.available)

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict (for records), without ``available``."""
        return {name: getattr(self, name) for name in _PROC_IO_FIELDS}


def process_io_bytes() -> ProcessIO:
    """The IO counters of this process from ``/proc/self/io`` (all threads); subtract two snapshots."""
    try:
        with open("/proc/self/io", "rb") as handle:
            text = handle.read().decode()
    except OSError:
        return ProcessIO()
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in _PROC_IO_FIELDS:
            values[key] = int(value)
    return ProcessIO(**values, available=True)


class IOCounters:
    """Thread-safe counters of the bytes and operations the suite itself asked for.

    The disk system adds to them at every partition read or write; reports put :meth:`snapshot` beside the
    difference of two :func:`process_io_bytes` snapshots (what the disk really saw).
    """

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self.bytes_read = 0
        self.bytes_written = 0
        self.reads = 0
        self.writes = 0
        self.read_s = 0.0
        self.write_s = 0.0

    def add_read(self, nbytes: int, seconds: float = 0.0) -> None:
        """Count one read of ``nbytes`` bytes that took ``seconds``."""
        with self._lock:
            self.bytes_read += nbytes
            self.reads += 1
            self.read_s += seconds

    def add_write(self, nbytes: int, seconds: float = 0.0) -> None:
        """Count one write of ``nbytes`` bytes that took ``seconds``."""
        with self._lock:
            self.bytes_written += nbytes
            self.writes += 1
            self.write_s += seconds

    def snapshot(self) -> dict[str, int]:
        """``{"bytes_read", "bytes_written", "reads", "writes", "read_s", "write_s"}`` read consistently under
        the lock."""
        with self._lock:
            return {"bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
                    "reads": self.reads, "writes": self.writes, "read_s": self.read_s, "write_s": self.write_s}

    def reset(self) -> None:
        """Set every counter to zero."""
        with self._lock:
            self.bytes_read = self.bytes_written = self.reads = self.writes = 0
            self.read_s = self.write_s = 0.0
