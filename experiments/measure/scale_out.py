"""Scale-out on existing engines: data-parallel training (torch.distributed) and a grid on Ray vs locally.

Usage::

    python experiments/measure/scale_out.py [--quick] [--out out/scale_out] [--results out/results] [--part ddp|grid|both]

Two measurements, each through the harness (``gnnsuite run`` / ``gnnsuite grid`` do the same):

- ``out/results/scale_out_ddp.csv``: Cora (``experiments/specs/cora.yaml``: 2-layer GraphSAGE, batch 64, 30 epochs) on
  the ``in_memory`` system with 1 rank and with 2 ranks (``system.options.world_size: 2``; gloo on the CPU; each
  rank takes half of every batch of 64, so the total batch size and the optimizer steps are the same), seeds 0, 1,
  2. One row per run: valid/test accuracy, final training loss, mean epoch time (epochs after the first), and per
  rank its mean busy time per epoch of ``sample`` and ``compute`` and its all-reduce time per epoch (part of
  ``compute``). The process start-up of the ranks (imports, rendezvous) is outside the epoch times but inside
  ``wall_s``.
- ``out/results/scale_out_grid.csv`` (and every repeat in ``scale_out_grid_runs.csv``): one grid
  (``experiments/specs/quickstart_grid.yaml`` -- GraphSAGE and MLP on ``arxiv-like`` -- with a seed axis of 2: 4 runs of
  one epoch of 20 batches, no evaluation) through ``gnnsuite grid`` on every executor, each into a fresh folder:
  local (1 job; a process pool of 2), Ray (a local instance started by the grid; a cluster of 2 ``ray start``
  nodes of 1 CPU each on loopback, ``--address``), and submitit's local executor (Slurm's interface, 2 jobs);
  3 repeats, round robin. Columns: the grid's wall time (median, min, max: the whole command, with start-up and,
  for the local Ray instance, starting and stopping it), the median per-run wall time (from the runs' summaries),
  the cluster's start-up time (``setup_s``, outside ``wall_s``), and the nodes the runs ran on. The cluster is
  started once, before the first repeat, and stays up (idle: its GCS, raylets and agents) during the other
  executors' rows too; on 2 cores that idle load slows them a little. The runs are sub-second, so on this machine
  the table measures each executor's overhead (start-up, scheduling, process reuse), not a speed-up.

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

from experiments.common import REPO_ROOT, RESULTS, write_csv

import pandas as pd

from suite.config import load_spec
from suite.grid import expand_grid, failures, load_grid, parse_grid, run_grid
from suite.io import strict_json_dumps
from suite.recorder import read_records, read_summary
from suite.runner import run_spec

CORA = REPO_ROOT / "experiments" / "specs" / "cora.yaml"
GRID = REPO_ROOT / "experiments" / "specs" / "quickstart_grid.yaml"
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


def _grid_file(out: Path, quick: bool, data_dir: str) -> Path:
    """The measured grid, written out as a file for ``gnnsuite grid``: the quickstart grid (GraphSAGE and MLP on
    ``arxiv-like``) with a seed axis, one epoch of 20 batches per run, no evaluation."""
    import yaml

    grid = load_grid(GRID)
    base = dict(grid.base)
    overrides = {"dataset": {**base.get("dataset", {}), "cache_dir": str(Path(data_dir).resolve())},
                 "training": {**base.get("training", {}), "epochs": 1, "limit_batches": 20},
                 "evaluation": {**base.get("evaluation", {}), "splits": []},
                 "system": {**base.get("system", {}), "device": "cpu"}}
    data = {"name": grid.name, "base": {**base, **overrides},
            "axes": {"model.encoder": ["graphsage", "mlp"], **({} if quick else {"seed": [0, 1]})}}
    path = out / "scale_out_grid.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    expand_grid(path)  # validates it
    return path


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.pop("RAY_ADDRESS", None)
    return env


def _executor_settings(quick: bool) -> list[dict]:
    """Each measured executor: its ``gnnsuite grid`` options and what it runs on (all on this machine)."""
    return [
        {"executor": "local", "setting": "1 job", "options": ["--jobs", "1"]},
        {"executor": "local", "setting": "process pool, 2 jobs", "options": ["--jobs", "2"]},
        {"executor": "ray", "setting": "local instance (2 CPUs, 1 per run), started by the grid",
         "options": ["--cpus-per-run", "1"], "needs": "ray-local"},
        {"executor": "ray", "setting": "cluster: 2 nodes (ray start) x 1 CPU, 1 per run", "options": [],
         "needs": "ray-cluster"},
        {"executor": "slurm", "setting": "submitit local executor, 2 jobs",
         "options": ["--submitit-cluster", "local", "--jobs", "2"]},
    ]


def grid_rows(out: Path, quick: bool, data_dir: str, repeats: int = 3) -> list[dict]:
    """The same grid through ``gnnsuite grid`` on every executor of :func:`_executor_settings`, ``repeats`` times
    (round robin: every repeat runs each executor once, in turn, so drifts of the machine's load hit all of them),
    each time into a fresh folder. A row per (executor, repeat): the grid's wall time (the command: start-up, the
    runs, and for ``ray`` without ``--address`` starting and stopping the instance), the per-run wall times from
    the summaries, and the nodes the runs ran on. The Ray cluster is started once, before the first repeat (its
    start time is ``setup_s`` of its rows)."""
    import os
    import subprocess
    import tempfile

    from suite.datasets import open_dataset
    from suite.ray_cluster import LocalRayCluster, LoopbackNamespace

    grid = _grid_file(out, quick, data_dir)
    specs = expand_grid(grid)
    for spec in {s.dataset.name + str(s.dataset.preset): s for s in specs}.values():
        open_dataset(spec.dataset)  # generated before any timing
    settings = _executor_settings(quick)
    cluster = namespace = None
    ray_tmp = Path(tempfile.mkdtemp(prefix="ray-"))
    rows = []
    try:
        started = time.perf_counter()
        cluster = LocalRayCluster(extra_env={"PYTHONPATH": _env()["PYTHONPATH"]})
        cluster.start_head(num_cpus=1, name="head")
        cluster.add_node("worker1", num_cpus=1)
        cluster_setup_s = time.perf_counter() - started
        namespace = LoopbackNamespace() if LoopbackNamespace.available() else None
        for repeat in range(repeats):
            for setting in settings:
                folder = out / f"grid-{len(rows)}"
                shutil.rmtree(folder, ignore_errors=True)
                argv = ["grid", str(grid), "--out", str(folder), "--executor", setting["executor"], "--quiet",
                        *setting["options"]]
                env, prefix, setup_s = _env(), [], 0.0
                if setting.get("needs") == "ray-cluster":
                    argv += ["--address", cluster.address]
                    env, prefix, setup_s = cluster.env(env), cluster.command([]), cluster_setup_s
                elif setting.get("needs") == "ray-local":
                    env.update(RAY_TMPDIR=str(ray_tmp), RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
                    prefix = namespace.command([]) if namespace else []
                load = os.getloadavg()[0]
                began = time.perf_counter()
                done = subprocess.run([*prefix, sys.executable, "-m", "suite", *argv], env=env, capture_output=True,
                                      text=True, stdin=subprocess.DEVNULL, timeout=1800)
                wall = time.perf_counter() - began
                if done.returncode != 0:
                    raise RuntimeError(f"{setting['executor']} ({setting['setting']}): exit {done.returncode}: "
                                       f"{done.stderr[-2000:]}")
                summaries = [read_summary(folder / spec.run_id) for spec in specs]
                if any(s is None or s.get("status") != "completed" for s in summaries):
                    raise RuntimeError(f"{setting['executor']}: runs did not complete: {done.stderr[-2000:]}")
                run_walls = [s["wall_time_s"] for s in summaries]
                nodes = sorted({(s.get("placement") or {}).get("node_name") or "driver" for s in summaries})
                rows.append({
                    "grid": "quickstart_grid" + ("" if quick else " (+seed axis)"), "executor": setting["executor"],
                    "setting": setting["setting"], "repeat": repeat, "runs": len(specs), "wall_s": wall,
                    "setup_s": setup_s, "per_run_wall_s_mean": statistics.mean(run_walls),
                    "per_run_wall_s_max": max(run_walls), "sum_run_wall_s": sum(run_walls),
                    "mean_epoch_time_s": statistics.mean(s["epoch_time_s"][0] for s in summaries),
                    "nodes": "+".join(nodes), "load_avg_1m_before": load,
                    "git_sha": (summaries[0].get("versions") or {}).get("git_sha"),
                })
                print(strict_json_dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in rows[-1].items()}),
                      file=sys.stderr)
    finally:
        if cluster is not None:
            left = cluster.stop()
            if left:
                print(f"Ray processes left behind: {left}", file=sys.stderr)
        if namespace is not None:
            namespace.close()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    return rows


def grid_summary(rows: list[dict]) -> "pd.DataFrame":
    """Per executor: median (and min, max) grid wall time and per-run wall time over the repeats."""
    frame = pd.DataFrame(rows)
    keys = ["grid", "executor", "setting", "runs"]
    summary = frame.groupby(keys, sort=False).agg(
        repeats=("wall_s", "size"), wall_s_median=("wall_s", "median"), wall_s_min=("wall_s", "min"),
        wall_s_max=("wall_s", "max"), per_run_wall_s_median=("per_run_wall_s_mean", "median"),
        setup_s=("setup_s", "first"), nodes=("nodes", "first")).reset_index()
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurements and write the CSV files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer epochs and runs (for the tests)")
    parser.add_argument("--out", default=None, help="runs folder (default out/scale_out[-quick])")
    parser.add_argument("--results", default=str(RESULTS), help="where the CSV files go")
    parser.add_argument("--data-dir", default="data", help="dataset cache folder")
    parser.add_argument("--part", choices=("ddp", "grid", "both"), default="both")
    parser.add_argument("--repeats", type=int, default=3, help="grid: repeats per executor (default 3)")
    args = parser.parse_args(argv)
    out = Path(args.out or f"out/scale_out{'-quick' if args.quick else ''}")
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    if args.part in ("ddp", "both"):
        frame = pd.DataFrame(ddp_rows(out / "ddp", args.quick, args.data_dir))
        write_csv(frame, results / "scale_out_ddp.csv")
        print(frame.drop(columns=["run_id"]).to_string(index=False))
    if args.part in ("grid", "both"):
        rows = grid_rows(out, args.quick, args.data_dir, repeats=args.repeats)
        write_csv(pd.DataFrame(rows), results / "scale_out_grid_runs.csv")
        frame = grid_summary(rows)
        write_csv(frame, results / "scale_out_grid.csv")
        print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
