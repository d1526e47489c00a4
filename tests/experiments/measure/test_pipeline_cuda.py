"""The CUDA pipeline measurement (experiments/measure/pipeline_cuda.py): the same path on the CPU, and what it says
without CUDA."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments import report
from experiments.measure import pipeline_cuda


def test_cuda_script_runs_the_same_path_on_cpu(tmp_path, capsys):
    status = pipeline_cuda.main(["--device", "cpu", "--preset", "tiny", "--batches", "2", "--batch-size", "20",
                                 "--samplers", "dense", "--seeds", "3", "--out", str(tmp_path / "runs"),
                                 "--results", str(tmp_path)])
    assert status == 0
    printed = capsys.readouterr().out
    assert "in_memory" in printed and "4T 2X q4/4 b16" in printed and "sync" in printed
    table = pd.read_csv(tmp_path / "pipeline_cuda.csv")
    assert len(table) == 9 and sorted(set(table["seed"])) == [0, 1, 2] and set(table["device"]) == {"cpu"}
    assert (table[table["system"] == "in_memory"]["time_ratio_vs_in_memory"] == 1.0).all()  # per seed
    # rows measured on the CPU test nothing about a GPU: the claim stays not testable with them
    table.assign(under_load=False).to_csv(tmp_path / "pipeline_cuda.csv", index=False)
    table.to_csv(tmp_path / "pipeline_speed.csv", index=False)
    claim = report.claims().get("pipeline-utilization")
    assert claim.evaluate(tmp_path).verdict == report.NOT_TESTABLE
    # where the rows were measured on a CUDA device, the claim is decided from them, over their seeds (the CPU
    # numbers relabelled: this test checks how the claim reads the table, not the machine or its load)
    table.assign(under_load=False, device="cuda:0").to_csv(tmp_path / "pipeline_cuda.csv", index=False)
    finding = claim.evaluate(tmp_path)
    assert finding.verdict != report.NOT_TESTABLE and "measured on cuda:0" in finding.setting
    assert "3 seeds" in finding.setting and "compute utilization" in finding.measured


def test_cuda_script_says_when_there_is_no_cuda(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert pipeline_cuda.main(["--device", "cuda"]) == pipeline_cuda.EXIT_NO_CUDA
    assert "CUDA is not available" in capsys.readouterr().err
