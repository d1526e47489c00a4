"""The figures of the experiments, each drawn from its recorded table(s) alone (no recomputation of results).

One function per figure, ``plot_<name>(csv_path, out_png) -> Path`` (figures with a second table find it beside
the first, or take it as a keyword), registered in :data:`FIGURES` with its default table in :data:`INPUTS`; a new
figure is one more function and one more entry. All share one style (:data:`STYLE`, :func:`styled`): the same
fonts, grid, colours per system and policy (:data:`COLORS`), error bars that are 95 % confidence intervals from
seeds or repeats (stored in the tables by :mod:`suite.stats`; a figure without repeats says so), and a caption
naming the figure of the paper it reproduces, its data and what its error bars are (:func:`caption`). Figures are
written atomically (rendered in memory, then renamed).

Usage::

    python experiments/figures.py sampling [--csv out/results/sampling.csv] [--out out/results/sampling.png]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from experiments.common import RESULTS
from suite.io import atomic_write_bytes
from suite.load import measured_under_load

STYLE = {
    "font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "xtick.labelsize": 8, "ytick.labelsize": 8,
    "legend.fontsize": 8, "legend.framealpha": 0.9, "figure.titlesize": 10, "axes.grid": True, "grid.alpha": 0.3,
    "axes.spines.top": False, "axes.spines.right": False, "errorbar.capsize": 3, "savefig.dpi": 150,
    "lines.markersize": 5,
}
"""The one style of every figure (matplotlib rc parameters)."""

COLORS = {
    # systems
    "in_memory": "0.55", "pipelined": "tab:purple", "disk": "tab:blue",
    # samplers
    "naive": "tab:red", "dense": "tab:blue", "pyg": "tab:green", "naive-torch": "tab:orange",
    "dense-torch": "tab:purple",
    # partition policies
    "beta": "tab:blue", "comet": "tab:green", "random": "tab:red", "sequential": "tab:blue",
    "dispersed": "tab:cyan",
}
"""One colour per system, sampler and policy, the same in every figure."""

_SAMPLER_STYLE = {"naive": ("o", "naive (layer-wise, DGL-style)"), "dense": ("s", "DENSE"),
                  "naive-torch": ("v", "naive, torch backend"), "dense-torch": ("D", "DENSE, torch backend"),
                  "pyg": ("^", "PyG NeighborSampler")}
MARIUSGNN = "MariusGNN (Waleffe et al., EuroSys 2023)"
BESTA = "Besta & Hoefler, Parallel and Distributed GNNs: an in-depth concurrency analysis"


@contextlib.contextmanager
def styled() -> Iterator[None]:
    """The shared style, for the figure drawn inside."""
    with plt.rc_context(STYLE):
        yield


def caption(fig, reproduces: str, data: str, bars: str, extra: str = "") -> None:
    """The figure's caption under it: the paper figure it reproduces, its data, what its error bars are."""
    text = f"Reproduces: {reproduces}. Data: {data}. Error bars: {bars}." + (f" {extra}" if extra else "")
    from matplotlib.transforms import ScaledTranslation

    width = max(80, int(fig.get_figwidth() * 15))
    below = fig.transFigure + ScaledTranslation(0, -6 / 72, fig.dpi_scale_trans)  # 6 points under the figure
    fig.text(0.01, 0.0, "\n".join(textwrap.wrap(text, width)), ha="left", va="top", fontsize=7.5, style="italic",
             transform=below)


def save_figure(fig, out_png: str | Path, dpi: int = 150) -> Path:
    """Render ``fig`` as PNG and write it to ``out_png`` atomically (parent folders created); close it."""
    out_png = Path(out_png)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out_png, buffer.getvalue())
    return out_png


def _errors(table: pd.DataFrame, column: str) -> np.ndarray | None:
    """Asymmetric error bars (2 x n) from ``column_ci_low`` / ``column_ci_high``, or None when absent."""
    low, high = f"{column}_ci_low", f"{column}_ci_high"
    if low not in table or high not in table:
        return None
    value = table[column].to_numpy(float)
    lower = np.nan_to_num(value - table[low].to_numpy(float), nan=0.0)
    upper = np.nan_to_num(table[high].to_numpy(float) - value, nan=0.0)
    return np.vstack([np.clip(lower, 0, None), np.clip(upper, 0, None)])


def _plain_log_ticks(ax, axis: str = "both") -> None:
    """Log axes with plain numbers at 1, 2 and 5 times powers of ten (``2``, ``0.5``, ``2e+05``) instead of
    ``2 x 10^0``."""
    for which in ("x", "y") if axis == "both" else (axis,):
        target = ax.xaxis if which == "x" else ax.yaxis
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        target.set_minor_formatter(NullFormatter())


def _configuration_label(label: str) -> str:
    """A configuration label for an axis: COMET's ``l8`` (logical partitions) spelt out, so it never reads as
    ``I8``."""
    import re

    return re.sub(r" l(\d+)$", r", \1 logical", str(label))


def _under_load(table: pd.DataFrame) -> pd.Series:
    if "under_load" not in table:
        return pd.Series(False, index=table.index)
    return table["under_load"].map(measured_under_load).astype(bool)


def _load_note(table: pd.DataFrame, label: Callable[[pd.Series], str]) -> str:
    flagged = table[_under_load(table)]
    if flagged.empty:
        return ""
    return ("Measured under foreign load (flagged, hollow/hatched, left out of the verdicts): "
            + ", ".join(label(row) for _, row in flagged.iterrows()) + ".")


# ---------------------------------------------------------------------------------------------- sampling
def _setting_title(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    fanouts = rows.sort_values("layers")["fanouts"].iloc[-1]
    return (f"{first['setting']}: {first['dataset']} ({int(first['num_nodes']):,} nodes)\n"
            f"{int(first['num_roots']):,} roots, {first['direction']}-edges, fanouts {fanouts}")


def plot_sampling(csv_path: str | Path, out_png: str | Path) -> Path:
    """Sampling comparison (``experiments/sampling.py``): per setting, time per batch vs layers (log y, one line
    per sampler: the median with its 95 % bootstrap interval; naive / DENSE annotated with its paired 95 %
    interval) above sampled edges per batch vs layers (log y). Rows measured under foreign load are hollow.

    Reads only ``csv_path``; skipped rows are listed under the panels with their reasons.
    """
    table = pd.read_csv(csv_path)
    settings = list(dict.fromkeys(table["setting"]))
    with styled():
        fig, axes = plt.subplots(2, len(settings), figsize=(6.0 * len(settings), 8.0), squeeze=False,
                                 sharex="col", layout="constrained")
        for column, setting in enumerate(settings):
            rows = table[table["setting"] == setting]
            ok = rows[rows["status"] == "ok"]
            time_ax, edges_ax = axes[0][column], axes[1][column]
            for sampler in dict.fromkeys(rows["sampler"]):
                marker, label = _SAMPLER_STYLE.get(sampler, ("x", sampler))
                color = COLORS.get(sampler, "0.3")
                line = ok[ok["sampler"] == sampler].sort_values("layers")
                if line.empty:
                    continue
                peer = sampler not in ("naive", "dense")  # dashed and hollow: never hides DENSE's line
                style = {"linestyle": "--" if peer else "-", "markerfacecolor": "none" if peer else color,
                         "zorder": 1.8 if peer else 2.2}
                time_ax.errorbar(line["layers"], line["time_s"], yerr=_errors(line, "time_s"), marker=marker,
                                 color=color, label=label, **style)
                loaded = line[_under_load(line)]
                time_ax.plot(loaded["layers"], loaded["time_s"], marker, color=color, markerfacecolor="white",
                             markersize=9, linestyle="none")
                edges_ax.plot(line["layers"], line["sampled_edges"], marker=marker, color=color, label=label,
                              **style, markersize=8 if peer else 5)
            naive = ok[ok["sampler"] == "naive"].dropna(subset=["time_ratio_vs_dense"])
            for _, row in naive.iterrows():
                low, high = row.get("time_ratio_vs_dense_ci_low"), row.get("time_ratio_vs_dense_ci_high")
                interval = f"\n[{low:.2f}, {high:.2f}]" if pd.notna(low) and pd.notna(high) else ""
                time_ax.annotate(f"{row['time_ratio_vs_dense']:.2f}x{interval}", (row["layers"], row["time_s"]),
                                 textcoords="offset points", xytext=(0, 8), ha="center", fontsize=7,
                                 color=COLORS["naive"])
                edges_ax.annotate(f"{row['edges_ratio_vs_dense']:.1f}x", (row["layers"], row["sampled_edges"]),
                                  textcoords="offset points", xytext=(0, 7), ha="center", fontsize=7,
                                  color=COLORS["naive"])
            for ax in (time_ax, edges_ax):
                ax.set_yscale("log")
                low, high = ax.get_ylim()
                ax.set_ylim(low, high * 3)  # room for the annotations
                ax.grid(True, which="both", alpha=0.25)
            time_ax.set_title(_setting_title(rows))
            time_ax.set_ylabel("time per batch (s): median, 95 % CI")
            edges_ax.set_ylabel("sampled edges per batch (median)")
            edges_ax.set_xlabel("layers (hops)")
            edges_ax.set_xticks(sorted(rows["layers"].unique()))
            time_ax.legend(loc="upper left")
            skipped = rows[rows["status"] == "skipped"]
            notes = [f"{s} skipped: {', '.join(f'L{int(l)}' for l in grp['layers'])} ({grp['reason'].iloc[0]})"
                     for s, grp in skipped.groupby("sampler", sort=False)]
            if notes:
                edges_ax.text(0.0, -0.16, "\n".join(notes), transform=edges_ax.transAxes, fontsize=7, va="top",
                              wrap=True)
        first = table.iloc[0]
        repeats = table["repeats"].dropna()
        fig.suptitle(f"Multi-hop sampling per mini-batch (annotations: naive / DENSE, paired by roots)\n"
                     f"{int(first['threads'])} torch threads, torch {first['torch']}, {str(first['date'])[:10]}, "
                     f"git {str(first['git_sha'])[:10]}, samplers {first.get('sampling_code_sha', '?')}")
        caption(fig, f"{MARIUSGNN}, Fig. 7 as the report cites it (DENSE vs layer-wise sampling time as layers grow)",
                f"{Path(csv_path).name}, {'quick (small graphs)' if bool(first.get('quick')) else 'full'} mode",
                "95 % bootstrap interval of the median over "
                + (f"{int(repeats.min())}" if len(repeats) and repeats.min() == repeats.max() else
                   f"{int(repeats.min()) if len(repeats) else 0}-{int(repeats.max()) if len(repeats) else 0}")
                + " timed repeats; ratio intervals: paired log t over the repeats",
                _load_note(table.drop_duplicates(["setting", "layers"]),
                                      lambda r: f"{r['setting']} L{int(r['layers'])}"))
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- pipeline
def plot_pipeline_speed(csv_path: str | Path, out_png: str | Path) -> Path:
    """Pipelined vs in-memory (``experiments/pipeline.py``): per dataset, epoch time per system configuration
    (bars grouped by sampler, ratio to in-memory annotated), compute utilization (bars, its own 0-1 axis) and the
    pipeline efficiency of pipelined runs (its own panel and axis; 1.0 is ideal).

    Reads only ``csv_path``.
    """
    table = pd.read_csv(csv_path)
    datasets = list(dict.fromkeys(table["dataset"]))
    configurations = list(dict.fromkeys(table["configuration"]))
    samplers = list(dict.fromkeys(table["sampler"]))
    width = 0.8 / len(samplers)
    device = str(table["device"].dropna().iloc[0]) if "device" in table and table["device"].notna().any() else "cpu"
    with styled():
        fig, axes = plt.subplots(3, len(datasets), figsize=(max(9.0, 6.5 * len(datasets)), 9.5), squeeze=False,
                                 layout="constrained", height_ratios=(1.2, 1.0, 0.8))
        for column, dataset in enumerate(datasets):
            rows = table[table["dataset"] == dataset]
            time_ax, util_ax, eff_ax = axes[0][column], axes[1][column], axes[2][column]
            for offset, sampler in enumerate(samplers):
                color = COLORS.get(sampler, "0.4")
                line = rows[rows["sampler"] == sampler].set_index("configuration").reindex(configurations)
                positions = [i + (offset - (len(samplers) - 1) / 2) * width for i in range(len(configurations))]
                loaded = _under_load(line.reset_index()).to_numpy()
                bars = time_ax.bar(positions, line["epoch_time_s"], width, color=color, label=sampler,
                                   hatch=["xx" if flag else None for flag in loaded])
                for bar, ratio in zip(bars, line["time_ratio_vs_in_memory"]):
                    if pd.notna(ratio):
                        time_ax.annotate(f"{ratio:.2f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                                         textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7)
                util_ax.bar(positions, line["compute_utilization"], width, color=color, alpha=0.8, label=sampler)
                eff_ax.plot(positions, line["pipeline_efficiency"], marker="D", color=color, linestyle="none",
                            label=sampler)
            first = rows.iloc[0]
            time_ax.set_title(f"{dataset}: warm epoch of {int(first['examples']):,} examples, compute on {device}")
            time_ax.set_ylabel("epoch time (s)\n(annotated: / in-memory)")
            util_ax.set_ylabel("compute utilization\n(compute busy / epoch time)")
            util_ax.set_ylim(0, 1.05)
            eff_ax.axhline(1.0, color="k", linewidth=0.8, linestyle="--")
            eff_ax.set_ylabel("pipeline efficiency\n(epoch / busiest stage per worker)")
            values = table["pipeline_efficiency"].dropna()
            top = max(1.2, float(values.max()) * 1.05) if len(values) else 1.2
            eff_ax.set_ylim(0.9, top)
            for ax in (time_ax, util_ax, eff_ax):
                ax.set_xticks(range(len(configurations)))
                ax.set_xticklabels(configurations, rotation=25, ha="right")
                ax.grid(False, axis="x")
            eff_ax.legend(title="sampler", loc="upper right", ncol=len(samplers))
        fig.suptitle("Pipelined (loaders T threads / P processes, X transfer workers, queues q host/device, "
                     "staleness bound b) vs in-memory training\n3-layer GraphSAGE, fanouts 15,10,5, batch 1000; "
                     f"git {str(table['git_sha'].iloc[0])[:10]}")
        caption(fig, f"{MARIUSGNN}, Sec. 6 as the report cites it (pipelined training keeps the GPU busy)",
                f"{Path(csv_path).name}",
                "none: one warm epoch per configuration (the pipeline claim is decided elsewhere)",
                ("On a CPU-only machine the 'device' is the cores the loaders use, so utilization measures CPU "
                 "sharing, not the claim (see REPORT.md: not testable here; pipeline_projection.csv projects it "
                 "on a GPU profile). " if device.startswith("cpu") else "")
                + _load_note(table, lambda r: f"{r['dataset']}/{r['sampler']} {r['configuration']}"))
        return save_figure(fig, out_png)


def plot_pipeline_validation(csv_path: str | Path, out_png: str | Path) -> Path:
    """Simulator validation (``experiments/pipeline_validation.py``): predicted vs measured epoch time (left,
    with the +-10 % band; log axes with plain ticks only when the times span more than a factor of 10) and compute
    utilization (right, +-5 points, axes zoomed to the data), one marker per held-out run.

    Reads only ``csv_path``.
    """
    table = pd.read_csv(csv_path)
    markers = {"naive": "o", "dense": "s"}
    palette = ("tab:blue", "tab:orange", "tab:green", "tab:red")
    colors = dict(zip(dict.fromkeys(table["dataset"]), palette))
    with styled():
        fig, (time_ax, util_ax) = plt.subplots(1, 2, figsize=(11.0, 5.0), layout="constrained")
        for (dataset, sampler), rows in table.groupby(["dataset", "sampler"], sort=False):
            loaded = _under_load(rows)
            style = {"marker": markers.get(sampler, "^"), "color": colors[dataset], "linestyle": "none",
                     "label": f"{dataset}, {sampler}"}
            time_ax.plot(rows["measured_epoch_time_s"], rows["predicted_epoch_time_s"], **style)
            util_ax.plot(rows["measured_compute_utilization"], rows["predicted_compute_utilization"], **style)
            if loaded.any():
                time_ax.plot(rows[loaded]["measured_epoch_time_s"], rows[loaded]["predicted_epoch_time_s"], "o",
                             markerfacecolor="none", markeredgecolor="k", markersize=11)
        low = min(table["measured_epoch_time_s"].min(), table["predicted_epoch_time_s"].min()) * 0.85
        high = max(table["measured_epoch_time_s"].max(), table["predicted_epoch_time_s"].max()) * 1.15
        line = np.array([low, high])
        time_ax.plot(line, line, "k-", linewidth=0.8)
        time_ax.fill_between(line, line * 0.9, line * 1.1, color="0.5", alpha=0.2, label="+-10 %")
        if high / low > 10:  # a wide range: log axes, with plain numbers (never 2 x 10^0)
            time_ax.set_xscale("log")
            time_ax.set_yscale("log")
            _plain_log_ticks(time_ax)
        time_ax.set_xlim(low, high)
        time_ax.set_ylim(low, high)
        time_ax.set_aspect("equal", adjustable="box")
        time_ax.set_xlabel("measured epoch time (s)")
        time_ax.set_ylabel("predicted epoch time (s)")
        error = table["epoch_time_error"].abs().median()
        time_ax.set_title(f"epoch time: median |error| {100 * error:.1f} %")
        measured, predicted = table["measured_compute_utilization"], table["predicted_compute_utilization"]
        lo = max(0.0, math.floor(20 * min(measured.min(), predicted.min()) - 1) / 20)
        hi = min(1.0, math.ceil(20 * max(measured.max(), predicted.max()) + 0.5) / 20)
        grid = np.array([lo, hi])
        util_ax.plot(grid, grid, "k-", linewidth=0.8)
        util_ax.fill_between(grid, grid - 0.05, grid + 0.05, color="0.5", alpha=0.2, label="+-5 points")
        util_ax.set_xlim(lo, hi)
        util_ax.set_ylim(lo, hi)
        util_ax.set_xlabel("measured compute utilization")
        util_ax.set_ylabel("predicted compute utilization")
        points = table["utilization_error_points"].abs().median()
        util_ax.set_title(f"compute utilization: median |error| {points:.1f} points (axes zoomed to the data)")
        for ax in (time_ax, util_ax):
            ax.legend(loc="upper left")
        fig.suptitle(f"Pipeline simulator calibrated on each group's sync run, {len(table)} held-out runs")
        caption(fig, "none in the paper: the suite's validation of its pipeline simulator (SimPy) against the "
                     "measured pipeline of MariusGNN's design", Path(csv_path).name,
                "none per point (one measured warm epoch each; predictions are means over simulator seeds); the "
                "median errors' 95 % bootstrap intervals are in REPORT.md",
                _load_note(table, lambda r: f"{r['dataset']}/{r['sampler']} {r['configuration']}"))
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- disk
def _system_color(system: str, policy) -> str:
    if system == "disk":
        return COLORS.get(str(policy), COLORS["disk"])
    return COLORS.get(system, "0.4")


def plot_disk_nc(csv_path: str | Path, out_png: str | Path) -> Path:
    """Disk-based vs in-memory node classification (``experiments/disk.py``): warm epoch time per configuration
    (mean over seeds with its 95 % interval; IO wait hatched; ratio to in-memory annotated), test accuracy (95 %
    interval over seeds), and MiB read per epoch; colours by system and disk policy, explained in one legend.

    Reads only ``csv_path``.
    """
    table = pd.read_csv(csv_path)
    if "status" in table:  # peers that could not run here are rows without numbers
        table = table[table["status"].fillna("ok") == "ok"]
    order = {"in_memory": 0, "pipelined": 1, "disk": 2, "pyg": 3}
    table = table.sort_values(["system", "configuration"], key=lambda c: c.map(order) if c.name == "system"
                              else c).reset_index(drop=True)
    labels = list(table["configuration"])
    positions = np.arange(len(labels))
    colors = [_system_color(s, p) for s, p in zip(table["system"], table.get("policy", [None] * len(table)))]
    loaded = _under_load(table).to_numpy()
    with styled():
        fig, (time_ax, acc_ax, io_ax) = plt.subplots(1, 3, figsize=(15.0, 5.0), layout="constrained")
        bars = time_ax.bar(positions, table["epoch_time_s"], color=colors, yerr=_errors(table, "epoch_time_s"),
                           edgecolor=["k" if flag else "none" for flag in loaded])
        time_ax.bar(positions, table["io_wait_s"].fillna(0), color="none", edgecolor="k", hatch="//", linewidth=0.5)
        tops = table.get("epoch_time_s_ci_high", table["epoch_time_s"]).fillna(table["epoch_time_s"])
        for bar, ratio, top in zip(bars, table["time_ratio_vs_in_memory"], tops):
            time_ax.annotate(f"x{ratio:.2f}", (bar.get_x() + bar.get_width() / 2, max(top, bar.get_height())),
                             textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
        time_ax.set_ylabel("warm epoch time (s), mean")
        time_ax.set_title("epoch time (hatched: IO wait; annotated: / in-memory)")
        seeds = int(table["seeds"].min()) if "seeds" in table else 1
        acc_ax.bar(positions, table["test_accuracy"], color=colors, yerr=_errors(table, "test_accuracy"))
        acc_ax.set_ylabel("test accuracy")
        acc_ax.set_ylim(0, None)
        acc_ax.set_title(f"test accuracy ({seeds} seed{'s' if seeds > 1 else ''})")
        io_ax.bar(positions, table["io_read_bytes"].fillna(0) / 2**20, color=colors)
        io_ax.plot(positions, table["disk_read_bytes"].fillna(0) / 2**20, "kD", linestyle="none")
        io_ax.set_ylabel("MiB read per epoch")
        io_ax.set_title("bytes read: bars by the suite, diamonds from storage")
        for ax in (time_ax, acc_ax, io_ax):
            ax.set_xticks(positions)
            ax.set_xticklabels(labels, rotation=25, ha="right")
        systems = list(dict.fromkeys(zip(table["system"], table.get("policy", [None] * len(table)))))
        names = {"in_memory": "in-memory", "pipelined": "pipelined (in memory)",
                 "pyg": "PyG (NeighborLoader + GraphSAGE, in memory)"}
        handles = [Patch(color=_system_color(s, p), label=names.get(s, f"disk, {p} policy")) for s, p in systems]
        handles += [Patch(facecolor="white", edgecolor="k", hatch="//", label="IO wait (compute waiting for the "
                                                                                 "buffer)"),
                    Line2D([], [], color="k", marker="D", linestyle="none",
                           label="read from storage (/proc/self/io)")]
        fig.legend(handles=handles, loc="outside right upper")
        first = table.iloc[0]
        dd = first.get("dd_read_bandwidth_bytes_per_s")
        dd_text = f", dd {dd / 1e6:.0f} MB/s" if pd.notna(dd) else ""
        fig.suptitle(f"Disk-based node classification on {first['dataset']} (features "
                     f"{first.get('features_bytes', float('nan')) / 2**20:.0f} MiB{dd_text})")
        warm = table["warm_epochs"].dropna() if "warm_epochs" in table else pd.Series(dtype=float)
        caption(fig, f"{MARIUSGNN}, its disk-based node-classification experiment (ogbn-papers100M, partition buffer "
                     "with c = p/4)", Path(csv_path).name,
                f"95 % t interval over {seeds} seed(s) (each the mean of its {int(warm.min()) if len(warm) else '?'} "
                "warm epochs) for epoch time and accuracy", _load_note(table, lambda r: r["configuration"]))
        return save_figure(fig, out_png)


_TIMELINE_STYLE = {("read", "features"): ("tab:blue", "read features"),
                   ("read", "embeddings"): ("tab:blue", "read embeddings"),
                   ("read", "buckets"): ("tab:cyan", "read edge buckets"),
                   ("build", None): ("tab:orange", "assemble in-buffer CSR"),
                   ("wait", None): ("tab:red", "compute waits for the buffer"),
                   ("compute", None): ("tab:green", "compute (train or evaluate)")}


def plot_disk_nc_timeline(csv_path: str | Path, out_png: str | Path) -> Path:
    """Where one warm epoch's time goes in the disk system (``experiments/disk.py``; MariusGNN's Figure 1
    argument: IO hidden behind compute): a Gantt chart per configuration with two lanes, the compute thread
    (waits for the buffer, training, the evaluation before the epoch) and the prefetch thread (partition and
    bucket reads, the in-buffer CSR assembly); reads done on the compute thread (no prefetch) sit in its lane.

    Reads only ``csv_path`` (:func:`suite.results.load_timeline` rows with a ``configuration`` column, times
    already relative to the window shown).
    """
    table = pd.read_csv(csv_path)
    configurations = list(dict.fromkeys(table["configuration"]))
    with styled():
        fig, axes = plt.subplots(len(configurations), 1, figsize=(11.0, 1.6 + 1.05 * len(configurations)),
                                 sharex=True, layout="constrained", squeeze=False)
        _draw_timeline(table, configurations, axes)
        caption(fig, f"{MARIUSGNN}, its argument that whole-partition IO hides behind compute (pipelined "
                     "partition buffer)", Path(csv_path).name, "none: one warm epoch of seed 0 per configuration")
        return save_figure(fig, out_png)


def _draw_timeline(table: pd.DataFrame, configurations: list[str], axes) -> None:
    fig = axes[0, 0].figure
    lanes = {"compute": 1, "prefetch": 0}
    shown = set()
    for ax, configuration in zip(axes[:, 0], configurations):
        rows = table[table["configuration"] == configuration]
        for _, row in rows.iterrows():
            what = row["what"] if row["activity"] == "read" else None
            color, label = _TIMELINE_STYLE[(row["activity"], what)]
            width = max(row["end"] - row["start"], 1e-4)
            ax.broken_barh([(row["start"], width)], (lanes[row["lane"]] - 0.35, 0.7), facecolors=color,
                           edgecolor="none", label=None if label in shown else label)
            shown.add(label)
        ax.set_yticks([0, 1])
        ax.set_yticklabels(["prefetch\nthread", "compute\nthread"], fontsize=8)
        ax.set_ylim(-0.6, 1.6)
        ax.set_title(configuration, fontsize=9, loc="left")
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("seconds from the start of the warm epoch's window")
    fig.suptitle("Disk-based node classification: one warm epoch per configuration", fontsize=10)
    fig.legend(loc="outside right upper", fontsize=8)


def plot_disk_lp(csv_path: str | Path, out_png: str | Path) -> Path:
    """Disk-based link prediction per policy (``experiments/disk_lp.py``), one row of panels per model: test MRR
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
            colors = [COLORS["in_memory"] if c == "in_memory" else COLORS.get(str(p), COLORS["disk"])
                      for c, p in zip(part["configuration"], part.get("policy", part["configuration"]))]
            errors = _errors(part, "test_mrr_mean")
            if errors is None:  # an older table: one standard deviation
                errors = part["test_mrr_std"].fillna(0).to_numpy()
            mrr_ax.bar(positions, part["test_mrr_mean"], yerr=errors, color=colors)
            base = part.loc[part["configuration"] == "in_memory", "test_mrr_mean"]
            if len(base):
                mrr_ax.axhline(float(base.iloc[0]), color="k", linestyle="--", linewidth=0.8, label="in-memory mean")
                mrr_ax.legend(loc="lower right")
            mrr_ax.set_ylim(0, None)
            mrr_ax.set_ylabel(f"test MRR (filtered), {int(part['seeds'].max())} seeds")
            mrr_ax.set_title(f"{model}: test MRR")
            bars = time_ax.bar(positions, part["epoch_time_s"], color=colors, yerr=_errors(part, "epoch_time_s"))
            time_ax.bar(positions, (part["io_wait_fraction"] * part["epoch_time_s"]).fillna(0), color="none",
                        edgecolor="k", hatch="//", linewidth=0.5, label="IO wait")
            tops = part.get("epoch_time_s_ci_high", part["epoch_time_s"]).fillna(part["epoch_time_s"])
            for bar, ratio, top in zip(bars, part["time_ratio_vs_in_memory"], tops):
                time_ax.annotate(f"x{ratio:.2f}", (bar.get_x() + bar.get_width() / 2, max(top, bar.get_height())),
                                 textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
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
                ax.set_xticklabels([_configuration_label(c) for c in part["configuration"]], rotation=20, ha="right")
        fig.suptitle("Disk-based link prediction on FB15k-237: partition-buffer policies against in-memory")
        seeds = int(table["seeds"].min())
        caption(fig, f"{MARIUSGNN}, its COMET vs BETA accuracy experiment (COMET keeps in-memory MRR where BETA "
                     "loses; link prediction from disk with the partition buffer)", Path(csv_path).name,
                f"95 % t interval over {seeds} seed(s) (MRR) and over the warm epochs of every seed (epoch time)")
        return save_figure(fig, out_png)


def plot_buffer_io(csv_path: str | Path, out_png: str | Path) -> Path:
    """Partition-buffer IO at Hyperlink-2012 scale (``experiments/buffer_io.py``, simulated): TB read per epoch
    (top) and the modelled epoch time with prefetch (bottom) per (p, c), one bar per policy, COMET once per
    number of logical partitions (written under its bar)."""
    table = pd.read_csv(csv_path)
    rank = {"beta": 0, "comet": 1, "random": 2}
    configs = list(dict.fromkeys(zip(table["num_partitions"], table["capacity"])))
    per_config = max(len(table[(table["num_partitions"] == p) & (table["capacity"] == c)]) for p, c in configs)
    width = 0.8 / per_config
    with styled():
        fig, axes = plt.subplots(2, 1, figsize=(max(7.5, 2.6 * len(configs)), 7.5), layout="constrained",
                                 sharex=True)
        labelled: set[str] = set()
        for x, (p, c) in enumerate(configs):
            rows = table[(table["num_partitions"] == p) & (table["capacity"] == c)].copy()
            rows["rank"] = rows["policy"].map(rank).fillna(3)
            rows = rows.sort_values(["rank", "logical_partitions"])
            for i, row in enumerate(rows.itertuples()):
                position = x + (i - (len(rows) - 1) / 2) * width
                label = None if row.policy in labelled else {"beta": "BETA", "comet": "COMET",
                                                              "random": "random"}.get(row.policy, row.policy)
                labelled.add(row.policy)
                color = COLORS.get(row.policy, "0.4")
                axes[0].bar(position, row.bytes_read / 1e12, width, color=color, label=label)
                axes[1].bar(position, row.epoch_time_prefetch_s / 3600, width, color=color)
                if row.policy == "comet":
                    axes[0].annotate(f"{row.logical_partitions}\nlogical", (position, row.bytes_read / 1e12),
                                     ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
        axes[0].set_ylabel("TB read per epoch")
        axes[1].set_ylabel("epoch time with prefetch (h, model)")
        axes[1].set_xticks(range(len(configs)), [f"p = {p}, c = {c}" for p, c in configs])
        axes[1].set_xlabel("physical partitions p, buffer capacity c (partitions)")
        axes[0].legend(loc="upper left", title="policy (COMET: number of logical partitions above its bar)")
        top = axes[0].get_ylim()[1]
        axes[0].set_ylim(0, top * 1.15)
        fig.suptitle("Partition-buffer IO per epoch on Hyperlink-2012 (3.5B nodes, 128B edges), simulated")
        caption(fig, f"{MARIUSGNN}, its partition-buffer IO analysis (BETA vs COMET IO per epoch at "
                     "Hyperlink-2012 scale)",
                f"{Path(csv_path).name} (swaps and bytes exact for each plan; times from the disk model: "
                "3 GB/s read, 2 GB/s write, 5M edges/s)", "none: deterministic simulation of one plan per policy")
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- cost
_COST_COLUMNS = ("dataset", "configuration", "mode", "profile", "priced_as", "gpus", "hourly_usd",
                 "cost_per_epoch_usd", "cost_to_target_usd", "target", "valid_metric")


def plot_cost(csv_path: str | Path, out_png: str | Path) -> Path:
    """Dollar cost per machine profile (``experiments/cost.py``): per dataset, USD per epoch beside USD to the
    target validation metric, per configuration (log y), one bar per profile: measured here (priced as a comparable
    instance, grey) and projected by the simulator on cloud GPU machines (coloured; multi-GPU: data-parallel).
    A configuration that never reached the target is marked "not reached".

    Reads only ``csv_path``; ``DataError`` (one line) when a column is missing.
    """
    from suite.errors import DataError

    table = pd.read_csv(csv_path)
    missing = [c for c in _COST_COLUMNS if c not in table.columns]
    if missing or table.empty:
        raise DataError(f"{csv_path}: not a cost table ({'no rows' if table.empty else 'no column ' + missing[0]})")
    table["series"] = [
        f"measured here, priced as {r.priced_as} ({r.hourly_usd:g} USD/h)" if r.mode == "measured" else
        f"PROJECTED {r.profile}" + (f" ({int(r.gpus)} GPUs, data-parallel)" if r.gpus > 1 else " (1 GPU)")
        + f", {r.hourly_usd:g} USD/h" for r in table.itertuples()]
    if "under_load" not in table:
        table["under_load"] = False
    table["under_load"] = table["under_load"].map(measured_under_load).astype(bool)
    keys = ["dataset", "configuration", "series", "mode", "gpus", "hourly_usd", "target", "valid_metric"]
    seeds = int(table.groupby(keys, dropna=False).size().max())
    table = table.groupby(keys, dropna=False, sort=False, as_index=False).agg(  # a bar per configuration: seed mean
        cost_per_epoch_usd=("cost_per_epoch_usd", "mean"), cost_to_target_usd=("cost_to_target_usd", "mean"),
        under_load=("under_load", "any"))
    series = list(dict.fromkeys(table.sort_values(["mode", "gpus", "hourly_usd"])["series"]))
    simulated = [name for name in series if name.startswith("PROJECTED")]
    cmap = plt.get_cmap("viridis")
    color = {name: cmap(0.1 + 0.8 * simulated.index(name) / max(1, len(simulated) - 1)) if name in simulated
             else COLORS["in_memory"] for name in series}
    datasets = list(dict.fromkeys(table["dataset"]))
    with styled():
        fig, axes = plt.subplots(len(datasets), 2, figsize=(14.0, 4.8 * len(datasets)), squeeze=False,
                                 layout="constrained")
        for row, dataset in enumerate(datasets):
            rows = table[table["dataset"] == dataset]
            configurations = list(dict.fromkeys(rows["configuration"]))
            first = rows.iloc[0]
            for ax, column, label in ((axes[row][0], "cost_per_epoch_usd", "cost per epoch"),
                                      (axes[row][1], "cost_to_target_usd", "cost to target")):
                labelled: set[str] = set()
                for i, configuration in enumerate(configurations):
                    bars = rows[rows["configuration"] == configuration]
                    names = [name for name in series if name in set(bars["series"])]
                    width = 0.8 / len(names)
                    for offset, name in enumerate(names):
                        bar = bars[bars["series"] == name].iloc[0]
                        x = i + (offset - (len(names) - 1) / 2) * width
                        ax.bar([x], [bar[column]], width, color=color[name],
                               label=None if name in labelled else name,
                               hatch="xx" if measured_under_load(bar.get("under_load")) else None)
                        labelled.add(name)
                        if column == "cost_to_target_usd" and pd.isna(bar[column]) and pd.notna(bar["target"]):
                            ax.annotate("not reached", (x, 0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                                        textcoords="offset points", rotation=90, ha="center", va="bottom",
                                        fontsize=6)
                ax.set_yscale("log")
                values = rows[column][rows[column] > 0]
                if len(values):  # bars from well below the smallest, room above the largest for the notes
                    ax.set_ylim(values.min() / 3, values.max() * 3)
                ax.set_xticks(range(len(configurations)))
                ax.set_xticklabels(configurations, rotation=20, ha="right")
                ax.grid(True, axis="y", which="both", alpha=0.25)
                ax.set_ylabel(f"{label} (USD)")
                target = (f"target valid {first['valid_metric']} {first['target']:.3f}" if pd.notna(first["target"])
                          else "no target")
                ax.set_title(f"{dataset}: {label}" + (f" ({target})" if column == "cost_to_target_usd" else ""))
            if not (rows["mode"] == "simulated").any():
                axes[row][0].text(0.5, 0.97, "no simulated projection: no measured pipelined sync run of this "
                                  "workload to calibrate the simulator on", transform=axes[row][0].transAxes,
                                  ha="center", va="top", fontsize=7, style="italic")
            axes[row][1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.suptitle("Training cost per machine profile: measured on this machine, PROJECTED by the pipeline "
                     "simulator (calibrated on the measured sync run) on cloud GPU machines")
        caption(fig, f"{MARIUSGNN}, its cost comparison (disk-based single-machine training vs in-memory multi-GPU "
                     "training)", Path(csv_path).name,
                f"none drawn (bars: means over up to {seeds} seed(s); the cost ratio's 95 % interval over epoch "
                "times is in REPORT.md)",
                _load_note(table, lambda r: f"{r['dataset']} {r['configuration']}"))
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- work-depth
_MODEL_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">")


def plot_work_depth_check(csv_path: str | Path, out_png: str | Path, fit_csv: str | Path | None = None) -> Path:
    """Counted (markers) vs fitted formula (lines) of work W (top) and depth D (bottom) of every model's forward
    pass, one column per swept variable, log-log (``experiments/work_depth.py``). Models whose counts coincide
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
                    _plain_log_ticks(ax, "y")
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


# ---------------------------------------------------------------------------------------------- async pipelines
def plot_async_tradeoff(csv_path: str | Path, out_png: str | Path, throughput_csv: str | Path | None = None
                        ) -> Path:
    """The staleness trade-off of asynchronous GNN pipelines (``experiments/async_gnn.py``), per dataset: test
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
    """Gantt charts of the four asynchronous pipeline modes (``experiments/async_gnn.py``, simulated), one panel
    per mode: rows are workers, colour the stage, hatching the backward pass, labels the partition; the red line
    is the makespan. Reads only ``csv_path`` (``async_gnn_tasks.csv``)."""
    with styled():
        fig = _gantt_figure(pd.read_csv(csv_path))
        fig.suptitle("2-layer GCN on Cora, 4 partitions, 3 iterations (forward + backward), simulated")
        caption(fig, f"{BESTA} (synchronous vs asynchronous micro- and macro-pipelines)", Path(csv_path).name,
                "none: one deterministic simulation per mode (seeded jitter)")
        return save_figure(fig, out_png)


_PEER_COLORS = {"suite": "tab:blue", "pbg": "tab:orange", "pykeen": "tab:purple"}


def plot_link_prediction_peers(csv_path: str | Path, out_png: str | Path) -> Path:
    """Link prediction against its peers (``experiments/link_prediction_peers.py``): per thread count, training
    triples/s of every configuration (median over seeds, whiskers the seeds' range, the speed ratio to PBG p=1 at
    the same thread count annotated) beside its filtered test MRR (mean over seeds, 95 % interval).

    Reads only ``csv_path``; skipped configurations are listed under the panels with their reasons.
    """
    table = pd.read_csv(csv_path)
    ok = table[table["status"] == "ok"]
    labels = list(dict.fromkeys(table["label"]))
    threads = sorted(set(table["threads"]))
    width = 0.8 / max(len(threads), 1)
    with styled():
        fig, (speed_ax, mrr_ax) = plt.subplots(1, 2, figsize=(13.0, 4.8), layout="constrained")
        _draw_link_prediction_peers(table, ok, labels, threads, width, speed_ax, mrr_ax)
        seeds = f"{int(ok['seeds'].min())}-{int(ok['seeds'].max())} seed(s)" if len(ok) else ""
        fig.suptitle("Link prediction on FB15k-237 (DistMult d=100, 1000 negatives per positive and side, batch "
                     f"1000): the suite vs PyTorch-BigGraph and PyKEEN; {seeds}, MRR after the epochs shown")
        skipped = table[table["status"] != "ok"]
        extra = ("skipped: " + "; ".join(f"{r['label']} ({int(r['threads'])}T): {r['reason']}"
                                         for _, r in skipped.iterrows())) if len(skipped) else ""
        caption(fig, "none in MariusGNN: the suite's link prediction against PyTorch-BigGraph and PyKEEN on the "
                     "same triples, ranked by the suite's filtered evaluation", Path(csv_path).name,
                "whiskers: the seeds' range (speed); 95 % t interval over seeds (MRR)", extra)
        return save_figure(fig, out_png)


def _draw_link_prediction_peers(table, ok, labels, threads, width, speed_ax, mrr_ax) -> None:
    for offset, count in enumerate(threads):
        rows = ok[ok["threads"] == count].set_index("label").reindex(labels)
        positions = [i + (offset - (len(threads) - 1) / 2) * width for i in range(len(labels))]
        colors = [_PEER_COLORS.get(system, "tab:gray") for system in rows["system"].fillna("")]
        low = rows["triples_per_s"] - (rows["triples_per_s"] * rows["epoch_time_s"] / rows["epoch_time_s_max"])
        high = (rows["triples_per_s"] * rows["epoch_time_s"] / rows["epoch_time_s_min"]) - rows["triples_per_s"]
        bars = speed_ax.bar(positions, rows["triples_per_s"], width, color=colors, alpha=0.55 + 0.45 * offset /
                            max(len(threads) - 1, 1), yerr=[low.fillna(0), high.fillna(0)], capsize=3,
                            edgecolor="k", linewidth=0.5)
        ratio = rows.get("speed_vs_pbg-p1")
        for bar, value, n in zip(bars, ratio if ratio is not None else [None] * len(bars), [count] * len(bars)):
            if value is not None and pd.notna(value):
                speed_ax.annotate(f"{n}T x{value:.2f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                                  textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
        mrr_ax.bar(positions, rows["test_mrr"], width, color=colors, yerr=rows["test_mrr_ci95"].fillna(0),
                   capsize=3, alpha=0.55 + 0.45 * offset / max(len(threads) - 1, 1), edgecolor="k", linewidth=0.5,
                   label=f"{count} thread{'s' if count > 1 else ''}")
    speed_ax.set_ylabel("training triples/s (median over seeds; whiskers: range)\nannotated: / PBG p=1, same threads")
    mrr_ax.set_ylabel("filtered test MRR (suite's ranking; mean, 95 % CI)")
    epochs = ok.groupby("label")["epochs"].first() if len(ok) else pd.Series(dtype=float)
    ticks = [f"{label}\n{int(epochs[label])} epochs" if label in epochs else label for label in labels]
    for ax in (speed_ax, mrr_ax):
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(ticks, rotation=15, ha="right", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    mrr_ax.legend(fontsize=8, title="bars: threads (light to dark)", title_fontsize=7)


FIGURES: dict[str, Callable[..., Path]] = {
    "sampling": plot_sampling,
    "pipeline_speed": plot_pipeline_speed,
    "pipeline_validation": plot_pipeline_validation,
    "disk_nc": plot_disk_nc,
    "disk_nc_timeline": plot_disk_nc_timeline,
    "disk_lp": plot_disk_lp,
    "cost": plot_cost,
    "buffer_io": plot_buffer_io,
    "work_depth_check": plot_work_depth_check,
    "async_tradeoff": plot_async_tradeoff,
    "async_gnn_gantt": plot_async_gnn_gantt,
    "link_prediction_peers": plot_link_prediction_peers,
}
"""Figure name (its PNG's stem) -> plot function ``(csv_path, out_png) -> Path``."""

INPUTS: dict[str, str] = {name: f"{name}.csv" for name in FIGURES} | {
    "async_tradeoff": "async_staleness_accuracy.csv", "async_gnn_gantt": "async_gnn_tasks.csv"}
"""Figure name -> the table it reads by default (others, if any, are found beside it)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: draw one figure from its table(s)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figure", choices=sorted(FIGURES))
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the tables (default %(default)s)")
    parser.add_argument("--csv", type=Path, help="recorded table (default: RESULTS/<its table>)")
    parser.add_argument("--out", type=Path, help="PNG to write (default: RESULTS/<figure>.png)")
    args = parser.parse_args(argv)
    out = FIGURES[args.figure](args.csv or args.results / INPUTS[args.figure],
                               args.out or args.results / f"{args.figure}.png")
    print(json.dumps({"wrote": str(out)}))
    return 0


# ---------------------------------------------------------------------------------------------- simulators
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


__all__ = ["COLORS", "FIGURES", "INPUTS", "STYLE", "caption", "plot_async_gnn_gantt", "plot_async_tradeoff",
           "plot_buffer_io", "plot_cost", "plot_disk_lp", "plot_disk_nc", "plot_disk_nc_timeline",
           "plot_link_prediction_peers", "plot_pipeline_speed", "plot_pipeline_validation", "plot_sampling",
           "plot_simulated_gantt", "plot_work_depth_check", "save_figure", "styled"]


if __name__ == "__main__":
    raise SystemExit(main())
