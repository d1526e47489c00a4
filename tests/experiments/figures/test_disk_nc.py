"""The disk node-classification tables (experiments/figures/disk_nc.py): runs (each its warm epochs' mean) as the timing
repeats, intervals over seeds, ratios to in-memory paired by seed, foreign load per run, and the figure drawn from the table; and the pipeline simulator's
accelerator projection (experiments/figures/pipeline_validation.py) on hand-made recorded runs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from experiments.figures import disk_nc
from tests.experiments.figures.recorded_runs import write_run


def _write_run(root: Path, run_id: str, system: str, options: dict, epochs: list[dict], load: dict | None = None,
               batches: int = 0, seed: int = 0, accuracy: float = 0.5) -> Path:
    """A completed run on "toy" with these epoch records, test accuracy and (optionally) foreign load."""
    summary = {"dataset": "toy", "seed": seed,
               "dataset_info": {"name": "toy", "num_nodes": 1000, "num_edges": 5000, "feature_dim": 128},
               "epoch_time_s": [e["epoch_time_s"] for e in epochs],
               "metrics": {"main": "accuracy", "test": {"accuracy": accuracy}}}
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
