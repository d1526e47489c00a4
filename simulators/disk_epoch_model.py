"""Disk-system epoch simulator: predicts the epoch time of a disk run (node classification or link prediction)
from its policy's plans, its store's sizes and costs calibrated on a recorded run's state records.

Inputs (a model, no system internals)
-------------------------------------
- The plans of the run's training passes (:class:`~systems.disk.plan.BufferPlan`, one per epoch, from the
  policy API) and the store's sizes (:class:`StoreSizes`: bytes of every node partition, edges of every bucket in
  file order, the bucket-read coalescing gap). :func:`plan_work` turns them into the work of every state
  (:class:`PassWork`): bytes read and read extents, in-buffer edges, training examples and batches, and, for
  learnable partitions, the bytes written back at the end of the pass.
- Costs (:class:`DiskCosts`) fitted by :func:`calibrate` on the ``state`` and ``epoch`` records of one recorded
  run, or by :func:`calibrate_pooled` on those of several runs pooled (its states' read events give the read
  bandwidth and the per-read latency, on the wall-clock time each state spent reading, concurrent reads counted
  once; its prepare intervals the CSR build and hold costs; its compute intervals the per-state, per-batch and
  per-example compute, identified only when the states' batches and examples vary, :func:`compute_rank`; its
  flushes the write bandwidth).

Work of a state (the rules the disk system documents)
-----------------------------------------------------
State ``k`` holds the partitions ``M_k`` of the plan; the states without examples are not entered (the disk
system skips them), and ``k - 1`` below is the last state entered before ``k``. Entering it reads the partitions
of ``M_k`` not held before (``M_{k-1}``; state 0 of a pass after the previous pass's last state when partitions
stay resident between passes, else after an empty buffer), one read per run of consecutive partitions, and the
edge buckets between ``M_k`` that were not held (buckets between ``M_{k-1}``), merged into extents where the gap
between them on disk is at most ``coalesce_rows`` rows. Its examples are the plan's: training nodes assigned to it (node
classification) or the training edges of its buckets (link prediction), cut into batches of ``batch_size``.

Time model
----------
Per state: prepare ``P_k = ops_k * latency + read_bytes_k / read_bandwidth + build_per_edge * edges_k +
hold_per_byte * read_bytes_k + hold_per_edge * edges_k`` (reads; checksums of what is read; the CSR build and
re-assembling the held buckets, both linear in the in-buffer edges); compute
``C_k = compute_state_s + compute_batch_s * batches_k + compute_example_s * examples_k + compute_edge_s *
sampled_edges_k`` (node classification with a workload count: the edges its batches sample in the in-buffer graph,
counted by the caller for each state the plan enters; the compute is then fitted on them instead of the examples; a
run computing with another number of threads than the calibration runs has its
compute costs scaled by the ratio, :meth:`DiskCosts.with_compute_threads`); per pass a flush
``F = flush_bytes / write_bandwidth`` (learnable partitions) and a fixed ``epoch_overhead_s``; the run's first
state adds a warm-up (``warmup_prepare_s``, ``warmup_compute_s``); between passes a gap ``pass_gap_s`` (the
harness's bookkeeping; the next pass's first wait starts that long after the last compute and flush).

- Without prefetch (serial): ``epoch = sum_k (P_k + C_k) + F + overhead``.
- With prefetch (one state of lookahead, one prefetch thread): state ``k``'s prepare starts when state ``k-1``
  is entered and takes ``P_k``; state ``k`` is entered at ``ready_k = max(ready_{k-1} + C_{k-1}, ready_{k-1} +
  P_k)``; ``epoch = ready_{S-1} + C_{S-1} - wait_0 + F + overhead``. When partitions stay resident between passes
  (node classification) the first state of the next pass is prepared while the last state computes (its prepare
  starts at ``ready_{S-1}``); otherwise the pass's first state is prepared on entering (``ready_0 = wait_0 +
  P_0``).

A shared machine: the costs are those of the calibration run's share of the machine. :meth:`DiskCosts.slowed` by
:func:`load_factor` (processor sharing: the ratio of the cores left to the two runs by other processes, which the
harness records per epoch as ``foreign_cores``) predicts a run made under another load; no parameter is fitted.

:func:`simulate_epochs` is that recurrence (``O(S)`` per pass); :func:`simulate_epochs_simpy` is the same system as
a SimPy discrete-event simulation (a cross-check in the tests).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from suite.errors import ConfigError, DataError
from systems.disk.plan import BufferPlan


@dataclass(frozen=True, eq=False)
class StoreSizes:
    """The sizes of a partitioned store that price a plan.

    Attributes:
        partition_bytes: ``(p,)`` bytes of every node partition on disk (features; or embeddings + optimizer state).
        bucket_edges: ``(p, p)`` edges of every bucket (rows: source partition); buckets lie on disk in row-major
            order, empty ones taking no space.
        edge_bytes: bytes of one edge on disk.
        coalesce_rows: buckets at most this many edge rows apart on disk are read as one extent (the rows between
            them read too).
        learnable: partitions are written back at the end of a pass (link prediction's embeddings).
    """

    partition_bytes: np.ndarray
    bucket_edges: np.ndarray
    edge_bytes: float = 24.0
    coalesce_rows: int = 0
    learnable: bool = False

    def __post_init__(self) -> None:
        p = len(self.partition_bytes)
        if np.shape(self.bucket_edges) != (p, p):
            raise ConfigError(f"sizes.bucket_edges: expected shape ({p}, {p}), got {np.shape(self.bucket_edges)}")
        if np.any(np.asarray(self.partition_bytes) < 0) or np.any(np.asarray(self.bucket_edges) < 0):
            raise ConfigError("sizes: partition bytes and bucket edges must be non-negative")
        if self.coalesce_rows < 0 or self.edge_bytes <= 0:
            raise ConfigError("sizes: coalesce_rows must be >= 0 and edge_bytes > 0")

    @property
    def num_partitions(self) -> int:
        """``p``."""
        return len(self.partition_bytes)


@dataclass(frozen=True)
class PassWork:
    """The work of every state of one training pass (arrays of length ``S``).

    Attributes:
        partition_bytes: bytes of the partitions the state reads.
        partition_reads: reads of partitions (one per run of consecutive partitions).
        bucket_bytes: bytes of the bucket extents the state reads.
        bucket_reads: bucket extents read.
        edges: edges held in the buffer during the state (its CSR's size).
        examples: training examples of the state.
        batches: batches of the state (``ceil(examples / batch_size)``; an empty state still runs one empty batch).
        flush_bytes: bytes written back at the end of the pass.
        sampled_edges: edges the state's batches sample in the in-buffer graph (node classification, when a
            workload count is given to :func:`plan_work`), else None.
    """

    partition_bytes: np.ndarray
    partition_reads: np.ndarray
    bucket_bytes: np.ndarray
    bucket_reads: np.ndarray
    edges: np.ndarray
    examples: np.ndarray
    batches: np.ndarray
    flush_bytes: float = 0.0
    sampled_edges: np.ndarray | None = None

    @property
    def sampled(self) -> np.ndarray:
        """Sampled edges per state (zeros where not estimated)."""
        return np.zeros(len(self.examples)) if self.sampled_edges is None else self.sampled_edges

    @property
    def read_bytes(self) -> np.ndarray:
        """Bytes read per state."""
        return self.partition_bytes + self.bucket_bytes

    @property
    def read_ops(self) -> np.ndarray:
        """Reads per state."""
        return self.partition_reads + self.bucket_reads

    @property
    def num_states(self) -> int:
        """``S``."""
        return len(self.examples)


@dataclass(frozen=True)
class DiskCosts:
    """Calibrated costs of the disk system (see the module docstring for the formulas).

    Attributes:
        read_bandwidth: bytes/s of a read.
        read_latency_s: fixed seconds of every read.
        build_per_edge_s: CSR build seconds per in-buffer edge.
        hold_per_byte_s: seconds per byte read spent beyond the read itself (checksums).
        hold_per_edge_s: seconds per in-buffer edge beyond the CSR build (re-assembling the held buckets' rows).
        compute_state_s: fixed compute seconds of a state.
        compute_batch_s: compute seconds per batch.
        compute_example_s: compute seconds per training example.
        compute_edge_s: compute seconds per sampled edge.
        compute_threads: threads the compute costs were measured with (:meth:`with_compute_threads` rescales them).
        write_bandwidth: bytes/s of the end-of-pass write-back.
        epoch_overhead_s: seconds of an epoch outside its states (plan, bookkeeping).
        pass_gap_s: seconds between a pass's last compute (and flush) and the next pass's first wait.
        warmup_compute_s: extra compute seconds of the run's first state (compilation, first allocations).
        warmup_prepare_s: extra prepare seconds of the run's first state.
    """

    read_bandwidth: float
    read_latency_s: float = 0.0
    build_per_edge_s: float = 0.0
    hold_per_byte_s: float = 0.0
    hold_per_edge_s: float = 0.0
    compute_state_s: float = 0.0
    compute_batch_s: float = 0.0
    compute_example_s: float = 0.0
    compute_edge_s: float = 0.0
    compute_threads: float = 1.0
    write_bandwidth: float = math.inf
    epoch_overhead_s: float = 0.0
    pass_gap_s: float = 0.0
    warmup_compute_s: float = 0.0
    warmup_prepare_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.read_bandwidth > 0 or not self.write_bandwidth > 0:
            raise ConfigError("costs: read_bandwidth and write_bandwidth must be positive bytes/s")
        if not self.compute_threads > 0:
            raise ConfigError(f"costs.compute_threads: expected a positive number, got {self.compute_threads!r}")
        for name in ("read_latency_s", "build_per_edge_s", "hold_per_byte_s", "hold_per_edge_s", "compute_state_s",
                     "compute_batch_s", "compute_example_s", "compute_edge_s", "epoch_overhead_s", "pass_gap_s",
                     "warmup_compute_s", "warmup_prepare_s"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"costs.{name}: expected a non-negative number, got {getattr(self, name)!r}")

    def as_dict(self) -> dict[str, float]:
        """The costs as a plain dict (one row of a table)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def slowed(self, factor: float) -> "DiskCosts":
        """Every duration ``factor`` times as long (bandwidths divided by it): the same work on a machine whose
        share for the run changed (processor sharing: ``factor`` = cores the calibration run had / cores this run
        has, see :func:`load_factor`)."""
        if not factor > 0:
            raise ConfigError(f"slowdown factor: expected a positive number, got {factor!r}")
        fields = {name: value * factor for name, value in self.as_dict().items()}
        fields.update(read_bandwidth=self.read_bandwidth / factor, write_bandwidth=self.write_bandwidth / factor,
                      compute_threads=self.compute_threads)
        return DiskCosts(**fields)

    def with_compute_threads(self, threads: float) -> "DiskCosts":
        """The costs of a run that computes with ``threads`` threads: the compute costs (per state, batch, example,
        edge, and the warm-up's) scaled by ``compute_threads / threads`` (the torch ops of a batch spread over the
        threads; processor sharing, no parallel overhead), the rest unchanged."""
        if not threads > 0:
            raise ConfigError(f"compute threads: expected a positive number, got {threads!r}")
        scale = self.compute_threads / threads
        return dataclasses.replace(self, compute_threads=float(threads), **{
            name: getattr(self, name) * scale for name in COMPUTE_COSTS})


COMPUTE_COSTS = ("compute_state_s", "compute_batch_s", "compute_example_s", "compute_edge_s", "warmup_compute_s")
"""The costs that scale with the compute threads (:meth:`DiskCosts.with_compute_threads`)."""


def load_factor(calibration_foreign_cores: float, run_foreign_cores: float, cores: float,
                min_cores: float = 0.05) -> float:
    """How much longer the same work takes in a run than in the calibration run on a machine of ``cores`` shared
    with other processes that used ``*_foreign_cores`` of it (the suite records them per epoch): under processor
    sharing a saturated run progresses at the cores left to it, ``cores - foreign`` (at least ``min_cores``)."""
    left = max(min_cores, cores - run_foreign_cores)
    return max(min_cores, cores - calibration_foreign_cores) / left


@dataclass(frozen=True)
class StateSeconds:
    """Per-state prepare ``P`` and compute ``C`` seconds of one pass, and its flush ``F``."""

    prepare: np.ndarray
    compute: np.ndarray
    flush: float = 0.0


# ---------------------------------------------------------------------------------------------- work
def _runs(sorted_ids: np.ndarray) -> int:
    """Runs of consecutive integers in ascending ``sorted_ids``."""
    if not len(sorted_ids):
        return 0
    return int(1 + np.count_nonzero(np.diff(sorted_ids) > 1))


def _bucket_extents(needed: np.ndarray, held: np.ndarray, sizes: StoreSizes) -> tuple[float, int]:
    """Bytes and extents read to hold the buckets between ``needed`` partitions when those between ``held``
    are held: the missing non-empty buckets in file order, merged where at most ``coalesce_rows`` rows apart."""
    p = sizes.num_partitions
    edges = np.asarray(sizes.bucket_edges, dtype=np.int64).ravel()
    want = np.zeros((p, p), dtype=bool)
    want[np.ix_(needed, needed)] = True
    if len(held):
        want[np.ix_(held, held)] = False
    missing = np.flatnonzero(want.ravel() & (edges > 0))
    if not len(missing):
        return 0.0, 0
    offsets = np.concatenate([[0], np.cumsum(edges)])
    starts, stops = offsets[missing], offsets[missing + 1]
    breaks = np.flatnonzero(starts[1:] - stops[:-1] > sizes.coalesce_rows) + 1
    first = np.concatenate([[0], breaks])
    last = np.concatenate([breaks - 1, [len(starts) - 1]])
    rows = (stops[last] - starts[first]).sum()
    return float(rows * sizes.edge_bytes), len(first)


StateSampledEdges = Callable[[BufferPlan, np.ndarray], np.ndarray]
"""A workload count: for a plan and the states it enters (ascending), the edges the batches of each of those states
sample in the graph its buffer holds."""


def plan_work(plans: Sequence[BufferPlan], sizes: StoreSizes, batch_size: int,
              keeps_resident: bool, sampled_edges: StateSampledEdges | None = None) -> list[PassWork]:
    """The work of every state of consecutive training passes (``plans``: one per epoch, in order).

    Args:
        plans: the passes' plans.
        sizes: the partitioned store's sizes.
        batch_size: training batch size.
        keeps_resident: partitions and buckets stay in the buffer from one pass to the next (node
            classification); else every pass starts from an empty buffer (link prediction).
        sampled_edges: node classification: the workload count, the edges the batches of every state entered
            sample in the in-buffer graph. None: not counted.
    """
    if batch_size <= 0:
        raise ConfigError(f"batch_size: expected a positive integer, got {batch_size}")
    part_bytes = np.asarray(sizes.partition_bytes, dtype=np.float64)
    out = []
    held = np.empty(0, dtype=np.int64)
    for plan in plans:
        if plan.num_partitions != sizes.num_partitions:
            raise DataError(f"plan {plan.policy}: {plan.num_partitions} partitions, the store has "
                            f"{sizes.num_partitions}")
        if not keeps_resident:
            held = np.empty(0, dtype=np.int64)
        entered = plan.states_with_examples()  # the disk system skips states without examples
        S = len(entered)
        rows = {name: np.zeros(S) for name in ("partition_bytes", "partition_reads", "bucket_bytes", "bucket_reads",
                                               "edges")}
        edges = np.asarray(sizes.bucket_edges, dtype=np.float64)
        for k, state in enumerate(entered.tolist()):
            members = np.sort(plan.state(state)).astype(np.int64)
            loads = np.setdiff1d(members, held)
            rows["partition_bytes"][k] = part_bytes[loads].sum()
            rows["partition_reads"][k] = _runs(loads)
            rows["bucket_bytes"][k], rows["bucket_reads"][k] = _bucket_extents(members, held, sizes)
            rows["edges"][k] = edges[np.ix_(members, members)].sum()
            held = members
        if plan.task == "link_prediction":
            examples = plan.state_bucket_totals(edges)[entered]
        else:
            examples = np.bincount(plan.node_state, minlength=plan.num_states).astype(np.float64)[entered]
        batches = np.maximum(1.0, np.ceil(examples / batch_size))
        flush = float(part_bytes[held].sum()) if sizes.learnable else 0.0
        sampled = None
        if sampled_edges is not None and plan.task != "link_prediction":
            sampled = np.asarray(sampled_edges(plan, entered), dtype=np.float64)
            if sampled.shape != (S,):
                raise DataError(f"sampled_edges: {sampled.shape} counts for the {S} states plan {plan.policy} "
                                "enters")
        out.append(PassWork(examples=examples, batches=batches, flush_bytes=flush, sampled_edges=sampled, **rows))
    return out


# ---------------------------------------------------------------------------------------------- time
def state_seconds(work: PassWork, costs: DiskCosts) -> StateSeconds:
    """Prepare and compute seconds of every state of a pass, and its flush."""
    prepare = (work.read_ops * costs.read_latency_s + work.read_bytes / costs.read_bandwidth
               + work.read_bytes * costs.hold_per_byte_s
               + work.edges * (costs.build_per_edge_s + costs.hold_per_edge_s))
    compute = (costs.compute_state_s + work.batches * costs.compute_batch_s + work.examples * costs.compute_example_s
               + work.sampled * costs.compute_edge_s)
    flush = work.flush_bytes / costs.write_bandwidth if work.flush_bytes else 0.0
    return StateSeconds(prepare, compute, float(flush))


def simulate_epochs(passes: Sequence[StateSeconds], prefetch: bool, carry: bool, epoch_overhead_s: float = 0.0,
                    pass_gap_s: float = 0.0) -> np.ndarray:
    """Epoch seconds of consecutive training passes (the recurrence of the module docstring).

    Args:
        passes: per pass, its states' seconds.
        prefetch: the next state is prepared while the current one computes.
        carry: with prefetch, the first state of the next pass is prepared while the last state of this one
            computes (partitions stay resident between passes).
        epoch_overhead_s: seconds of every epoch outside its states.
        pass_gap_s: seconds between a pass's end (last compute and flush) and the next pass's first wait.
    """
    times = np.zeros(len(passes))
    wait = 0.0
    last_ready: float | None = None
    for e, costs in enumerate(passes):
        P, C = costs.prepare.tolist(), costs.compute.tolist()
        if not P:
            times[e] = costs.flush + epoch_overhead_s
            continue
        if prefetch and carry and last_ready is not None:
            ready = max(wait, last_ready + P[0])
        else:
            ready = wait + P[0]
        for k in range(1, len(P)):
            ready = max(ready + C[k - 1], ready + P[k]) if prefetch else ready + C[k - 1] + P[k]
        last_ready = ready
        end = ready + C[-1] + costs.flush
        times[e] = end - wait + epoch_overhead_s
        wait = end + pass_gap_s
    return times


def simulate_epochs_simpy(passes: Sequence[StateSeconds], prefetch: bool, carry: bool,
                          epoch_overhead_s: float = 0.0, pass_gap_s: float = 0.0) -> np.ndarray:
    """:func:`simulate_epochs` as a SimPy discrete-event simulation: a compute process and a single prefetch
    thread (a SimPy resource) that prepares states when asked (a cross-check; slower)."""
    import simpy

    env = simpy.Environment()
    reader = simpy.Resource(env, capacity=1)
    times = np.zeros(len(passes))

    def prepare(seconds: float, done: simpy.Event):
        with reader.request() as request:
            yield request
            yield env.timeout(seconds)
        done.succeed()

    def compute():
        carried: simpy.Event | None = None
        for e, costs in enumerate(passes):
            wait = env.now
            P, C = costs.prepare.tolist(), costs.compute.tolist()
            ready_event = carried
            carried = None
            for k in range(len(P)):
                if ready_event is None:  # prepared on entering, in this thread
                    yield env.timeout(P[k])
                else:
                    yield ready_event
                ready_event = None
                if prefetch and k + 1 < len(P):
                    ready_event = env.event()
                    env.process(prepare(P[k + 1], ready_event))
                elif prefetch and carry and k + 1 == len(P) and e + 1 < len(passes) and len(passes[e + 1].prepare):
                    carried = env.event()
                    env.process(prepare(float(passes[e + 1].prepare[0]), carried))
                yield env.timeout(C[k])
            yield env.timeout(costs.flush)
            times[e] = env.now - wait + epoch_overhead_s
            yield env.timeout(pass_gap_s)

    env.run(until=env.process(compute()))
    return times


@dataclass(frozen=True)
class EpochPrediction:
    """Predicted epoch seconds of a run, and what the simulation cost."""

    epoch_time_s: np.ndarray
    states: int
    simulation_s: float
    serial_s: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def states_per_s(self) -> float:
        """Simulated states per second of simulation."""
        return self.states / self.simulation_s if self.simulation_s > 0 else math.inf


def predict(work: Sequence[PassWork], costs: DiskCosts, prefetch: bool, keeps_resident: bool) -> EpochPrediction:
    """Predicted epoch seconds of a run whose training passes do ``work``, on ``costs``."""
    started = time.perf_counter()
    seconds = [state_seconds(w, costs) for w in work]
    if seconds and len(seconds[0].compute):
        first = seconds[0]
        seconds[0] = StateSeconds(first.prepare + np.eye(1, len(first.prepare))[0] * costs.warmup_prepare_s,
                                  first.compute + np.eye(1, len(first.compute))[0] * costs.warmup_compute_s,
                                  first.flush)
    times = simulate_epochs(seconds, prefetch, keeps_resident, costs.epoch_overhead_s, costs.pass_gap_s)
    serial = simulate_epochs(seconds, False, False, costs.epoch_overhead_s, costs.pass_gap_s)
    return EpochPrediction(times, sum(w.num_states for w in work), time.perf_counter() - started, serial)


# ---------------------------------------------------------------------------------------------- calibration
def _nonnegative_fit(features: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients (scipy's NNLS), columns scaled for conditioning."""
    from scipy.optimize import nnls

    scale = np.abs(features).max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(features / scale, target)
    return coef / scale


def _train_states(states: Iterable[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    by_epoch: dict[int, list[Mapping[str, Any]]] = {}
    for record in states:
        if record.get("pass") == "train":
            by_epoch.setdefault(int(record["epoch"]), []).append(record)
    for records in by_epoch.values():
        records.sort(key=lambda r: r["state"])
    return dict(sorted(by_epoch.items()))


def measured_prepare_s(states: Sequence[Mapping[str, Any]], previous: Mapping[str, Any] | None,
                       prefetch: bool) -> np.ndarray:
    """Seconds each state's prepare took, from its ``state`` records: from its submission (the previous state
    entered, with prefetch, also across passes via ``previous``) to the end of its CSR build; a state prepared on
    entering: its wait."""
    out = np.zeros(len(states))
    for k, record in enumerate(states):
        before = states[k - 1] if k else previous
        if prefetch and record.get("build_ahead") and before is not None:
            out[k] = record["build_end"] - before["wait_end"]
        else:
            out[k] = record["wait_end"] - record["wait_start"]
    return out


def read_seconds(reads: Sequence[Mapping[str, Any]]) -> float:
    """Wall-clock seconds during which at least one of a state's read events (``start``, ``end``) was in flight:
    the sum of their durations when they follow one another, less when the system reads them concurrently
    (``read_threads``)."""
    total, end = 0.0, -math.inf
    for start, stop in sorted((float(read["start"]), float(read["end"])) for read in reads):
        total += max(0.0, stop - max(start, end))
        end = max(end, stop)
    return total


def calibrate(states: Iterable[Mapping[str, Any]], epochs: Iterable[Mapping[str, Any]], work: Sequence[PassWork],
              prefetch: bool, warm_from: int = 1, compute_threads: float = 1.0) -> DiskCosts:
    """Fit :class:`DiskCosts` on a recorded run: its ``state`` and ``epoch`` records (dicts as in
    ``records.jsonl``) and the work of its passes (:func:`plan_work` of its plans, in epoch order).

    The read bandwidth and latency come from every state's read events (the wall-clock time some read was in
    flight, :func:`read_seconds`, = reads * latency + bytes / bandwidth, non-negative least squares): the state's
    reads as the prediction prices them, whether the system issued them one after another or concurrently (its
    ``read_threads`` read a state's runs at once, and then the sum of the events' durations exceeds the time the
    state spent reading); the CSR build per edge from the build intervals; what remains of every prepare (measured by
    :func:`measured_prepare_s`) from a non-negative fit on in-buffer edges and bytes read (no constant: what a
    state's preparation does beyond its reads, re-assembling the held buckets and building the CSR, is linear in
    its edges, and checksums in its bytes; a constant would not be identified apart from the edges, which vary little
    within one run); the compute from a
    non-negative fit of the compute intervals on batches, examples and a constant; the write bandwidth from the
    flushes; the epoch overhead and the gap between passes as means. Epochs before ``warm_from`` (the first fills
    the buffer and warms up) are left out of every fit except the read events; what the run's first state took
    beyond the fitted costs is its warm-up (compilation, first allocations), which the simulation adds to the first
    state of the runs it predicts (it matters to the epoch after: with prefetch its first state is prepared while
    the first epoch's last state computes).

    A run of one state per epoch with the same examples every epoch does not tell the per-state, per-batch and
    per-example compute apart (:func:`compute_rank` below 3); :func:`calibrate_pooled` fits on several runs at once.

    Raises:
        DataError: no warm training states, or the records and the work disagree on the states.
    """
    return calibrate_pooled([(states, epochs, work)], prefetch, warm_from, compute_threads)


def _uses_edges(works: Sequence[Sequence[PassWork]]) -> bool:
    """The compute is fitted on sampled edges (estimated for every pass) rather than on examples."""
    return bool(works) and all(w.sampled_edges is not None for work in works for w in work)


def _compute_features(work: PassWork, edges: bool) -> np.ndarray:
    """The compute fit's features of a pass's states: a constant, batches, and sampled edges or examples (one of
    them: at a given buffer share the edges a state samples are proportional to its examples)."""
    return np.column_stack([np.ones(work.num_states), work.batches, work.sampled if edges else work.examples])


CalibrationRun = tuple[Iterable[Mapping[str, Any]], Iterable[Mapping[str, Any]], Sequence[PassWork]]
"""One recorded run for :func:`calibrate_pooled`: its ``state`` records, its ``epoch`` records, its passes' work."""


def compute_rank(works: Sequence[Sequence[PassWork]], warm_from: int = 1) -> int:
    """Rank of the compute fit's features (a constant, batches, examples or sampled edges; columns scaled as the fit
    scales them) on the warm passes (from ``warm_from`` on) of the runs whose work is ``works``: below 3, the runs do
    not tell per-state, per-batch and per-example compute apart (e.g. one state per epoch and the same examples
    every epoch) and the non-negative fit puts the compute on some of them."""
    edges = _uses_edges(works)
    rows = [_compute_features(w, edges) for work in works for w in work[warm_from:]]
    if not rows:
        return 0
    features = np.vstack(rows)
    scale = np.abs(features).max(axis=0)
    scale[scale == 0] = 1.0
    return int(np.linalg.matrix_rank(features / scale))


def calibrate_pooled(runs: Sequence[CalibrationRun], prefetch: bool | Sequence[bool],
                     warm_from: int = 1, compute_threads: float = 1.0) -> DiskCosts:
    """Fit one :class:`DiskCosts` on several recorded runs of the same system and model pooled (``runs``: per run its
    ``state`` records, ``epoch`` records and passes' work; ``prefetch``: of every run, or one per run): every fit of
    :func:`calibrate` on the observations of all runs together (the read events, the build intervals, what remains of
    the prepares, the compute intervals, the flushes), the epoch overhead and the gap between passes as means over
    all runs' warm epochs, the warm-up as the mean of the runs' first states' warm-ups. One run is
    :func:`calibrate`. Where every pass's work has sampled edges, the compute is fitted on them instead of the
    examples. ``compute_threads``: the threads the runs computed with (the costs carry it,
    :meth:`DiskCosts.with_compute_threads`). Runs that differ in how their compute splits into per-state, per-batch
    and per-example (or per-edge) compute (one state per epoch, several states of varying examples) identify the
    three together where neither alone does (:func:`compute_rank`); per-edge and per-batch compute apart from each
    other only where the runs sample at different buffer shares (at one share a state's edges are proportional to
    its examples).

    Raises:
        DataError: no run, a run without warm training states, fewer than two states with reads over all runs, or
            the records and the work of a run disagree on the states.
    """
    if not runs:
        raise DataError("calibration: no recorded run")
    prefetches = [bool(prefetch)] * len(runs) if isinstance(prefetch, bool) else [bool(p) for p in prefetch]
    if len(prefetches) != len(runs):
        raise DataError(f"calibration: {len(prefetches)} prefetch flags for {len(runs)} runs")
    recorded = []
    for index, (states, epochs, work) in enumerate(runs):
        by_epoch = _train_states(states)
        warm = [e for e in by_epoch if e >= warm_from and e < len(work)]
        if not warm:
            raise DataError(f"calibration: run {index}: no training states recorded from epoch {warm_from} on")
        for e in warm:
            if len(by_epoch[e]) != work[e].num_states:
                raise DataError(f"calibration: run {index}: epoch {e} recorded {len(by_epoch[e])} states, its plan "
                                f"has {work[e].num_states}")
        recorded.append((by_epoch, {int(r["epoch"]): r for r in epochs}, work, warm))
    reads = [(len(r["reads"]), sum(read["bytes"] for read in r["reads"]), read_seconds(r["reads"]))
             for by_epoch, _, _, _ in recorded for records in by_epoch.values() for r in records if r["reads"]]
    if len(reads) < 2:
        raise DataError("calibration: fewer than two states with read events recorded")
    count, nbytes, seconds = np.array(reads, dtype=np.float64).T
    latency, per_byte = _nonnegative_fit(np.column_stack([count, nbytes]), seconds)
    if per_byte <= 0:
        per_byte = seconds.sum() / max(nbytes.sum(), 1.0)
    build_s = sum(r["build_end"] - r["build_start"] for by_epoch, _, _, warm in recorded for e in warm
                  for r in by_epoch[e])
    build_edges = sum(float(work[e].edges.sum()) for _, _, work, warm in recorded for e in warm)
    build_per_edge = build_s / build_edges if build_edges else 0.0
    rest, features, compute, compute_features = [], [], [], []
    edges_fit = _uses_edges([work for _, _, work, _ in recorded])
    overheads, gaps, flush_s, flush_bytes = [], [], [], []
    for (by_epoch, epoch_rows, work, warm), run_prefetch in zip(recorded, prefetches):
        for e in warm:
            records, w = by_epoch[e], work[e]
            previous = by_epoch.get(e - 1, [None])[-1]
            prepared = measured_prepare_s(records, previous, run_prefetch)
            modeled = w.read_ops * latency + w.read_bytes * per_byte + w.edges * build_per_edge
            rest.extend(prepared - modeled)
            features.append(np.column_stack([w.edges, w.read_bytes]))
            compute.extend(r["compute_end"] - r["compute_start"] for r in records)
            compute_features.append(_compute_features(w, edges_fit))
            flush = float(epoch_rows.get(e, {}).get("flush_s", 0.0) or 0.0)
            span = records[-1]["compute_end"] - records[0]["wait_start"]
            if e in epoch_rows:
                overheads.append(epoch_rows[e]["epoch_time_s"] - span - flush)
            if w.flush_bytes and flush > 0:
                flush_s.append(flush)
                flush_bytes.append(w.flush_bytes)
            if e - 1 in by_epoch:
                before_flush = float(epoch_rows.get(e - 1, {}).get("flush_s", 0.0) or 0.0)
                gaps.append(records[0]["wait_start"] - by_epoch[e - 1][-1]["compute_end"] - before_flush)
    hold_per_edge, hold_per_byte = _nonnegative_fit(np.vstack(features), np.asarray(rest))
    state_s, batch_s, work_s = _nonnegative_fit(np.vstack(compute_features), np.asarray(compute))
    example_s, edge_s = (0.0, work_s) if edges_fit else (work_s, 0.0)
    warm_costs = DiskCosts(read_bandwidth=1.0 / per_byte, read_latency_s=float(latency),
                           build_per_edge_s=float(build_per_edge), hold_per_byte_s=float(hold_per_byte),
                           hold_per_edge_s=float(hold_per_edge), compute_state_s=float(state_s),
                           compute_batch_s=float(batch_s), compute_example_s=float(example_s),
                           compute_edge_s=float(edge_s))
    warmup_prepare, warmup_compute = [], []
    for by_epoch, _, work, _ in recorded:
        if 0 in by_epoch and len(by_epoch[0]) == work[0].num_states:
            first = by_epoch[0][0]
            modeled = state_seconds(work[0], warm_costs)
            warmup_prepare.append(max(0.0, (first["wait_end"] - first["wait_start"]) - float(modeled.prepare[0])))
            warmup_compute.append(max(0.0, (first["compute_end"] - first["compute_start"])
                                      - float(modeled.compute[0])))
    return DiskCosts(
        read_bandwidth=1.0 / per_byte, read_latency_s=float(latency), build_per_edge_s=float(build_per_edge),
        hold_per_byte_s=float(hold_per_byte), hold_per_edge_s=float(hold_per_edge), compute_state_s=float(state_s),
        compute_batch_s=float(batch_s), compute_example_s=float(example_s), compute_edge_s=float(edge_s),
        compute_threads=float(compute_threads),
        write_bandwidth=(sum(flush_bytes) / sum(flush_s)) if flush_s else math.inf,
        epoch_overhead_s=max(0.0, float(np.mean(overheads))) if overheads else 0.0,
        pass_gap_s=max(0.0, float(np.mean(gaps))) if gaps else 0.0,
        warmup_compute_s=float(np.mean(warmup_compute)) if warmup_compute else 0.0,
        warmup_prepare_s=float(np.mean(warmup_prepare)) if warmup_prepare else 0.0)


__all__ = ["COMPUTE_COSTS", "CalibrationRun", "DiskCosts", "EpochPrediction", "PassWork", "StateSampledEdges",
           "StateSeconds", "StoreSizes", "calibrate", "calibrate_pooled", "compute_rank", "load_factor",
           "measured_prepare_s", "plan_work", "predict", "read_seconds", "simulate_epochs", "simulate_epochs_simpy",
           "state_seconds"]
