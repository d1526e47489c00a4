"""The pipeline on a GPU in a few minutes: pinned memory, side-stream transfers, NVML utilization.

Usage::

    python experiments/measure/pipeline_cuda.py [--device cuda] [--preset arxiv-like] [--batches K] [--seeds 10]
        [--out out/pipeline-cuda] [--results DIR]

This is how the pipeline-utilization claim is measured where a GPU is present (``gnnsuite reproduce`` runs it
when CUDA is available): with ``--results DIR`` the table (one row per run and seed) goes to
``DIR/pipeline_cuda.csv``, which ``experiments/report.py`` decides the claim from (intervals over the seeds).

Runs ``in_memory``, ``pipelined`` with ``sync: true`` and ``pipelined`` with Marius's defaults (4 loader threads,
2 transfer workers on their own CUDA streams, queues of 4, staleness bound 16) on the same spec (3-layer
GraphSAGE, fanouts 15,10,5, batch 1000, both samplers, two whole epochs, no evaluation), then prints per run: the
warm epoch's time, its ratio to in-memory, compute utilization (compute busy / epoch time), NVML GPU utilization
(mean over the run, setup included), pipeline efficiency, the bottleneck stage and the staleness; the table also
names the GPU (``device_name``).

Whole epochs, because the claim is about the steady state: measured on an NVIDIA H200 (10 seeds each), an epoch of
30 batches (5.7 ms each) spent about a tenth of its time filling and draining the pipeline, and the pipelined runs'
compute utilization was 0.850 (naive) and 0.865 (dense), below the claim's 0.9; over the whole epoch of 91 batches
it was 0.926 and 0.937. NVML saw the GPU busy only about a quarter of each run: this 3-layer GraphSAGE at batch 1000
is bound by the compute stage's host work (kernel launches), not by the H200's arithmetic.

On CUDA the systems take the GPU path by themselves (``system.device: auto``): features are gathered into pinned
memory, copied with ``non_blocking`` on a side stream per transfer worker, and the compute stream waits on the
copy's event. Without CUDA the script says so and exits with status 3, unless ``--device cpu`` asks for the same
runs on the CPU (how the tests exercise it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import torch

from experiments.common import REPO_ROOT, JobFailed, check_failed, cli
from experiments.pipeline_runs import speed_table
from suite.config import spec_from_dict
from suite.grid import failures, run_grid
from suite.results import load_runs

EXIT_NO_CUDA = 3
CLAIM_SEEDS = 10
"""Seeds of the full reproduction's GPU grid (quick: 3). A seed's 6 runs took about 20 s on an H200; at 30-batch
epochs 3 seeds left the compute-utilization intervals about +-0.05 wide, 10 about +-0.012."""
CONFIGURATIONS = (("in_memory", {}), ("pipelined", {"sync": True}), ("pipelined", {}))


def specs(device: str, preset: str, batches: int | None, batch_size: int, samplers: Sequence[str],
          seeds: Sequence[int] = (0,)) -> list:
    """The run specs: every configuration x sampler x seed on one dataset and model."""
    return [
        spec_from_dict({
            "name": "pipeline-cuda",
            "dataset": {"name": "synthetic", "preset": preset, "cache_dir": str(REPO_ROOT / "data")},
            "model": {"encoder": "graphsage", "num_layers": 3, "hidden_dim": 128, "fanouts": [15, 10, 5]},
            "sampler": {"name": sampler},
            "system": {"name": system, "device": device, "options": options},
            "training": {"batch_size": batch_size, "epochs": 2, "learning_rate": 0.005, "limit_batches": batches},
            "evaluation": {"splits": []}, "seed": seed,
        }, source="pipeline_cuda.py")
        for seed in seeds for sampler in samplers for system, options in CONFIGURATIONS
    ]


def run(*, device: str = "cuda", preset: str = "arxiv-like", batches: int | None = None, batch_size: int = 1000,
        samplers: Sequence[str] = ("naive", "dense"), seeds: int = 1, runs: Path = REPO_ROOT / "out" / "pipeline-cuda",
        results: Path | None = None) -> pd.DataFrame:
    """Run every configuration x sampler x seed (``seeds`` of them) on ``device`` into ``runs``, each epoch whole
    (``batches``: its first k batches only); write
    ``pipeline_cuda.csv`` into ``results`` (none: no table); return the table. Raises :class:`JobFailed` when runs
    failed, or (status :data:`EXIT_NO_CUDA`) when ``device`` is CUDA and there is none."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise JobFailed("CUDA is not available on this machine (use --device cpu to run the same on the CPU)",
                        status=EXIT_NO_CUDA)
    summaries = run_grid(specs(device, preset, batches, batch_size, samplers, range(seeds)), runs, progress=False)
    check_failed(failures(summaries))
    table = speed_table(runs)
    recorded = load_runs(runs, include_incomplete=False).set_index("run_id")
    table["gpu_utilization"] = [recorded.loc[run_id].get("gpu_utilization") for run_id in table["run_id"]]
    table["device"] = [recorded.loc[run_id].get("device") for run_id in table["run_id"]]
    table["device_name"] = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    if results is not None:
        from suite.results import export

        export(table, results / "pipeline_cuda.csv")
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(table[["device", "dataset", "sampler", "configuration", "seed", "epoch_time_s", "time_ratio_vs_in_memory",
                     "compute_utilization", "gpu_utilization", "pipeline_efficiency", "bottleneck_stage",
                     "staleness_max"]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return table


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--preset", default="arxiv-like")
    parser.add_argument("--batches", type=int, help="train on the first K batches of every epoch (default: the whole "
                        "epoch, 91 batches of arxiv-like; short epochs measure the pipeline's fill and drain)")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--samplers", nargs="+", default=["naive", "dense"])
    parser.add_argument("--seeds", type=int, default=1, help="seeds per configuration (the reproduction "
                        "runs CLAIM_SEEDS = 10)")
    parser.add_argument("--out", dest="runs", type=Path, default=REPO_ROOT / "out" / "pipeline-cuda")
    parser.add_argument("--results", type=Path, help="write pipeline_cuda.csv into this folder")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "pipeline_cuda")


if __name__ == "__main__":
    sys.exit(main())
