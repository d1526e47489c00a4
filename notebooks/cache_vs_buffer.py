# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Feature cache vs partition buffer, from one grid
#
# `python -m experiments.figures.cache_vs_buffer` (issue 31, item 6) trains the same model with the same seeds
# in memory, from MariusGNN's partition buffer (system `disk`: `c / p` = the budget) and through a feature cache
# (system `feature_cache`: `cache_fraction` = the budget), at memory budgets given as fractions of the feature
# table, and records one row per run in `cache_vs_buffer_runs.csv`. This notebook reads that table only and
# compares the two families:
#
# 1. **per configuration, over seeds**: test accuracy minus the same seed's in-memory run, epoch time over it, bytes
#    read per epoch, hit rate, each with a 95 % percentile-bootstrap interval (`suite.stats.bootstrap_interval`);
# 2. **probability of improvement** (rliable's, Agarwal et al. 2021): for a cache policy X and a buffer policy Y at
#    the same dataset and budget, P(time to target of X < that of Y) over all pairs of their seeds (ties count
#    one half; a run that never reached the target counts as infinitely slow, so where both miss it is a tie);
# 3. **who wins at each budget** in time to target: the policies fixed in advance (belady, sequential) and, in
#    hindsight, each family's best policy (labelled as such).
#
# As in rliable, the numbers are computed first (sections 1-3) and drawn after (section 4) from those tables only.
# Timings of runs measured under foreign load (`under_load`) are left out unless `INCLUDE_LOADED_TIMINGS` says
# otherwise (then every timing below is "under load").

# %% tags=["parameters"]
RESULTS_DIR = None              # folder of cache_vs_buffer_runs.csv (None: <repo>/out/results)
INCLUDE_LOADED_TIMINGS = False  # keep the timings of runs measured under foreign load
CACHE_POLICY = "belady"         # the feature cache's policy fixed in advance (the REPORT claim's)
BUFFER_POLICY = "sequential"    # the partition buffer's policy fixed in advance (MariusGNN's)

# %%
import json
import math
from pathlib import Path

import suite

ROOT = Path(suite.__file__).resolve().parents[1]  # the repository (editable install)
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

from suite.load import measured_under_load
from suite.stats import bootstrap_interval

RESULTS_DIR = Path(RESULTS_DIR) if RESULTS_DIR else ROOT / "out" / "results"
pd.set_option("display.width", 160)
runs = pd.read_csv(RESULTS_DIR / "cache_vs_buffer_runs.csv")
loaded = runs["under_load"].map(measured_under_load).astype(bool)
if not INCLUDE_LOADED_TIMINGS:
    runs.loc[loaded, ["epoch_time_s", "time_to_target_s"]] = math.nan
print(f"{len(runs)} runs, {int(loaded.sum())} measured under foreign load"
      + (" (timings kept)" if INCLUDE_LOADED_TIMINGS else " (their timings left out)"))
runs[["dataset", "configuration", "seed", "epoch_time_s", "test_accuracy", "reached_target", "time_to_target_s"]]

# %% [markdown]
# ## 1. Per configuration, paired with in-memory by seed

# %%
def paired_with_memory(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run with the same dataset's and seed's in-memory run beside it: accuracy difference, epoch-time ratio,
    time to target (a run that never reached it: inf; not timed: NaN)."""
    memory = runs[runs["family"] == "in-memory"].set_index(["dataset", "seed"])
    key = list(zip(runs["dataset"], runs["seed"]))
    reached = runs["reached_target"].map(lambda v: str(v).lower() == "true" if pd.notna(v) else None)
    timed = runs["epoch_time_s"].notna()
    ttt = [t if hit else math.inf if hit is False and was_timed else math.nan
           for t, hit, was_timed in zip(runs["time_to_target_s"], reached, timed)]
    return runs.assign(
        accuracy_gap=runs["test_accuracy"].to_numpy() - memory["test_accuracy"].reindex(key).to_numpy(),
        epoch_ratio=runs["epoch_time_s"].to_numpy() / memory["epoch_time_s"].reindex(key).to_numpy(), ttt=ttt)


def per_configuration(paired: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds with a 95 % percentile-bootstrap interval (seeded) of each measure."""
    rows = []
    for (dataset, family, policy, budget), group in paired.groupby(["dataset", "family", "policy", "budget"],
                                                                    dropna=False, sort=True):
        row = {"dataset": dataset, "family": family, "policy": policy, "budget": budget, "seeds": len(group)}
        for column in ("accuracy_gap", "epoch_ratio", "io_read_bytes", "hit_rate"):
            interval = bootstrap_interval(group[column].astype(float), statistic=np.mean)
            row.update({column: interval.estimate, f"{column}_low": interval.low, f"{column}_high": interval.high})
        rows.append(row)
    return pd.DataFrame(rows)


paired = paired_with_memory(runs)
configurations = per_configuration(paired)
configurations

# %% [markdown]
# ## 2. Probability of improvement in time to target, cache policy over buffer policy

# %%
def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """P(X < Y) over all pairs (ties: one half), rliable's probability of improvement for lower-is-better X, Y;
    NaN without a pair."""
    x, y = x[~np.isnan(x)], y[~np.isnan(y)]
    if len(x) == 0 or len(y) == 0:
        return math.nan
    less = (x[:, None] < y[None, :]).sum()
    ties = (x[:, None] == y[None, :]).sum()
    return float((less + 0.5 * ties) / (len(x) * len(y)))


def improvements(paired: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and budget, every cache policy against every buffer policy (time to target)."""
    rows = []
    for (dataset, budget), group in paired.groupby(["dataset", "budget"], sort=True):
        caches = group[group["family"] == "feature cache"]
        buffers = group[group["family"] == "partition buffer"]
        for cache_policy, x in caches.groupby("policy"):
            for buffer_policy, y in buffers.groupby("policy"):
                rows.append({"dataset": dataset, "budget": budget, "cache_policy": cache_policy,
                             "buffer_policy": buffer_policy,
                             "p_cache_faster": probability_of_improvement(x["ttt"].to_numpy(float),
                                                                          y["ttt"].to_numpy(float))})
    return pd.DataFrame(rows, columns=["dataset", "budget", "cache_policy", "buffer_policy", "p_cache_faster"])


poi = improvements(paired)
poi

# %% [markdown]
# ## 3. Who wins at each budget (median time to target over seeds)

# %%
def winners(paired: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and budget: the median time to target of the policies fixed in advance and of each family's
    best policy in hindsight, and the family that is faster (None when either is unknown)."""
    rows = []
    for (dataset, budget), group in paired.groupby(["dataset", "budget"], sort=True):
        medians = group.groupby(["family", "policy"])["ttt"].median()
        family = lambda name: medians[medians.index.get_level_values(0) == name]  # noqa: E731
        fixed = {"feature cache": medians.get(("feature cache", CACHE_POLICY), math.nan),
                 "partition buffer": medians.get(("partition buffer", BUFFER_POLICY), math.nan)}
        best = {name: family(name).min() if len(family(name)) else math.nan for name in fixed}
        row = {"dataset": dataset, "budget": budget}
        for label, values in (("fixed", fixed), ("best", best)):
            cache, buffer = values["feature cache"], values["partition buffer"]
            row[f"{label}_cache_ttt_s"], row[f"{label}_buffer_ttt_s"] = cache, buffer
            row[f"{label}_winner"] = None if math.isnan(cache) or math.isnan(buffer) or cache == buffer else \
                "feature cache" if cache < buffer else "partition buffer"
        rows.append(row)
    return pd.DataFrame(rows)


wins = winners(paired[paired["family"] != "in-memory"])
wins

# %% [markdown]
# ## 4. Plots (from the tables above only)

# %%
def plot_intervals(configurations: pd.DataFrame, column: str, label: str, reference: float):
    """rliable-style interval estimates: one horizontal bar per configuration (its 95 % interval), a tick at the
    mean, a panel per dataset."""
    datasets = list(dict.fromkeys(configurations["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 0.35 * len(configurations) + 1.5),
                             squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        rows = configurations[(configurations["dataset"] == dataset)
                              & (configurations["family"] != "in-memory")].reset_index(drop=True)
        names = [f"{f} {p} {b:.0%}" for f, p, b in zip(rows["family"], rows["policy"], rows["budget"])]
        colors = ["tab:orange" if f == "partition buffer" else "tab:blue" for f in rows["family"]]
        ax.barh(range(len(rows)), rows[f"{column}_high"] - rows[f"{column}_low"], left=rows[f"{column}_low"],
                color=colors, alpha=0.6, height=0.6)
        ax.scatter(rows[column], range(len(rows)), color="k", marker="|", s=120, zorder=3)
        ax.axvline(reference, color="grey", linestyle=":")
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(names, fontsize=8)
        ax.set_xlabel(label)
        ax.set_title(dataset)
    fig.tight_layout()
    return fig


def plot_improvement(poi: pd.DataFrame):
    """P(cache faster to target than buffer) against the budget, a line per pair of policies."""
    datasets = list(dict.fromkeys(poi["dataset"]))
    fig, axes = plt.subplots(1, max(1, len(datasets)), figsize=(6 * max(1, len(datasets)), 3.5), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        for (cache, buffer), rows in poi[poi["dataset"] == dataset].groupby(["cache_policy", "buffer_policy"]):
            ax.plot(rows["budget"], rows["p_cache_faster"], marker="o", linestyle="-" if buffer == BUFFER_POLICY
                    else "--", label=f"{cache} vs {buffer}")
        ax.axhline(0.5, color="grey", linestyle=":")
        ax.set(ylim=(-0.05, 1.05), xlabel="memory budget (fraction of the feature table)",
               ylabel="P(cache faster to target)", title=dataset)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


plot_intervals(configurations, "accuracy_gap", "test accuracy - in-memory (same seed)", 0.0)
plt.show()
plot_intervals(configurations, "epoch_ratio", "epoch time / in-memory (same seed)", 1.0)
plt.show()
plot_improvement(poi)
plt.show()

# %%
summary = {
    "runs": len(runs), "loaded_runs": int(loaded.sum()), "timings_under_load": bool(INCLUDE_LOADED_TIMINGS),
    "datasets": sorted(set(runs["dataset"])), "configurations": len(configurations),
    "budgets": sorted(float(b) for b in set(runs.loc[runs["family"] != "in-memory", "budget"].dropna())),
    "p_cache_faster": {f"{r.dataset} {r.budget:g} {r.cache_policy}/{r.buffer_policy}":
                       None if math.isnan(r.p_cache_faster) else round(r.p_cache_faster, 4) for r in poi.itertuples()},
    "fixed_winner": {f"{r.dataset} {r.budget:g}": r.fixed_winner if isinstance(r.fixed_winner, str) else None
                     for r in wins.itertuples()},
}
print("SUMMARY " + json.dumps(summary))
