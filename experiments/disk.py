"""Disk-based node classification against in-memory training: epoch time, IO, IO wait, accuracy, bandwidth.

Usage::

    python experiments/disk.py [--quick] [--out out/disk] [--results out/results] [--data-dir data] [--no-plot]

Runs ``experiments/disk_nc.yaml`` through the harness, each run in its own process so that its peak RSS is its
own (finished runs are skipped): the in-memory system and the
disk system (p = 16, c = 4 and 8, sequential and dispersed, prefetch on and off) on ``papers-like-s``. Then,
for the warm (last) epoch of each run: epoch time and its ratio to in-memory, bytes the suite read and bytes
``/proc/self/io`` says came from storage, states, swaps, IO wait (compute waiting for the buffer) and its
fraction of the epoch, the achieved read bandwidth (bytes read / seconds inside the reads), test accuracy and
peak RSS against the size of the store's features (how far out of core the run was). The same file system's
sequential read bandwidth is measured with ``dd`` (``iflag=direct``) on the partitioned features file, beside.

Every epoch after the first is a repeat of the timing: the table holds the mean warm epoch time with its 95 % t
interval, the ratio to in-memory with a Welch interval on the logs, and the IO wait fraction with its interval.

Outputs: ``out/results/disk_nc.csv``, ``out/results/disk_nc.png``. ``--quick``: ``papers-like-s`` shrunk to 200,000
nodes, p = 8, c = 2 and 4, five epochs (a minute or two). ``--deep``: ``experiments/disk_nc_deep.yaml``, the 3-layer
model (15,10,5, hidden 256) in memory and sequential p = 16, c = 4, speed only, into
``out/results/disk_nc_deep.csv`` (epochs long enough to hide the buffer's IO, as in MariusGNN's papers100M runs; about
15 minutes).
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

from suite.grid import expand_grid, failures  # noqa: E402
from suite.load import load_columns  # noqa: E402
from suite.results import export, load_epochs, load_runs  # noqa: E402
from suite.stats import mean_interval, ratio_interval  # noqa: E402

GRID = REPO_ROOT / "experiments" / "disk_nc.yaml"
DEEP_GRID = REPO_ROOT / "experiments" / "disk_nc_deep.yaml"
QUICK = ("dataset.params={num_nodes: 200000}", "training.epochs=5", "evaluation.every=5")
"""Quick mode: papers-like-s shrunk to 200,000 nodes, five epochs (four warm ones: the repeats behind the epoch-time
and IO-wait intervals; an epoch takes about a second there)."""


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


def warm_epochs(epochs: pd.DataFrame) -> pd.DataFrame:
    """A run's epoch records without the first (cold: buffers, caches and allocator warming up), unless it has
    only one."""
    ordered = epochs.sort_values("epoch")
    return ordered.iloc[1:] if len(ordered) > 1 else ordered


def table(out: Path) -> pd.DataFrame:
    """One row per completed run: means over its warm epochs (every epoch after the first) of the epoch's
    measures, with 95 % t intervals over those epochs for the epoch time and the IO wait fraction, and the run's
    accuracy, peak RSS and foreign load."""
    runs = load_runs(out, include_incomplete=False)
    runs = runs[runs["status"] == "completed"]
    epochs = load_epochs(out)
    rows = []
    for _, run in runs.iterrows():
        warm = warm_epochs(epochs[epochs["run_dir"] == run["run_dir"]])
        epoch = warm.mean(numeric_only=True)
        times = [float(t) for t in warm["epoch_time_s"]]
        wait_fractions = [float(w or 0.0) / float(t) for w, t in zip(warm.get("io_wait_s", [0.0] * len(warm)),
                                                                      warm["epoch_time_s"])]
        time_interval, wait_interval = mean_interval(times), mean_interval(wait_fractions)
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
            "dataset": run["dataset"], "configuration": label, "system": run["system"],
            "policy": options.get("policy"), "num_partitions": options.get("num_partitions"),
            "buffer_capacity": options.get("buffer_capacity"), "prefetch": options.get("prefetch", True),
            "epoch_time_s": time_s, "epoch_time_s_ci_low": time_interval.low,
            "epoch_time_s_ci_high": time_interval.high, "warm_epochs": len(times), "epoch_times_s": times,
            "states": epoch.get("states"), "swaps": epoch.get("swaps"),
            "io_read_bytes": read_bytes, "disk_read_bytes": epoch.get("disk_read_bytes"),
            "io_wait_s": io_wait, "io_wait_fraction": wait_interval.estimate,
            "io_wait_fraction_ci_low": wait_interval.low, "io_wait_fraction_ci_high": wait_interval.high,
            "read_bandwidth_bytes_per_s": read_bytes / read_s if read_s > 0 else None,
            "test_accuracy": run.get("metrics.test.accuracy"), "peak_rss_bytes": run.get("peak_rss_bytes"),
            **load_columns(run.to_dict()), "run_id": run["run_id"], "git_sha": run.get("versions.git_sha"),
        })
    result = pd.DataFrame(rows)
    return add_time_ratios(result).sort_values(["system", "configuration"], ascending=[False, True]).reset_index(
        drop=True)


def add_time_ratios(result: pd.DataFrame) -> pd.DataFrame:
    """``time_ratio_vs_in_memory``: each run's warm epoch times over the in-memory run's, as the ratio of their
    geometric means with a 95 % Welch t interval on the logs (:func:`suite.stats.ratio_interval`, unpaired)."""
    base = result[result["system"] == "in_memory"]
    base_times = list(base["epoch_times_s"].iloc[0]) if len(base) else []
    ratios = [ratio_interval(list(times), base_times, paired=False) for times in result["epoch_times_s"]]
    return result.assign(time_ratio_vs_in_memory=[r.estimate for r in ratios],
                         time_ratio_vs_in_memory_ci_low=[r.low for r in ratios],
                         time_ratio_vs_in_memory_ci_high=[r.high for r in ratios])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--results", type=Path, default=REPO_ROOT / "out" / "results")
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
        overrides = list(QUICK) if args.quick else []
        if args.data_dir is not None:
            overrides.append(f"dataset.cache_dir={args.data_dir}")
        specs = expand_grid(DEEP_GRID if args.deep else GRID, overrides)
        if args.quick:
            specs = _quick_options(specs)
        failed = failures(run_isolated(specs, out))
        for summary in failed:
            print(f"failed: {summary.get('run_id')}: {summary.get('error')}", file=sys.stderr)
        if failed:
            return 1
    result = table(out)
    runs = load_runs(out, include_incomplete=False)
    disk_runs = runs[runs["system"] == "disk"]
    if len(disk_runs):
        from suite.graph import GraphStore

        store = GraphStore.open(_store_path(disk_runs.iloc[0]))
        result["features_bytes"] = store.metadata["files"]["features"]["bytes"]
        from suite.load import LoadMonitor

        with LoadMonitor() as monitor:  # dd is a child waited for: its CPU time is ours
            result["dd_read_bandwidth_bytes_per_s"] = dd_read_bandwidth(store.file("features"))
        result["dd_foreign_cores"] = monitor.result.foreign_cores if monitor.result else float("nan")
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
