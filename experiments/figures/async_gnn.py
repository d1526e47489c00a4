"""Asynchronous GNN pipelines: the four modes simulated, and the throughput-accuracy trade-off of staleness.

Usage::

    python -m experiments.figures.async_gnn [--quick] [--out-dir out/results] [--seeds 0 1 2] [--threads 1]

1. Modes: the spec ``experiments/specs/async_gnn.yaml`` (2-layer GCN on 4 random partitions of Cora, work-depth stage
   durations) simulated in the four modes ``<micro>-<macro>`` -> ``async_gnn_modes.csv`` (makespan, throughput,
   utilization, staleness per mode), ``async_gnn_tasks.csv`` (every task) and ``async_gnn_gantt.png``.
2. Accuracy: a GCN trained with bounded-staleness neighbour representations
   (:mod:`simulators.stale_training`; P = 8 random partitions; staleness bound s = 0 synchronous, 1, 2, 4, 8, 16)
   on Cora and arxiv-like, a few seeds -> ``async_staleness_accuracy.csv``.
3. Throughput: the same graphs, partitions and model simulated with staleness bound s (s = 0: the synchronous
   ``sync-sync`` pipeline; s >= 1: ``async-async`` with forward/backward pipelining) -> ``async_tradeoff.csv``;
   with (2), the figure ``async_tradeoff.png`` (test accuracy vs simulated throughput, one point per s).

Figures are drawn from the CSVs alone. ``--quick``: Cora only, few iterations, s in {0, 2}, one seed (for tests).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import numpy as np
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
import torch

from experiments.common import RESULTS, SPECS, Figure, Mode, Paths, Plot, add_common_options, cli, provenance, write_csv
from experiments.compare import TableSpec
from experiments.style import BESTA, caption, save_figure, styled

from simulators.async_gnn_model import (async_spec_from_dict, simulate, simulate_modes,
                                  summary_table, tasks_table)
from simulators.stale_training import StaleTrainingConfig, train_stale
from suite.datasets import shared_datasets_dir
from suite.io import strict_json_dumps

DEFAULT_SPEC = SPECS / "async_gnn.yaml"

DATASETS = {
    "cora": {"dataset": {"name": "cora", "root": str(shared_datasets_dir() / "planetoid")},
             "training": {"iterations": 200, "hidden": 64, "dropout": 0.5, "weight_decay": 5e-4,
                          "learning_rate": 0.01, "eval_every": 5}},
    "arxiv-like": {"dataset": {"name": "synthetic", "preset": "arxiv-like"},
                   "training": {"iterations": 40, "hidden": 32, "dropout": 0.0, "weight_decay": 0.0,
                                "learning_rate": 0.02, "eval_every": 5}, "max_seeds": 1},
}
"""The two graphs of the accuracy side and their training settings (arxiv-like: fewer, cheaper iterations and
one seed, to keep the experiment to minutes on 2 shared cores)."""

PARTITIONS = 8


# ---------------------------------------------------------------------------------------------- computation
def run_modes(spec_path: Path, out_dir: Path, prov: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Simulate the spec's modes; write the summary and the tasks."""
    from suite.config import read_yaml

    data = read_yaml(spec_path)
    dataset = (data.get("graph") or {}).get("dataset") or {}
    root = dataset.get("root")
    if root and not Path(root).is_absolute() and not Path(root).exists():  # a spec's ../shared/datasets/...: the
        dataset["root"] = str(shared_datasets_dir() / Path(root).name)      # project's shared folder, from anywhere
    spec = async_spec_from_dict(data, source=str(spec_path))
    results = simulate_modes(spec)
    summary = summary_table(results).assign(spec=spec.name, seed=spec.seed, **prov)
    tasks = tasks_table(results)
    write_csv(summary, out_dir / "async_gnn_modes.csv")
    write_csv(tasks, out_dir / "async_gnn_tasks.csv")
    return summary, tasks


def run_accuracy(names: Sequence[str], staleness: Sequence[int], seeds: Sequence[int], quick: bool,
                 prov: dict) -> pd.DataFrame:
    """Train every (dataset, s, seed); one row each."""
    from suite.config import DatasetSpec
    from suite.datasets import open_dataset
    from suite.data.pyg_export import to_pyg_data

    rows = []
    for name in names:
        setting = DATASETS[name]
        data = to_pyg_data(open_dataset(DatasetSpec(**setting["dataset"])))
        training = dict(setting["training"], iterations=20 if quick else setting["training"]["iterations"])
        for s in staleness:
            for seed in seeds[:setting.get("max_seeds", len(seeds))]:
                config = StaleTrainingConfig(staleness=s, num_partitions=PARTITIONS, seed=seed, **training)
                result = train_stale(data, config)
                curve = result.pop("curve")
                rows.append({"dataset": name, "staleness_bound": s, "seed": seed, **result,
                             "num_nodes": int(data.num_nodes), "num_edges": int(data.edge_index.shape[1]),
                             "partitions": PARTITIONS, "iterations": config.iterations, "hidden": config.hidden,
                             "curve": strict_json_dumps(curve), **prov})
                print(f"[{name}] s={s} seed={seed}: test {result['test_accuracy']:.4f} "
                      f"(valid {result['best_valid_accuracy']:.4f}, mean staleness {result['mean_staleness']:.2f}, "
                      f"{result['train_s']:.1f} s)", flush=True)
    return pd.DataFrame(rows)


def accuracy_summary(accuracy: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and staleness bound: seeds and the mean test accuracy with its 95 % t interval over seeds
    (:func:`suite.stats.mean_interval`), and the difference to s = 0 paired by seed with its interval."""
    from suite.stats import difference_interval, mean_interval

    rows = []
    for name, part in accuracy.groupby("dataset", sort=False):
        wide = part.pivot_table(index="seed", columns="staleness_bound", values="test_accuracy", aggfunc="first")
        for s in sorted(wide.columns):
            mean = mean_interval(wide[s])
            row = {"dataset": name, "staleness_bound": int(s), "seeds": mean.n, "test_accuracy": mean.estimate,
                   "test_accuracy_ci_low": mean.low, "test_accuracy_ci_high": mean.high}
            if 0 in wide and s != 0:
                both = wide[[0, s]].dropna()
                gap = difference_interval(list(both[s]), list(both[0]))
                row.update(minus_sync=gap.estimate, minus_sync_ci_low=gap.low, minus_sync_ci_high=gap.high)
            rows.append(row)
    return pd.DataFrame(rows)


def run_throughput(names: Sequence[str], staleness: Sequence[int], prov: dict) -> pd.DataFrame:
    """Simulate each dataset's partitioned GCN pipeline at each staleness bound (see the module docstring)."""
    rows = []
    for name in names:
        setting = DATASETS[name]
        base = {"name": f"gcn-{name}-{PARTITIONS}parts",
                "graph": {"kind": "dataset", "dataset": setting["dataset"], "num_partitions": PARTITIONS},
                "durations": {"source": "workdepth", "model": "gcn", "features": setting["training"]["hidden"],
                              "ops_per_s": {"aggregate": 1e9, "update": 1e10, "activation": 4e9},
                              "op_latency_s": 1e-7},
                "pipeline": {"layers": 2, "iterations": 8, "jitter": 0.1}, "seed": 0}
        for s in staleness:
            mode = "sync-sync" if s == 0 else "async-async"
            pipeline = dict(base["pipeline"], staleness_bound=s, fb_pipeline=s > 0)
            spec = async_spec_from_dict({**base, "pipeline": pipeline, "modes": [mode]}, source=f"<{name}>")
            summary = simulate(spec, mode).summary
            rows.append({"dataset": name, "staleness_bound": s, **{k: v for k, v in summary.items()
                                                                    if k != "worker_utilization"}, **prov})
    table = pd.DataFrame(rows)
    sync = table[table["staleness_bound"] == 0].set_index("dataset")["iterations_per_s"]
    table["speedup_vs_sync"] = table["iterations_per_s"] / table["dataset"].map(sync)
    return table


# ---------------------------------------------------------------------------------------------- main
PROVENANCE = ("git_sha", "torch", "torch_geometric", "simpy", "threads", "date")
"""Columns recorded with every row: git SHA, versions, threads, date."""


def run(*, mode: Mode = "full", results: Path = RESULTS, spec: Path = DEFAULT_SPEC,
        datasets: Sequence[str] = tuple(DATASETS), staleness: Sequence[int] = (0, 1, 2, 4, 8, 16),
        seeds: Sequence[int] = (0, 1, 2), threads: int = 1, plot: bool = True) -> dict[str, Path]:
    """Everything of the module docstring, into ``results``; returns the paths written. ``quick`` mode: Cora only,
    20 iterations, s in {0, 2}."""
    quick = mode == "quick"
    torch.set_num_threads(threads)
    prov = provenance(*PROVENANCE)
    out = results
    started = time.perf_counter()
    summary, _ = run_modes(spec, out, prov)
    paths = {"modes": out / "async_gnn_modes.csv", "tasks": out / "async_gnn_tasks.csv"}
    print(summary[["mode", "makespan_s", "speedup", "iterations_per_s", "utilization_mean",
                   "feature_staleness_max", "gradient_staleness_max"]].to_string(index=False), flush=True)
    names = ["cora"] if quick else list(datasets)
    staleness = [0, 2] if quick else list(staleness)
    seeds = list(seeds)
    accuracy = run_accuracy(names, staleness, seeds, quick, prov)
    paths["accuracy"] = write_csv(accuracy, out / "async_staleness_accuracy.csv")
    throughput = run_throughput(names, staleness, prov)
    paths["throughput"] = write_csv(throughput, out / "async_tradeoff.csv")
    paths["accuracy_summary"] = write_csv(accuracy_summary(accuracy), out / "async_accuracy_summary.csv")
    if plot:

        paths["gantt"] = plot_async_gnn_gantt(paths["tasks"], out / "async_gnn_gantt.png")
        paths["tradeoff"] = plot_async_tradeoff(paths["accuracy"], out / "async_tradeoff.png",
                                                throughput_csv=paths["throughput"])
    table = accuracy.groupby(["dataset", "staleness_bound"])["test_accuracy"].agg(["mean", "std", "count"])
    table = table.join(throughput.set_index(["dataset", "staleness_bound"])[["iterations_per_s",
                                                                            "speedup_vs_sync"]])
    print(table.to_string(float_format="%.4f"))
    print(f"wrote {', '.join(str(p) for p in paths.values())} in {time.perf_counter() - started:.0f} s")
    return paths


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, quick="Cora only, 20 iterations, s in {0, 2}, one seed",
                       results=("--out-dir", "--results"), seeds=(0, 1, 2), plot=True)
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="the four-mode spec (default: %(default)s)")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--staleness", nargs="+", type=int, default=[0, 1, 2, 4, 8, 16])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: a shared machine)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "async_gnn")


# ---------------------------------------------------------------------------------------------- the figure
def plot_async_tradeoff(csv_path: str | Path, out_png: str | Path, throughput_csv: str | Path | None = None
                        ) -> Path:
    """The staleness trade-off of asynchronous GNN pipelines (``experiments/figures/async_gnn.py``), per dataset: test
    accuracy vs staleness bound s (mean over seeds with its 95 % t interval; ``async_accuracy_summary.csv``'s
    numbers) beside the simulated throughput relative to the synchronous pipeline (a unitless ratio) vs s.

    Reads only ``csv_path`` (``async_staleness_accuracy.csv``, one row per seed) and ``throughput_csv`` (default
    ``async_tradeoff.csv`` beside it).
    """
    from suite.stats import mean_interval

    accuracy = pd.read_csv(csv_path)
    throughput = pd.read_csv(throughput_csv or Path(csv_path).with_name("async_tradeoff.csv"))
    datasets = list(dict.fromkeys(accuracy["dataset"]))
    with styled():
        fig, axes = plt.subplots(len(datasets), 2, figsize=(10.0, 3.6 * len(datasets)), squeeze=False,
                                 layout="constrained")
        for (acc_ax, speed_ax), name in zip(axes, datasets):
            rows = accuracy[accuracy["dataset"] == name]
            bounds = sorted(rows["staleness_bound"].unique())
            intervals = [mean_interval(rows[rows["staleness_bound"] == s]["test_accuracy"]) for s in bounds]
            x = np.arange(len(bounds))
            means = np.array([i.estimate for i in intervals])
            errors = np.array([[max(0.0, i.estimate - i.low) if i.defined else 0.0 for i in intervals],
                               [max(0.0, i.high - i.estimate) if i.defined else 0.0 for i in intervals]])
            acc_ax.errorbar(x, means, yerr=errors, marker="o", color="tab:blue")
            seeds = min(i.n for i in intervals)
            acc_ax.set_title(f"{name}: test accuracy, {seeds} seed(s)" + (" (no interval: one seed)" if seeds < 2
                                                                          else ""))
            acc_ax.set_ylabel("test accuracy (mean, 95 % CI)")
            part = throughput[throughput["dataset"] == name].set_index("staleness_bound").reindex(bounds)
            speed_ax.bar(x, part["speedup_vs_sync"], color=["0.55" if s == 0 else "tab:green" for s in bounds])
            for xi, value in zip(x, part["speedup_vs_sync"]):
                if pd.notna(value):
                    speed_ax.annotate(f"{value:.2f}x", (xi, value), textcoords="offset points", xytext=(0, 2),
                                      ha="center", fontsize=7)
            speed_ax.axhline(1.0, color="k", linewidth=0.8, linestyle="--")
            speed_ax.set_ylabel("simulated throughput / synchronous (x)")
            speed_ax.set_title(f"{name}: simulated pipeline (s = 0: sync-sync; s >= 1: async-async)")
            for ax in (acc_ax, speed_ax):
                ax.set_xticks(x, [f"s = {int(s)}" for s in bounds])
                ax.set_xlabel("staleness bound s (iterations)")
        fig.suptitle("Asynchronous GNN pipelines: accuracy and simulated throughput against the staleness bound "
                     "(GCN, 8 partitions)")
        caption(fig, f"{BESTA} (asynchronous micro/macro pipelines: staleness vs accuracy and throughput)",
                f"{Path(csv_path).name} (training with bounded-staleness neighbour representations) and the "
                "simulated throughput table", "95 % t interval over seeds (accuracy); none for the deterministic "
                "simulation")
        return save_figure(fig, out_png)


def plot_async_gnn_gantt(csv_path: str | Path, out_png: str | Path) -> Path:
    """Gantt charts of the four asynchronous pipeline modes (``experiments/figures/async_gnn.py``, simulated), one panel
    per mode: rows are workers, colour the stage, hatching the backward pass, labels the partition; the red line
    is the makespan. Reads only ``csv_path`` (``async_gnn_tasks.csv``)."""
    with styled():
        fig = _gantt_figure(pd.read_csv(csv_path))
        fig.suptitle("2-layer GCN on Cora, 4 partitions, 3 iterations (forward + backward), simulated")
        caption(fig, f"{BESTA} (synchronous vs asynchronous micro- and macro-pipelines)", Path(csv_path).name,
                "none: one deterministic simulation per mode (seeded jitter)")
        return save_figure(fig, out_png)


def _gantt_figure(tasks: pd.DataFrame):
    """Gantt charts of simulated asynchronous-pipeline modes, one panel per mode: rows are workers
    (``L<layer>/<stage>/<index>``), colour the stage, hatching the backward pass, labels the partition; the red
    line is the makespan."""
    from simulators.async_gnn_model.spec import STAGES

    modes = list(dict.fromkeys(tasks["mode"]))
    workers = sorted(tasks["worker"].unique(), key=lambda w: (int(w.split("/")[0][1:]),
                                                              STAGES.index(w.split("/")[1]), w))
    colors = dict(zip(STAGES, ("tab:blue", "tab:orange", "tab:green")))
    fig, axes = plt.subplots(len(modes), 1, figsize=(12, 1.4 + 0.34 * len(workers) * len(modes)), sharex=True,
                             squeeze=False, layout="constrained")
    for ax, mode in zip(axes[:, 0], modes):
        _draw_gantt_mode(ax, tasks[tasks["mode"] == mode], workers, colors)
        ax.set_xlim(0, float(tasks["end"].max()) * 1.01)
    axes[-1, 0].set_xlabel("simulated time (s)")
    handles = [Patch(facecolor=c, label=s) for s, c in colors.items()] + [
        Patch(facecolor="white", edgecolor="black", hatch="///", label="backward pass"),
        Line2D([], [], color="red", label="makespan")]
    axes[0, 0].legend(handles=handles, loc="lower left", bbox_to_anchor=(0.0, 1.12), ncol=5, frameon=False)
    return fig


def _draw_gantt_mode(ax, rows: pd.DataFrame, workers: Sequence[str], colors: dict[str, str]) -> None:
    """One mode's panel of :func:`_gantt_figure`."""
    for worker_row, worker in enumerate(workers):
        group = rows[rows["worker"] == worker]
        for (stage, phase), part in group.groupby(["stage", "phase"]):
            ax.broken_barh(list(zip(part["start"], part["end"] - part["start"])), (worker_row - 0.4, 0.8),
                           facecolors=colors.get(stage, "0.5"), edgecolor="black", linewidth=0.3,
                           hatch="///" if phase == "backward" else None)
        if len(group) <= 48:
            for task in group.itertuples():
                ax.text((task.start + task.end) / 2, worker_row, str(task.partition), ha="center", va="center",
                        fontsize=5)
    makespan = float(rows["end"].max())
    ax.axvline(makespan, color="red", linewidth=0.8)
    ax.set_yticks(range(len(workers)), workers, fontsize=6)
    ax.invert_yaxis()
    ax.grid(False)
    micro, macro = rows["mode"].iloc[0].split("-")
    ax.set_title(f"micro-{micro} / macro-{macro}: makespan {makespan:.4g} s", loc="left")


def plot_simulated_gantt(csv_path: str | Path, out_png: str | Path, title: str = "") -> Path:
    """Gantt charts of the modes of any asynchronous-pipeline simulation (``gnnsuite simulate-async --gantt``),
    one panel per mode (see :func:`_gantt_figure`), titled ``title``. Reads only ``csv_path`` (a ``tasks.csv``
    of :func:`simulators.async_gnn_model.tables.tasks_table`)."""
    with styled():
        fig = _gantt_figure(pd.read_csv(csv_path))
        if title:
            fig.suptitle(title)
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- the job
def _reproduce(mode: Mode, paths: Paths) -> None:
    run(mode=mode, results=paths.results)


FIGURE = Figure(
    "async_gnn", "asynchronous micro/macro GNN pipelines: Gantt charts, staleness vs accuracy and throughput",
    _reproduce, ("async_gnn_modes.csv", "async_gnn_tasks.csv", "async_gnn_gantt.png", "async_staleness_accuracy.csv",
                 "async_accuracy_summary.csv", "async_tradeoff.csv", "async_tradeoff.png"),
    "about 5 minutes (measured 4.4 on the quiet 2 cores at 16234ac from a fresh data folder; Cora 3 seeds, "
    "arxiv-like)", __name__,
    plots=(Plot("async_tradeoff", plot_async_tradeoff, "async_staleness_accuracy.csv"),
           Plot("async_gnn_gantt", plot_async_gnn_gantt, "async_gnn_tasks.csv")),
    tables={"async_gnn_modes.csv": TableSpec(("mode",), exact=("makespan_s", "iterations_per_s", "utilization_mean")),
            "async_tradeoff.csv": TableSpec(("dataset", "staleness_bound"), exact=("speedup_vs_sync",)),
            "async_accuracy_summary.csv": TableSpec(("dataset", "staleness_bound"))})
"""The asynchronous-pipeline figures, registered in :data:`experiments.plugins.FIGURES`."""


if __name__ == "__main__":
    raise SystemExit(main())
