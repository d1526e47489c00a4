"""``REPORT.md``: the paper's claims, each checked against the recorded tables under ``results/``.

A claim (:class:`Claim`, registered in :data:`CLAIMS`) names the paper's statement and a pure function of the
results folder that returns what was measured, in which setting, and a verdict (``holds``, ``partly``, ``does not
hold``, or ``not measured`` when its table is missing). Every number in the report comes from those tables; the
report itself is written atomically.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pandas as pd  # noqa: E402

from suite.io import atomic_write_bytes  # noqa: E402
from suite.registry import Registry  # noqa: E402

HOLDS, PARTLY, FAILS, MISSING = "holds", "partly", "does not hold", "not measured"


@dataclass(frozen=True)
class Finding:
    """What a claim's check found: the measured figures, the setting, the verdict."""

    measured: str
    setting: str
    verdict: str


@dataclass(frozen=True)
class Claim:
    """A claim of the paper and its check against ``results/``.

    Attributes:
        name: short identifier.
        statement: what the paper claims.
        source: the table(s) it is checked on.
        check: ``check(results_dir) -> Finding``; called only when every source file exists.
    """

    name: str
    statement: str
    source: tuple[str, ...]
    check: Callable[[Path], Finding]

    def evaluate(self, results: Path) -> Finding:
        """The finding, or ``not measured`` naming the missing table."""
        missing = [name for name in self.source if not (results / name).exists()]
        if missing:
            return Finding(f"missing {', '.join(missing)}", "", MISSING)
        return self.check(results)


CLAIMS: Registry = Registry("claim")


def claim(name: str, statement: str, source: tuple[str, ...]):
    """Register the decorated ``check(results) -> Finding`` as a claim."""
    def register(check: Callable[[Path], Finding]) -> Callable[[Path], Finding]:
        CLAIMS.register(name, Claim(name, statement, source, check))
        return check
    return register


def _fmt(values) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


# ---------------------------------------------------------------------------------------------- the claims
@claim("dense-speedup", "DENSE samples faster than layer-wise sampling, and its advantage grows with the number "
       "of layers (MariusGNN, Fig. 7)", ("sampling.csv",))
def _dense_speedup(results: Path) -> Finding:
    table = pd.read_csv(results / "sampling.csv")
    naive = table[(table["sampler"] == "naive") & (table["status"] == "ok")].sort_values("layers")
    parts, verdicts = [], []
    for setting, rows in naive.groupby("setting", sort=False):
        deep = rows[rows["layers"] >= 3]
        ratios = list(deep["time_ratio_vs_dense"])
        faster = all(r > 1 for r in ratios)
        grows = all(b >= a for a, b in zip(ratios, ratios[1:]))
        last = deep.iloc[-1] if len(deep) else None
        efficient = last is not None and last["time_ratio_vs_dense"] >= last["edges_ratio_vs_dense"]
        verdicts.append(faster and grows and efficient)
        parts.append(f"{setting}: naive/DENSE time {_fmt(ratios)} at {', '.join(str(int(l)) for l in deep['layers'])}"
                     f" layers (edges {_fmt(deep['edges_ratio_vs_dense'])})")
    setting = f"{'quick (small graphs)' if bool(table['quick'].iloc[0]) else 'full'}: " + ", ".join(
        f"{s} {r['dataset']} {int(r['num_roots'])} roots" for s, r in naive.groupby("setting").first().iterrows())
    verdict = HOLDS if all(verdicts) else PARTLY if any(verdicts) else FAILS
    return Finding("; ".join(parts), setting, verdict)


@claim("pipeline-utilization", "Pipelining keeps the compute device busy: utilization near 100 % and shorter "
       "epochs than synchronous training (MariusGNN, Sec. 6)", ("pipeline_speed.csv",))
def _pipeline_utilization(results: Path) -> Finding:
    table = pd.read_csv(results / "pipeline_speed.csv")
    parts, verdicts = [], []
    for (dataset, sampler), rows in table.groupby(["dataset", "sampler"], sort=False):
        base = rows[rows["system"] == "in_memory"]
        async_rows = rows[(rows["system"] == "pipelined") & (rows["configuration"] != "sync")]
        if base.empty or async_rows.empty:
            continue
        best = async_rows.loc[async_rows["epoch_time_s"].idxmin()]
        parts.append(f"{dataset}/{sampler}: best {best['configuration']} epoch x{best['time_ratio_vs_in_memory']:.2f}"
                     f" of in-memory, compute utilization {base['compute_utilization'].iloc[0]:.2f} -> "
                     f"{best['compute_utilization']:.2f}, efficiency {best['pipeline_efficiency']:.2f}")
        verdicts.append(best["compute_utilization"] >= 0.9 and best["time_ratio_vs_in_memory"] < 1.0)
    verdict = HOLDS if verdicts and all(verdicts) else PARTLY if any(verdicts) else FAILS
    return Finding("; ".join(parts), "3-layer GraphSAGE 15,10,5, batch 1000, warm epoch; CPU compute",
                   verdict)


@claim("async-accuracy", "Bounded staleness does not cost accuracy (MariusGNN: async within ~1 point of sync)",
       ("pipeline_accuracy.csv",))
def _async_accuracy(results: Path) -> Finding:
    table = pd.read_csv(results / "pipeline_accuracy.csv")
    means = table.groupby("configuration")["test_accuracy"].mean()
    if "sync" not in means:
        return Finding("no sync run", "", MISSING)
    gaps = {config: value - means["sync"] for config, value in means.items() if config != "sync"}
    measured = f"sync {means['sync']:.4f}; " + "; ".join(f"{c} {means[c]:.4f} ({g:+.4f})" for c, g in gaps.items())
    verdict = HOLDS if all(abs(g) <= 0.01 for g in gaps.values()) else FAILS
    return Finding(measured, f"{table['dataset'].iloc[0]}, {table['seed'].nunique()} seed(s), test accuracy",
                   verdict)


@claim("simulator-predicts", "The pipeline simulator predicts the real pipeline (epoch time within 10 %, "
       "compute utilization within 5 points)", ("pipeline_validation_summary.json",))
def _simulator(results: Path) -> Finding:
    summary = json.loads((results / "pipeline_validation_summary.json").read_text())
    time_error, points = summary["median_abs_epoch_time_error"], summary["median_abs_utilization_error_points"]
    speed = summary.get("simulator_speed") or {}
    measured = (f"median absolute error: epoch time {100 * time_error:.1f} %, utilization {points:.1f} points over "
                f"{summary['predictions']} held-out runs; {speed.get('batches', 0):,} batches simulated in "
                f"{speed.get('wall_s', float('nan')):.1f} s")
    verdict = HOLDS if time_error <= 0.10 and points <= 5 else PARTLY if time_error <= 0.2 else FAILS
    return Finding(measured, "calibrated on each dataset x sampler's sync run, never on the predicted run", verdict)


@claim("disk-out-of-core", "Disk-based training with a buffer of a fraction of the graph runs near in-memory "
       "speed, the IO hidden by prefetching (MariusGNN: disk-based runs cost a fraction of in-memory multi-GPU "
       "training)", ("disk_nc.csv",))
def _disk_out_of_core(results: Path) -> Finding:
    table = pd.read_csv(results / "disk_nc.csv")
    disk = table[(table["system"] == "disk") & table["prefetch"].astype(bool)]
    if disk.empty:
        return Finding("no disk run", "", MISSING)
    quarter = disk[disk["buffer_capacity"] * 4 == disk["num_partitions"]]
    rows = quarter if len(quarter) else disk
    best = rows.loc[rows["time_ratio_vs_in_memory"].idxmin()]
    dd = best.get("dd_read_bandwidth_bytes_per_s")
    bandwidth = best.get("read_bandwidth_bytes_per_s")
    measured = (f"{best['configuration']}: epoch x{best['time_ratio_vs_in_memory']:.2f} of in-memory, IO wait "
                f"{100 * best['io_wait_fraction']:.1f} % of the epoch, reads at {bandwidth / 1e6:.0f} MB/s"
                + (f" (dd: {dd / 1e6:.0f} MB/s)" if pd.notna(dd) else "")
                + f", test accuracy {best['test_accuracy']:.3f} vs in-memory "
                f"{table[table['system'] == 'in_memory']['test_accuracy'].iloc[0]:.3f}")
    settings = [(f"{best['dataset']} 2-layer NC", best)]
    extra = []
    deep_path, lp_path = results / "disk_nc_deep.csv", results / "disk_lp_timing.csv"
    if deep_path.exists():  # the 3-layer speed comparison, when recorded (full mode)
        deep = pd.read_csv(deep_path)
        for _, row in deep[deep["system"] == "disk"].iterrows():
            settings.append((f"{row['dataset']} 3-layer NC", row))
    if lp_path.exists():  # link prediction, runs one at a time (full mode)
        timing = pd.read_csv(lp_path)
        for _, row in timing[timing["configuration"] != "in_memory"].iterrows():
            settings.append((f"FB15k-237 {row['model']}", row))
    for label, row in settings[1:]:
        extra.append(f"{label} {row['configuration']}: x{row['time_ratio_vs_in_memory']:.2f}, IO wait "
                     f"{100 * row['io_wait_fraction']:.1f} %")
    if extra:
        measured += "; " + "; ".join(extra)
    meets = [row["time_ratio_vs_in_memory"] <= 1.3 and row["io_wait_fraction"] <= 0.10 for _, row in settings]
    verdict = HOLDS if all(meets) else PARTLY if any(meets) else FAILS
    return Finding(measured, f"{best['dataset']}, node classification, c = p/4 where measured"
                   + ("; and the settings after ';' (goal: epoch x1.3 or less, IO wait 10 % or less)" if extra else ""),
                   verdict)


@claim("comet-accuracy", "COMET keeps in-memory accuracy where BETA loses (MariusGNN: COMET's MRR within about "
       "0.01 of in-memory training, BETA's lower)", ("disk_lp.csv",))
def _comet_accuracy(results: Path) -> Finding:
    table = pd.read_csv(results / "disk_lp.csv")
    parts, comet_close, beta_worse = [], [], []
    for model, rows in table.groupby("model", sort=True):
        by_policy = rows.set_index("policy")
        if not {"in_memory", "comet", "beta"} <= set(by_policy.index):
            continue
        base, comet, beta = (by_policy.loc[name] for name in ("in_memory", "comet", "beta"))
        text = (f"{model}: in-memory {base['test_mrr_mean']:.4f}, COMET {comet['test_mrr_mean']:.4f} "
                f"({comet['mrr_minus_in_memory']:+.4f}), BETA {beta['test_mrr_mean']:.4f} "
                f"({beta['mrr_minus_in_memory']:+.4f})")
        if "random" in by_policy.index:
            text += f", random {by_policy.loc['random', 'test_mrr_mean']:.4f}"
        parts.append(text)
        comet_close.append(comet["mrr_minus_in_memory"] >= -0.01)  # keeps: at most 0.01 below in-memory
        beta_worse.append(beta["mrr_minus_in_memory"] < comet["mrr_minus_in_memory"])
    if not parts:
        return Finding("disk_lp.csv has no model with in-memory, COMET and BETA rows", "", MISSING)
    seeds = int(table["seeds"].min())
    configurations = ", ".join(sorted(c for c in set(table["configuration"]) if c != "in_memory"))
    setting = f"FB15k-237 link prediction ({configurations}), {seeds} seed(s), filtered test MRR, mean over seeds"
    verdict = HOLDS if all(comet_close) and all(beta_worse) else PARTLY if any(comet_close) else FAILS
    return Finding("; ".join(parts), setting, verdict)


@claim("disk-cost", "Disk-based training costs a fraction of in-memory multi-GPU training (MariusGNN: a disk-based "
       "run on one machine at a fraction of the cost of in-memory training on multi-GPU machines)", ("cost.csv",))
def _disk_cost(results: Path) -> Finding:
    table = pd.read_csv(results / "cost.csv")
    needed = {"dataset", "configuration", "kind", "mode", "gpus", "profile", "priced_as", "hourly_usd",
              "cost_per_epoch_usd", "cost_to_target_usd", "target"}
    if not needed <= set(table.columns):
        return Finding(f"cost.csv lacks the column {sorted(needed - set(table.columns))[0]}", "", MISSING)
    disk = table[(table["mode"] == "measured") & (table["kind"] == "disk")]
    if disk.empty:
        return Finding("cost.csv has no measured disk-based run", "", MISSING)
    multi = table[(table["mode"] == "simulated") & (table["kind"] == "in-memory") & (table["gpus"] > 1)]
    parts, settings, verdicts, missing = [], [], [], []
    for dataset, disk_rows in disk.groupby("dataset", sort=True):
        gpu_rows = multi[multi["dataset"] == dataset]
        if gpu_rows.empty:
            projected = sorted(set(multi["dataset"]))
            missing.append(f"no in-memory multi-GPU projection on {dataset} (the disk runs' dataset): the simulator "
                           "is calibrated on a measured pipelined sync run with batch records of the same workload, "
                           f"and cost.csv projects {', '.join(projected) if projected else 'no dataset'} (a "
                           f"pipelined sync: true run beside the disk runs would give it)")
            continue
        reached_disk = disk_rows.dropna(subset=["cost_to_target_usd"])
        reached_gpu = gpu_rows.dropna(subset=["cost_to_target_usd"])
        target = disk_rows["target"].iloc[0]
        if len(reached_disk) and len(reached_gpu):
            column, what = "cost_to_target_usd", "to target"
            best_disk = reached_disk.loc[reached_disk[column].idxmin()]
            best_gpu = reached_gpu.loc[reached_gpu[column].idxmin()]
            ratio = best_disk[column] / best_gpu[column]
            verdicts.append(HOLDS if ratio < 1 else FAILS)
        else:  # a side never reached the target: compare the cost of an epoch
            column = "cost_per_epoch_usd"
            what = "per epoch (" + ("neither reached" if not (len(reached_disk) or len(reached_gpu)) else
                                    "no disk run reached" if len(reached_gpu) else
                                    "no multi-GPU projection reached") + " the target)"
            best_disk = disk_rows.loc[disk_rows[column].idxmin()]
            best_gpu = gpu_rows.loc[gpu_rows[column].idxmin()]
            ratio = best_disk[column] / best_gpu[column]
            if len(reached_disk):  # disk reaches the target, multi-GPU training does not
                verdicts.append(HOLDS if ratio < 1 else PARTLY)
            else:
                verdicts.append(PARTLY if ratio < 1 else FAILS)
        parts.append(f"{dataset}: {best_disk['configuration']} {best_disk[column]:.6f} USD {what} vs "
                     f"{best_gpu['configuration']} on {best_gpu['profile']} ({int(best_gpu['gpus'])} GPUs) "
                     f"{best_gpu[column]:.6f} USD: x{ratio:.2f}")
        settings.append(f"{dataset}: disk measured here, priced as {best_disk['priced_as']} "
                        f"({best_disk['hourly_usd']:g} USD/h); multi-GPU in-memory projected by the simulator "
                        "(data-parallel, all-reduce not modelled: a lower bound); target valid "
                        + (f"{target:.3f}" if pd.notna(target) else "none"))
    if not verdicts:
        return Finding("; ".join(missing), "", MISSING)
    verdict = HOLDS if all(v == HOLDS for v in verdicts) else FAILS if all(v == FAILS for v in verdicts) \
        else PARTLY
    return Finding("; ".join(parts + missing), "; ".join(settings), verdict)


# ---------------------------------------------------------------------------------------------- peers (issue 17)
_INCONCLUSIVE = "inconclusive"


def _edges_per_s_range(row: pd.Series) -> tuple[float, float, float]:
    """Sampled edges/s of a sampling row: slowest repeat, median, fastest repeat."""
    edges = row["sampled_edges"]
    return edges / row["time_s_max"], edges / row["time_s"], edges / row["time_s_min"]


@claim("dense-vs-pyg", "DENSE samples faster than PyG's sampler, in sampled edges/s, at every layer count (issue "
       "17: the peer a PyG user has today)", ("sampling.csv",))
def _dense_vs_pyg(results: Path) -> Finding:
    table = pd.read_csv(results / "sampling.csv")
    ok = table[table["status"] == "ok"].set_index(["setting", "layers", "sampler"])
    pyg = table[table["sampler"] == "pyg"]
    if pyg.empty or (pyg["status"] != "ok").all():
        reason = pyg["reason"].dropna().iloc[0] if pyg["reason"].notna().any() else "no pyg row"
        return Finding(f"PyG rows skipped: {reason}", "", MISSING)
    parts, outcomes = [], []
    for setting, rows in pyg.groupby("setting", sort=False):
        ratios = []
        for _, row in rows.sort_values("layers").iterrows():
            key = (setting, row["layers"])
            if row["status"] != "ok" or (*key, "dense") not in ok.index:
                continue
            dense_slow, dense_mid, dense_fast = _edges_per_s_range(ok.loc[(*key, "dense")])
            pyg_slow, pyg_mid, pyg_fast = _edges_per_s_range(ok.loc[(*key, "pyg")])
            ratios.append(f"{int(row['layers'])}L x{dense_mid / pyg_mid:.2f}")
            # faster or slower only when the repeats' ranges do not overlap
            outcomes.append("faster" if dense_slow > pyg_fast else "slower" if dense_fast < pyg_slow else "overlap")
        parts.append(f"{setting}: DENSE/PyG edges/s {', '.join(ratios)}")
    measured = "; ".join(parts)
    backend = str(pyg["backend"].dropna().iloc[0]) if pyg["backend"].notna().any() else "PyG"
    setting = (f"{'quick (small graphs)' if bool(table['quick'].iloc[0]) else 'full'}: median over repeats; a layer "
               f"count counts as faster only if DENSE's slowest repeat beats PyG's fastest; PyG = {backend}")
    if outcomes and all(o == "faster" for o in outcomes):
        verdict = HOLDS
    elif "faster" in outcomes:
        verdict = PARTLY
    elif outcomes and all(o == "slower" for o in outcomes):
        verdict = FAILS
    else:
        verdict = _INCONCLUSIVE if outcomes else MISSING
    return Finding(measured, setting, verdict)


@claim("lp-vs-pbg", "The suite's link prediction trains at least as fast as PyTorch-BigGraph per epoch at equal "
       "MRR (issue 17 goal: at least 1.5x PBG's training triples/s, both on the same cores)",
       ("link_prediction_peers.csv",))
def _lp_vs_pbg(results: Path) -> Finding:
    table = pd.read_csv(results / "link_prediction_peers.csv")
    ok = table[table["status"] == "ok"]
    suite = ok[ok["system"] == "suite"]
    if suite.empty or "speed_vs_pbg-p1" not in ok or suite["speed_vs_pbg-p1"].isna().all():
        skipped = table[table["status"] != "ok"]
        reason = "; ".join(f"{r['label']}: {r['reason']}" for _, r in skipped.iterrows()) or "no paired runs"
        return Finding(f"no suite/PBG pair: {reason}", "", MISSING)
    parts, outcomes, goal = [], [], []
    for threads, rows in suite.groupby("threads"):
        best = rows.loc[rows["speed_vs_pbg-p1"].idxmax()]
        pbg = ok[(ok["configuration"] == "pbg-p1") & (ok["threads"] == threads)].iloc[0]
        low, high = best["speed_vs_pbg-p1_min"], best["speed_vs_pbg-p1_max"]
        diff, half = best["mrr_minus_pbg-p1"], best["mrr_minus_pbg-p1_ci95"]
        half = 0.0 if pd.isna(half) else half
        loaded = int(best["under_load_runs"]) + int(pbg["under_load_runs"])
        parts.append(f"{threads} thread(s): {best['label']} {best['epoch_time_s']:.2f} s/epoch "
                     f"({best['triples_per_s']:,.0f} triples/s) vs PBG p=1 {pbg['epoch_time_s']:.2f} s: "
                     f"x{best['speed_vs_pbg-p1']:.2f} (seeds {low:.2f}-{high:.2f}); MRR {best['test_mrr']:.4f} vs "
                     f"{pbg['test_mrr']:.4f} ({diff:+.4f} +- {half:.4f})"
                     + (f"; {loaded} run(s) under foreign load" if loaded else ""))
        seeds = int(min(best["seeds"], pbg["seeds"]))
        faster = "unsure" if seeds < 2 or loaded else "yes" if low >= 1.0 else "no" if high < 1.0 else "unsure"
        equal = "unsure" if seeds < 2 else "yes" if diff - half >= -0.01 else "no" if diff + half < -0.01 \
            else "unsure"
        outcomes.append("holds" if faster == equal == "yes" else "fails" if "no" in (faster, equal) else "unsure")
        goal.append(f"{threads}T " + ("met" if low >= 1.5 and equal == "yes" and faster == "yes" else
                                      "missed" if high < 1.5 or equal == "no" else "not established"))
    measured = "; ".join(parts) + f"; goal x1.5 at equal MRR: {', '.join(goal)}"
    setting = (f"FB15k-237 DistMult d=100, 1000 negatives per positive and side, {int(suite['epochs'].iloc[0])} "
               f"epochs, {int(suite['seeds'].min())} seed(s); equal MRR: filtered test MRR at most 0.01 below PBG's "
               "(95 % CI of the paired difference); speed ranges: per-seed ratios of back-to-back runs; fewer than 2 "
               "seeds or runs under foreign load decide nothing")
    verdict = HOLDS if all(o == "holds" for o in outcomes) else FAILS if all(o == "fails" for o in outcomes) \
        else PARTLY if "holds" in outcomes else _INCONCLUSIVE
    return Finding(measured, setting, verdict)


# ---------------------------------------------------------------------------------------------- the report
def _git_sha() -> str:
    from suite.provenance import versions

    return str(versions().get("git_sha", "unknown"))


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (a ``|`` would end the cell)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(results: Path, mode: str, job_times: dict[str, float] | None = None) -> str:
    """The report's Markdown (pure: reads only the tables under ``results``)."""
    lines = [f"# Reproduction report ({mode})", "",
             f"Generated {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} from the tables in "
             f"this folder (git {_git_sha()[:12]}). Every number below is read from them by "
             "`experiments/report.py`.", "",
             "| claim | paper | measured here | setting | verdict |", "|---|---|---|---|---|"]
    for item in CLAIMS.in_order():
        finding = item.evaluate(results)
        lines.append(f"| {item.name} | {_cell(item.statement)} | {_cell(finding.measured)} | "
                     f"{_cell(finding.setting)} | **{finding.verdict}** |")
    figures = sorted(p.name for p in results.glob("*.png"))
    lines += ["", "## Figures", ""] + [f"- [{name}]({name})" for name in figures]
    if job_times:
        lines += ["", "## Time per figure", "", "| figure | seconds |", "|---|---|"]
        lines += [f"| {name} | {seconds:.0f} |" for name, seconds in job_times.items()]
        lines += [f"| total | {sum(job_times.values()):.0f} |"]
    return "\n".join(lines) + "\n"


def write_report(results: Path, mode: str = "quick", job_times: dict[str, float] | None = None) -> Path:
    """Write ``results/REPORT.md`` atomically; return its path."""
    path = Path(results) / "REPORT.md"
    atomic_write_bytes(path, render(Path(results), mode, job_times).encode())
    return path


__all__ = ["CLAIMS", "Claim", "Finding", "claim", "render", "write_report"]
