"""The disk link-prediction experiment's tables, figure and COMET claim, from hand-made rows."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments import report
from experiments.figures.disk_lp import configuration, summary_table
from experiments.figures.disk_lp import plot_disk_lp


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
    ([0.248, 0.258, 0.249], [0.22, 0.23, 0.21], report.HOLDS),          # COMET within 0.01, BETA lower
    ([0.27, 0.28, 0.27], [0.24, 0.25, 0.24], report.HOLDS),             # COMET above in-memory keeps its accuracy
    ([0.248, 0.258, 0.249], [0.25, 0.256, 0.25], report.INCONCLUSIVE),  # BETA - COMET straddles 0
    ([0.20, 0.21, 0.20], [0.22, 0.23, 0.21], report.FAILS),             # COMET 0.05 below
    ([0.24, 0.26, 0.21], [0.20, 0.21, 0.19], report.INCONCLUSIVE),      # COMET's gap straddles -0.01
])
def test_comet_claim_verdicts(tmp_path, comet, beta, verdict):
    runs({"in_memory": [0.25, 0.26, 0.25], "comet p32 c8 l8": comet, "beta p32 c8": beta},
         {"in_memory": 1.0, "comet p32 c8 l8": 1.0, "beta p32 c8": 1.0}).to_csv(tmp_path / "disk_lp_runs.csv",
                                                                             index=False)
    finding = report.claims().get("comet-accuracy").evaluate(tmp_path)
    assert finding.verdict == verdict
    assert "in-memory 0.253 [" in finding.measured and "3 seed(s)" in finding.setting


def test_comet_claim_needs_three_seeds(tmp_path):
    runs({"in_memory": [0.25], "comet p32 c8 l8": [0.25], "beta p32 c8": [0.2]},
         {"in_memory": 1.0, "comet p32 c8 l8": 1.0, "beta p32 c8": 1.0}).to_csv(tmp_path / "disk_lp_runs.csv",
                                                                             index=False)
    finding = report.claims().get("comet-accuracy").evaluate(tmp_path)
    assert finding.verdict == report.INCONCLUSIVE and "1 seed(s); the claim needs 3" in finding.reason


def test_comet_claim_without_the_rows_is_not_testable(tmp_path):
    runs({"in_memory": [0.25]}, {"in_memory": 1.0}).to_csv(tmp_path / "disk_lp_runs.csv", index=False)
    assert report.claims().get("comet-accuracy").evaluate(tmp_path).verdict == report.NOT_TESTABLE


def test_figure_from_the_summary(tmp_path):
    table = summary_table(runs({"in_memory": [0.25, 0.26], "comet p32 c8 l8": [0.24, 0.25]},
                               {"in_memory": 1.0, "comet p32 c8 l8": 1.2}))
    table.to_csv(tmp_path / "disk_lp.csv", index=False)
    assert plot_disk_lp(tmp_path / "disk_lp.csv", tmp_path / "disk_lp.png").stat().st_size > 10_000


def _disk_nc_row(configuration: str, ratio: tuple[float, float, float], wait: tuple[float, float, float],
                 **extra) -> dict:
    """A disk row of disk_nc.csv whose time to target is ``ratio`` of in-memory's (3 seeds, all reached it)."""
    return {"dataset": "papers", "configuration": configuration, "system": "disk", "prefetch": True,
            "policy": configuration.split()[0],
            "buffer_capacity": 4, "num_partitions": 16, "warm_epochs": 3, "timed_runs": 3, "seeds": 3,
            "epochs": 5, "test_accuracy": 0.30, "time_ratio_vs_in_memory": ratio[0] * 0.9,
            "target_seeds": 3, "target_reached": 3, "epochs_to_target": 4.0, "time_to_target_pairs": 3,
            "time_to_target_ratio_vs_in_memory": ratio[0], "time_to_target_ratio_vs_in_memory_ci_low": ratio[1],
            "time_to_target_ratio_vs_in_memory_ci_high": ratio[2], "io_wait_fraction": wait[0],
            "io_wait_fraction_ci_low": wait[1], "io_wait_fraction_ci_high": wait[2], **extra}


def test_out_of_core_claim_shows_the_link_prediction_timing_beside_the_verdict(tmp_path):
    """The link-prediction timing runs have no accuracy target: their epoch times are shown, and decide nothing
    (time to target does)."""
    memory = {"dataset": "papers", "configuration": "in_memory", "system": "in_memory", "prefetch": True,
              "buffer_capacity": None, "num_partitions": None, "time_ratio_vs_in_memory": 1.0, "test_accuracy": 0.34}
    pd.DataFrame([memory, _disk_nc_row("sequential p16 c4", (3.0, 2.8, 3.2), (0.5, 0.45, 0.55))]).to_csv(
        tmp_path / "disk_nc.csv", index=False)
    finding = report.claims().get("disk-out-of-core").evaluate(tmp_path)
    assert finding.verdict == report.FAILS
    assert "papers sequential p16 c4: time to target x3.000 [2.800, 3.200] of in-memory (4.0 epochs); epoch " \
        "x2.700 [no interval: n=3], IO wait 50.0 [45.0, 55.0] %" in finding.measured
    timing = [{"model": "shallow+distmult", "configuration": c, "seed": 0, "epoch_time_s": t, "test_mrr": 0.25,
               "io_read_bytes": 2e6, "io_write_bytes": 1e6, "swaps": 78.0, "io_wait_fraction": w,
               "read_bandwidth_bytes_per_s": 5e8, "epoch_times_s": times}
              for c, t, w, times in (("in_memory", 10.0, float("nan"), [10.0, 10.2, 9.9]),
                                     ("comet p32 c8 l8", 9.0, 0.05, [9.0, 9.1, 8.9]))]
    summary_table(pd.DataFrame(timing)).to_csv(tmp_path / "disk_lp_timing.csv", index=False)
    finding = report.claims().get("disk-out-of-core").evaluate(tmp_path)
    assert finding.verdict == report.FAILS  # the node-classification time to target decides
    context = finding.measured.split("(not part of the verdict: ")[1]
    assert context.startswith("FB15k-237 shallow+distmult comet p32 c8 l8: epoch x0.897 [0.869, 0.926] of in-memory")


def test_out_of_core_claim_holds_when_the_deciding_sequential_configuration_reaches_the_target_in_time(tmp_path):
    pd.DataFrame([_disk_nc_row("sequential p16 c4", (1.1, 1.0, 1.2), (0.05, 0.03, 0.07)),
                  _disk_nc_row("dispersed p16 c4", (4.0, 3.5, 4.5), (0.8, 0.7, 0.9)),
                  _disk_nc_row("sequential p16 c4", (1.2, 1.0, 1.5), (0.05, 0.03, 0.07), under_load=True)]
                 ).to_csv(tmp_path / "disk_nc.csv", index=False)
    finding = report.claims().get("disk-out-of-core").evaluate(tmp_path)
    assert finding.verdict == report.HOLDS
    assert finding.excluded == "1 measured under foreign load, left out: sequential p16 c4"
