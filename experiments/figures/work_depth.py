"""Work-depth analysis of GNN models: the table and the check of the formulas against counted operator DAGs.

Usage::

    python -m experiments.figures.work_depth [--quick] [--out-dir out/results] [--seed 0]

Writes (atomically, tidy CSV with provenance columns):

- ``work_depth.csv``: one row per model: W and D of a layer, a forward pass and a training iteration as leading
  terms, and their values at the sizes of the ``arxiv-like`` graph (n, m, d read from its store when it is in
  ``data/``, else ogbn-arxiv's published sizes) with k = 128, L = 3;
- ``work_depth_check.csv``: counted W and D of the traced forward pass (:mod:`simulators.op_dag`) of every model
  along sweeps of n, m, k, d and L on random graphs, beside the formulas;
- ``work_depth_fit.csv``: per model, variable and quantity, the log-log slopes of the counts and of the fitted
  formula (one set of constants per model fitted to all its counts), the formula's exponent, the worst relative
  error and pass/fail (:func:`simulators.work_depth_model.fit_scaling`);
- ``work_depth_check.png``: counted vs fitted formula along every sweep (drawn from the CSVs alone).

``--quick``: smaller sweeps (seconds), for tests.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import numpy as np
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from experiments.common import DATA, RESULTS, Figure, Mode, Paths, Plot, add_common_options, cli, provenance, write_csv
from experiments.compare import TableSpec
from experiments.style import BESTA, caption, plain_log_ticks, save_figure, styled
from simulators.work_depth_model import MODELS, default_sweeps, fit_scaling, scaling_sweep, work_depth_table

ARXIV_SIZES = {"n": 169343, "m": 1166243, "k": 128, "L": 3, "d": 13155}
"""ogbn-arxiv's published sizes (fallback when the arxiv-like store is not generated)."""


def reference_sizes(data_dir: Path) -> dict:
    """n, m, d of the cached arxiv-like store (k = 128, L = 3), or ogbn-arxiv's sizes without it."""
    from suite.data.store import GraphStore

    for path in sorted(data_dir.glob("arxiv-like-*")):
        if (path / "metadata.json").exists():
            store = GraphStore.open(path)
            degrees = store.csr("in").degrees()
            return {"n": store.num_nodes, "m": store.num_edges, "k": 128, "L": 3, "d": int(degrees.max()),
                    "graph": path.name}
    return {**ARXIV_SIZES, "graph": "ogbn-arxiv (published sizes)"}


def run(*, mode: Mode = "full", results: Path = RESULTS, data: Path = DATA, seed: int = 0, plot: bool = True
        ) -> dict[str, Path]:
    """Compute the table, the sweeps (small ones in ``quick`` mode) and the fits; write the CSVs and the figure into
    ``results``; return their paths. ``data``: where the arxiv-like store is looked for."""
    quick = mode == "quick"
    prov = provenance("seed", "quick", "git_sha", "numpy", "sympy", "date", seed=seed, quick=quick)
    sizes = reference_sizes(data)
    graph = sizes.pop("graph")
    table = work_depth_table(sizes=sizes).assign(reference_graph=graph, **{f"ref_{k}": v for k, v in sizes.items()},
                                                 **prov)
    check = scaling_sweep(MODELS.names(), default_sweeps(quick), seed).assign(**prov)
    fit = fit_scaling(check).assign(**prov)
    out = results
    paths = {"table": write_csv(table, out / "work_depth.csv"), "check": write_csv(check, out / "work_depth_check.csv"),
             "fit": write_csv(fit, out / "work_depth_fit.csv")}
    if plot:

        paths["figure"] = plot_work_depth_check(paths["check"], out / "work_depth_check.png", fit_csv=paths["fit"])
    with pd.option_context("display.width", 220, "display.max_columns", 20, "display.max_colwidth", 60):
        print(table[["model", "family", "layer_work", "layer_depth", "iteration_work", "iteration_depth"]]
              .to_string(index=False))
        print(fit[["model", "variable", "quantity", "exponent", "slope_counted", "slope_formula", "max_rel_error",
                   "passed"]].to_string(index=False, float_format="%.3f"))
    print(f"{int(fit['passed'].sum())}/{len(fit)} checks pass; wrote {', '.join(str(p) for p in paths.values())}")
    return paths


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    return add_common_options(parser, quick="small sweeps (seconds)", results=("--out-dir", "--results"),
                              data=("--data-dir",), seed=0, plot=True).parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "work_depth")


# ---------------------------------------------------------------------------------------------- the figure
_MODEL_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">")


def plot_work_depth_check(csv_path: str | Path, out_png: str | Path, fit_csv: str | Path | None = None) -> Path:
    """Counted (markers) vs fitted formula (lines) of work W (top) and depth D (bottom) of every model's forward
    pass, one column per swept variable, log-log (``experiments/figures/work_depth.py``). Models whose counts coincide
    share one legend entry and are drawn with distinct markers and dashes, so none hides another.

    Reads only ``csv_path`` (``work_depth_check.csv``) and ``fit_csv`` (default: ``work_depth_fit.csv`` beside
    it); the constants are refitted from the counts.
    """
    from simulators.work_depth_model import _term_matrix, fit_constants, fit_terms

    check = pd.read_csv(csv_path)
    fit = pd.read_csv(fit_csv or Path(csv_path).with_name("work_depth_fit.csv"))
    variables = list(dict.fromkeys(check["variable"]))
    models = list(dict.fromkeys(check["model"]))
    signature = {m: tuple(check[check["model"] == m][["counted_work", "counted_depth"]].to_numpy().ravel())
                 for m in models}
    same = {m: [o for o in models if signature[o] == signature[m]] for m in models}
    colors = dict(zip(models, plt.cm.tab10(np.linspace(0, 1, 10))))
    names = {"n": "nodes n", "m": "edges m", "k": "features k", "L": "layers L", "d": "max degree d"}
    with styled():
        fig, axes = plt.subplots(2, len(variables), figsize=(3.3 * len(variables), 7.0), squeeze=False,
                                 layout="constrained")
        for index, model in enumerate(models):
            rows = check[check["model"] == model]
            group = same[model]
            rank = group.index(model)
            for row, quantity in enumerate(("work", "depth")):
                fitted = _term_matrix(fit_terms(model, quantity), rows) @ fit_constants(model, quantity, rows)
                rows = rows.assign(**{f"fitted_{quantity}": fitted})
                for col, variable in enumerate(variables):
                    part = rows[rows["variable"] == variable].sort_values("value")
                    ax = axes[row, col]
                    ax.plot(part["value"], part[f"counted_{quantity}"], _MODEL_MARKERS[index % len(_MODEL_MARKERS)],
                            color=colors[model], markersize=6 - 2.5 * rank,
                            markerfacecolor="none" if rank == 0 and len(group) > 1 else colors[model])
                    ax.plot(part["value"], part[f"fitted_{quantity}"], color=colors[model], linewidth=1.0,
                            linestyle=("-", "--", ":")[rank % 3])
                    ax.set_xscale("log", base=2)
                    ax.set_yscale("log")
                    plain_log_ticks(ax, "y")
                    ax.set_xlabel(names.get(variable, variable))
                    ax.set_title(f"{quantity} vs {variable}")
            for ax in axes[0, :1]:
                ax.set_ylabel("work W (scalar operations)")
            for ax in axes[1, :1]:
                ax.set_ylabel("depth D (longest dependency chain)")
        handles = []
        for index, model in enumerate(models):
            group = same[model]
            label = model + (f" (= {', '.join(o for o in group if o != model)}: identical counts)"
                             if len(group) > 1 else "")
            handles.append(Line2D([], [], color=colors[model], marker=_MODEL_MARKERS[index % len(_MODEL_MARKERS)],
                                  linestyle=("-", "--", ":")[group.index(model) % 3], label=label,
                                  markerfacecolor="none" if group.index(model) == 0 and len(group) > 1
                                  else colors[model]))
        fig.legend(handles=handles, loc="outside right upper")
        passed = int(fit["passed"].sum())
        fig.suptitle(f"Work and depth of the traced forward pass: counted (markers) vs fitted leading-term formulas "
                     f"(lines); {passed}/{len(fit)} checks pass")
        caption(fig, f"{BESTA} (work-depth formulas of GNN models)", f"{Path(csv_path).name} (counts on random "
                "graphs along each sweep) and its fit table", "none: exact operation counts")
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- the job
def _reproduce(mode: Mode, paths: Paths) -> None:
    run(mode=mode, results=paths.results, data=paths.data)


FIGURE = Figure(
    "work_depth", "work and depth of GNN models: formulas, and counts on real operator DAGs", _reproduce,
    ("work_depth.csv", "work_depth_check.csv", "work_depth_fit.csv", "work_depth_check.png"), "about 1 minute",
    __name__, plots=(Plot("work_depth_check", plot_work_depth_check, "work_depth_check.csv"),),
    tables={"work_depth.csv": TableSpec(("model",), exact=("layer_work_value", "layer_depth_value",
                                                           "iteration_work_value", "iteration_depth_value")),
            "work_depth_fit.csv": TableSpec(("model", "variable", "quantity"),
                                            exact=("slope_counted", "slope_formula", "passed"))})
"""The work-depth figure, registered in :data:`experiments.plugins.FIGURES`."""


if __name__ == "__main__":
    raise SystemExit(main())
