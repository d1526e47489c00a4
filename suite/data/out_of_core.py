"""Sizes of the out-of-core passes of ``datasets import`` and ``datasets partition``, fitted to the memory the process
may use (issue 34, item 4).

Both commands stream edges in chunks, scatter them into scratch files and sort each file in memory: their peak is
what they hold for the whole command (O(num_nodes): id map, order, degree counts) plus one chunk or one sort. With
fixed sizes (a 64 MiB text block, sorts of 8M to 32M edges: 0.5 to 3 GiB) they were OOM-killed under a 512 MiB
cgroup limit; here the sizes follow from the memory left (:class:`MemoryBudget`) through :func:`fit_sizes`, a pure
function of the bytes spare and a per-element cost of each pass, measured on the passes' numpy code:

- a streamed edge (a chunk of the CSR spill, of the scatter pass, of the bucket count): its ids, the relabelled
  copy, the spill record, the bucket of each edge and the scatter's order, while the source already reads the next
  chunk: :data:`BYTES_PER_STREAMED_EDGE` (113 B measured with tracemalloc in the bucket scatter of a 2M-node store,
  plus 48 B of the next chunk; it was 64, and partitioning a 976 MiB feature table under a 768 MiB cgroup limit was
  OOM-killed in that pass);
- a sorted edge (one scratch file sorted in memory: the CSR sort and the partition's bucket sort, int64 rows,
  sort keys, the order and the sorted copy): :data:`BYTES_PER_SORTED_EDGE`;
- a byte of edge-list text (the block, arrow's columns, the ids looked up and the new ones numbered, the
  ``(src, rel, dst)`` rows: 15 B a byte measured on the first block of a 4M-node edge list, which numbers the most
  new ids) or of feature rows being permuted (the rows read and the gathered copy): :data:`BYTES_PER_CHUNK_BYTE`.

Only :data:`SAFETY` of the spare bytes is planned for: the rest absorbs the allocator's slack and the dirty page
cache of the files being written (a cgroup v1 limit counts it). The memory the process may use comes from the caller
(``suite.cli`` reads ``--memory-limit``, the cgroup's limit and ``MemAvailable`` through
:func:`suite.memory.available_memory`); without a budget the passes keep their fixed default sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from suite.errors import MemoryLimitError

MiB = 1 << 20
BYTES_PER_STREAMED_EDGE = 160
BYTES_PER_SORTED_EDGE = 128
BYTES_PER_CHUNK_BYTE = 16
SAFETY = 0.5
MIN_CHUNK_EDGES = 1 << 16
MIN_SORTED_EDGES = 1 << 16
MIN_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class OutOfCoreSizes:
    """The sizes of the out-of-core passes.

    Attributes:
        chunk_edges: edges per streamed chunk.
        max_bucket_edges: edges per in-memory sort (one scratch file of the CSR or bucket sort).
        chunk_bytes: bytes per block of edge-list text (import) or of feature rows permuted (partition).
    """

    chunk_edges: int
    max_bucket_edges: int
    chunk_bytes: int

    def __post_init__(self) -> None:
        for name in ("chunk_edges", "max_bucket_edges", "chunk_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def fit_sizes(spare_bytes: int, ceiling: OutOfCoreSizes, what: str) -> OutOfCoreSizes:
    """The largest sizes up to ``ceiling`` whose pass fits in :data:`SAFETY` of ``spare_bytes``.

    Each size is ``SAFETY * spare_bytes`` divided by its pass's bytes per element (the passes run one after
    another, so each may use the whole share), capped by ``ceiling``. E.g. 256 MiB spare: 128 MiB planned, so
    838,860 streamed edges (160 B each), 1M sorted edges (128 B each) and 8 MiB blocks (16 B a byte).

    Raises:
        MemoryLimitError: naming ``what``, when even the smallest sizes (:data:`MIN_CHUNK_EDGES`,
            :data:`MIN_SORTED_EDGES`, :data:`MIN_CHUNK_BYTES`) do not fit.
    """
    planned = int(max(0, spare_bytes) * SAFETY)
    fitted = OutOfCoreSizes(
        chunk_edges=min(ceiling.chunk_edges, planned // BYTES_PER_STREAMED_EDGE),
        max_bucket_edges=min(ceiling.max_bucket_edges, planned // BYTES_PER_SORTED_EDGE),
        chunk_bytes=min(ceiling.chunk_bytes, planned // BYTES_PER_CHUNK_BYTE)) if planned else None
    least = minimum_spare_bytes(ceiling)
    if fitted is None or spare_bytes < least:
        raise MemoryLimitError(f"{what}: {max(0, spare_bytes) / MiB:.0f} MiB of memory left, at least "
                               f"{least / MiB:.0f} MiB needed for its smallest chunks and sorts (a larger memory "
                               f"limit, or fewer nodes)")
    return fitted


def minimum_spare_bytes(ceiling: OutOfCoreSizes) -> int:
    """The spare bytes under which :func:`fit_sizes` refuses: those of the smallest sizes (or of ``ceiling`` where
    it is smaller), over :data:`SAFETY`."""
    need = max(min(ceiling.chunk_edges, MIN_CHUNK_EDGES) * BYTES_PER_STREAMED_EDGE,
               min(ceiling.max_bucket_edges, MIN_SORTED_EDGES) * BYTES_PER_SORTED_EDGE,
               min(ceiling.chunk_bytes, MIN_CHUNK_BYTES) * BYTES_PER_CHUNK_BYTE)
    return int(need / SAFETY)


@dataclass(frozen=True)
class MemoryBudget:
    """The memory a process may reach (its peak resident size) and how much it holds now.

    Attributes:
        total_bytes: the peak allowed (``suite.memory.available_memory``: ``--memory-limit``, the cgroup's limit,
            ``MemAvailable``).
        held: ``held() -> bytes`` resident now (``suite.memory.current_rss_bytes``).
        source: where ``total_bytes`` comes from, for messages.
    """

    total_bytes: int
    held: Callable[[], int]
    source: str = "the memory available"

    def spare_bytes(self, reserved_bytes: int = 0) -> int:
        """Bytes left now, less ``reserved_bytes`` the caller is about to hold (may be negative)."""
        return self.total_bytes - self.held() - reserved_bytes

    def fit(self, ceiling: OutOfCoreSizes, what: str, reserved_bytes: int = 0) -> OutOfCoreSizes:
        """:func:`fit_sizes` of what is spare now after ``reserved_bytes``; ``what`` names the pass and the
        budget's source in an error."""
        return fit_sizes(self.spare_bytes(reserved_bytes), ceiling, f"{what} (memory: {self.source})")


def sizes_for(budget: MemoryBudget | None, ceiling: OutOfCoreSizes, what: str,
              reserved_bytes: int = 0) -> OutOfCoreSizes:
    """``ceiling`` without a budget, else the sizes fitted to it (:meth:`MemoryBudget.fit`)."""
    return ceiling if budget is None else budget.fit(ceiling, what, reserved_bytes)


__all__ = ["BYTES_PER_CHUNK_BYTE", "BYTES_PER_SORTED_EDGE", "BYTES_PER_STREAMED_EDGE", "MemoryBudget",
           "OutOfCoreSizes", "SAFETY", "fit_sizes", "minimum_spare_bytes", "sizes_for"]
