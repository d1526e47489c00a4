"""Disk-based node classification against in-memory training: epoch time, IO, IO wait, accuracy, bandwidth.

Usage::

    python experiments/disk.py [--quick] [--out out/disk] [--results results] [--data-dir data] [--no-plot]

Runs ``experiments/disk_nc.yaml`` through the harness, each run in its own process so that its peak RSS is its
own (finished runs are skipped): the in-memory system and the
disk system (p = 16, c = 4 and 8, sequential and dispersed, prefetch on and off) on ``papers-like-s``, and the
peer ``pyg`` (:mod:`systems.pyg_baseline`, PyG's NeighborLoader and GraphSAGE; a ``skipped`` row with the reason
where PyG cannot sample). Then,
for the warm (last) epoch of each run: epoch time and its ratio to in-memory, bytes the suite read and bytes
``/proc/self/io`` says came from storage, states, swaps, IO wait (compute waiting for the buffer) and its
fraction of the epoch, the achieved read bandwidth (bytes read / seconds inside the reads), test accuracy and
peak RSS against the size of the store's features (how far out of core the run was). The same file system's
sequential read bandwidth is measured with ``dd`` (``iflag=direct``) on the partitioned features file, beside.

Outputs: ``results/disk_nc.csv``, ``results/disk_nc.png``. ``--quick``: ``papers-like-s`` shrunk to 200,000 nodes,
p = 8, c = 2 and 4 (a minute or two). ``--deep``: ``experiments/disk_nc_deep.yaml``, the 3-layer model (15,10,5,
hidden 256) in memory and sequential p = 16, c = 4, speed only, into ``results/disk_nc_deep.csv`` (epochs long
enough to hide the buffer's IO, as in MariusGNN's papers100M runs; about 15 minutes).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pandas as pd  # noqa: E402

from experiments.peers import split_runnable  # noqa: E402
from suite.grid import expand_grid, failures  # noqa: E402
from suite.results import export, load_epochs, load_runs  # noqa: E402

GRID = REPO_ROOT / "experiments" / "disk_nc.yaml"
DEEP_GRID = REPO_ROOT / "experiments" / "disk_nc_deep.yaml"
QUICK = ("dataset.params={num_nodes: 200000}",)


def _quick_options(specs):
    """Quick mode: p = 8 (c = 2 for the p/4 runs, 4 for the p/2 run)."""
    out = []
    for spec in specs:
        options = dict(spec.system.options)
        if "num_partitions" in options:
            options["num_partitions"] = 8
            options["buffer_capacity"] = options["buffer_capacity"] // 2
        out.append(spec.model_copy(update={"system": spec.system.model_copy(update={"options": options})}))
    return out


def grid_specs(grid: Path, overrides: Sequence[str], quick: bool) -> list:
    """The grid's specs (quick options applied); a ``pyg`` system spec gets ``sampler.name: pyg``, the sampler it
    really uses."""
    specs = expand_grid(grid, list(overrides) + (list(QUICK) if quick else []))
    specs = _quick_options(specs) if quick else specs
    return [spec.model_copy(update={"sampler": spec.sampler.model_copy(update={"name": "pyg"})})
            if spec.system.name == "pyg" else spec for spec in specs]


def run_isolated(specs, out: Path) -> list[dict]:
    """Run each spec not yet complete in its own process (``python -m suite run``), so that every run's peak RSS
    is its own; return the summaries."""
    import tempfile

    from suite.recorder import is_complete, read_summary

    summaries = []
    for spec in specs:
        run_dir = out / spec.run_id
        if not is_complete(run_dir):
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
                handle.write(spec.to_yaml())
            subprocess.run([sys.executable, "-m", "suite", "run", handle.name, "--out", str(out), "--quiet"],
                           check=False)
            Path(handle.name).unlink()
        summaries.append(read_summary(run_dir) or {"run_id": spec.run_id, "status": "failed",
                                                     "error": "the run's process left no summary"})
    return summaries


def dd_read_bandwidth(path: Path, block: str = "4M") -> float | None:
    """Sequential read bandwidth of ``path`` in bytes/s by ``dd iflag=direct`` (None where dd fails)."""
    try:
        result = subprocess.run(["dd", f"if={path}", "of=/dev/null", f"bs={block}", "iflag=direct"],
                                capture_output=True, text=True, timeout=300, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", result.stderr)
    return int(match.group(1)) / float(match.group(2)) if match else None


def table(out: Path) -> pd.DataFrame:
    """One row per completed run: the warm epoch's measures and the run's accuracy and peak RSS."""
    runs = load_runs(out, include_incomplete=False)
    runs = runs[runs["status"] == "completed"]
    epochs = load_epochs(out)
    last = epochs.sort_values("epoch").groupby("run_dir").tail(1).set_index("run_dir")
    rows = []
    for _, run in runs.iterrows():
        epoch = last.loc[run["run_dir"]]
        options = {k.removeprefix("config.system.options."): v for k, v in run.items()
                   if k.startswith("config.system.options.") and pd.notna(v)}
        label = run["system"] if run["system"] not in ("disk", "pipelined") else (
            "pipelined " + ("sync" if options.get("sync") else "async")) if run["system"] == "pipelined" else (
            f"{options['policy']} p{int(options['num_partitions'])} c{int(options['buffer_capacity'])}"
            + ("" if options.get("prefetch", True) else " no-prefetch"))
        time_s = float(epoch["epoch_time_s"])
        io_wait = float(epoch.get("io_wait_s", 0.0) or 0.0)
        read_bytes = float(epoch.get("io_read_bytes", 0.0) or 0.0)
        read_s = float(epoch.get("io_read_s", 0.0) or 0.0)
        rows.append({
            "dataset": run["dataset"], "configuration": label, "system": run["system"], "status": "ok", "reason": "",
            "policy": options.get("policy"), "num_partitions": options.get("num_partitions"),
            "buffer_capacity": options.get("buffer_capacity"), "prefetch": options.get("prefetch", True),
            "epoch_time_s": time_s, "states": epoch.get("states"), "swaps": epoch.get("swaps"),
            "io_read_bytes": read_bytes, "disk_read_bytes": epoch.get("disk_read_bytes"),
            "io_wait_s": io_wait, "io_wait_fraction": io_wait / time_s if time_s else None,
            "read_bandwidth_bytes_per_s": read_bytes / read_s if read_s > 0 else None,
            "test_accuracy": run.get("metrics.test.accuracy"), "peak_rss_bytes": run.get("peak_rss_bytes"),
            "run_id": run["run_id"], "git_sha": run.get("versions.git_sha"),
        })
    result = pd.DataFrame(rows)
    base = result[result["system"] == "in_memory"]["epoch_time_s"]
    result["time_ratio_vs_in_memory"] = result["epoch_time_s"] / (base.iloc[0] if len(base) else float("nan"))
    order = {"pipelined": 0, "in_memory": 1, "disk": 2}  # the suite's systems, then peers
    return result.sort_values(["system", "configuration"], key=lambda c: c.map(lambda v: (order.get(v, 3), v))
                              if c.name == "system" else c).reset_index(drop=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--results", type=Path, default=REPO_ROOT / "results")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--no-run", action="store_true")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--deep", action="store_true", help="the 3-layer speed comparison (disk_nc_deep.yaml), "
                                                            "into disk_nc_deep.csv, no figure")
    args = parser.parse_args(argv)
    if args.deep and args.quick:
        parser.error("--deep has no quick setting")
    name = "disk_nc_deep" if args.deep else "disk_nc"
    out = args.out or REPO_ROOT / ("out/disk-quick" if args.quick else "out/disk-deep" if args.deep else "out/disk")
    if not args.no_run:
        overrides = []
        if args.data_dir is not None:
            overrides.append(f"dataset.cache_dir={args.data_dir}")
        specs = grid_specs(DEEP_GRID if args.deep else GRID, overrides, args.quick)
        specs, skipped = split_runnable(specs)
        for spec, reason in skipped:
            print(f"skipped: {spec.run_id}: {reason}", file=sys.stderr)
        failed = failures(run_isolated(specs, out))
        for summary in failed:
            print(f"failed: {summary.get('run_id')}: {summary.get('error')}", file=sys.stderr)
        if failed:
            return 1
    result = table(out)
    _, skipped = split_runnable(grid_specs(DEEP_GRID if args.deep else GRID, [], args.quick))
    if skipped:  # peers missing here: a row each, with the reason
        result = pd.concat([result, pd.DataFrame([
            {"dataset": spec.dataset.preset or spec.dataset.name, "configuration": spec.system.name,
             "system": spec.system.name, "status": "skipped", "reason": reason} for spec, reason in skipped])],
            ignore_index=True)
    runs = load_runs(out, include_incomplete=False)
    disk_runs = runs[runs["system"] == "disk"]
    if len(disk_runs):
        from suite.graph import GraphStore

        store = GraphStore.open(_store_path(disk_runs.iloc[0]))
        result["features_bytes"] = store.metadata["files"]["features"]["bytes"]
        result["dd_read_bandwidth_bytes_per_s"] = dd_read_bandwidth(store.file("features"))
    export(result, args.results / f"{name}.csv")
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(result[["configuration", "epoch_time_s", "time_ratio_vs_in_memory", "io_wait_fraction", "swaps",
                      "io_read_bytes", "read_bandwidth_bytes_per_s", "test_accuracy", "peak_rss_bytes"]]
              .to_string(index=False))
    if not args.no_plot and not args.deep:
        from experiments.figures import plot_disk_nc

        print(f"wrote {plot_disk_nc(args.results / 'disk_nc.csv', args.results / 'disk_nc.png')}")
    return 0


def _store_path(run: pd.Series) -> Path:
    """The partitioned store a disk run trained from."""
    from suite.config import read_yaml, spec_from_dict
    from suite.datasets import open_dataset
    from systems.disk.system import DiskOptions, partitioned_store_path

    spec = spec_from_dict(read_yaml(Path(run["run_dir"]) / "config.yaml"))
    options = DiskOptions.model_validate(spec.system.options)
    return partitioned_store_path(open_dataset(spec.dataset), options.num_partitions, options.order, spec.seed)


if __name__ == "__main__":
    sys.exit(main())
