"""A staged pipeline of worker pools and bounded queues under a global staleness bound (threads).

The engine behind :mod:`systems.pipelined`, kept free of anything GNN-specific so that it can be tested on plain
functions and mirrored by the SimPy simulator (same stage names, same queues, same token rule):

- ``stages[0]`` admits batches: a worker takes a *staleness token* (at most ``staleness_bound`` batches are in
  flight), takes the next batch in planned order, calls ``on_admit(batch)`` and works on it;
- every later stage has a pool of ``workers`` threads reading from a ``queue.Queue(maxsize=queue_size)`` fed by
  the stage before;
- the last stage hands the batch to ``on_complete`` and returns its token.

Records, kept cheap (a tuple append per event): each stage stamps the batch (:class:`~systems.batch.StageStamp`),
and each queue's occupancy is sampled after every put and get.

Faults: the first exception in any worker (or a ``KeyboardInterrupt`` in the caller) sets a stop flag; every
blocking call waits at most ``poll_s`` before checking it, so all threads end within ``poll_s`` plus the longest
work item in progress; ``run`` then re-raises the original exception, its traceback intact and a note naming the
stage and worker. An epoch ends when the last batch completes, whatever the queue sizes and worker counts (no
end-of-stream sentinels to get stuck behind a full queue).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from suite.stage_trace import StageStamp, StageTraceStats
from systems.batch import Batch

StageWork = Callable[[Batch, int], None]
_WAKE = object()  # put into the queues at the end so that idle workers see the stop at once


@dataclass(frozen=True)
class Stage:
    """One stage of a pipeline.

    Attributes:
        name: the stage's name (``load``, ``transfer``, ``compute``, ``update``: the suite's stage names).
        work: ``work(batch, worker_index)``, fills in the batch in place.
        workers: threads of the stage.
        queue_size: capacity of the queue that feeds this stage (unused for the first stage, which admits).
        self_timed: the work stamps ``batch.stamps[name]`` itself (e.g. when a worker process did the work).
        in_order: take the batches in admission order (one worker only): a batch that arrives early waits in a
            reorder buffer. For the stage that applies updates this makes the staleness bound a guarantee: a
            batch's step comes after at most ``staleness_bound - 1`` others since its admission.
    """

    name: str
    work: StageWork
    workers: int = 1
    queue_size: int = 4
    self_timed: bool = False
    in_order: bool = False

    def __post_init__(self) -> None:
        if self.workers < 1 or self.queue_size < 1:
            raise ValueError(f"stage {self.name!r}: workers and queue_size must be >= 1")
        if self.in_order and self.workers != 1:
            raise ValueError(f"stage {self.name!r}: an in-order stage has exactly one worker")


@dataclass
class PipelineTrace(StageTraceStats):
    """What one run of a pipeline measured.

    Attributes:
        started / finished: ``perf_counter`` times around the run.
        batches: the batches in completion order.
        workers: threads per stage.
        queue_occupancy: per queue (named after the stage it feeds), ``(time, size)`` after every put and get.
    """

    started: float
    finished: float
    batches: list[Batch]
    workers: dict[str, int]
    queue_occupancy: dict[str, list[tuple[float, int]]] = field(default_factory=dict)

    @property
    def wall_s(self) -> float:
        """Seconds from start to the completion of the last batch."""
        return self.finished - self.started


@dataclass
class _RunState:
    batches: Sequence[Batch]
    tokens: threading.Semaphore
    queues: list[queue.Queue | None]
    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_index: int = 0
    positions: dict[int, int] = field(default_factory=dict)  # id(batch) -> admission position
    early: dict[int, dict[int, Batch]] = field(default_factory=lambda: defaultdict(dict))  # stage -> reorder buffer
    expected: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # stage -> next position
    completed: list[Batch] = field(default_factory=list)
    error: BaseException | None = None
    occupancy: dict[str, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))


class Pipeline:
    """Run batches through ``stages`` with at most ``staleness_bound`` batches in flight.

    Args:
        stages: the stages in order (at least one).
        staleness_bound: batches admitted but not yet completed, at most (>= 1; 1 runs batches one at a time).
        on_admit: called with each batch when it is admitted, in planned order, before any stage works on it.
        on_complete: called with each batch when the last stage finished it (in the last stage's thread).
        poll_s: how long a blocked thread waits before checking for a stop.
    """

    def __init__(self, stages: Sequence[Stage], staleness_bound: int, *,
                 on_admit: Callable[[Batch], None] | None = None,
                 on_complete: Callable[[Batch], None] | None = None, poll_s: float = 0.02):
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        if staleness_bound < 1:
            raise ValueError(f"staleness_bound must be >= 1, got {staleness_bound}")
        names = [stage.name for stage in stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names must be unique, got {names}")
        self.stages = tuple(stages)
        self.staleness_bound = staleness_bound
        self.on_admit = on_admit
        self.on_complete = on_complete
        self.poll_s = poll_s

    def run(self, batches: Sequence[Batch]) -> PipelineTrace:
        """Run every batch through every stage; return the trace, or raise the first worker's exception."""
        state = _RunState(
            batches=batches, tokens=threading.Semaphore(self.staleness_bound),
            queues=[None] + [queue.Queue(maxsize=stage.queue_size) for stage in self.stages[1:]],
            positions={id(batch): position for position, batch in enumerate(batches)},
        )
        threads = [
            threading.Thread(target=self._worker, args=(state, position, index),
                             name=f"pipeline-{stage.name}-{index}", daemon=True)
            for position, stage in enumerate(self.stages) for index in range(stage.workers)
        ]
        started = time.perf_counter()
        if not batches:
            state.done.set()
        try:
            for thread in threads:
                thread.start()
            while not state.done.wait(self.poll_s):
                pass
        finally:  # also on KeyboardInterrupt (even while starting): stop the workers before leaving
            state.stop.set()
            self._wake(state)
            for thread in threads:
                if thread.is_alive():
                    thread.join()
        if state.error is not None:
            raise state.error
        finished = max((b.stamps[self.stages[-1].name].end for b in state.completed), default=started)
        return PipelineTrace(started=started, finished=finished, batches=state.completed,
                             workers={stage.name: stage.workers for stage in self.stages},
                             queue_occupancy=dict(state.occupancy))

    def _wake(self, state: _RunState) -> None:
        """Wake idle workers now rather than at their next poll: a wake-up item per waiting consumer, if room."""
        for position, source in enumerate(state.queues):
            for _ in range(self.stages[position].workers if source is not None else 0):
                try:
                    source.put_nowait(_WAKE)
                except queue.Full:
                    break

    # ------------------------------------------------------------------ workers
    def _worker(self, state: _RunState, position: int, index: int) -> None:
        stage = self.stages[position]
        try:
            while not state.stop.is_set():
                batch = self._admit(state) if position == 0 else self._take(state, position)
                if batch is None:
                    if position == 0 and state.next_index >= len(state.batches):
                        return  # everything admitted
                    continue
                started = time.perf_counter()
                stage.work(batch, index)
                if not stage.self_timed:
                    batch.stamps[stage.name] = StageStamp(started, time.perf_counter(), f"{stage.name}-{index}")
                self._hand_on(state, position, batch)
        except BaseException as err:  # noqa: BLE001  (re-raised by run() in the caller's thread)
            with state.lock:
                if state.error is None:
                    err.add_note(f"(in pipeline stage {stage.name!r}, worker {index})")
                    state.error = err
            state.stop.set()
            state.done.set()

    def _admit(self, state: _RunState) -> Batch | None:
        if not state.tokens.acquire(timeout=self.poll_s):
            return None
        with state.lock:
            if state.next_index >= len(state.batches):
                state.tokens.release()
                return None
            batch = state.batches[state.next_index]
            state.next_index += 1
            batch.admitted = time.perf_counter()
            if self.on_admit is not None:
                self.on_admit(batch)
        return batch

    def _take(self, state: _RunState, position: int) -> Batch | None:
        if not self.stages[position].in_order:
            return self._get(state, position)
        early, expected = state.early[position], state.expected[position]
        if expected not in early:
            batch = self._get(state, position)
            if batch is None:
                return None
            early[state.positions[id(batch)]] = batch
            if expected not in early:
                return None
        state.expected[position] = expected + 1
        return early.pop(expected)

    def _get(self, state: _RunState, position: int) -> Batch | None:
        source = state.queues[position]
        try:
            batch = source.get(timeout=self.poll_s)
        except queue.Empty:
            return None
        if batch is _WAKE:
            return None
        state.occupancy[self.stages[position].name].append((time.perf_counter(), source.qsize()))
        return batch

    def _hand_on(self, state: _RunState, position: int, batch: Batch) -> None:
        if position + 1 == len(self.stages):
            if self.on_complete is not None:
                self.on_complete(batch)
            with state.lock:
                state.completed.append(batch)
                if len(state.completed) == len(state.batches):
                    state.done.set()
            state.tokens.release()
            return
        target = state.queues[position + 1]
        while not state.stop.is_set():
            try:
                target.put(batch, timeout=self.poll_s)
            except queue.Full:
                continue
            state.occupancy[self.stages[position + 1].name].append((time.perf_counter(), target.qsize()))
            return


__all__ = ["Pipeline", "PipelineTrace", "Stage", "StageWork"]
