"""The cost experiment: prices checked by hand, the simulator's projection on recorded (hand-made) runs, the figure
from a small CSV, the "disk-cost" claim's verdicts, and bad input as a one-line error."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from experiments import report, reproduce
from experiments.figures import cost
from experiments.plugins import FIGURES
from simulators.calibrate import HARDWARE
from suite.errors import ConfigError, DataError
from tests.experiments.figures.recorded_runs import write_run

M6A = 0.0864  # m6a.large, $/h: the price the runs measured here are priced at


# ---------------------------------------------------------------------------------------------- by hand
def test_price_row_by_hand():
    # 36 s and 72 s epochs at $1/h: $0.01 and $0.02; validation 0.5 after epoch 1, 0.7 after epoch 2
    row = cost.price_row([36.0, 72.0], [(0, 0.5), (1, 0.7)], target=0.6, hourly_usd=1.0)
    assert row["epochs"] == 2
    assert row["epoch_time_s"] == pytest.approx(54.0)
    assert row["cost_per_epoch_usd"] == pytest.approx(0.015)
    assert row["epochs_to_target"] == 2
    assert row["time_to_target_s"] == pytest.approx(108.0)
    assert row["cost_to_target_usd"] == pytest.approx(0.03)
    first = cost.price_row([36.0, 72.0], [(0, 0.5), (1, 0.7)], target=0.5, hourly_usd=1.0)
    assert (first["epochs_to_target"], first["cost_to_target_usd"]) == (1, pytest.approx(0.01))
    never = cost.price_row([36.0, 72.0], [(0, 0.5), (1, 0.7)], target=0.9, hourly_usd=1.0)
    assert math.isnan(never["epochs_to_target"]) and math.isnan(never["cost_to_target_usd"])
    assert never["cost_per_epoch_usd"] == pytest.approx(0.015)  # an epoch costs the same, reached or not


def test_target_is_a_fraction_of_the_reference_rounded_down():
    assert cost.target_value(0.6847, 0.01) == pytest.approx(0.674)   # 0.6747 -> 0.674
    assert cost.target_value(0.1689, 0.01) == pytest.approx(0.158)   # 0.1589 -> 0.158
    assert cost.target_value(0.8, 0.0) == pytest.approx(0.8)
    with pytest.raises(ConfigError, match="--target-margin"):
        cost.target_value(0.8, 1.5)


def test_gpu_figures_per_profile():
    p3 = cost.gpu_hardware("p3.2xlarge")
    assert p3.cpu_cores == 4 and p3.gpu_tflops == HARDWARE["p3.2xlarge"].gpu_tflops
    p3x4 = cost.gpu_hardware("p3.8xlarge")  # the same V100, 32 vCPUs / 2 / 4 GPUs = 4 cores per GPU
    assert p3x4.cpu_cores == 4 and p3x4.gpu_tflops == p3.gpu_tflops and "1 of 4 GPUs" in p3x4.name
    assert cost.gpu_hardware("p4d.24xlarge").cpu_cores == 6  # 96 vCPUs / 2 / 8 GPUs
    assert cost.gpu_hardware("m6a.large") is None and cost.gpu_hardware("local") is None
    assert {"p3.2xlarge", "p3.8xlarge", "p3.16xlarge"} <= set(cost.default_profiles())


# ---------------------------------------------------------------------------------------------- recorded runs
def _write_run(root: Path, run_id: str, dataset: str, system: str, options: dict, epoch_times: list[float],
               valid: list[float], batches: int = 0) -> Path:
    """A completed run on ``dataset`` with these epoch times and validation accuracies."""
    summary = {
        "dataset": dataset, "dataset_info": {"name": dataset, "feature_dim": 128}, "epoch_time_s": epoch_times,
        "metrics": {"main": "accuracy", "valid": {"accuracy": valid[-1]},
                    "valid_curve": [{"epoch": e, "accuracy": v} for e, v in enumerate(valid)]},
        "peak_rss_bytes": 2**30,
    }
    return write_run(root, run_id, system, options, [{"epoch_time_s": t} for t in epoch_times], summary, batches)


@pytest.fixture
def recorded(tmp_path):
    """Hand-made runs: a sync and an async pipelined run on "toy" (4 recorded batches), and on "toy-disk" an
    in-memory run and two disk runs (one never reaches the target)."""
    runs = tmp_path / "runs"
    _write_run(runs / "pipeline", "sync", "toy", "pipelined", {"sync": True}, [36.0, 36.0], [0.5, 0.8], batches=4)
    _write_run(runs / "pipeline", "async", "toy", "pipelined", {"staleness_bound": 16}, [18.0, 18.0], [0.5, 0.79],
               batches=4)
    _write_run(runs / "disk", "mem", "toy-disk", "in_memory", {}, [72.0, 72.0], [0.4, 0.6])
    _write_run(runs / "disk", "seq", "toy-disk", "disk", {"policy": "sequential", "num_partitions": 8,
                                                          "buffer_capacity": 2}, [36.0, 36.0], [0.3, 0.5])
    _write_run(runs / "disk", "disp", "toy-disk", "disk", {"policy": "dispersed", "num_partitions": 8,
                                                           "buffer_capacity": 2}, [36.0, 36.0], [0.58, 0.59])
    return runs


def test_cost_table_of_recorded_runs(recorded):
    table = cost.cost_table(cost.load_runs([recorded / "pipeline", recorded / "disk"]),
                            profiles=["p3.2xlarge", "p3.8xlarge"])
    measured = table[table["mode"] == "measured"].set_index("run_id")
    assert len(measured) == 5 and set(measured["priced_as"]) == {"m6a.large"}
    # target: the reference's final validation - 0.01 (toy: the sync run 0.8; toy-disk: the in-memory run 0.6)
    assert measured.loc["sync", "target"] == pytest.approx(0.79)
    assert measured.loc["mem", "target"] == pytest.approx(0.59)
    # sync: two 36 s epochs at $0.0864/h -> $0.000864 an epoch; 0.8 >= 0.79 after epoch 2 -> $0.001728
    assert measured.loc["sync", "cost_per_epoch_usd"] == pytest.approx(36 / 3600 * M6A)
    assert measured.loc["sync", "epochs_to_target"] == 2
    assert measured.loc["sync", "cost_to_target_usd"] == pytest.approx(72 / 3600 * M6A)
    assert measured.loc["disp", "epochs_to_target"] == 2  # 0.58 < 0.59 after the first epoch, 0.59 after two
    assert measured.loc["disp", "cost_to_target_usd"] == pytest.approx(72 / 3600 * M6A)
    assert math.isnan(measured.loc["seq", "cost_to_target_usd"])  # 0.5 < 0.59: never reached
    assert measured.loc["seq", "configuration"] == "disk sequential p8 c2"
    assert bool(measured.loc["seq", "fits_priced_memory"])
    # simulated: both toy runs (not toy-disk: no sync run to calibrate on) on both profiles, priced at theirs
    simulated = table[table["mode"] == "simulated"]
    assert sorted(zip(simulated["run_id"], simulated["profile"])) == [
        ("async", "p3.2xlarge"), ("async", "p3.8xlarge"), ("sync", "p3.2xlarge"), ("sync", "p3.8xlarge")]
    assert set(simulated["calibrated_from"]) == {"sync"}
    for row in simulated.itertuples():
        times = row.epoch_times_s
        price = 3.06 if row.profile == "p3.2xlarge" else 12.24
        assert len(times) == 2 and row.cost_per_epoch_usd == pytest.approx(sum(times) / 2 / 3600 * price)
        assert row.cost_to_target_usd == pytest.approx(sum(times) / 3600 * price)  # the measured 2 epochs
    four = simulated[simulated["profile"] == "p3.8xlarge"]
    assert four["hardware"].str.contains("1 of 4 batches per GPU").all()


def test_main_writes_the_table_and_figure_and_the_claim_reads_it(recorded, tmp_path, capsys):
    results = tmp_path / "results"
    args = ["--runs", str(recorded / "pipeline"), "--runs", str(recorded / "disk"), "--csv",
            str(results / "cost.csv"), "--png", str(results / "cost.png"), "--profiles", "p3.2xlarge,p3.8xlarge"]
    assert cost.main(args) == 0
    assert (results / "cost.png").stat().st_size > 0
    table = pd.read_csv(results / "cost.csv")
    assert list(table.columns) == list(cost.COLUMNS)
    finding = report.claims().get("disk-cost").evaluate(results)
    assert finding.verdict == report.NOT_TESTABLE
    assert "no in-memory multi-GPU projection on toy-disk" in finding.measured and "projects toy" in finding.measured


# ---------------------------------------------------------------------------------------------- figure
def test_figure_from_a_small_csv(tmp_path):
    rows = [
        {"dataset": "d", "configuration": "sync", "mode": "measured", "profile": "local", "priced_as": "m6a.large",
         "gpus": 0, "hourly_usd": M6A, "cost_per_epoch_usd": 1e-4, "cost_to_target_usd": 2e-4, "target": 0.6,
         "valid_metric": "accuracy"},
        {"dataset": "d", "configuration": "sync", "mode": "simulated", "profile": "p3.8xlarge",
         "priced_as": "p3.8xlarge", "gpus": 4, "hourly_usd": 12.24, "cost_per_epoch_usd": 3e-4,
         "cost_to_target_usd": 6e-4, "target": 0.6, "valid_metric": "accuracy"},
        {"dataset": "e", "configuration": "disk sequential p8 c2", "mode": "measured", "profile": "local",
         "priced_as": "m6a.large", "gpus": 0, "hourly_usd": M6A, "cost_per_epoch_usd": 1e-5,
         "cost_to_target_usd": None, "target": 0.5, "valid_metric": "accuracy"},
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "cost.csv", index=False)
    out = cost.plot_cost(tmp_path / "cost.csv", tmp_path / "cost.png")
    assert out.stat().st_size > 0
    pd.DataFrame(rows).drop(columns=["cost_to_target_usd"]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(DataError, match="bad.csv: not a cost table \\(no column cost_to_target_usd\\)"):
        cost.plot_cost(tmp_path / "bad.csv", tmp_path / "bad.png")


# ---------------------------------------------------------------------------------------------- the claim
SEED_SPREAD = (0.95, 1.0, 1.05)
"""Each side's three seeds: its cost times these."""


def _claim_table(disk_to_target, gpu_to_target, disk_per_epoch=1e-5, gpu_per_epoch=1e-4, gpu_dataset="d",
                 disk_load=False, disk_seeds=None):
    """A disk configuration priced at 1 USD/h (1e-5 USD per epoch, 4 epochs) against an 8-GPU projection, three
    seeds each, their costs to target ``SEED_SPREAD`` times the given ones (``disk_seeds``: the disk seeds' own
    costs to target, None where a seed never reached it); a 1-GPU projection that is not the claim's baseline."""
    base = {"kind": "in-memory", "priced_as": "x", "hourly_usd": 1.0, "target": 0.5, "epochs": 4}

    def scaled(value, factor):
        return None if value is None else value * factor

    disk_costs = disk_seeds or [scaled(disk_to_target, f) for f in SEED_SPREAD]
    rows = [{**base, "dataset": "d", "configuration": "disk dispersed p8 c2", "kind": "disk", "mode": "measured",
             "profile": "local", "gpus": 0, "seed": seed, "cost_per_epoch_usd": disk_per_epoch,
             "cost_to_target_usd": cost, "epochs_to_target": None if cost is None else cost / disk_per_epoch,
             "under_load": disk_load} for seed, cost in enumerate(disk_costs)]
    rows += [{**base, "dataset": gpu_dataset, "configuration": "sync", "mode": "simulated", "profile": "p3.16xlarge",
              "gpus": 8, "seed": seed, "cost_per_epoch_usd": gpu_per_epoch,
              "cost_to_target_usd": scaled(gpu_to_target, factor),
              "epochs_to_target": None if gpu_to_target is None else gpu_to_target / gpu_per_epoch}
             for seed, factor in enumerate(SEED_SPREAD)]
    rows += [{**base, "dataset": gpu_dataset, "configuration": "sync", "mode": "simulated", "profile": "p3.2xlarge",
              "gpus": 1, "seed": seed, "cost_per_epoch_usd": 1e-9, "cost_to_target_usd": 1e-9,
              "epochs_to_target": 1} for seed in range(3)]  # one GPU: not the claim's baseline
    return pd.DataFrame(rows)


@pytest.mark.parametrize("disk, gpu, kwargs, verdict, text", [
    (2e-5, 2e-4, {}, report.HOLDS, "x0.100 ["),
    (4e-4, 2e-4, {}, report.FAILS, "x2.000 ["),
    # never there: its 4 epochs cost x0.2 of the projection's cost to target (the cap stopped it), or x20
    (None, 2e-4, {}, report.INCONCLUSIVE, "at least (a seed that never reached the target: all its 4 epochs)"),
    (None, 2e-4, {"disk_per_epoch": 1e-3}, report.FAILS, "x20.0"),
    # one seed of three never got there: bounded by its 4 epochs (x0.2 and x20 of the projection's cost)
    (None, 2e-4, {"disk_seeds": [2e-5, None, 2e-5]}, report.INCONCLUSIVE, "at least"),
    (None, 2e-4, {"disk_seeds": [4e-3, None, 4e-3], "disk_per_epoch": 1e-3}, report.FAILS, "at least"),
    # no seed is picked over another: one cheap seed of three does not make the claim hold
    (None, 2e-4, {"disk_seeds": [2e-5, 4e-4, 4e-4]}, report.INCONCLUSIVE, "(mean of 3 seeds)"),
    # cheaper per epoch decides nothing: the projection never reached the target, so there is no cost to compare
    (2e-5, None, {}, report.INCONCLUSIVE, "no multi-GPU projection reached the target on every seed"),
    (None, 2e-4, {"disk_per_epoch": None}, report.INCONCLUSIVE, "(no cost recorded on every seed)"),
    (2e-5, 2e-4, {"gpu_dataset": "other"}, report.NOT_TESTABLE, "no in-memory multi-GPU projection on d"),
])
def test_disk_cost_claim_verdicts(tmp_path, disk, gpu, kwargs, verdict, text):
    _claim_table(disk, gpu, **kwargs).to_csv(tmp_path / "cost.csv", index=False)
    finding = report.claims().get("disk-cost").evaluate(tmp_path)
    assert finding.verdict == verdict, finding.measured
    assert text in finding.measured


def test_disk_cost_counts_a_seed_once_and_needs_three(tmp_path):
    table = _claim_table(2e-5, 2e-4)
    twice = table.iloc[[0]].assign(cost_to_target_usd=9.0)  # seed 0 recorded again: its first row counts
    pd.concat([table, twice]).to_csv(tmp_path / "cost.csv", index=False)
    finding = report.claims().get("disk-cost").evaluate(tmp_path)
    assert finding.verdict == report.HOLDS and "x0.100 [" in finding.measured
    table[table["seed"] != 2].to_csv(tmp_path / "cost.csv", index=False)  # two seeds a side: too few to decide
    assert report.claims().get("disk-cost").evaluate(tmp_path).verdict == report.INCONCLUSIVE


def test_disk_cost_claim_without_a_disk_run_or_table(tmp_path):
    assert report.claims().get("disk-cost").evaluate(tmp_path).verdict == report.NOT_TESTABLE  # no cost.csv
    _claim_table(2e-5, 2e-4).query("kind != 'disk'").to_csv(tmp_path / "cost.csv", index=False)
    finding = report.claims().get("disk-cost").evaluate(tmp_path)
    assert (finding.verdict, finding.measured) == (report.NOT_TESTABLE,
                                                   "cost.csv has no measured disk-based run without load")
    _claim_table(2e-5, 2e-4, disk_load=True).to_csv(tmp_path / "cost.csv", index=False)
    finding = report.claims().get("disk-cost").evaluate(tmp_path)
    assert finding.verdict == report.NOT_TESTABLE and "measured under foreign load" in finding.excluded


# ---------------------------------------------------------------------------------------------- bad input, job
@pytest.mark.parametrize("args, message", [
    (["--runs", "{tmp}/nowhere"], "cost: error: --runs: no completed measured run under {tmp}/nowhere"),
    (["--target-margin", "1.5"], "cost: error: --target-margin: expected a number in [0, 1), got 1.5"),
    (["--target", "toy=high"], "cost: error: --target: expected DATASET=VALUE with a number, got 'toy=high'"),
    (["--profiles", "m6a.large"], "cost: error: --profiles: 'm6a.large' has no GPU the simulator knows"),
    (["--price-local-as", "nope"], "cost: error: "),
])
def test_bad_input_is_a_one_line_error(recorded, tmp_path, capsys, args, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--runs" not in args:
        args += ["--runs", str(recorded / "pipeline")]
    assert cost.main(args + ["--csv", str(tmp_path / "c.csv"), "--no-plot"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith(message.replace("{tmp}", str(tmp_path)))
    assert sum(line.startswith("cost: error:") for line in lines) == 1
    assert not (tmp_path / "c.csv").exists()


def test_cost_job_is_registered():
    job = FIGURES.get("cost")
    assert job.outputs == ("cost.csv", "cost.png")
    assert [j.name for j in reproduce.plan(["cost", "pipeline"])] == ["pipeline", "cost"]
