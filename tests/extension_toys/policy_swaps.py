"""A toy figure: buffer swaps per epoch of every registered link-prediction partition-buffer policy at a few
``(p, c)``, against the lower bound of any policy that visits every pair of partitions (MariusGNN's BETA analysis).
Exact: the plans themselves are counted, nothing is timed.

Usage::

    python -m experiments.figures.policy_swaps [--quick] [--csv out/results/policy_swaps.csv]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from experiments.common import RESULTS, Figure, Mode, Paths, Plot, add_common_options, cli, write_csv
from experiments.compare import TableSpec
from experiments.report import Estimate, Finding, claim
from experiments.style import MARIUSGNN, caption, color_of, display_label, save_figure, styled
from suite.stats import FAILS, HOLDS, Interval
from systems.disk.policies import POLICIES, PolicySpec, make_plan

SETTINGS = ((16, 4), (32, 8), (64, 8))
QUICK_SETTINGS = ((16, 4), (32, 8))


def lower_bound(p: int, c: int) -> int:
    """Fewest swaps that bring every pair of ``p`` partitions together in a buffer of ``c``."""
    return math.ceil((p * (p - 1) / 2 - c * (c - 1) / 2) / (c - 1))


def count_swaps(settings: Sequence[tuple[int, int]], seed: int = 0) -> pd.DataFrame:
    """One row per registered link-prediction policy and ``(p, c)``: its plan's swaps and the lower bound."""
    rows = []
    for name in POLICIES.names():
        if "link_prediction" not in POLICIES.get(name).tasks or name == "in_memory":
            continue
        for p, c in settings:
            plan = make_plan(name, PolicySpec(p, c), seed=seed, epoch=0)
            rows.append({"policy": name, "num_partitions": p, "capacity": c, "swaps": plan.swaps,
                         "lower_bound": lower_bound(p, c), "seed": seed})
    return pd.DataFrame(rows)


def run(*, mode: Mode = "full", csv: Path = RESULTS / "policy_swaps.csv", png: Path | None = None,
        seed: int = 0) -> pd.DataFrame:
    """Count the swaps of ``mode``'s settings into ``csv`` (and draw ``png``)."""
    table = count_swaps(QUICK_SETTINGS if mode == "quick" else SETTINGS, seed)
    write_csv(table, csv)
    if png is not None:
        plot_policy_swaps(csv, png)
    return table


def plot_policy_swaps(csv_path: str | Path, out_png: str | Path) -> Path:
    """Swaps per epoch by policy (bars) and the lower bound (black ticks), per ``(p, c)``."""
    table = pd.read_csv(csv_path)
    settings = list(dict.fromkeys(zip(table["num_partitions"], table["capacity"])))
    policies = list(dict.fromkeys(table["policy"]))
    width = 0.8 / len(policies)
    with styled():
        fig, ax = plt.subplots(figsize=(7.0, 4.0), layout="constrained")
        for i, policy in enumerate(policies):
            rows = table[table["policy"] == policy].set_index(["num_partitions", "capacity"]).loc[settings]
            ax.bar([x + (i - (len(policies) - 1) / 2) * width for x in range(len(settings))], rows["swaps"], width,
                   color=color_of(policy), label=display_label("POLICIES", policy))
        bounds = table.drop_duplicates(["num_partitions", "capacity"]).set_index(["num_partitions", "capacity"])
        ax.scatter(range(len(settings)), bounds.loc[settings, "lower_bound"], marker="_", s=600, color="black",
                   label="lower bound")
        ax.set_xticks(range(len(settings)), [f"p = {p}, c = {c}" for p, c in settings])
        ax.set_ylabel("swaps per epoch")
        ax.legend()
        caption(fig, f"{MARIUSGNN}, BETA's swap count", Path(csv_path).name, "none: exact counts of each plan")
        return save_figure(fig, out_png)


@claim("policy-swaps-bound", "No registered policy swaps fewer times than the lower bound (MariusGNN's BETA "
       "analysis)", ("policy_swaps.csv",))
def swaps_above_bound(results: Path) -> Finding:
    table = pd.read_csv(results / "policy_swaps.csv")
    margin = (table["swaps"] - table["lower_bound"]).min()
    estimate = Estimate("fewest swaps above the lower bound", Interval(float(margin), float(margin), float(margin),
                                                                         len(table), "exact"), ">= 0")
    return Finding(f"smallest margin {margin} swaps over {len(table)} plans", "exact plan counts",
                   HOLDS if margin >= 0 else FAILS, (estimate,))


def _reproduce(mode: Mode, paths: Paths) -> None:
    run(mode=mode, csv=paths.results / "policy_swaps.csv", png=paths.results / "policy_swaps.png")


FIGURE = Figure(
    "policy_swaps", "swaps per epoch of every link-prediction partition-buffer policy (exact)", _reproduce,
    ("policy_swaps.csv", "policy_swaps.png"), "seconds", __name__,
    plots=(Plot("policy_swaps", plot_policy_swaps, "policy_swaps.csv"),), claims=(swaps_above_bound,),
    tables={"policy_swaps.csv": TableSpec(("policy", "num_partitions", "capacity"), exact=("swaps", "lower_bound"))})
"""The toy figure."""


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``run`` with the flags' values."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=RESULTS / "policy_swaps.csv")
    parser.add_argument("--png", type=Path, default=RESULTS / "policy_swaps.png")
    add_common_options(parser, quick="two settings", seed=0, plot=True)
    args = parser.parse_args(argv)
    return cli(run, dict(mode=args.mode, csv=args.csv, png=args.png if args.plot else None, seed=args.seed),
               "policy_swaps")


if __name__ == "__main__":
    sys.exit(main())
