"""The disk node-classification table (experiments/disk.py): warm epochs as the timing repeats, intervals, the
ratio to in-memory, foreign load per run, and the figure drawn from the table; and the pipeline simulator's
accelerator projection (experiments/pipeline_validation.py) on hand-made recorded runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from experiments import disk, figures
from suite.config import load_spec

REPO = Path(__file__).resolve().parents[2]


def _write_run(root: Path, run_id: str, system: str, options: dict, epochs: list[dict], load: dict | None = None,
               batches: int = 0) -> Path:
    """A completed run folder as the recorder writes it (config.yaml, records.jsonl, summary.json)."""
    spec = load_spec(REPO / "experiments" / "quickstart.yaml", [f"system.name={system}", "training.epochs=2"])
    if options:
        spec = spec.model_copy(update={"system": spec.system.model_copy(update={"options": options})})
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(spec.to_yaml())
    records = []
    for number, epoch in enumerate(epochs):
        for index in range(batches):  # 10 ms load, 1 ms transfer, 50 ms compute per batch, one after the other
            t = index * 0.061
            records.append({"kind": "batch", "epoch": number, "index": index, "load_start": t,
                            "load_end": t + 0.01, "transfer_start": t + 0.01, "transfer_end": t + 0.011,
                            "compute_start": t + 0.011, "compute_end": t + 0.061, "sampled_edges": 20000,
                            "input_nodes": 5000})
        records.append({"kind": "epoch", "epoch": number, **epoch})
    (run_dir / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = {"run_id": run_id, "status": "completed", "system": system, "dataset": "toy", "seed": 0,
               "dataset_info": {"name": "toy", "num_nodes": 1000, "num_edges": 5000, "feature_dim": 128},
               "epoch_time_s": [e["epoch_time_s"] for e in epochs],
               "metrics": {"main": "accuracy", "test": {"accuracy": 0.5}},
               "machine": {"cpu_model": "AMD EPYC", "cpu_cores": 2, "torch_threads": 2}, "device": "cpu"}
    if load is not None:
        summary["machine_load"] = load
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


def test_table_uses_the_warm_epochs_as_repeats(tmp_path):
    runs = tmp_path / "runs"
    _write_run(runs, "mem", "in_memory", {}, [{"epoch_time_s": t} for t in (9.0, 2.0, 2.1, 1.9)],
               load={"foreign_cpu_s": 0.1, "foreign_cores": 0.01, "under_load": False})
    _write_run(runs, "seq", "disk", {"policy": "sequential", "num_partitions": 8, "buffer_capacity": 2},
               [{"epoch_time_s": t, "io_wait_s": w, "io_read_bytes": 1e6, "io_read_s": 0.01}
                for t, w in ((9.0, 5.0), (3.0, 0.3), (3.1, 0.31), (2.9, 0.29))],
               load={"foreign_cpu_s": 5.0, "foreign_cores": 0.5, "under_load": True})
    table = disk.table(runs).set_index("configuration")
    memory, seq = table.loc["in_memory"], table.loc["sequential p8 c2"]
    assert memory["warm_epochs"] == 3 and memory["epoch_time_s"] == pytest.approx(2.0)  # the cold epoch left out
    assert memory["epoch_time_s_ci_low"] < 2.0 < memory["epoch_time_s_ci_high"]
    assert seq["io_wait_fraction"] == pytest.approx(0.1) and seq["io_wait_fraction_ci_high"] == pytest.approx(0.1)
    geometric = math.exp(sum(math.log(t) for t in (3.0, 3.1, 2.9)) / 3 - sum(math.log(t) for t in (2.0, 2.1, 1.9)) / 3)
    assert seq["time_ratio_vs_in_memory"] == pytest.approx(geometric)
    assert seq["time_ratio_vs_in_memory_ci_low"] < geometric < seq["time_ratio_vs_in_memory_ci_high"]
    assert seq["under_load"] and not memory["under_load"] and seq["foreign_cores"] == 0.5

    csv = tmp_path / "disk_nc.csv"
    table.reset_index().assign(io_wait_s=lambda t: t["io_wait_fraction"].fillna(0) * t["epoch_time_s"],
                               disk_read_bytes=1e6).to_csv(csv, index=False)
    png = figures.FIGURES["disk_nc"](csv, tmp_path / "disk_nc.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_runs_without_the_load_field_are_unknown_not_flagged(tmp_path):
    runs = tmp_path / "runs"
    _write_run(runs, "mem", "in_memory", {}, [{"epoch_time_s": t} for t in (3.0, 2.0)])
    row = disk.table(runs).iloc[0]
    assert pd.isna(row["under_load"]) and math.isnan(row["foreign_cores"])
    assert row["warm_epochs"] == 1 and math.isnan(row["epoch_time_s_ci_low"])  # one warm epoch: no interval


def test_accelerator_projection_of_a_recorded_sync_run(tmp_path):
    from experiments.pipeline_validation import project

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
