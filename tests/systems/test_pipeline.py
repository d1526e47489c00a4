"""The pipeline engine on plain functions: ordering, bounds, queues, end of epoch, faults and interrupts."""

from __future__ import annotations

import _thread
import gc
import signal
import threading
import time

import pytest
import torch

from systems.batch import Batch
from systems.stage_pipeline import Pipeline, Stage


def make_batches(count: int) -> list[Batch]:
    return [Batch(epoch=0, index=i, roots=torch.arange(i, i + 1)) for i in range(count)]


def sleeper(seconds: float, log: list | None = None, name: str = ""):
    def work(batch: Batch, worker: int) -> None:
        time.sleep(seconds)
        if log is not None:
            log.append((name, batch.index))
    return work


def in_flight_max(batches: list[Batch], last_stage: str) -> int:
    """The most batches ever admitted and not yet completed, from the stamps."""
    events = sorted([(b.admitted, 1) for b in batches] + [(b.stamps[last_stage].end, -1) for b in batches],
                    key=lambda event: (event[0], event[1]))
    level = peak = 0
    for _, change in events:
        level += change
        peak = max(peak, level)
    return peak


def pipeline_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pipeline-")]


def test_every_batch_passes_every_stage_in_order():
    stages = [Stage("load", sleeper(0.002), workers=3), Stage("transfer", sleeper(0.001), workers=2, queue_size=2),
              Stage("compute", sleeper(0.001), queue_size=2)]
    batches = make_batches(20)
    trace = Pipeline(stages, staleness_bound=4).run(batches)
    assert sorted(b.index for b in trace.batches) == list(range(20))
    for batch in trace.batches:
        load, transfer, compute = (batch.stamps[s] for s in ("load", "transfer", "compute"))
        assert batch.admitted <= load.start <= load.end <= transfer.start <= transfer.end <= compute.start
        assert load.worker.startswith("load-") and compute.worker == "compute-0"
    assert set(trace.busy_s()) == {"load", "transfer", "compute"}
    assert trace.efficiency() >= 1.0 - 1e-9


def test_batches_are_admitted_in_planned_order():
    admitted: list[int] = []
    Pipeline([Stage("load", sleeper(0.001), workers=4), Stage("compute", sleeper(0.0))], staleness_bound=3,
             on_admit=lambda b: admitted.append(b.index)).run(make_batches(15))
    assert admitted == list(range(15))


@pytest.mark.parametrize("bound", [1, 2, 5])
def test_staleness_bound_limits_batches_in_flight(bound):
    stages = [Stage("load", sleeper(0.003), workers=4), Stage("compute", sleeper(0.002), queue_size=4)]
    trace = Pipeline(stages, staleness_bound=bound).run(make_batches(12))
    assert in_flight_max(trace.batches, "compute") <= bound
    if bound == 1:  # strictly one batch at a time: each admitted after the previous one completed
        ordered = sorted(trace.batches, key=lambda b: b.index)
        assert all(a.stamps["compute"].end <= b.admitted for a, b in zip(ordered, ordered[1:]))


def test_queue_occupancy_never_exceeds_capacity():
    stages = [Stage("load", sleeper(0.0), workers=4), Stage("compute", sleeper(0.004), queue_size=2)]
    trace = Pipeline(stages, staleness_bound=16).run(make_batches(15))
    sizes = [size for _, size in trace.queue_occupancy["compute"]]
    assert sizes and max(sizes) <= 2
    assert max(sizes) == 2  # loading is instant, compute slow: the queue fills up


@pytest.mark.parametrize("count", [0, 1, 3])
def test_no_deadlock_at_the_end_of_an_epoch(count):
    """Queues of 1, a bound of 1 and many more workers than batches still finish, quickly."""
    stages = [Stage("load", sleeper(0.001), workers=8), Stage("transfer", sleeper(0.0), workers=8, queue_size=1),
              Stage("compute", sleeper(0.001), queue_size=1)]
    started = time.perf_counter()
    trace = Pipeline(stages, staleness_bound=1).run(make_batches(count))
    assert len(trace.batches) == count
    assert time.perf_counter() - started < 2.0
    assert not pipeline_threads()


def test_overlap_makes_the_epoch_as_long_as_the_busiest_stage():
    """Four loaders of 20 ms and a 10 ms compute: about 5 ms per batch, far below the serial 30 ms."""
    stages = [Stage("load", sleeper(0.020), workers=4), Stage("compute", sleeper(0.010), queue_size=4)]
    trace = Pipeline(stages, staleness_bound=16).run(make_batches(20))
    assert trace.wall_s < 0.6 * 20 * 0.030
    assert trace.bottleneck()[0] == "compute"


def test_a_worker_exception_stops_the_run_with_its_traceback():
    def explode(batch: Batch, worker: int) -> None:
        if batch.index == 3:
            raise ValueError("bad batch 3")

    stages = [Stage("load", sleeper(0.01), workers=2), Stage("transfer", explode, queue_size=1),
              Stage("compute", sleeper(0.05), queue_size=1)]
    started = time.perf_counter()
    with pytest.raises(ValueError, match="bad batch 3") as info:
        Pipeline(stages, staleness_bound=4).run(make_batches(1000))
    assert time.perf_counter() - started < 5.0
    assert info.traceback[-1].name == "explode"  # the original frame, not a re-wrapped error
    assert any("stage 'transfer'" in note for note in info.value.__notes__)
    assert not pipeline_threads()


def test_an_exception_in_the_admitting_stage_also_stops_the_run():
    def explode(batch: Batch, worker: int) -> None:
        raise RuntimeError("loader died")

    with pytest.raises(RuntimeError, match="loader died"):
        Pipeline([Stage("load", explode, workers=3), Stage("compute", sleeper(0.0))], 2).run(make_batches(50))
    assert not pipeline_threads()


@pytest.mark.timeout(120)
def test_ctrl_c_stops_cleanly():
    # Python's own SIGINT handler, whatever an earlier test's library left in this worker: interrupt_main does
    # nothing while SIGINT is ignored, and the run would go on for minutes
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    # A KeyboardInterrupt raised while the main thread runs a finalizer (a garbage collection of an earlier test's
    # objects, e.g. a DataLoader iterator's __del__) is printed and dropped by Python: collect first, then keep
    # the collector off while the interrupt is due, so the one interrupt reaches the pipeline's caller
    gc.collect()
    gc.disable()
    try:
        timer = threading.Timer(0.3, _thread.interrupt_main)
        timer.start()
        started = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):  # 2,000 batches take 40 s without the interrupt
            Pipeline([Stage("load", sleeper(0.02), workers=2), Stage("compute", sleeper(0.02))], 4).run(
                make_batches(2_000))
        assert time.perf_counter() - started < 5.0
        assert not pipeline_threads()
    finally:
        gc.enable()
        signal.signal(signal.SIGINT, previous)


def test_invalid_pipelines_are_rejected():
    with pytest.raises(ValueError, match="staleness_bound"):
        Pipeline([Stage("load", sleeper(0.0))], staleness_bound=0)
    with pytest.raises(ValueError, match="unique"):
        Pipeline([Stage("load", sleeper(0.0)), Stage("load", sleeper(0.0))], staleness_bound=1)
    with pytest.raises(ValueError, match="workers"):
        Stage("load", sleeper(0.0), workers=0)
    with pytest.raises(ValueError, match="in-order"):
        Stage("compute", sleeper(0.0), workers=2, in_order=True)


def test_an_in_order_stage_takes_batches_in_admission_order():
    """Loaders finish out of order (later batches are faster); the in-order compute still sees 0, 1, 2, ..."""
    def uneven(batch: Batch, worker: int) -> None:
        time.sleep(0.02 if batch.index % 3 == 0 else 0.001)

    seen: list[int] = []
    stages = [Stage("load", uneven, workers=4),
              Stage("compute", lambda b, w: seen.append(b.index), queue_size=2, in_order=True)]
    Pipeline(stages, staleness_bound=6).run(make_batches(30))
    assert seen == list(range(30))


def test_out_of_order_compute_lets_fast_batches_overtake():
    def uneven(batch: Batch, worker: int) -> None:
        time.sleep(0.03 if batch.index % 4 == 0 else 0.001)

    seen: list[int] = []
    stages = [Stage("load", uneven, workers=4), Stage("compute", lambda b, w: seen.append(b.index), queue_size=4)]
    Pipeline(stages, staleness_bound=8).run(make_batches(24))
    assert sorted(seen) == list(range(24)) and seen != list(range(24))
