"""Disk-based link prediction on FB15k-237: MRR, epoch time and IO of BETA, COMET and random against in-memory.

Usage::

    python experiments/disk_lp.py [--quick] [--out out/disk-lp] [--results out/results] [--jobs 2] [--no-plot]

Runs ``experiments/specs/disk_lp_distmult.yaml`` (shallow DistMult) and ``experiments/specs/disk_lp_graphsage.yaml``
(GraphSAGE + DistMult) through the harness: p = 32 partitions, a buffer of c = 8 (p/4), policies ``beta``,
``comet`` (l = 8 logical partitions) and ``random``, and the in-memory system, 3 seeds each; finished runs are
skipped. Each run uses one intra-op thread (``OMP_NUM_THREADS=1``), ``--jobs`` runs at a time.

Outputs:

- ``out/results/disk_lp_runs.csv``: one row per run: the warm epochs' mean time, IO read and written per epoch (suite
  and ``/proc/self/io``), swaps, IO wait and its fraction of the epoch, read bandwidth, valid and test MRR;
- ``out/results/disk_lp.csv``: per (model, configuration): mean and standard deviation over seeds of test MRR, the
  MRR difference to in-memory, the epoch-time ratio to in-memory, IO per epoch and IO wait fraction;
- ``out/results/disk_lp.png`` (:func:`experiments.figures.plot_disk_lp`).

``--quick``: DistMult only, in-memory, BETA and COMET (the claim's three; random left out), the grid's 3 seeds
(the claim's differences are paired by seed), 2 epochs, test split only (about 3 minutes at two runs at a time).
``--timing``: both models, seed 0, 3 epochs, no evaluation, one run at a time (the grid's runs share the machine
two at a time, so their epoch times are not comparable side by side): ``disk_lp_timing.csv`` with the epoch-time
ratios and IO wait fractions.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments.common import REPO_ROOT, RESULTS, SPECS, Mode, add_common_options, check_failed, cli, parse
from suite.datasets import shared_datasets_dir
from suite.errors import ConfigError
from suite.grid import expand_grid, failures, run_grid
from suite.load import load_columns, measured_under_load
from suite.results import export, load_epochs, load_runs
from suite.stats import difference_interval, mean_interval, ratio_interval

GRIDS = (SPECS / "disk_lp_distmult.yaml", SPECS / "disk_lp_graphsage.yaml")
QUICK = ("training.epochs=2", "evaluation.every=2", "evaluation.splits=[test]")
QUICK_POLICIES = ("in_memory", "beta", "comet")
"""Quick mode: what the COMET claim compares (random, which no claim reads, is left out), 3 seeds, 2 epochs."""
TIMING = ("seed=0", "training.epochs=3", "evaluation.splits=[]")


def configuration(system: str, options: dict) -> str:
    """A run's label: ``in_memory`` or ``<policy> p<p> c<c>[ l<l>]``."""
    if system != "disk":
        return system
    p, c = int(options["num_partitions"]), int(options["buffer_capacity"])
    ratio = int(options.get("fine_to_coarse_ratio", 1) or 1)
    return f"{options['policy']} p{p} c{c}" + (f" l{p // ratio}" if ratio > 1 else "")


def run_table(out: Path) -> pd.DataFrame:
    """One row per completed run: warm-epoch means (every epoch after the first) and the run's MRR."""
    runs = load_runs(out, include_incomplete=False)
    runs = runs[runs["status"] == "completed"]
    epochs = load_epochs(out)
    rows = []
    for _, run in runs.iterrows():
        mine = epochs[epochs["run_dir"] == run["run_dir"]].sort_values("epoch")
        warm = mine.iloc[1:] if len(mine) > 1 else mine
        options = {k.removeprefix("config.system.options."): v for k, v in run.items()
                   if k.startswith("config.system.options.") and pd.notna(v)}

        def mean(column: str) -> float:
            return float(warm[column].mean()) if column in warm and warm[column].notna().any() else float("nan")

        time_s = mean("epoch_time_s")
        read_s = mean("io_read_s")
        rows.append({
            "model": run["config.model.encoder"] + "+" + run["config.model.decoder"],
            "configuration": configuration(run["system"], options), "system": run["system"],
            "policy": options.get("policy", "in_memory"), "seed": int(run["seed"]),
            "epochs": len(mine), "epoch_time_s": time_s, "states": mean("states"), "swaps": mean("swaps"),
            "io_read_bytes": mean("io_read_bytes"), "io_write_bytes": mean("io_write_bytes"),
            "disk_read_bytes": mean("disk_read_bytes"), "disk_write_bytes": mean("disk_write_bytes"),
            "io_wait_s": mean("io_wait_s"), "io_wait_fraction": mean("io_wait_s") / time_s,
            "read_bandwidth_bytes_per_s": mean("io_read_bytes") / read_s if read_s > 0 else float("nan"),
            "valid_mrr": run.get("metrics.valid.mrr"), "test_mrr": run.get("metrics.test.mrr"),
            "test_hits@10": run.get("metrics.test.hits@10"), "peak_rss_bytes": run.get("peak_rss_bytes"),
            "epoch_times_s": [float(t) for t in warm["epoch_time_s"]], **load_columns(run.to_dict()),
            "run_id": run["run_id"], "git_sha": run.get("versions.git_sha"),
        })
    return pd.DataFrame(rows).sort_values(["model", "configuration", "seed"]).reset_index(drop=True)


def _intervals(prefix: str, interval) -> dict:
    return {prefix: interval.estimate, f"{prefix}_ci_low": interval.low, f"{prefix}_ci_high": interval.high}


def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (model, configuration): seeds; test MRR, mean and std over seeds, with its 95 % t interval
    (``test_mrr_mean_ci_low``/``_high``); its difference to in-memory (same model) paired by seed, with its interval;
    the warm epoch time (mean over every warm epoch of every seed, t interval) and its ratio to in-memory (geometric
    means, Welch t interval on the logs); IO per epoch; the IO wait fraction (t interval over runs); and whether a
    run was measured under foreign load (``under_load``: any of them). Intervals from :mod:`suite.stats`."""
    rows = []
    base_runs = {model: part for (model, configuration), part in runs.groupby(["model", "configuration"])
                 if configuration == "in_memory"}
    for (model, configuration), part in runs.groupby(["model", "configuration"], sort=True):
        times = [t for cell in part["epoch_times_s"] for t in cell] if "epoch_times_s" in part else \
            list(part["epoch_time_s"])
        base = base_runs.get(model)
        row = {"model": model, "configuration": configuration, "seeds": len(part),
               **_intervals("test_mrr_mean", mean_interval(part["test_mrr"])),
               "test_mrr_std": float(part["test_mrr"].std()) if len(part) > 1 else float("nan"),
               **_intervals("epoch_time_s", mean_interval(times)), "warm_epochs": len(times),
               "io_read_bytes": part["io_read_bytes"].mean(), "io_write_bytes": part["io_write_bytes"].mean(),
               "swaps": part["swaps"].mean(), **_intervals("io_wait_fraction", mean_interval(part["io_wait_fraction"])),
               "read_bandwidth_bytes_per_s": part["read_bandwidth_bytes_per_s"].mean(),
               "under_load": bool(part["under_load"].map(measured_under_load).any()) if "under_load" in part
               else None}
        if base is not None:
            paired = part.merge(base[["seed", "test_mrr"]], on="seed", suffixes=("", "_base"))
            row.update(_intervals("mrr_minus_in_memory", difference_interval(list(paired["test_mrr"]),
                                                                             list(paired["test_mrr_base"]))))
            base_times = [t for cell in base["epoch_times_s"] for t in cell] if "epoch_times_s" in base else \
                list(base["epoch_time_s"])
            row.update(_intervals("time_ratio_vs_in_memory", ratio_interval(times, base_times, paired=False)))
        rows.append(row)
    table = pd.DataFrame(rows)
    table["policy"] = table["configuration"].str.split().str[0]
    return table


def run(*, mode: Mode = "full", runs: Path | None = None, results: Path = RESULTS, data: Path | None = None,
        jobs: int = 2, execute: bool = True, plot: bool = True, timing: bool = False) -> pd.DataFrame:
    """Run the grids of ``mode`` (``timing``: the side-by-side timing runs, one at a time, which have no quick
    setting; else ``jobs`` runs at a time) into ``runs`` (default ``out/disk-lp``, ``out/disk-lp-quick``,
    ``out/disk-lp-timing``; ``execute=False``: only tabulate what is recorded), then write the tables and the figure
    into ``results``; return the summary table. Raises :class:`JobFailed` when runs failed (each named on stderr)."""
    quick = mode == "quick"
    if timing and quick:
        raise ConfigError("--timing has no quick setting")
    out = runs or REPO_ROOT / ("out/disk-lp-quick" if quick else "out/disk-lp-timing" if timing else "out/disk-lp")
    if execute:
        os.environ["OMP_NUM_THREADS"] = "1"  # before the pool's processes start: one intra-op thread per run
        import torch

        torch.set_num_threads(1)  # runs in this process (one at a time) too
        overrides = list(QUICK) if quick else list(TIMING) if timing else []
        overrides.append(f"dataset.root={shared_datasets_dir() / 'fb15k237'}")  # from any working directory
        if data is not None:
            overrides.append(f"dataset.cache_dir={data}")
        grids = GRIDS[:1] if quick else GRIDS
        specs = [spec for grid in grids for spec in expand_grid(grid, overrides)]
        if quick:
            specs = [spec for spec in specs if spec.system.options.get("policy", "in_memory") in QUICK_POLICIES]
        jobs = 1 if timing else jobs
        check_failed(failures(run_grid(specs, out, jobs=jobs, progress=False)))
    recorded = run_table(out)
    table = summary_table(recorded)
    name = "disk_lp_timing" if timing else "disk_lp"
    export(recorded, results / f"{name}_runs.csv")
    export(table, results / f"{name}.csv")
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table[["model", "configuration", "seeds", "test_mrr_mean", "test_mrr_std", "mrr_minus_in_memory",
                     "time_ratio_vs_in_memory", "io_wait_fraction", "io_read_bytes", "io_write_bytes"]]
              .to_string(index=False))
    if plot and not timing:
        from experiments.figures import plot_disk_lp

        print(f"wrote {plot_disk_lp(results / 'disk_lp.csv', results / 'disk_lp.png')}")
    return table


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, quick="DistMult only, in-memory, BETA and COMET, 2 epochs, test split only",
                       runs=("--out",), runs_help="runs folder (default out/disk-lp, out/disk-lp-quick, "
                       "out/disk-lp-timing)", results=("--results",), data=("--data-dir",), data_default=None,
                       plot=True, no_run="only tabulate what is recorded")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timing", action="store_true", help="the side-by-side timing runs (one at a time)")
    return parse(parser, argv, no_quick=("--timing",))


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "disk_lp")


if __name__ == "__main__":
    sys.exit(main())
