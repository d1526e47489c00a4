"""Link-prediction results table: the recorded runs of the link-prediction specs, one row per run.

Reads every completed link-prediction run under ``--runs`` (default ``out/lp``; produced by
``gnnsuite run experiments/specs/fb15k237_*.yaml --out out/lp``, ``gnnsuite run experiments/specs/link_prediction_synthetic.yaml
--out out/lp`` and ``gnnsuite grid experiments/specs/link_prediction_pipelined.yaml --out out/lp``) through
:func:`suite.results.load_runs` and writes ``out/results/link_prediction.csv``: model, decoder, system and staleness
bound (1 = sync), epochs, training time, filtered and unfiltered test MRR and Hits@1/3/10, the last validation
MRR, and the mean and maximum embedding staleness of pipelined runs (from their batch records).

Usage: ``python -m experiments.figures.link_prediction_grid [--runs out/lp] [--out out/results/link_prediction.csv]``;
``--run [--quick]`` first runs the specs of ``gnnsuite reproduce``'s job into ``--runs`` (FB15k-237 DistMult, and in
full mode ComplEx, GraphSAGE + DistMult and the pipelined grid, 5 epochs each; quick: DistMult alone, 2 epochs, tested
only, on a fixed sample of 5,000 test triples).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from experiments.common import SPECS, Figure, JobFailed, Mode, Paths, add_common_options, cli
from experiments.compare import TableSpec
from suite.results import export, load_batches, load_runs

QUICK = ("training.epochs=2", "evaluation.splits=[test]", "evaluation.test_sample=5000")
"""Quick mode (no claim reads the job): DistMult in memory alone (the pipelined grid's two runs took 24 of the job's
33 s), 2 epochs, tested only, on a fixed sample of 5,000 of the 20,466 test triples (3 epochs and the whole split
took 77 s; the MRR after 3 epochs was 0.225)."""
FULL = ("training.epochs=5", "evaluation.every=5")
"""Full mode (no claim reads the job; it fits the reproduction's budget): 5 epochs of every run, validated and tested
after the last (the specs' 15, 15 and 8 epochs and the pipelined grid's 10 took about 20 minutes)."""
SPEC_FILES = {"quick": ("fb15k237_distmult.yaml",),
              "full": ("fb15k237_distmult.yaml", "fb15k237_complex.yaml", "fb15k237_graphsage_distmult.yaml")}
"""The single runs of each mode (full mode adds the grid :data:`PIPELINED_GRID`)."""
PIPELINED_GRID = SPECS / "link_prediction_pipelined.yaml"

COLUMNS = {
    "config.name": "name",
    "dataset": "dataset",
    "config.model.encoder": "encoder",
    "config.model.decoder": "decoder",
    "config.model.embedding_dim": "embedding_dim",
    "config.model.inverse_relations": "inverse_relations",
    "config.training.negatives.degree_fraction": "degree_fraction",
    "system": "system",
    "epochs": "epochs",
    "train_time_s": "train_time_s",
    "metrics.valid.mrr": "valid_mrr",
    "config.evaluation.test_sample": "test_sample",
    "metrics.test.filtered_mrr": "test_mrr",
    "metrics.test.filtered_hits@1": "test_hits@1",
    "metrics.test.filtered_hits@3": "test_hits@3",
    "metrics.test.filtered_hits@10": "test_hits@10",
    "metrics.test.unfiltered_mrr": "test_unfiltered_mrr",
    "metrics.test.unfiltered_hits@10": "test_unfiltered_hits@10",
    "staleness.mean": "staleness_mean",
    "staleness.max": "staleness_max",
    "run_id": "run_id",
}


def _bound(run: pd.Series) -> int | None:
    """The pipelined system's effective staleness bound (1 when ``sync``); None for other systems."""
    if run.get("system") != "pipelined":
        return None
    if run.get("config.system.options.sync") is True:
        return 1
    bound = run.get("config.system.options.staleness_bound")
    return 16 if bound is None or pd.isna(bound) else int(bound)


def table(runs: Path) -> pd.DataFrame:
    """One row per completed link-prediction run under ``runs``, with the columns of :data:`COLUMNS` and, for
    pipelined runs, the mean and maximum ``embedding_staleness`` of their batches."""
    df = load_runs(runs, include_incomplete=False)
    df = df[(df["status"] == "completed") & (df["task"] == "link_prediction")]
    out = pd.DataFrame({new: df[old] if old in df else None for old, new in COLUMNS.items()})
    out.insert(out.columns.get_loc("system") + 1, "staleness_bound",
               pd.array([_bound(row) for _, row in df.iterrows()], dtype="Int64"))
    batches = load_batches(runs)
    if not batches.empty and "embedding_staleness" in batches:
        staleness = batches.groupby("run_id")["embedding_staleness"].agg(["mean", "max"])
        out = out.merge(staleness.rename(columns={"mean": "embedding_staleness_mean",
                                                  "max": "embedding_staleness_max"}),
                        left_on="run_id", right_index=True, how="left")
    for column in out.columns:
        if out[column].dtype == float:
            out[column] = out[column].round(4)
    return out.sort_values(["dataset", "name"]).reset_index(drop=True)


def run_specs(mode: Mode, runs: Path, data: Path | None) -> None:
    """Run the specs of ``mode`` into ``runs`` (finished runs are kept), one torch thread (small link-prediction
    batches: much faster on a shared machine). Raises :class:`JobFailed` when runs failed."""
    import torch

    from suite.config import load_spec
    from suite.datasets import shared_datasets_dir
    from suite.grid import expand_grid, failures, run_grid

    overrides = list(QUICK if mode == "quick" else FULL) + [
        f"dataset.root={shared_datasets_dir() / 'fb15k237'}"] + ([f"dataset.cache_dir={data}"] if data else [])
    specs = [load_spec(SPECS / name, overrides) for name in SPEC_FILES[mode]]
    if mode == "full":
        specs += expand_grid(PIPELINED_GRID, overrides)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        failed = failures(run_grid(specs, runs, progress=False))
    finally:
        torch.set_num_threads(threads)
    if failed:
        raise JobFailed(f"link prediction: {len(failed)} runs failed ({failed[0].get('error')})")


def run(*, mode: Mode = "full", runs: Path = Path("out/lp"), csv: Path = Path("out/results/link_prediction.csv"),
        data: Path | None = None, execute: bool = False) -> pd.DataFrame:
    """Tabulate the link-prediction runs recorded in ``runs`` into ``csv`` and return the table; with ``execute``,
    run the specs of ``mode`` there first (``data``: their dataset cache)."""
    if execute:
        run_specs(mode, runs, data)
    df = table(runs)
    export(df, csv)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(df.drop(columns=["run_id"]).to_string(index=False))
    return df


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, quick="with --run: 2 epochs, tested on 5,000 test triples, DistMult only",
                       runs=("--runs",), runs_help="folder of recorded runs", data=("--data-dir",),
                       data_default=None)
    parser.set_defaults(runs=Path("out/lp"))
    parser.add_argument("--out", dest="csv", type=Path, default=Path("out/results/link_prediction.csv"),
                        help="CSV to write")
    parser.add_argument("--run", dest="execute", action="store_true", help="run the specs first")
    return cli(run, vars(parser.parse_args(argv)), "link_prediction")


# ---------------------------------------------------------------------------------------------- the job
def _reproduce(mode: Mode, paths: Paths) -> None:
    run(mode=mode, runs=paths.runs / "lp", csv=paths.results / "link_prediction.csv", data=paths.data, execute=True)


FIGURE = Figure(
    "link_prediction", "link prediction on FB15k-237: DistMult (and ComplEx, GraphSAGE + DistMult in full mode), "
    "pipelined vs synchronous MRR", _reproduce, ("link_prediction.csv",),
    "about 5 minutes (measured 4.9 on the quiet 2 cores at 16234ac from a fresh data folder: 5 epochs of each "
    "of the 5 runs; FB15k-237 from ../shared, one thread)", __name__,
    tables={"link_prediction.csv": TableSpec(("name",))})
"""The link-prediction table, registered in :data:`experiments.plugins.FIGURES`."""


if __name__ == "__main__":
    raise SystemExit(main())
