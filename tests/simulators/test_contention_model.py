"""Contention beyond max-min sharing: the table, its use in SharedCpu (neutral unless oversubscribed), hand-checked
cases, storage and model_for. (The microbenchmark that measures it: tests/experiments/measure/test_contention.py.)"""

from __future__ import annotations

import json

import pytest
import simpy

from simulators.calibrate import HARDWARE, calibrate, model_for
from simulators.contention_model import Contention, ContentionTable, load_contention, max_min_rates
from simulators.pipeline_model import Fixed, PipelineModel, SharedCpu, StageModel, closed_form_epoch_time, simulate
from systems.pipelined import PipelineOptions

UNBOUNDED = 10**9
SLOW = ContentionTable({(True, 1): {"compute": 0.5, "load": 0.8}, (True, 2): {"compute": 0.25, "load": 0.5},
                        (False, 3): {"load": 0.9}})


def _finish_times(cores, jobs, contention=None):
    env = simpy.Environment()
    cpu = SharedCpu(env, cores, contention)
    finished = {}

    def job(name, start, work, demand, kind):
        yield env.timeout(start)
        yield from cpu.execute(work, demand, kind)
        finished[name] = env.now

    for name, start, work, demand, kind in jobs:
        env.process(job(name, start, work, demand, kind))
    env.run()
    return finished


def test_max_min_rates_by_hand():
    assert max_min_rates([1, 2], 2) == [1.0, 0.5]  # loader gets its core, compute the other of its two
    # 2 loaders + a 2-core compute on 2 cores: a third each; compute progresses at (2/3) / 2.
    assert max_min_rates([1, 1, 2], 2) == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    assert max_min_rates([1, 1], 4) == [1.0, 1.0]


def test_table_lookup():
    assert SLOW.factor("compute", {"compute": 1, "load": 1}) == 0.5
    assert SLOW.factor("load", {"compute": 1, "load": 2}) == 0.5
    assert SLOW.factor("load", {"compute": 1, "load": 7}) == 0.5  # more loaders than measured: the most measured
    assert SLOW.factor("load", {"load": 4}) == 0.9
    assert SLOW.factor("load", {"load": 2}) == 1.0  # no state measured at or below: none
    assert SLOW.factor("transfer", {"compute": 1, "load": 1}) == 1.0  # a kind the table does not know
    with pytest.raises(ValueError, match="positive"):
        ContentionTable({(True, 1): {"compute": 0.0}})


def test_neutral_without_oversubscription():
    # A 2-core compute alone on 2 cores, and a 1-core loader beside a 1-core job on 2 cores: no factor applies.
    assert _finish_times(2, [("c", 0, 1.0, 2, "compute")], SLOW) == {"c": 1.0}
    assert _finish_times(2, [("c", 0, 1.0, 1, "compute"), ("l", 0, 1.0, 1, "load")], SLOW) == {"c": 1.0, "l": 1.0}


def test_oversubscribed_rates_by_hand():
    # One core, compute (1 s of work) and load (0.5 s) from 0: max-min gives each 0.5; the table slows compute to
    # 0.5 x 0.5 = 0.25 and load to 0.5 x 0.8 = 0.4. Load ends at 0.5 / 0.4 = 1.25 s; compute has done 0.3125 s of
    # work by then and runs alone (rate 1) for the remaining 0.6875 s: it ends at 1.9375 s.
    times = _finish_times(1, [("c", 0, 1.0, 1, "compute"), ("l", 0, 0.5, 1, "load")], SLOW)
    assert times["l"] == pytest.approx(1.25) and times["c"] == pytest.approx(1.9375)
    # Without the table: plain processor sharing, both at 0.5 until load ends at 1 s, compute at 1.5 s.
    times = _finish_times(1, [("c", 0, 1.0, 1, "compute"), ("l", 0, 0.5, 1, "load")])
    assert times["l"] == pytest.approx(1.0) and times["c"] == pytest.approx(1.5)


def test_factors_above_one_are_capped_at_alone_speed():
    # Two cores, compute wants 2, a loader 1: max-min gives the loader 1.0 and compute 0.5; factors of 4 would
    # make them 4.0 and 2.0: capped at 1 (no job runs faster than alone). Both 1 s jobs end at 1 s.
    fast = ContentionTable({(True, 1): {"compute": 4.0, "load": 4.0}})
    assert _finish_times(2, [("c", 0, 1.0, 2, "compute"), ("l", 0, 1.0, 1, "load")], fast) == {"c": 1.0, "l": 1.0}


@pytest.mark.parametrize("times", [(0.2, 0.05, 0.5), (0.5, 2.0, 0.1)])
def test_closed_form_still_holds_with_a_table_and_enough_cores(times):
    names = ("load", "transfer", "compute")
    stages = tuple(StageModel(n, Fixed(t), queue_size=UNBOUNDED) for n, t in zip(names, times))
    model = PipelineModel(stages=stages, staleness_bound=UNBOUNDED, cpu_cores=8, contention=SLOW)
    assert simulate(model, 17).wall_s == pytest.approx(closed_form_epoch_time(times, 17), abs=1e-9)


def test_a_tiny_pipeline_with_contention_by_hand():
    """load 1 s and compute 2 s, one core each wanted, one core: one batch, then two."""
    stages = (StageModel("load", Fixed(1.0)), StageModel("compute", Fixed(2.0), queue_size=1))
    table = ContentionTable({(True, 1): {"compute": 0.5, "load": 0.5}})
    one = simulate(PipelineModel(stages=stages, staleness_bound=2, cpu_cores=1, contention=table), 1)
    assert one.wall_s == 3.0  # never two jobs at once: no sharing, no factor
    # Two batches: b0 loads 0-1 alone. From 1, b0 computes and b1 loads: max-min 0.5 each, x 0.5 = 0.25 each.
    # b1's load (1 s of work) ends at 1 + 4 = 5 s; b0's compute has done 1 s by then, runs alone 1 more: ends 6 s.
    # b1 computes 6-8 s.
    two = simulate(PipelineModel(stages=stages, staleness_bound=2, cpu_cores=1, contention=table), 2)
    by_index = {b.index: b for b in two.batches}
    assert by_index[1].stamps["load"].end == pytest.approx(5.0)
    assert by_index[0].stamps["compute"].end == pytest.approx(6.0)
    assert two.wall_s == pytest.approx(8.0)
    plain = simulate(PipelineModel(stages=stages, staleness_bound=2, cpu_cores=1), 2)
    assert plain.wall_s == pytest.approx(6.0)  # max-min only: load 1-3, compute b0 1-4, b1 4-6


def test_storage_round_trip():
    contention = Contention(tables={"thread": SLOW}, cores=2, compute_cores=2, provenance={"measured_at": "now"})
    again = Contention.from_dict(json.loads(json.dumps(contention.to_dict())))
    assert again.table("thread").factors == SLOW.factors and again.cores == 2 and again.load_scale == {}
    assert again.table("process") is None and "not fitted on predicted runs" in again.describe()


def test_model_for_picks_the_table_of_the_loader_kind_on_the_recorded_machine_only(sync_pipelined_run):
    _, run_dir = sync_pipelined_run
    process = ContentionTable({(True, 1): {"compute": 0.7}}, loader_kind="process")
    contention = Contention(tables={"thread": SLOW, "process": process}, cores=2, compute_cores=2,
                            load_scale={"thread": 1.0, "process": 2.5})
    calibration = calibrate(run_dir, contention=contention)
    threads = model_for(PipelineOptions().effective(), calibration)
    assert threads.contention is SLOW and threads.stages[0].service.scale == 1.0
    processes = model_for(PipelineOptions(loader_workers="process").effective(), calibration)
    assert processes.contention is process
    # A loader process's time per batch: the calibrated (thread) loads times the measured scale.
    assert processes.stages[0].service.mean() == pytest.approx(2.5 * threads.stages[0].service.mean())
    assert model_for(PipelineOptions().effective(), calibration, HARDWARE["p3.2xlarge"], feature_dim=16).contention \
        is None
    assert model_for(PipelineOptions().effective(), calibrate(run_dir)).contention is None


def test_a_stored_measurement_is_read_per_calibration_run(tmp_path):
    contention = Contention(tables={"thread": SLOW}, cores=2, compute_cores=2, provenance={"measured_at": "t"})
    alone = tmp_path / "one.json"
    alone.write_text(json.dumps(contention.to_dict()))
    assert load_contention(alone).table("thread").factors == SLOW.factors
    per_run = tmp_path / "runs.json"
    per_run.write_text(json.dumps({"tables": {"run-a": contention.to_dict(), "run-b": contention.to_dict()}}))
    assert load_contention(per_run, tmp_path / "run-b").cores == 2
    with pytest.raises(ValueError, match="no contention measurement for run-c"):
        load_contention(per_run, tmp_path / "run-c")
