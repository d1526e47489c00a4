"""Disk-based link prediction on FB15k-237: MRR, epoch time and IO of BETA, COMET and random against in-memory.

Usage::

    python -m experiments.figures.disk_lp [--quick] [--out out/disk-lp] [--results out/results] [--jobs 2] [--no-plot]

Runs ``experiments/specs/disk_lp_distmult.yaml`` (shallow DistMult) and ``experiments/specs/disk_lp_graphsage.yaml``
(GraphSAGE + DistMult) through the harness: p = 32 partitions, a buffer of c = 8 (p/4), policies ``beta``,
``comet`` (l = 8 logical partitions) and ``random`` (left out here, :data:`LEFT_OUT`; ``--timing`` runs it), and
the in-memory system, 3 seeds each; finished runs are skipped. Each run uses one intra-op thread
(``OMP_NUM_THREADS=1``), ``--jobs`` runs at a time.

One recipe: every run has the same negatives (count, chunks, degree fraction). A disk run draws them from the
partitions in its buffer, so the COMET claim's baseline is the *matched* in-memory run, whose negatives come from a
random node subset of the buffer's size, a new one about every buffer state (``training.negatives.subset_fraction``,
``subset_batches``; configuration ``in_memory subset0.25 b10``); the in-memory run with global negatives stays
beside it, and their difference is reported as a finding. In-memory configurations run at several learning rates
and count at the one of best mean validation MRR (:func:`select_tuned`); the disk runs at one.

Outputs:

- ``out/results/disk_lp_runs.csv``: one row per run: the warm epochs' mean time, IO read and written per epoch (suite
  and ``/proc/self/io``), swaps, IO wait and its fraction of the epoch, read bandwidth, valid and test MRR, the
  learning rate and negatives (``num_chunks``, ``negatives_per_positive``, ``degree_fraction``, and
  ``negatives_node_fraction``: the fraction of the nodes negatives come from), ``tuned``;
- ``out/results/disk_lp.csv``: per (model, configuration), tuned runs only: mean and standard deviation over seeds
  of test MRR, the MRR difference to in-memory (global negatives) and to the matched baseline, the epoch-time ratio
  to in-memory, IO per epoch and IO wait fraction;
- ``out/results/disk_lp.png`` (:func:`plot_disk_lp`).

``--quick``: DistMult only, the matched in-memory baseline (both learning rates), BETA and COMET (12 runs; the
in-memory runs with global negatives and the random policy only in full mode), the grid's 3 seeds (the claim's
differences are paired by seed), 2 epochs, a fixed sample of 5,000 validation triples (for the learning rate) and the
whole test split.
``--timing``: both models, seed 0, 3 epochs, no evaluation, one run at a time (the grid's runs share the machine
two at a time, so their epoch times are not comparable side by side): ``disk_lp_timing.csv`` with the epoch-time
ratios and IO wait fractions.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd
import numpy as np
import matplotlib.pyplot as plt

from experiments.common import (REPO_ROOT, RESULTS, SPECS, Figure, Mode, Paths, Plot, add_common_options, check_failed,
                                cli, parse)
from experiments.compare import TableSpec
from experiments.style import (MARIUSGNN, annotate_ratios, caption, color_of, configuration_label, error_bars,
                               save_figure, styled)
from experiments.report import Estimate, Finding, MIN_SEEDS, NOT_TESTABLE, claim
from suite.datasets import shared_datasets_dir
from suite.errors import ConfigError
from suite.grid import expand_grid, failures, run_grid
from suite.load import load_columns, measured_under_load
from suite.results import export, load_epochs, load_runs
from suite.stats import above, below, combine, difference_interval, mean_interval, ratio_interval

GRIDS = (SPECS / "disk_lp_distmult.yaml", SPECS / "disk_lp_graphsage.yaml")
QUICK = ("training.epochs=2", "evaluation.every=2", "evaluation.valid_sample=5000")
"""Quick mode: the DistMult configurations but random and the in-memory runs with global negatives (the matched
baseline's learning rates too, chosen by the validation MRR of a fixed sample of 5,000 of the 17,535 validation
triples), 3 seeds, 2 epochs, the whole test split (a fixed sample of 5,000 test triples saved 45 s of the job's 187
but doubled the width of the claim's interval of COMET - matched in-memory, [-0.0063, 0.0029] -> [-0.011, 0.0075],
which then straddled its threshold)."""
LEFT_OUT = ("random",)
"""Buffer policies the reproduction (quick and full mode) does not run: no claim's verdict reads them (``gnnsuite
grid`` runs the specs whole; full mode's 6 random runs took about 7 of its about 45 minutes)."""
TIMING = ("seed=0", "training.epochs=3", "evaluation.splits=[]")


def _global_negatives_in_memory(spec) -> bool:
    """Whether ``spec`` is an in-memory run whose negatives come from all nodes: full mode's second baseline (the
    finding "buffer-like negatives help or hurt in memory" and the ratios to in-memory), which quick mode leaves out
    (its 6 runs took about 60 of the job's 182 s; the COMET claim's baseline is the matched one)."""
    return spec.system.name == "in_memory" and spec.training.negatives.subset_fraction is None


SUBSET_LABEL = "subset"
"""In-memory runs whose negatives come from a random node subset (``training.negatives.subset_fraction``) are
labelled ``in_memory subset<fraction> b<batches>``: the disk runs' matched baseline."""
RECIPE = ("num_chunks", "negatives_per_positive", "degree_fraction")
"""The negative-sampling fields that must be equal in every run the COMET claim compares (one recipe)."""


def configuration(system: str, options: dict, subset_fraction: float | None = None, subset_batches: int = 1) -> str:
    """A run's label: ``in_memory``, ``in_memory subset<f> b<k>`` (negatives from a random node subset of
    fraction ``f``, a new one every ``k`` batches) or ``<policy> p<p> c<c>[ l<l>]``."""
    if system != "disk":
        if subset_fraction is None or pd.isna(subset_fraction):
            return system
        return f"{system} {SUBSET_LABEL}{float(subset_fraction):g} b{int(subset_batches)}"
    p, c = int(options["num_partitions"]), int(options["buffer_capacity"])
    ratio = int(options.get("fine_to_coarse_ratio", 1) or 1)
    return f"{options['policy']} p{p} c{c}" + (f" l{p // ratio}" if ratio > 1 else "")


@contextlib.contextmanager
def _one_thread_per_run() -> Iterator[None]:
    """One intra-op thread for every run of the block, in the pool's processes (``OMP_NUM_THREADS``, which the runs'
    thread budgets respect: :func:`suite.threads.usable_cores`) and in this one; the variable and torch's pool as they
    were afterwards, so that the jobs a reproduction runs next in this process keep their cores."""
    import torch

    previous_env, previous_threads = os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads()
    os.environ["OMP_NUM_THREADS"] = "1"  # before the pool's processes start
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous_threads)
        if previous_env is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = previous_env


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

        def config(field: str, default=None):
            value = run.get(f"config.training.{field}", default)
            return default if value is None or (isinstance(value, float) and np.isnan(value)) else value

        time_s = mean("epoch_time_s")
        read_s = mean("io_read_s")
        subset_fraction = config("negatives.subset_fraction")
        subset_batches = int(config("negatives.subset_batches", 1))
        buffer_fraction = (int(options["buffer_capacity"]) / int(options["num_partitions"])
                           if run["system"] == "disk" else subset_fraction)
        rows.append({
            "model": run["config.model.encoder"] + "+" + run["config.model.decoder"],
            "configuration": configuration(run["system"], options, subset_fraction, subset_batches),
            "system": run["system"], "policy": options.get("policy", "in_memory"), "seed": int(run["seed"]),
            "learning_rate": float(config("learning_rate")),
            **{field: config(f"negatives.{field}") for field in RECIPE},
            "negatives_node_fraction": buffer_fraction if buffer_fraction is not None else 1.0,
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
    table = pd.DataFrame(rows).sort_values(["model", "configuration", "learning_rate", "seed"])
    return select_tuned(table.reset_index(drop=True))


def select_tuned(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with ``learning_rates_tried`` (per model and configuration) and ``tuned``: true on the runs of
    each (model, configuration)'s learning rate with the highest mean validation MRR over its seeds (the only one
    when a single learning rate was run; none when several were and no validation MRR was recorded). A table
    without ``learning_rate`` counts as one learning rate per configuration."""
    runs = runs.copy()
    if "learning_rate" not in runs:
        runs["learning_rate"] = float("nan")
    runs["tuned"] = False
    runs["learning_rates_tried"] = 0
    for _, part in runs.groupby(["model", "configuration"], sort=False):
        rates = part["learning_rate"].fillna(-1.0)
        runs.loc[part.index, "learning_rates_tried"] = rates.nunique()
        if rates.nunique() == 1:
            runs.loc[part.index, "tuned"] = True
            continue
        valid = part["valid_mrr"] if "valid_mrr" in part else pd.Series(float("nan"), index=part.index)
        means = valid.groupby(rates).mean().dropna()
        if len(means):
            runs.loc[part.index[rates == means.idxmax()], "tuned"] = True
    return runs


def matched_configuration(configurations) -> str | None:
    """The disk runs' matched in-memory baseline among ``configurations``: the one with subset negatives."""
    matched = sorted(c for c in set(configurations) if c.startswith(f"in_memory {SUBSET_LABEL}"))
    return matched[0] if matched else None


def _intervals(prefix: str, interval) -> dict:
    return {prefix: interval.estimate, f"{prefix}_ci_low": interval.low, f"{prefix}_ci_high": interval.high}


def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (model, configuration): seeds; test MRR, mean and std over seeds, with its 95 % t interval
    (``test_mrr_mean_ci_low``/``_high``); its difference to in-memory (same model) paired by seed, with its interval;
    the warm epoch time (mean over every warm epoch of every seed, t interval) and its ratio to in-memory (geometric
    means, Welch t interval on the logs); IO per epoch; the IO wait fraction (t interval over runs); and whether a
    run was measured under foreign load (``under_load``: any of them). Only the tuned runs count
    (:func:`select_tuned`: each configuration at its learning rate of best validation MRR); ``mrr_minus_matched``
    is the difference to the matched in-memory baseline (:func:`matched_configuration`), paired by seed.
    Intervals from :mod:`suite.stats`."""
    rows = []
    if "tuned" in runs:
        runs = runs[runs["tuned"].astype(bool)]
    base_runs = {model: part for (model, configuration), part in runs.groupby(["model", "configuration"])
                 if configuration == "in_memory"}
    matched_runs = {model: part[part["configuration"] == matched_configuration(part["configuration"])]
                    for model, part in runs.groupby("model") if matched_configuration(part["configuration"])}
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
        if "learning_rate" in part:
            row.update(learning_rate=float(part["learning_rate"].iloc[0]),
                       learning_rates_tried=int(part["learning_rates_tried"].iloc[0])
                       if "learning_rates_tried" in part else 1)
        matched = matched_runs.get(model)
        if matched is not None:
            paired = part.merge(matched[["seed", "test_mrr"]], on="seed", suffixes=("", "_matched"))
            row.update(_intervals("mrr_minus_matched", difference_interval(list(paired["test_mrr"]),
                                                                           list(paired["test_mrr_matched"]))))
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


def job_specs(overrides: Sequence[str], quick: bool, timing: bool = False) -> list:
    """The runs of a mode: quick, the DistMult grid but :data:`LEFT_OUT` and the in-memory runs with global negatives;
    full, both grids but :data:`LEFT_OUT`; timing, both grids whole."""
    grids = GRIDS[:1] if quick else GRIDS
    return [spec for grid in grids for spec in expand_grid(grid, overrides)
            if timing or (spec.system.options.get("policy") not in LEFT_OUT
                          and not (quick and _global_negatives_in_memory(spec)))]


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
        overrides = list(QUICK) if quick else list(TIMING) if timing else []
        overrides.append(f"dataset.root={shared_datasets_dir() / 'fb15k237'}")  # from any working directory
        if data is not None:
            overrides.append(f"dataset.cache_dir={data}")
        specs = job_specs(overrides, quick, timing)
        with _one_thread_per_run():
            check_failed(failures(run_grid(specs, out, jobs=1 if timing else jobs, progress=False)))
    recorded = run_table(out)
    table = summary_table(recorded)
    name = "disk_lp_timing" if timing else "disk_lp"
    export(recorded, results / f"{name}_runs.csv")
    export(table, results / f"{name}.csv")
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        columns = ["model", "configuration", "seeds", "learning_rate", "test_mrr_mean", "test_mrr_std",
                   "mrr_minus_in_memory", "mrr_minus_matched", "time_ratio_vs_in_memory", "io_wait_fraction",
                   "io_read_bytes", "io_write_bytes"]
        print(table[[c for c in columns if c in table]].to_string(index=False))
    if plot and not timing:

        print(f"wrote {plot_disk_lp(results / 'disk_lp.csv', results / 'disk_lp.png')}")
    return table


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, quick="DistMult only, matched in-memory, BETA and COMET, 2 epochs",
                       runs=("--out",), runs_help="runs folder (default out/disk-lp, out/disk-lp-quick, "
                       "out/disk-lp-timing)", results=("--results",), data=("--data-dir",), data_default=None,
                       plot=True, no_run="only tabulate what is recorded")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timing", action="store_true", help="the side-by-side timing runs (one at a time)")
    return parse(parser, argv, no_quick=("--timing",))


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "disk_lp")


# ---------------------------------------------------------------------------------------------- the figure
def plot_disk_lp(csv_path: str | Path, out_png: str | Path) -> Path:
    """Disk-based link prediction per policy (``experiments/figures/disk_lp.py``), one row of panels per model: test MRR
    (mean over seeds, 95 % t interval; axis from 0; the in-memory mean dashed), warm epoch time (95 % interval)
    with the ratio to in-memory annotated and IO wait hatched, and MiB read and written per epoch.

    Reads only ``csv_path``.
    """
    table = pd.read_csv(csv_path)
    models = list(dict.fromkeys(table["model"]))
    with styled():
        fig, axes = plt.subplots(len(models), 3, figsize=(15.0, 4.4 * len(models)), layout="constrained",
                                 squeeze=False)
        for row, model in zip(axes, models):
            part = table[table["model"] == model]
            part = part.sort_values("configuration", key=lambda c: c.map(lambda v: (v != "in_memory", v))
                                    ).reset_index(drop=True)
            mrr_ax, time_ax, io_ax = row
            positions = np.arange(len(part))
            colors = [color_of("in_memory") if c == "in_memory" else color_of(str(p), color_of("disk"))
                      for c, p in zip(part["configuration"], part.get("policy", part["configuration"]))]
            errors = error_bars(part, "test_mrr_mean")
            if errors is None:  # an older table: one standard deviation
                errors = part["test_mrr_std"].fillna(0).to_numpy()
            mrr_ax.bar(positions, part["test_mrr_mean"], yerr=errors, color=colors)
            reference = "in_memory" if (part["configuration"] == "in_memory").any() else \
                matched_configuration(part["configuration"])  # quick mode runs only the matched baseline
            base = part.loc[part["configuration"] == reference, "test_mrr_mean"]
            if len(base):
                mrr_ax.axhline(float(base.iloc[0]), color="k", linestyle="--", linewidth=0.8,
                               label=f"{'in-memory' if reference == 'in_memory' else 'matched in-memory'} mean")
                mrr_ax.legend(loc="lower right")
            mrr_ax.set_ylim(0, None)
            mrr_ax.set_ylabel(f"test MRR (filtered), {int(part['seeds'].max())} seeds")
            mrr_ax.set_title(f"{model}: test MRR")
            bars = time_ax.bar(positions, part["epoch_time_s"], color=colors, yerr=error_bars(part, "epoch_time_s"))
            time_ax.bar(positions, (part["io_wait_fraction"] * part["epoch_time_s"]).fillna(0), color="none",
                        edgecolor="k", hatch="//", linewidth=0.5, label="IO wait")
            if "time_ratio_vs_in_memory" in part:  # none without the global in-memory baseline (quick mode)
                annotate_ratios(time_ax, bars, part, "time_ratio_vs_in_memory")
            time_ax.set_ylabel("warm epoch time (s), mean")
            time_ax.set_title("epoch time (annotated: / in-memory)")
            time_ax.legend(loc="lower right")
            width = 0.4
            io_ax.bar(positions - width / 2, part["io_read_bytes"].fillna(0) / 2**20, width, color="tab:blue",
                      label="read")
            io_ax.bar(positions + width / 2, part["io_write_bytes"].fillna(0) / 2**20, width, color="tab:orange",
                      label="written back")
            io_ax.set_ylabel("MiB per epoch")
            io_ax.set_title("partition IO per epoch")
            io_ax.legend(loc="upper left")
            for ax in row:
                ax.set_xticks(positions)
                ax.set_xticklabels([configuration_label(c) for c in part["configuration"]], rotation=20, ha="right")
        fig.suptitle("Disk-based link prediction on FB15k-237: partition-buffer policies against in-memory")
        seeds = int(table["seeds"].min())
        caption(fig, f"{MARIUSGNN}, its COMET vs BETA accuracy experiment (COMET keeps in-memory MRR where BETA "
                     "loses; link prediction from disk with the partition buffer)", Path(csv_path).name,
                f"95 % t interval over {seeds} seed(s) (MRR) and over the warm epochs of every seed (epoch time)")
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- the claims
def _recipe_mismatch(rows: pd.DataFrame, recorded: set[str]) -> str:
    """Why ``rows`` (one model's compared runs, of a table with the columns ``recorded``) are not one recipe, or
    ''."""
    missing = [field for field in RECIPE + ("learning_rate", "negatives_node_fraction") if field not in recorded]
    if missing:
        return f"disk_lp_runs.csv lacks {', '.join(missing)} (recorded before the one-recipe comparison)"
    differing = [field for field in RECIPE if rows[field].nunique(dropna=False) > 1]
    if differing:
        return f"the runs' negatives differ in {', '.join(differing)}; the comparison needs one recipe"
    return ""


def _buffer_negatives_finding(model: str, effect) -> str:
    """The sentence on what buffer-like negatives do to in-memory training (a finding, not the claim's verdict)."""
    if effect.defined and effect.low > 0:
        return (f"finding: {model} buffer-like negatives help in-memory training (subset - global negatives "
                f"{effect}): the disk runs' negatives, not only their partition order, set their MRR")
    if effect.defined and effect.high < 0:
        return (f"finding: {model} buffer-like negatives hurt in-memory training (subset - global negatives "
                f"{effect}): drawing negatives from the buffer costs accuracy against global negatives")
    return f"{model} buffer-like vs global negatives in memory: no difference shown ({effect})"


@claim("comet-accuracy", "COMET keeps in-memory accuracy where BETA loses (MariusGNN: COMET's MRR within about "
       "0.01 of in-memory training, BETA's lower), against an in-memory baseline of the same recipe: negatives from "
       "a random node subset the size of the buffer, learning rate tuned on validation", ("disk_lp_runs.csv",))
def comet_accuracy(results: Path) -> Finding:
    recorded = pd.read_csv(results / "disk_lp_runs.csv")
    runs = select_tuned(recorded)
    parts, verdicts, estimates, seeds, problems = [], [], [], [], []
    for model, rows in runs.groupby("model", sort=True):
        matched = matched_configuration(rows["configuration"])
        configurations = set(rows["policy"]) | ({"matched"} if matched else set())
        if not {"matched", "comet", "beta"} <= configurations:
            if {"comet", "beta"} <= configurations:
                problems.append(f"{model}: no matched in-memory baseline (in-memory runs with subset negatives)")
            continue
        tuned = rows[rows["tuned"]]
        mismatch = _recipe_mismatch(tuned, set(recorded.columns))
        if not mismatch:
            comet_rows = tuned[tuned["policy"] == "comet"]
            matched_rows = tuned[tuned["configuration"] == matched]
            if not np.allclose(matched_rows["negatives_node_fraction"].to_numpy(dtype=float),
                               float(comet_rows["negatives_node_fraction"].iloc[0])):
                mismatch = (f"the matched baseline's node subset ({matched}) is not COMET's buffer fraction "
                            f"{float(comet_rows['negatives_node_fraction'].iloc[0]):g}")
            elif int(matched_rows["learning_rates_tried"].iloc[0]) < int(comet_rows["learning_rates_tried"].iloc[0]):
                mismatch = "the in-memory baseline was tuned over fewer learning rates than the disk runs"
        if mismatch:
            problems.append(f"{model}: {mismatch}")
            continue
        labels = tuned["configuration"].where(tuned["configuration"] != matched, "matched")
        labels = labels.where(tuned["system"] != "disk", tuned["policy"])
        wide = tuned.assign(label=labels).pivot_table(index="seed", columns="label", values="test_mrr",
                                                      aggfunc="first")
        both = wide[["matched", "comet", "beta"]].dropna()
        seeds.append(len(both))
        comet_gap = difference_interval(list(both["comet"]), list(both["matched"]))
        beta_gap = difference_interval(list(both["beta"]), list(both["comet"]))
        rate = float(tuned.loc[tuned["configuration"] == matched, "learning_rate"].iloc[0])
        tried = int(tuned.loc[tuned["configuration"] == matched, "learning_rates_tried"].iloc[0])
        estimates += [Estimate(f"{model} matched in-memory MRR", mean_interval(both["matched"])),
                      Estimate(f"{model} COMET - matched in-memory MRR", comet_gap, "> -0.01"),
                      Estimate(f"{model} BETA - COMET MRR", beta_gap, "< 0")]
        verdicts.append(combine([above(comet_gap, -0.01, min_n=MIN_SEEDS), below(beta_gap, 0.0, min_n=MIN_SEEDS)]))
        text = (f"{model}: matched in-memory ({matched}, lr {rate:g} best of {tried} on validation) "
                f"{mean_interval(both['matched'])}, COMET - matched {comet_gap}, BETA - COMET {beta_gap}")
        if "random" in wide:
            pair = wide[["random", "matched"]].dropna()
            random_gap = difference_interval(list(pair["random"]), list(pair["matched"]))
            estimates.append(Estimate(f"{model} random - matched in-memory MRR", random_gap))
            text += f", random - matched {random_gap}"
        if "in_memory" in wide:
            pair = wide[["matched", "in_memory"]].dropna()
            effect = difference_interval(list(pair["matched"]), list(pair["in_memory"]))
            pair = wide[["comet", "in_memory"]].dropna()
            against_global = difference_interval(list(pair["comet"]), list(pair["in_memory"]))
            estimates += [Estimate(f"{model} in-memory subset - global negatives MRR", effect),
                          Estimate(f"{model} COMET - in-memory with global negatives MRR", against_global)]
            text += f", COMET - in-memory with global negatives {against_global}; " \
                    f"{_buffer_negatives_finding(model, effect)}"
        parts.append(text)
    if not parts:
        return Finding("; ".join(problems) or "no model with matched in-memory, COMET and BETA runs", "",
                       NOT_TESTABLE, reason="; ".join(problems) or "disk_lp_runs.csv lacks a configuration")
    configurations = ", ".join(sorted(c for c in set(runs["configuration"]) if c != "in_memory"))
    reason = f"{min(seeds)} seed(s); the claim needs {MIN_SEEDS}" if min(seeds) < MIN_SEEDS else ""
    return Finding("; ".join(parts + problems),
                   f"FB15k-237 link prediction ({configurations}), {min(seeds)} seed(s), filtered test MRR, "
                   "differences paired by seed; one negative recipe, the matched in-memory baseline draws its "
                   "negatives from a random node subset the buffer's size; holds when COMET - matched > -0.01 and "
                   "BETA - COMET < 0", combine(verdicts), tuple(estimates), reason=reason)


# ---------------------------------------------------------------------------------------------- the job
def _reproduce(mode: Mode, paths: Paths) -> None:
    run(mode=mode, runs=paths.runs / "disk_lp", results=paths.results, data=paths.data)


FIGURE = Figure(
    "disk_lp", "disk-based link prediction on FB15k-237: MRR, epoch time and IO of BETA, COMET, random and "
    "in-memory", _reproduce, ("disk_lp.csv", "disk_lp_runs.csv", "disk_lp.png"),
    "about 20 minutes at two runs at a time (measured 20.2 on the quiet 2 cores at 16234ac from a fresh data "
    "folder; 30 runs: 6 DistMult and 4 GraphSAGE configurations x 3 seeds, the random policy left out); FB15k-237 from "
    "../shared/datasets, under 100 MiB", __name__, plots=(Plot("disk_lp", plot_disk_lp, "disk_lp.csv"),),
    claims=(comet_accuracy,),
    tables={"disk_lp.csv": TableSpec(("model", "configuration")),
            "disk_lp_runs.csv": TableSpec(("model", "configuration", "seed"))})
"""The disk link-prediction figure, registered in :data:`experiments.plugins.FIGURES`."""


if __name__ == "__main__":
    sys.exit(main())
