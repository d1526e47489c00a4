"""Kernel timing for the asynchronous pipeline simulator: stage durations measured on this machine.

A spec with ``durations.source: measured`` (:class:`simulators.async_gnn_model.spec.MeasuredDurations`) asks for the
real kernels of every stage timed per partition of the real graph; :func:`measured_durations` times them and
returns the table the simulation takes as its ``durations`` (``{stage: (P,) seconds}``).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from simulators.async_gnn_model.partitions import PartitionedGraph
from simulators.async_gnn_model.spec import STAGES, AsyncSpec, MeasuredDurations
from suite.errors import ConfigError


def measured_durations(spec: MeasuredDurations, graph: PartitionedGraph) -> dict[str, np.ndarray]:
    """Median time of the real kernels per partition, in torch on this machine: the SpMM of the partition's
    in-edges with an ``n x k`` feature matrix (aggregate), the ``n_p x k`` by ``k x k`` GEMM (update) and a
    ReLU over ``n_p x k`` (activation)."""
    if graph.edge_index is None or graph.assignment is None:
        raise ConfigError("durations: source 'measured' needs a dataset graph")
    previous = torch.get_num_threads()
    torch.set_num_threads(spec.threads)
    try:
        gen = torch.Generator().manual_seed(0)
        num_nodes = graph.assignment.shape[0]
        features = torch.randn(num_nodes, spec.features, generator=gen)
        weight = torch.randn(spec.features, spec.features, generator=gen)
        src, dst = (torch.from_numpy(np.ascontiguousarray(row)) for row in graph.edge_index)
        part_of_dst = torch.from_numpy(graph.assignment)[dst]
        out: dict[str, list[float]] = {stage: [] for stage in STAGES}
        for p in range(graph.num_partitions):
            nodes_p = torch.from_numpy(np.flatnonzero(graph.assignment == p))
            local = torch.full((num_nodes,), -1, dtype=torch.int64)
            local[nodes_p] = torch.arange(nodes_p.numel())
            keep = part_of_dst == p
            adjacency = torch.sparse_coo_tensor(torch.stack([local[dst[keep]], src[keep]]),
                                                torch.ones(int(keep.sum())), (nodes_p.numel(), num_nodes)
                                                ).coalesce().to_sparse_csr()
            rows = features[nodes_p]
            kernels = {"aggregate": lambda: torch.sparse.mm(adjacency, features),
                       "update": lambda: rows @ weight, "activation": lambda: torch.relu(rows)}
            for stage, kernel in kernels.items():
                out[stage].append(_median_time(kernel, spec.repeats))
    finally:
        torch.set_num_threads(previous)
    return {stage: np.asarray(values) for stage, values in out.items()}


def _median_time(kernel, repeats: int) -> float:
    kernel()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        kernel()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def durations_for(spec: AsyncSpec, graph: PartitionedGraph) -> dict[str, np.ndarray] | None:
    """The measured durations when ``spec`` asks for them (``durations.source: measured``), else None (the
    simulator takes them from the spec)."""
    return measured_durations(spec.durations, graph) if isinstance(spec.durations, MeasuredDurations) else None


__all__ = ["durations_for", "measured_durations"]
