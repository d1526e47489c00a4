"""The disk node-classification tables (experiments/figures/disk_nc.py): runs (each its warm epochs' mean) as the timing
repeats, intervals over seeds, ratios to in-memory paired by seed, foreign load per run, and the figure drawn from the table; and the pipeline simulator's
accelerator projection (experiments/figures/pipeline_validation.py) on hand-made recorded runs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from experiments import report
from experiments.figures import disk_nc
from tests.experiments.figures.recorded_runs import write_run


def _write_run(root: Path, run_id: str, system: str, options: dict, epochs: list[dict], load: dict | None = None,
               batches: int = 0, seed: int = 0, accuracy: float = 0.5, valid: list[float] = (),
               dataset: str = "toy") -> Path:
    """A completed run on ``dataset`` with these epoch records, test accuracy, validation accuracy after each epoch
    (``valid``) and (optionally) foreign load."""
    summary = {"dataset": dataset, "seed": seed,
               "dataset_info": {"name": dataset, "num_nodes": 1000, "num_edges": 5000, "feature_dim": 128},
               "epoch_time_s": [e["epoch_time_s"] for e in epochs],
               "metrics": {"main": "accuracy", "test": {"accuracy": accuracy},
                           "valid_curve": [{"epoch": i, "accuracy": v} for i, v in enumerate(valid)]}}
    if load is not None:
        summary["machine_load"] = load
    return write_run(root, run_id, system, options, epochs, summary, batches)


QUIET = {"foreign_cpu_s": 0.1, "foreign_cores": 0.01, "under_load": False}
LOADED = {"foreign_cpu_s": 5.0, "foreign_cores": 0.5, "under_load": True}
SEQUENTIAL = {"policy": "sequential", "num_partitions": 8, "buffer_capacity": 2}


def test_runs_are_the_repeats_and_ratios_pair_seeds(tmp_path):
    runs = tmp_path / "runs"
    memory_times, disk_times = (2.0, 2.2, 1.8), (3.0, 3.2, 3.1)
    for seed, (memory, disk_time) in enumerate(zip(memory_times, disk_times)):
        # the cold epoch 0 is left out of each run's mean
        _write_run(runs, f"mem{seed}", "in_memory", {}, [{"epoch_time_s": t} for t in (9.0, memory, memory)],
                   load=QUIET, seed=seed, accuracy=0.5 + 0.01 * seed)
        _write_run(runs, f"seq{seed}", "disk", SEQUENTIAL,
                   [{"epoch_time_s": t, "io_wait_s": 0.1 * t, "io_read_bytes": 1e6, "io_read_s": 0.01}
                    for t in (9.0, disk_time, disk_time)], load=QUIET, seed=seed, accuracy=0.45 + 0.01 * seed)
    _write_run(runs, "seq-loaded", "disk", {**SEQUENTIAL, "prefetch": False},
               [{"epoch_time_s": t} for t in (9.0, 5.0)], load=LOADED, seed=0)
    per_run = disk_nc.run_table(runs)
    assert sorted(per_run["warm_epochs"]) == [1] + [2] * 6
    table = disk_nc.summary_table(per_run).set_index("configuration")
    memory, seq = table.loc["in_memory"], table.loc["sequential p8 c2"]
    assert memory["seeds"] == 3 and memory["epoch_time_s"] == pytest.approx(2.0)
    assert memory["epoch_time_s_ci_low"] < 2.0 < memory["epoch_time_s_ci_high"]
    assert seq["io_wait_fraction"] == pytest.approx(0.1)
    geometric = math.exp(sum(math.log(d / m) for d, m in zip(disk_times, memory_times)) / 3)
    assert seq["time_ratio_vs_in_memory"] == pytest.approx(geometric)
    assert seq["time_ratio_vs_in_memory_ci_low"] < geometric < seq["time_ratio_vs_in_memory_ci_high"]
    assert seq["accuracy_gap_vs_in_memory"] == pytest.approx(-0.05)
    assert seq["accuracy_gap_vs_in_memory_ci_low"] == pytest.approx(-0.05)  # the same gap for every seed
    # a run measured under load keeps its accuracy but gives no timing
    loaded = table.loc["sequential p8 c2 no-prefetch"]
    assert loaded["under_load"] and loaded["timed_runs"] == 0 and math.isnan(loaded["epoch_time_s"])

    csv = tmp_path / "disk_nc.csv"
    table.reset_index().assign(disk_read_bytes=1e6).to_csv(csv, index=False)
    png = disk_nc.plot_disk_nc(csv, tmp_path / "disk_nc.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_runs_without_the_load_field_are_unknown_not_flagged(tmp_path):
    runs = tmp_path / "runs"
    _write_run(runs, "mem", "in_memory", {}, [{"epoch_time_s": t} for t in (3.0, 2.0)])
    row = disk_nc.run_table(runs).iloc[0]
    assert pd.isna(row["under_load"]) and math.isnan(row["foreign_cores"])
    summary = disk_nc.summary_table(disk_nc.run_table(runs)).iloc[0]
    assert summary["timed_runs"] == 1 and math.isnan(summary["epoch_time_s_ci_low"])  # one run: no interval


def test_time_to_target_by_hand(tmp_path):
    """Per seed, the target is the in-memory run's final validation accuracy minus 0.01; a disk run's time to it
    is the training time of its epochs up to the first validation at or above it; one that never gets there is
    reported as such, with the bound its whole training time puts on the ratio."""
    runs = tmp_path / "runs"
    memory_valid = {0: [0.50, 0.60, 0.70], 1: [0.55, 0.65, 0.72], 2: [0.52, 0.705, 0.71]}  # targets 0.69, 0.71, 0.70
    for seed, valid in memory_valid.items():
        _write_run(runs, f"mem{seed}", "in_memory", {}, [{"epoch_time_s": 2.0}] * 3, load=QUIET, seed=seed,
                   valid=valid, accuracy=0.70)
        # sequential: 1 s epochs, reaches the target of seed 2 after its third epoch, the others never
        _write_run(runs, f"seq{seed}", "disk", SEQUENTIAL, [{"epoch_time_s": 1.0}] * 3, load=QUIET, seed=seed,
                   valid=[0.40, 0.60, 0.705] if seed == 2 else [0.40, 0.60, 0.68], accuracy=0.66)
        # dispersed: 3 s epochs, reaches every target after two epochs
        _write_run(runs, f"dis{seed}", "disk", {**SEQUENTIAL, "policy": "dispersed"}, [{"epoch_time_s": 3.0}] * 3,
                   load=QUIET, seed=seed, valid=[0.40, 0.75, 0.76], accuracy=0.71 - 0.01 * seed)
    per_run = disk_nc.run_table(runs).set_index("run_id")
    assert per_run.loc["mem1", "target"] == pytest.approx(0.71)
    assert list(per_run.loc[["mem0", "mem1", "mem2"], "time_to_target_s"]) == [6.0, 6.0, 4.0]
    assert list(per_run.loc[["dis0", "dis1", "dis2"], "epochs_to_target"]) == [2, 2, 2]
    assert per_run.loc["dis0", "time_to_target_s"] == 6.0
    assert list(per_run.loc[["seq0", "seq1", "seq2"], "reached_target"]) == [False, False, True]
    assert math.isnan(per_run.loc["seq0", "time_to_target_s"]) and per_run.loc["seq2", "time_to_target_s"] == 3.0

    table = disk_nc.summary_table(disk_nc.run_table(runs)).set_index("configuration")
    dispersed, sequential = table.loc["dispersed p8 c2"], table.loc["sequential p8 c2"]
    assert (dispersed["target_seeds"], dispersed["target_reached"], dispersed["c_over_p"]) == (3, 3, 0.25)
    geometric = math.exp((2 * math.log(6.0 / 6.0) + math.log(6.0 / 4.0)) / 3)
    assert dispersed["time_to_target_ratio_vs_in_memory"] == pytest.approx(geometric)
    assert dispersed["time_to_target_pairs"] == 3 and math.isnan(dispersed["unreached_ratio_bound"])
    assert dispersed["accuracy_gap_vs_in_memory"] == pytest.approx(0.0)  # 0.01, 0, -0.01 at equal epochs
    assert (sequential["target_seeds"], sequential["target_reached"]) == (3, 1)
    assert sequential["unreached_ratio_bound"] == pytest.approx(3.0 / 6.0)  # 3 s of training vs 6 s in memory
    assert sequential["epoch_time_s"] < dispersed["epoch_time_s"]  # faster per epoch, yet it misses the target
    assert table.loc["in_memory", "time_to_target_ratio_vs_in_memory"] == pytest.approx(1.0)

    table.reset_index().to_csv(tmp_path / "disk_nc.csv", index=False)
    finding = report.claims().get("disk-out-of-core").evaluate(tmp_path)
    assert finding.verdict == report.INCONCLUSIVE  # dispersed's interval straddles 1.3; sequential cut off early
    assert "sequential p8 c2: reached the target in 1 of 3 seeds within 3 epochs" in finding.measured
    png = disk_nc.plot_disk_nc(tmp_path / "disk_nc.csv", tmp_path / "disk_nc.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _nc_row(configuration: str, *, dataset: str = "papers", partitions: int = 16, capacity: int = 4,
            seeds: int = 3, reached: int = 3, ratio: tuple = (1.0, 0.9, 1.1), bound: float = math.nan,
            gap: tuple = (0.0, -0.005, 0.005), prefetch: bool = True, **extra) -> dict:
    """A disk row of disk_nc.csv, as :func:`disk_nc.summary_table` writes it."""
    return {"dataset": dataset, "configuration": configuration, "system": "disk", "status": "ok",
            "policy": configuration.split()[0], "num_partitions": partitions, "buffer_capacity": capacity,
            "prefetch": prefetch, "seeds": seeds, "timed_runs": seeds, "epochs": 10, "target_seeds": seeds,
            "target_reached": reached, "epochs_to_target": 6.0, "time_to_target_pairs": reached,
            "time_to_target_ratio_vs_in_memory": ratio[0], "time_to_target_ratio_vs_in_memory_ci_low": ratio[1],
            "time_to_target_ratio_vs_in_memory_ci_high": ratio[2], "unreached_ratio_bound": bound,
            "time_ratio_vs_in_memory": 0.8, "time_ratio_vs_in_memory_ci_low": 0.7,
            "time_ratio_vs_in_memory_ci_high": 0.9, "io_wait_fraction": 0.01, "io_wait_fraction_ci_low": 0.0,
            "io_wait_fraction_ci_high": 0.02, "test_accuracy": 0.7, "accuracy_gap_vs_in_memory": gap[0],
            "accuracy_gap_vs_in_memory_ci_low": gap[1], "accuracy_gap_vs_in_memory_ci_high": gap[2], **extra}


MEMORY_ROW = {"dataset": "papers", "configuration": "in_memory", "system": "in_memory", "status": "ok",
              "prefetch": True, "seeds": 3, "test_accuracy": 0.7, "test_accuracy_ci_low": 0.69,
              "test_accuracy_ci_high": 0.71}


@pytest.mark.parametrize("rows, verdict, text", [
    ([_nc_row("sequential p16 c4", ratio=(1.1, 1.0, 1.2))], report.HOLDS, "time to target x1.100 [1.000, 1.200]"),
    ([_nc_row("sequential p16 c4", ratio=(2.0, 1.8, 2.2))], report.FAILS, "x2.000 [1.800, 2.200]"),
    ([_nc_row("sequential p16 c4", ratio=(1.2, 1.0, 1.5))], report.INCONCLUSIVE, "x1.200 [1.000, 1.500]"),
    # fewer than three seeds: no verdict from two, however narrow
    ([_nc_row("sequential p16 c4", seeds=2, reached=2)], report.INCONCLUSIVE, "x1.000 [0.900, 1.100]"),
    # fast per epoch but never there: it trained x2.5 of in-memory's time to target without reaching it
    ([_nc_row("sequential p16 c4", reached=0, ratio=(math.nan,) * 3, bound=2.5)], report.FAILS,
     "reached the target in 0 of 3 seeds within 10 epochs (one trained x2.50"),
    # never there, but the epoch cap stopped it at x0.8 of in-memory's time: a longer run would tell
    ([_nc_row("sequential p16 c4", reached=2, bound=0.8)], report.INCONCLUSIVE, "stopped it at x0.80"),
    # sequential at c = p/4 decides; dispersed, c = p/2 and no-prefetch rows are reported beside it
    ([_nc_row("dispersed p16 c4", ratio=(3.0, 2.8, 3.2)), _nc_row("sequential p16 c4", ratio=(1.1, 1.0, 1.2)),
      _nc_row("sequential p16 c8", capacity=8, ratio=(9.0, 8.0, 10.0))], report.HOLDS, "dispersed p16 c4"),
    ([_nc_row("dispersed p16 c4", ratio=(1.1, 1.0, 1.2)), _nc_row("sequential p16 c4", ratio=(3.0, 2.8, 3.2))],
     report.FAILS, "sequential p16 c4: time to target x3.000"),
    # the finest partitioning decides, not the best of several: p = 64 fails although p = 16 holds
    ([_nc_row("sequential p16 c4", ratio=(1.1, 1.0, 1.2)),
      _nc_row("sequential p64 c16", partitions=64, capacity=16, ratio=(2.0, 1.8, 2.2))], report.FAILS,
     "sequential p64 c16: time to target x2.000"),
    ([_nc_row("sequential p16 c8", capacity=8), _nc_row("sequential p16 c4 no-prefetch", prefetch=False)],
     report.NOT_TESTABLE, "no disk run with prefetch at c = p/4"),
    # every dataset needs one: papers holds, physics does not
    ([_nc_row("sequential p16 c4"), _nc_row("sequential p16 c4", dataset="physics", ratio=(2.0, 1.8, 2.2))],
     report.FAILS, "physics sequential p16 c4: time to target x2.000"),
])
def test_disk_out_of_core_verdicts(tmp_path, rows, verdict, text):
    pd.DataFrame([MEMORY_ROW] + rows).to_csv(tmp_path / "disk_nc.csv", index=False)
    finding = report.claims().get("disk-out-of-core").evaluate(tmp_path)
    assert finding.verdict == verdict
    assert text in finding.measured + finding.reason


@pytest.mark.parametrize("rows, verdict, text", [
    ([_nc_row("sequential p16 c4", gap=(-0.002, -0.006, 0.002))], report.HOLDS, "-0.002 [-0.006, 0.002]"),
    ([_nc_row("sequential p16 c4", gap=(-0.14, -0.156, -0.122))], report.FAILS, "-0.140 [-0.156, -0.122]"),
    ([_nc_row("sequential p16 c4", gap=(-0.01, -0.02, 0.0))], report.INCONCLUSIVE, "-0.010 [-0.020, 0.000]"),
    ([_nc_row("sequential p16 c4", seeds=2, gap=(0.0, -0.001, 0.001))], report.INCONCLUSIVE, "0.000 [-0.001"),
    # only c = p/4 decides: a c = p/2 row within a point does not rescue a c = p/4 row that loses 0.05
    ([_nc_row("sequential p16 c8", capacity=8, gap=(0.0, -0.002, 0.002)),
      _nc_row("sequential p16 c4", gap=(-0.05, -0.06, -0.04))], report.FAILS, "papers sequential p16 c8 0.000"),
    ([_nc_row("sequential p16 c4"), _nc_row("sequential p16 c4", dataset="physics", gap=(-0.05, -0.06, -0.04))],
     report.FAILS, "physics sequential p16 c4 -0.050"),
    # a dispersed row within a point does not rescue the deciding sequential row
    ([_nc_row("dispersed p16 c4"), _nc_row("sequential p16 c4", gap=(-0.05, -0.06, -0.04))], report.FAILS,
     "papers sequential p16 c4 -0.050"),
    ([_nc_row("sequential p16 c4", gap=(-0.05, -0.06, -0.04)),
      _nc_row("sequential p512 c128", partitions=512, capacity=128)], report.HOLDS, "papers sequential p512 c128"),
])
def test_disk_accuracy_verdicts(tmp_path, rows, verdict, text):
    pd.DataFrame([MEMORY_ROW] + rows).to_csv(tmp_path / "disk_nc.csv", index=False)
    finding = report.claims().get("disk-accuracy").evaluate(tmp_path)
    assert finding.verdict == verdict
    assert text in finding.measured


def test_accelerator_projection_of_a_recorded_sync_run(tmp_path):
    from experiments.figures.pipeline_validation import project

    run = _write_run(tmp_path / "runs", "sync", "pipelined", {"sync": True},
                     [{"epoch_time_s": 0.25}, {"epoch_time_s": 0.25}], batches=4)
    measured = pd.DataFrame([{"dataset": "toy", "sampler": "dense", "system": "pipelined", "configuration": "sync",
                              "run_dir": str(run)}])
    table = project(measured, "p3.2xlarge", seeds=3).set_index("configuration")
    assert list(table.index) == ["sync", "4T 2X q4/4 b16"] and (table["kind"] == "projection (simulator)").all()
    pipelined = table.loc["4T 2X q4/4 b16"]
    assert pipelined["seeds"] == 3 and pipelined["profile"] == "p3.2xlarge"
    assert 0 < pipelined["compute_utilization"] <= 1
    # on a GPU the 50 ms CPU compute takes microseconds: loading is the bottleneck that the pipeline overlaps
    assert pipelined["time_ratio_vs_sync"] < 1
    assert pipelined["time_ratio_vs_sync_ci_low"] <= pipelined["time_ratio_vs_sync"] <= \
        pipelined["time_ratio_vs_sync_ci_high"]


def test_full_mode_shares_the_accuracy_grids_runs_and_holds_every_claims_evidence():
    """Full mode: disk_nc.yaml at the accuracy grid's papers-like-s settings (200,000 nodes, 40 epochs), so the runs
    both grids name are one run each; it holds what each claim decides from on each dataset (in-memory and
    sequential at c / p = 0.25 at the finest p, 3 seeds) and the pipelined sync runs disk-cost projects from."""
    full = disk_nc.all_specs([], quick=False)
    assert len({spec.run_id for spec in full}) == len(full)
    own = disk_nc.grid_specs(disk_nc.GRID, list(disk_nc.FULL), False)
    accuracy = [spec for spec in disk_nc.grid_specs(disk_nc.FULL_SWEEP, [], False)
                if not disk_nc.left_out_of_full(spec)]
    assert {spec.run_id for spec in own} & {spec.run_id for spec in accuracy}  # shared, not run twice
    assert len(full) == len({spec.run_id for spec in own} | {spec.run_id for spec in accuracy}) == 60
    left_out = [spec for spec in disk_nc.grid_specs(disk_nc.FULL_SWEEP, [], False) if disk_nc.left_out_of_full(spec)]
    assert len(left_out) == 15 and all(spec.system.name == "disk" for spec in left_out)
    assert all(spec.dataset.name == "coauthor-physics" or spec.system.options["policy"] == "dispersed"
               for spec in left_out)

    def seeds(dataset, system, **options):
        return {spec.seed for spec in full if (spec.dataset.preset or spec.dataset.name) == dataset
                and spec.system.name == system and options.items() <= dict(spec.system.options).items()}

    for dataset in ("papers-like-s", "coauthor-physics"):
        finest = max(spec.system.options["num_partitions"] for spec in full
                     if (spec.dataset.preset or spec.dataset.name) == dataset and spec.system.name == "disk")
        assert seeds(dataset, "in_memory") == {0, 1, 2}
        assert seeds(dataset, "disk", policy="sequential", num_partitions=finest,
                     buffer_capacity=finest // 4) == {0, 1, 2}
    assert seeds("papers-like-s", "pipelined", sync=True) == {0, 1, 2}
    assert {spec.training.epochs for spec in full if spec.dataset.preset == "papers-like-s"} == {40}
