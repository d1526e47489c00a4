"""Link-prediction recipes at the literature's quality: a sweep on validation MRR, then the chosen recipes' test MRR.

Usage::

    python experiments/measure/lp_recipes.py [--grid experiments/specs/fb15k237_recipes.yaml] [--out out/lp-recipes]
        [--set a.b=value ...] [--jobs 2] [--markdown] [--curves] [--table-only]

Runs a grid through the suite's harness (``suite.run_grid``: completed runs in ``--out`` are reused, a killed grid
resumes), then prints one row per configuration (the grid's points that differ only in ``seed``; a run stopped
before its last epoch, as a sweep's point given up early, counts with the epochs it ran): the decoder and the fields
that make the recipe (dimension, initialization scale, learning rate, regularizer and weight, entity and relation
embedding dropout, negatives), the epochs run, the number of seeds, the mean training time in minutes (epochs only,
evaluation excluded), the best and the last validation filtered MRR (mean over the seeds), and, where the runs
tested, the filtered test MRR and Hits@10 with the 95 % t interval of the MRR over the seeds and the goal of issue
32 for the decoder (:data:`GOALS`: holds when the interval lies at or above it, missed when below, else undecided).
Rows are sorted by decoder and by the validation MRR at equal epochs (the latest evaluated epoch every recipe of the
decoder reached); the first row of each decoder is the one a sweep chooses (``chosen``): on validation only.

Two grids use it: ``experiments/specs/fb15k237_recipes_sweep.yaml`` (the sweep: one seed, validation on a fixed
sample) and ``experiments/specs/fb15k237_recipes.yaml`` (the chosen recipes: 3 seeds, the whole test split).
``--curves`` also prints every configuration's validation MRR after each evaluated epoch against the cumulative
training time (mean over the seeds): the recipe's measured curve. ``--markdown`` prints Markdown
(docs/link_prediction.md), otherwise CSV; ``--table-only`` tabulates the runs already completed in ``--out``.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

GOALS = {"distmult": 0.33, "complex": 0.34}
"""Issue 32's goals: FB15k-237 filtered test MRR within 60 minutes of training on 2 cores."""
TIME_BUDGET_MIN = 60.0
"""The training time a recipe may take (minutes)."""
DEFAULT_GRID = Path(__file__).resolve().parents[1] / "specs" / "fb15k237_recipes.yaml"
RECIPE_FIELDS = ("decoder", "dim", "init", "lr", "regularizer", "weight", "dropout", "relation_dropout", "negatives",
                 "epochs")


def recipe(spec) -> dict:
    """The fields of a run spec that make its recipe (what the grids vary; not the seed)."""
    model, training = spec.model, spec.training
    negatives = training.negatives
    return {"decoder": model.decoder, "dim": model.embedding_dim, "init": model.embedding_init_scale,
            "lr": training.learning_rate, "regularizer": training.regularizer if training.regularization else "none",
            "weight": training.regularization, "dropout": model.embedding_dropout,
            "relation_dropout": model.relation_dropout,
            "negatives": str(negatives.negatives_per_positive) if negatives.mode == "chunked" else negatives.mode,
            "epochs": training.epochs}


def by_recipe(runs: list[tuple]) -> dict[tuple, list[dict]]:
    """The completed (and, from a sweep, stopped) runs' summaries grouped by recipe and by the epochs they ran;
    ``runs``: ``(spec, summary)`` pairs."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for spec, summary in runs:
        if summary.get("status") in ("completed", STOPPED):
            key = {**recipe(spec), "epochs": len(summary["epoch_time_s"])}
            groups[tuple(key.items())].append(summary)
    return groups


STOPPED = "stopped"
"""The status of a run stopped before its last epoch (a sweep's point given up early): its summary is read from
its records (:func:`stopped_summary`)."""


def stopped_summary(run_dir: Path) -> dict | None:
    """What :func:`table_rows` reads of a run that never finished, from its records: the epochs' times, the
    training time and the validation curve (None when it recorded no epoch)."""
    from suite.recorder import read_records

    records = read_records(run_dir)
    epochs = [record["epoch_time_s"] for record in records if record.get("kind") == "epoch"]
    if not epochs:
        return None
    curve = [record for record in records if record.get("kind") == "eval" and record.get("split") == "valid"]
    return {"status": STOPPED, "epoch_time_s": epochs, "train_time_s": sum(epochs),
            "metrics": {"valid_curve": curve}}


def read_run(run_dir: Path) -> dict | None:
    """A run's summary, or for a run stopped early the one :func:`stopped_summary` reads from its records."""
    from suite.recorder import read_summary

    return read_summary(run_dir) or stopped_summary(run_dir)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _verdict(decoder: str, low: float, high: float) -> str:
    goal = GOALS.get(decoder)
    if goal is None:
        return ""
    return "holds" if low >= goal else "missed" if high < goal else "undecided"


def _valid_at(curves: list[list[dict]], epoch: int) -> float | None:
    """The mean over the seeds of the validation MRR after epoch index ``epoch`` (None when a seed lacks it)."""
    values = [next((p["filtered_mrr"] for p in curve if p["epoch"] == epoch), None) for curve in curves]
    return None if not values or None in values else _mean(values)


def table_rows(runs: list[tuple]) -> list[dict]:
    """One row per recipe of the completed runs (``(spec, summary)`` pairs; see the module's docstring), sorted by
    decoder and by the validation MRR at equal epochs (descending): ``valid_at`` is the mean validation MRR after
    ``valid_epoch``, the latest evaluated epoch every recipe of the decoder reached (a sweep stops points at
    different epochs; comparing their best would favour the longest). The first row of each decoder has ``chosen``
    true: the sweep's choice, on validation only."""
    from suite.stats import mean_interval

    rows = []
    for key, runs in by_recipe(runs).items():
        curves = [run["metrics"].get("valid_curve") or [] for run in runs]
        row = {**dict(key), "seeds": len(runs), "train_min": _mean([run["train_time_s"] / 60 for run in runs]),
               "curves": curves,
               "best_valid": _mean([max(p["filtered_mrr"] for p in c) for c in curves]) if all(curves) else None,
               "last_valid": _mean([c[-1]["filtered_mrr"] for c in curves]) if all(curves) else None,
               "test": None, "low": None, "high": None, "hits10": None, "goal": GOALS.get(dict(key)["decoder"]),
               "verdict": ""}
        tests = [run["metrics"].get("test") for run in runs]
        if all(tests):
            interval = mean_interval([test["filtered_mrr"] for test in tests])
            row.update(test=interval.estimate, low=interval.low, high=interval.high,
                       hits10=_mean([test["filtered_hits@10"] for test in tests]))
            if len(runs) >= 2 and row["train_min"] <= TIME_BUDGET_MIN:
                row["verdict"] = _verdict(row["decoder"], interval.low, interval.high)
        rows.append(row)
    for decoder in {row["decoder"] for row in rows}:
        mine = [row for row in rows if row["decoder"] == decoder]
        common = set.intersection(*({p["epoch"] for p in curve} for row in mine for curve in row["curves"]))
        epoch = max(common) if common else None
        for row in mine:
            row["valid_epoch"] = None if epoch is None else epoch + 1
            row["valid_at"] = None if epoch is None else _valid_at(row["curves"], epoch)
    for row in rows:
        del row["curves"]
    rows.sort(key=lambda row: (row["decoder"], -(row["valid_at"] if row["valid_at"] is not None else -1.0)))
    for index, row in enumerate(rows):
        row["chosen"] = index == 0 or rows[index - 1]["decoder"] != row["decoder"]
    return rows


def curve_rows(runs: list[tuple]) -> list[dict]:
    """Per recipe and evaluated epoch: the cumulative training time (minutes) and the validation filtered MRR,
    each the mean over the seeds (``runs``: ``(spec, summary)`` pairs)."""
    rows = []
    for key, runs in by_recipe(runs).items():
        points: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for run in runs:
            elapsed = [sum(run["epoch_time_s"][:epoch + 1]) / 60 for epoch in range(len(run["epoch_time_s"]))]
            for point in run["metrics"].get("valid_curve") or []:
                points[point["epoch"]].append((elapsed[point["epoch"]], point["filtered_mrr"]))
        for epoch, values in sorted(points.items()):
            rows.append({**dict(key), "epoch": epoch + 1, "seeds": len(values),
                         "train_min": _mean([t for t, _ in values]), "valid_mrr": _mean([m for _, m in values])})
    return rows


def _text(value, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _dropout(row: dict) -> str:
    """The entity embeddings' dropout, and the relation embeddings' after a slash where there is one."""
    return f"{row['dropout']:g}" + (f" / {row['relation_dropout']:g}" if row["relation_dropout"] else "")


def print_rows(rows: list[dict], markdown: bool) -> None:
    """The recipe table as CSV, or as Markdown."""
    columns = RECIPE_FIELDS + ("seeds", "train_min", "valid_epoch", "valid_at", "best_valid", "last_valid", "test",
                               "low", "high", "hits10", "goal", "verdict", "chosen")
    if not markdown:
        print(",".join(columns))
        for row in rows:
            print(",".join(_text(row[column], 4) for column in columns))
        return
    print("| decoder | d | init | lr | regularizer | dropout | negatives | epochs | seeds | training (min) | "
          "valid MRR at equal epochs | best valid MRR | test MRR [95 % interval] | Hits@10 | goal | chosen |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        regularizer = "none" if row["regularizer"] == "none" else f"{row['regularizer']} {row['weight']:g}"
        test = "" if row["test"] is None else (f"{row['test']:.3f} [{row['low']:.3f}, {row['high']:.3f}]"
                                                if row["seeds"] > 1 else f"{row['test']:.3f}")
        goal = "" if row["goal"] is None else f">= {row['goal']}" + (f": {row['verdict']}" if row["verdict"] else "")
        print(f"| {row['decoder']} | {row['dim']} | {row['init']:g} | {row['lr']:g} | {regularizer} | "
              f"{_dropout(row)} | {row['negatives']} | {row['epochs']} | {row['seeds']} | {row['train_min']:.1f} | "
              f"{_text(row['valid_at'])} (epoch {row['valid_epoch']}) | {_text(row['best_valid'])} | {test} | "
              f"{_text(row['hits10'])} | {goal} | {'yes' if row['chosen'] else ''} |")


def print_curves(rows: list[dict], markdown: bool) -> None:
    """The curves as CSV, or as Markdown."""
    if not markdown:
        keys = ("decoder", "dim", "init", "lr", "regularizer", "weight", "dropout", "relation_dropout", "negatives",
                "epoch", "seeds", "train_min", "valid_mrr")
        print(",".join(keys))
        for row in rows:
            print(",".join(_text(row[key], 4) for key in keys))
        return
    print("| recipe | epoch | seeds | training (min) | valid MRR |")
    print("|---|---|---|---|---|")
    for row in rows:
        penalty = "no penalty" if row["regularizer"] == "none" else f"{row['regularizer']} {row['weight']:g}"
        label = (f"{row['decoder']} d{row['dim']} init {row['init']:g} lr {row['lr']:g} {penalty} "
                 f"dropout {_dropout(row)}")
        print(f"| {label} | {row['epoch']} | {row['seeds']} | {row['train_min']:.1f} | {row['valid_mrr']:.3f} |")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    from suite.grid import expand_grid, run_grid

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, default=DEFAULT_GRID, help="the grid of runs (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("out/lp-recipes"), help="the runs' folder")
    parser.add_argument("--set", action="append", default=[], metavar="a.b=value", help="override (repeatable)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--curves", action="store_true", help="also print the validation curves")
    parser.add_argument("--table-only", action="store_true", help="tabulate the completed runs in --out, run none")
    args = parser.parse_args(argv)
    specs = expand_grid(args.grid, args.set)
    if not args.table_only:
        run_grid(specs, args.out, jobs=args.jobs, progress=False)
    runs = [(spec, summary) for spec in specs if (summary := read_run(args.out / spec.run_id)) is not None]
    print_rows(table_rows(runs), args.markdown)
    if args.curves:
        print()
        print_curves(curve_rows(runs), args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
