"""The SimPy pipeline simulator: closed forms, a trace checked by hand, processor sharing, bounds, calibration."""

from __future__ import annotations

import math

import pytest
import simpy

from simulators.calibrate import (HARDWARE, calibrate, calibration_batches, compute_cores, graphsage_flops,
                                  handoff_gaps, model_for, summary_of)
from simulators.pipeline_model import (Empirical, Fixed, LogNormal, PipelineModel, SharedCpu, StageModel,
                                 closed_form_epoch_time, simulate)
from systems.pipelined import PipelineOptions

UNBOUNDED = 10**9


@pytest.mark.parametrize("times", [(0.2, 0.05, 0.5), (1.0, 1.0, 1.0), (0.5, 2.0, 0.1)])
@pytest.mark.parametrize("batches", [1, 2, 17])
def test_fixed_times_and_unbounded_queues_match_the_closed_form(times, batches):
    names = ("load", "transfer", "compute")
    stages = tuple(StageModel(n, Fixed(t), queue_size=UNBOUNDED) for n, t in zip(names, times))
    trace = simulate(PipelineModel(stages=stages, staleness_bound=UNBOUNDED), batches)
    assert trace.wall_s == pytest.approx(closed_form_epoch_time(times, batches), abs=1e-9)


def test_a_tiny_trace_checked_by_hand():
    """load 1 s, compute 2 s, bound 2, queue 1, three batches (worked out in the comments)."""
    stages = (StageModel("load", Fixed(1.0)), StageModel("compute", Fixed(2.0), queue_size=1))
    trace = simulate(PipelineModel(stages=stages, staleness_bound=2), 3)
    by_index = {b.index: b for b in trace.batches}
    # b0: admitted 0, loads 0-1, computes 1-3. b1: admitted 1 (second token), loads 1-2, waits, computes 3-5.
    # b2: no token until b0 completes at 3; admitted 3 (version 1), loads 3-4, computes 5-7.
    expected = {0: (0, (0, 1), (1, 3), 0, 0), 1: (1, (1, 2), (3, 5), 0, 1), 2: (3, (3, 4), (5, 7), 1, 2)}
    for index, (admitted, load, compute, read, applied) in expected.items():
        batch = by_index[index]
        assert batch.admitted == admitted
        assert (batch.stamps["load"].start, batch.stamps["load"].end) == load
        assert (batch.stamps["compute"].start, batch.stamps["compute"].end) == compute
        assert (batch.version_read, batch.version_applied) == (read, applied)
    assert trace.wall_s == 7.0
    assert trace.busy_s() == {"load": 3.0, "compute": 6.0}
    assert trace.bottleneck() == ("compute", 6.0) and trace.efficiency() == pytest.approx(7 / 6)
    assert max(size for _, size in trace.queue_occupancy["compute"]) == 1


def _finish_times(cores, jobs):
    env = simpy.Environment()
    cpu = SharedCpu(env, cores)
    finished = {}

    def job(name, start, work, demand):
        yield env.timeout(start)
        yield from cpu.execute(work, demand)
        finished[name] = env.now

    for name, start, work, demand in jobs:
        env.process(job(name, start, work, demand))
    env.run()
    return finished


def test_processor_sharing_by_hand():
    # Two one-core jobs of 1 s on one core share it: both end at 2 s.
    assert _finish_times(1, [("a", 0, 1.0, 1), ("b", 0, 1.0, 1)]) == {"a": 2.0, "b": 2.0}
    # A two-core compute job alone on two cores: 1 s; with a one-core loader beside it, each gets one core:
    # the compute runs at half speed until the loader ends at 1 s (0.5 s of its work left), then full speed.
    times = _finish_times(2, [("compute", 0, 1.0, 2), ("load", 0, 1.0, 1)])
    assert times["load"] == pytest.approx(1.0) and times["compute"] == pytest.approx(1.5)
    # Jobs off the CPU (demand 0) are not slowed down.
    assert _finish_times(1, [("gpu", 0, 1.0, 0), ("cpu", 0, 1.0, 1)]) == {"gpu": 1.0, "cpu": 1.0}


@pytest.mark.parametrize("bound", [1, 3, 8])
def test_staleness_is_bounded_and_in_order_compute_keeps_admission_order(bound):
    stages = (StageModel("load", LogNormal(0.3, 1.0), workers=4),
              StageModel("compute", Fixed(0.1), queue_size=2, in_order=True))
    trace = simulate(PipelineModel(stages=stages, staleness_bound=bound), 200, seed=3)
    assert sorted(b.index for b in trace.batches) == list(range(200))
    assert [b.index for b in trace.batches] == list(range(200))  # completion order = admission order
    assert max(b.staleness for b in trace.batches) <= bound - 1
    assert trace.efficiency() >= 1.0 - 1e-9


def test_same_seed_same_trace_and_cpu_contention_slows_the_epoch():
    stages = (StageModel("load", LogNormal(0.2, 0.5), workers=2),
              StageModel("compute", LogNormal(0.3, 0.2), cores=2, in_order=True))
    free = PipelineModel(stages=stages, staleness_bound=8)
    shared = PipelineModel(stages=stages, staleness_bound=8, cpu_cores=2)
    assert simulate(free, 50, seed=1).wall_s == simulate(free, 50, seed=1).wall_s
    assert simulate(shared, 50, seed=1).wall_s > simulate(free, 50, seed=1).wall_s


def test_invalid_models_are_rejected():
    with pytest.raises(ValueError, match="staleness_bound"):
        PipelineModel(stages=(StageModel("load", Fixed(1.0)),), staleness_bound=0)
    with pytest.raises(ValueError, match="in-order"):
        PipelineModel(stages=(StageModel("load", Fixed(1.0)), StageModel("c", Fixed(1.0), workers=2,
                                                                         in_order=True)), staleness_bound=1)
    with pytest.raises(ValueError, match="sample"):
        Empirical(())


@pytest.fixture
def recorded_sync_run(sync_pipelined_run):
    """The run folder of the shared sync pipelined run (tests/conftest.py)."""
    return sync_pipelined_run[1]


def test_calibration_drops_the_runs_warm_up_and_predicts_the_sync_run(recorded_sync_run):
    calibration = calibrate(recorded_sync_run)
    assert set(calibration.services) == {"load", "transfer", "compute"}
    assert calibration.num_batches == 8  # the warm epoch: 120 train nodes / 16
    # two epochs of 8 batches, less the run's first two (the warm-up)
    assert len(calibration.services["load"]) == len(calibration.handoffs["compute"]) == 14
    first = calibration_batches(recorded_sync_run)[0]
    assert (first["epoch"], first["index"]) == (0, 2)
    assert len(calibrate(recorded_sync_run, warmup_batches=0).services["load"]) == 16
    assert all(t >= 0 for samples in calibration.services.values() for t in samples)
    model = model_for(PipelineOptions(sync=True).effective(), calibration)
    assert [s.workers for s in model.stages] == [1, 1, 1] and model.staleness_bound == 1
    predicted = summary_of(simulate(model, calibration.num_batches, seed=0))
    assert predicted["staleness_max"] == 0 and 0 < predicted["compute_utilization"] <= 1


def test_what_if_on_a_gpu_prices_compute_from_flops(recorded_sync_run):
    calibration = calibrate(recorded_sync_run)
    model = model_for(PipelineOptions().effective(), calibration, HARDWARE["p3.2xlarge"], feature_dim=16)
    compute = model.stages[2]
    assert compute.cores == 0.0 and model.cpu_cores == 4
    flops = graphsage_flops(calibration.spec, calibration.sampled_edges[0], calibration.input_nodes[0], 16)
    assert compute.service.samples[0] == pytest.approx(flops / (15.7e12 * 0.2))
    assert math.isfinite(simulate(model, 20).wall_s)


def test_handoff_gaps_are_the_waits_of_a_batch_between_its_stages():
    batches = [{"admitted": 0.0, "load_start": 0.5, "load_end": 1.0, "compute_start": 1.25, "compute_end": 2.0},
               {"admitted": 1.0, "load_start": 1.0, "load_end": 1.5, "compute_start": 1.4999, "compute_end": 3.0}]
    gaps = handoff_gaps(batches, ("load", "compute"))
    assert gaps["load"] == (0.5, 0.0)
    assert gaps["compute"] == (0.25, 0.0)  # a stamp a hair early (another thread's clock) is clipped to 0


def test_a_handoff_delay_lengthens_every_stage_of_a_sync_pipeline_by_itself():
    """Sync (bound 1): each batch takes load + hand-off + compute; 3 batches of 1 + 0.1 + 2 s."""
    stages = (StageModel("load", Fixed(1.0)), StageModel("compute", Fixed(2.0), handoff=Fixed(0.1)))
    trace = simulate(PipelineModel(stages=stages, staleness_bound=1), 3)
    assert trace.wall_s == pytest.approx(3 * 3.1)
    assert trace.busy_s()["compute"] == pytest.approx(6.0)  # the hand-off is a wait, not busy time


def test_compute_wants_the_threads_its_budget_leaves(recorded_sync_run):
    import dataclasses

    calibration = dataclasses.replace(calibrate(recorded_sync_run), cpu_cores=8.0, compute_threads=6.0)
    assert compute_cores(PipelineOptions(batch_loader_threads=4).effective(), calibration) == 4.0  # 8 - 4 loaders
    assert compute_cores(PipelineOptions(sync=True).effective(), calibration) == 6.0  # 7 left, capped at 6
    model = model_for(PipelineOptions(batch_loader_threads=4).effective(), calibration)
    assert model.stages[2].cores == 4.0
