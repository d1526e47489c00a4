"""The disk-system simulation on real runs: a calibration run and a held-out run of the disk system on a small
planted-partition store (a calibration run with prefetch, a held-out run without); the plans' bytes are the
recorded bytes exactly, the calibration run is replayed by its own costs, the tables and the command read them;
and a recorded folder of tiny disk runs (validate_recorded): the rule designates per group the sequential run and
the dispersed run of the same p and c (and a sequential run of another c), pooled, which are never predicted, every
other run is, a group without a designated run is reported, not dropped, and a rank-deficient compute fit is
flagged; the workload count is what the sampler samples in each state's buffer."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from experiments.measure import disk_simulation
from experiments.measure.disk_simulation import (NO_CALIBRATION, WORKLOAD_SEED, calibrate_on, compare,
                                                 designated_calibration, foreign_cores, load_run, main, measured_warm,
                                                 run_to_run_spread, state_sampled_edges, summarize,
                                                 validate_recorded)
from experiments.simulator_commands import add_commands
from suite.config import spec_from_dict
from suite.data import GraphStore
from suite.errors import ConfigError
from tests.support.disk import run
from tests.support.graphs import planted_partition, write_node_store

OPTIONS = {"policy": "dispersed", "num_partitions": 8, "buffer_capacity": 4}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> GraphStore:
    graph = planted_partition(num_nodes=3000, num_classes=3, feature_dim=64, degree_in=12.0, seed=5)
    return write_node_store(tmp_path_factory.mktemp("disk-sim") / "store", graph.src, graph.dst, graph.features,
                            graph.labels, graph.splits, name="planted")


def make_spec(store: GraphStore, seed: int, **options):
    return spec_from_dict({
        "name": "disk-sim-test",
        "dataset": {"name": "store", "root": str(store.path)},
        "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 32, "fanouts": [10, 5], "dropout": 0.2},
        "system": {"name": "disk", "device": "cpu", "options": {**OPTIONS, **options}},
        "training": {"batch_size": 64, "epochs": 3, "learning_rate": 0.01},
        "evaluation": {"every": 3, "splits": []},
        "seed": seed,
    })


@pytest.fixture(scope="module")
def recorded(store, tmp_path_factory):
    """A calibration run (seed 0, prefetch) and a held-out run (seed 1, without prefetch)."""
    out = tmp_path_factory.mktemp("disk-sim-runs")
    dirs = {}
    for key, spec in (("calibration", make_spec(store, 0)), ("serial", make_spec(store, 1, prefetch=False))):
        _, _, recorder = run(spec, store, out)
        dirs[key] = recorder.run_dir
    return dirs


def test_a_held_out_run_is_predicted_and_its_bytes_are_planned_exactly(recorded):
    costs = calibrate_on(load_run(recorded["calibration"]))
    assert costs.read_bandwidth > 0 and costs.compute_edge_s + costs.compute_batch_s + costs.compute_state_s > 0
    row = compare(load_run(recorded["serial"]), costs)
    assert row["planned_read_bytes"] == row["recorded_read_bytes"] > 0
    # how close a held-out prediction comes is measured (experiments.measure.disk_simulation), not tested: on a
    # shared 2-core machine another process moves a small run's epoch several-fold
    assert row["predicted_epoch_s"] > 0 and row["measured_epoch_s"] > 0
    assert row["predicted_serial_epoch_s"] == pytest.approx(row["predicted_epoch_s"])
    replay = compare(load_run(recorded["calibration"]), costs)
    assert replay["predicted_serial_epoch_s"] > replay["predicted_epoch_s"]  # prefetch hides some of the prepares
    assert abs(replay["error"]) < 0.25, replay  # in sample: the model's own structure
    assert row["batches_per_s"] > 0


def test_the_summary_has_intervals_and_the_spread_pairs_repeats(recorded):
    calibration = load_run(recorded["calibration"])
    costs, load = calibrate_on(calibration), foreign_cores(calibration)
    import pandas as pd

    runs = pd.DataFrame([{**compare(load_run(recorded[key]), costs, load), "replay_error": 0.0,
                           "previous_run_error": 0.0}
                         for key in ("serial", "calibration", "serial")])
    assert runs["load_factor"].iloc[1] == pytest.approx(1.0)  # the calibration run's own load
    runs["run_to_run"] = run_to_run_spread(runs)
    assert math.isnan(runs["run_to_run"].iloc[1])  # alone in its configuration
    assert runs["run_to_run"].iloc[0] == pytest.approx(0.0)  # the same run twice
    summary = summarize(runs)
    assert list(summary["task"]) == ["node_classification", "all"]
    row = summary.iloc[-1]
    assert row["median_abs_error_ci_low"] <= row["median_abs_error"] <= row["median_abs_error_ci_high"]


def test_the_command_predicts_a_recorded_run(recorded, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    args = parser.parse_args(["simulate-disk", str(recorded["serial"]), "--calibrate-from",
                              str(recorded["calibration"]), "--json"])
    assert args.func(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert len(printed["epochs"]) == 3 and all(e["measured_epoch_s"] > 0 for e in printed["epochs"])
    bad = parser.parse_args(["simulate-disk", str(recorded["serial"]), "--calibrate-from",
                             str(recorded["serial"] / "missing")])
    with pytest.raises(ConfigError, match="no config.yaml"):
        bad.func(bad)


# ---------------------------------------------------------------------------------------------- recorded runs
def test_the_rule_designates_seed_0_sequential_and_its_dispersed_partner_c_a_quarter_of_p_at_the_finest_p(store):
    specs = [make_spec(store, 0, policy="sequential", num_partitions=8, buffer_capacity=2),
             make_spec(store, 0, policy="sequential", num_partitions=16, buffer_capacity=8),  # c != p/4
             make_spec(store, 1, policy="sequential", num_partitions=16, buffer_capacity=4),  # seed 1
             make_spec(store, 0, policy="sequential", num_partitions=16, buffer_capacity=4, prefetch=False),
             make_spec(store, 0, policy="dispersed", num_partitions=16, buffer_capacity=4),
             make_spec(store, 0, policy="sequential", num_partitions=12, buffer_capacity=3),
             make_spec(store, 0, policy="sequential", num_partitions=8, buffer_capacity=2)]
    assert designated_calibration(specs) == (5,)  # the finest p of the eligible runs (8, 12, 8); no partner
    partners = [make_spec(store, 1, num_partitions=12, buffer_capacity=3),  # seed 1
                make_spec(store, 0, num_partitions=12, buffer_capacity=3, prefetch=False),
                make_spec(store, 0, num_partitions=12, buffer_capacity=3, pipeline={"sync": True}),
                make_spec(store, 0, num_partitions=12, buffer_capacity=3),  # the dispersed partner
                make_spec(store, 0, num_partitions=12, buffer_capacity=3)]  # an equal: the first listed is taken
    assert designated_calibration(specs + partners) == (5, 10)
    assert designated_calibration(specs[:1] + specs[-1:]) == (0,)  # of equals, the first listed
    assert designated_calibration(specs[1:5]) == ()  # a dispersed run alone designates nothing
    second_share = [make_spec(store, 0, policy="sequential", num_partitions=12, buffer_capacity=6, prefetch=False),
                    make_spec(store, 1, policy="sequential", num_partitions=12, buffer_capacity=6),
                    make_spec(store, 0, policy="dispersed", num_partitions=12, buffer_capacity=6),
                    make_spec(store, 0, policy="sequential", num_partitions=12, buffer_capacity=6)]
    # node classification adds the first policy's run at the same p and another share (the per-edge compute)
    assert designated_calibration(specs + partners + second_share) == (5, 10, 15)


def sampled_in_buffer(spec, pstore, plan, state: int) -> float:
    """What the run's sampler samples from a state's examples on the whole graph cut to the in-edges whose source
    lies in a partition the state holds (built here from the store, without the count's shortcuts)."""
    import torch

    from suite.registry import SAMPLERS
    from systems.sampling.sampler import SamplingGraph
    from systems.tasks.node_classification import labeled

    graph = SamplingGraph.from_store(pstore, "in")
    offsets = torch.as_tensor(np.asarray(pstore.array("partition_offsets")), dtype=torch.int64)
    held = torch.zeros(plan.num_partitions, dtype=torch.bool)
    held[torch.as_tensor(plan.state(state), dtype=torch.int64)] = True
    kept = held[torch.searchsorted(offsets, graph.indices, right=True) - 1]
    counts = torch.cat([torch.zeros(1, dtype=torch.int64), kept.cumsum(0)])
    sampler_class = SAMPLERS.get(spec.sampler.name)
    sampler = sampler_class(SamplingGraph(counts[graph.indptr], graph.indices[kept]), tuple(spec.model.fanouts))
    train = labeled(pstore.split("train").to(torch.int64), pstore.labels.to(torch.int64))
    examples = train[torch.as_tensor(plan.node_state, dtype=torch.int64) == state]
    return float(sum(sampler_class.counts(sampler.timed_sample(batch, WORKLOAD_SEED + b)).sampled_edges
                     for b, batch in enumerate(examples.split(spec.training.batch_size))))


@pytest.mark.parametrize("policy, capacity", [("dispersed", 4), ("sequential", 4), ("sequential", 8)])
def test_the_workload_count_is_what_the_sampler_samples_in_the_buffer(store, policy, capacity):
    """Every state's count is the run's sampler on the graph its buffer holds, from the state's examples (with every
    partition held, the whole graph)."""
    spec = make_spec(store, 0, policy=policy, num_partitions=8, buffer_capacity=capacity, order="train-first")
    pstore = disk_simulation.partitioned(spec)
    plan = disk_simulation.run_plans(spec, pstore)[1]
    entered = plan.states_with_examples()
    counted = state_sampled_edges(spec)(plan, entered)
    assert counted.tolist() == [sampled_in_buffer(spec, pstore, plan, s) for s in entered.tolist()]
    assert (counted > 0).all()


def test_the_workload_count_grows_with_the_graph_the_buffer_holds(store):
    """The same training nodes, one state each: half of the partitions held samples fewer edges than all."""
    counts = []
    for capacity in (4, 8):
        spec = make_spec(store, 0, policy="sequential", num_partitions=8, buffer_capacity=capacity,
                         order="train-first")
        plan = disk_simulation.run_plans(spec, disk_simulation.partitioned(spec))[1]
        counts.append(state_sampled_edges(spec)(plan, plan.states_with_examples()).sum())
    assert 0 < counts[0] < counts[1]


def test_the_workload_count_matches_the_sampled_edges_a_run_recorded(recorded):
    """The recorded run's sampled edges per epoch, against the count of its plan's states (the run shuffles its
    examples into batches; the count takes them in order: the same work up to the sampler's draws)."""
    run = load_run(recorded["calibration"])
    for record in run.epochs:
        counted = run.work[int(record["epoch"])].sampled_edges.sum()
        assert counted == pytest.approx(float(record["sampled_edges"]), rel=0.05)
    spec = run.spec
    link_prediction = spec.model_copy(update={"training": spec.training.model_copy(update={"task": "link_prediction"})})
    assert state_sampled_edges(link_prediction) is None


@pytest.fixture(scope="module")
def recorded_folder(tmp_path_factory):
    """A recorded experiment: on a store whose training nodes fit one partition of 8, the designated runs
    (sequential and dispersed, p = 8, c = 2, seed 0, prefetch), the sequential run's seed 1, a dispersed run of
    c = 4, a serial run of c != p/4 and a coarser eligible run (p = 4, c = 1); on a second store, a lone dispersed
    run (a group without a designated run)."""
    out, stores = tmp_path_factory.mktemp("disk-sim-recorded"), {}
    for name, seed in (("narrow", 7), ("other", 8)):
        graph = planted_partition(num_nodes=2000, num_classes=3, feature_dim=32, degree_in=10.0, seed=seed)
        splits = {**graph.splits, "train": graph.splits["train"][:200]}  # 10 %: one partition of 8 in train-first
        stores[name] = write_node_store(tmp_path_factory.mktemp("disk-sim-stores") / name, graph.src, graph.dst,
                                        graph.features, graph.labels, splits, name=name)
    narrow, sequential = stores["narrow"], {"policy": "sequential", "order": "train-first", "partition_seed": 0}
    specs = {"designated": make_spec(narrow, 0, buffer_capacity=2, **sequential),
             "partner": make_spec(narrow, 0, buffer_capacity=2, **{**sequential, "policy": "dispersed"}),
             "seed1": make_spec(narrow, 1, buffer_capacity=2, **sequential),
             "dispersed": make_spec(narrow, 0),
             "serial": make_spec(narrow, 0, buffer_capacity=4, prefetch=False, **sequential),
             "coarser": make_spec(narrow, 0, num_partitions=4, buffer_capacity=1, **sequential),
             "alone": make_spec(stores["other"], 0)}
    dirs = {}
    for key, spec in specs.items():
        _, _, recorder = run(spec, stores["other"] if key == "alone" else narrow, out)
        dirs[key] = recorder.run_dir
    return out, dirs


def test_recorded_runs_are_predicted_from_the_designated_runs_pooled_and_none_is_dropped(recorded_folder):
    out, dirs = recorded_folder
    runs, summary, costs = validate_recorded(out)
    by_id = runs.set_index("run_id")
    designated = {dirs["designated"].name, dirs["partner"].name}
    assert sorted(by_id.index) == sorted(d.name for d in dirs.values() if d.name not in designated)
    assert not designated & set(by_id.index)  # the calibration runs are never predicted
    calibrated = costs.dropna(subset=["calibration_run"]).set_index("group")
    pooled = f"{dirs['designated'].name} + {dirs['partner'].name}"  # both, sequential first
    assert list(calibrated["calibration_run"]) == [pooled]
    group = calibrated.iloc[0]
    assert group["read_bandwidth"] > 0
    # one state per epoch: the sequential run alone does not identify the compute (its batches never vary; the
    # edges its one state samples vary a little with the buffer's fill)
    assert int(group["compute_ranks_alone"].split(" / ")[0]) < 3
    assert group["compute_rank"] == 3 and group["compute_identified"] and not isinstance(group["note"], str)
    predicted = by_id.drop(index=dirs["alone"].name)
    assert (predicted["calibration_run"] == pooled).all() and (predicted["calibration_compute_rank"] == 3).all()
    assert predicted["predicted_epoch_s"].gt(0).all() and predicted["error"].notna().all()
    assert predicted["bytes_equal"].all()
    alone = by_id.loc[dirs["alone"].name]  # reported, measured, not predicted
    assert alone["note"] == NO_CALIBRATION and alone["measured_epoch_s"] > 0 and math.isnan(alone["error"])
    seed0 = measured_warm(load_run(dirs["designated"]))[1]  # the spread pairs seed 1 with the designated seed 0
    seed1 = by_id.loc[dirs["seed1"].name, "measured_epoch_s"]
    assert by_id.loc[dirs["seed1"].name, "run_to_run"] == pytest.approx(seed1 / ((seed0 + seed1) / 2) - 1)
    assert math.isnan(by_id.loc[dirs["dispersed"].name, "run_to_run"])  # alone in its configuration
    tasks = summary[summary["over"] == "task"]
    assert list(tasks["task"]) == ["node_classification", "all"] and (tasks["runs"] == 4).all()
    assert (tasks["rank_deficient_runs"] == 0).all()


def test_a_rank_deficient_calibration_is_flagged_not_silently_predicted(recorded_folder):
    """Calibrated on the sequential run alone (one state per epoch: compute rank below 3), the group's costs row,
    its runs' rows and the summary say the compute fit is rank-deficient."""
    out, dirs = recorded_folder
    runs, summary, costs = validate_recorded(out, rule=lambda specs: designated_calibration(specs)[:1])
    group = costs.dropna(subset=["calibration_run"]).iloc[0]
    assert group["calibration_run"] == dirs["designated"].name and group["compute_rank"] < 3
    assert not group["compute_identified"]
    assert f"rank-deficient (rank {int(group['compute_rank'])} of 3)" in group["note"]
    predicted = runs[runs["error"].notna()]
    assert dirs["partner"].name in set(predicted["run_id"])  # not designated here: predicted
    assert predicted["note"].str.contains("rank-deficient").all() and len(predicted) == 5
    assert (summary[summary["over"] == "task"]["rank_deficient_runs"] == 5).all()


def test_the_command_validates_a_recorded_folder_without_running(recorded_folder, tmp_path, capsys):
    out, dirs = recorded_folder
    before = sorted(path.name for path in out.iterdir())
    assert main(["--recorded", str(out), "--out", str(tmp_path), "--runs", str(tmp_path / "none")]) == 0
    assert sorted(path.name for path in out.iterdir()) == before  # no run made
    written = {path.name for path in tmp_path.iterdir()}
    assert {f"disk_simulation_recorded_{name}.csv" for name in ("runs", "summary", "costs")} <= written
    assert dirs["dispersed"].name in capsys.readouterr().out


def test_compute_threads_come_from_the_run_summary_and_default_to_one(tmp_path):
    from experiments.measure.disk_simulation import RunInputs, compute_threads

    (tmp_path / "summary.json").write_text(json.dumps({"threads": {"compute": 2, "own_threads": 0}}))
    assert compute_threads(RunInputs(tmp_path, None, [], [], [])) == 2.0  # a run without prefetch: both cores
    assert compute_threads(RunInputs(tmp_path / "missing", None, [], [], [])) == 1.0


def test_the_job_tables_record_the_commit_they_were_computed_at(recorded_folder, tmp_path):
    """The REPORT's provenance lists tables of other code by their ``git_sha`` column: every table the job writes
    carries the commit the simulation ran at."""
    import pandas as pd

    from experiments.common import provenance
    from experiments.figures.disk_simulation import run as run_job

    import shutil

    out, _ = recorded_folder
    runs = tmp_path / "runs"
    shutil.copytree(out, runs)
    for run_dir in runs.iterdir():  # the runner writes a summary; these runs skipped its bookkeeping
        (run_dir / "summary.json").write_text("{}")
    run_job(runs=[runs], results=tmp_path / "results", plot=False)
    sha = provenance("git_sha")["git_sha"]
    for name in ("disk_simulation.csv", "disk_simulation_summary.csv", "disk_simulation_costs.csv"):
        assert set(pd.read_csv(tmp_path / "results" / name)["git_sha"].astype(str)) == {str(sha)}, name
