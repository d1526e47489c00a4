"""``REPORT.md``: the paper's claims, each decided from the recorded tables of a results folder, with intervals.

A claim (:class:`Claim`, registered in :data:`CLAIMS` with :func:`claim`) names the paper's statement, the tables
it reads, and one pure function of the results folder that returns a :class:`Finding`: what was measured (each
figure with its 95 % confidence interval), in which setting, the named :class:`Estimate` objects it decided from
(``gnnsuite report --against`` compares them with the reference's), and a verdict (:mod:`suite.stats`):

- ``holds`` / ``does not hold``: the interval of every quantity the claim needs lies on one side of its threshold;
- ``inconclusive``: an interval straddles its threshold, is not defined (one seed, one repeat), or comes from
  fewer seeds than the claim needs (3 for accuracy);
- ``not testable here``: the machine lacks what the claim needs (an accelerator), or its table was not recorded;
  the finding says why (``reason``) and, where the simulator can, shows its projection for a named machine
  profile, labelled as a projection.

No verdict comes from a point estimate: a ``holds`` or ``does not hold`` without one defined interval among the
finding's estimates is turned into ``inconclusive`` (:meth:`Claim.evaluate`). Timing claims leave out the rows
measured under foreign load (``under_load``, :mod:`suite.load`) and say how many they left out.

To add a claim: one more function that reads its table(s) and returns a :class:`Finding`, decorated with
:func:`claim`. Every number in the report comes from the tables; the report is written atomically.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from suite.io import atomic_write_bytes
from suite.load import measured_under_load
from suite.registry import Registry
from suite.stats import (FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE, VERDICTS, Interval, above, any_of,
                         below, bootstrap_interval, combine, difference_interval, mean_interval, ratio_interval,
                         slope_interval)

MIN_SEEDS = 3
"""Seeds an accuracy claim needs before it can hold or fail."""
PROJECTION_PROFILE = "p3.2xlarge"
"""The machine profile whose simulator projection stands in for claims that need an accelerator."""


@dataclass(frozen=True)
class Estimate:
    """One quantity a claim is decided on: its name (stable across runs: ``report --against`` matches on it),
    its interval, and the condition it is held to (``> 1``, ``<= 0.10``...)."""

    name: str
    interval: Interval
    condition: str = ""


@dataclass(frozen=True)
class Finding:
    """What a claim's check found.

    Attributes:
        measured: the measured figures, each with its 95 % interval, as text.
        setting: the setting they were measured in.
        verdict: one of :data:`suite.stats.VERDICTS`.
        estimates: the quantities the verdict was decided on.
        reason: why the claim is not testable here, or why it is inconclusive.
        excluded: what was left out (runs measured under load), as text.
    """

    measured: str
    setting: str
    verdict: str
    estimates: tuple[Estimate, ...] = ()
    reason: str = ""
    excluded: str = ""


@dataclass(frozen=True)
class Claim:
    """A claim of the paper and its check.

    Attributes:
        name: short identifier.
        statement: what the paper claims (and where).
        source: the table(s) it needs; a missing one makes it ``not testable here``.
        check: ``check(results_dir) -> Finding``; called only when every source file exists.
    """

    name: str
    statement: str
    source: tuple[str, ...]
    check: Callable[[Path], Finding]

    def evaluate(self, results: Path) -> Finding:
        """The finding on the tables under ``results`` (see the module docstring for the rules it enforces)."""
        missing = [name for name in self.source if not (Path(results) / name).exists()]
        if missing:
            return Finding("not measured", "", NOT_TESTABLE, reason=f"{', '.join(missing)} missing from {results}")
        try:
            finding = self.check(Path(results))
        except KeyError as err:  # a table written by an older version, without the columns the check needs
            return Finding("cannot be decided from these tables", "", INCONCLUSIVE,
                           reason=f"column {err} missing (a table recorded before intervals were added?)")
        if finding.verdict not in VERDICTS:
            raise ValueError(f"claim {self.name}: verdict {finding.verdict!r} is not one of {', '.join(VERDICTS)}")
        if finding.verdict in (HOLDS, FAILS) and not any(e.interval.defined for e in finding.estimates):
            return replace(finding, verdict=INCONCLUSIVE,
                           reason=(finding.reason + "; " if finding.reason else "")
                           + "no interval behind the verdict (a point estimate decides nothing)")
        if finding.verdict == INCONCLUSIVE and not finding.reason:
            undecided = [e for e in finding.estimates if undecided_by(e)]
            if undecided:
                return replace(finding, reason="undecided: " + "; ".join(
                    f"{e.name} {e.interval} vs {e.condition}" for e in undecided))
        return finding


CLAIMS: Registry = Registry("claim")


def claim(name: str, statement: str, source: tuple[str, ...]):
    """Register the decorated ``check(results) -> Finding`` as a claim."""
    def register(check: Callable[[Path], Finding]) -> Callable[[Path], Finding]:
        CLAIMS.register(name, Claim(name, statement, source, check))
        return check
    return register


# ---------------------------------------------------------------------------------------------- helpers
def undecided_by(estimate: Estimate) -> bool:
    """Whether ``estimate`` leaves its condition (``> 1``, ``<= 0.10``...) undecided: its interval straddles the
    threshold or is not defined. Estimates without a condition (context) never do."""
    import re

    match = re.fullmatch(r"\s*(>=|<=|>|<)\s*(-?[0-9.]+)\s*", estimate.condition or "")
    if not match:
        return False
    interval, threshold = estimate.interval, float(match.group(2))
    return not interval.defined or interval.low <= threshold <= interval.high


def table_interval(row: pd.Series, column: str, n_column: str | None = None, method: str = "") -> Interval:
    """The interval a table stores as ``column`` with ``column_ci_low`` / ``column_ci_high`` (NaN bounds when the
    table has none for this row)."""
    def number(name: str) -> float:
        value = row.get(name)
        return float(value) if value is not None and pd.notna(value) else math.nan

    n = row.get(n_column) if n_column else None
    return Interval(number(column), number(f"{column}_ci_low"), number(f"{column}_ci_high"),
                    int(n) if n is not None and pd.notna(n) else 0, method)


def split_under_load(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows to use, rows measured under foreign load) of a timing table; without ``under_load``, all are used."""
    if "under_load" not in table:
        return table, table.iloc[0:0]
    flagged = table["under_load"].map(measured_under_load).astype(bool)
    return table[~flagged], table[flagged]


def _excluded(rows: pd.DataFrame, label: Callable[[pd.Series], str]) -> str:
    if rows.empty:
        return ""
    return (f"{len(rows)} measured under foreign load, left out: "
            + ", ".join(label(row) for _, row in rows.iterrows()))


def _pct(interval: Interval) -> str:
    return interval.format(1, percent=True)


# ---------------------------------------------------------------------------------------------- the claims
@claim("dense-speedup", "DENSE samples faster than layer-wise sampling, and its advantage grows with the number "
       "of layers (MariusGNN, Fig. 7)", ("sampling.csv",))
def _dense_speedup(results: Path) -> Finding:
    from experiments.sampling import paired_times

    table = pd.read_csv(results / "sampling.csv")
    ok = table[table["status"] == "ok"]
    used, loaded = split_under_load(ok)
    parts, verdicts, estimates = [], [], []
    for setting, rows in used.groupby("setting", sort=False):
        by = {(r["sampler"], int(r["layers"])): r for _, r in rows.iterrows()}
        layers = sorted(l for s, l in by if s == "naive" and l >= 3 and ("dense", l) in by)
        if not layers:
            continue
        ratios, xs, logs = [], [], []
        for count in layers:
            ratio = table_interval(by[("naive", count)], "time_ratio_vs_dense", "paired_repeats", "paired log t")
            ratios.append(ratio)
            estimates.append(Estimate(f"{setting} L{count} naive/DENSE time", ratio, "> 1"))
            verdicts.append(above(ratio, 1.0))
            naive, dense = paired_times(by[("naive", count)]["times_s"], by[("dense", count)]["times_s"])
            xs += [count] * len(naive)
            logs += [math.log(a / b) for a, b in zip(naive, dense) if a > 0 and b > 0]
        slope = slope_interval(xs, logs)
        growth = Interval(math.exp(slope.estimate), math.exp(slope.low), math.exp(slope.high), slope.n, slope.method) \
            if slope.defined else Interval(math.nan, math.nan, math.nan, slope.n, slope.method)
        estimates.append(Estimate(f"{setting} growth of naive/DENSE per layer", growth, "> 1"))
        verdicts.append(above(slope, 0.0, min_n=3) if len(layers) > 1 else INCONCLUSIVE)
        edges = ", ".join(f"{by[('naive', c)]['edges_ratio_vs_dense']:.2f}" for c in layers)
        repeats = sorted({int(by[("naive", c)]["paired_repeats"]) for c in layers})
        parts.append(f"{setting}: naive/DENSE time {'; '.join(str(r) for r in ratios)} at "
                     f"{', '.join(map(str, layers))} layers ({'-'.join(map(str, repeats))} paired repeats), growth "
                     f"x{growth} per layer (edges {edges})")
    if not parts:
        return Finding("no setting with naive and DENSE rows at 3 or more layers measured without load", "",
                       INCONCLUSIVE, excluded=_excluded(loaded, lambda r: f"{r['setting']} L{r['layers']}"))
    quick = bool(table["quick"].iloc[0])
    setting = (f"{'quick (small graphs)' if quick else 'full'}: "
               + ", ".join(f"{s} {r['dataset']} {int(r['num_roots'])} roots"
                           for s, r in used[used["sampler"] == "naive"].groupby("setting").first().iterrows())
               + "; faster: every 3+ layer ratio > 1; grows: the slope of log(naive/DENSE) over layers > 0")
    return Finding("; ".join(parts), setting, combine(verdicts), tuple(estimates),
                   excluded=_excluded(loaded.drop_duplicates(["setting", "layers"]),
                                      lambda r: f"{r['setting']} L{int(r['layers'])}"))


def _cpu_pipeline_text(speed: pd.DataFrame) -> str:
    parts = []
    for (dataset, sampler), rows in speed.groupby(["dataset", "sampler"], sort=False):
        base = rows[rows["system"] == "in_memory"]
        async_rows = rows[(rows["system"] == "pipelined") & (rows["configuration"] != "sync")]
        if base.empty or async_rows.empty:
            continue
        best = async_rows.loc[async_rows["epoch_time_s"].idxmin()]
        parts.append(f"{dataset}/{sampler} best {best['configuration']} epoch x{best['time_ratio_vs_in_memory']:.2f} "
                     f"of in-memory, compute utilization {best['compute_utilization']:.2f}")
    return "; ".join(parts)


def _projection(results: Path) -> tuple[str, list[Estimate], str]:
    path = results / "pipeline_projection.csv"
    if not path.exists():
        return "", [], "no projection recorded (pipeline_projection.csv missing)"
    table = pd.read_csv(path)
    pipelined = table[table["configuration"] != "sync"]
    parts, estimates, verdicts = [], [], []
    for _, row in pipelined.iterrows():
        utilization = table_interval(row, "compute_utilization", "seeds", "t over simulator seeds")
        ratio = table_interval(row, "time_ratio_vs_sync", "seeds", "t over simulator seeds")
        label = f"{row['dataset']}/{row['sampler']}"
        estimates += [Estimate(f"projection {row['profile']} {label} compute utilization", utilization, ">= 0.9"),
                      Estimate(f"projection {row['profile']} {label} epoch / sync", ratio, "< 1")]
        verdicts.append(combine([above(utilization, 0.9), below(ratio, 1.0)]))
        parts.append(f"{label} {row['configuration']}: compute utilization {utilization}, epoch x{ratio} of sync")
    profile = pipelined["profile"].iloc[0] if len(pipelined) else PROJECTION_PROFILE
    hardware = pipelined["hardware"].iloc[0] if len(pipelined) and "hardware" in pipelined else ""
    text = (f"PROJECTION (simulator, not a measurement) on {profile}: " + "; ".join(parts)
            + f" -> the projection {combine(verdicts)}")
    return text, estimates, hardware


@claim("pipeline-utilization", "Pipelining keeps the compute device busy: utilization near 100 % and shorter "
       "epochs than synchronous training (MariusGNN, Sec. 6)", ("pipeline_speed.csv",))
def _pipeline_utilization(results: Path) -> Finding:
    speed = pd.read_csv(results / "pipeline_speed.csv")
    cuda_path = results / "pipeline_cuda.csv"
    if cuda_path.exists():  # measured on an accelerator (experiments/measure/pipeline_cuda.py): decided from its seeds
        return _pipeline_utilization_measured(pd.read_csv(cuda_path))
    projection, estimates, hardware = _projection(results)
    measured = (projection + "; " if projection else "") + "measured here on the CPU (pipeline_speed.csv, not a " \
        "test of the claim): " + _cpu_pipeline_text(speed)
    return Finding(measured, "3-layer GraphSAGE 15,10,5, batch 1000; projection calibrated on each measured sync "
                   f"run, {hardware}", NOT_TESTABLE, tuple(estimates),
                   reason="no accelerator here: the 'device' is the CPU whose cores the loaders use, so compute "
                          "utilization measures CPU sharing, not whether the pipeline keeps a GPU busy; "
                          "experiments/measure/pipeline_cuda.py measures the claim where a GPU is present")


def _pipeline_utilization_measured(table: pd.DataFrame) -> Finding:
    used, loaded = split_under_load(table)
    parts, verdicts, estimates = [], [], []
    for (dataset, sampler), rows in used.groupby(["dataset", "sampler"], sort=False):
        by_config = dict(tuple(rows.groupby("configuration")))
        base = by_config.get("in_memory")
        for configuration, runs in by_config.items():
            if configuration in ("in_memory", "sync") or base is None:
                continue
            utilization = mean_interval(runs["compute_utilization"])
            pairs = runs.merge(base, on="seed", suffixes=("", "_base"))
            ratio = ratio_interval(list(pairs["epoch_time_s"]), list(pairs["epoch_time_s_base"]))
            estimates += [Estimate(f"{dataset}/{sampler} {configuration} compute utilization", utilization, ">= 0.9"),
                          Estimate(f"{dataset}/{sampler} {configuration} epoch / in-memory", ratio, "< 1")]
            verdicts.append(combine([above(utilization, 0.9), below(ratio, 1.0)]))
            parts.append(f"{dataset}/{sampler} {configuration}: compute utilization {utilization}, epoch "
                         f"x{ratio} of in-memory")
    device = str(table["device"].iloc[0]) if "device" in table else "cuda"
    return Finding("; ".join(parts) or "no pipelined run beside an in-memory one", f"measured on {device} "
                   f"(experiments/measure/pipeline_cuda.py), {table['seed'].nunique()} seeds", combine(verdicts),
                   tuple(estimates), excluded=_excluded(loaded, lambda r: str(r.get("run_id"))))


@claim("async-accuracy", "Bounded staleness does not cost accuracy (MariusGNN: async within ~1 point of sync)",
       ("pipeline_accuracy.csv",))
def _async_accuracy(results: Path) -> Finding:
    table = pd.read_csv(results / "pipeline_accuracy.csv")
    wide = table.pivot_table(index="seed", columns="configuration", values="test_accuracy", aggfunc="first")
    if "sync" not in wide:
        return Finding("no sync run", "", NOT_TESTABLE, reason="pipeline_accuracy.csv has no sync configuration")
    sync = mean_interval(wide["sync"])
    parts, verdicts, estimates = [f"sync {sync}"], [], [Estimate("sync test accuracy", sync)]
    for configuration in wide.columns:
        if configuration == "sync":
            continue
        both = wide[["sync", configuration]].dropna()
        gap = difference_interval(list(both[configuration]), list(both["sync"]))
        estimates.append(Estimate(f"{configuration} - sync test accuracy", gap, "> -0.01"))
        verdicts.append(above(gap, -0.01, min_n=MIN_SEEDS))
        parts.append(f"{configuration} - sync {gap}")
    seeds = int(wide["sync"].notna().sum())
    reason = f"{seeds} seed(s); the claim needs {MIN_SEEDS}" if seeds < MIN_SEEDS else ""
    return Finding("; ".join(parts), f"{table['dataset'].iloc[0]}, {seeds} seeds, test accuracy; differences paired "
                   "by seed; holds when the interval of async - sync lies above -0.01", combine(verdicts),
                   tuple(estimates), reason=reason)


@claim("simulator-predicts", "The pipeline simulator predicts the real pipeline (epoch time within 10 %, "
       "compute utilization within 5 points)", ("pipeline_validation.csv",))
def _simulator(results: Path) -> Finding:
    table = pd.read_csv(results / "pipeline_validation.csv")
    used, loaded = split_under_load(table)
    time_error = bootstrap_interval(used["epoch_time_error"].abs())
    points = bootstrap_interval(used["utilization_error_points"].abs())
    estimates = (Estimate("median |epoch time error|", time_error, "< 0.10"),
                 Estimate("median |utilization error| (points)", points, "< 5"))
    verdict = combine([below(time_error, 0.10, min_n=3), below(points, 5.0, min_n=3)])
    measured = (f"median absolute error (bootstrap 95 % interval over {len(used)} held-out runs): epoch time "
                f"{_pct(time_error)}, compute utilization {points.format(1)} points")
    summary_path = results / "pipeline_validation_summary.json"
    if summary_path.exists():
        speed = json.loads(summary_path.read_text()).get("simulator_speed") or {}
        if speed:
            measured += f"; {speed.get('batches', 0):,} batches simulated in {speed.get('wall_s', math.nan):.1f} s"
    return Finding(measured, "calibrated on each dataset x sampler's sync run, never on the predicted run",
                   verdict, estimates, excluded=_excluded(loaded, lambda r: f"{r['dataset']}/{r['sampler']} "
                                                                            f"{r['configuration']}"))


def _disk_setting(label: str, rows: pd.DataFrame) -> tuple[list[str], list[str], list[Estimate]]:
    parts, verdicts, estimates = [], [], []
    for _, row in rows.iterrows():
        if "timed_runs" in row:  # intervals over seeds (each run's warm-epoch mean), ratios paired by seed
            ratio = table_interval(row, "time_ratio_vs_in_memory", "timed_runs", "paired log t over seeds")
            wait = table_interval(row, "io_wait_fraction", "timed_runs", "t over seeds")
        else:  # intervals over the warm epochs of one run
            ratio = table_interval(row, "time_ratio_vs_in_memory", "warm_epochs", "Welch log t over warm epochs")
            wait = table_interval(row, "io_wait_fraction", "warm_epochs", "t over warm epochs")
        name = f"{label} {row['configuration']}"
        estimates += [Estimate(f"{name} epoch / in-memory", ratio, "<= 1.3"),
                      Estimate(f"{name} IO wait fraction", wait, "<= 0.10")]
        verdicts.append(combine([below(ratio, 1.3), below(wait, 0.10)]))
        parts.append(f"{name}: epoch x{ratio} of in-memory, IO wait {_pct(wait)}")
    return parts, verdicts, estimates


@claim("disk-out-of-core", "Disk-based training with a buffer of a fraction of the graph runs near in-memory "
       "speed, the IO hidden by prefetching (MariusGNN: disk-based runs cost a fraction of in-memory multi-GPU "
       "training)", ("disk_nc.csv",))
def _disk_out_of_core(results: Path) -> Finding:
    table = pd.read_csv(results / "disk_nc.csv")
    disk = table[(table["system"] == "disk") & table["prefetch"].astype(bool)]
    if disk.empty:
        return Finding("no disk run with prefetch", "", NOT_TESTABLE, reason="disk_nc.csv has no such run")
    quarter = disk[disk["buffer_capacity"] * 4 == disk["num_partitions"]]
    rows, loaded = split_under_load(quarter if len(quarter) else disk)
    dataset = str(table["dataset"].iloc[0])
    parts, verdicts, estimates = _disk_setting(f"{dataset} 2-layer NC", rows)
    groups = [any_of(verdicts) if verdicts else INCONCLUSIVE]
    excluded = [_excluded(loaded, lambda r: r["configuration"])]
    for name, label, keep in (("disk_nc_deep.csv", f"{dataset} 3-layer NC", lambda t: t["system"] == "disk"),
                              ("disk_lp_timing.csv", "FB15k-237", lambda t: t["configuration"] != "in_memory")):
        if (results / name).exists():  # full mode: the 3-layer NC and the link-prediction timing runs
            extra = pd.read_csv(results / name)
            extra, extra_loaded = split_under_load(extra[keep(extra)])
            if "model" in extra:
                extra = extra.assign(configuration=extra["model"] + " " + extra["configuration"])
            more_parts, more_verdicts, more_estimates = _disk_setting(label, extra)
            parts += more_parts
            estimates += more_estimates
            groups.append(any_of(more_verdicts) if more_verdicts else INCONCLUSIVE)
            excluded.append(_excluded(extra_loaded, lambda r: r["configuration"]))
    memory = table[table["system"] == "in_memory"]
    if "accuracy_gap_vs_in_memory" in table and len(memory):
        accuracy = ", ".join(f"{r['configuration']} {table_interval(r, 'accuracy_gap_vs_in_memory', 'seeds')}"
                             for _, r in rows.iterrows())
        measured = "; ".join(parts) + (f" (test accuracy, not part of this verdict, see disk-accuracy: in-memory "
                                       f"{table_interval(memory.iloc[0], 'test_accuracy', 'seeds')}; disk - "
                                       f"in-memory {accuracy})")
    else:
        accuracy = ", ".join(f"{r['configuration']} {r['test_accuracy']:.3f}" for _, r in rows.iterrows())
        measured = "; ".join(parts) + (f" (test accuracy, one seed, not part of the verdict: {accuracy} vs "
                                       f"in-memory {memory['test_accuracy'].iloc[0]:.3f})" if len(memory) else "")
    return Finding(measured, f"{dataset} node classification, c = p/4 where measured; per setting, some "
                   "configuration needs epoch x1.3 or less of in-memory and IO wait 10 % or less (intervals over "
                   "warm epochs)", combine(groups), tuple(estimates),
                   excluded="; ".join(e for e in excluded if e))


@claim("disk-accuracy", "Training from a partition buffer of a fraction of the graph keeps in-memory accuracy "
       "(MariusGNN: disk-based node classification on papers100M within about a point of in-memory)", ("disk_nc.csv",))
def _disk_accuracy(results: Path) -> Finding:
    table = pd.read_csv(results / "disk_nc.csv")
    if "accuracy_gap_vs_in_memory" not in table:
        return Finding("no paired accuracy in disk_nc.csv", "", NOT_TESTABLE,
                       reason="disk_nc.csv has no accuracy_gap_vs_in_memory (one seed per run)")
    disk = table[(table["system"] == "disk") & table["accuracy_gap_vs_in_memory"].notna()]
    if disk.empty:
        return Finding("no disk run with a paired in-memory run", "", NOT_TESTABLE,
                       reason="disk_nc.csv has no disk row with an accuracy difference")
    memory = table[table["system"] == "in_memory"]
    estimates = [Estimate("in-memory test accuracy", table_interval(memory.iloc[0], "test_accuracy", "seeds"))] \
        if len(memory) else []
    verdicts, parts = [], []
    for _, row in disk.iterrows():
        gap = table_interval(row, "accuracy_gap_vs_in_memory", "seeds", "paired t over seeds")
        quarter = row["buffer_capacity"] * 4 == row["num_partitions"]
        estimates.append(Estimate(f"{row['configuration']} - in-memory test accuracy", gap,
                                  ">= -0.01" if quarter else ""))
        if quarter:
            verdicts.append(above(gap, -0.01, min_n=MIN_SEEDS))
        parts.append(f"{row['configuration']} {gap}")
    return Finding("test accuracy difference to in-memory, paired by seed: " + "; ".join(parts),
                   f"{table['dataset'].iloc[0]}, the same epochs and model; c = p/4 rows decide (some configuration "
                   "within 0.01)", any_of(verdicts) if verdicts else NOT_TESTABLE, tuple(estimates))


@claim("comet-accuracy", "COMET keeps in-memory accuracy where BETA loses (MariusGNN: COMET's MRR within about "
       "0.01 of in-memory training, BETA's lower)", ("disk_lp_runs.csv",))
def _comet_accuracy(results: Path) -> Finding:
    runs = pd.read_csv(results / "disk_lp_runs.csv")
    parts, verdicts, estimates, seeds = [], [], [], []
    for model, rows in runs.groupby("model", sort=True):
        wide = rows.pivot_table(index="seed", columns="policy", values="test_mrr", aggfunc="first")
        if not {"in_memory", "comet", "beta"} <= set(wide.columns):
            continue
        both = wide[["in_memory", "comet", "beta"]].dropna()
        seeds.append(len(both))
        comet_gap = difference_interval(list(both["comet"]), list(both["in_memory"]))
        beta_gap = difference_interval(list(both["beta"]), list(both["comet"]))
        estimates += [Estimate(f"{model} in-memory MRR", mean_interval(both["in_memory"])),
                      Estimate(f"{model} COMET - in-memory MRR", comet_gap, "> -0.01"),
                      Estimate(f"{model} BETA - COMET MRR", beta_gap, "< 0")]
        verdicts.append(combine([above(comet_gap, -0.01, min_n=MIN_SEEDS), below(beta_gap, 0.0, min_n=MIN_SEEDS)]))
        text = (f"{model}: in-memory {mean_interval(both['in_memory'])}, COMET - in-memory {comet_gap}, "
                f"BETA - COMET {beta_gap}")
        if "random" in wide:
            text += f", random {mean_interval(wide['random'])}"
        parts.append(text)
    if not parts:
        return Finding("no model with in-memory, COMET and BETA runs", "", NOT_TESTABLE,
                       reason="disk_lp_runs.csv lacks a policy")
    configurations = ", ".join(sorted(c for c in set(runs["configuration"]) if c != "in_memory"))
    reason = f"{min(seeds)} seed(s); the claim needs {MIN_SEEDS}" if min(seeds) < MIN_SEEDS else ""
    return Finding("; ".join(parts), f"FB15k-237 link prediction ({configurations}), {min(seeds)} seed(s), filtered "
                   "test MRR, differences paired by seed; holds when COMET - in-memory > -0.01 and BETA - COMET < 0",
                   combine(verdicts), tuple(estimates), reason=reason)


def _epoch_times(cell) -> list[float]:
    values = json.loads(cell) if isinstance(cell, str) else list(cell or [])
    return [float(v) for v in values]


@claim("disk-cost", "Disk-based training costs a fraction of in-memory multi-GPU training (MariusGNN: a disk-based "
       "run on one machine at a fraction of the cost of in-memory training on multi-GPU machines)", ("cost.csv",))
def _disk_cost(results: Path) -> Finding:
    table = pd.read_csv(results / "cost.csv")
    disk_all = table[(table["mode"] == "measured") & (table["kind"] == "disk")]
    disk, loaded = split_under_load(disk_all)
    if disk.empty:
        return Finding("cost.csv has no measured disk-based run without load", "", NOT_TESTABLE,
                       reason="no disk run", excluded=_excluded(loaded, lambda r: r["configuration"]))
    multi = table[(table["mode"] == "simulated") & (table["kind"] == "in-memory") & (table["gpus"] > 1)]
    parts, settings, verdicts, estimates, missing = [], [], [], [], []
    for dataset, disk_rows in disk.groupby("dataset", sort=True):
        gpu_rows = multi[multi["dataset"] == dataset]
        if gpu_rows.empty:
            projected = sorted(set(multi["dataset"]))
            missing.append(f"no in-memory multi-GPU projection on {dataset} (the disk runs' dataset): the simulator "
                           "is calibrated on a measured pipelined sync run with batch records of the same workload, "
                           f"and cost.csv projects {', '.join(projected) if projected else 'no dataset'} (a "
                           "pipelined sync: true run beside the disk runs would give it)")
            continue
        disk_reached = disk_rows["cost_to_target_usd"].notna().any()
        gpu_reached = gpu_rows["cost_to_target_usd"].notna().any()
        column = "cost_to_target_usd" if disk_reached and gpu_reached else "cost_per_epoch_usd"
        disk_best = disk_rows.dropna(subset=[column]).sort_values(column).iloc[0]
        gpu_best = gpu_rows.dropna(subset=[column]).sort_values(column).iloc[0]

        def scale(row: pd.Series) -> float:  # cost = epochs x mean epoch time x price per second
            epochs = row["epochs_to_target"] if column == "cost_to_target_usd" else 1
            return float(epochs) * float(row["hourly_usd"]) / 3600

        ratio = ratio_interval([t * scale(disk_best) for t in _epoch_times(disk_best["epoch_times_s"])],
                               [t * scale(gpu_best) for t in _epoch_times(gpu_best["epoch_times_s"])], paired=False)
        if column == "cost_to_target_usd":
            what, verdict = "to target", below(ratio, 1.0)
        else:  # a side never reached the target: the cost of an epoch decides only against the disk run
            what = "per epoch (" + ("neither reached" if not (disk_reached or gpu_reached) else
                                    "no disk run reached" if gpu_reached else
                                    "no multi-GPU projection reached") + " the target)"
            verdict = below(ratio, 1.0)
            if not disk_reached and verdict == HOLDS:
                verdict = INCONCLUSIVE  # cheaper per epoch, but it never reached the target
        kind = "to target" if column == "cost_to_target_usd" else "per epoch"
        estimates.append(Estimate(f"{dataset} disk / multi-GPU cost {kind}", ratio, "< 1"))
        verdicts.append(verdict)
        parts.append(f"{dataset}: {disk_best['configuration']} {disk_best[column]:.6f} USD {what} vs PROJECTED "
                     f"{gpu_best['configuration']} on {gpu_best['profile']} ({int(gpu_best['gpus'])} GPUs) "
                     f"{gpu_best[column]:.6f} USD: x{ratio}")
        settings.append(f"{dataset}: disk measured here, priced as {disk_best['priced_as']} "
                        f"({disk_best['hourly_usd']:g} USD/h); multi-GPU in-memory is a simulator projection "
                        "(data-parallel, all-reduce not modelled: a lower bound); interval over epoch times")
    if not verdicts:
        return Finding("; ".join(missing), "", NOT_TESTABLE, reason="; ".join(missing))
    return Finding("; ".join(parts + missing), "; ".join(settings), combine(verdicts), tuple(estimates),
                   excluded=_excluded(loaded, lambda r: r["configuration"]))


# ---------------------------------------------------------------------------------------------- peers
@claim("dense-vs-pyg", "DENSE samples faster than PyG's sampler, in sampled edges/s, at every layer count (the "
       "peer a PyG user has today)", ("sampling.csv",))
def _dense_vs_pyg(results: Path) -> Finding:
    table = pd.read_csv(results / "sampling.csv")
    pyg = table[table["sampler"] == "pyg"]
    if pyg.empty or (pyg["status"] != "ok").all():
        reason = pyg["reason"].dropna().iloc[0] if len(pyg) and pyg["reason"].notna().any() else "no pyg row"
        return Finding(f"PyG rows skipped: {reason}", "", NOT_TESTABLE, reason=f"PyG could not sample here: {reason}")
    rows, loaded = split_under_load(pyg[pyg["status"] == "ok"])
    parts, verdicts, estimates = [], [], []
    for setting, group in rows.groupby("setting", sort=False):
        ratios = []
        for _, row in group.sort_values("layers").iterrows():
            # edges/s of DENSE over PyG's = PyG's time / DENSE's (paired repeats) x DENSE's edges / PyG's
            edges = float(row["edges_ratio_vs_dense"]) if pd.notna(row.get("edges_ratio_vs_dense")) else 1.0
            time_ratio = table_interval(row, "time_ratio_vs_dense", "paired_repeats", "paired log t over repeats")
            speedup = time_ratio.scaled(1.0 / edges) if edges > 0 else time_ratio
            name = f"{setting} L{int(row['layers'])} DENSE/PyG edges/s"
            estimates.append(Estimate(name, speedup, "> 1"))
            verdicts.append(above(speedup, 1.0))
            ratios.append(f"{int(row['layers'])}L x{speedup}")
        parts.append(f"{setting}: DENSE/PyG sampled edges/s {', '.join(ratios)}")
    backend = str(pyg["backend"].dropna().iloc[0]) if pyg["backend"].notna().any() else "PyG"
    quick = bool(table["quick"].iloc[0]) if "quick" in table else False
    setting = (f"{'quick (small graphs)' if quick else 'full'}: paired repeats on the same roots, geometric mean of "
               f"PyG's time / DENSE's with its 95 % interval, scaled by DENSE's / PyG's sampled edges; PyG = {backend}")
    return Finding("; ".join(parts), setting, combine(verdicts) if verdicts else INCONCLUSIVE, tuple(estimates),
                   excluded=_excluded(loaded, lambda r: f"{r['setting']} L{int(r['layers'])}"))


@claim("lp-vs-pbg", "The suite's link prediction trains faster than PyTorch-BigGraph at equal MRR (goal: at least "
       "1.5x PBG's training triples/s on the same cores, filtered test MRR at most 0.01 below)",
       ("link_prediction_peers.csv",))
def _lp_vs_pbg(results: Path) -> Finding:
    table = pd.read_csv(results / "link_prediction_peers.csv")
    ok = table[table["status"] == "ok"]
    column = "speed_vs_pbg-p1_geomean"
    suite = ok[ok["system"] == "suite"]
    if suite.empty or column not in ok or suite["speed_vs_pbg-p1"].isna().all():  # no pair at all
        skipped = table[table["status"] != "ok"]
        reason = "; ".join(f"{r['label']}: {r['reason']}" for _, r in skipped.iterrows()) or "no paired runs"
        return Finding(f"no suite/PBG pair: {reason}", "", NOT_TESTABLE, reason=reason)
    parts, groups, estimates = [], [], []
    for threads, rows in suite.groupby("threads"):
        pbg = ok[(ok["configuration"] == "pbg-p1") & (ok["threads"] == threads)].iloc[0]
        options = []
        for _, row in rows.iterrows():
            speed = table_interval(row, column, "speed_pairs_vs_pbg-p1", "paired log t over seeds")
            gap = table_interval(row, "mrr_minus_pbg-p1", "seeds", "paired t over seeds")
            estimates += [Estimate(f"{threads}T {row['label']} / PBG p=1 triples/s", speed, ">= 1.5"),
                          Estimate(f"{threads}T {row['label']} - PBG p=1 MRR", gap, "> -0.01")]
            options.append(combine([above(speed, 1.5, min_n=MIN_SEEDS), above(gap, -0.01, min_n=MIN_SEEDS)]))
            parts.append(f"{threads} thread(s): {row['label']} {row['epoch_time_s']:.2f} s/epoch "
                         f"({row['triples_per_s']:,.0f} triples/s) vs PBG p=1 {pbg['epoch_time_s']:.2f} s: "
                         f"x{speed}; MRR {row['test_mrr']:.4f} vs {pbg['test_mrr']:.4f} (difference {gap})")
        groups.append(any_of(options))
    setting = (f"FB15k-237 DistMult d=100, 1000 negatives per positive and side, {int(suite['epochs'].iloc[0])} "
               f"epochs, {int(suite['seeds'].min())} seed(s), back-to-back runs per seed; per thread count some "
               f"suite configuration must reach both (intervals over seeds, runs under foreign load left out of "
               f"the speed)")
    return Finding("; ".join(parts), setting, combine(groups), tuple(estimates))


# ---------------------------------------------------------------------------------------------- the report
def _git_sha() -> str:
    from suite.provenance import versions

    return str(versions().get("git_sha", "unknown"))


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (a ``|`` would end the cell)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def findings(results: Path) -> dict[str, Finding]:
    """Every registered claim's finding on the tables under ``results``, in registration order."""
    return {item.name: item.evaluate(Path(results)) for item in CLAIMS.in_order()}


def render(results: Path, mode: str, job_times: dict[str, float] | None = None) -> str:
    """The report's Markdown (pure: reads only the tables under ``results``)."""
    results = Path(results)
    found = findings(results)
    lines = [f"# Reproduction report ({mode})", "",
             f"Generated {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} from the tables in "
             f"this folder (git {_git_sha()[:12]}). Every number below is read from them by "
             "`experiments/report.py`; brackets are 95 % confidence intervals (t intervals over seeds or repeats, "
             "or a percentile bootstrap; `suite/stats.py`).", "",
             "| claim | paper | measured here (95 % CI) | setting | verdict |", "|---|---|---|---|---|"]
    for item in CLAIMS.in_order():
        finding = found[item.name]
        lines.append(f"| {item.name} | {_cell(item.statement)} | {_cell(finding.measured)} | "
                     f"{_cell(finding.setting)} | **{finding.verdict}** |")
    notes = [(name, f) for name, f in found.items() if f.reason or f.excluded]
    if notes:
        lines += ["", "## Notes", ""]
        for name, finding in notes:
            text = "; ".join(t for t in (finding.reason, finding.excluded) if t)
            lines.append(f"- **{name}** ({finding.verdict}): {text}")
    lines += ["", "Verdicts: **holds** / **does not hold** when the interval of every quantity the claim needs lies "
              "on one side of its threshold; **inconclusive** when one straddles it or is not defined (one seed or "
              f"repeat; accuracy claims need {MIN_SEEDS} seeds); **not testable here** when this machine lacks what "
              "the claim needs (a simulator projection, labelled PROJECTION, is shown instead where one exists). "
              "Timing claims leave out runs measured under foreign load (`under_load` in the tables)."]
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


def verdicts(results: Path) -> dict[str, str]:
    """Claim name -> verdict on the tables under ``results``."""
    return {name: finding.verdict for name, finding in findings(results).items()}


__all__ = ["CLAIMS", "Claim", "Estimate", "FAILS", "Finding", "HOLDS", "INCONCLUSIVE", "MIN_SEEDS", "NOT_TESTABLE",
           "claim", "findings", "render", "split_under_load", "table_interval", "verdicts", "write_report"]
