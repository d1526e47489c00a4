"""The shared style of the figures: every figure is drawn by its job's module (``plot_<name>(csv_path, out_png)``,
listed in its :class:`~experiments.common.Figure`), from its recorded table(s) alone (no recomputation of results).

All share one style (:data:`STYLE`, :func:`styled`): the same fonts, grid, colours per system, sampler and policy
(:data:`COLORS`, :func:`color_of`; a newly registered one gets a stable colour of its own), display names from the
registered classes (:func:`display_label`), error bars that are 95 % confidence intervals from seeds or repeats
(stored in the tables by :mod:`suite.stats`; :func:`error_bars`; a figure without repeats says so), and a caption
naming the figure of the paper it reproduces, its data and what its error bars are (:func:`caption`). Figures are
written atomically (rendered in memory, then renamed): :func:`save_figure`. ``python experiments/draw.py NAME``
redraws one figure from its table.
"""

from __future__ import annotations

import contextlib
import io
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

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
    "dispersed": "tab:cyan", "sequential_neighborhood": "tab:purple",
    # the link-prediction peers' systems
    "suite": "tab:blue", "pbg": "tab:orange", "pykeen": "tab:purple",
}
"""One colour per system, sampler and policy, the same in every figure."""

MARIUSGNN = "MariusGNN (Waleffe et al., EuroSys 2023)"
"""The paper most figures reproduce (for captions)."""
BESTA = "Besta & Hoefler, Parallel and Distributed GNNs: an in-depth concurrency analysis"
"""The survey the work-depth and asynchronous-pipeline figures reproduce (for captions)."""


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


def error_bars(table: pd.DataFrame, column: str) -> np.ndarray | None:
    """Asymmetric error bars (2 x n) from ``column_ci_low`` / ``column_ci_high``, or None when absent."""
    low, high = f"{column}_ci_low", f"{column}_ci_high"
    if low not in table or high not in table:
        return None
    value = table[column].to_numpy(float)
    lower = np.nan_to_num(value - table[low].to_numpy(float), nan=0.0)
    upper = np.nan_to_num(table[high].to_numpy(float) - value, nan=0.0)
    return np.vstack([np.clip(lower, 0, None), np.clip(upper, 0, None)])


def annotate_ratios(ax, bars, table: pd.DataFrame, ratio_column: str, value_column: str = "epoch_time_s") -> None:
    """Write ``x<ratio>`` above each bar (above its error bar where ``<value_column>_ci_high`` is given)."""
    tops = table.get(f"{value_column}_ci_high", table[value_column]).fillna(table[value_column])
    for bar, ratio, top in zip(bars, table[ratio_column], tops):
        ax.annotate(f"x{ratio:.2f}", (bar.get_x() + bar.get_width() / 2, max(top, bar.get_height())),
                    textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)


def plain_log_ticks(ax, axis: str = "both") -> None:
    """Log axes with plain numbers at 1, 2 and 5 times powers of ten (``2``, ``0.5``, ``2e+05``) instead of
    ``2 x 10^0``."""
    for which in ("x", "y") if axis == "both" else (axis,):
        target = ax.xaxis if which == "x" else ax.yaxis
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        target.set_minor_formatter(NullFormatter())


def configuration_label(label: str) -> str:
    """A configuration label for an axis: COMET's ``l8`` (logical partitions) spelt out, so it never reads as
    ``I8``."""
    import re

    return re.sub(r" l(\d+)$", r", \1 logical", str(label))


def flagged_under_load(table: pd.DataFrame) -> pd.Series:
    """Which rows of ``table`` were measured under foreign load (all False without an ``under_load`` column)."""
    if "under_load" not in table:
        return pd.Series(False, index=table.index)
    return table["under_load"].map(measured_under_load).astype(bool)


def load_note(table: pd.DataFrame, label: Callable[[pd.Series], str]) -> str:
    """A caption sentence naming the rows measured under foreign load (``label(row)`` each); empty without any."""
    flagged = table[flagged_under_load(table)]
    if flagged.empty:
        return ""
    return ("Measured under foreign load (flagged, hollow/hatched, left out of the verdicts): "
            + ", ".join(label(row) for _, row in flagged.iterrows()) + ".")


def color_of(name: str, default: str | None = None) -> str:
    """The colour of a system, sampler or policy: its entry in :data:`COLORS`, else ``default``, else a stable
    colour derived from the name (so a newly registered one is drawn, distinct, without editing a figure)."""
    if name in COLORS:
        return COLORS[name]
    if default is not None:
        return default
    import zlib

    palette = ("tab:olive", "tab:brown", "tab:pink", "tab:cyan", "tab:gray", "tab:orange", "tab:purple")
    return palette[zlib.crc32(str(name).encode()) % len(palette)]


_REGISTRIES = {"SAMPLERS": ("suite.registry", "SAMPLERS"), "SYSTEMS": ("suite.registry", "SYSTEMS"),
               "POLICIES": ("systems.disk.policies", "POLICIES")}
"""Where the registry of each kind of plugin a figure shows lives."""


def _registry(kind: str):
    """The registry of a kind of plugin a figure shows: ``"SAMPLERS"``, ``"SYSTEMS"`` or ``"POLICIES"``."""
    import importlib

    module, attribute = _REGISTRIES[kind]
    return getattr(importlib.import_module(module), attribute)


def registered(registry: str, name: str):
    """The class registered as ``name`` in the registry ``registry`` (``"SAMPLERS"``, ``"SYSTEMS"``,
    ``"POLICIES"``), or None when there is none (a table recorded by a plugin not installed here)."""
    from suite.errors import ConfigError

    try:
        return _registry(registry).get(name)
    except (ConfigError, ImportError, KeyError):
        return None


def display_label(registry: str, name: str) -> str:
    """A registered plugin's display name (its class attribute ``label``), or the name with ``_`` as ``-``."""
    return getattr(registered(registry, name), "label", None) or str(name).replace("_", "-")


MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">")
"""Markers in the order figures hand them out."""


def next_marker(taken: Sequence[str] = ()) -> str:
    """The first of :data:`MARKERS` not in ``taken``."""
    return next((m for m in MARKERS if m not in taken), "x")


def marker_of(registry: str, name: str, taken: Sequence[str] = ()) -> str:
    """A registered plugin's marker (its class attribute ``marker``) unless ``taken``, else :func:`next_marker`."""
    marker = getattr(registered(registry, name), "marker", None)
    return marker if marker and marker not in taken else next_marker(taken)


__all__ = ["BESTA", "COLORS", "MARIUSGNN", "MARKERS", "STYLE", "caption", "color_of", "configuration_label",
           "display_label", "error_bars", "flagged_under_load", "load_note", "marker_of", "next_marker",
           "plain_log_ticks", "registered", "save_figure", "styled"]
