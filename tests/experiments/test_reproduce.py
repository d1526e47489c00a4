"""``gnnsuite reproduce`` and REPORT.md: job selection, one real job end to end, claims computed from tables."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments import report, reproduce
from suite.errors import ConfigError


def test_jobs_are_registered_in_order_and_selectable():
    names = [job.name for job in reproduce.plan(None)]
    assert names[:3] == ["sampling", "pipeline", "pipeline_validation"]
    assert [job.name for job in reproduce.plan(["pipeline", "sampling"])] == ["sampling", "pipeline"]
    with pytest.raises(ConfigError, match="--only: unknown figure 'nope'"):
        reproduce.plan(["nope"])
    with pytest.raises(ConfigError, match="mode"):
        reproduce.reproduce("medium")


def test_one_job_end_to_end_writes_its_outputs_and_the_report(tmp_path):
    times = reproduce.reproduce("quick", ["buffer_io"], root=tmp_path, data=tmp_path / "data")
    assert set(times) == {"buffer_io"}
    for name in reproduce.JOBS.get("buffer_io").outputs:
        assert (tmp_path / "results" / name).stat().st_size > 0
    text = (tmp_path / "results" / "REPORT.md").read_text()
    assert "| dense-speedup |" in text and "**not measured**" in text and "buffer_io.png" in text


def _sampling_table(ratios: dict[int, tuple[float, float]]) -> pd.DataFrame:
    rows = []
    for layers, (time_ratio, edge_ratio) in ratios.items():
        for sampler, t, e in (("naive", time_ratio, edge_ratio), ("dense", 1.0, 1.0)):
            rows.append({"setting": "papers", "dataset": "papers-like-s", "num_roots": 1000, "layers": layers,
                         "sampler": sampler, "status": "ok", "time_ratio_vs_dense": t, "edges_ratio_vs_dense": e,
                         "quick": False})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("ratios, verdict", [
    ({3: (1.2, 1.1), 4: (1.4, 1.3), 5: (1.9, 1.7)}, report.HOLDS),
    ({3: (1.2, 1.1), 4: (1.1, 1.3), 5: (1.9, 1.7)}, report.FAILS),   # speedup does not grow
    ({3: (1.2, 1.1), 4: (1.4, 1.3), 5: (1.6, 1.7)}, report.FAILS),   # less efficient per edge at 5 layers
])
def test_dense_claim_verdicts_follow_the_table(tmp_path, ratios, verdict):
    _sampling_table(ratios).to_csv(tmp_path / "sampling.csv", index=False)
    finding = report.CLAIMS.get("dense-speedup").evaluate(tmp_path)
    assert finding.verdict == verdict
    assert "1.20" in finding.measured


def test_missing_tables_are_not_measured(tmp_path):
    for item in report.CLAIMS.in_order():
        assert item.evaluate(tmp_path).verdict == report.MISSING


def _pyg_table(times: dict[str, tuple[float, float, float]], layers=(1, 2), status="ok") -> pd.DataFrame:
    """Sampling rows of DENSE and PyG: (median, min, max) seconds per batch of 1,000 edges, every layer count."""
    rows = []
    for count in layers:
        for sampler, (median, low, high) in times.items():
            rows.append({"setting": "papers", "dataset": "papers-like-s", "num_roots": 1000, "layers": count,
                         "sampler": sampler, "status": status if sampler == "pyg" else "ok",
                         "reason": "pyg-lib/torch-sparse not installed" if status != "ok" and sampler == "pyg"
                         else None, "time_s": median, "time_s_min": low, "time_s_max": high,
                         "sampled_edges": 1000, "backend": "torch_geometric.sampler.NeighborSampler (torch-sparse)",
                         "quick": False})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("times, verdict", [
    ({"dense": (1.0, 0.9, 1.1), "pyg": (3.0, 2.8, 3.3)}, report.HOLDS),          # DENSE's slowest beats PyG's best
    ({"dense": (1.0, 0.9, 2.9), "pyg": (3.0, 2.8, 3.3)}, "inconclusive"),       # the repeats' ranges overlap
    ({"dense": (3.0, 2.9, 3.1), "pyg": (1.0, 0.9, 1.1)}, report.FAILS),
])
def test_dense_vs_pyg_verdict_needs_separated_repeats(tmp_path, times, verdict):
    _pyg_table(times).to_csv(tmp_path / "sampling.csv", index=False)
    finding = report.CLAIMS.get("dense-vs-pyg").evaluate(tmp_path)
    assert finding.verdict == verdict
    assert f"1L x{times['pyg'][0] / times['dense'][0]:.2f}" in finding.measured


def test_dense_vs_pyg_not_measured_when_pyg_was_skipped(tmp_path):
    _pyg_table({"dense": (1.0, 0.9, 1.1), "pyg": (1.0, 1.0, 1.0)}, status="skipped").to_csv(
        tmp_path / "sampling.csv", index=False)
    finding = report.CLAIMS.get("dense-vs-pyg").evaluate(tmp_path)
    assert finding.verdict == report.MISSING and "pyg-lib/torch-sparse not installed" in finding.measured
