"""The memory estimate's tabulation over recorded runs (experiments/measure/memory_estimate.py --from-runs)."""

import json

import pytest

from experiments.measure.memory_estimate import main, rows_from_runs


def write_summary(folder, name, estimate_mib, measured_mib, runtime_mib=100, status="completed"):
    run = folder / name
    run.mkdir(parents=True)
    summary = {"status": status, "system": "disk", "task": "node_classification", "dataset_info": {"num_nodes": 300},
               "memory_estimate": {"peak_bytes": estimate_mib * 2**20, "peak_phase": "training",
                                   "runtime_bytes": runtime_mib * 2**20},
               "peak_rss_bytes": measured_mib * 2**20}
    (run / "summary.json").write_text(json.dumps(summary))


def test_rows_from_runs_read_every_completed_run_with_both_values(tmp_path):
    write_summary(tmp_path / "grid-a", "run-1", 300, 200)          # +50 %, above the runtime +100 %
    write_summary(tmp_path / "grid-b", "run-2", 180, 200)          # -10 %
    write_summary(tmp_path / "grid-b", "run-3", 999, 200, status="failed")
    rows = rows_from_runs([tmp_path / "grid-a", tmp_path / "grid-b"])
    assert [row["case"] for row in rows] == ["run-1", "run-2"]
    assert rows[0]["relative_error"] == pytest.approx(0.5)
    assert rows[0]["above_runtime_error"] == pytest.approx(1.0)
    assert rows[1]["relative_error"] == pytest.approx(-0.1)


def test_from_runs_prints_median_and_worst_and_refuses_an_empty_folder(tmp_path, capsys):
    write_summary(tmp_path, "run-1", 300, 200)
    write_summary(tmp_path, "run-2", 180, 200)
    write_summary(tmp_path, "run-3", 210, 200)
    assert main(["--from-runs", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "over 3 runs" in printed and "median 10.0%, worst 50.0%" in printed
    (tmp_path / "empty").mkdir()
    assert main(["--from-runs", str(tmp_path / "empty")]) == 2



def test_a_failed_case_is_listed_and_the_others_still_summarized(tmp_path, monkeypatch, capsys):
    from experiments.measure import memory_estimate

    tiny = memory_estimate.CASES["in_memory-nc-tiny"]
    broken = {**tiny, "dataset": {"name": "no-such-dataset"}}
    monkeypatch.setattr(memory_estimate, "CASES", {"small": tiny, "broken": broken})
    assert main(["--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "no-such-dataset" in printed and "over 1 runs" in printed
