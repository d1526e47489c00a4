"""Contention beyond max-min sharing: the table, its use in SharedCpu (neutral unless oversubscribed), hand-checked
cases, storage, model_for, and a smoke run of the microbenchmark."""

from __future__ import annotations

import json
import time

import pytest
import simpy

from simulators.calibrate import HARDWARE, calibrate, model_for
from simulators.contention import Contention, ContentionTable, max_min_rates, measure_contention
from simulators.pipeline import Fixed, PipelineModel, SharedCpu, StageModel, closed_form_epoch_time, simulate
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


@pytest.fixture(scope="module")
def spec_and_run(tmp_path_factory):
    """A real sync pipelined run on a small planted-partition store (for model_for and the microbenchmark)."""
    from suite.config import spec_from_dict
    from suite.runner import run_spec
    from tests.support.graphs import planted_partition, write_node_store

    root = tmp_path_factory.mktemp("contention")
    graph = planted_partition(num_nodes=400, num_classes=3, seed=2)
    write_node_store(root / "store", graph.src, graph.dst, graph.features, graph.labels, graph.splits)
    spec = spec_from_dict({
        "dataset": {"name": "store", "root": str(root / "store")},
        "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 16, "fanouts": [5, 5]},
        "system": {"name": "pipelined", "device": "cpu", "options": {"sync": True}},
        "training": {"batch_size": 16, "epochs": 2}, "evaluation": {"splits": []},
    })
    return spec, run_spec(spec, root / "runs")["run_dir"]


def test_model_for_picks_the_table_of_the_loader_kind_on_the_recorded_machine_only(spec_and_run):
    _, run_dir = spec_and_run
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


def test_the_microbenchmark_runs_and_records_where_its_numbers_come_from(spec_and_run):
    spec, _ = spec_and_run
    # One core (so one loader beside compute oversubscribes it), a tiny graph and short windows: a smoke run.
    contention = measure_contention(spec, num_nodes=2000, num_edges=10_000, feature_dim=8, num_classes=3,
                                    max_loaders=2, cores=1, threads=1, window_s=0.05, repeats=1,
                                    attempts=1, quiet_wait_s=0.0)
    assert contention.load_scale["thread"] == 1.0 and contention.load_scale.get("process", 1.0) > 0
    for kind in ("thread", "process"):
        table = contention.table(kind)
        assert set(table.factors) == {(True, 1), (True, 2), (False, 2)}
        assert table.factors[(True, 1)]["compute"] > 0
    data = json.loads(json.dumps(contention.to_dict()))
    provenance = data["provenance"]
    assert provenance["workload"]["sampler"] == spec.sampler.name and provenance["torch_threads"] == 1
    assert {"measured_at", "machine", "load_average_before", "other_processes_cores", "quiet", "raw"} <= set(provenance)
    state = provenance["raw"]["repeats"][0]["kinds"]["thread"]["states"][0]
    assert {"window_s", "loads_s", "other_cores", "attempts_other_cores", "factors"} <= set(state)


def test_simulate_command_with_a_stored_contention_measurement(spec_and_run, tmp_path):
    import yaml

    from suite.cli import main
    from suite.recorder import read_summary
    from suite.results import load_runs

    _, run_dir = spec_and_run
    stored = tmp_path / "contention.json"
    contention = Contention(tables={"thread": SLOW}, cores=1, compute_cores=1, provenance={"measured_at": "t"})
    stored.write_text(json.dumps({"tables": {__import__("pathlib").Path(run_dir).name: contention.to_dict()}}))
    recorded, _ = spec_and_run
    spec = {"name": "whatif", "dataset": recorded.resolved()["dataset"],  # the calibration run's workload
            "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 16, "fanouts": [5, 5]},
            "system": {"name": "pipelined", "options": {"staleness_bound": 4}},
            "training": {"batch_size": 16, "epochs": 1, "limit_batches": 12}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "sim"
    assert main(["simulate", str(path), "--calibrate-from", run_dir, "--out", str(out),
                 "--contention", str(stored)]) == 0
    summary = read_summary(load_runs(out)["run_dir"].iloc[0])
    assert "microbenchmark" in summary["contention"]
    assert main(["simulate", str(path), "--calibrate-from", run_dir, "--out", str(out),
                 "--contention", str(tmp_path / "missing.json")]) == 2


def _measured_table(run_dir, epochs):
    """A measured table like experiments/pipeline.py's: the sync run and three 'other' runs (the same folder)."""
    import pandas as pd

    rows = [{"system": "pipelined", "dataset": "d", "sampler": "s", "configuration": "sync", "run_dir": run_dir,
             "run_id": "sync", "epoch_time_s": 1.0, "compute_utilization": 0.9, "bottleneck_stage": "compute",
             "staleness_max": 0}]
    rows += [{**rows[0], "configuration": f"c{i}", "run_id": f"r{i}", "epoch_time_s": epoch}
             for i, epoch in enumerate(epochs)]
    return pd.DataFrame(rows)


def test_validation_predicts_with_and_without_the_table_and_says_which(spec_and_run):
    from experiments.pipeline_validation import predict

    _, run_dir = spec_and_run
    measured = _measured_table(run_dir, [1.0, 1.0, 1.0])
    contention = Contention(tables={"thread": SLOW}, cores=1, compute_cores=1, provenance={"measured_at": "t"})
    table = predict(measured, 1, {__import__("pathlib").Path(run_dir).name: contention})
    assert len(table) == 3 and table["contention"].str.contains("microbenchmark").all()
    assert {"predicted_epoch_time_s_max_min", "epoch_time_error_max_min"} <= set(table.columns)
    plain = predict(measured, 1)
    assert (plain["contention"] == "none (max-min sharing only)").all()
    assert plain["predicted_epoch_time_s"].tolist() == plain["predicted_epoch_time_s_max_min"].tolist()


def test_leave_one_out_never_uses_the_predicted_run(spec_and_run):
    from experiments.pipeline_validation import predict_leave_one_out

    _, run_dir = spec_and_run
    grid = (1.0, 0.5, 0.25)
    normal = predict_leave_one_out(_measured_table(run_dir, [1.0, 1.2, 0.9]), 1, grid)
    # Run r0's measurement changed wildly: the factor chosen for r0 (from r1 and r2) does not change.
    changed = predict_leave_one_out(_measured_table(run_dir, [1000.0, 1.2, 0.9]), 1, grid)
    assert normal["contention"].str.startswith("leave-one-out").all()
    assert changed.loc[0, "contention"] == normal.loc[0, "contention"]
    assert changed.loc[0, "predicted_epoch_time_s"] == normal.loc[0, "predicted_epoch_time_s"]


@pytest.mark.parametrize("sampler", ["naive", "dense"])
def test_loader_processes_never_free_memory_their_next_load_reads(sampler):
    """The segfault of the naive sampler's contention calibrations: a worker's queue thread pickled a load whose
    sample holds the workload's ``roots`` tensor itself, which moved (freed) the roots' memory while the worker's
    next load read it. Loads are handed over without moving any tensor the workload keeps, and a burst of loads in
    two worker processes (compiled kernels with bounds checks, as in every test) all succeed."""
    from multiprocessing.reduction import ForkingPickler

    import torch

    from simulators.contention import _LoadAgain, _Loaders, _workload
    from suite.config import spec_from_dict

    spec = spec_from_dict({"dataset": {"name": "synthetic", "preset": "tiny"}, "sampler": {"name": sampler},
                           "model": {"num_layers": 3, "fanouts": [5, 5, 5]}, "training": {"batch_size": 200}})
    work = _workload(spec, 5000, 50_000, 8, 3, 5000, 0)
    kept = (work.roots, work.features, work.labels)
    with _Loaders(work, "process", 2) as loaders:
        pointers = [tensor.data_ptr() for tensor in kept]
        ForkingPickler.dumps(_LoadAgain(work)[0])  # what a worker's queue thread does with every load
        assert [tensor.data_ptr() for tensor in kept] == pointers
        deadline = time.perf_counter() + 20
        while len(loaders.stamps) < 40 and time.perf_counter() < deadline and loaders.error is None:
            time.sleep(0.01)
        loaders.check()
        assert len(loaders.stamps) >= 40
    sample = work.load()[0]  # the parent's workload still samples what it sampled before
    assert torch.equal(sample.roots, work.roots)
