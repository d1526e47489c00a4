"""The feature cache against the partition buffer at equal memory: epoch time, bytes read, hit rate, test accuracy and
time to target against the memory budget (issue 31, item 6).

Usage::

    python -m experiments.figures.cache_vs_buffer [--quick] [--out DIR] [--results DIR] [--data-dir DIR] [--no-plot]
        [--no-run] [--timings-under-load]

Runs ``experiments/specs/cache_vs_buffer_full.yaml`` (:data:`FULL_GRID`), each run in its own process
(:func:`experiments.nc_runs.run_isolated`): on ``papers-like-s`` at 200,000 nodes and Amazon Computers, 40 epochs,
seeds 0, 1, 2, in-memory training (the baseline, budget 100 %), the feature cache without policy (budget 0), the
sequential partition buffer (system ``disk``, p = 40, c / p = budget, labeled-first) and the feature cache (system
``feature_cache``) with belady at budgets of 5, 10, 25 and 50 % of the feature table, and at 25 % (the claim's
budget) the dispersed buffer and the cache with lru, s3fifo and static_degree too (84 runs). The whole grid,
``experiments/specs/cache_vs_buffer.yaml`` (:data:`GRID`: every policy at every budget, papers-like-s at its full
size, 156 runs, about 4.5 hours), is left to ``gnnsuite grid``; ``--no-run --out DIR`` tabulates its folder.
``--quick``:
``cache_vs_buffer_quick.yaml`` (Amazon Computers, budgets 10 and 25 %, the sequential buffer and belady, 12 epochs,
15 runs) in this process, about 40 s on the quiet 2 cores.

The per-run and per-configuration tables are those of :mod:`experiments.nc_runs` (as in the disk figure: warm
epochs' means, time to target against the same seed's in-memory run, paired ratios and accuracy differences, runs
under foreign load left out of the timings), with each configuration's family (in-memory, partition buffer, feature
cache), budget and cache hit rate (training lookups of the warm epochs). Beside them, per feature-cache and
dispersed-buffer row, the time to target against the sequential partition buffer of the same dataset and budget
(``time_to_target_ratio_vs_buffer``: paired log t over the seeds where both reached it; ``ttt_*_ratio_vs_buffer``
and ``ttt_seeds_faster_than_buffer`` / ``ttt_seeds_slower_than_buffer``: the per-seed ratios with censoring, a run
that never reached the target counted as slower than one that reached it within the first's whole training time);
per row the seconds in the reader and in the load stage's gather per warm epoch over the same seed's in-memory epoch
(``read_time_ratio_vs_in_memory``, ``gather_time_ratio_vs_in_memory``: every batch's rows pass through the one load
worker, so the reads are a floor under the epoch on this disk whatever the schedule); and per dataset the
crossover budget (:func:`crossover`): going up the budgets, the first at which the family faster to target in more
seeds (the feature cache with belady, fixed in advance, against the sequential buffer) differs from the one at the
budget below.

``--timings-under-load`` keeps the timings of runs measured under foreign load in the table (its
``timings_under_load`` column says so; the ``under_load`` column still flags them and the claim still leaves their
timings out): for a look at a shared machine, not for a verdict.

Outputs (``--results``, default ``out/results``): ``cache_vs_buffer.csv`` (per dataset and configuration),
``cache_vs_buffer_runs.csv`` (per run) and ``cache_vs_buffer.png`` (a row per dataset, three panels against the budget:
epoch time, MiB read per epoch, test accuracy; a line per family and policy, in-memory and the cache without
policy as horizontal references).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from experiments.common import REPO_ROOT, RESULTS, SPECS, Figure, Mode, Paths, Plot, add_common_options, check_failed, \
    cli, parse
from experiments.compare import TableSpec
from experiments.nc_runs import (TARGET_MARGIN, interval_columns, run_isolated, run_options,
                                 run_table as nc_run_table, shared_root, summary_table as nc_summary_table)
from experiments.report import (Estimate, FAILS, Finding, HOLDS, INCONCLUSIVE, MIN_SEEDS, NOT_TESTABLE, claim,
                                table_interval)
from experiments.style import caption, color_of, error_bars, load_note, save_figure, styled
from suite.grid import expand_grid, failures
from suite.results import export
from suite.load import measured_under_load
from suite.stats import Interval, combine, mean_interval, ratio_interval

GRID = SPECS / "cache_vs_buffer.yaml"
"""The whole grid (156 runs), not part of a reproduction: ``gnnsuite grid`` runs it."""
FULL_GRID = SPECS / "cache_vs_buffer_full.yaml"
QUICK_GRID = SPECS / "cache_vs_buffer_quick.yaml"

FAMILIES = {"in_memory": "in-memory", "disk": "partition buffer", "feature_cache": "feature cache"}
"""System name -> the family it stands for in this comparison."""
FAMILY_RANK = {"in-memory": 0, "partition buffer": 1, "feature cache": 2}

DECIDING_BUDGET = 0.25
"""The budget (fraction of the feature table) whose rows decide the claim (the issue's closing note)."""
DECIDING_CACHE_POLICY = "belady"
"""The feature cache's policy the claim names, fixed in advance (Ginex's; optimal over the sampled-ahead window)."""
DECIDING_BUFFER_POLICY = "sequential"
"""The partition buffer's policy the claim and the crossover compare with (MariusGNN's, as it runs papers100M)."""
ACCURACY_TOLERANCE = 0.005
"""cache-vs-buffer: the feature cache keeps in-memory accuracy when its paired difference's interval lies inside
+- this."""


# ---------------------------------------------------------------------------------------------- the tables
def budget_of(system: str, options: dict) -> float:
    """A run's memory budget as a fraction of the feature table: 1 in memory, c / p for the partition buffer, the
    cache's ``cache_fraction`` (its default where neither budget is given; NaN for a budget in bytes)."""
    from systems.feature_cache.feature_cache_system import DEFAULT_CACHE_FRACTION

    budgets = {
        "in_memory": lambda: 1.0,
        "disk": lambda: float(options["buffer_capacity"]) / float(options["num_partitions"]),
        "feature_cache": lambda: float(options["cache_fraction"]) if options.get("cache_fraction") is not None
        else DEFAULT_CACHE_FRACTION if options.get("cache_bytes") is None else math.nan,
    }
    return budgets[system]() if system in budgets else math.nan


def configuration_label(family: str, policy, budget: float) -> str:
    """``in-memory``, ``feature cache none`` (no budget to speak of), else ``<family> <policy> <budget %>``."""
    if family == "in-memory":
        return family
    if policy == "none":
        return f"{family} none"
    return f"{family} {policy} {budget:.0%}"


def _hit_rates(out: Path, run_dirs: pd.Series) -> pd.Series:
    """Per run, the training hit rate of its warm epochs (epoch 0, with the cold cache, left out where there are
    more); NaN for runs without a cache."""
    from suite.results import load_epochs

    epochs = load_epochs(out)
    if "cache_hits" not in epochs:
        return pd.Series(math.nan, index=run_dirs.index)

    def rate(run_dir: str) -> float:
        mine = epochs[epochs["run_dir"] == run_dir]
        warm = mine[mine["epoch"] > 0] if len(mine) > 1 else mine
        hits, misses = warm["cache_hits"].sum(), warm["cache_misses"].sum()
        return float(hits / (hits + misses)) if warm["cache_hits"].notna().any() and hits + misses > 0 else math.nan

    return run_dirs.map(rate)


def run_table(out: Path) -> pd.DataFrame:
    """:func:`experiments.nc_runs.run_table` of the runs under ``out`` (time to target included), each with its
    family, budget, cache policy, hit rate and this comparison's configuration label."""
    runs = nc_run_table(out, lambda system, options: system)
    if runs.empty:
        return runs
    options = runs.apply(run_options, axis=1)
    family = runs["system"].map(FAMILIES)
    budget = pd.Series([budget_of(s, o) for s, o in zip(runs["system"], options)], index=runs.index)
    policy = [o.get("policy") for o in options]
    return runs.assign(family=family, budget=budget, policy=policy, hit_rate=_hit_rates(out, runs["run_dir"]),
                       configuration=[configuration_label(f, p, b) for f, p, b in zip(family, policy, budget)])


def _censored_ratio(time_s: float, reached, total_s: float, other_time_s: float, other_reached,
                    other_total_s: float) -> float:
    """One seed's time to target over another configuration's, a run that never reached the target counted as
    slower (ratio inf or 0) only when the other reached it within the first's whole training time; NaN when
    neither reached it or the order is not known."""
    def flag(value) -> bool | None:
        return bool(value) if pd.notna(value) else None

    mine, theirs = flag(reached), flag(other_reached)
    if mine and theirs:
        return time_s / other_time_s
    if mine and theirs is False:
        return 0.0 if time_s < other_total_s else math.nan
    if mine is False and theirs:
        return math.inf if other_time_s < total_s else math.nan
    return math.nan


def _versus_buffer(group: pd.DataFrame, buffer: pd.DataFrame) -> dict:
    """A configuration's time to target against the sequential buffer's of the same dataset and budget, paired by
    seed over timed runs (neither under load): the ratio's interval over seeds where both reached it, and the
    censored ratios' median, smallest and largest (:func:`_censored_ratio`) over the seeds where the order is
    known."""
    empty = {"time_to_target_ratio_vs_buffer": math.nan, "time_to_target_ratio_vs_buffer_ci_low": math.nan,
             "time_to_target_ratio_vs_buffer_ci_high": math.nan, "time_to_target_pairs_vs_buffer": 0,
             "ttt_median_ratio_vs_buffer": math.nan, "ttt_min_ratio_vs_buffer": math.nan,
             "ttt_max_ratio_vs_buffer": math.nan, "ttt_seeds_vs_buffer": 0, "ttt_seeds_faster_than_buffer": 0,
             "ttt_seeds_slower_than_buffer": 0}
    if buffer.empty:
        return empty
    base = buffer.set_index("seed")
    timed = group[group["quiet"] & group["seed"].map(lambda s: s in base.index and bool(base.loc[s, "quiet"]))]
    both = timed[timed["reached_target"].fillna(False).astype(bool)
                 & timed["seed"].map(lambda s: bool(base.loc[s, "reached_target"]) if pd.notna(
                     base.loc[s, "reached_target"]) else False)]
    ratio = ratio_interval(list(both["time_to_target_s"]), [base.loc[s, "time_to_target_s"] for s in both["seed"]])
    censored = [_censored_ratio(r["time_to_target_s"], r["reached_target"], r["train_time_s"],
                                base.loc[r["seed"], "time_to_target_s"], base.loc[r["seed"], "reached_target"],
                                base.loc[r["seed"], "train_time_s"]) for _, r in timed.iterrows()]
    known = [value for value in censored if not math.isnan(value)]
    return {"time_to_target_ratio_vs_buffer": ratio.estimate, "time_to_target_ratio_vs_buffer_ci_low": ratio.low,
            "time_to_target_ratio_vs_buffer_ci_high": ratio.high, "time_to_target_pairs_vs_buffer": ratio.n,
            "ttt_median_ratio_vs_buffer": float(np.median(known)) if known else math.nan,
            "ttt_min_ratio_vs_buffer": min(known, default=math.nan),
            "ttt_max_ratio_vs_buffer": max(known, default=math.nan), "ttt_seeds_vs_buffer": len(known),
            "ttt_seeds_faster_than_buffer": sum(value < 1.0 for value in known),
            "ttt_seeds_slower_than_buffer": sum(value > 1.0 for value in known)}


def _stage_floor(group: pd.DataFrame, base: pd.DataFrame) -> dict:
    """A configuration's seconds in the reader (reads and placing the read rows) and in the load stage's gather,
    per warm epoch, over the in-memory epoch of the same seed (timed runs, paired by seed; mean with its 95 % t
    interval). Every batch's rows pass through the one load worker, so the reads are a floor under the epoch time
    on this disk whatever the schedule, and the gather the load stage's share of it."""
    timed = group[group["quiet"] & group["seed"].map(lambda s: s in base.index and bool(base.loc[s, "quiet"]))]
    memory = [base.loc[s, "epoch_time_s"] for s in timed["seed"]]
    ratios = {name: [value / epoch for value, epoch in zip(timed[column].astype(float), memory)]
              for name, column in (("read_time_ratio_vs_in_memory", "io_read_s"),
                                   ("gather_time_ratio_vs_in_memory", "load_gather_s"))}
    return {key: value for name, values in ratios.items()
            for key, value in interval_columns(name, mean_interval(values)).items()}


def summary_table(runs: pd.DataFrame, timings_under_load: bool = False) -> pd.DataFrame:
    """Per dataset and configuration: :func:`experiments.nc_runs.summary_table` (means over seeds with 95 %
    intervals, ratios and accuracy differences to in-memory paired by seed, time to target), the family, budget
    and hit rate, the time to target against the sequential buffer at the same budget (:func:`_versus_buffer`), and
    per dataset the crossover budget (:func:`crossover`). ``timings_under_load``: keep the timings of runs measured
    under foreign load (``under_load`` still flags them)."""
    flagged = runs["under_load"].map(measured_under_load).astype(bool)
    table = nc_summary_table(runs.assign(under_load=False) if timings_under_load else runs)
    keys = ["dataset", "configuration"]
    per = runs.assign(flagged=flagged).groupby(keys, sort=False)
    extra = per.agg(family=("family", "first"), budget=("budget", "first"), hit_rate=("hit_rate", "mean"),
                    hit_rate_min=("hit_rate", "min"), hit_rate_max=("hit_rate", "max"),
                    loaded=("flagged", "all")).reset_index()
    table = table.drop(columns=["under_load"]).merge(extra, on=keys, how="left")
    table = table.rename(columns={"loaded": "under_load"})
    quiet = runs.assign(quiet=True if timings_under_load else ~flagged)
    if "reached_target" not in quiet:
        quiet = quiet.assign(reached_target=None, time_to_target_s=math.nan)
    versus = []
    for (dataset, label), group in quiet.groupby(keys, sort=False):
        first = group.iloc[0]
        same_budget = (quiet["budget"] - first["budget"]).abs() < 1e-9
        buffer = quiet[(quiet["dataset"] == dataset) & (quiet["family"] == "partition buffer")
                       & (quiet["policy"] == DECIDING_BUFFER_POLICY) & same_budget]
        compared = first["family"] != "in-memory" and not (first["family"] == "partition buffer"
                                                           and first["policy"] == DECIDING_BUFFER_POLICY)
        memory = quiet[(quiet["dataset"] == dataset) & (quiet["system"] == "in_memory")].set_index("seed")
        versus.append({"dataset": dataset, "configuration": label,
                       **_versus_buffer(group, buffer if compared else buffer.iloc[0:0]),
                       **_stage_floor(group, memory)})
    table = table.merge(pd.DataFrame(versus), on=keys, how="left")
    table["timings_under_load"] = timings_under_load
    crossings = {dataset: crossover(rows) for dataset, rows in table.groupby("dataset")}
    table["crossover_budget"] = table["dataset"].map(lambda d: crossings[d][0])
    table["crossover"] = table["dataset"].map(lambda d: crossings[d][1])
    order = table["family"].map(FAMILY_RANK).fillna(3)
    return table.assign(_rank=order).sort_values(["dataset", "_rank", "policy", "budget"], na_position="first",
                                                 kind="stable").drop(columns="_rank").reset_index(drop=True)


def _winner(faster: int, slower: int) -> str | None:
    """The family faster to target in more seeds (the cache faster in ``faster`` seeds, slower in ``slower``,
    censoring included); None on a tie or without a seed."""
    if faster == slower:
        return None
    return "feature cache" if faster > slower else "partition buffer"


def crossover(table: pd.DataFrame) -> tuple[float, str]:
    """One dataset's crossover budget from its rows of :func:`summary_table`: going up the budgets where the
    feature cache (belady) and the sequential buffer were both compared, the first budget whose winner in time to
    target (the family faster in more seeds, censoring included: :func:`_winner`) differs from the one below;
    with a sentence (who wins below and from there on, or at every budget; ``undecided`` budgets are skipped).
    NaN when no winner changes."""
    cache = table[(table["family"] == "feature cache") & (table["policy"] == DECIDING_CACHE_POLICY)]
    winners = [(float(b), _winner(int(faster), int(slower))) for b, faster, slower in
               zip(cache["budget"], cache["ttt_seeds_faster_than_buffer"], cache["ttt_seeds_slower_than_buffer"])]
    decided = sorted((b, w) for b, w in winners if w is not None)
    if not decided:
        return math.nan, "no budget decided (no timed pair reached the target)"
    for (below_budget, before), (budget, after) in zip(decided, decided[1:]):
        if after != before:
            return budget, f"{before} faster to target up to {below_budget:.0%}, {after} from {budget:.0%}"
    budgets = ", ".join(f"{b:.0%}" for b, _ in decided)
    return math.nan, f"{decided[0][1]} faster to target at every decided budget ({budgets})"


# ---------------------------------------------------------------------------------------------- the run
def run(*, mode: Mode = "full", runs: Path | None = None, results: Path = RESULTS, data: Path | None = None,
        execute: bool = True, plot: bool = True, quiet: bool = False, timings_under_load: bool = False
        ) -> pd.DataFrame:
    """Run the grid of ``mode`` into ``runs`` (default ``out/cache-vs-buffer``, ``out/cache-vs-buffer-quick``;
    full: each run in its own process, quick: in this one; ``execute=False``: only tabulate what is recorded), then
    write the tables and the figure into ``results``; return the summary table. Raises
    :class:`~experiments.common.JobFailed` when runs failed."""
    quick = mode == "quick"
    out = runs or REPO_ROOT / ("out/cache-vs-buffer-quick" if quick else "out/cache-vs-buffer")
    if execute:
        overrides = [f"dataset.cache_dir={data}"] if data is not None else []
        specs = [shared_root(spec) for spec in expand_grid(QUICK_GRID if quick else FULL_GRID, overrides)]
        if quick:
            from suite.grid import run_grid

            summaries = run_grid(specs, out, progress=not quiet)
        else:
            summaries = run_isolated(specs, out)
        check_failed(failures(summaries))
    recorded = run_table(out)
    result = summary_table(recorded, timings_under_load)
    export(result, results / "cache_vs_buffer.csv")
    export(recorded.drop(columns=["run_dir"]), results / "cache_vs_buffer_runs.csv")
    if not quiet:
        with pd.option_context("display.width", 250, "display.max_columns", 30):
            print(result[["dataset", "configuration", "seeds", "epoch_time_s", "time_ratio_vs_in_memory",
                          "io_read_bytes", "hit_rate", "test_accuracy", "accuracy_gap_vs_in_memory",
                          "target_reached", "time_to_target_s", "ttt_median_ratio_vs_buffer",
                          "crossover_budget"]].to_string(index=False))
    if plot:
        path = plot_cache_vs_buffer(results / "cache_vs_buffer.csv", results / "cache_vs_buffer.png")
        if not quiet:
            print(f"wrote {path}")
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, quick="Amazon Computers, budgets 10 and 25 %%, sequential, belady (15 runs, "
                                     "~40 s)", runs=("--out",),
                       runs_help="runs folder (default out/cache-vs-buffer, out/cache-vs-buffer-quick)",
                       results=("--results",), data=("--data-dir",), data_default=None, plot=True, quiet=True,
                       no_run="only tabulate what is recorded")
    parser.add_argument("--timings-under-load", action="store_true",
                        help="keep the timings of runs measured under foreign load in the table (flagged)")
    return parse(parser, argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "cache_vs_buffer")


# ---------------------------------------------------------------------------------------------- the figure
def _line_style(family: str, policy) -> dict:
    """A line per family and policy: the buffer solid, the cache dashed, each policy in its colour."""
    buffer = family == "partition buffer"
    return {"color": color_of(str(policy)), "linestyle": "-" if buffer else "--",
            "marker": "s" if buffer else "o"}


PANELS = (("epoch_time_s", "warm epoch time (s)", 1.0), ("io_read_bytes", "MiB read per epoch", 1 / 2**20),
          ("test_accuracy", "test accuracy", 1.0))


def plot_cache_vs_buffer(csv_path: str | Path, out_png: str | Path) -> Path:
    """The feature cache against the partition buffer (``experiments/figures/cache_vs_buffer.py``): per dataset,
    warm epoch time, MiB read per epoch and test accuracy against the memory budget (fraction of the feature
    table), a line per family and policy (mean over seeds with its 95 % interval), in-memory and the cache without
    policy as horizontal references.

    Reads only ``csv_path``.
    """
    table = pd.read_csv(csv_path)
    datasets = list(dict.fromkeys(table["dataset"]))
    with styled():
        fig, axes = plt.subplots(len(datasets), len(PANELS), figsize=(15.0, 4.2 * len(datasets)),
                                 layout="constrained", squeeze=False)
        for row_axes, dataset in zip(axes, datasets):
            _draw_dataset(table[table["dataset"] == dataset], row_axes, dataset)
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right upper", fontsize=8)
        fig.suptitle("Feature cache vs partition buffer at equal memory (budget: fraction of the feature table)")
        seeds = int(table["seeds"].min()) if "seeds" in table else 1
        loaded = " Timings include runs measured under foreign load (--timings-under-load)." if \
            bool(table.get("timings_under_load", pd.Series([False])).fillna(False).astype(bool).any()) else ""
        caption(fig, "issue 31 (Ginex, GNNDrive, DiskGNN, GraphBolt against MariusGNN's partition buffer, one "
                     "harness)", Path(csv_path).name, f"95 % t interval over {seeds} seed(s)",
                load_note(table, lambda r: f"{r['dataset']} {r['configuration']}") + loaded)
        return save_figure(fig, out_png)


def _draw_dataset(rows: pd.DataFrame, axes, dataset: str) -> None:
    references = rows[(rows["family"] == "in-memory") | (rows["policy"] == "none")]
    swept = rows[~rows.index.isin(references.index)]
    for ax, (column, label, scale) in zip(axes, PANELS):
        for (family, policy), line in swept.groupby(["family", "policy"], sort=False):
            line = line.sort_values("budget")
            bars = error_bars(line, column)
            ax.errorbar(line["budget"], line[column] * scale, yerr=None if bars is None else bars * scale, capsize=2,
                        label=f"{family}, {policy}", **_line_style(family, policy))
        for _, reference in references.iterrows():
            value = reference[column] * scale
            if pd.notna(value):
                ax.axhline(value, color="k" if reference["family"] == "in-memory" else "grey", linewidth=0.9,
                           linestyle=":", label=reference["configuration"])
        budgets = sorted(swept["budget"].dropna().unique())
        ax.set_xscale("log")
        if budgets:
            ax.set_xticks(budgets)
            ax.set_xticklabels([f"{b:.0%}" for b in budgets])
            ax.minorticks_off()
        ax.set_xlabel("memory budget (fraction of the feature table)")
        ax.set_ylabel(label)
        ax.set_title(f"{dataset}: {label}", fontsize=9)
    axes[2].set_ylim(0, None)


# ---------------------------------------------------------------------------------------------- the claim
def _accuracy_part(row: pd.Series) -> tuple[str, Estimate]:
    """The cache keeps in-memory accuracy: holds when the paired difference's 95 % interval lies inside +-
    :data:`ACCURACY_TOLERANCE`, does not hold when it lies wholly outside, else (or with fewer than 3 seeds)
    inconclusive."""
    gap = table_interval(row, "accuracy_gap_vs_in_memory", "seeds", "paired t over seeds")
    estimate = Estimate(f"{row['dataset']} {row['configuration']} - in-memory test accuracy", gap,
                        f"within +-{ACCURACY_TOLERANCE}")
    if not gap.defined or gap.n < MIN_SEEDS:
        return INCONCLUSIVE, estimate
    if -ACCURACY_TOLERANCE < gap.low and gap.high < ACCURACY_TOLERANCE:
        return HOLDS, estimate
    if gap.low >= ACCURACY_TOLERANCE or gap.high <= -ACCURACY_TOLERANCE:
        return FAILS, estimate
    return INCONCLUSIVE, estimate


def _time_part(row: pd.Series) -> tuple[str, Estimate, str]:
    """The cache reaches the target before the sequential buffer (same dataset and budget, paired by seed): holds
    when the ratio's 95 % interval (seeds where both reached it, >= 3) lies below 1, or when in every timed seed
    the buffer never reached it and the cache did within the buffer's whole training time; does not hold in the
    mirror cases; else inconclusive."""
    ratio = table_interval(row, "time_to_target_ratio_vs_buffer", "time_to_target_pairs_vs_buffer",
                           "paired log t over seeds")
    name = f"{row['dataset']} {row['configuration']} time to target / {DECIDING_BUFFER_POLICY} buffer"
    median, seeds = float(row.get("ttt_median_ratio_vs_buffer", math.nan)), int(row.get("ttt_seeds_vs_buffer", 0) or 0)
    smallest, largest = (float(row.get(f"ttt_{end}_ratio_vs_buffer", math.nan)) for end in ("min", "max"))
    if ratio.n >= MIN_SEEDS and ratio.defined:
        verdict = HOLDS if ratio.high < 1.0 else FAILS if ratio.low >= 1.0 else INCONCLUSIVE
        return verdict, Estimate(name, ratio, "< 1"), f"x{ratio}"
    extreme = 0.0 if largest == 0.0 else math.inf if smallest == math.inf else None  # the same in every seed
    if seeds >= MIN_SEEDS and extreme is not None:
        bound = Interval(extreme, extreme, extreme, seeds, "censored: one side never reached the target")
        text = f"the {'buffer' if extreme == 0.0 else 'cache'} never reached the target in {seeds} seeds"
        return (HOLDS if extreme == 0.0 else FAILS), Estimate(name, bound, "< 1"), text
    return INCONCLUSIVE, Estimate(name, ratio, "< 1"), f"x{ratio} (censored median {median:.3g} over {seeds} seeds)"


def _deciding(table: pd.DataFrame) -> pd.DataFrame:
    """The rows that decide the claim, fixed in advance: the feature cache with belady at the 25 % budget."""
    return table[(table["family"] == "feature cache") & (table["policy"] == DECIDING_CACHE_POLICY)
                 & ((table["budget"] - DECIDING_BUDGET).abs() < 1e-9)]


def _context(table: pd.DataFrame) -> list[str]:
    """Not part of the verdict: at the deciding budget, each configuration's hit rate, bytes read and accuracy
    difference; per dataset the crossover."""
    parts = []
    at = table[((table["budget"] - DECIDING_BUDGET).abs() < 1e-9) & (table["family"] != "in-memory")]
    for _, row in at.iterrows():
        hit = f", hit rate {row['hit_rate']:.3f}" if pd.notna(row.get("hit_rate")) else ""
        parts.append(f"{row['dataset']} {row['configuration']}: {row['io_read_bytes'] / 2**20:.0f} MiB/epoch{hit}, "
                     f"accuracy {table_interval(row, 'accuracy_gap_vs_in_memory', 'seeds')} vs in-memory")
    loaded = bool(table["timings_under_load"].fillna(False).astype(bool).any()) if "timings_under_load" in table \
        else False
    for dataset, rows in table.groupby("dataset"):
        parts.append(f"{dataset} crossover: {rows['crossover'].iloc[0]}" + (" (timings under load)" if loaded else ""))
    return parts


@claim("cache-vs-buffer", f"At {DECIDING_BUDGET:.0%} of the feature table, a sample-ahead feature cache (Belady, "
       f"fixed in advance) keeps in-memory accuracy (paired difference within +-{ACCURACY_TOLERANCE}) and reaches "
       "the target accuracy before MariusGNN's partition buffer (sequential policy) at the same memory (issue 31: "
       "Ginex, GNNDrive and DiskGNN against MariusGNN)", ("cache_vs_buffer.csv",))
def cache_vs_buffer(results: Path) -> Finding:
    table = pd.read_csv(results / "cache_vs_buffer.csv")
    deciding = _deciding(table)
    if deciding.empty:
        return Finding("no feature-cache belady row at the 25 % budget", "", NOT_TESTABLE,
                       reason="cache_vs_buffer.csv has no such row")
    groups, parts, estimates, excluded = [], [], [], []
    for _, row in deciding.iterrows():
        accuracy, accuracy_estimate = _accuracy_part(row)
        if measured_under_load(row.get("under_load")):
            time, time_estimate, text = INCONCLUSIVE, Estimate(
                f"{row['dataset']} {row['configuration']} time to target / {DECIDING_BUFFER_POLICY} buffer",
                Interval(math.nan, math.nan, math.nan, 0, ""), "< 1"), "not timed: under load"
            excluded.append(f"{row['dataset']} {row['configuration']} (timings)")
        else:
            time, time_estimate, text = _time_part(row)
        groups.append(combine([accuracy, time]))
        estimates += [accuracy_estimate, time_estimate]
        parts.append(f"{row['dataset']} {row['configuration']}: accuracy - in-memory {accuracy_estimate.interval}, "
                     f"time to target vs sequential buffer {text}")
    measured = "; ".join(parts) + f" (not part of the verdict: {'; '.join(_context(table))})"
    return Finding(measured, f"{', '.join(sorted(set(deciding['dataset'])))}: the same model, epochs and seeds for "
                   "in-memory, the partition buffer (p = 40, c / p = budget) and the feature cache (cache_fraction = "
                   "budget), page-cache-bypassing reads; target: the same seed's in-memory final validation accuracy "
                   f"minus {TARGET_MARGIN}; per dataset both parts must hold (95 % intervals over >= 3 seeds)",
                   combine(groups), tuple(estimates),
                   excluded=(f"{len(excluded)} measured under foreign load, timings left out: " + ", ".join(excluded))
                   if excluded else "")


# ---------------------------------------------------------------------------------------------- the job
def _reproduce(mode: Mode, paths: Paths) -> None:
    run(mode=mode, runs=paths.runs / "cache-vs-buffer", results=paths.results, data=paths.data, quiet=True)


FIGURE = Figure(
    "cache_vs_buffer", "feature cache vs partition buffer at equal memory: epoch time, bytes read, accuracy, time to "
    "target against the budget", _reproduce, ("cache_vs_buffer.csv", "cache_vs_buffer_runs.csv", "cache_vs_buffer.png"),
    "about 17 minutes (measured 17.4 on the quiet 2 cores at 16234ac from a fresh data folder: 84 runs each in its "
    "own process, with the stores' generation and partitioning); partitioned copies of both graphs at p = 40",
    __name__,
    plots=(Plot("cache_vs_buffer", plot_cache_vs_buffer, "cache_vs_buffer.csv"),),
    claims=(cache_vs_buffer,), tables={"cache_vs_buffer.csv": TableSpec(("dataset", "configuration"))})
"""The feature cache against the partition buffer, registered in :data:`experiments.plugins.FIGURES`."""


if __name__ == "__main__":
    sys.exit(main())
