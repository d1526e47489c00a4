"""Work-depth analysis of GNN models: the table and the check of the formulas against counted operator DAGs.

Usage::

    python experiments/work_depth.py [--quick] [--out-dir out/results] [--seed 0]

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

from experiments.common import DATA, RESULTS, Mode, add_common_options, cli, provenance, write_csv
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
        from experiments.figures import plot_work_depth_check

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


if __name__ == "__main__":
    raise SystemExit(main())
