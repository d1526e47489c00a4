"""Fault injection at the IO seam, SQLite style: make the k-th file operation fail, or count the operations.

Every file write, fsync, rename and read of the suite passes through the seam in :mod:`suite.io` (``open_write``,
``write_to``, ``sync_file``, ``fsync_dir``, ``rename``, ``atomic_write_bytes``, ``pwrite_all``, ``pread_into``,
``open_read`` ...), which calls :func:`check` with the kind of operation and the file. The environment variable
``GNNSUITE_FAULT`` turns it on (read once at import, so child processes inherit it); when it is unset
:data:`ACTIVE` is false and the seam does not call in at all.

``GNNSUITE_FAULT`` is either ``count`` (count only) or comma-separated ``key=value`` pairs:

- ``k``: the 1-based number of the operation that fails (counted over the kinds ``op`` selects);
- ``op``: ``any`` (default) or one kind: ``open`` (a file created or truncated for writing), ``write``, ``fsync``,
  ``rename``, ``read``;
- ``error``: ``ENOSPC`` (default), ``EIO``, or ``short``: a write puts half its bytes in the file and then fails
  with ENOSPC, as a write that fills the disk does (other kinds of operation fail with EIO). A read always fails
  with EIO (a read does not need space).

Only the k-th operation fails; the ones after it succeed (so cleanup runs as it would on a disk that filled up
for a moment). With ``GNNSUITE_FAULT_REPORT=<file>`` the process writes, at exit, ``{"counts": {kind: n, ...,
"total": n}, "injected": {"op", "k", "path", "error"} or null, "sites": [...]}`` to that file (plain IO, outside the
seam). A *site* is where in the code an operation of one kind is asked for: the kind and the two innermost frames
of the suite's code outside the seam (``suite/data/npy.py:append:75 < suite/data/csr.py:write_csrs:211``, so that the
same helper called from two places is two sites); each site lists the number of its first and last operation (``k``
over all kinds) and how many it had, so that a sweep can fail every site at least once without failing every
operation.
"""

from __future__ import annotations

import atexit
import dataclasses
import errno
import json
import os
import re
import sys
import threading

ENV = "GNNSUITE_FAULT"
REPORT_ENV = "GNNSUITE_FAULT_REPORT"
KINDS = ("open", "write", "fsync", "rename", "read")
ERRORS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO, "short": errno.ENOSPC}


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """Which operation fails and how (``k`` None: count only)."""

    k: int | None = None
    op: str = "any"
    error: str = "ENOSPC"


def parse_plan(text: str) -> FaultPlan:
    """Parse a ``GNNSUITE_FAULT`` value (see the module docstring); ValueError naming the variable when bad."""
    text = text.strip()
    if text == "count":
        return FaultPlan()
    fields: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in ("k", "op", "error"):
            raise ValueError(f"{ENV}: expected 'count' or k=N,op=KIND,error=ENOSPC|EIO|short, got {text!r}")
        fields[key] = value
    if "k" not in fields or not fields["k"].isdigit() or int(fields["k"]) < 1:
        raise ValueError(f"{ENV}: k must be a positive integer, got {text!r}")
    op, error = fields.get("op", "any"), fields.get("error", "ENOSPC")
    if op != "any" and op not in KINDS:
        raise ValueError(f"{ENV}: op must be 'any' or one of {', '.join(KINDS)}, got {op!r}")
    if error not in ERRORS:
        raise ValueError(f"{ENV}: error must be one of {', '.join(ERRORS)}, got {error!r}")
    return FaultPlan(k=int(fields["k"]), op=op, error=error)


class _State:
    def __init__(self, plan: FaultPlan) -> None:
        self.plan = plan
        self.counts = dict.fromkeys(KINDS, 0)
        self.selected = 0
        self.injected: dict[str, object] | None = None
        self.sites: dict[tuple[str, str], list[int]] = {}
        self.lock = threading.Lock()


_STATE: _State | None = _State(parse_plan(os.environ[ENV])) if os.environ.get(ENV) else None
ACTIVE = _STATE is not None
"""Whether fault injection (or counting) is on in this process; the seam skips :func:`check` when it is not."""


def check(op: str, path: str | os.PathLike | None, nbytes: int = 0) -> int | None:
    """Count one operation of kind ``op`` on ``path``; raise the planned error if it is the one that fails.

    Returns:
        None, or for a ``short`` fault on a write, how many of its ``nbytes`` bytes to write before
        :func:`short_write_error` is raised by the caller.

    Raises:
        OSError: the planned ``ENOSPC`` / ``EIO`` with ``filename`` set to ``path``.
    """
    state = _STATE
    if state is None:
        return None
    caller = _caller()
    with state.lock:
        state.counts[op] += 1
        total = sum(state.counts.values())
        site = state.sites.setdefault((op, caller), [total, total, 0])
        site[1], site[2] = total, site[2] + 1
        plan = state.plan
        if plan.k is None or state.injected is not None or (plan.op != "any" and plan.op != op):
            return None
        state.selected += 1
        if state.selected != plan.k:
            return None
        state.injected = {"op": op, "k": plan.k, "path": str(path), "error": plan.error}
    if plan.error == "short" and op == "write" and nbytes > 1:
        return nbytes // 2
    # a short write that cannot put part of its bytes in (a library's write, a one-byte write) still fails as a full
    # disk does (ENOSPC); other operations under "short", and reads, fail with EIO
    code = errno.EIO if op == "read" or (plan.error == "short" and op != "write") else ERRORS[plan.error]
    raise OSError(code, os.strerror(code), str(path))


_SEAM_FILES = (os.path.join("suite", "io.py"), os.path.join("suite", "faults.py"))
_PACKAGES = r"(suite|systems|simulators|experiments|tests)"
_PACKAGE_PATH = re.compile(rf"[\\/]{_PACKAGES}[\\/](?!.*[\\/]{_PACKAGES}[\\/])")  # the innermost package folder


def _caller(depth: int = 2) -> str:
    """The ``depth`` innermost frames of the suite's own code outside the seam (``path:function:line`` each, joined
    by `` < ``): where the operation was asked for and by whom (standard-library frames such as ``contextlib``'s
    are skipped)."""
    frame, found = sys._getframe(2), []
    while frame is not None and len(found) < depth:
        name = frame.f_code.co_filename
        inside = _PACKAGE_PATH.search(name)
        if inside and not name.endswith(_SEAM_FILES):
            found.append(f"{name[inside.start() + 1:]}:{frame.f_code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(found) or "?"


def sites() -> list[dict[str, object]]:
    """The sites met so far (see the module docstring), in the order of their first operation."""
    if _STATE is None:
        return []
    with _STATE.lock:
        return [{"op": op, "caller": caller, "first": first, "last": last, "n": n}
                for (op, caller), (first, last, n) in sorted(_STATE.sites.items(), key=lambda item: item[1])]


def short_write_error(path: str | os.PathLike, written: int, nbytes: int) -> OSError:
    """The error that ends a short write: ENOSPC naming ``path`` and how much went in."""
    return OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (short write: {written} of {nbytes} bytes)",
                   str(path))


def counts() -> dict[str, int]:
    """Operations counted so far by kind, plus ``total`` (all zeros when injection is off)."""
    if _STATE is None:
        return {**dict.fromkeys(KINDS, 0), "total": 0}
    with _STATE.lock:
        return {**_STATE.counts, "total": sum(_STATE.counts.values())}


def _write_report() -> None:
    target = os.environ.get(REPORT_ENV)
    if _STATE is None or not target:
        return
    with open(f"{target}.{os.getpid()}.tmp", "w") as handle:
        json.dump({"counts": counts(), "injected": _STATE.injected, "sites": sites(), "pid": os.getpid()}, handle)
    os.replace(f"{target}.{os.getpid()}.tmp", target)


if ACTIVE:
    atexit.register(_write_report)
