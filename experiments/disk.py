"""Disk-based node classification against in-memory training: epoch time, IO, IO wait, accuracy, bandwidth, timeline.

Usage::

    python experiments/disk.py [--quick | --deep] [--out DIR] [--results DIR] [--data-dir DIR] [--no-plot]
        [--rerun-under-load]

Runs ``experiments/specs/disk_nc.yaml`` through the harness, each run in its own process so that its peak RSS is its
own (finished runs are skipped): the in-memory system and the disk system (p = 16, c = 4 = p/4 and 8, sequential
and dispersed, prefetch on and off, the pipelined disk system) on ``papers-like-s``, and the peer ``pyg``
(:mod:`systems.pyg_baseline`: PyG's NeighborLoader and GraphSAGE in PyG's own loop over the whole graph in memory;
a ``skipped`` row with the reason where PyG cannot sample), seeds 0, 1 and 2, five epochs with a test evaluation
after each. Then, per run: the warm epochs' mean time (epoch 0 fills the buffer and is
left out), bytes the suite read and bytes ``/proc/self/io`` says came from storage, states, IO wait (compute
waiting for the buffer) and its fraction of the epoch, the achieved read bandwidth (bytes read / seconds inside
the reads; ``dd iflag=direct`` on the same file beside it), test accuracy, peak RSS, the thread budget and the
machine's foreign load (a run under load is flagged and left out of the timings); per configuration: means over
seeds with 95 % t intervals (columns ``X``, ``X_ci_low``, ``X_ci_high``), the epoch-time ratio to in-memory paired by
seed (geometric mean, t interval on the logs) and the accuracy difference to in-memory paired by seed.

Outputs (``--results``, default ``out/results``; the reference under ``results/`` is written only by
``gnnsuite reproduce --update-reference``):
``disk_nc.csv`` (per configuration), ``disk_nc_runs.csv`` (per run), ``disk_nc_curve.csv`` (test accuracy after
every epoch), ``disk_nc_timeline.csv`` (the state timeline of one warm epoch per configuration, seed 0) and the
figures ``disk_nc.png`` and ``disk_nc_timeline.png``. ``--quick``: ``papers-like-s`` shrunk to 200,000 nodes,
p = 8, c = 2 and 4, three epochs (a few minutes). ``--deep``: ``experiments/specs/disk_nc_deep.yaml``, the 3-layer model
(15,10,5, hidden 256) in memory and sequential p = 16, c = 4, speed only, into ``disk_nc_deep.csv`` (about 20
minutes).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments.common import REPO_ROOT, RESULTS, SPECS, Mode, add_common_options, check_failed, cli, parse
from experiments.peers import split_runnable
from suite.errors import ConfigError
from suite.grid import expand_grid, failures
from suite.load import load_columns, measured_under_load
from suite.results import export, load_epochs, load_evals, load_runs, load_timeline
from suite.stats import Interval, difference_interval, mean_interval, ratio_interval

GRID = SPECS / "disk_nc.yaml"
DEEP_GRID = SPECS / "disk_nc_deep.yaml"
QUICK = ("dataset.params={num_nodes: 200000}", "training.epochs=3")


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


def run_isolated(specs, out: Path, rerun_under_load: bool = False) -> list[dict]:
    """Run each spec not yet complete in its own process (``python -m suite run``), so that every run's peak RSS
    is its own; with ``rerun_under_load``, also redo a complete run measured under foreign load. Return the
    summaries."""
    from suite.recorder import is_complete, read_summary

    summaries = []
    for spec in specs:
        run_dir = out / spec.run_id
        loaded = rerun_under_load and is_complete(run_dir) and \
            bool(((read_summary(run_dir) or {}).get("machine_load") or {}).get("under_load"))
        if not is_complete(run_dir) or loaded:
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
                handle.write(spec.to_yaml())
            subprocess.run([sys.executable, "-m", "suite", "run", handle.name, "--out", str(out), "--quiet",
                            *(["--overwrite"] if loaded else [])], check=False)
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


def configuration(system: str, options: dict) -> str:
    """A run's label: the system, or for the disk system its policy, p, c and what differs from the default."""
    if system == "pipelined":
        return "pipelined " + ("sync" if options.get("sync") else "async")
    if system != "disk":
        return system
    label = f"{options['policy']} p{int(options['num_partitions'])} c{int(options['buffer_capacity'])}"
    if not options.get("prefetch", True):
        label += " no-prefetch"
    if options.get("pipeline") is not None:
        label += " pipelined"
    return label


def _options(run: pd.Series) -> dict:
    from suite.config import read_yaml

    return dict(read_yaml(Path(run["run_dir"]) / "config.yaml")["system"].get("options") or {})


def run_table(out: Path) -> pd.DataFrame:
    """One row per completed run: the warm epochs' means (epoch time, IO wait, bytes, bandwidth), the final test
    accuracy, peak RSS, the thread budget and the foreign load."""
    runs = load_runs(out, include_incomplete=False)
    runs = runs[runs["status"] == "completed"]
    epochs = load_epochs(out)
    rows = []
    for _, run in runs.iterrows():
        options = _options(run)
        mine = epochs[epochs["run_dir"] == run["run_dir"]].sort_values("epoch")
        warm = mine[mine["epoch"] > 0] if len(mine) > 1 else mine
        time_s = float(warm["epoch_time_s"].mean())
        column = lambda name: float(warm[name].fillna(0).mean()) if name in warm else 0.0  # noqa: E731
        read_s = column("io_read_s")
        rows.append({
            "dataset": run["dataset"], "configuration": configuration(run["system"], options),
            "system": run["system"], "seed": int(run["seed"]), "policy": options.get("policy"),
            "num_partitions": options.get("num_partitions"), "buffer_capacity": options.get("buffer_capacity"),
            "prefetch": options.get("prefetch", True), "warm_epochs": len(warm), "epoch_time_s": time_s,
            "states": column("states"), "partitions_read": column("partitions_read"),
            "io_read_bytes": column("io_read_bytes"), "disk_read_bytes": column("disk_read_bytes"),
            "io_wait_s": column("io_wait_s"), "io_wait_fraction": column("io_wait_s") / time_s if time_s else None,
            "prepare_s": column("prepare_s"),
            "read_bandwidth_bytes_per_s": column("io_read_bytes") / read_s if read_s > 0 else None,
            "test_accuracy": pd.to_numeric(run.get("metrics.test.accuracy"), errors="coerce"),
            "peak_rss_bytes": run.get("peak_rss_bytes"),
            "compute_threads": run.get("threads.compute"), **load_columns(run.to_dict()),
            "run_id": run["run_id"], "run_dir": run["run_dir"], "git_sha": run.get("versions.git_sha"),
        })
    return pd.DataFrame(rows)


def _columns(name: str, interval: Interval) -> dict[str, float]:
    return {name: interval.estimate, f"{name}_ci_low": interval.low, f"{name}_ci_high": interval.high}


def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: means over seeds with 95 % t intervals; the epoch-time ratio (paired log t) and the
    accuracy difference (paired t) to in-memory, paired by seed. Timings come only from runs not measured under
    foreign load (``timed_runs`` of ``seeds``); accuracy from every run."""
    flagged = runs["under_load"].map(measured_under_load).astype(bool)
    runs = runs.assign(quiet=~flagged)
    base = runs[runs["system"] == "in_memory"].set_index("seed")
    rows = []
    for label, group in runs.groupby("configuration", sort=False):
        quiet = group[group["quiet"]]
        paired = quiet[quiet["seed"].map(lambda s: s in base.index and bool(base.loc[s, "quiet"])).astype(bool)]
        ratio = ratio_interval(list(paired["epoch_time_s"]), [base.loc[s, "epoch_time_s"] for s in paired["seed"]])
        both = group[group["seed"].isin(base.index)]
        gap = difference_interval(list(both["test_accuracy"]), [base.loc[s, "test_accuracy"] for s in both["seed"]])
        first = group.iloc[0]
        rows.append({
            "dataset": first["dataset"], "configuration": label, "system": first["system"], "status": "ok",
            "reason": "", "policy": first["policy"], "num_partitions": first["num_partitions"],
            "buffer_capacity": first["buffer_capacity"], "prefetch": first["prefetch"], "seeds": len(group),
            "timed_runs": len(quiet), "warm_epochs": int(group["warm_epochs"].min()),
            **_columns("epoch_time_s", mean_interval(quiet["epoch_time_s"])),
            **_columns("time_ratio_vs_in_memory", ratio),
            "io_wait_s": quiet["io_wait_s"].mean(),
            **_columns("io_wait_fraction", mean_interval(quiet["io_wait_fraction"].astype(float))),
            "states": first["states"], "partitions_read": group["partitions_read"].mean(),
            "io_read_bytes": group["io_read_bytes"].mean(), "disk_read_bytes": group["disk_read_bytes"].mean(),
            "prepare_s": group["prepare_s"].mean(),
            "read_bandwidth_bytes_per_s": quiet["read_bandwidth_bytes_per_s"].astype(float).mean(),
            **_columns("test_accuracy", mean_interval(group["test_accuracy"].astype(float))),
            **_columns("accuracy_gap_vs_in_memory", gap),
            "peak_rss_bytes": group["peak_rss_bytes"].max(), "compute_threads": first["compute_threads"],
            "foreign_cores": group["foreign_cores"].astype(float).max(),
            "under_load": bool(flagged[group.index].all()), "git_sha": first["git_sha"],
        })
    order = {"pipelined": 0, "in_memory": 1, "disk": 2}  # the suite's systems, then peers
    return pd.DataFrame(rows).sort_values(
        ["system", "configuration"], key=lambda c: c.map(lambda v: (order.get(v, 3), v)) if c.name == "system"
        else c, kind="stable").reset_index(drop=True)


def curve_table(out: Path, runs: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy after every epoch, per run (``evaluation.test_every``)."""
    evals = load_evals(out)
    tests = evals[evals["split"] == "test"][["run_dir", "epoch", "accuracy"]]
    labels = runs[["run_dir", "configuration", "seed"]]
    return labels.merge(tests, on="run_dir").drop(columns="run_dir").sort_values(["configuration", "seed", "epoch"])


def timeline_table(out: Path, runs: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The disk runs' state timelines of one warm epoch (the last) for ``seed``, with what precedes it: the last
    state of the epoch before and the evaluations after that one (while they compute, the prefetch thread reads
    the warm epoch's partitions); times from the window's start."""
    timeline = load_timeline(out)
    if timeline.empty:
        return timeline
    chosen = runs[(runs["system"] == "disk") & (runs["seed"] == seed)]
    parts = []
    for _, run in chosen.iterrows():
        rows = timeline[timeline["run_dir"] == run["run_dir"]]
        epoch = int(rows["epoch"].max())
        before = rows[(rows["pass"] == "train") & (rows["epoch"] == epoch - 1)]
        window = rows[((rows["pass"] == "train") & (rows["epoch"] == epoch))
                      | ((rows["pass"] != "train") & (rows["epoch"] == epoch - 1))
                      | (before["state"].max() == rows["state"]) & (rows["pass"] == "train")
                      & (rows["epoch"] == epoch - 1)]
        computes = window[window["activity"] == "compute"]
        origin = computes["start"].min() if len(before) else window["start"].min()  # the last state before
        window = window[window["end"] >= origin]  # (its own reads were done during the epoch before it)
        window = window.assign(start=(window["start"] - origin).clip(lower=0.0), end=window["end"] - origin,
                               configuration=run["configuration"])
        parts.append(window)
    table = pd.concat(parts) if parts else timeline.iloc[:0]
    return table.drop(columns=["run_dir"], errors="ignore")


def run(*, mode: Mode = "full", runs: Path | None = None, results: Path = RESULTS, data: Path | None = None,
        execute: bool = True, plot: bool = True, quiet: bool = False, deep: bool = False,
        rerun_under_load: bool = False) -> pd.DataFrame:
    """Run the grid of ``mode`` (``deep``: the 3-layer speed comparison, which has no quick setting) into ``runs``
    (default ``out/disk``, ``out/disk-quick``, ``out/disk-deep``; ``execute=False``: only tabulate what is recorded;
    ``rerun_under_load``: redo finished runs measured under foreign load), then write the tables and figures into
    ``results``; return the summary table. Raises :class:`JobFailed` when runs failed (each named on stderr)."""
    quick = mode == "quick"
    if deep and quick:
        raise ConfigError("--deep has no quick setting")
    name = "disk_nc_deep" if deep else "disk_nc"
    out = runs or REPO_ROOT / ("out/disk-quick" if quick else "out/disk-deep" if deep else "out/disk")
    if execute:
        overrides = []
        if data is not None:
            overrides.append(f"dataset.cache_dir={data}")
        specs, skipped = split_runnable(grid_specs(DEEP_GRID if deep else GRID, overrides, quick))
        for spec, reason in skipped:
            print(f"skipped: {spec.run_id}: {reason}", file=sys.stderr)
        check_failed(failures(run_isolated(specs, out, rerun_under_load)))
    recorded = run_table(out)
    result = summary_table(recorded)
    _, skipped = split_runnable(grid_specs(DEEP_GRID if deep else GRID, [], quick))
    if skipped:  # peers missing here: a row each, with the reason
        result = pd.concat([result, pd.DataFrame([
            {"dataset": spec.dataset.preset or spec.dataset.name, "configuration": spec.system.name,
             "system": spec.system.name, "status": "skipped", "reason": reason}
            for spec, reason in {spec.system.name: (spec, reason) for spec, reason in skipped}.values()])],
            ignore_index=True)
    disk_runs = recorded[recorded["system"] == "disk"]
    if len(disk_runs):
        from suite.graph import GraphStore

        store = GraphStore.open(_store_path(disk_runs.iloc[0]))
        result["features_bytes"] = store.metadata["files"]["features"]["bytes"]
        from suite.load import LoadMonitor

        with LoadMonitor() as monitor:  # dd is a child waited for: its CPU time is ours
            result["dd_read_bandwidth_bytes_per_s"] = dd_read_bandwidth(store.file("features"))
        result["dd_foreign_cores"] = monitor.result.foreign_cores if monitor.result else float("nan")
        result["bandwidth_vs_dd"] = result["read_bandwidth_bytes_per_s"] / result["dd_read_bandwidth_bytes_per_s"]
    export(result, results / f"{name}.csv")
    export(recorded.drop(columns=["run_dir"]), results / f"{name}_runs.csv")
    if not deep:
        export(curve_table(out, recorded), results / "disk_nc_curve.csv")
        export(timeline_table(out, recorded), results / "disk_nc_timeline.csv")
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(result[["configuration", "seeds", "epoch_time_s", "time_ratio_vs_in_memory", "time_ratio_vs_in_memory_ci_low",
                      "time_ratio_vs_in_memory_ci_high", "io_wait_fraction", "partitions_read", "read_bandwidth_bytes_per_s",
                      "test_accuracy", "accuracy_gap_vs_in_memory", "peak_rss_bytes"]].to_string(index=False))
    if plot and not deep:
        from experiments.figures import plot_disk_nc, plot_disk_nc_timeline

        print(f"wrote {plot_disk_nc(results / 'disk_nc.csv', results / 'disk_nc.png')}")
        print(f"wrote {plot_disk_nc_timeline(results / 'disk_nc_timeline.csv', results / 'disk_nc_timeline.png')}")
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, quick="small settings (papers-like-s at 200,000 nodes, p = 8, 3 epochs)",
                       runs=("--out",), runs_help="runs folder (default out/disk, out/disk-quick, out/disk-deep)",
                       results=("--results",), data=("--data-dir",), data_default=None, plot=True, quiet=True,
                       no_run="only tabulate what is recorded")
    parser.add_argument("--deep", action="store_true", help="the 3-layer speed comparison (disk_nc_deep.yaml), "
                                                            "into disk_nc_deep.csv, no figure")
    parser.add_argument("--rerun-under-load", action="store_true",
                        help="redo finished runs that were measured under foreign load")
    return parse(parser, argv, no_quick=("--deep",))


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "disk")


def _store_path(run: pd.Series) -> Path:
    """The partitioned store a disk run trained from."""
    from suite.config import read_yaml, spec_from_dict
    from suite.datasets import open_dataset
    from systems.disk.disk_system import DiskOptions, partitioned_store_path

    spec = spec_from_dict(read_yaml(Path(run["run_dir"]) / "config.yaml"))
    options = DiskOptions.model_validate(spec.system.options)
    return partitioned_store_path(open_dataset(spec.dataset), options.num_partitions, options.order, spec.seed)


if __name__ == "__main__":
    sys.exit(main())
