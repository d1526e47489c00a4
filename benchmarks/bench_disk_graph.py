"""The disk system's in-buffer graph: assembling a state's CSR from the held buckets' pieces (issue 16).

:class:`InBufferCsr` generates a random graph of :data:`NUM_NODES` nodes and :data:`AVG_DEGREE` edges per node,
cuts it into ``p`` = 16 partitions and ``p x p`` destination-sorted buckets, and turns every bucket into its CSR
pieces (:func:`systems.disk.graph.pieces_of`), all in ``setup_cache``. Each benchmark assembles the CSR of a
buffer of ``c`` partitions (:func:`systems.disk.graph.assemble_csr`), the work of a swap once the new buckets are
read; ``track_edges_per_s`` reports in-buffer edges assembled per second, ``direction`` ``in`` (the buckets' own
order) or ``out`` (pieces put in source order when read: :func:`pieces_of`'s counting sort is timed as well);
``typed``: with the relation types of the neighbour lists (:data:`NUM_RELATIONS` types), as R-GCN reads them.
"""

from __future__ import annotations

import time

import numpy as np

from systems.disk.graph import Bucket, assemble_csr, pieces_of

NUM_NODES = 400_000
AVG_DEGREE = 20
NUM_PARTITIONS = 16
NUM_RELATIONS = 8


def make_buckets(num_nodes: int = NUM_NODES, avg_degree: int = AVG_DEGREE, p: int = NUM_PARTITIONS, seed: int = 0):
    """``(sizes, buckets)``: partition sizes and a dict ``(i, j) -> Bucket`` of a random graph, each bucket sorted
    by destination as a partitioned store keeps it."""
    rng = np.random.default_rng(seed)
    edges = num_nodes * avg_degree
    src, dst = rng.integers(0, num_nodes, edges), rng.integers(0, num_nodes, edges)
    rel = rng.integers(0, NUM_RELATIONS, edges)
    offsets = np.linspace(0, num_nodes, p + 1).astype(np.int64)
    src_part, dst_part = np.searchsorted(offsets, src, "right") - 1, np.searchsorted(offsets, dst, "right") - 1
    order = np.lexsort((src, dst, dst_part, src_part))
    src, dst, rel, src_part, dst_part = src[order], dst[order], rel[order], src_part[order], dst_part[order]
    bounds = np.searchsorted(src_part * p + dst_part, np.arange(p * p + 1))
    buckets = {}
    for i in range(p):
        for j in range(p):
            lo, hi = bounds[i * p + j], bounds[i * p + j + 1]
            buckets[(i, j)] = Bucket(src[lo:hi] - offsets[i], rel[lo:hi], dst[lo:hi] - offsets[j])
    return np.diff(offsets), buckets


class InBufferCsr:
    """Assembling the in-buffer CSR of ``capacity`` partitions, ``direction`` ``in`` or ``out``, ``typed`` or
    not."""

    params = [[4, 8], ["in", "out"], [False, True]]
    param_names = ["capacity", "direction", "typed"]
    timeout = 300

    def setup_cache(self):
        return make_buckets()

    def setup(self, cache, capacity, direction, typed):
        sizes, buckets = cache
        self.partitions = list(range(capacity))
        self.held = {key: bucket for key, bucket in buckets.items()
                     if key[0] in self.partitions and key[1] in self.partitions}
        self.sizes = sizes
        self.direction = direction
        self.relations = NUM_RELATIONS if typed else None
        self.frame_of = {part: frame for frame, part in enumerate(self.partitions)}
        self.max_rows = int(sizes.max())
        self.edges = sum(bucket.num_edges for bucket in self.held.values())
        assemble_csr([piece for (i, j), bucket in list(self.held.items())[:1]
                      for piece in pieces_of(i, j, bucket, sizes, direction, self.relations)], self.frame_of,
                     capacity, self.max_rows, typed=typed)  # compile the kernels outside the timing

    def _assemble(self):
        pieces = [piece for (i, j), bucket in self.held.items()
                  for piece in pieces_of(i, j, bucket, self.sizes, self.direction, self.relations)]
        return assemble_csr(pieces, self.frame_of, len(self.partitions), self.max_rows,
                            typed=self.relations is not None)

    def time_assemble(self, cache, capacity, direction, typed):
        self._assemble()

    def track_edges_per_s(self, cache, capacity, direction, typed):
        started = time.perf_counter()
        graph = self._assemble()
        seconds = time.perf_counter() - started
        assert len(graph.indices) == self.edges and (graph.relations is not None) == typed
        return self.edges / seconds

    track_edges_per_s.unit = "edges/s"
