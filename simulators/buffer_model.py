"""Partition-buffer / IO simulator: prices a policy's plan (the same :class:`~systems.disk.policies.BufferPlan`
the disk system executes) in swaps, bytes read and written, and epoch time with and without prefetching.

Byte accounting (what the disk system must measure to agree exactly)
--------------------------------------------------------------------
Per epoch, for a plan with states ``0 .. S-1`` (the buffer starts empty and is flushed at the end):

- ``fill_bytes``: the node partitions loaded by state 0 (the initial fill), read.
- ``swap_read_bytes``: the node partitions loaded by states ``1 .. S-1`` (``plan.swaps`` partitions), read.
- ``edge_bytes``: edge-bucket bytes read, by ``DiskModel.edge_reads``: ``"assigned"`` (link prediction
  with the edges on disk: every state reads the buckets assigned to it, so every bucket once per epoch),
  ``"resident"`` (the in-buffer subgraph kept complete: state 0 reads every bucket among its partitions,
  state ``k`` the buckets between its newly loaded partitions and all its partitions; what the disk system reads
  for node classification, whose sampling sees the in-buffer subgraph) or ``"none"``.
- ``eviction_write_bytes``: for learnable partitions (embeddings + optimizer state), every partition evicted by
  a transition is written back; ``flush_bytes``: the partitions still resident after the last state are
  written back at the end of the epoch. Read-only partitions (features) are never written.
- States without examples (no training node, no bucket) are not entered, as the disk system skips them
  (:meth:`~systems.disk.plan.BufferPlan.states_with_examples`): then every term above is counted over the
  states entered, each reading the partitions (and buckets) it holds that the last state entered did not hold,
  and writing back those that left (``states_entered``, ``partitions_read``; ``swaps`` and
  ``partitions_loaded`` stay the policy's counts over all its states).
- ``bytes_read = fill_bytes + swap_read_bytes + edge_bytes``;
  ``bytes_written = eviction_write_bytes + flush_bytes`` (``= fill_bytes + swap_read_bytes`` when learnable:
  every partition read is written once).

Time model
----------
Per state ``k``: ``R_k`` = (its partition reads + its edge reads) / read bandwidth, ``W_k`` = (partitions it
evicts) / write bandwidth, ``C_k`` = ``state_overhead_s`` + examples of the state x ``compute_per_example_s``
(link prediction: training edges of its buckets; node classification: its training nodes).

- Without prefetch (``epoch_time_serial_s``): everything in sequence,
  ``sum_k (W_k + R_k + C_k) + W_flush``.
- With prefetch (``epoch_time_prefetch_s``): one state of lookahead into a staging area, asynchronous
  write-back. The reads of state ``k`` are issued when state ``k-1`` starts computing; state ``k`` starts when
  state ``k-1`` has finished and its reads are done; the partitions it evicts are queued for writing when
  state ``k-1`` finishes. With ``shared_disk`` the reads and writes are served by one device in arrival order
  (FIFO: read ``k``, write ``k``, read ``k+1``, ...); otherwise reads and writes have their own channels.
  The epoch ends when the last state has computed and the final flush is written. This recurrence is the
  exact event schedule of that queueing model (one pass, ``O(S)``), cross-checked in the tests against a SimPy
  model of the same system (:func:`simulate_prefetch_simpy`).

Scale: the IO needs only the plan's transitions (``O(swaps)``); the per-state example counts come from
:meth:`~systems.disk.policies.BufferPlan.state_bucket_counts` (exact, chunked; a few seconds at
``p = 8192``). ``python -m simulators.buffer_model --help`` runs it from the command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from suite.errors import ConfigError, SuiteError
from suite.io import strict_json_dumps
from systems.disk.policies import BufferPlan, PolicySpec, make_plan

EDGE_READS = ("assigned", "resident", "none")


@dataclass(frozen=True, eq=False)
class DiskModel:
    """Sizes, bandwidths and compute cost that price a plan.

    Attributes:
        partition_bytes: bytes of each node partition on disk: a scalar (all equal) or a ``(p,)`` array
            (features, or embeddings + optimizer state).
        learnable: partitions are written back when evicted and at the end of the epoch.
        bucket_edges: training edges per bucket: a scalar (all equal) or a ``(p, p)`` array (link prediction).
        edge_bytes: bytes per edge on disk (the suite's buckets: int64 ``(src, rel, dst)`` = 24).
        edge_reads: ``"assigned"``, ``"resident"`` or ``"none"`` (see the module docstring).
        read_bandwidth: disk read bandwidth, bytes/s.
        write_bandwidth: disk write bandwidth, bytes/s.
        shared_disk: reads and writes share one device (FIFO) rather than two independent channels.
        compute_per_example_s: compute seconds per training edge (link prediction) or training node (node
            classification).
        state_overhead_s: fixed seconds per state (rebuilding the in-buffer subgraph, draining the pipeline).
    """

    partition_bytes: Any
    learnable: bool = True
    bucket_edges: Any = 0.0
    edge_bytes: float = 24.0
    edge_reads: str = "assigned"
    read_bandwidth: float = 3e9
    write_bandwidth: float = 2e9
    shared_disk: bool = True
    compute_per_example_s: float = 0.0
    state_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        if self.edge_reads not in EDGE_READS:
            raise ConfigError(f"disk.edge_reads: expected one of {', '.join(EDGE_READS)}, got {self.edge_reads!r}")
        for name in ("read_bandwidth", "write_bandwidth"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"disk.{name}: expected a positive number of bytes/s, got {getattr(self, name)!r}")
        for name in ("edge_bytes", "compute_per_example_s", "state_overhead_s"):
            if getattr(self, name) < 0:
                raise ConfigError(f"disk.{name}: expected a non-negative number, got {getattr(self, name)!r}")
        if np.any(np.asarray(self.partition_bytes) < 0) or np.any(np.asarray(self.bucket_edges) < 0):
            raise ConfigError("disk.partition_bytes / disk.bucket_edges: sizes must be non-negative")


@dataclass(frozen=True)
class BufferSimResult:
    """What one epoch of a plan costs (see the module docstring for every term)."""

    policy: str
    num_partitions: int
    capacity: int
    num_states: int
    swaps: int
    partitions_loaded: int
    partitions_written: int
    states_entered: int
    partitions_read: int
    fill_bytes: float
    swap_read_bytes: float
    edge_bytes: float
    eviction_write_bytes: float
    flush_bytes: float
    bytes_read: float
    bytes_written: float
    read_time_s: float
    write_time_s: float
    compute_time_s: float
    epoch_time_serial_s: float
    epoch_time_prefetch_s: float
    simulation_s: float

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (one row of a results table)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class StateCosts:
    """Per-state seconds: reads ``R``, eviction writes ``W``, compute ``C``; ``flush`` at the end."""

    read: np.ndarray
    write: np.ndarray
    compute: np.ndarray
    flush: float


def _per_partition(value: Any, p: int, name: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        return np.full(p, float(arr))
    if arr.shape != (p,):
        raise ConfigError(f"disk.{name}: expected a scalar or shape ({p},), got {arr.shape}")
    return arr


def _unit_totals(plan: BufferPlan, per_partition: np.ndarray) -> np.ndarray:
    parts = plan.unit_partitions
    return np.where(parts >= 0, per_partition[np.maximum(parts, 0)], 0.0).sum(axis=1)


def _resident_edge_counts(plan: BufferPlan, bucket_edges: Any) -> np.ndarray:
    """Edges read per state when the in-buffer subgraph is kept complete (``edge_reads="resident"``)."""
    S = plan.num_states
    if np.ndim(bucket_edges) == 0:
        loaded = np.bincount(plan.entry_state, weights=plan.unit_sizes[plan.load_units], minlength=S)
        members = np.zeros(S)
        for k, slots in enumerate(plan.iter_unit_slots()):
            members[k] = plan.unit_sizes[slots[slots >= 0]].sum()
        return (members ** 2 - (members - loaded) ** 2) * float(bucket_edges)
    weights = np.asarray(bucket_edges, dtype=np.float64)
    out = np.zeros(S)
    for k, transition in enumerate(plan.iter_transitions()):
        state = plan.state(k)
        new = transition.partitions_loaded
        out[k] = weights[np.ix_(new, state)].sum() + weights[np.ix_(state, new)].sum() - weights[np.ix_(new, new)].sum()
    return out


def _entered_io(plan: BufferPlan, disk: DiskModel, entered: np.ndarray, unit_bytes: np.ndarray,
                assigned_edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int]:
    """Node bytes read, eviction bytes and edges read per state entered, the flush bytes and the partitions read,
    when the disk system skips the states without examples
    (:meth:`~systems.disk.plan.BufferPlan.states_with_examples`): a state entered reads the units it holds that
    the last one entered did not, and writes back those that left."""
    n = len(entered)
    read_nodes, evict_bytes, edge_counts = np.zeros(n), np.zeros(n), np.zeros(n)
    enter = np.zeros(plan.num_states, dtype=bool)
    enter[entered] = True
    weights = None if np.ndim(disk.bucket_edges) == 0 else np.asarray(disk.bucket_edges, dtype=np.float64)
    held = np.empty(0, dtype=np.int64)
    i, units_read = 0, 0
    for k, slots in enumerate(plan.iter_unit_slots()):
        if not enter[k]:
            continue
        members = np.unique(slots[slots >= 0]).astype(np.int64)
        new, gone, kept = np.setdiff1d(members, held), np.setdiff1d(held, members), np.intersect1d(members, held)
        read_nodes[i], evict_bytes[i] = unit_bytes[new].sum(), unit_bytes[gone].sum()
        units_read += plan.unit_sizes[new].sum()
        if disk.edge_reads == "assigned":
            edge_counts[i] = assigned_edges[k]
        elif disk.edge_reads == "resident":  # the buckets among its partitions not held before
            if weights is None:
                m, h = plan.unit_sizes[members].sum(), plan.unit_sizes[kept].sum()
                edge_counts[i] = float(m * m - h * h) * float(disk.bucket_edges)
            else:
                parts, kept_parts = (plan.unit_partitions[u][plan.unit_partitions[u] >= 0] for u in (members, kept))
                edge_counts[i] = weights[np.ix_(parts, parts)].sum() - weights[np.ix_(kept_parts, kept_parts)].sum()
        held = members
        i += 1
    return read_nodes, evict_bytes, edge_counts, float(unit_bytes[held].sum()), int(units_read)


def state_costs(plan: BufferPlan, disk: DiskModel) -> tuple[StateCosts, dict[str, float]]:
    """Per-state read/write/compute seconds and the byte totals of one epoch of ``plan``."""
    p, S = plan.num_partitions, plan.num_states
    part_bytes = _per_partition(disk.partition_bytes, p, "partition_bytes")
    unit_bytes = _unit_totals(plan, part_bytes)
    if plan.task == "link_prediction":
        examples = plan.state_bucket_totals(disk.bucket_edges).astype(np.float64)
        assigned = examples if disk.edge_reads == "assigned" else np.zeros(S)
    else:
        examples = np.bincount(plan.node_state, minlength=S).astype(np.float64)
        # Node classification samples from the in-buffer subgraph: its edges are read as partitions arrive.
        assigned = np.zeros(S)
    entered = plan.states_with_examples()
    if len(entered) < S:  # the walk skips states: count it state entered by state entered
        read_nodes, evict_bytes, edge_counts, flush, partitions_read = _entered_io(plan, disk, entered, unit_bytes,
                                                                                   assigned)
        examples = examples[entered]
    else:  # every state entered: the plan's transitions, O(swaps)
        read_nodes = np.bincount(plan.entry_state, weights=unit_bytes[plan.load_units], minlength=S)
        evict = plan.evict_units
        evict_bytes = np.bincount(plan.entry_state,
                                  weights=np.where(evict >= 0, unit_bytes[np.maximum(evict, 0)], 0.0), minlength=S)
        last = None
        for last in plan.iter_unit_slots():
            pass
        flush = float(unit_bytes[last[last >= 0]].sum()) if last is not None else 0.0
        edge_counts = (_resident_edge_counts(plan, disk.bucket_edges) if disk.edge_reads == "resident"
                       else assigned)
        partitions_read = plan.partitions_loaded
    if not disk.learnable:
        evict_bytes = np.zeros(len(read_nodes))
        flush = 0.0
    edge_bytes = edge_counts * disk.edge_bytes
    costs = StateCosts(read=(read_nodes + edge_bytes) / disk.read_bandwidth,
                       write=evict_bytes / disk.write_bandwidth,
                       compute=disk.state_overhead_s + examples * disk.compute_per_example_s,
                       flush=flush / disk.write_bandwidth)
    fill = float(read_nodes[0]) if len(read_nodes) else 0.0
    totals = {"fill_bytes": fill, "swap_read_bytes": float(read_nodes.sum()) - fill,
              "edge_bytes": float(edge_bytes.sum()), "eviction_write_bytes": float(evict_bytes.sum()),
              "flush_bytes": flush, "states_entered": len(read_nodes), "partitions_read": partitions_read}
    return costs, totals


def epoch_time_serial(costs: StateCosts) -> float:
    """Epoch seconds without prefetching: evictions, reads and compute of every state in sequence, then flush."""
    return float(costs.write.sum() + costs.read.sum() + costs.compute.sum() + costs.flush)


def epoch_time_prefetch(costs: StateCosts, shared_disk: bool = True) -> float:
    """Epoch seconds with one state of prefetch and asynchronous write-back (see the module docstring)."""
    R, W, C = costs.read.tolist(), costs.write.tolist(), costs.compute.tolist()
    S = len(R)
    if S == 0:
        return 0.0
    read_free = write_free = 0.0
    read_end = R[0]
    read_free = read_end
    if shared_disk:
        write_free = read_end
    start = read_end
    end = start + C[0]
    for k in range(1, S):
        # reads of state k, issued when state k-1 starts
        t0 = max(read_free, start)
        read_end = t0 + R[k]
        read_free = read_end
        if shared_disk:
            write_free = read_end
        # write-back of what state k evicts, issued when state k-1 ends
        t0 = max(write_free, end)
        write_free = t0 + W[k]
        if shared_disk:
            read_free = write_free
        start = max(end, read_end)
        end = start + C[k]
    flush_end = max(write_free, end) + costs.flush
    return float(max(end, flush_end))


def simulate_prefetch_simpy(costs: StateCosts, shared_disk: bool = True) -> float:
    """The prefetching model as a SimPy discrete-event simulation (a cross-check of :func:`epoch_time_prefetch`;
    ``O(S)`` events, slower)."""
    import simpy

    env = simpy.Environment()
    read_disk = simpy.Resource(env, capacity=1)
    write_disk = read_disk if shared_disk else simpy.Resource(env, capacity=1)
    S = len(costs.read)
    started = [env.event() for _ in range(S)]
    finished = [env.event() for _ in range(S)]
    read_done = [env.event() for _ in range(S)]
    writes: list[simpy.Process] = []

    def io(resource: simpy.Resource, seconds: float, done: simpy.Event | None):
        with resource.request() as request:
            yield request
            yield env.timeout(seconds)
        if done is not None:
            done.succeed()

    def reader():
        for k in range(S):
            if k:
                yield started[k - 1]
            yield env.process(io(read_disk, float(costs.read[k]), read_done[k]))

    def writer_after(k: int):
        yield finished[k - 1]
        yield env.process(io(write_disk, float(costs.write[k]), None))

    def compute():
        for k in range(S):
            yield read_done[k]
            if k:
                yield finished[k - 1]
            started[k].succeed()
            yield env.timeout(float(costs.compute[k]))
            finished[k].succeed()

    env.process(reader())
    for k in range(1, S):
        writes.append(env.process(writer_after(k)))
    env.process(compute())

    def flush():
        yield finished[S - 1]
        yield env.all_of(writes) if writes else env.timeout(0)
        yield env.process(io(write_disk, costs.flush, None))

    done = env.process(flush())
    env.run(until=done)
    return float(env.now)


def simulate(plan: BufferPlan, disk: DiskModel) -> BufferSimResult:
    """Price one epoch of ``plan`` on ``disk`` (bytes, swaps, epoch time with and without prefetch)."""
    started = time.perf_counter()
    costs, totals = state_costs(plan, disk)
    serial = epoch_time_serial(costs)
    prefetch = epoch_time_prefetch(costs, disk.shared_disk)
    written = totals["partitions_read"] if disk.learnable else 0
    bytes_read = totals["fill_bytes"] + totals["swap_read_bytes"] + totals["edge_bytes"]
    bytes_written = totals["eviction_write_bytes"] + totals["flush_bytes"]
    return BufferSimResult(
        policy=plan.policy, num_partitions=plan.num_partitions, capacity=plan.capacity, num_states=plan.num_states,
        swaps=plan.swaps, partitions_loaded=plan.partitions_loaded, partitions_written=written,
        bytes_read=bytes_read, bytes_written=bytes_written, read_time_s=float(costs.read.sum()),
        write_time_s=float(costs.write.sum() + costs.flush), compute_time_s=float(costs.compute.sum()),
        epoch_time_serial_s=serial, epoch_time_prefetch_s=prefetch,
        simulation_s=time.perf_counter() - started, **totals)


# ---------------------------------------------------------------------------------------------- scenarios
@dataclass(frozen=True)
class GraphScale:
    """A graph's size for disk-based link prediction with learnable embeddings.

    Attributes:
        num_nodes: nodes.
        num_edges: training edges.
        embedding_dim: embedding width.
        bytes_per_value: bytes of one embedding value (float32: 4).
        optimizer_copies: optimizer state stored beside each embedding, in embedding sizes (Adagrad: 1).
        edge_bytes: bytes per edge on disk.
    """

    num_nodes: int
    num_edges: int
    embedding_dim: int = 100
    bytes_per_value: int = 4
    optimizer_copies: int = 1
    edge_bytes: int = 24

    @property
    def node_bytes(self) -> int:
        """Bytes per node on disk (embedding + optimizer state)."""
        return self.embedding_dim * self.bytes_per_value * (1 + self.optimizer_copies)

    def disk_model(self, p: int, **options: Any) -> DiskModel:
        """A :class:`DiskModel` with equal partitions and buckets for ``p`` partitions (``options`` override)."""
        fields = dict(partition_bytes=self.num_nodes / p * self.node_bytes, learnable=True,
                      bucket_edges=self.num_edges / (p * p), edge_bytes=self.edge_bytes)
        fields.update(options)
        return DiskModel(**fields)


HYPERLINK_2012 = GraphScale(num_nodes=3_500_000_000, num_edges=128_000_000_000)
"""Hyperlink-2012 (MariusGNN's largest graph): 3.5B nodes, 128B edges; 100-d float32 embeddings + Adagrad."""


def compare_policies(policies: Sequence[str], p: int, c: int, disk: DiskModel, *, ratio: int = 1,
                     seed: int = 0, epoch: int = 0) -> list[dict[str, Any]]:
    """Simulate several policies on the same ``(p, c)``; ``ratio`` is COMET's fine-to-coarse ratio (others
    ignore it). Returns one dict per policy (:meth:`BufferSimResult.as_dict` plus the plan time)."""
    rows = []
    for name in policies:
        spec = PolicySpec(p, c, fine_to_coarse_ratio=ratio if name in ("comet", "dispersed") else 1)
        started = time.perf_counter()
        plan = make_plan(name, spec, seed=seed, epoch=epoch)
        plan_s = time.perf_counter() - started
        result = simulate(plan, disk).as_dict()
        result.update(fine_to_coarse_ratio=spec.fine_to_coarse_ratio,
                      logical_partitions=p // spec.fine_to_coarse_ratio, plan_s=plan_s)
        rows.append(result)
    return rows


# ---------------------------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    """Arguments of ``python -m simulators.buffer_model``."""
    parser = argparse.ArgumentParser(
        prog="python -m simulators.buffer_model",
        description="Price partition-buffer policies (swaps, bytes, epoch time) for link prediction with "
                    "learnable embeddings; defaults: Hyperlink-2012 (3.5B nodes, 128B edges, 100-d float32 + Adagrad).")
    parser.add_argument("--policy", nargs="+", default=["beta", "comet", "random"], help="policies (default: %(default)s)")
    parser.add_argument("-p", "--partitions", type=int, default=1024, help="node partitions p (default: %(default)s)")
    parser.add_argument("-c", "--capacity", type=int, default=128, help="buffer capacity c (default: %(default)s)")
    parser.add_argument("-l", "--logical", type=int, default=None,
                        help="COMET logical partitions l (ratio p/l); default: p/16 when that divides c")
    parser.add_argument("--nodes", type=float, default=HYPERLINK_2012.num_nodes)
    parser.add_argument("--edges", type=float, default=HYPERLINK_2012.num_edges)
    parser.add_argument("--dim", type=int, default=100, help="embedding dimension")
    parser.add_argument("--optimizer-copies", type=int, default=1, help="optimizer state per embedding (Adagrad: 1)")
    parser.add_argument("--edge-bytes", type=int, default=24)
    parser.add_argument("--edge-reads", choices=EDGE_READS, default="assigned")
    parser.add_argument("--read-bw", type=float, default=3.0, help="disk read bandwidth, GB/s (default: %(default)s)")
    parser.add_argument("--write-bw", type=float, default=2.0, help="disk write bandwidth, GB/s (default: %(default)s)")
    parser.add_argument("--duplex", action="store_true", help="independent read and write channels")
    parser.add_argument("--edges-per-s", type=float, default=5e6, help="training edges per second of compute")
    parser.add_argument("--state-overhead", type=float, default=0.0, help="seconds per buffer state")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epoch", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON records instead of a table")
    return parser


def _default_ratio(p: int, c: int, logical: int | None) -> int:
    if logical is not None:
        if logical <= 0 or p % logical:
            raise ConfigError(f"--logical: {logical} must divide the number of partitions {p}")
        return p // logical
    for ratio in (16, 8, 4, 2, 1):
        if p % ratio == 0 and c % ratio == 0 and c // ratio >= 2:
            return ratio
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simulators.buffer_model``: print the simulated cost of each policy; exit 2 on bad input."""
    args = build_parser().parse_args(argv)
    try:
        p, c = args.partitions, args.capacity
        scale = GraphScale(num_nodes=int(args.nodes), num_edges=int(args.edges), embedding_dim=args.dim,
                           optimizer_copies=args.optimizer_copies, edge_bytes=args.edge_bytes)
        disk = scale.disk_model(p, edge_reads=args.edge_reads, read_bandwidth=args.read_bw * 1e9,
                                write_bandwidth=args.write_bw * 1e9, shared_disk=not args.duplex,
                                compute_per_example_s=1.0 / args.edges_per_s, state_overhead_s=args.state_overhead)
        rows = compare_policies(args.policy, p, c, disk, ratio=_default_ratio(p, c, args.logical),
                                seed=args.seed, epoch=args.epoch)
    except SuiteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(strict_json_dumps(rows, indent=2))
        return 0
    import pandas as pd

    table = pd.DataFrame(rows)
    table["read_TB"] = table["bytes_read"] / 1e12
    table["written_TB"] = table["bytes_written"] / 1e12
    table["serial_h"] = table["epoch_time_serial_s"] / 3600
    table["prefetch_h"] = table["epoch_time_prefetch_s"] / 3600
    columns = ["policy", "num_partitions", "capacity", "logical_partitions", "num_states", "swaps", "read_TB",
               "written_TB", "serial_h", "prefetch_h", "plan_s", "simulation_s"]
    with pd.option_context("display.width", 200, "display.precision", 3):
        print(table[columns].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
