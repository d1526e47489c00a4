"""The samplers' random numbers, and compiled (numba) kernels for their per-edge loops.

**Random numbers.** A hop that must draw (some node has more neighbours than the fanout) takes one 63-bit *key*
from the caller's ``torch.Generator`` (:func:`draw_key`); its ``i``-th random number is ``splitmix64(key, i)``,
a counter-based hash (Steele et al., the output function of Java's SplittableRandom; passes BigCrush). Draw
``j`` of the ``c``-th capped node of the hop (in node order) is number ``i = c * fanout + j``. A number is
reduced to ``[0, bound)`` by ``((z >> 32) * bound) >> 32`` (multiply-shift: no division; the probability of
any value is off by less than ``bound / 2**32`` relative, below 5e-6 for degrees up to 20,000). The same numbers
are computed by tensor operations (:func:`splitmix64`, :func:`uniform_below`) and inside the kernels, so both
backends give bit-identical samples, whatever the thread count.

**Kernels** (single-threaded, release the GIL so loader threads run in parallel):

- :func:`plan_hop`: per node, the first neighbour position, the degree and the number of neighbours taken;
- :func:`sample_hop`: the one-hop sample of :func:`systems.sampling.naive.sample_neighbours` (``segment``,
  global ``neighbours``), bit for bit;
- :func:`dense_hop`: DENSE's hop: the same sample, then deduplicated against every node seen in the batch (a
  reusable ``slot`` array of size ``num_nodes``): discovery indices and the new delta;
- :func:`naive_hop`: the naive sampler's block: the same one-hop sample, relabelled with the slot array;
- :func:`reverse_into`, :func:`fill_segments`, :func:`mark_roots`, :func:`clear_slots`: DENSE's layout steps.

numba is optional: :data:`NUMBA_AVAILABLE` says whether it imported; :func:`resolve_backend` turns a backend
name (``"auto"``, ``"numba"``, ``"torch"``) into the one used; the environment variable
``GNNSUITE_SAMPLER_BACKEND`` (``numba`` or ``torch``) overrides ``"auto"``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import numpy as np
import torch

try:
    import numba

    NUMBA_AVAILABLE = True
except ImportError:  # pragma: no cover - exercised when numba is absent
    numba = None
    NUMBA_AVAILABLE = False

BACKENDS = ("auto", "numba", "torch")
"""Backend names a sampler accepts."""
BACKEND_ENV = "GNNSUITE_SAMPLER_BACKEND"

# splitmix64 constants (uint64) and their two's-complement int64 values for torch.
_GAMMA, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def resolve_backend(backend: str) -> str:
    """The backend to use: ``"numba"`` or ``"torch"``.

    ``"auto"`` is the environment variable ``GNNSUITE_SAMPLER_BACKEND`` if set, else ``"numba"`` when numba is
    installed, else ``"torch"``. Asking for ``"numba"`` without numba installed is an error.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        backend = os.environ.get(BACKEND_ENV, "auto") or "auto"
        if backend not in BACKENDS:
            raise ValueError(f"{BACKEND_ENV} must be one of {BACKENDS}, got {backend!r}")
        if backend == "auto":
            return "numba" if NUMBA_AVAILABLE else "torch"
    if backend == "numba" and not NUMBA_AVAILABLE:
        raise ValueError("backend 'numba' requested but numba is not installed (pip install numba)")
    return backend


# ------------------------------------------------------------------------------------------ random numbers
def draw_key(generator: torch.Generator) -> int:
    """One hop's key: a uniform 63-bit integer from ``generator`` (the only draw the hop makes from it)."""
    return int(torch.randint(0, (1 << 63) - 1, (1,), generator=generator, dtype=torch.int64,
                             device=generator.device))


def splitmix64(key: int, index: torch.Tensor) -> torch.Tensor:
    """``splitmix64(key, i)`` for every ``i`` of ``index`` (int64 tensor; 64-bit results as int64, wrapped)."""
    z = index + 1
    z = z * _signed(_GAMMA) + key  # int64 arithmetic wraps like uint64
    z = z ^ ((z >> 30) & ((1 << 34) - 1))  # logical shifts: mask the sign extension
    z = z * _signed(_MIX1)
    z = z ^ ((z >> 27) & ((1 << 37) - 1))
    z = z * _signed(_MIX2)
    return z ^ ((z >> 31) & ((1 << 33) - 1))


def uniform_below(key: int, index: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """Random number ``index`` of ``key`` reduced to ``[0, bound)`` (``bound < 2**31``), by multiply-shift."""
    high = (splitmix64(key, index) >> 32) & 0xFFFFFFFF
    return (high * bound) >> 32


_NUMPY_ALLOC_BYTES = 32 << 20
"""Arrays this large are allocated by numpy (see :func:`empty`); glibc serves smaller ones from its heap, where
freed memory is reused without new page faults."""


def empty(shape: int | tuple[int, ...], dtype: type = np.int64) -> torch.Tensor:
    """An uninitialized CPU tensor; large ones in memory that numpy allocated.

    Arrays of 32 MiB and more get fresh pages from the kernel at every allocation. numpy advises the kernel to
    back them with transparent huge pages (``madvise(MADV_HUGEPAGE)``), torch's allocator does not, and
    first-touching fresh 4 KiB pages costs more than sampling into them (measured 1.3-3x on the samplers'
    per-batch arrays). Fill such arrays in streaming passes: the first touch of a huge page zeroes 2 MiB, which
    evicts the data a random-access loop keeps in cache (the slot array), so writing them from such a loop is
    slower than writing a reused buffer and copying (~2x measured).
    """
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if size >= _NUMPY_ALLOC_BYTES:
        return torch.from_numpy(np.empty(shape, dtype))
    return torch.from_numpy(np.empty(0, dtype)).new_empty(shape)


def zeros(shape: int | tuple[int, ...], dtype: type = np.int64) -> torch.Tensor:
    """Like :func:`empty`, zero-filled (numpy's zeroed allocation: lazily zeroed pages, huge when large)."""
    return torch.from_numpy(np.zeros(shape, dtype))


class Scratch:
    """A reusable int64 buffer handed out in consecutive pieces, for a batch's intermediate arrays.

    :meth:`take` returns the next ``n`` entries (uninitialized); :meth:`reset` starts the next batch at the
    beginning. A piece that does not fit is allocated on its own, and the next :meth:`reset` enlarges the buffer
    to 1.1 times what the batch asked for in total: after a few batches, intermediate arrays cost no allocation
    and no page faults, and the buffer stays near the largest batch's need.
    """

    def __init__(self) -> None:
        self._buffer = torch.empty(0, dtype=torch.int64)
        self._used = 0
        self._asked = 0

    def reset(self) -> None:
        """Start handing out from the beginning (the previous batch's pieces must be dead)."""
        if self._asked > len(self._buffer):
            self._buffer = torch.empty(0, dtype=torch.int64)  # free it before allocating the larger one
            self._buffer = empty(self._asked + self._asked // 10)
        self._used = self._asked = 0

    def take(self, n: int) -> torch.Tensor:
        """The next ``n`` entries."""
        self._asked += n
        if self._used + n > len(self._buffer):
            return empty(n)
        piece = self._buffer[self._used:self._used + n]
        self._used += n
        return piece


class Workspace:
    """What one sampling call reuses from earlier calls: a zeroed ``int32`` slot per graph node (left zeroed
    after every call) and a :class:`Scratch`."""

    def __init__(self, num_nodes: int) -> None:
        self.slot = zeros(num_nodes, np.int32)
        self.scratch = Scratch()


class WorkspacePool:
    """Workspaces for concurrent callers (thread-safe): each call takes one, or a new one, and gives it back.

    A call that fails must not give its workspace back (its slots may be dirty); it is then dropped.
    """

    def __init__(self, num_nodes: int) -> None:
        self.num_nodes = num_nodes
        self._free: list[Workspace] = []
        self._lock = threading.Lock()

    def acquire(self) -> Workspace:
        """A workspace for one call."""
        with self._lock:
            if self._free:
                return self._free.pop()
        return Workspace(self.num_nodes)

    def release(self, workspace: Workspace) -> None:
        """Give back a workspace whose slots are all zero again."""
        with self._lock:
            self._free.append(workspace)

    @property
    def idle(self) -> list[Workspace]:
        """The workspaces not in use (for tests)."""
        return list(self._free)


def _np(tensor: torch.Tensor) -> np.ndarray:
    """A numpy view of a contiguous CPU tensor (shares memory)."""
    return tensor.numpy()


if NUMBA_AVAILABLE:
    _jit = numba.njit(cache=True, nogil=True, boundscheck=False)
    _U_GAMMA, _U_MIX1, _U_MIX2 = np.uint64(_GAMMA), np.uint64(_MIX1), np.uint64(_MIX2)

    @numba.njit(cache=True, inline="always")
    def _below(key, index, bound):  # pragma: no cover - compiled
        # Keep every operand uint64 (mixing int64 and uint64 would give float64 in numba).
        z = np.uint64(index + 1) * _U_GAMMA + np.uint64(key)
        z = (z ^ (z >> np.uint64(30))) * _U_MIX1
        z = (z ^ (z >> np.uint64(27))) * _U_MIX2
        z = z ^ (z >> np.uint64(31))
        return np.int64(((z >> np.uint64(32)) * np.uint64(bound)) >> np.uint64(32))

    @_jit
    def _plan_hop(indptr, nodes, fanout, start, degree, counts):  # pragma: no cover - compiled
        # The loads first (independent, so they overlap), then the counts. (-1, -1): a node id out of range.
        num_nodes = indptr.shape[0] - 1
        for i in range(nodes.shape[0]):
            v = nodes[i]
            if v < 0 or v >= num_nodes:
                return -1, -1
            first = indptr[v]
            start[i] = first
            degree[i] = indptr[v + 1] - first
        total = 0
        capped = 0
        for i in range(nodes.shape[0]):
            d = degree[i]
            if fanout >= 0 and d > fanout:
                d = fanout
                capped += 1
            counts[i] = d
            total += d
        return total, capped

    @_jit
    def _positions(start, degree, fanout, replace, key, positions, segment, with_segment):
        # pragma: no cover - compiled
        # positions[e]: index into `indices` of every sampled edge, grouped by node; segment[e]: its node.
        chosen = np.empty(max(fanout, 1), dtype=np.int64)
        edge = 0
        row = 0  # rank of the node among the capped nodes: its random numbers are row * fanout + j
        for i in range(start.shape[0]):
            first = start[i]
            d = degree[i]
            if fanout < 0 or d <= fanout:
                for j in range(d):
                    positions[edge + j] = first + j
            elif replace:
                base = row * fanout
                for j in range(fanout):
                    positions[edge + j] = first + _below(key, base + j, d)
                d = fanout
                row += 1
            else:  # Floyd: step j draws t in [0, deg - fanout + j]; a repeat is replaced by that upper bound
                base = row * fanout
                for j in range(fanout):
                    upper = d - fanout + j
                    pick = _below(key, base + j, upper + 1)
                    repeat = False
                    for q in range(j):  # branch-free scan: cheaper than an early exit here
                        repeat |= chosen[q] == pick
                    pick = upper if repeat else pick
                    chosen[j] = pick
                    positions[edge + j] = first + pick
                d = fanout
                row += 1
            if with_segment:
                for j in range(d):
                    segment[edge + j] = i
            edge += d

    @_jit
    def _gather(indices, positions, out):  # pragma: no cover - compiled
        for e in range(positions.shape[0]):
            out[e] = indices[positions[e]]

    @_jit
    def _dedup(neighbours, slot, next_index, delta):  # pragma: no cover - compiled
        # In place: every neighbour id becomes its discovery index; unseen ones (slot 0) get the next indices
        # in order of first appearance and are appended to delta. One int32 slot lookup per edge answers both
        # "seen?" and "which index?". Measured alternatives that were not faster: a 1-bit-per-node bitmap (L2
        # resident) for the test plus a separate gather of the indices, branch-free updates, and prefetching
        # the slots of a chunk first: the loop is bound by the unpredictable new/seen branch.
        found = 0
        for e in range(neighbours.shape[0]):
            u = neighbours[e]
            s = slot[u]
            if s == 0:
                found += 1
                s = next_index + found
                slot[u] = s
                delta[found - 1] = u
            neighbours[e] = s - 1
        return found

    @_jit
    def _relabel_block(dst_nodes, neighbours, slot, local, new):  # pragma: no cover - compiled
        # The naive block's relabelling: destinations first (local 0..n-1), then new neighbours in order of
        # first appearance; the slots are cleared again before returning.
        n = dst_nodes.shape[0]
        for i in range(n):
            slot[dst_nodes[i]] = i + 1
        local[:] = neighbours
        found = _dedup(local, slot, n, new)
        for i in range(n):
            slot[dst_nodes[i]] = 0
        for i in range(found):
            slot[new[i]] = 0
        return found

    @_jit
    def _reverse_into(values, last, out):  # pragma: no cover - compiled
        for e in range(values.shape[0]):
            out[e] = last - values[e]

    @_jit
    def _fill_segments(counts, first, out):  # pragma: no cover - compiled
        position = 0
        for i in range(counts.shape[0]):
            value = first + i
            for _ in range(counts[i]):
                out[position] = value
                position += 1

    @_jit
    def _mark_roots(slot, roots):  # pragma: no cover - compiled
        # Root i gets discovery index n - 1 - i (slot n - i); False, slots restored, if a root repeats.
        n = roots.shape[0]
        for i in range(n):
            u = roots[i]
            if slot[u] != 0:
                for j in range(i):
                    slot[roots[j]] = 0
                return False
            slot[u] = n - i
        return True

    @_jit
    def _clear(slot, nodes):  # pragma: no cover - compiled
        for i in range(nodes.shape[0]):
            slot[nodes[i]] = 0


# ------------------------------------------------------------------------------------------ python wrappers
def plan_hop(indptr: torch.Tensor, nodes: torch.Tensor, fanout: int, alloc: Callable[[int], torch.Tensor] = empty
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, int]:
    """Per node of ``nodes``: first neighbour position, degree and the number of neighbours one hop takes.

    A node is *capped* when ``fanout != -1`` and its degree exceeds the fanout: it takes ``fanout`` neighbours
    (drawn at random), the others take all of theirs.

    Returns:
        ``(start, degree, counts, total, capped)``: three ``(len(nodes),)`` int64 tensors, the number of edges
        and of capped nodes.

    Raises:
        IndexError: a node id is out of range (checked here, as the compiled kernels do not check bounds).
    """
    start, degree, counts = alloc(len(nodes)), alloc(len(nodes)), alloc(len(nodes))
    total, capped = _plan_hop(_np(indptr), _np(nodes), fanout, _np(start), _np(degree), _np(counts))
    if total < 0:
        raise IndexError(f"node ids must be in [0, {len(indptr) - 1})")
    return start, degree, counts, int(total), int(capped)


def _sample_positions(indptr: torch.Tensor, nodes: torch.Tensor, fanout: int, replace: bool,
                      generator: torch.Generator, with_segment: bool, alloc: Callable[[int], torch.Tensor] = empty
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(counts, positions, segment)`` of one hop (``segment`` empty unless ``with_segment``)."""
    start, degree, counts, total, capped = plan_hop(indptr, nodes, fanout, alloc)
    key = draw_key(generator) if capped else 0
    positions = alloc(total)
    segment = alloc(total if with_segment else 0)
    _positions(_np(start), _np(degree), fanout, replace, key, _np(positions), _np(segment), with_segment)
    return counts, positions, segment


def sample_hop(indptr: torch.Tensor, indices: torch.Tensor, nodes: torch.Tensor, fanout: int, replace: bool,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The compiled twin of :func:`systems.sampling.naive.sample_neighbours`: the same ``(segment, neighbours)``."""
    _, positions, segment = _sample_positions(indptr, nodes, fanout, replace, generator, True)
    _gather(_np(indices), _np(positions), _np(positions))  # in place: positions become neighbours
    return segment, positions


def dense_hop(indptr: torch.Tensor, indices: torch.Tensor, nodes: torch.Tensor, fanout: int, replace: bool,
              generator: torch.Generator, slot: torch.Tensor, next_index: int, scratch: Scratch
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One DENSE hop from ``nodes``: sample like :func:`sample_hop`, then deduplicate against ``slot``.

    Three sequential passes over the hop's edges: positions (draws), neighbours (the random gathers, which
    overlap as they are independent), discovery indices (the slot lookups).

    Args:
        slot: ``(num_nodes,)`` int32; ``slot[v] = 1 + discovery index`` of every node seen in this batch, 0 for
            the others. Updated with the new nodes.
        next_index: the discovery index of the first new node.
        scratch: where the returned arrays live (valid until the scratch is reset).

    Returns:
        ``(counts, discovered, delta)``: neighbours taken per node of ``nodes``; for every sampled edge (grouped
        by node, in order) the discovery index of its neighbour; the new nodes (global ids) in order of first
        appearance, numbered from ``next_index``.
    """
    counts, discovered, _ = _sample_positions(indptr, nodes, fanout, replace, generator, False, scratch.take)
    _gather(_np(indices), _np(discovered), _np(discovered))  # in place: positions become neighbours
    delta = empty(len(discovered))  # only the first `found` entries are written: lazily mapped pages stay free
    found = _dedup(_np(discovered), _np(slot), next_index, _np(delta))
    return counts, discovered, delta[:found]


def naive_hop(indptr: torch.Tensor, indices: torch.Tensor, dst_nodes: torch.Tensor, fanout: int, replace: bool,
              generator: torch.Generator, workspace: Workspace) -> tuple[torch.Tensor, torch.Tensor]:
    """One block of the naive sampler: the one-hop sample of ``dst_nodes`` (as :func:`sample_hop`), relabelled.

    Returns:
        ``(src_nodes, edge_index)``: ``dst_nodes`` followed by the new neighbours in order of first appearance,
        and the ``(2, e)`` block edges (row 0 neighbour, row 1 destination), as
        :func:`systems.sampling.naive.relabel` and the torch path give them.
    """
    scratch = workspace.scratch
    scratch.reset()
    start, degree, _, total, capped = plan_hop(indptr, dst_nodes, fanout, scratch.take)
    key = draw_key(generator) if capped else 0
    edge_index = empty((2, total))
    neighbours = scratch.take(total)
    _positions(_np(start), _np(degree), fanout, replace, key, _np(neighbours), _np(edge_index[1]), True)
    _gather(_np(indices), _np(neighbours), _np(neighbours))
    new = empty(total)
    # Relabel in place, then copy: writing fresh output pages inside the random-access loop evicts the slot
    # array from the caches (a fresh huge page is zeroed on first touch), ~2x slower than this copy.
    found = _relabel_block(_np(dst_nodes), _np(neighbours), _np(workspace.slot), _np(neighbours), _np(new))
    edge_index[0].copy_(neighbours)
    return torch.cat([dst_nodes, new[:found]]), edge_index


def reverse_into(values: torch.Tensor, last: int, out: torch.Tensor) -> None:
    """``out = last - values``."""
    _reverse_into(_np(values), last, _np(out))


def fill_segments(counts: torch.Tensor, first: int, out: torch.Tensor) -> None:
    """``out`` = ``first + i`` repeated ``counts[i]`` times, for every ``i`` in order."""
    _fill_segments(_np(counts), first, _np(out))


def mark_roots(slot: torch.Tensor, roots: torch.Tensor) -> bool:
    """Set ``slot[roots[i]] = len(roots) - i`` (discovery index ``len(roots) - 1 - i``); False, and ``slot``
    unchanged, if a root repeats."""
    return bool(_mark_roots(_np(slot), _np(roots)))


def clear_slots(slot: torch.Tensor, nodes: torch.Tensor) -> None:
    """``slot[nodes] = 0``."""
    _clear(_np(slot), _np(nodes))


__all__ = ["BACKENDS", "NUMBA_AVAILABLE", "Scratch", "Workspace", "WorkspacePool", "clear_slots", "dense_hop",
           "draw_key", "empty", "fill_segments", "mark_roots", "naive_hop", "plan_hop", "resolve_backend",
           "reverse_into", "sample_hop", "splitmix64", "uniform_below", "zeros"]
