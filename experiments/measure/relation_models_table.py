"""FB15k-237 relation-model table: decoder x training negatives, mean over seeds with 95 % t intervals.

Reads the completed link-prediction runs under ``--runs`` (``gnnsuite grid experiments/specs/fb15k237_relation_models.yaml
--out out/lp_relation``, plus ``experiments/specs/fb15k237_rgcn_distmult.yaml`` runs) and writes one row per (encoder,
decoder, negatives): seeds, filtered test MRR and Hits@1 and the self-rank fraction of the test evaluation, each
as ``mean [low, high]`` (:func:`suite.stats.mean_interval`), plus the mean training time. A cell with one seed
has no interval.

Usage: ``python experiments/measure/relation_models_table.py [--runs out/lp_relation] [--out out/results/relation_models.csv]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from suite.results import export, load_runs
from suite.stats import mean_interval

METRICS = {"metrics.test.filtered_mrr": "test_mrr", "metrics.test.filtered_hits@1": "test_hits@1",
           "metrics.test.self_rank_fraction": "self_rank_fraction"}


def table(runs: Path) -> pd.DataFrame:
    """One row per (encoder, decoder, negatives) over the completed link-prediction runs under ``runs``."""
    df = load_runs(runs, include_incomplete=False)
    df = df[(df["status"] == "completed") & (df["task"] == "link_prediction")].copy()
    mode = "config.training.negatives.mode"
    df["negatives"] = df[mode].fillna("chunked") if mode in df else "chunked"
    rows = []
    for (encoder, decoder, negatives), group in df.groupby(["config.model.encoder", "config.model.decoder",
                                                            "negatives"]):
        row = {"encoder": encoder, "decoder": decoder, "negatives": negatives, "seeds": len(group),
               "epochs": int(group["epochs"].max()), "train_time_s": round(float(group["train_time_s"].mean()), 1)}
        for column, name in METRICS.items():
            values = group[column].astype(float).tolist() if column in group else []
            interval = mean_interval(values)
            row[name] = round(interval.estimate, 4)
            row[f"{name}_ci"] = interval.format(3)
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="out/lp_relation", help="runs folder")
    parser.add_argument("--out", default="out/results/relation_models.csv", help="table to write (.csv)")
    args = parser.parse_args()
    result = table(Path(args.runs))
    print(result.to_string(index=False))
    print(f"wrote {export(result, args.out)}")


if __name__ == "__main__":
    main()
