"""Compare the systems' peak-memory estimates (:mod:`suite.memory`) with the peak RSS their runs measure.

Usage::

    python experiments/measure/memory_estimate.py [--out /tmp/memest] [--only NAME ...] [--csv FILE]
    python experiments/measure/memory_estimate.py --from-runs DIR [DIR ...] [--csv FILE]

Each case (a small version of an experiment grid: in-memory, pipelined, disk and feature-cache node
classification, disk link prediction, at two sizes) runs once, in a fresh process (``gnnsuite run``): the runner
estimates the peak before training (``summary.json``: ``memory_estimate.peak_bytes``, the runtime included: what the
process held after its imports) and records the measured peak (``peak_rss_bytes``: the run's ``VmHWM``). Printed per case: both, the relative
error ``(estimate - measured) / measured``, and the same error on the part above the runtime (what the data and
the batches add), which a large runtime would otherwise hide; then the median and worst relative errors over the
cases that are not calibration cases (the tiny ones, from which the first-use constants come). ``--from-runs``
runs nothing and tabulates the same for every completed run of experiment grids (each run records both).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

NC = {"model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 128, "fanouts": [10, 10]},
      "sampler": {"name": "naive"},
      "training": {"batch_size": 1000, "epochs": 1, "limit_batches": 10, "learning_rate": 0.005},
      "evaluation": {"batch_size": 4096}}
LP = {"model": {"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": "distmult", "embedding_dim": 64,
                "learnable_embeddings": True, "dropout": 0.0},
      "training": {"task": "link_prediction", "batch_size": 1000, "epochs": 1, "optimizer": "adagrad",
                   "learning_rate": 0.1, "negatives": {"num_chunks": 10, "negatives_per_positive": 200}},
      "evaluation": {"batch_size": 1000, "negatives": 1000}}
ARXIV = {"name": "synthetic", "preset": "arxiv-like", "cache_dir": "data"}
HALF_ARXIV = {**ARXIV, "params": {"name": "arxiv-like-85k", "num_nodes": 85_000}}


def lp_graph(nodes: int) -> dict:
    """A synthetic typed graph for link prediction (experiments/specs/link_prediction_synthetic.yaml's, resized)."""
    return {"name": "synthetic", "preset": "tiny", "cache_dir": "data",
            "params": {"name": f"lp-like-{nodes // 1000}k", "num_nodes": nodes, "avg_degree": 12.0,
                       "num_classes": 50, "homophily": 0.8, "feature_dim": 32, "label_rate": 0.0,
                       "num_relations": 8, "relation_noise": 0.1, "valid_edge_fraction": 0.05,
                       "test_edge_fraction": 0.05}}


def disk(partitions: int, capacity: int, **more) -> dict:
    """The disk system's section."""
    return {"name": "disk", "device": "cpu", "options": {"num_partitions": partitions, "buffer_capacity": capacity,
                                                         **more}}


CASES: dict[str, dict] = {
    "in_memory-nc-tiny": {**NC, "dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": "data"},
                          "system": {"name": "in_memory", "device": "cpu"}},
    "in_memory-lp-tiny": {**LP, "dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": "data"},
                          "system": {"name": "in_memory", "device": "cpu"}},
    "disk-nc-tiny-p4c2": {**NC, "dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": "data"},
                          "system": disk(4, 2, policy="dispersed")},
    "disk-lp-tiny-p4c2": {**LP, "dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": "data"},
                          "system": disk(4, 2, policy="beta")},
    "in_memory-nc-arxiv85k": {**NC, "dataset": HALF_ARXIV, "system": {"name": "in_memory", "device": "cpu"}},
    "in_memory-nc-arxiv": {**NC, "dataset": ARXIV, "system": {"name": "in_memory", "device": "cpu"}},
    "pipelined-nc-arxiv": {**NC, "dataset": ARXIV, "system": {"name": "pipelined", "device": "cpu", "options": {
        "batch_loader_threads": 2, "batch_transfer_threads": 1, "staleness_bound": 8}}},
    "disk-nc-arxiv-p8c2": {**NC, "dataset": ARXIV, "system": disk(8, 2, policy="dispersed")},
    "disk-nc-arxiv-p8c4": {**NC, "dataset": ARXIV, "system": disk(8, 4, policy="dispersed")},
    "disk-nc-arxiv85k-p8c2": {**NC, "dataset": HALF_ARXIV, "system": disk(8, 2, policy="dispersed")},
    "feature_cache-nc-arxiv85k": {**NC, "dataset": HALF_ARXIV, "system": {
        "name": "feature_cache", "device": "cpu", "options": {"policy": "s3fifo", "cache_fraction": 0.25}}},
    "feature_cache-nc-arxiv": {**NC, "dataset": ARXIV, "system": {
        "name": "feature_cache", "device": "cpu", "options": {"policy": "belady", "cache_fraction": 0.1}}},
    "in_memory-lp-100k": {**LP, "dataset": lp_graph(100_000), "system": {"name": "in_memory", "device": "cpu"}},
    "disk-lp-20k-p8c2": {**LP, "dataset": lp_graph(20_000), "system": disk(8, 2, policy="beta")},
    "disk-lp-100k-p8c2": {**LP, "dataset": lp_graph(100_000), "system": disk(8, 2, policy="beta")},
    "disk-lp-100k-p8c4": {**LP, "dataset": lp_graph(100_000), "system": disk(8, 4, policy="beta")},
}


CALIBRATION = {name for name in CASES if "-tiny" in name}
"""The cases on the 300-node store: their peak minus the runtime is the first-use memory
(``systems.memory.FIRST_USE_BYTES``), so they calibrate the estimate rather than test it."""


def run_case(name: str, spec: dict, out: Path, cwd: Path) -> dict:
    """Run one case in a fresh process; its estimate and measured peak from ``summary.json``."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump({"name": f"memest-{name}", "seed": 0, **spec}, handle)
    done = subprocess.run([sys.executable, "-m", "suite", "run", handle.name, "--out", str(out), "--quiet",
                           "--overwrite"], cwd=cwd, capture_output=True, text=True)
    Path(handle.name).unlink()
    if done.returncode != 0:
        return {"case": name, "calibration": name in CALIBRATION,
                "error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    summary_path = next(out.glob(f"memest-{name}-s0-*/summary.json"))
    return estimate_row(json.loads(summary_path.read_text()), name, name in CALIBRATION)


def estimate_row(summary: dict, case: str, calibration: bool = False) -> dict:
    """One run's estimate against its measured peak: both in MiB, the relative error ``(estimate - measured) /
    measured`` and the same error on the part above the runtime (what the process held after its imports)."""
    estimate, measured = summary["memory_estimate"]["peak_bytes"], summary["peak_rss_bytes"]
    runtime = summary["memory_estimate"].get("runtime_bytes", 0)
    return {"case": case, "calibration": calibration, "system": summary["system"], "task": summary["task"],
            "num_nodes": summary["dataset_info"]["num_nodes"], "estimate_mib": estimate / 2**20,
            "measured_mib": measured / 2**20, "peak_phase": summary["memory_estimate"]["peak_phase"],
            "relative_error": (estimate - measured) / measured,
            "above_runtime_error": ((estimate - measured) / (measured - runtime)) if measured > runtime else None}


def rows_from_runs(folders: list[Path], recompute: bool = False, one_process: bool = False) -> list[dict]:
    """The estimate rows of every completed run under the folders (an experiment grid's ``--out``), one per
    ``summary.json`` that records both an estimate and a measured peak; the case is the run folder's name.
    ``recompute``: the estimate of the current code for the run's ``config.yaml`` and store (the runtime as the
    run recorded it) instead of the one the run recorded (run from the folder the grid ran in, so that relative
    dataset roots resolve). ``one_process``: each folder's runs ran one after another in one process (``gnnsuite
    grid`` without ``--jobs``), recorded before runs said so (``memory_estimate.warm_process``): every run but the
    first started is taken as warm."""
    rows = []
    for folder in folders:
        summaries = [(path, json.loads(path.read_text())) for path in sorted(folder.glob("**/summary.json"))]
        first = min((s.get("started_at", "") for _, s in summaries), default="")
        for path, summary in summaries:
            if one_process and summary.get("memory_estimate"):
                warm = summary["memory_estimate"].get("warm_process", summary.get("started_at", "") != first)
                summary["memory_estimate"] = {**summary["memory_estimate"], "warm_process": warm}
            if (summary.get("status", "completed") == "completed" and summary.get("memory_estimate")
                    and summary.get("peak_rss_bytes")):
                if recompute:
                    summary = {**summary, "memory_estimate": current_estimate(path.parent, summary)}
                rows.append(estimate_row(summary, path.parent.name))
    return rows


def current_estimate(run_dir: Path, summary: dict) -> dict:
    """The current code's estimate for the run in ``run_dir`` (its ``config.yaml``), with the runtime it recorded."""
    from suite.config import load_spec
    from suite.datasets import open_dataset
    from suite.memory import estimate_memory

    runtime = summary["memory_estimate"].get("runtime_bytes", 0)
    spec = load_spec(run_dir / "config.yaml")
    warm = bool(summary["memory_estimate"].get("warm_process", False))
    estimate = estimate_memory(spec, open_dataset(spec.dataset), runtime_bytes=runtime, warm=warm)
    return {"peak_bytes": estimate.peak_bytes, "peak_phase": estimate.peak_phase, "runtime_bytes": runtime}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "memory_estimate_runs")
    parser.add_argument("--only", nargs="*", help="case names (default: all)")
    parser.add_argument("--csv", type=Path, help="also write the table here")
    parser.add_argument("--from-runs", type=Path, nargs="+", metavar="DIR",
                        help="run nothing: tabulate the completed runs under these folders (experiment grids' --out)")
    parser.add_argument("--recompute", action="store_true",
                        help="with --from-runs: the current code's estimate of each run, not the one it recorded")
    parser.add_argument("--one-process", action="store_true",
                        help="with --recompute: each folder's runs ran in one process (all but the first warm)")
    args = parser.parse_args(argv)
    cwd = Path(__file__).resolve().parents[2]
    if args.from_runs:
        rows = rows_from_runs(args.from_runs, recompute=args.recompute, one_process=args.one_process)
    else:
        rows = [run_case(name, spec, args.out, cwd) for name, spec in CASES.items()
                if not args.only or name in args.only]
    if not rows:
        print("no completed run with a memory estimate", file=sys.stderr)
        return 2
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))
    tested = table[~table["calibration"]] if "calibration" in table else table
    errors = tested["relative_error"].dropna().abs() if "relative_error" in tested else pd.Series(dtype=float)
    if len(errors):
        above = tested["above_runtime_error"].dropna().abs()
        print(f"relative error |estimate - measured| / measured over {len(errors)} runs (calibration cases left "
              f"out): median {statistics.median(errors):.1%}, worst {errors.max():.1%} (goal: within 20%)")
        if len(above):
            print(f"on the part above the runtime: median {statistics.median(above):.1%}, worst {above.max():.1%}")
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
