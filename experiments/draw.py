"""Redraw one figure from its recorded table(s): every plot a registered figure lists
(:data:`experiments.plugins.FIGURES`, :attr:`experiments.common.Figure.plots`), by its name (its PNG's stem).

Usage::

    python experiments/draw.py sampling [--csv out/results/sampling.csv] [--out out/results/sampling.png]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from experiments.common import RESULTS, Plot


def plots() -> dict[str, Plot]:
    """Every registered figure's plots, by name, in the order of :data:`experiments.plugins.FIGURES`."""
    from experiments.plugins import figures

    return {plot.name: plot for figure in figures() for plot in figure.plots}


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: draw one figure from its table(s)."""
    known = plots()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figure", choices=sorted(known))
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the tables (default %(default)s)")
    parser.add_argument("--csv", type=Path, help="recorded table (default: RESULTS/<its table>)")
    parser.add_argument("--out", type=Path, help="PNG to write (default: RESULTS/<figure>.png)")
    args = parser.parse_args(argv)
    plot = known[args.figure]
    out = plot.draw(args.csv or args.results / plot.table, args.out or args.results / f"{plot.name}.png")
    print(json.dumps({"wrote": str(out)}))
    return 0


__all__ = ["main", "plots"]

if __name__ == "__main__":
    raise SystemExit(main())
