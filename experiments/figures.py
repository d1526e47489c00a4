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


FIGURES: dict[str, Callable[[str | Path, str | Path], Path]] = {"sampling": plot_sampling}
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


__all__ = ["FIGURES", "plot_sampling", "save_figure"]

if __name__ == "__main__":
    raise SystemExit(main())
