"""The partitioned graph the asynchronous pipeline runs over: per-partition sizes and which partitions read which."""

from __future__ import annotations

import dataclasses

import numpy as np

from simulators.async_gnn_model.spec import AsyncSpec, UniformGraphSpec
from suite.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class PartitionedGraph:
    """Per-partition sizes and the partition adjacency.

    Attributes:
        nodes: n_p per partition.
        edges: m_p, in-edges whose destination is in p.
        max_degree: d_p, the largest in-degree in p.
        reads: ``reads[p, q]`` is True when p aggregates from q (an edge q -> p); the diagonal is True.
        edge_index: the graph's ``(2, m)`` ``(src, dst)`` edges (dataset graphs only, for measured durations).
        assignment: the partition of every node (dataset graphs only).
    """

    nodes: np.ndarray
    edges: np.ndarray
    max_degree: np.ndarray
    reads: np.ndarray
    edge_index: np.ndarray | None = None
    assignment: np.ndarray | None = None

    @property
    def num_partitions(self) -> int:
        """P."""
        return int(self.nodes.shape[0])


def uniform_partitions(spec: UniformGraphSpec) -> PartitionedGraph:
    """P partitions of equal size (remainders to the first ones) with the spec's neighbour pattern."""
    p = spec.num_partitions
    nodes = np.full(p, spec.num_nodes // p, dtype=np.int64) + (np.arange(p) < spec.num_nodes % p)
    edges = np.full(p, spec.num_edges // p, dtype=np.int64) + (np.arange(p) < spec.num_edges % p)
    eye = np.eye(p, dtype=bool)
    reads = {"all": np.ones((p, p), dtype=bool), "none": eye,
             "ring": eye | np.roll(eye, 1, axis=1) | np.roll(eye, -1, axis=1)}[spec.neighbours]
    return PartitionedGraph(nodes, edges, np.full(p, spec.max_degree, dtype=np.int64), reads)


def partition_graph(edge_index: np.ndarray, num_nodes: int, num_partitions: int, partitioner: str = "random",
                    seed: int = 0) -> PartitionedGraph:
    """Cut a graph into partitions and measure them (vectorized).

    Args:
        edge_index: ``(2, m)`` ``(src, dst)``.
        num_nodes: n.
        num_partitions: P.
        partitioner: ``"random"`` (a seeded random balanced assignment) or ``"contiguous"`` (id ranges).
        seed: seed of the random assignment.

    Returns:
        The partitioned graph (with ``edge_index`` and ``assignment``).
    """
    p = num_partitions
    if partitioner == "random":
        assignment = np.empty(num_nodes, dtype=np.int64)
        assignment[np.random.default_rng(seed).permutation(num_nodes)] = np.arange(num_nodes) % p
    elif partitioner == "contiguous":
        assignment = (np.arange(num_nodes, dtype=np.int64) * p) // num_nodes
    else:
        raise ConfigError(f"graph.partitioner: unknown {partitioner!r} (known: contiguous, random)")
    src, dst = edge_index
    degrees = np.bincount(dst, minlength=num_nodes)
    max_degree = np.zeros(p, dtype=np.int64)
    np.maximum.at(max_degree, assignment, degrees)
    reads = np.zeros((p, p), dtype=bool)
    reads[assignment[dst], assignment[src]] = True
    reads |= np.eye(p, dtype=bool)
    return PartitionedGraph(np.bincount(assignment, minlength=p), np.bincount(assignment[dst], minlength=p),
                            max_degree, reads, edge_index, assignment)


def build_partitions(spec: AsyncSpec) -> PartitionedGraph:
    """The partitioned graph of a spec (a dataset graph is opened, or generated once, by the dataset registry)."""
    if isinstance(spec.graph, UniformGraphSpec):
        return uniform_partitions(spec.graph)
    from suite.datasets import open_dataset
    from suite.data.pyg_export import to_pyg_data

    data = to_pyg_data(open_dataset(spec.graph.dataset))
    return partition_graph(data.edge_index.numpy(), int(data.num_nodes), spec.graph.num_partitions,
                           spec.graph.partitioner, spec.seed)


__all__ = ["PartitionedGraph", "build_partitions", "partition_graph", "uniform_partitions"]
