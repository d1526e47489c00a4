"""The disk system's in-buffer graph: assembling a state's CSR from the held buckets (issues 16 and 30).

:class:`InBufferCsr` generates a random graph of :data:`NUM_NODES` nodes and :data:`AVG_DEGREE` edges per node,
cuts it into ``p`` = 16 partitions and orders its edges by bucket (source partition, destination partition),
each bucket by destination, as a partitioned store keeps them, all in ``setup_cache``. Each benchmark assembles
the CSR of a buffer of ``c`` partitions (:func:`systems.disk.graph.state_csr`: a stable counting sort of the
held edges by buffer row), the work of a swap once the new buckets are read; ``track_edges_per_s`` reports
in-buffer edges assembled per second, ``direction`` ``in`` or ``out``; ``typed``: with the relation types of the
neighbour lists (:data:`NUM_RELATIONS` types), as R-GCN reads them.
"""

from __future__ import annotations

import time

import numpy as np

from systems.disk.graph import state_csr

NUM_NODES = 400_000
AVG_DEGREE = 20
NUM_PARTITIONS = 16
NUM_RELATIONS = 8


def make_buckets(num_nodes: int = NUM_NODES, avg_degree: int = AVG_DEGREE, p: int = NUM_PARTITIONS, seed: int = 0):
    """``(offsets, src, rel, dst, src_part, dst_part)``: partition boundaries and the edges of a random graph in
    bucket order, each bucket sorted by destination (as a partitioned store keeps them)."""
    rng = np.random.default_rng(seed)
    edges = num_nodes * avg_degree
    src, dst = rng.integers(0, num_nodes, edges), rng.integers(0, num_nodes, edges)
    rel = rng.integers(0, NUM_RELATIONS, edges)
    offsets = np.linspace(0, num_nodes, p + 1).astype(np.int64)
    src_part, dst_part = np.searchsorted(offsets, src, "right") - 1, np.searchsorted(offsets, dst, "right") - 1
    order = np.lexsort((rel, src, dst, dst_part, src_part))
    return offsets, src[order], rel[order], dst[order], src_part[order], dst_part[order]


class InBufferCsr:
    """Assembling the in-buffer CSR of ``capacity`` partitions, ``direction`` ``in`` or ``out``, ``typed`` or
    not."""

    params = [[4, 8], ["in", "out"], [False, True]]
    param_names = ["capacity", "direction", "typed"]
    timeout = 300

    def setup_cache(self):
        return make_buckets()

    def setup(self, cache, capacity, direction, typed):
        offsets, src, rel, dst, src_part, dst_part = cache
        held = (src_part < capacity) & (dst_part < capacity)  # partitions 0 .. c-1, partition k in frame k
        max_rows = int(np.diff(offsets).max())
        self.src = src_part[held] * max_rows + src[held] - offsets[src_part[held]]
        self.dst = dst_part[held] * max_rows + dst[held] - offsets[dst_part[held]]
        self.rel = rel[held]
        self.rows = capacity * max_rows
        self.direction = direction
        self.relations = NUM_RELATIONS if typed else None
        self.edges = int(held.sum())
        state_csr(self.src[:10], self.dst[:10], self.rel[:10], self.rows, direction, self.relations)  # compile

    def _assemble(self):
        return state_csr(self.src, self.dst, self.rel, self.rows, self.direction, self.relations)

    def time_assemble(self, cache, capacity, direction, typed):
        self._assemble()

    def track_edges_per_s(self, cache, capacity, direction, typed):
        started = time.perf_counter()
        graph = self._assemble()
        seconds = time.perf_counter() - started
        assert len(graph.indices) == self.edges and (graph.relations is not None) == typed
        return self.edges / seconds

    track_edges_per_s.unit = "edges/s"
