"""Scale-out on existing engines: data-parallel training (torch.distributed) and a grid on Ray vs locally.

Usage::

    python experiments/scale_out.py [--quick] [--out out/scale_out] [--results results] [--part ddp|grid|both]

Two measurements, each through the harness (``gnnsuite run`` / ``gnnsuite grid`` do the same):

- ``results/scale_out_ddp.csv``: Cora (``experiments/cora.yaml``: 2-layer GraphSAGE, batch 64, 30 epochs) on
  the ``in_memory`` system with 1 rank and with 2 ranks (``system.options.world_size: 2``; gloo on the CPU; each
  rank takes half of every batch of 64, so the total batch size and the optimizer steps are the same), seeds 0, 1,
  2. One row per run: valid/test accuracy, final training loss, mean epoch time (epochs after the first), and per
  rank its mean busy time per epoch of ``sample`` and ``compute`` and its all-reduce time per epoch (part of
  ``compute``). The process start-up of the ranks (imports, rendezvous) is outside the epoch times but inside
  ``wall_s``.
- ``results/scale_out_grid.csv``: wall time of one grid (``experiments/quickstart_grid.yaml`` -- GraphSAGE and
  MLP on ``arxiv-like`` -- with a seed axis of 2: 4 runs of one epoch of 20 batches, no evaluation) on the local
  executor (``--jobs 1`` and ``--jobs 2``) and on a local Ray instance started by the executor (2 CPUs, 1 CPU per
  run), each into a fresh folder. The Ray time includes starting and stopping the instance.

``--quick``: 5 epochs of Cora and a 2-run grid (seconds to a couple of minutes; for the tests).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script: make `suite` importable
    sys.path.insert(0, str(REPO_ROOT))

import pandas as pd  # noqa: E402

from suite.config import load_spec  # noqa: E402
from suite.grid import expand_grid, failures, load_grid, parse_grid, run_grid  # noqa: E402
from suite.io import strict_json_dumps  # noqa: E402
from suite.recorder import read_records  # noqa: E402
from suite.runner import run_spec  # noqa: E402

CORA = REPO_ROOT / "experiments" / "cora.yaml"
GRID = REPO_ROOT / "experiments" / "quickstart_grid.yaml"
SEEDS = (0, 1, 2)


def _shared_datasets() -> Path:
    import os

    return Path(os.environ.get("GNNSUITE_SHARED", REPO_ROOT.parent / "shared")) / "datasets"


def ddp_rows(out: Path, quick: bool, data_dir: str) -> list[dict]:
    """Cora, 1 rank vs 2 ranks, 3 seeds: one row per run."""
    rows = []
    for seed in SEEDS[:2] if quick else SEEDS:
        for world in (1, 2):
            overrides = [f"seed={seed}", f"dataset.root={_shared_datasets() / 'planetoid'}",
                         f"dataset.cache_dir={data_dir}", "system.device=cpu"]
            if world > 1:
                overrides.append(f"system.options.world_size={world}")
            if quick:
                overrides += ["training.epochs=5"]
            spec = load_spec(CORA, overrides)
            started = time.perf_counter()
            summary = run_spec(spec, out, overwrite=True)
            wall = time.perf_counter() - started
            epochs = [r for r in read_records(out / spec.run_id) if r["kind"] == "epoch"]
            warm = epochs[1:] or epochs
            row = {
                "dataset": "cora", "system": spec.system.name, "world_size": world, "seed": seed,
                "batch_size_total": spec.training.batch_size, "epochs": len(epochs),
                "valid_accuracy": summary["metrics"]["valid"].get("accuracy"),
                "test_accuracy": summary["metrics"]["test"].get("accuracy"),
                "final_loss": summary["loss"][-1],
                "epoch_time_s": statistics.mean(r["epoch_time_s"] for r in warm),
                "wall_s": wall, "run_id": spec.run_id,
            }
            for rank in range(world):
                entries = [r["ranks"][rank] if "ranks" in r else {**r, "allreduce_s": 0.0} for r in warm]
                row[f"rank{rank}_sample_s"] = statistics.mean(e["stage_busy_s"].get("sample", 0.0) for e in entries)
                row[f"rank{rank}_compute_s"] = statistics.mean(e["stage_busy_s"].get("compute", 0.0)
                                                               for e in entries)
                row[f"rank{rank}_allreduce_s"] = statistics.mean(e["allreduce_s"] for e in entries)
            rows.append(row)
            print(strict_json_dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}),
                  file=sys.stderr)
    return rows


def grid_rows(out: Path, quick: bool, data_dir: str) -> list[dict]:
    """The same grid on the local executor (1 and 2 jobs) and on a local Ray instance: wall time of each."""
    from suite.executors import ExecutorOptions

    grid = load_grid(GRID)
    data = {"name": grid.name, "base": grid.base, "axes": {"model.encoder": ["graphsage", "mlp"],
                                                            **({} if quick else {"seed": [0, 1]})}}
    overrides = [f"dataset.cache_dir={data_dir}", "training.epochs=1", "training.limit_batches=20",
                 "evaluation.splits=[]", "system.device=cpu"]
    specs = expand_grid(parse_grid(data, source=str(GRID), base_dir=GRID.parent), overrides)
    rows = []
    for executor, jobs, options in (
        ("local", 1, None),
        ("local", 2, None),
        ("ray", None, {"cpus_per_run": 1.0}),
    ):
        folder = out / f"grid-{executor}-{jobs or 'auto'}"
        shutil.rmtree(folder, ignore_errors=True)
        started = time.perf_counter()
        summaries = run_grid(specs, folder, jobs=jobs, progress=False, executor=executor,
                             executor_options=ExecutorOptions(**options) if options else None)
        wall = time.perf_counter() - started
        if failures(summaries):
            raise RuntimeError(f"{executor}: failed runs: {[s.get('error') for s in failures(summaries)]}")
        rows.append({"grid": "quickstart_grid (+seed axis)" if not quick else "quickstart_grid",
                     "executor": executor, "jobs": jobs if jobs else "ray (2 CPUs, 1 per run)",
                     "runs": len(specs), "wall_s": wall,
                     "sum_run_wall_s": sum(s["wall_time_s"] for s in summaries),
                     "mean_epoch_time_s": statistics.mean(s["epoch_time_s"][0] for s in summaries)})
        print(strict_json_dumps(rows[-1]), file=sys.stderr)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurements and write the CSV files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer epochs and runs (for the tests)")
    parser.add_argument("--out", default=None, help="runs folder (default out/scale_out[-quick])")
    parser.add_argument("--results", default=str(REPO_ROOT / "results"), help="where the CSV files go")
    parser.add_argument("--data-dir", default="data", help="dataset cache folder")
    parser.add_argument("--part", choices=("ddp", "grid", "both"), default="both")
    args = parser.parse_args(argv)
    out = Path(args.out or f"out/scale_out{'-quick' if args.quick else ''}")
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    if args.part in ("ddp", "both"):
        frame = pd.DataFrame(ddp_rows(out / "ddp", args.quick, args.data_dir))
        frame.to_csv(results / "scale_out_ddp.csv", index=False)
        print(frame.drop(columns=["run_id"]).to_string(index=False))
    if args.part in ("grid", "both"):
        frame = pd.DataFrame(grid_rows(out, args.quick, args.data_dir))
        frame.to_csv(results / "scale_out_grid.csv", index=False)
        print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
