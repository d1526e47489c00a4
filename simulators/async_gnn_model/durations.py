"""Stage durations of the asynchronous pipeline: forward seconds per stage and partition, from the spec.

Sources (registered by name in :data:`DURATION_SOURCES`): ``fixed`` per stage, a recorded ``table`` per stage and
partition, or ``workdepth``, Brent's bound on the work-depth costs of :mod:`simulators.work_depth_model`. The source
``measured`` times torch kernels on this machine: that is a measurement, made by the experiments layer
(:func:`experiments.measure.kernel_timing.measured_durations`, used by ``gnnsuite simulate-async``) and handed to the
simulation as its ``durations``; the simulator itself never times anything.
"""

from __future__ import annotations

import numpy as np

from simulators.async_gnn_model.partitions import PartitionedGraph
from simulators.async_gnn_model.spec import STAGES, AsyncSpec, FixedDurations, TableDurations, WorkDepthDurations
from suite.errors import ConfigError
from suite.registry import Registry

DURATION_SOURCES: Registry = Registry("duration source")
"""``source`` name -> ``(durations spec, partitioned graph) -> {stage: (P,) forward seconds}``."""


@DURATION_SOURCES.register("fixed")
def fixed_durations(spec: FixedDurations, graph: PartitionedGraph) -> dict[str, np.ndarray]:
    """The same duration for every partition."""
    return {stage: np.full(graph.num_partitions, spec.forward[stage]) for stage in STAGES}


@DURATION_SOURCES.register("table")
def table_durations(spec: TableDurations, graph: PartitionedGraph) -> dict[str, np.ndarray]:
    """The given per-partition durations."""
    return {stage: np.asarray(spec.forward[stage], dtype=np.float64) for stage in STAGES}


@DURATION_SOURCES.register("workdepth")
def workdepth_durations(spec: WorkDepthDurations, graph: PartitionedGraph) -> dict[str, np.ndarray]:
    """Brent's bound per stage and partition: ``W_p / ops_per_s[stage] + D_p * op_latency_s``."""
    from simulators.work_depth_model import MODELS

    model = MODELS.get(spec.model)
    out = {}
    for stage in STAGES:
        costs = [model.stage_cost(stage, n=float(n_p), m=float(max(m_p, 1)), k=float(spec.features),
                                  d=float(max(d_p, 1)))
                 for n_p, m_p, d_p in zip(graph.nodes, graph.edges, graph.max_degree)]
        out[stage] = np.array([w / spec.ops_per_s[stage] + dd * spec.op_latency_s for w, dd in costs])
    return out


def stage_durations(spec: AsyncSpec, graph: PartitionedGraph) -> dict[str, np.ndarray]:
    """Forward seconds per stage and partition, ``{stage: (P,) array}``, from the spec's duration source."""
    if spec.durations.source == "measured":
        raise ConfigError("durations: source 'measured' times torch kernels on this machine: measure them with "
                          "experiments.measure.kernel_timing.measured_durations (gnnsuite simulate-async does) and pass "
                          "them to the simulation as durations")
    return DURATION_SOURCES.get(spec.durations.source)(spec.durations, graph)


__all__ = ["DURATION_SOURCES", "fixed_durations", "stage_durations", "table_durations", "workdepth_durations"]
