"""The figures of the experiments, each drawn from its recorded CSV alone (no recomputation).

One function per figure, ``plot_<name>(csv_path, out_png) -> Path``, registered in :data:`FIGURES`; a new figure
is one more function and one more entry. Figures are written atomically (rendered in memory, then renamed).

Usage::

    python experiments/figures.py sampling [--csv results/sampling.csv] [--out results/sampling.png]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script: make `suite` importable
    sys.path.insert(0, str(REPO_ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from suite.io import atomic_write_bytes  # noqa: E402

RESULTS = REPO_ROOT / "results"
_SAMPLER_STYLE = {"naive": ("tab:red", "o", "naive (layer-wise, DGL-style)"),
                  "dense": ("tab:blue", "s", "DENSE"),
                  "naive-torch": ("tab:orange", "v", "naive, torch backend"),
                  "dense-torch": ("tab:purple", "D", "DENSE, torch backend"),
                  "pyg": ("tab:green", "^", "PyG NeighborSampler")}


def save_figure(fig, out_png: str | Path, dpi: int = 150) -> Path:
    """Render ``fig`` as PNG and write it to ``out_png`` atomically (parent folders created); close it."""
    out_png = Path(out_png)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out_png, buffer.getvalue())
    return out_png


def _setting_title(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    fanouts = rows.sort_values("layers")["fanouts"].iloc[-1]
    return (f"{first['setting']}: {first['dataset']} ({int(first['num_nodes']):,} nodes)\n"
            f"{int(first['num_roots']):,} roots, {first['direction']}-edges, fanouts {fanouts}")


def plot_sampling(csv_path: str | Path, out_png: str | Path) -> Path:
    """Sampling comparison (``experiments/sampling.py``): per setting, time per batch vs layers (log y, one line
    per sampler, naive/DENSE speedup annotated) above sampled edges per batch vs layers (log y).

    Reads only ``csv_path``; skipped rows are listed under the panels with their reasons.
    """
    table = pd.read_csv(csv_path)
    settings = list(dict.fromkeys(table["setting"]))
    fig, axes = plt.subplots(2, len(settings), figsize=(6.0 * len(settings), 8.0), squeeze=False, sharex="col",
                             layout="constrained")
    for column, setting in enumerate(settings):
        rows = table[table["setting"] == setting]
        ok = rows[rows["status"] == "ok"]
        time_ax, edges_ax = axes[0][column], axes[1][column]
        for sampler in dict.fromkeys(rows["sampler"]):
            color, marker, label = _SAMPLER_STYLE.get(sampler, (None, "x", sampler))
            line = ok[ok["sampler"] == sampler].sort_values("layers")
            if line.empty:
                continue
            time_ax.plot(line["layers"], line["time_s"], marker=marker, color=color, label=label)
            time_ax.fill_between(line["layers"], line["time_s_min"], line["time_s_max"], color=color, alpha=0.15,
                                 linewidth=0)
            edges_ax.plot(line["layers"], line["sampled_edges"], marker=marker, color=color, label=label)
        naive = ok[ok["sampler"] == "naive"].dropna(subset=["time_ratio_vs_dense"])
        for _, row in naive.iterrows():
            time_ax.annotate(f"{row['time_ratio_vs_dense']:.1f}x", (row["layers"], row["time_s"]),
                             textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8, color="tab:red")
            edges_ax.annotate(f"{row['edges_ratio_vs_dense']:.1f}x", (row["layers"], row["sampled_edges"]),
                              textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8, color="tab:red")
        for ax in (time_ax, edges_ax):
            ax.set_yscale("log")
            low, high = ax.get_ylim()
            ax.set_ylim(low, high * 2.5)  # room for the annotations
        time_ax.set_title(_setting_title(rows), fontsize=9)
        time_ax.set_ylabel("time per batch (s)\nmedian, band: min-max")
        edges_ax.set_ylabel("sampled edges per batch")
        edges_ax.set_xlabel("layers (hops)")
        edges_ax.set_xticks(sorted(rows["layers"].unique()))
        time_ax.grid(True, which="both", alpha=0.3)
        edges_ax.grid(True, which="both", alpha=0.3)
        time_ax.legend(fontsize=8, loc="upper left")
        skipped = rows[rows["status"] == "skipped"]
        notes = [f"{s} skipped: {', '.join(f'L{int(l)}' for l in grp['layers'])} ({grp['reason'].iloc[0]})"
                 for s, grp in skipped.groupby("sampler", sort=False)]
        if notes:
            edges_ax.text(0.0, -0.16, "\n".join(notes), transform=edges_ax.transAxes, fontsize=7, va="top",
                          wrap=True)
    first = table.iloc[0]
    fig.suptitle(f"Multi-hop sampling per mini-batch (annotations: naive / DENSE)\n"
                 f"{int(first['threads'])} torch threads, torch {first['torch']}, {str(first['date'])[:10]}, "
                 f"git {str(first['git_sha'])[:10]}, samplers {first.get('sampling_code_sha', '?')}", fontsize=10)
    return save_figure(fig, out_png)


def plot_pipeline_speed(csv_path: str | Path, out_png: str | Path) -> Path:
    """Pipelined vs in-memory (``experiments/pipeline.py``): per dataset, epoch time per system configuration
    (bars grouped by sampler, ratio to in-memory annotated) above compute utilization (bars) with the pipeline
    efficiency of pipelined runs (markers, right axis; 1.0 is ideal).

    Reads only ``csv_path``.
    """
    table = pd.read_csv(csv_path)
    datasets = list(dict.fromkeys(table["dataset"]))
    configurations = list(dict.fromkeys(table["configuration"]))
    samplers = list(dict.fromkeys(table["sampler"]))
    width = 0.8 / len(samplers)
    fig, axes = plt.subplots(2, len(datasets), figsize=(6.5 * len(datasets), 7.5), squeeze=False,
                             layout="constrained")
    for column, dataset in enumerate(datasets):
        rows = table[table["dataset"] == dataset]
        time_ax, util_ax = axes[0][column], axes[1][column]
        efficiency_ax = util_ax.twinx()
        for offset, sampler in enumerate(samplers):
            color = _SAMPLER_STYLE.get(sampler, ("gray",))[0]
            line = rows[rows["sampler"] == sampler].set_index("configuration").reindex(configurations)
            positions = [i + (offset - (len(samplers) - 1) / 2) * width for i in range(len(configurations))]
            bars = time_ax.bar(positions, line["epoch_time_s"], width, color=color, label=sampler)
            for bar, ratio in zip(bars, line["time_ratio_vs_in_memory"]):
                if pd.notna(ratio):
                    time_ax.annotate(f"{ratio:.2f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                                     textcoords="offset points", xytext=(0, 2), ha="center", fontsize=7)
            util_ax.bar(positions, line["compute_utilization"], width, color=color, alpha=0.7, label=sampler)
            efficiency_ax.plot(positions, line["pipeline_efficiency"], "k", marker="D", linestyle="none",
                               markersize=4, label="pipeline efficiency" if offset == 0 else None)
        first = rows.iloc[0]
        time_ax.set_title(f"{dataset}: epoch of {int(first['examples']):,} examples (warm epoch)", fontsize=9)
        time_ax.set_ylabel("epoch time (s)\n(annotated: / in-memory)")
        util_ax.set_ylabel("compute utilization\n(compute busy / epoch time)")
        util_ax.set_ylim(0, 1.05)
        efficiency_ax.set_ylabel("pipeline efficiency\n(epoch / busiest stage per worker)")
        efficiency_ax.set_ylim(0.9, max(1.5, float(table["pipeline_efficiency"].max(skipna=True) or 1.0) * 1.05))
        for ax in (time_ax, util_ax):
            ax.set_xticks(range(len(configurations)))
            ax.set_xticklabels(configurations, rotation=25, ha="right", fontsize=8)
            ax.grid(True, axis="y", alpha=0.3)
        time_ax.legend(fontsize=8, title="sampler", title_fontsize=8)
        efficiency_ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("Pipelined (loaders T threads / P processes, X transfer workers, queues q host/device, "
                 "staleness bound b) vs in-memory training\n3-layer GraphSAGE, fanouts 15,10,5, batch 1000; "
                 f"git {str(table['git_sha'].iloc[0])[:10]}", fontsize=10)
    return save_figure(fig, out_png)


def plot_pipeline_validation(csv_path: str | Path, out_png: str | Path) -> Path:
    """Simulator validation (``experiments/pipeline_validation.py``): predicted vs measured epoch time (left,
    with the +-10 % band) and compute utilization (right, +-5 points), one marker per predicted run.

    Reads only ``csv_path``.
    """
    table = pd.read_csv(csv_path)
    fig, (time_ax, util_ax) = plt.subplots(1, 2, figsize=(11.0, 5.0), layout="constrained")
    markers = {"naive": "o", "dense": "s"}
    colors = dict(zip(dict.fromkeys(table["dataset"]), ("tab:blue", "tab:orange", "tab:green", "tab:red")))
    for (dataset, sampler), rows in table.groupby(["dataset", "sampler"], sort=False):
        style = {"marker": markers.get(sampler, "^"), "color": colors[dataset], "linestyle": "none",
                 "label": f"{dataset}, {sampler}"}
        time_ax.plot(rows["measured_epoch_time_s"], rows["predicted_epoch_time_s"], **style)
        util_ax.plot(rows["measured_compute_utilization"], rows["predicted_compute_utilization"], **style)
    low = min(table["measured_epoch_time_s"].min(), table["predicted_epoch_time_s"].min()) * 0.8
    high = max(table["measured_epoch_time_s"].max(), table["predicted_epoch_time_s"].max()) * 1.2
    line = [low, high]
    time_ax.plot(line, line, "k-", linewidth=0.8)
    time_ax.fill_between(line, [v * 0.9 for v in line], [v * 1.1 for v in line], color="gray", alpha=0.2,
                         label="+-10 %")
    time_ax.set_xscale("log")
    time_ax.set_yscale("log")
    time_ax.set_xlabel("measured epoch time (s)")
    time_ax.set_ylabel("predicted epoch time (s)")
    error = table["epoch_time_error"].abs().median()
    time_ax.set_title(f"epoch time: median |error| {100 * error:.1f} %", fontsize=10)
    util_ax.plot([0, 1], [0, 1], "k-", linewidth=0.8)
    util_ax.fill_between([0, 1], [-0.05, 0.95], [0.05, 1.05], color="gray", alpha=0.2, label="+-5 points")
    util_ax.set_xlim(0, 1.02)
    util_ax.set_ylim(0, 1.02)
    util_ax.set_xlabel("measured compute utilization")
    util_ax.set_ylabel("predicted compute utilization")
    points = table["utilization_error_points"].abs().median()
    util_ax.set_title(f"compute utilization: median |error| {points:.1f} points", fontsize=10)
    for ax in (time_ax, util_ax):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Pipeline simulator calibrated on each group's sync run, {len(table)} held-out runs", fontsize=11)
    return save_figure(fig, out_png)


def plot_disk_nc(csv_path: str | Path, out_png: str | Path) -> Path:
    """Disk-based vs in-memory node classification (``experiments/disk.py``): epoch time per configuration with
    its IO wait (hatched) and the ratio to in-memory annotated, beside test accuracy and bytes read per epoch.

    Reads only ``csv_path``.
    """
    table = pd.read_csv(csv_path)
    fig, (time_ax, acc_ax, io_ax) = plt.subplots(1, 3, figsize=(15.0, 4.8), layout="constrained")
    labels = list(table["configuration"])
    positions = range(len(labels))
    colors = [{"in_memory": "tab:gray", "pyg": _SAMPLER_STYLE["pyg"][0]}.get(system, "tab:blue")
              for system in table["system"]]
    bars = time_ax.bar(positions, table["epoch_time_s"], color=colors)
    time_ax.bar(positions, table["io_wait_s"].fillna(0), color="none", edgecolor="k", hatch="//",
                label="IO wait")
    for bar, ratio in zip(bars, table["time_ratio_vs_in_memory"]):
        time_ax.annotate(f"x{ratio:.2f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                         textcoords="offset points", xytext=(0, 2), ha="center", fontsize=8)
    time_ax.set_ylabel("epoch time (s), warm epoch")
    time_ax.legend(fontsize=8)
    acc_ax.bar(positions, table["test_accuracy"], color=colors)
    acc_ax.set_ylabel("test accuracy")
    io_ax.bar(positions, table["io_read_bytes"].fillna(0) / 2**20, color=colors, label="read by the suite")
    io_ax.plot(positions, table["disk_read_bytes"].fillna(0) / 2**20, "kD", linestyle="none",
               label="from storage (/proc/self/io)")
    io_ax.set_ylabel("MiB read per epoch")
    io_ax.legend(fontsize=8)
    for ax in (time_ax, acc_ax, io_ax):
        ax.set_xticks(list(positions))
        ax.set_xticklabels(labels, rotation=25, ha="right", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    first = table.iloc[0]
    dd = first.get("dd_read_bandwidth_bytes_per_s")
    dd_text = f", dd {dd / 1e6:.0f} MB/s" if pd.notna(dd) else ""
    fig.suptitle(f"Disk-based node classification on {first['dataset']} (features "
                 f"{first.get('features_bytes', float('nan')) / 2**20:.0f} MiB{dd_text})", fontsize=10)
    return save_figure(fig, out_png)


def plot_disk_lp(csv_path: str | Path, out_png: str | Path) -> Path:
    """Disk-based link prediction per policy (``experiments/disk_lp.py``), one row of panels per model: test MRR
    (mean over seeds, error bar one standard deviation, the in-memory mean as a dashed line), warm epoch time with
    the ratio to in-memory annotated and IO wait hatched, and MiB read and written per epoch.

    Reads only ``csv_path``.
    """
    table = pd.read_csv(csv_path)
    models = list(dict.fromkeys(table["model"]))
    fig, axes = plt.subplots(len(models), 3, figsize=(15.0, 4.2 * len(models)), layout="constrained", squeeze=False)
    for row, model in zip(axes, models):
        part = table[table["model"] == model].reset_index(drop=True)
        mrr_ax, time_ax, io_ax = row
        positions = list(range(len(part)))
        colors = ["tab:gray" if config == "in_memory" else "tab:blue" for config in part["configuration"]]
        mrr_ax.bar(positions, part["test_mrr_mean"], yerr=part["test_mrr_std"].fillna(0), color=colors, capsize=3)
        base = part.loc[part["configuration"] == "in_memory", "test_mrr_mean"]
        if len(base):
            mrr_ax.axhline(float(base.iloc[0]), color="k", linestyle="--", linewidth=0.8, label="in-memory")
            mrr_ax.legend(fontsize=8)
        low = float((part["test_mrr_mean"] - part["test_mrr_std"].fillna(0)).min())
        mrr_ax.set_ylim(max(0.0, low - 0.02), None)
        mrr_ax.set_ylabel(f"test MRR (filtered), {int(part['seeds'].max())} seeds")
        mrr_ax.set_title(model, fontsize=10)
        bars = time_ax.bar(positions, part["epoch_time_s"], color=colors)
        time_ax.bar(positions, (part["io_wait_fraction"] * part["epoch_time_s"]).fillna(0), color="none",
                    edgecolor="k", hatch="//", label="IO wait")
        for bar, ratio in zip(bars, part["time_ratio_vs_in_memory"]):
            time_ax.annotate(f"x{ratio:.2f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                             textcoords="offset points", xytext=(0, 2), ha="center", fontsize=8)
        time_ax.set_ylabel("epoch time (s), warm epochs")
        time_ax.legend(fontsize=8)
        width = 0.4
        io_ax.bar([x - width / 2 for x in positions], part["io_read_bytes"].fillna(0) / 2**20, width, label="read")
        io_ax.bar([x + width / 2 for x in positions], part["io_write_bytes"].fillna(0) / 2**20, width,
                  label="written back")
        io_ax.set_ylabel("MiB per epoch")
        io_ax.legend(fontsize=8)
        for ax in row:
            ax.set_xticks(positions)
            ax.set_xticklabels(part["configuration"], rotation=20, ha="right", fontsize=8)
            ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Disk-based link prediction on FB15k-237: partition-buffer policies against in-memory", fontsize=10)
    return save_figure(fig, out_png)


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
        f"simulated {r.profile}" + (f" ({int(r.gpus)} GPUs, data-parallel)" if r.gpus > 1 else " (1 GPU)")
        + f", {r.hourly_usd:g} USD/h" for r in table.itertuples()]
    series = list(dict.fromkeys(table.sort_values(["mode", "gpus", "hourly_usd"])["series"]))
    simulated = [name for name in series if name.startswith("simulated")]
    colors = plt.get_cmap("viridis")
    color = {name: colors(0.1 + 0.8 * simulated.index(name) / max(1, len(simulated) - 1)) if name in simulated
             else "tab:gray" for name in series}
    datasets = list(dict.fromkeys(table["dataset"]))
    fig, axes = plt.subplots(len(datasets), 2, figsize=(14.0, 4.6 * len(datasets)), squeeze=False,
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
                    ax.bar([x], [bar[column]], width, color=color[name], label=None if name in labelled else name)
                    labelled.add(name)
                    if column == "cost_to_target_usd" and pd.isna(bar[column]) and pd.notna(bar["target"]):
                        ax.annotate("not reached", (x, 0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                                    textcoords="offset points", rotation=90, ha="center", va="bottom", fontsize=6)
            ax.set_yscale("log")
            values = rows[column][rows[column] > 0]
            if len(values):  # bars from well below the smallest, room above the largest for the notes
                ax.set_ylim(values.min() / 3, values.max() * 3)
            ax.set_xticks(range(len(configurations)))
            ax.set_xticklabels(configurations, rotation=20, ha="right", fontsize=8)
            ax.grid(True, axis="y", which="both", alpha=0.3)
            ax.set_ylabel(f"{label} (USD)")
            target = (f"target valid {first['valid_metric']} {first['target']:.3f}" if pd.notna(first["target"])
                      else "no target")
            ax.set_title(f"{dataset}: {label}" + (f" ({target})" if column == "cost_to_target_usd" else ""),
                         fontsize=9)
        if not (rows["mode"] == "simulated").any():
            axes[row][0].text(0.5, 0.97, "no simulated projection: no measured pipelined sync run of this workload "
                              "to calibrate the simulator on", transform=axes[row][0].transAxes, ha="center",
                              va="top", fontsize=7, style="italic")
        axes[row][1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.suptitle("Training cost per machine profile: measured on this machine, projected by the pipeline simulator "
                 "(calibrated on the measured sync run) on cloud GPU machines", fontsize=10)
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
    fig, (speed_ax, mrr_ax) = plt.subplots(1, 2, figsize=(13.0, 4.8), layout="constrained")
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
    skipped = table[table["status"] != "ok"]
    if len(skipped):
        text = "; ".join(f"{r['label']} ({int(r['threads'])}T): {r['reason']}" for _, r in skipped.iterrows())
        fig.text(0.01, -0.02, "skipped: " + text, fontsize=7, va="top", wrap=True)
    seeds = f"{int(ok['seeds'].min())}-{int(ok['seeds'].max())} seed(s)" if len(ok) else ""
    fig.suptitle("Link prediction on FB15k-237 (DistMult d=100, 1000 negatives per positive and side, batch 1000): "
                 f"the suite vs PyTorch-BigGraph and PyKEEN; {seeds}, MRR after the epochs shown", fontsize=10)
    return save_figure(fig, out_png)


FIGURES: dict[str, Callable[[str | Path, str | Path], Path]] = {"sampling": plot_sampling,
                                                            "pipeline_speed": plot_pipeline_speed,
                                                            "pipeline_validation": plot_pipeline_validation,
                                                            "disk_nc": plot_disk_nc,
                                                            "disk_lp": plot_disk_lp,
                                                            "cost": plot_cost,
                                                            "link_prediction_peers": plot_link_prediction_peers}
"""Figure name -> plot function; by default it reads ``results/<name>.csv`` and writes ``results/<name>.png``."""


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: draw one figure from its CSV."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figure", choices=sorted(FIGURES))
    parser.add_argument("--csv", type=Path, help="recorded table (default: results/<figure>.csv)")
    parser.add_argument("--out", type=Path, help="PNG to write (default: results/<figure>.png)")
    args = parser.parse_args(argv)
    out = FIGURES[args.figure](args.csv or RESULTS / f"{args.figure}.csv", args.out or RESULTS / f"{args.figure}.png")
    print(json.dumps({"wrote": str(out)}))
    return 0


__all__ = ["FIGURES", "plot_cost", "plot_disk_nc", "plot_link_prediction_peers", "plot_pipeline_speed", "plot_pipeline_validation", "plot_sampling",
           "save_figure"]

if __name__ == "__main__":
    raise SystemExit(main())
