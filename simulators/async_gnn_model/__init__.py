"""Discrete-event simulation (SimPy) of synchronous and asynchronous GNN pipelines (after Besta and Hoefler).

A training iteration runs L layers; each layer has three stages, ``aggregate`` (sparse aggregation over the
in-neighbours), ``update`` (dense transform) and ``activation`` (non-linearity), over the P partitions of the
graph; the backward pass runs the layers in reverse, stages in reverse order. Every (layer, stage) has its own
pool of workers (a SimPy ``Store`` of worker tokens, so each task is on one named worker); a task is a SimPy
process that waits for its inputs, takes a worker of its pool (first come, first served), holds it for its
duration and publishes its output. Forward and backward tasks of a layer share that layer's workers.

Execution modes, ``<micro>-<macro>``:

- micro ``sync``: within a layer, a barrier after each stage (every partition finishes stage s before any
  starts s+1); micro ``async``: a partition moves to its next stage as soon as its own previous stage is done, so
  the stages of a layer pipeline over partitions.
- macro ``sync``: a barrier between layers (layer l+1 starts once every partition finished layer l); macro
  ``async``: partition p starts layer l+1 once its own layer-l output is ready, and reads its neighbour
  partitions' layer-l outputs as they are *then*: from this iteration if they are done, else the latest older
  version, at most ``staleness_bound`` iterations old (it waits otherwise; bound 0 = dataflow without staleness).
  Backward gradients from neighbour partitions follow the same rule.
- forward/backward pipelining (``fb_pipeline``): without it, iteration t+1 starts after iteration t's weight
  update (synchronous SGD); with it, iteration t+1's forward runs while iteration t's backward is in flight and
  layer l's update may use weights up to ``staleness_bound`` updates old.

Staleness is recorded per read of a neighbour partition's output (features in the forward, gradients in the
backward) and per weight read: how many iterations (equivalently, updates of that partition's output) behind
the current one the value read was. Outputs: makespan, throughput (iterations and nodes per second),
per-worker utilization (busy time / makespan), the staleness distribution and every task's interval (the Gantt
chart).

Task durations come from the work-depth costs of :mod:`simulators.work_depth_model` (Brent: ``W / rate + D x
latency`` per stage and partition), from a per-partition table, fixed per stage, or from kernels measured on the
real partitioned graph (SpMM, GEMM, ReLU in torch) by the experiments layer
(:mod:`experiments.measure.kernel_timing`) and passed in; optional seeded log-normal jitter.

Modules: :mod:`~simulators.async_gnn_model.spec` (the typed spec, YAML loading and validation; errors name the file
and the field on one line), :mod:`~simulators.async_gnn_model.partitions` (the partitioned graph),
:mod:`~simulators.async_gnn_model.durations` (stage durations), :mod:`~simulators.async_gnn_model.simulation` (the SimPy
model) and :mod:`~simulators.async_gnn_model.tables` (summary and task tables). The names below are re-exported from
them; the Gantt chart is :func:`experiments.figures.async_gnn.plot_simulated_gantt`.
"""

from simulators.async_gnn_model.durations import DURATION_SOURCES, stage_durations
from simulators.async_gnn_model.partitions import PartitionedGraph, build_partitions, partition_graph, uniform_partitions
from simulators.async_gnn_model.simulation import Mode, SimulationResult, simulate, simulate_modes
from simulators.async_gnn_model.spec import MODE_NAMES, STAGES, AsyncSpec, async_spec_from_dict, load_async_spec
from simulators.async_gnn_model.tables import summary_table, tasks_table

__all__ = ["AsyncSpec", "DURATION_SOURCES", "MODE_NAMES", "Mode", "PartitionedGraph", "STAGES", "SimulationResult",
           "async_spec_from_dict", "build_partitions", "load_async_spec", "partition_graph", "simulate",
           "simulate_modes", "stage_durations", "summary_table", "tasks_table", "uniform_partitions"]
