"""The samplers' random numbers, and compiled (numba) kernels for their per-edge loops.

**Random numbers.** A hop that must draw (some node has more neighbours than the fanout, or has a list DENSE
shuffles) takes one 63-bit *key*
from the caller's ``torch.Generator`` (:func:`draw_key`); its ``i``-th random number is ``splitmix64(key, i)``,
a counter-based hash (Steele et al., the output function of Java's SplittableRandom; passes BigCrush). Draw
``j`` of the ``c``-th capped node of the hop (in node order) is number ``i = c * fanout + j``. A number is
reduced to ``[0, bound)`` by ``((z >> 32) * bound) >> 32`` (multiply-shift: no division; the probability of
any value is off by less than ``bound / 2**32`` relative, below 5e-6 for degrees up to 20,000). The same numbers
are computed by tensor operations (:func:`splitmix64`, :func:`uniform_below`) and inside the kernels, so both
backends give bit-identical samples, whatever the thread count.

**Kernels** (single-threaded, release the GIL so loader threads run in parallel; they take numpy arrays, which
cost far less per call than tensors' ``.numpy()``):

- :func:`plan_hop`: per node, the first neighbour position, the degree and the number of neighbours taken;
- :func:`sample_hop`: the one-hop sample of :func:`systems.sampling.naive.sample_neighbours` (``segment``,
  global ``neighbours``), bit for bit;
- :func:`dense_hop`: DENSE's hop: the same sample (plus DENSE's shuffle, :func:`shuffle_key`, when asked), then
  deduplicated against every node seen in the batch (a reusable ``slot`` array of size ``num_nodes``): discovery
  indices and the new delta, in layout order;
- :func:`layout_hop`: one hop's part of DENSE's output (both edge rows and the neighbour offsets) in one pass;
- :func:`naive_hop`: the naive sampler's block: the same one-hop sample, relabelled with the slot array;
- :func:`mark_roots`, :func:`clear_slots`: the slot array's set-up and reset.

**Memory.** Per-batch intermediate arrays live in a reused :class:`Scratch` buffer; outputs of 32 MiB and more
come from :data:`POOL` (:class:`BufferPool`), which recycles their memory once the caller drops them, for both
samplers alike (fresh pages cost more to fault in than to sample into, and the cost varies with the machine's
memory state).

**Bounds.** The kernels do not check indices (``boundscheck=False``): every id they see was checked when its store
was opened for the run (:mod:`suite.data.store_checks`), and roots by the samplers' callers. In the debug mode that the
tests turn on (environment variable ``GNNSUITE_KERNEL_BOUNDSCHECK=1``, read at import: :data:`BOUNDSCHECK`) they
are compiled with numba's ``boundscheck=True`` and raise ``IndexError`` instead of reading or writing out of
bounds; that build is cached in its own folder (numba's cache key ignores the flag).

numba is optional: :data:`NUMBA_AVAILABLE` says whether it imported; :func:`resolve_backend` turns a backend
name (``"auto"``, ``"numba"``, ``"torch"``) into the one used; the environment variable
``GNNSUITE_SAMPLER_BACKEND`` (``numba`` or ``torch``) overrides ``"auto"``.
"""

from __future__ import annotations

import os
import threading
import weakref
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
BOUNDSCHECK_ENV = "GNNSUITE_KERNEL_BOUNDSCHECK"
BOUNDSCHECK = os.environ.get(BOUNDSCHECK_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")
"""Debug mode: the compiled kernels check every index (numba ``boundscheck=True``); set from the environment
variable ``GNNSUITE_KERNEL_BOUNDSCHECK`` at import (the tests set it)."""

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
"""Arrays this large come from the :class:`BufferPool` (see :func:`empty`); glibc serves smaller ones from its heap,
where freed memory is reused without new page faults."""


def _default_pool_limit() -> int:
    """Idle bytes the shared pool keeps: ``GNNSUITE_SAMPLER_POOL_MIB`` if set, else min(4 GiB, RAM / 4)."""
    value = os.environ.get("GNNSUITE_SAMPLER_POOL_MIB")
    if value:
        return int(float(value) * 2**20)
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        ram = 16 << 30
    return min(4 << 30, ram // 4)


class BufferPool:
    """Large uninitialized arrays whose memory is recycled once the caller drops them (thread-safe).

    A fresh array of 32 MiB or more gets fresh pages from the kernel at every allocation (glibc maps them), and
    first-touching them costs more than sampling into them: zeroing 4 KiB pages, or, for the huge pages numpy asks
    for (``madvise(MADV_HUGEPAGE)``), direct compaction whose cost depends on the machine's memory state (measured
    here: 68 ms to 1.8 s to fill a fresh 540 MB array; 21 ms to fill a reused one). The samplers' per-batch outputs
    and overflow pieces are that large on big batches, so they come from this pool: :meth:`empty` hands out a view
    of an idle buffer that is large enough (the smallest such, at most 4 times the request) or of a new one
    (12.5% larger than asked, so that the next, slightly larger batch fits); when the last reference to the view
    (through every tensor and view derived from it) dies, its buffer goes back to the idle list. At most
    ``limit`` idle bytes are kept (the buffers idle the longest are freed first); buffers in use are not counted.

    Both samplers allocate through the same shared pool (:data:`POOL`), so neither is spared page faults the
    other pays.
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = _default_pool_limit() if limit is None else int(limit)
        self._idle: list[np.ndarray] = []  # raw uint8 buffers, least recently returned first
        self._idle_bytes = 0
        self._lock = threading.RLock()  # re-entrant: a finalizer may run while this thread holds it

    def empty(self, shape: int | tuple[int, ...], dtype: type = np.int64) -> torch.Tensor:
        """An uninitialized CPU tensor of ``shape`` on recycled memory."""
        return torch.from_numpy(self.empty_np(shape, dtype))

    def empty_np(self, shape: int | tuple[int, ...], dtype: type = np.int64) -> np.ndarray:
        """:meth:`empty` as a numpy array (its memory goes back to the pool when the array and every view of it,
        numpy or torch, are gone)."""
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
        dtype = np.dtype(dtype)
        nbytes = dtype.itemsize
        for extent in shape:
            nbytes *= extent
        raw = None
        with self._lock:
            best = -1
            for i, buffer in enumerate(self._idle):
                size = buffer.nbytes
                if nbytes <= size <= 4 * nbytes and (best < 0 or size < self._idle[best].nbytes):
                    best = i
            if best >= 0:
                raw = self._idle.pop(best)
                self._idle_bytes -= raw.nbytes
        if raw is None:
            capacity = -(-(nbytes + nbytes // 8) // (2 << 20)) * (2 << 20)  # rounded up to 2 MiB
            raw = np.empty(capacity, np.uint8)
        view = raw[:nbytes].view(dtype).reshape(shape)
        finalizer = weakref.finalize(view, self._give_back, raw)
        finalizer.atexit = False
        return view

    def _give_back(self, raw: np.ndarray) -> None:
        with self._lock:
            self._idle.append(raw)
            self._idle_bytes += raw.nbytes
            while self._idle_bytes > self.limit and self._idle:
                self._idle_bytes -= self._idle.pop(0).nbytes

    @property
    def idle_bytes(self) -> int:
        """Bytes held by idle buffers."""
        return self._idle_bytes

    def clear(self) -> None:
        """Free every idle buffer."""
        with self._lock:
            self._idle.clear()
            self._idle_bytes = 0


POOL = BufferPool()
"""The pool that :func:`empty` draws large arrays from (shared by every sampler of the process)."""


def empty(shape: int | tuple[int, ...], dtype: type = np.int64, pooled: bool = True) -> torch.Tensor:
    """An uninitialized CPU tensor; one of 32 MiB or more on memory recycled through :data:`POOL`.

    ``pooled=False``: a large array gets its own numpy allocation instead (for buffers kept for good, such as
    :class:`Scratch`'s), which numpy backs with transparent huge pages where the kernel allows. Write large arrays
    in streaming passes: first-touching fresh pages inside a random-access loop evicts what that loop keeps in
    cache (the slot array).
    """
    return torch.from_numpy(empty_np(shape, dtype, pooled))


def empty_np(shape: int | tuple[int, ...], dtype: type = np.int64, pooled: bool = True) -> np.ndarray:
    """:func:`empty` as a numpy array."""
    count = shape if isinstance(shape, (int, np.integer)) else int(np.prod(shape))
    if count * np.dtype(dtype).itemsize >= _NUMPY_ALLOC_BYTES and pooled:
        return POOL.empty_np(shape, dtype)
    return np.empty(shape, dtype)


def zeros(shape: int | tuple[int, ...], dtype: type = np.int64) -> torch.Tensor:
    """Like :func:`empty`, zero-filled (numpy's zeroed allocation: lazily zeroed pages, huge when large)."""
    return torch.from_numpy(np.zeros(shape, dtype))


class Scratch:
    """A reusable int64 buffer handed out in consecutive pieces, for a batch's intermediate arrays.

    :meth:`take` (a tensor) and :meth:`take_np` (a numpy array) return the next ``n`` entries (uninitialized);
    :meth:`reset` starts the next batch at the beginning. A piece that does not fit is allocated on its own, and
    the next :meth:`reset` enlarges the buffer to 1.1 times what the batch asked for in total: after a few batches,
    intermediate arrays cost no allocation and no page faults, and the buffer stays near the largest batch's need.
    """

    def __init__(self) -> None:
        self._buffer = np.empty(0, np.int64)
        self._used = 0
        self._asked = 0

    def reset(self) -> None:
        """Start handing out from the beginning (the previous batch's pieces must be dead)."""
        if self._asked > len(self._buffer):
            self._buffer = np.empty(0, np.int64)  # free it before allocating the larger one
            self._buffer = empty_np(self._asked + self._asked // 10, pooled=False)
        self._used = self._asked = 0

    def take_np(self, n: int) -> np.ndarray:
        """The next ``n`` entries."""
        self._asked += n
        if self._used + n > len(self._buffer):
            return empty_np(n)
        piece = self._buffer[self._used:self._used + n]
        self._used += n
        return piece

    def take(self, n: int) -> torch.Tensor:
        """The next ``n`` entries, as a tensor."""
        return torch.from_numpy(self.take_np(n))


class Workspace:
    """What one sampling call reuses from earlier calls: a zeroed ``int32`` slot per graph node (left zeroed
    after every call; ``slot`` and its numpy view ``slot_np``) and a :class:`Scratch`."""

    def __init__(self, num_nodes: int) -> None:
        self.slot_np = np.zeros(num_nodes, np.int32)
        self.slot = torch.from_numpy(self.slot_np)
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


def _boundscheck_cache_dir() -> str | None:
    """Where the bound-checked build is cached (beside the usual cache, in a folder of its own), or None when that
    folder cannot be written (the build is then not cached, so it never mixes with the unchecked one)."""
    base = numba.config.CACHE_DIR or os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    folder = os.path.join(base, "boundscheck")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK) else None


def _jit(function: Callable) -> Callable:
    """Compile a kernel: ``nogil``, cached; bound-checked in the debug mode (:data:`BOUNDSCHECK`)."""
    if not BOUNDSCHECK:
        return numba.njit(cache=True, nogil=True, boundscheck=False)(function)
    folder = _boundscheck_cache_dir()
    saved = numba.config.CACHE_DIR
    numba.config.CACHE_DIR = folder or saved  # read when the decorator sets up the function's cache
    try:
        return numba.njit(cache=folder is not None, nogil=True, boundscheck=True)(function)
    finally:
        numba.config.CACHE_DIR = saved


if NUMBA_AVAILABLE:
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
    def _plan_hop(indptr, nodes, fanout, shuffle_above, start, degree, counts):  # pragma: no cover - compiled
        # The loads first (independent, so they overlap), then the counts. (-1, -1, -1): a node id out of range.
        num_nodes = indptr.shape[0] - 1
        for i in range(nodes.shape[0]):
            v = nodes[i]
            if v < 0 or v >= num_nodes:
                return -1, -1, -1
            first = indptr[v]
            start[i] = first
            degree[i] = indptr[v + 1] - first
        total = 0
        capped = 0
        shuffled = 0
        for i in range(nodes.shape[0]):
            d = degree[i]
            if fanout >= 0 and d > fanout:
                d = fanout
                capped += 1
            if shuffle_above >= 0 and d > shuffle_above:
                shuffled += 1
            counts[i] = d
            total += d
        return total, capped, shuffled

    @_jit
    def _positions(start, degree, fanout, replace, key, shuffle_above, shuffle_len, shuffle_key, positions, segment,
                   with_segment):  # pragma: no cover - compiled
        # positions[e]: index into `indices` of every sampled edge, grouped by node; segment[e]: its node.
        chosen = np.empty(max(fanout, 1), dtype=np.int64)
        edge = 0
        row = 0  # rank of the node among the capped nodes: its random numbers are row * fanout + j
        shuffled = 0  # rank among the shuffled nodes: numbers shuffled * shuffle_len + j of shuffle_key
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
            if shuffle_above >= 0 and d > shuffle_above:
                # Partial Fisher-Yates: the first min(d - 1, shuffle_len) entries become a uniformly random
                # sequence of distinct entries of the node's sample, so every prefix up to that length is a
                # uniform subset of it (hence of the neighbours).
                base = shuffled * shuffle_len
                for j in range(min(d - 1, shuffle_len)):
                    other = edge + j + _below(shuffle_key, base + j, d - j)
                    swap = positions[other]
                    positions[other] = positions[edge + j]
                    positions[edge + j] = swap
                shuffled += 1
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
    def _layout_hop(counts, discovered, last, dst_first, nbrs, dst, offsets, offset_first, edge_first):
        # pragma: no cover - compiled
        # One hop's part of DENSE's layout in one pass: nbrs = last - discovery index (the local row), dst = the
        # node's row relative to h_1, and the running edge offsets of the hop's nodes.
        position = 0
        for i in range(counts.shape[0]):
            value = dst_first + i
            for _ in range(counts[i]):
                nbrs[position] = last - discovered[position]
                dst[position] = value
                position += 1
            offsets[offset_first + i + 1] = edge_first + position

    @_jit
    def _cut_size(offsets, node_first, cap):  # pragma: no cover - compiled
        total = 0
        for i in range(node_first, offsets.shape[0] - 1):
            total += min(offsets[i + 1] - offsets[i], cap)
        return total

    @_jit
    def _cut_block(nbrs, dst, offsets, first, inner_first, node_first, cap, src_shift, dst_shift, out_nbrs,
                   out_dst):  # pragma: no cover - compiled
        # The edges [first, inner_first) whole, then the first `cap` edges of every node from node_first on
        # (cap < 0: all of them); both rows shifted.
        p = 0
        for e in range(first, inner_first):
            out_nbrs[p] = nbrs[e] - src_shift
            out_dst[p] = dst[e] - dst_shift
            p += 1
        for i in range(node_first, offsets.shape[0] - 1):
            stop = offsets[i + 1]
            if cap >= 0:
                stop = min(stop, offsets[i] + cap)
            for e in range(offsets[i], stop):
                out_nbrs[p] = nbrs[e] - src_shift
                out_dst[p] = dst[e] - dst_shift
                p += 1
        return p

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
        # Root i gets discovery index n - 1 - i (slot n - i). 1: a root repeats, 2: a root is not a node id
        # (slots restored in both cases); 0: done.
        n = roots.shape[0]
        for i in range(n):
            u = roots[i]
            if u < 0 or u >= slot.shape[0] or slot[u] != 0:
                for j in range(i):
                    slot[roots[j]] = 0
                return 1 if 0 <= u < slot.shape[0] else 2
            slot[u] = n - i
        return 0

    @_jit
    def _clear(slot, nodes):  # pragma: no cover - compiled
        for i in range(nodes.shape[0]):
            slot[nodes[i]] = 0


# ------------------------------------------------------------------------------------------ python wrappers
def plan_hop(indptr: torch.Tensor, nodes: torch.Tensor, fanout: int, alloc: Callable[[int], torch.Tensor] = empty,
             shuffle_above: int = -1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int, int, int]:
    """Per node of ``nodes``: first neighbour position, degree and the number of neighbours one hop takes.

    A node is *capped* when ``fanout != -1`` and its degree exceeds the fanout: it takes ``fanout`` neighbours
    (drawn at random), the others take all of theirs. It is *shuffled* when ``shuffle_above >= 0`` and it takes
    more than ``shuffle_above`` neighbours (see :func:`shuffle_key`).

    Returns:
        ``(start, degree, counts, total, capped, shuffled)``: three ``(len(nodes),)`` int64 tensors, the number of
        edges, of capped nodes and of shuffled nodes.

    Raises:
        IndexError: a node id is out of range (checked here, as the compiled kernels do not check bounds).
    """
    start, degree, counts = alloc(len(nodes)), alloc(len(nodes)), alloc(len(nodes))
    total, capped, shuffled = _plan(indptr.numpy(), nodes.numpy(), fanout, shuffle_above, start.numpy(),
                                    degree.numpy(), counts.numpy())
    return start, degree, counts, total, capped, shuffled


def _plan(indptr: np.ndarray, nodes: np.ndarray, fanout: int, shuffle_above: int, start: np.ndarray,
          degree: np.ndarray, counts: np.ndarray) -> tuple[int, int, int]:
    total, capped, shuffled = _plan_hop(indptr, nodes, fanout, shuffle_above, start, degree, counts)
    if total < 0:
        raise IndexError(f"node ids must be in [0, {len(indptr) - 1})")
    return int(total), int(capped), int(shuffled)


_MASK64 = (1 << 64) - 1


def shuffle_key(key: int) -> int:
    """The key of a hop's shuffle numbers, derived from the hop's key (no further draw from the generator).

    A DENSE hop that must *shuffle* (see :class:`~systems.sampling.dense.DenseSampler`, ``truncate``) reorders
    the sample of every node that takes more than ``shuffle_above`` neighbours by a partial Fisher-Yates shuffle
    of its first ``min(count - 1, shuffle_len)`` entries: step ``j`` of the ``s``-th shuffled node (in node order)
    swaps entry ``j`` with entry ``j + uniform_below(shuffle_key(key), s * shuffle_len + j, count - j)``. Every
    prefix of up to ``shuffle_len + 1`` entries is then a uniformly random subset of the node's sample.
    """
    z = (key * _GAMMA + 0x632BE59BD9B4E019) & _MASK64  # splitmix64's finalizer on a shifted counter
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return (z ^ (z >> 31)) >> 1  # 63 bits: a valid (non-negative) key


def _sample_positions(indptr: np.ndarray, nodes: np.ndarray, fanout: int, replace: bool,
                      generator: torch.Generator, with_segment: bool, alloc: Callable[[int], np.ndarray] = empty_np,
                      shuffle_above: int = -1, shuffle_len: int = 0
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(counts, positions, segment)`` of one hop (``segment`` empty unless ``with_segment``); numpy arrays."""
    n = len(nodes)
    start, degree, counts = alloc(n), alloc(n), alloc(n)
    total, capped, shuffled = _plan(indptr, nodes, fanout, shuffle_above, start, degree, counts)
    key = draw_key(generator) if capped or shuffled else 0
    positions = alloc(total)
    segment = alloc(total if with_segment else 0)
    _positions(start, degree, fanout, replace, key, shuffle_above if shuffled else -1, shuffle_len,
               shuffle_key(key) if shuffled else 0, positions, segment, with_segment)
    return counts, positions, segment


def sample_hop(indptr: torch.Tensor, indices: torch.Tensor, nodes: torch.Tensor, fanout: int, replace: bool,
               generator: torch.Generator, shuffle_above: int = -1, shuffle_len: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The compiled twin of :func:`systems.sampling.naive.sample_neighbours`: the same ``(segment, neighbours)``."""
    _, positions, segment = _sample_positions(indptr.numpy(), nodes.numpy(), fanout, replace, generator, True,
                                              empty_np, shuffle_above, shuffle_len)
    _gather(indices.numpy(), positions, positions)  # in place: positions become neighbours
    return torch.from_numpy(segment), torch.from_numpy(positions)


def dense_hop(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray, fanout: int, replace: bool,
              generator: torch.Generator, slot: np.ndarray, next_index: int, scratch: Scratch,
              max_new: int | None = None, shuffle_above: int = -1, shuffle_len: int = 0
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One DENSE hop from ``nodes`` (numpy arrays in and out): sample like :func:`sample_hop`, then deduplicate
    against ``slot``.

    Three sequential passes over the hop's edges: positions (draws, and the shuffle of :func:`shuffle_key` when
    ``shuffle_above >= 0``), neighbours (the random gathers, which overlap as they are independent), discovery
    indices (the slot lookups).

    Args:
        slot: ``(num_nodes,)`` int32; ``slot[v] = 1 + discovery index`` of every node seen in this batch, 0 for
            the others. Updated with the new nodes.
        next_index: the discovery index of the first new node.
        scratch: where the returned arrays live (valid until the scratch is reset).
        max_new: a bound on the new nodes (the nodes not seen yet); default: the hop's edge count.

    Returns:
        ``(counts, discovered, delta)``: neighbours taken per node of ``nodes``; for every sampled edge (grouped
        by node, in order) the discovery index of its neighbour; the new nodes (global ids) in *reverse* order of
        first appearance (DENSE's layout order: the last new node first), numbered from ``next_index`` in order
        of first appearance.
    """
    counts, discovered, _ = _sample_positions(indptr, nodes, fanout, replace, generator, False, scratch.take_np,
                                              shuffle_above, shuffle_len)
    _gather(indices, discovered, discovered)  # in place: positions become neighbours
    capacity = len(discovered) if max_new is None else min(len(discovered), max_new)
    delta = scratch.take_np(capacity)
    # Written backwards from the end, so that the new nodes come out in layout order without a reversing pass.
    found = _dedup(discovered, slot, next_index, delta[::-1])
    return counts, discovered, delta[capacity - found:]


def layout_hop(counts: np.ndarray, discovered: np.ndarray, last: int, dst_first: int, nbrs: np.ndarray,
               dst: np.ndarray, offsets: np.ndarray, offset_first: int, edge_first: int) -> None:
    """Write one hop's part of a DENSE layout (numpy arrays): ``nbrs = last - discovered``; ``dst`` =
    ``dst_first + i`` repeated ``counts[i]`` times; ``offsets[offset_first + i + 1] = edge_first +
    counts[:i + 1].sum()``."""
    _layout_hop(counts, discovered, last, dst_first, nbrs, dst, offsets, offset_first, edge_first)


def cut_block(edges: torch.Tensor, nbr_offsets: torch.Tensor, first: int, node_first: int, cap: int,
              src_shift: int, dst_shift: int) -> torch.Tensor:
    """A DENSE layer's edge index in one compiled pass (CPU tensors): the edges from ``first`` to those of node
    ``node_first`` (its neighbour lists start at ``nbr_offsets[node_first]``) whole, then the first ``cap``
    entries of the lists of the nodes from ``node_first`` on; row 0 minus ``src_shift``, row 1 minus ``dst_shift``.
    ``cap = -1`` keeps every edge from ``first`` on."""
    offsets = nbr_offsets.numpy()
    inner_first = int(offsets[node_first]) if cap >= 0 else edges.shape[1]
    size = (inner_first - first) + (int(_cut_size(offsets, node_first, cap)) if cap >= 0 else 0)
    out = empty_np((2, size))
    source = edges.numpy()
    written = _cut_block(source[0], source[1], offsets, first, inner_first, node_first if cap >= 0 else len(offsets),
                         cap, src_shift, dst_shift, out[0], out[1])
    assert written == size
    return torch.from_numpy(out)


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
    dst = dst_nodes.numpy()
    n = len(dst)
    start, degree, counts = scratch.take_np(n), scratch.take_np(n), scratch.take_np(n)
    total, capped, _ = _plan(indptr.numpy(), dst, fanout, -1, start, degree, counts)
    key = draw_key(generator) if capped else 0
    edge_index = empty_np((2, total))
    neighbours = scratch.take_np(total)
    _positions(start, degree, fanout, replace, key, -1, 0, 0, neighbours, edge_index[1], True)
    _gather(indices.numpy(), neighbours, neighbours)
    new = scratch.take_np(total)
    # Relabel in place, then copy: writing fresh output pages inside the random-access loop evicts the slot
    # array from the caches (a fresh huge page is zeroed on first touch), ~2x slower than this copy.
    found = _relabel_block(dst, neighbours, workspace.slot_np, neighbours, new)
    edge_index[0] = neighbours
    src_nodes = empty_np(n + found)
    src_nodes[:n] = dst
    src_nodes[n:] = new[:found]
    return torch.from_numpy(src_nodes), torch.from_numpy(edge_index)


def reverse_into(values: torch.Tensor, last: int, out: torch.Tensor) -> None:
    """``out = last - values``."""
    _reverse_into(values.numpy(), last, out.numpy())


def fill_segments(counts: torch.Tensor, first: int, out: torch.Tensor) -> None:
    """``out`` = ``first + i`` repeated ``counts[i]`` times, for every ``i`` in order."""
    _fill_segments(counts.numpy(), first, out.numpy())


def mark_roots(slot: np.ndarray, roots: np.ndarray) -> int:
    """Set ``slot[roots[i]] = len(roots) - i`` (discovery index ``len(roots) - 1 - i``); 0 when done, 1 if a root
    repeats, 2 if a root is not an index of ``slot`` (``slot`` unchanged in both cases)."""
    return int(_mark_roots(slot, roots))


def clear_slots(slot: np.ndarray, nodes: np.ndarray) -> None:
    """``slot[nodes] = 0``."""
    _clear(slot, nodes)


__all__ = ["BACKENDS", "BOUNDSCHECK", "NUMBA_AVAILABLE", "POOL", "BufferPool", "Scratch", "Workspace", "WorkspacePool",
           "clear_slots", "cut_block", "dense_hop", "draw_key", "empty", "empty_np", "fill_segments", "layout_hop", "mark_roots",
           "naive_hop", "plan_hop", "resolve_backend", "reverse_into", "sample_hop", "shuffle_key", "splitmix64",
           "uniform_below", "zeros"]
