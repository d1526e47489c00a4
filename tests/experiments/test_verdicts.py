"""Every claim's verdict function can hold, fail and stay inconclusive (and, where its check has such a path, be
not testable), decided by :meth:`experiments.report.Claim.evaluate` from small hand-made tables written in the
format of the figure module that records them (its own ratio and summary functions where it has them).

The disk claims (disk-out-of-core, disk-accuracy, disk-cost) are tested with their figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from experiments import report
from experiments.report import FAILS, HOLDS, INCONCLUSIVE, NOT_TESTABLE


def evaluate(name: str, folder: Path) -> report.Finding:
    finding = report.claims().get(name).evaluate(folder)
    if finding.verdict == INCONCLUSIVE or finding.verdict == NOT_TESTABLE:
        assert finding.reason or finding.excluded, f"{name}: {finding.verdict} without saying why"
    return finding


# ---------------------------------------------------------------------------------------------- sampling.csv
DENSE_TIMES = [0.010 * (1 + 0.05 * (i % 3)) for i in range(8)]
"""DENSE's time per batch in each of 8 timed repeats (repeat r of every sampler on the same roots)."""


def times(ratio: float, jitter: float = 0.02, repeats: int = 8) -> list[float]:
    """A sampler's per-repeat times, ``ratio`` times DENSE's on the same roots, alternately ``jitter`` above and
    below."""
    return [d * ratio * (1 + jitter * (-1) ** i) for i, d in enumerate(DENSE_TIMES[:repeats])]


def write_sampling(folder: Path, ratios: dict[str, dict[int, float]], *, repeats: int = 8, edges: float = 1.0,
                   skipped: str = "", under_load: tuple[int, ...] = ()) -> None:
    """``sampling.csv`` as :mod:`experiments.figures.sampling` writes it: DENSE and each sampler of ``ratios``
    (sampler -> layers -> time / DENSE's) per layer count, ratios by its :func:`add_ratios`; a sampler's sampled
    edges are ``edges`` times DENSE's (naive: twice); ``skipped``: PyG's rows skipped with that reason;
    ``under_load``: layer counts measured under foreign load."""
    from experiments.figures.sampling import COLUMNS, add_ratios

    layers = sorted({count for by_layers in ratios.values() for count in by_layers})
    rows = []
    for count in layers:
        samplers = [("dense", 1.0, 1.0)] + [(s, by_layers[count], 2.0 if s == "naive" else edges)
                                            for s, by_layers in ratios.items() if count in by_layers]
        for sampler, ratio, edge_factor in samplers:
            status = "skipped" if sampler == "pyg" and skipped else "ok"
            measured = times(ratio, 0.0 if sampler == "dense" else 0.02, repeats) if status == "ok" else None
            rows.append({
                "setting": "papers", "dataset": "papers-like-s", "num_nodes": 100_000, "num_roots": 1000,
                "layers": count, "sampler": sampler, "status": status, "reason": skipped or None,
                "time_s": sorted(measured)[len(measured) // 2] if measured else None,
                "repeats": repeats if measured else None, "times_s": json.dumps(measured) if measured else None,
                "sampled_edges": int(100 * count * edge_factor) if measured else None,
                "foreign_cores": 0.5 if count in under_load else 0.0, "under_load": count in under_load,
                "backend": "torch_geometric.sampler.NeighborSampler (pyg-lib)" if sampler == "pyg" else None,
                "quick": False, "git_sha": "abc123"})
    add_ratios(pd.DataFrame(rows)).reindex(columns=COLUMNS).to_csv(folder / "sampling.csv", index=False)


@pytest.mark.parametrize("naive, options, verdict", [
    pytest.param({3: 1.3, 4: 1.6, 5: 2.0}, {}, HOLDS, id="faster-and-growing"),
    pytest.param({3: 0.8, 4: 1.6, 5: 2.0}, {}, FAILS, id="slower-at-3-layers"),
    pytest.param({3: 2.0, 4: 1.6, 5: 1.3}, {}, FAILS, id="advantage-shrinks"),
    pytest.param({3: 1.3, 4: 1.3, 5: 1.3}, {}, INCONCLUSIVE, id="growth-straddles-0"),
    pytest.param({3: 1.3, 4: 1.6, 5: 2.0}, {"repeats": 1}, INCONCLUSIVE, id="one-repeat"),
    pytest.param({3: 1.3, 4: 1.6}, {"under_load": (3, 4)}, INCONCLUSIVE, id="all-under-load"),
])
def test_dense_speedup(tmp_path, naive, options, verdict):
    write_sampling(tmp_path, {"naive": naive}, **options)
    finding = evaluate("dense-speedup", tmp_path)
    assert finding.verdict == verdict
    if verdict != INCONCLUSIVE:
        assert {e.name for e in finding.estimates} == {f"papers L{n} naive/DENSE time" for n in naive} | {
            "papers growth of naive/DENSE per layer"}


@pytest.mark.parametrize("pyg, options, verdict", [
    pytest.param({1: 3.0, 2: 2.0}, {}, HOLDS, id="pyg-slower-at-every-depth"),
    pytest.param({1: 3.0, 2: 0.5}, {}, FAILS, id="pyg-faster-at-2-layers"),
    pytest.param({1: 2.0}, {"edges": 3.0}, FAILS, id="pyg-slower-but-more-edges-per-second"),
    pytest.param({1: 3.0, 2: 1.0}, {}, INCONCLUSIVE, id="equal-at-2-layers"),
    pytest.param({1: 3.0, 2: 2.0}, {"repeats": 1}, INCONCLUSIVE, id="one-repeat"),
    pytest.param({1: 3.0, 2: 2.0}, {"skipped": "pyg-lib/torch-sparse not installed"}, NOT_TESTABLE,
                 id="pyg-skipped"),
])
def test_dense_vs_pyg(tmp_path, pyg, options, verdict):
    write_sampling(tmp_path, {"pyg": pyg}, **options)
    finding = evaluate("dense-vs-pyg", tmp_path)
    assert finding.verdict == verdict
    if verdict == NOT_TESTABLE:
        assert "pyg-lib/torch-sparse not installed" in finding.reason


# ---------------------------------------------------------------------------------------------- pipeline_*.csv
PIPELINED = "4T 2X q4/4 b16"


def write_pipeline_speed(folder: Path, name: str, device: str, utilization: list[float],
                         ratio: list[float]) -> None:
    """``name`` (``pipeline_speed.csv`` / ``pipeline_cuda.csv``) as :func:`experiments.pipeline_runs.speed_table`
    writes it: per seed, in-memory, sync and the default pipeline on ``device``; the pipeline's compute
    utilization and epoch time / in-memory's per seed from ``utilization`` and ``ratio``."""
    rows = []
    for seed, (busy, r) in enumerate(zip(utilization, ratio)):
        base = 10.0 * (1 + 0.02 * seed)
        for system, config, epoch, share in (("in_memory", "in_memory", base, 0.97),
                                             ("pipelined", "sync", 1.2 * base, 0.80),
                                             ("pipelined", PIPELINED, r * base, busy)):
            rows.append({"dataset": "arxiv-like", "sampler": "dense", "system": system, "configuration": config,
                         "epoch_time_s": epoch, "examples": 60_000, "examples_per_s": 60_000 / epoch,
                         "busy_compute_s": share * epoch, "compute_utilization": share,
                         "pipeline_efficiency": 1.1 if system == "pipelined" else None,
                         "bottleneck_stage": "compute", "staleness_mean": 0.0, "staleness_max": 0,
                         "device": device, "foreign_cores": 0.0, "under_load": False,
                         "run_id": f"{config}-{seed}", "seed": seed, "git_sha": "abc123",
                         "ratio_baseline": "in_memory/dense", "time_ratio_vs_in_memory": epoch / base,
                         "status": "ok", "reason": "", "gpu_utilization": share if device != "cpu" else None})
    pd.DataFrame(rows).to_csv(folder / name, index=False)


@pytest.mark.parametrize("device, utilization, ratio, verdict", [
    pytest.param("cuda:0", [0.95, 0.96, 0.97], [0.60, 0.62, 0.61], HOLDS, id="busy-and-faster"),
    pytest.param("cuda:0", [0.50, 0.52, 0.55], [0.60, 0.62, 0.61], FAILS, id="device-idle-half-the-time"),
    pytest.param("cuda:0", [0.95, 0.96, 0.97], [1.30, 1.32, 1.31], FAILS, id="slower-than-in-memory"),
    pytest.param("cuda:0", [0.85, 0.95, 0.93], [0.60, 0.62, 0.61], INCONCLUSIVE, id="utilization-straddles-0.9"),
    pytest.param("cuda:0", [0.95], [0.60], INCONCLUSIVE, id="one-seed"),
    pytest.param("cpu", [0.95, 0.96, 0.97], [0.60, 0.62, 0.61], NOT_TESTABLE, id="measured-on-the-cpu"),
    pytest.param(None, [0.95, 0.96, 0.97], [0.60, 0.62, 0.61], NOT_TESTABLE, id="no-cuda-table"),
])
def test_pipeline_utilization(tmp_path, device, utilization, ratio, verdict):
    write_pipeline_speed(tmp_path, "pipeline_speed.csv", "cpu", utilization, ratio)
    if device is not None:
        write_pipeline_speed(tmp_path, "pipeline_cuda.csv", device, utilization, ratio)
    finding = evaluate("pipeline-utilization", tmp_path)
    assert finding.verdict == verdict
    if verdict == NOT_TESTABLE:
        assert "no accelerator" in finding.reason
    else:
        assert f"measured on {device}" in finding.setting


def test_pipeline_utilization_names_the_gpu_and_shows_nvml_as_context(tmp_path):
    write_pipeline_speed(tmp_path, "pipeline_speed.csv", "cpu", [0.95] * 3, [0.6] * 3)
    write_pipeline_speed(tmp_path, "pipeline_cuda.csv", "cuda", [0.95, 0.96, 0.97], [0.60, 0.62, 0.61])
    table = pd.read_csv(tmp_path / "pipeline_cuda.csv")
    table.assign(device_name="NVIDIA H200").to_csv(tmp_path / "pipeline_cuda.csv", index=False)
    finding = evaluate("pipeline-utilization", tmp_path)
    assert finding.verdict == HOLDS and "measured on cuda (NVIDIA H200)" in finding.setting
    assert "NVML GPU busy 0.96 over the whole run" in finding.measured  # the pipelined runs' mean, not a verdict


def write_pipeline_accuracy(folder: Path, gaps: dict[str, list[float]], *, staleness: int = 12,
                            sync: bool = True) -> None:
    """``pipeline_accuracy.csv`` as :func:`experiments.figures.pipeline_speed.accuracy_table` writes it: sync
    (unless not ``sync``) and each configuration of ``gaps`` (its accuracy - sync's, per seed)."""
    base = [0.70, 0.72, 0.71]
    configurations = ({"sync": [0.0] * len(next(iter(gaps.values())))} if sync else {}) | gaps
    rows = [{"dataset": "arxiv-like", "sampler": "dense", "configuration": config, "seed": seed,
             "test_accuracy": base[seed] + gap, "valid_accuracy": base[seed] + gap + 0.01,
             "staleness_mean": 0.0 if config == "sync" else staleness / 2,
             "staleness_max": 0 if config == "sync" else staleness, "train_time_s": 30.0,
             "run_id": f"{config}-{seed}"}
            for config, values in configurations.items() for seed, gap in enumerate(values)]
    pd.DataFrame(rows).to_csv(folder / "pipeline_accuracy.csv", index=False)


@pytest.mark.parametrize("gaps, options, verdict", [
    pytest.param({"b16 ooo": [-0.002, 0.001, -0.001]}, {}, HOLDS, id="within-a-point"),
    pytest.param({"b16 ooo": [-0.05, -0.04, -0.06]}, {}, FAILS, id="five-points-lower"),
    pytest.param({"b16": [0.0, 0.0, 0.0], "b16 ooo": [-0.05, -0.04, -0.06]}, {}, FAILS,
                 id="an-identical-check-does-not-outvote"),
    pytest.param({"b16 ooo": [-0.03, 0.01, -0.02]}, {}, INCONCLUSIVE, id="straddles-minus-0.01"),
    pytest.param({"b16 ooo": [-0.002, 0.001]}, {}, INCONCLUSIVE, id="two-seeds"),
    pytest.param({"b16": [0.0, 0.0, 0.0]}, {}, INCONCLUSIVE, id="only-identical-by-construction"),
    pytest.param({"b16 ooo": [-0.05, -0.04, -0.06]}, {"staleness": 0}, INCONCLUSIVE, id="no-staleness-recorded"),
    pytest.param({"b16 ooo": [-0.002, 0.001, -0.001]}, {"sync": False}, NOT_TESTABLE, id="no-sync-run"),
])
def test_async_accuracy(tmp_path, gaps, options, verdict):
    write_pipeline_accuracy(tmp_path, gaps, **options)
    assert evaluate("async-accuracy", tmp_path).verdict == verdict


def write_pipeline_validation(folder: Path, time_errors: list[float], points: list[float],
                              under_load: bool = False) -> None:
    """``pipeline_validation.csv`` as :func:`experiments.figures.pipeline_validation.predict` writes it: one row
    per held-out run with its relative epoch-time error and utilization error in points."""
    rows = []
    for i, (error, point) in enumerate(zip(time_errors, points)):
        measured, utilization = 10.0 + i, 0.6
        rows.append({"dataset": "arxiv-like", "sampler": "dense", "configuration": f"{i + 1}T 1X q4/4 b{2 ** i}",
                     "calibrated_on": "sync", "batches": 60, "measured_epoch_time_s": measured,
                     "predicted_epoch_time_s": measured * (1 + error), "epoch_time_error": error,
                     "measured_compute_utilization": utilization,
                     "predicted_compute_utilization": utilization + point / 100, "utilization_error_points": point,
                     "predicted_bottleneck": "compute", "measured_bottleneck": "compute",
                     "predicted_staleness_max": 2, "measured_staleness_max": 2, "run_id": f"run-{i}",
                     "calibration_run": "sync-0", "contention": "none (max-min sharing only)",
                     "predicted_epoch_time_s_max_min": measured * (1 + error),
                     "epoch_time_error_max_min": error,
                     "predicted_compute_utilization_max_min": utilization + point / 100,
                     "utilization_error_points_max_min": point, "foreign_cores": 0.5 if under_load else 0.0,
                     "under_load": under_load})
    pd.DataFrame(rows).to_csv(folder / "pipeline_validation.csv", index=False)


SMALL_TIME_ERRORS = [0.02, -0.03, 0.04, 0.01, -0.02, 0.015, -0.01, 0.0]
SMALL_POINTS = [1.0, -2.0, 1.5, 0.5, -1.0, 1.0, -0.5, 0.0]


@pytest.mark.parametrize("time_errors, points, under_load, verdict", [
    pytest.param(SMALL_TIME_ERRORS, SMALL_POINTS, False, HOLDS, id="within-5-percent-unbiased-and-5-points"),
    pytest.param([0.30, -0.25, 0.35, 0.28, 0.40, 0.3, -0.3, 0.3], SMALL_POINTS, False, FAILS,
                 id="epoch-time-30-percent-off"),
    pytest.param([0.035, 0.04, 0.045, 0.04, 0.038, 0.042, 0.036, 0.044], SMALL_POINTS, False, FAILS,
                 id="small-errors-all-one-way"),
    pytest.param(SMALL_TIME_ERRORS, [10.0, -12.0, 9.0, 11.0, 15.0, 10.0, 12.0, 9.0], False, FAILS,
                 id="utilization-10-points-off"),
    pytest.param([0.03, -0.04, 0.05, -0.06, 0.07, -0.03, 0.04, -0.05, 0.06, -0.12], SMALL_POINTS + [0.0, 0.0],
                 False, INCONCLUSIVE, id="time-error-straddles"),
    pytest.param(SMALL_TIME_ERRORS[:2], SMALL_POINTS[:2], False, INCONCLUSIVE, id="two-held-out-runs"),
    pytest.param(SMALL_TIME_ERRORS, SMALL_POINTS, True, INCONCLUSIVE, id="all-under-load"),
])
def test_simulator_predicts(tmp_path, time_errors, points, under_load, verdict):
    write_pipeline_validation(tmp_path, time_errors, points, under_load)
    finding = evaluate("simulator-predicts", tmp_path)
    assert finding.verdict == verdict
    assert f"over {0 if under_load else len(time_errors)} held-out runs" in finding.measured


# ---------------------------------------------------------------------------------------------- disk_lp_runs.csv
COMET, BETA, MATCHED = "comet p32 c8 l8", "beta p32 c8", "in_memory subset0.25 b10"


def write_disk_lp_runs(folder: Path, mrr: dict[str, list[float]]) -> None:
    """``disk_lp_runs.csv`` as :func:`experiments.figures.disk_lp.run_table` writes it: one shallow-DistMult run
    per configuration of ``mrr`` and seed, with that test MRR; ``in_memory`` is written twice, as the global and as
    the matched baseline (negatives from a quarter of the nodes, as COMET's buffer), one recipe throughout."""
    rows = []
    configurations = {}
    for config, values in mrr.items():  # the in-memory runs stand for both baselines: global and matched
        configurations.update({"in_memory": values, MATCHED: values} if config == "in_memory" else {config: values})
    for config, values in configurations.items():
        disk = not config.startswith("in_memory")
        for seed, value in enumerate(values):
            rows.append({"model": "shallow+distmult", "configuration": config, "learning_rate": 0.1,
                         "num_chunks": 10, "negatives_per_positive": 500, "degree_fraction": 0.0,
                         "negatives_node_fraction": 0.25 if disk or config == MATCHED else 1.0,
                         "system": "disk" if disk else "in_memory", "policy": config.split()[0], "seed": seed,
                         "epochs": 5, "epoch_time_s": 12.0 if disk else 10.0, "states": 8.0 if disk else None,
                         "swaps": 78.0 if disk else None, "io_read_bytes": 2e6 if disk else None,
                         "io_write_bytes": 1e6 if disk else None, "disk_read_bytes": None,
                         "disk_write_bytes": None, "io_wait_s": 0.6 if disk else None,
                         "io_wait_fraction": 0.05 if disk else None,
                         "read_bandwidth_bytes_per_s": 5e8 if disk else None, "valid_mrr": value + 0.002,
                         "test_mrr": value, "test_hits@10": 2 * value, "peak_rss_bytes": 5e8,
                         "epoch_times_s": json.dumps([12.0 if disk else 10.0] * 4), "foreign_cores": 0.0,
                         "under_load": False, "run_id": f"{config}-{seed}", "git_sha": "abc123"})
    pd.DataFrame(rows).to_csv(folder / "disk_lp_runs.csv", index=False)


IN_MEMORY = [0.25, 0.26, 0.25]


@pytest.mark.parametrize("mrr, verdict", [
    pytest.param({"in_memory": IN_MEMORY, COMET: [0.248, 0.258, 0.249], BETA: [0.22, 0.23, 0.21]}, HOLDS,
                 id="comet-within-0.01-beta-lower"),
    pytest.param({"in_memory": IN_MEMORY, COMET: [0.20, 0.21, 0.20], BETA: [0.18, 0.19, 0.17]}, FAILS,
                 id="comet-0.05-below-in-memory"),
    pytest.param({"in_memory": IN_MEMORY, COMET: [0.248, 0.258, 0.249], BETA: [0.27, 0.28, 0.27]}, FAILS,
                 id="beta-above-comet"),
    pytest.param({"in_memory": IN_MEMORY, COMET: [0.24, 0.26, 0.21], BETA: [0.20, 0.21, 0.19]}, INCONCLUSIVE,
                 id="comet-gap-straddles-minus-0.01"),
    pytest.param({"in_memory": IN_MEMORY[:2], COMET: [0.248, 0.258], BETA: [0.22, 0.23]}, INCONCLUSIVE,
                 id="two-seeds"),
    pytest.param({"in_memory": IN_MEMORY, COMET: [0.248, 0.258, 0.249]}, NOT_TESTABLE, id="no-beta-run"),
])
def test_comet_accuracy(tmp_path, mrr, verdict):
    write_disk_lp_runs(tmp_path, mrr)
    finding = evaluate("comet-accuracy", tmp_path)
    assert finding.verdict == verdict
    if verdict != NOT_TESTABLE:
        assert f"{len(mrr['in_memory'])} seed(s)" in finding.setting


# ---------------------------------------------------------------------------------------------- peers table
def write_link_prediction_peers(folder: Path, speed: list[float], mrr_gap: float = 0.0, *, suite_threads=(1,),
                                pbg_threads=(1,), pbg_skipped: bool = False) -> None:
    """``link_prediction_peers.csv`` from run rows by the figure's own
    :func:`experiments.figures.link_prediction_peers.summary_table`: per seed, the suite at ``speed[seed]`` times
    PBG p=1's training triples/s and ``mrr_gap`` from its MRR, at each of ``suite_threads``; PBG p=1 at
    ``pbg_threads`` (``pbg_skipped``: not installed)."""
    from experiments.figures.link_prediction_peers import summary_table

    def run(configuration, system, label, threads, seed, triples_per_s, mrr):
        return {"configuration": configuration, "system": system, "label": label, "threads": threads,
                "seed": seed, "epochs": 5, "status": "ok", "reason": "", "epoch_time_s": 272_115 / triples_per_s,
                "triples_per_s": triples_per_s, "test_mrr": mrr, "test_hits@10": 2 * mrr, "under_load": False,
                "foreign_cores": 0.0}

    rows = []
    for seed, ratio in enumerate(speed):
        pbg_speed, pbg_mrr = 20_000.0 * (1 + 0.03 * seed), 0.25 + 0.004 * seed
        rows += [run("suite", "suite", "suite (in-memory)", t, seed, ratio * pbg_speed, pbg_mrr + mrr_gap)
                 for t in suite_threads]
        rows += [run("pbg-p1", "pbg", "PBG p=1", t, seed, pbg_speed, pbg_mrr) for t in pbg_threads]
    runs = pd.DataFrame(rows)
    if pbg_skipped:
        runs.loc[runs["system"] == "pbg", "status"] = "skipped"
        runs.loc[runs["system"] == "pbg", "reason"] = "PyTorch-BigGraph not installed (make peers)"
    summary_table(runs).to_csv(folder / "link_prediction_peers.csv", index=False)


@pytest.mark.parametrize("speed, mrr_gap, options, verdict", [
    pytest.param([2.0, 2.1, 1.9], 0.0, {}, HOLDS, id="twice-as-fast-same-mrr"),
    pytest.param([1.0, 1.05, 0.95], 0.0, {}, FAILS, id="as-fast-as-pbg"),
    pytest.param([2.0, 2.1, 1.9], -0.05, {}, FAILS, id="fast-but-mrr-0.05-lower"),
    pytest.param([1.2, 1.9, 1.5], 0.0, {}, INCONCLUSIVE, id="speed-straddles-1.5"),
    pytest.param([2.0], 0.0, {}, INCONCLUSIVE, id="one-seed"),
    pytest.param([2.0, 2.1, 1.9], 0.0, {"pbg_skipped": True}, NOT_TESTABLE, id="pbg-not-installed"),
    pytest.param([2.0, 2.1, 1.9], 0.0, {"suite_threads": (1, 2), "pbg_threads": (2,)}, HOLDS,
                 id="pbg-at-2-threads-only"),
])
def test_lp_vs_pbg(tmp_path, speed, mrr_gap, options, verdict):
    write_link_prediction_peers(tmp_path, speed, mrr_gap, **options)
    finding = evaluate("lp-vs-pbg", tmp_path)
    assert finding.verdict == verdict
    if options.get("pbg_threads") == (2,):  # the suite's 1-thread runs have nothing to be compared with
        assert "2 thread(s): suite (in-memory)" in finding.measured and "1 thread(s)" not in finding.measured
        assert finding.excluded.startswith("suite runs at 1 thread(s) left out: no PBG p=1 run")


def test_simulator_predicts_reports_the_configuration_means_beside_the_runs(tmp_path):
    """Two repeats of each configuration whose errors cancel: every run is 10 % off (the verdict, on the runs, does
    not hold), each configuration's mean prediction is exact, and the finding says both."""
    from experiments.figures.pipeline_validation import run_to_run_deviation

    write_pipeline_validation(tmp_path, [0.1, -0.1] * 6, [0.5] * 12)
    table = pd.read_csv(tmp_path / "pipeline_validation.csv")
    table["configuration"] = [f"c{i // 2}" for i in range(len(table))]
    table["measured_epoch_time_s"] = 10.0
    table["predicted_epoch_time_s"] = table["measured_epoch_time_s"] * (1 + table["epoch_time_error"])
    table["repeats"], table["run_to_run_deviation"] = run_to_run_deviation(table)
    table.to_csv(tmp_path / "pipeline_validation.csv", index=False)
    finding = evaluate("simulator-predicts", tmp_path)
    assert finding.verdict == FAILS
    assert "repeats (6 configurations): median absolute 0.0 [0.0, 0.0] %" in finding.measured
