"""Memory known before it is needed: a run's peak resident memory, estimated per system before training, and the
memory the run may use.

Each system declares its estimate by name (the ``memory_estimates`` plugin table, :mod:`systems.plugins`): a pure
function ``estimate(spec, store, runtime_bytes) -> MemoryEstimate`` of the run spec, the opened store and the
memory the process holds already (interpreter and libraries, measured before the estimate). The runner estimates
before the run folder exists (:func:`check_memory`) and stops a run whose estimate exceeds the memory available
with one line that says what would fit; ``gnnsuite run --dry-run`` prints the estimate and runs nothing.

The memory available is the least of ``--memory-limit``, what the memory cgroup of the process still allows
(``memory.max`` minus ``memory.current`` in cgroup v2, ``memory.limit_in_bytes`` minus ``memory.usage_in_bytes`` in
cgroup v1) and ``MemAvailable`` (``/proc/meminfo``), the last two plus
what the process holds already (they count it as used).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from suite.errors import ConfigError, MemoryLimitError
from suite.registry import Registry

if TYPE_CHECKING:  # pragma: no cover
    from suite.config import RunSpec
    from suite.data import GraphStore
    from suite.data.out_of_core import MemoryBudget

MiB = 1 << 20
RUNTIME = "runtime (interpreter, libraries)"
"""The part every estimate starts from: what the process holds before the run (``runtime_bytes``)."""

FIRST_USE = "first use (kernels, arenas)"
"""The part an estimate counts for what a process adds on its first run (compiled kernels, allocator arenas,
modules imported on first use); a process that has run before holds it in its runtime already, so
:func:`estimate_memory` leaves it out there (:func:`note_run_started`)."""

_RUNS_STARTED = 0

MMAP_THRESHOLD_BYTES = 4 * MiB
"""Allocations of this size or more get pages of their own, returned to the system when freed (glibc's
``M_MMAP_THRESHOLD``, fixed by :func:`bound_allocator`)."""

_M_MMAP_THRESHOLD = -3  # mallopt(3) parameter number (malloc.h)

MEMORY_ESTIMATES: Registry = Registry("memory estimate", plugin_table="memory_estimates")
"""``system name -> estimate(spec, store, runtime_bytes) -> MemoryEstimate`` (the ``memory_estimates`` table)."""


@dataclass(frozen=True)
class MemoryEstimate:
    """A run's estimated peak resident memory, by part.

    Attributes:
        resident: ``{part: bytes}`` held for the whole run (the runtime, features, graph, buffer, embeddings...).
        phases: ``{phase: {part: bytes}}`` held only during one phase (``train``: a training batch in flight;
            ``evaluate``: an evaluation batch, the whole-graph structures an evaluation reads); the peak is the
            resident parts plus the largest phase.
        setup: ``{phase: {part: bytes}}`` of phases that run before the run holds its data (partitioning a store
            the disk system finds unpartitioned): the process then holds only its runtime (the :data:`RUNTIME`
            part) and the phase.
        suggest: ``suggest(budget_bytes) -> text``: what would fit in ``budget_bytes`` (a buffer capacity, a
            cache budget, another system), as a clause of the refusal line; pure, from the same inputs.
        reclaimable: names of parts that are file pages read once through a memory map (partitioning's input
            store): they count in the resident set, so in :attr:`peak_bytes`, but the kernel drops them under a
            memory limit, so they are left out of :attr:`required_bytes`, what must fit.
    """

    resident: Mapping[str, int]
    phases: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    suggest: Callable[[int], str] = field(default=lambda budget: "", compare=False, repr=False)
    setup: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    reclaimable: frozenset[str] = frozenset()

    def phase_peaks(self, reclaimable: bool = True) -> dict[str, int]:
        """Every phase's peak: the resident parts plus the phase, or for a setup phase the runtime plus it
        (``reclaimable=False``: without the :attr:`reclaimable` parts)."""
        resident = self._total(self.resident, reclaimable)
        peaks = {name: resident + self._total(parts, reclaimable) for name, parts in self.phases.items()}
        runtime = self.resident.get(RUNTIME, 0)
        peaks.update({name: runtime + self._total(parts, reclaimable) for name, parts in self.setup.items()})
        return peaks

    def _total(self, parts: Mapping[str, int], reclaimable: bool) -> int:
        return int(sum(value for name, value in parts.items() if reclaimable or name not in self.reclaimable))

    def _largest(self, reclaimable: bool) -> tuple[str | None, int]:
        """The phase of the largest peak and that peak (None and the resident parts without phases)."""
        peaks = self.phase_peaks(reclaimable)
        if not peaks:
            return None, self._total(self.resident, reclaimable)
        phase = max(peaks, key=peaks.__getitem__)
        return phase, peaks[phase]

    @property
    def peak_phase(self) -> str | None:
        """The phase with the most memory (None without phases)."""
        return self._largest(reclaimable=True)[0]

    @property
    def peak_bytes(self) -> int:
        """The largest phase's peak (:meth:`phase_peaks`); the resident parts without phases."""
        return self._largest(reclaimable=True)[1]

    @property
    def required_phase(self) -> str | None:
        """The phase that needs the most memory that must fit (:attr:`required_bytes`)."""
        return self._largest(reclaimable=False)[0]

    @property
    def required_bytes(self) -> int:
        """The peak without the :attr:`reclaimable` parts: what must fit in the memory available."""
        return self._largest(reclaimable=False)[1]

    def to_dict(self) -> dict:
        """Plain data (``peak_bytes``, ``peak_phase``, ``resident``, ``phases``, ``setup``) for JSON and
        summaries."""
        return {"peak_bytes": self.peak_bytes, "peak_phase": self.peak_phase,
                "resident": {k: int(v) for k, v in self.resident.items()},
                "phases": {p: {k: int(v) for k, v in parts.items()} for p, parts in self.phases.items()},
                "setup": {p: {k: int(v) for k, v in parts.items()} for p, parts in self.setup.items()}}


def format_bytes(value: float) -> str:
    """``1.23 GiB``, ``456.0 MiB``, ``12.0 KiB``: a size for people."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", 1 << 10)):
        if abs(value) >= scale:
            return f"{value / scale:.{2 if unit == 'GiB' else 1}f} {unit}"
    return f"{int(value)} B"


def estimate_memory(spec: RunSpec, store: GraphStore, runtime_bytes: int | None = None,
                    warm: bool | None = None) -> MemoryEstimate:
    """The registered estimate of ``spec.system.name`` for ``spec`` on ``store``; ``runtime_bytes`` defaults to
    the resident memory of this process now (:func:`current_rss_bytes`). ``warm`` (default: whether a run has
    trained in this process, :func:`process_is_warm`) leaves out the :data:`FIRST_USE` part, which the runtime of
    such a process holds already.

    Raises:
        ConfigError: no estimate is registered for the system.
    """
    estimate = MEMORY_ESTIMATES.get(spec.system.name)(spec, store,
                                                      current_rss_bytes() if runtime_bytes is None else runtime_bytes)
    if warm is None:
        warm = process_is_warm()
    return without_first_use(estimate) if warm else estimate


def note_run_started() -> None:
    """Record that a run trains in this process (a grid running several runs in one process: the later ones'
    runtime holds the first use already)."""
    global _RUNS_STARTED
    _RUNS_STARTED += 1


def bound_allocator(threshold_bytes: int = MMAP_THRESHOLD_BYTES) -> int | None:
    """Fix glibc's mmap threshold at ``threshold_bytes`` for the rest of the process, so that a run's peak memory
    is what it holds, not what the allocator kept.

    glibc raises the threshold (up to 32 MiB) each time a mapped block is freed, after which tensors of that size
    come from its heaps and stay there once freed, interleaved between the threads' arenas: measured on FB15k-237
    link prediction (in-memory, 1 epoch, fresh processes), peaks of 829-842 MiB on quiet cores and 1,105-1,235 MiB
    when other jobs shared them, against 800-816 MiB with the threshold fixed at 4 MiB, quiet or not (16 MiB:
    878-1,045). The price is a page fault per page of every large temporary: arxiv-like node classification (1
    epoch, quiet, 4 runs each) took x1.08 the wall time (x1.13 the CPU time, its system time 3.1 -> 4.8 s) for
    a peak of 1,092 MiB instead of 1,154; a threshold of 128 KiB made the link-prediction epochs about 1.5 times
    slower. ``GNNSUITE_MMAP_THRESHOLD`` (bytes; 0: leave glibc's own, rising threshold) overrides the default, and
    where ``MALLOC_MMAP_THRESHOLD_`` is set glibc's setting stays; elsewhere than glibc nothing is changed.

    Returns:
        The threshold now in force, or None where it was left alone.
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return None
    override = os.environ.get("GNNSUITE_MMAP_THRESHOLD")
    if override is not None:
        try:
            threshold_bytes = int(override)
        except ValueError:
            raise ConfigError(f"GNNSUITE_MMAP_THRESHOLD: expected a number of bytes, got {override!r}") from None
    if threshold_bytes <= 0:
        return None
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc
        return None
    return threshold_bytes if mallopt(_M_MMAP_THRESHOLD, threshold_bytes) == 1 else None


def process_is_warm() -> bool:
    """Whether a run has trained in this process before (:func:`note_run_started`)."""
    return _RUNS_STARTED > 0


def without_first_use(estimate: MemoryEstimate) -> MemoryEstimate:
    """``estimate`` without its :data:`FIRST_USE` part."""
    return MemoryEstimate({k: v for k, v in estimate.resident.items() if k != FIRST_USE}, estimate.phases,
                          estimate.suggest, estimate.setup, estimate.reclaimable)


# ---------------------------------------------------------------------------------------------- what is available
def current_rss_bytes(status: str | os.PathLike = "/proc/self/status") -> int:
    """Resident memory of this process now (``VmRSS``); 0 where unknown."""
    return _proc_kib(status, "VmRSS")


def mem_available_bytes(meminfo: str | os.PathLike = "/proc/meminfo") -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes; None where unknown."""
    value = _proc_kib(meminfo, "MemAvailable")
    return value or None


def _proc_kib(path: str | os.PathLike, key: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == key:
                return int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


_UNLIMITED = 1 << 62  # cgroup v1 writes "no limit" as the largest page-aligned 64-bit value


def cgroup_headroom_bytes(root: str | os.PathLike = "/sys/fs/cgroup",
                          cgroup_file: str | os.PathLike = "/proc/self/cgroup") -> int | None:
    """What the memory cgroup of this process (and its ancestors) still allows: the least of ``memory.max -
    memory.current`` (cgroup v2) or ``memory.limit_in_bytes - memory.usage_in_bytes`` (cgroup v1's memory
    controller, mounted at ``root/memory``) along its path; None without a limit."""
    try:
        lines = Path(cgroup_file).read_text().splitlines()
    except OSError:
        return None
    v1 = next((line.split(":", 2)[2] for line in lines if line.split(":")[1:2] == ["memory"]), None)
    v2 = next((line[3:] for line in lines if line.startswith("0::")), None)
    if v1 is not None:
        return _headroom(Path(root) / "memory", v1, "memory.limit_in_bytes", "memory.usage_in_bytes")
    if v2 is not None:
        return _headroom(Path(root), v2, "memory.max", "memory.current")
    return None


def _headroom(top: Path, path: str, limit_file: str, usage_file: str) -> int | None:
    """The least ``limit - usage`` from the cgroup ``top/path`` up to ``top`` (None where none is limited)."""
    folder, headroom = top / path.strip().lstrip("/"), None
    while True:
        try:
            limit = (folder / limit_file).read_text().strip()
            if limit != "max" and int(limit) < _UNLIMITED:
                left = int(limit) - int((folder / usage_file).read_text().strip())
                headroom = left if headroom is None else min(headroom, left)
        except (OSError, ValueError):
            pass
        if folder == top or folder.parent == folder:
            return headroom
        folder = folder.parent


@dataclass(frozen=True)
class Available:
    """The memory a run may reach (its peak resident size), and where the bound comes from."""

    bytes: int | None
    source: str


def available_memory(limit_bytes: int | None = None) -> Available:
    """The least of ``limit_bytes`` (``--memory-limit``), the cgroup's headroom and ``MemAvailable``, the last two
    plus this process's resident memory (both count it as used already)."""
    held = current_rss_bytes()
    bounds = []
    if limit_bytes is not None:
        bounds.append((limit_bytes, "--memory-limit"))
    headroom = cgroup_headroom_bytes()
    if headroom is not None:
        bounds.append((held + headroom, "the memory cgroup's limit"))
    free = mem_available_bytes()
    if free is not None:
        bounds.append((held + free, "MemAvailable"))
    if not bounds:
        return Available(None, "unknown")
    value, source = min(bounds)
    return Available(int(value), source)


def memory_budget(limit_bytes: int | None = None) -> MemoryBudget | None:
    """The memory an out-of-core pass (import, partitioning) may use: :func:`available_memory` with what this
    process holds as it goes (:func:`current_rss_bytes`); None where nothing bounds it."""
    from suite.data.out_of_core import MemoryBudget

    available = available_memory(limit_bytes)
    return None if available.bytes is None else MemoryBudget(available.bytes, current_rss_bytes, available.source)


def check_memory(estimate: MemoryEstimate, available: Available, system: str) -> None:
    """Stop a run whose estimate exceeds the memory available, with one line saying what would fit.

    Raises:
        MemoryLimitError: ``estimate.required_bytes > available.bytes`` (file pages the kernel can drop left out).
    """
    if available.bytes is None or estimate.required_bytes <= available.bytes:
        return
    hint = estimate.suggest(available.bytes)
    raise MemoryLimitError(
        f"system {system}: estimated peak memory {format_bytes(estimate.required_bytes)} (during "
        f"{estimate.required_phase}) exceeds the {format_bytes(available.bytes)} available ({available.source})"
        + (f"; {hint}" if hint else "") + " (gnnsuite run --dry-run shows the estimate)")


def describe(estimate: MemoryEstimate, available: Available) -> list[str]:
    """The estimate as lines for people: the parts, the peak, and whether it fits."""
    lines = [f"estimated peak memory: {format_bytes(estimate.peak_bytes)} (during {estimate.peak_phase})"]
    width = max([len(k) for k in estimate.resident] + [len(k) for p in estimate.phases.values() for k in p]
                + [len(k) for p in estimate.setup.values() for k in p] + [8])
    for phase, parts in estimate.setup.items():
        lines.append(f"  before the run holds its data, {phase}{' (the peak)' if phase == estimate.peak_phase else ''}"
                     f" (with the runtime):")
        lines += [f"    {name:<{width}}  {format_bytes(value):>11}"
                  + ("  (file pages: dropped under a memory limit)" if name in estimate.reclaimable else "")
                  for name, value in parts.items()]
    lines.append("  resident for the whole run:")
    lines += [f"    {name:<{width}}  {format_bytes(value):>11}" for name, value in estimate.resident.items()]
    for phase, parts in estimate.phases.items():
        lines.append(f"  during {phase}{' (the peak)' if phase == estimate.peak_phase else ''}:")
        lines += [f"    {name:<{width}}  {format_bytes(value):>11}" for name, value in parts.items()]
    if available.bytes is None:
        lines.append("available: unknown")
    else:
        verdict = "fits" if estimate.required_bytes <= available.bytes else "does NOT fit"
        needed = (f" ({format_bytes(estimate.required_bytes)} must fit)"
                  if estimate.required_bytes != estimate.peak_bytes else "")
        lines.append(f"available: {format_bytes(available.bytes)} ({available.source}){needed}: {verdict}")
    return lines


__all__ = ["Available", "MEMORY_ESTIMATES", "MMAP_THRESHOLD_BYTES", "MemoryEstimate", "MemoryLimitError",
           "RUNTIME", "available_memory", "bound_allocator", "cgroup_headroom_bytes", "check_memory",
           "current_rss_bytes", "describe", "estimate_memory", "format_bytes", "mem_available_bytes", "memory_budget"]
