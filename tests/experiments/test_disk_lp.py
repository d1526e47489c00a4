"""The disk link-prediction experiment's tables, figure and COMET claim, from hand-made rows."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments import report
from experiments.disk_lp import configuration, summary_table
from experiments.figures import plot_disk_lp


def runs(mrr: dict[str, list[float]], times: dict[str, float]) -> pd.DataFrame:
    rows = []
    for config, values in mrr.items():
        for seed, value in enumerate(values):
            rows.append({"model": "shallow+distmult", "configuration": config, "policy": config.split()[0],
                         "seed": seed, "epoch_time_s": times[config], "test_mrr": value, "io_read_bytes": 2e6,
                         "io_write_bytes": 1e6, "swaps": 78.0, "io_wait_fraction": 0.05,
                         "read_bandwidth_bytes_per_s": 5e8})
    return pd.DataFrame(rows)


def test_configuration_labels():
    assert configuration("in_memory", {}) == "in_memory"
    assert configuration("disk", {"policy": "beta", "num_partitions": 32, "buffer_capacity": 8}) == "beta p32 c8"
    assert configuration("disk", {"policy": "comet", "num_partitions": 32, "buffer_capacity": 8,
                                  "fine_to_coarse_ratio": 4}) == "comet p32 c8 l8"


def test_summary_is_per_configuration_against_in_memory():
    table = summary_table(runs({"in_memory": [0.24, 0.26], "beta p32 c8": [0.20, 0.22]},
                               {"in_memory": 10.0, "beta p32 c8": 12.5})).set_index("configuration")
    assert table.loc["in_memory", "seeds"] == 2
    assert table.loc["beta p32 c8", "test_mrr_mean"] == pytest.approx(0.21)
    assert table.loc["beta p32 c8", "mrr_minus_in_memory"] == pytest.approx(-0.04)
    assert table.loc["beta p32 c8", "time_ratio_vs_in_memory"] == pytest.approx(1.25)
    assert table.loc["beta p32 c8", "policy"] == "beta"


@pytest.mark.parametrize("comet, beta, verdict", [
    (0.245, 0.22, report.HOLDS),      # COMET within 0.01, BETA lower
    (0.27, 0.24, report.HOLDS),       # COMET above in-memory keeps its accuracy
    (0.245, 0.25, report.PARTLY),     # COMET within 0.01, BETA not lower
    (0.20, 0.22, report.FAILS),       # COMET 0.05 below
])
def test_comet_claim_verdicts(tmp_path, comet, beta, verdict):
    table = summary_table(runs({"in_memory": [0.25], "comet p32 c8 l8": [comet], "beta p32 c8": [beta]},
                               {"in_memory": 1.0, "comet p32 c8 l8": 1.0, "beta p32 c8": 1.0}))
    table.to_csv(tmp_path / "disk_lp.csv", index=False)
    finding = report.CLAIMS.get("comet-accuracy").evaluate(tmp_path)
    assert finding.verdict == verdict
    assert "in-memory 0.2500" in finding.measured and "1 seed(s)" in finding.setting


def test_comet_claim_without_the_rows_is_not_measured(tmp_path):
    summary_table(runs({"in_memory": [0.25]}, {"in_memory": 1.0})).to_csv(tmp_path / "disk_lp.csv", index=False)
    assert report.CLAIMS.get("comet-accuracy").evaluate(tmp_path).verdict == report.MISSING


def test_figure_from_the_summary(tmp_path):
    table = summary_table(runs({"in_memory": [0.25, 0.26], "comet p32 c8 l8": [0.24, 0.25]},
                               {"in_memory": 1.0, "comet p32 c8 l8": 1.2}))
    table.to_csv(tmp_path / "disk_lp.csv", index=False)
    assert plot_disk_lp(tmp_path / "disk_lp.csv", tmp_path / "disk_lp.png").stat().st_size > 10_000


def test_out_of_core_claim_reads_the_link_prediction_timing_when_present(tmp_path):
    pd.DataFrame([
        {"dataset": "papers", "configuration": "in_memory", "system": "in_memory", "prefetch": True,
         "buffer_capacity": None, "num_partitions": None, "time_ratio_vs_in_memory": 1.0, "io_wait_fraction": None,
         "read_bandwidth_bytes_per_s": None, "dd_read_bandwidth_bytes_per_s": 7e8, "test_accuracy": 0.34},
        {"dataset": "papers", "configuration": "sequential p16 c4", "system": "disk", "prefetch": True,
         "buffer_capacity": 4, "num_partitions": 16, "time_ratio_vs_in_memory": 3.0, "io_wait_fraction": 0.5,
         "read_bandwidth_bytes_per_s": 6e8, "dd_read_bandwidth_bytes_per_s": 7e8, "test_accuracy": 0.30},
    ]).to_csv(tmp_path / "disk_nc.csv", index=False)
    assert report.CLAIMS.get("disk-out-of-core").evaluate(tmp_path).verdict == report.FAILS
    summary_table(runs({"in_memory": [0.25], "comet p32 c8 l8": [0.25]}, {"in_memory": 10.0, "comet p32 c8 l8": 9.0})
                  ).to_csv(tmp_path / "disk_lp_timing.csv", index=False)
    finding = report.CLAIMS.get("disk-out-of-core").evaluate(tmp_path)
    assert finding.verdict == report.PARTLY
    assert "FB15k-237 shallow+distmult comet p32 c8 l8: x0.90, IO wait 5.0 %" in finding.measured
