"""The contention microbenchmark: what co-running stages cost on this machine's CPU beyond sharing its cores.

The simulator's side (the factors, how they apply, their storage) is :mod:`simulators.contention_model`; this module
measures them, for the workload of a calibration run, and returns a :class:`~simulators.contention_model.Contention`.

How it is measured (:func:`measure_contention`): a microbenchmark of the calibration run's own kinds of work, on
a synthetic random graph with the dataset's mean degree and feature width (``max_nodes`` nodes at most), whose
batch takes as many roots as sample about as many input nodes as the calibration run's batches did:

- compute: the run's model (registered encoder, its dimensions) and optimizer, training steps (forward,
  cross-entropy, backward, step) on one fixed pre-sampled batch, in the main thread with torch's intra-op threads;
- load: the run's sampler (its fanouts) sampling one fixed set of roots with a fixed generator and gathering
  their features and labels (the same work every time), in ``k`` loader threads of this process, or in ``k``
  loader processes (a forked ``torch.utils.data.DataLoader``, one torch thread per worker, drained by a feeder
  thread of this process), as :mod:`systems.pipelined` runs its loaders.

Each kind is timed alone, then in every state that oversubscribes the cores: compute beside ``k = 1..K`` busy
loaders, and ``k`` busy loaders without compute for ``k`` over the cores. Compute's rate = time of a fixed number of
steps alone / the same steps in the state; load's rate = median load alone / median load in the state (loads
entirely inside the timed window). Factor = rate / max-min rate of that kind in that state; the table keeps the
median over ``repeats``. A second measured figure, :attr:`~simulators.contention_model.Contention.load_scale`: a
calibration run records its loads in a thread, but a loader *process* spends longer per batch (one torch thread,
then handing the batch over through shared memory); the scale is the time from one load's start to the next in
one busy loader process, alone, over the median load in a loader thread, alone. The machine may be shared: before
each measurement the benchmark waits for other processes to leave the cores idle, measures again if they did not
during it, and records their load for every attempt.

:func:`measure_for_run` measures for a recorded run (its spec, its dataset's shape and batches, from its records).
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulators.contention_model import COMPUTE, LOAD, LOADER_KINDS, Contention, ContentionTable, max_min_rates

METHOD = "experiments.measure.contention.measure_contention"
"""How the factors were obtained, as the provenance names it."""


@dataclass
class _Workload:
    """The benchmark's fixed work: a graph, features, a sampler, one batch's roots, a model and its optimizer."""

    sampler: Any
    features: Any
    labels: Any
    roots: Any
    model: Any
    optimizer: Any
    x: Any = None
    y: Any = None
    sample: Any = None
    seed: int = 0

    def load(self):
        """Sample the fixed roots with a fixed generator and gather features and labels (one load)."""
        import torch

        sample = self.sampler.sample(self.roots, torch.Generator().manual_seed(self.seed))
        return sample, self.features.index_select(0, sample.input_nodes), self.labels[self.roots]

    def share_memory(self) -> None:
        """Move the tensors a load may hand over as they are (roots, features, labels) into shared memory, before
        loader processes fork.

        A worker hands its loads to the parent through a queue whose feeder thread pickles them; pickling a tensor
        not yet in shared memory *moves* its storage there (copy, swap the data pointer, free the old memory). The
        naive sampler's sample holds the caller's ``roots`` tensor itself, so without this the feeder thread freed
        the roots' memory while the worker's next load read it through a numpy view in a compiled kernel: a
        segmentation fault (an ``IndexError`` with the kernels' bounds checks). Tensors already shared are pickled
        as a handle, never moved. (The graph is not handed over, and samplers may keep numpy views of it.)
        """
        for tensor in (self.roots, self.features, self.labels):
            if not tensor.is_shared():
                tensor.share_memory_()

    def steps(self, count: int) -> None:
        """``count`` training steps on the fixed batch."""
        from torch.nn import functional as F

        for _ in range(count):
            loss = F.cross_entropy(self.model(self.x, self.sample), self.y)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            float(loss.detach())


def _workload(spec, num_nodes: int, num_edges: int, feature_dim: int, num_classes: int, max_nodes: int,
              seed: int, input_nodes: float | None = None) -> _Workload:
    import torch

    from suite.registry import MODELS, SAMPLERS
    from systems.sampling.sampler import SamplingGraph
    from systems.tasks.node_classification import make_optimizer

    generator = torch.Generator().manual_seed(seed)
    nodes = max(1, min(int(num_nodes), int(max_nodes)))
    degree = max(1, round(num_edges / max(num_nodes, 1)))
    indptr = torch.arange(0, nodes * degree + 1, degree, dtype=torch.int64)
    indices = torch.randint(nodes, (nodes * degree,), generator=generator, dtype=torch.int64)
    sampler = SAMPLERS.get(spec.sampler.name)(SamplingGraph(indptr, indices), spec.model.fanouts,
                                              replace=spec.sampler.replace)
    features = torch.randn(nodes, feature_dim, generator=generator)
    labels = torch.randint(num_classes, (nodes,), generator=generator)
    order = torch.randperm(nodes, generator=generator)
    roots = order[: spec.training.batch_size]
    for _ in range(4 if input_nodes else 0):  # as many roots as give the recorded batches' input nodes
        got = len(sampler.sample(roots, torch.Generator().manual_seed(seed)).input_nodes)
        if abs(got - input_nodes) <= 0.05 * input_nodes:
            break
        roots = order[: max(1, min(nodes, round(len(roots) * input_nodes / max(got, 1))))]
    torch.manual_seed(seed)
    model = MODELS.get(spec.model.encoder)(spec.model, feature_dim, num_classes)
    model.train()
    optimizer = make_optimizer(spec.training.optimizer, model.parameters(), spec.training.learning_rate,
                               spec.training.weight_decay)
    work = _Workload(sampler, features, labels, roots, model, optimizer, seed=seed)
    work.sample, work.x, work.y = work.load()
    return work


class _LoadAgain:
    """A map-style dataset whose every item is the same load, stamped by the worker that ran it."""

    def __init__(self, work: _Workload):
        self.work = work

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, index: int):
        started = time.perf_counter()
        sample, x, y = self.work.load()
        return started, time.perf_counter(), sample, x, y


def _first(item):
    return item


class _Loaders:
    """``count`` busy loaders (threads, or processes drained by a feeder thread), each load stamped."""

    def __init__(self, work: _Workload, kind: str, count: int):
        self.work, self.kind, self.count = work, kind, count
        self.stop = threading.Event()
        self.stamps: list[tuple[float, float]] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._iterator = None

    def __enter__(self) -> "_Loaders":
        if self.count == 0:
            return self
        if self.kind == "thread":
            self._threads = [threading.Thread(target=self._thread_loop, daemon=True) for _ in range(self.count)]
        else:
            import torch

            self.work.share_memory()  # before the fork: see _Workload.share_memory
            loader = torch.utils.data.DataLoader(_LoadAgain(self.work), batch_size=None, collate_fn=_first,
                                                 num_workers=self.count, prefetch_factor=2,
                                                 multiprocessing_context="fork")
            self._iterator = iter(loader)  # the workers fork here, from this (the main) thread
            self._threads = [threading.Thread(target=self._feeder_loop, daemon=True)]
        for thread in self._threads:
            thread.start()
        deadline = time.perf_counter() + 60.0
        while len(self.stamps) < self.count and self.error is None and time.perf_counter() < deadline:
            time.sleep(0.005)  # every loader has loaded once
        self.check()
        if len(self.stamps) < self.count:
            self.__exit__(None, None, None)
            raise RuntimeError(f"{self.count} {self.kind} loader(s) did not load within 60 s")
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join()
        shutdown = getattr(self._iterator, "_shutdown_workers", None)  # torch's own clean shutdown
        if shutdown is not None:
            shutdown()
        self._iterator = None

    def check(self) -> None:
        """Raise if a loader failed (e.g. a worker process died): the state must be measured again."""
        if self.error is not None:
            raise RuntimeError(f"a {self.kind} loader failed: {self.error!r}") from self.error

    def _thread_loop(self) -> None:
        try:
            while not self.stop.is_set():
                started = time.perf_counter()
                self.work.load()
                ended = time.perf_counter()
                with self._lock:
                    self.stamps.append((started, ended))
        except BaseException as error:  # noqa: BLE001 - reported by check()
            self.error = error

    def _feeder_loop(self) -> None:
        try:
            for started, ended, *_ in self._iterator:
                with self._lock:
                    self.stamps.append((started, ended))
                if self.stop.is_set():
                    break
        except BaseException as error:  # noqa: BLE001 - reported by check()
            self.error = error

    def inside(self, start: float, end: float) -> list[float]:
        """Durations of the loads that ran entirely within ``[start, end]``."""
        with self._lock:
            return [e - s for s, e in self.stamps if s >= start and e <= end]

    def cycles_inside(self, start: float, end: float) -> list[float]:
        """With one loader: the times from the start of one load to the start of the next, for loads entirely
        within ``[start, end]`` (a load plus what the loader does before the next: for a process, handing the
        batch over)."""
        with self._lock:
            starts = sorted(s for s, e in self.stamps if s >= start and e <= end)
        return [b - a for a, b in zip(starts, starts[1:])] if self.count == 1 else []


def _busy_cpu_s() -> tuple[float, float]:
    """CPU seconds spent so far by the whole machine (all cores, from ``/proc/stat``) and by this process and its
    children (live ones too): their difference over a span is what other processes took."""
    import psutil

    machine = math.nan
    try:
        with open("/proc/stat") as stat:
            fields = [float(v) for v in stat.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
        machine = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    own = os.times()
    total = own.user + own.system + own.children_user + own.children_system
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return machine, total


def _other_cores(before: tuple[float, float], after: tuple[float, float], span_s: float) -> float:
    """Mean cores other processes kept busy between two :func:`_busy_cpu_s` (NaN where unknown)."""
    return max(0.0, ((after[0] - before[0]) - (after[1] - before[1])) / span_s) if span_s > 0 else math.nan


QUIET_PROBE_S = 0.5
"""How long a probe of the machine's background load lasts at most (see :func:`_quiet`); never longer than the
window the measurement itself takes (a 0.3 s window is not worth a 0.5 s probe: quick mode measures 26 of them)."""


def _quiet(max_other_cores: float, wait_s: float, probe_s: float = QUIET_PROBE_S) -> float:
    """Wait (at most ``wait_s``) until other processes keep fewer than ``max_other_cores`` cores busy over a
    ``probe_s`` probe; return the last probe's value."""
    deadline = time.perf_counter() + wait_s
    while True:
        before = _busy_cpu_s()
        time.sleep(probe_s)
        other = _other_cores(before, _busy_cpu_s(), probe_s)
        if not other > max_other_cores or time.perf_counter() >= deadline:  # NaN (unknown): do not wait
            return other


def _state(work: _Workload, kind: str, loaders: int, compute_steps: int, window_s: float,
           min_loads: int = 3) -> dict[str, Any]:
    """Run one state: ``loaders`` busy loaders and, if ``compute_steps``, that many training steps (else a
    window of at least ``window_s`` seconds that holds ``min_loads`` whole loads, or 30 times as long at most);
    return the window and the loads inside it."""
    with _Loaders(work, kind, loaders) as running:
        started, busy = time.perf_counter(), _busy_cpu_s()
        if compute_steps:
            work.steps(compute_steps)
        else:
            while True:
                time.sleep(0.02)
                now = time.perf_counter()
                if now - started >= window_s and len(running.inside(started, now)) >= min_loads or \
                        now - started >= 30 * window_s:
                    break
        ended = time.perf_counter()
        other = _other_cores(busy, _busy_cpu_s(), ended - started)
        running.check()
        loads, cycles = running.inside(started, ended), running.cycles_inside(started, ended)
    return {"window_s": ended - started, "loads_s": loads, "cycles_s": cycles, "other_cores": other}


def _compute_alone(work: _Workload, steps: int) -> dict[str, Any]:
    started, busy = time.perf_counter(), _busy_cpu_s()
    work.steps(steps)
    ended = time.perf_counter()
    return {"window_s": ended - started, "other_cores": _other_cores(busy, _busy_cpu_s(), ended - started)}


def _steady(measure, max_other_cores: float, attempts: int, wait_s: float,
            probe_s: float = QUIET_PROBE_S) -> dict[str, Any]:
    """``measure()`` after waiting (probes of ``probe_s``) for the machine to be quiet, again (up to ``attempts``
    times in all) while other processes kept more than ``max_other_cores`` cores busy during it; the quietest
    attempt, with the background of every attempt."""
    tried, failures = [], []
    for _ in range(attempts + 2):  # a failed attempt (a loader died) does not count, twice at most
        if len(tried) >= attempts:
            break
        _quiet(max_other_cores, wait_s, probe_s)
        try:
            tried.append(measure())
        except RuntimeError as error:
            failures.append(repr(error))
            continue
        if not tried[-1]["other_cores"] > max_other_cores:
            break
    if not tried:
        raise RuntimeError(f"contention: every attempt failed: {failures}")
    best = min(tried, key=lambda r: r["other_cores"] if math.isfinite(r["other_cores"]) else 0.0)
    return {**best, "attempts_other_cores": [r["other_cores"] for r in tried], "failed_attempts": failures}


def _steps_per_window(work: _Workload, window_s: float) -> int:
    """Training steps that take about ``window_s`` (at least two), after one warm-up step."""
    work.steps(1)  # warm up (allocator, lazy initialisation)
    timed = time.perf_counter()
    work.steps(1)
    return max(2, math.ceil(window_s / max(time.perf_counter() - timed, 1e-6)))


@dataclass(frozen=True)
class _Plan:
    """What one measurement runs: the oversubscribed states, the cores, the compute steps, the quiet rules."""

    states: tuple[tuple[bool, int], ...]
    cores: float
    compute_cores: float
    steps: int
    window_s: float
    max_other_cores: float
    attempts: int
    quiet_wait_s: float

    def steady(self, measure) -> dict[str, Any]:
        """``measure()`` on a quiet machine (see :func:`_steady`)."""
        return _steady(measure, self.max_other_cores, self.attempts, self.quiet_wait_s,
                       min(QUIET_PROBE_S, self.window_s))


def _measure_state(work: _Workload, plan: _Plan, kind: str, state: tuple[bool, int], compute_alone: float,
                   load_alone: float) -> dict[str, Any]:
    """One oversubscribed state: its raw measurement, the max-min rates, and the factors per stage kind."""
    compute, k = state
    measured = plan.steady(lambda: _state(work, kind, k, plan.steps if compute else 0, plan.window_s))
    rates = max_min_rates([1.0] * k + ([plan.compute_cores] if compute else []), plan.cores)
    row: dict[str, float] = {}
    if measured["loads_s"]:
        row[LOAD] = (load_alone / statistics.median(measured["loads_s"])) / rates[0]
    if compute:
        row[COMPUTE] = (compute_alone / measured["window_s"]) / rates[-1]
    return {"compute_running": compute, "loaders_running": k, **measured,
            "max_min_rates": {COMPUTE: rates[-1] if compute else None, LOAD: rates[0]}, "factors": row}


def _measure_repeat(work: _Workload, plan: _Plan, loader_kinds: Sequence[str]) -> dict[str, Any]:
    """One repeat: compute alone, then per loader kind a load alone and every state; the raw record."""
    alone_compute = plan.steady(lambda: _compute_alone(work, plan.steps))
    record: dict[str, Any] = {"compute_steps": plan.steps, "compute_alone": alone_compute, "kinds": {}}
    for kind in loader_kinds:
        alone_load = plan.steady(lambda: _state(work, kind, 1, 0, plan.window_s))
        load_alone = statistics.median(alone_load["loads_s"])
        rows = [_measure_state(work, plan, kind, state, alone_compute["window_s"], load_alone)
                for state in plan.states]
        record["kinds"][kind] = {"load_alone": alone_load, "states": rows}
    return record


def _tables(repeats: list[dict[str, Any]], loader_kinds: Sequence[str]) -> dict[str, ContentionTable]:
    """Per loader kind, the median factor over the repeats of every state and stage kind."""
    tables = {}
    for kind in loader_kinds:
        samples: dict[tuple[bool, int], dict[str, list[float]]] = {}
        for record in repeats:
            for row in record["kinds"][kind]["states"]:
                by_stage = samples.setdefault((row["compute_running"], row["loaders_running"]), {COMPUTE: [], LOAD: []})
                for stage, value in row["factors"].items():
                    by_stage[stage].append(value)
        tables[kind] = ContentionTable({state: {stage: statistics.median(values)
                                                for stage, values in by_stage.items() if values}
                                        for state, by_stage in samples.items()}, loader_kind=kind)
    return tables


def _load_scales(repeats: list[dict[str, Any]], loader_kinds: Sequence[str]) -> dict[str, float]:
    """Per loader kind, the median over the repeats of its time per batch alone over a thread's load alone."""
    scales: dict[str, list[float]] = {kind: [] for kind in loader_kinds}
    for record in repeats:
        kinds = record["kinds"]
        if "thread" not in kinds:
            continue
        thread_load = statistics.median(kinds["thread"]["load_alone"]["loads_s"])
        for kind in loader_kinds:
            cycles = kinds[kind]["load_alone"]["cycles_s"]
            if kind != "thread" and cycles:
                scales[kind].append(statistics.median(cycles) / thread_load)
    load_scale = {kind: statistics.median(values) for kind, values in scales.items() if values}
    if "thread" in loader_kinds:
        load_scale["thread"] = 1.0
    return load_scale


def _workload_provenance(spec, work: _Workload, num_nodes: int, num_edges: int, feature_dim: int,
                         num_classes: int, input_nodes: float | None, seed: int) -> dict[str, Any]:
    """The benchmark's workload, as the provenance records it."""
    return {"sampler": spec.sampler.name, "fanouts": list(spec.model.fanouts),
            "encoder": spec.model.encoder, "hidden_dim": spec.model.hidden_dim,
            "num_layers": spec.model.num_layers, "batch_size": spec.training.batch_size,
            "optimizer": spec.training.optimizer, "feature_dim": feature_dim, "num_classes": num_classes,
            "graph_nodes": len(work.features), "mean_degree": max(1, round(num_edges / max(num_nodes, 1))),
            "roots": len(work.roots), "input_nodes": len(work.sample.input_nodes),
            "target_input_nodes": input_nodes, "sampled_edges": work.sample.num_sampled_edges, "seed": seed}


def measure_contention(spec, *, num_nodes: int, num_edges: int, feature_dim: int, num_classes: int = 40,
                       input_nodes: float | None = None, max_loaders: int = 4,
                       loader_kinds: Sequence[str] = LOADER_KINDS, cores: float | None = None,
                       threads: int | None = None, window_s: float = 1.0, repeats: int = 2,
                       max_other_cores: float = 0.25, attempts: int = 3, quiet_wait_s: float = 20.0,
                       max_nodes: int = 1_000_000, seed: int = 0) -> Contention:
    """Measure the slowdown factors on this machine for the workload of ``spec`` (see the module docstring).

    Args:
        spec: the calibration run's spec (sampler, model, batch size, optimizer).
        num_nodes / num_edges / feature_dim / num_classes: the shape of its dataset (synthetic graph of the same
            mean degree and feature width, at most ``max_nodes`` nodes).
        input_nodes: the recorded batches' mean input nodes: the benchmark's batch takes as many roots as sample
            about as many (default: ``batch_size`` roots).
        max_loaders: measure states with up to this many busy loaders.
        loader_kinds: ``thread`` and/or ``process``.
        cores: the machine's cores (default: ``os.cpu_count()``).
        threads: torch intra-op threads of the compute (default: torch's current setting); restored afterwards.
        window_s: about how long each state runs (at least two training steps).
        repeats: times every state is measured (each repeat times compute and load alone again); the factors
            are the medians over the repeats.
        max_other_cores / attempts / quiet_wait_s: the machine may be shared. Before each measurement, wait (up
            to ``quiet_wait_s``) until other processes keep fewer than ``max_other_cores`` cores busy; measure
            again (``attempts`` in all) if they kept more busy during it, and keep the quietest attempt. Every
            attempt's background load is in the provenance.

    Returns:
        The :class:`~simulators.contention_model.Contention` with one table per loader kind and the raw measurements in
        its provenance.
    """
    import warnings

    import torch

    from suite.provenance import machine_info

    cores = float(cores or os.cpu_count() or 1)
    previous_threads = torch.get_num_threads()
    threads = int(threads or previous_threads)
    compute_cores = float(min(threads, cores))
    load_before, began, busy_before = os.getloadavg(), time.perf_counter(), _busy_cpu_s()
    states = tuple((compute, k) for compute in (True, False) for k in range(1, max_loaders + 1)
                   if k + (compute_cores if compute else 0.0) > cores)  # only oversubscribed states: else neutral
    torch.set_num_threads(threads)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*DataLoader will create.*")
            work = _workload(spec, num_nodes, num_edges, feature_dim, num_classes, max_nodes, seed, input_nodes)
            plan = _Plan(states, cores, compute_cores, _steps_per_window(work, window_s), window_s,
                         max_other_cores, attempts, quiet_wait_s)
            raw = {"repeats": [_measure_repeat(work, plan, loader_kinds) for _ in range(repeats)]}
    finally:
        torch.set_num_threads(previous_threads)
    elapsed = time.perf_counter() - began
    provenance = {
        "method": METHOD,
        "measured_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(), "torch_threads": threads,
        "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
        "duration_s": elapsed,
        # mean cores other processes kept busy meanwhile (noise)
        "other_processes_cores": _other_cores(busy_before, _busy_cpu_s(), elapsed),
        "quiet": {"max_other_cores": max_other_cores, "attempts": attempts, "wait_s": quiet_wait_s},
        "workload": _workload_provenance(spec, work, num_nodes, num_edges, feature_dim, num_classes, input_nodes,
                                         seed),
        "raw": raw,
    }
    return Contention(tables=_tables(raw["repeats"], loader_kinds), cores=cores, compute_cores=compute_cores,
                      provenance=provenance, load_scale=_load_scales(raw["repeats"], loader_kinds))


def measure_for_run(run_dir: str | os.PathLike, **options) -> Contention:
    """:func:`measure_contention` for the workload of the recorded run ``run_dir``: its spec, and from its
    records its dataset's shape, its batches' mean input nodes and the machine's torch threads."""
    from simulators.calibrate import calibrate
    from suite.errors import DataError
    from suite.recorder import read_summary

    run_dir = Path(run_dir)
    summary = read_summary(run_dir) or {}
    info = summary.get("dataset_info") or {}
    if not {"num_nodes", "num_edges", "feature_dim"} <= set(info):
        raise DataError(f"{run_dir}: the summary has no dataset_info (nodes, edges, feature_dim) to mimic")
    calibration = calibrate(run_dir)
    machine = summary.get("machine") or {}
    options.setdefault("threads", machine.get("torch_threads"))
    options.setdefault("input_nodes", (sum(calibration.input_nodes) / len(calibration.input_nodes))
                       if any(calibration.input_nodes) else None)
    contention = measure_contention(calibration.spec, num_nodes=info["num_nodes"], num_edges=info["num_edges"],
                                    feature_dim=info["feature_dim"], **options)
    recorded = {k: machine.get(k) for k in ("cpu_model", "cpu_cores", "torch_threads")}
    here = {k: contention.provenance["machine"].get(k) for k in ("cpu_model", "cpu_cores")}
    here["torch_threads"] = contention.provenance["torch_threads"]
    provenance = {**contention.provenance, "calibration_run": str(run_dir), "calibration_machine": recorded,
                  "same_machine_kind": recorded == here}
    return Contention(tables=contention.tables, cores=contention.cores, compute_cores=contention.compute_cores,
                      load_scale=contention.load_scale, provenance=provenance)


__all__ = ["METHOD", "measure_contention", "measure_for_run"]
