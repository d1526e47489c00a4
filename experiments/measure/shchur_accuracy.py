"""Test accuracy of in-memory GraphSAGE and GCN on Shchur et al.'s graphs, next to their published values.

Usage::

    python experiments/measure/shchur_accuracy.py [--grid experiments/specs/shchur.yaml] [--out out/shchur]
        [--graphs coauthor-cs ...] [--encoders gcn ...] [--splits 0 1 ...] [--seeds 0 ...] [--set a.b=value ...]
        [--jobs 1] [--markdown] [--table-only]

Runs the grid (every graph x encoder x split seed x initialisation seed of ``experiments/specs/shchur.yaml``, the
points kept by the filters, ``--set`` overrides applied to all) through the suite's harness (``suite.run_grid``:
completed runs in ``--out`` are reused, a killed grid resumes), then prints one row per graph and encoder: the
number of runs, the mean best validation accuracy (what the hyper-parameters were chosen on), the mean test
accuracy with its 95 % t interval over the runs, the published accuracy and the difference, and whether the mean
lies within 0.02 of it. The test accuracy is that of the parameters of the best validation epoch
(``evaluation.restore_best``), as in Shchur et al.'s early stopping. ``--markdown`` prints the table as Markdown
(docs/datasets.md), otherwise as CSV; ``--table-only`` tabulates the runs already completed in ``--out``.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

PUBLISHED = {  # Shchur et al. 2018, table 2 (test accuracy, mean over 100 splits x 20 initialisations)
    ("amazon-computers", "graphsage"): 0.82, ("amazon-computers", "gcn"): 0.83,
    ("coauthor-cs", "graphsage"): 0.91, ("coauthor-cs", "gcn"): 0.91,
    ("coauthor-physics", "graphsage"): 0.93, ("coauthor-physics", "gcn"): 0.93,
}
TOLERANCE = 0.02
"""The goal: the mean test accuracy within this much of the published one."""
DEFAULT_GRID = Path(__file__).resolve().parents[1] / "specs" / "shchur.yaml"


def selected(specs, graphs, encoders, splits, seeds):
    """The specs of the grid whose graph, encoder, split seed and seed are among those given (None: any)."""
    def keep(value, allowed):
        return allowed is None or value in allowed

    return [spec for spec in specs
            if keep(spec.dataset.name, graphs) and keep(spec.model.encoder, encoders)
            and keep(spec.dataset.split.seed if spec.dataset.split else 0, splits) and keep(spec.seed, seeds)]


def table_rows(summaries: list[dict]) -> list[dict]:
    """One row per (graph, encoder) of completed runs: n, mean best validation and test accuracy, the test
    interval, the published value, the difference and whether it is within :data:`TOLERANCE`."""
    from suite.stats import mean_interval

    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for summary in summaries:
        if summary.get("status", "completed") == "completed" and summary.get("metrics", {}).get("test"):
            groups[(summary["dataset"], summary["model"])].append(summary)
    rows = []
    for (graph, encoder), runs in sorted(groups.items()):
        test = mean_interval([run["metrics"]["test"]["accuracy"] for run in runs])
        valid = mean_interval([(run.get("restored_best") or {}).get("valid")
                               or max(point["accuracy"] for point in run["metrics"]["valid_curve"])
                               for run in runs])
        published = PUBLISHED.get((graph, encoder))
        difference = None if published is None else test.estimate - published
        rows.append({"graph": graph, "encoder": encoder, "runs": len(runs), "valid": valid.estimate,
                     "test": test.estimate, "low": test.low, "high": test.high, "published": published,
                     "difference": difference,
                     "within": None if difference is None else round(abs(difference), 9) <= TOLERANCE})
    return rows


def print_rows(rows: list[dict], markdown: bool) -> None:
    """The table as CSV, or as Markdown."""
    if markdown:
        print("| graph | encoder | runs | best valid | test accuracy [95 % interval] | published | difference | "
              "within 0.02 |")
        print("|---|---|---|---|---|---|---|---|")
        for row in rows:
            print(f"| {row['graph']} | {row['encoder']} | {row['runs']} | {row['valid']:.3f} | {row['test']:.3f} "
                  f"[{row['low']:.3f}, {row['high']:.3f}] | {row['published']} | {row['difference']:+.3f} | "
                  f"{'yes' if row['within'] else 'no'} |")
        return
    print("graph,encoder,runs,valid,test,low,high,published,difference,within")
    for row in rows:
        print(",".join(str(row[key]) for key in ("graph", "encoder", "runs", "valid", "test", "low", "high",
                                                 "published", "difference", "within")))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    from suite.grid import expand_grid, run_grid
    from suite.recorder import read_summary

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, default=DEFAULT_GRID, help="the grid of runs (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("out/shchur"), help="the runs' folder")
    parser.add_argument("--graphs", nargs="+")
    parser.add_argument("--encoders", nargs="+")
    parser.add_argument("--splits", nargs="+", type=int, help="split seeds (dataset.split.seed)")
    parser.add_argument("--seeds", nargs="+", type=int, help="initialisation seeds")
    parser.add_argument("--set", action="append", default=[], metavar="a.b=value", help="override (repeatable)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--table-only", action="store_true", help="tabulate the completed runs in --out, run none")
    args = parser.parse_args(argv)
    specs = selected(expand_grid(args.grid, args.set), args.graphs, args.encoders, args.splits, args.seeds)
    if args.table_only:
        summaries = [summary for spec in specs if (summary := read_summary(args.out / spec.run_id)) is not None]
    else:
        summaries = run_grid(specs, args.out, jobs=args.jobs, progress=False)
    print_rows(table_rows(summaries), args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
