"""The DENSE-vs-naive experiment scripts run end to end on the tiny synthetic preset (seconds)."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from experiments.measure import dense_training_step, dense_vs_naive, dense_vs_naive_eval


def test_training_step_table(tmp_path, capsys):
    csv = tmp_path / "step.csv"
    assert dense_training_step.main(["--preset", "tiny", "--cache-dir", str(tmp_path / "data"), "--fanouts", "3", "2",
                                     "--batch-size", "16", "--hidden-dim", "8", "--repeats", "2", "--warmup", "1",
                                     "--csv", str(csv)]) == 0
    table = pd.read_csv(csv, index_col="sampler")
    assert list(table.index) == ["naive", "dense"]
    assert (table[["sample_ms", "gather_ms", "compute_ms", "step_ms", "sampled_edges", "block_edges"]] > 0).all().all()
    assert table.loc["naive", "naive/this step"] == 1.0
    assert "naive/this step" in capsys.readouterr().out


def test_training_step_needs_naive():
    with pytest.raises(SystemExit):
        dense_training_step.parse_args(["--samplers", "dense"])


def fake_runs(gap: float) -> pd.DataFrame:
    rows = [{"status": "completed", "dataset": dataset, "seed": seed, "sampler": sampler,
             dense_vs_naive.METRIC: 0.8 + 0.01 * seed - (gap if sampler == "dense" else 0.0)}
            for dataset in ("cora", "arxiv-like") for seed in range(3) for sampler in ("naive", "dense")]
    return pd.DataFrame(rows + [{"status": "failed", "dataset": "cora", "seed": 3, "sampler": "naive"}])


def test_accuracy_table_and_check(monkeypatch, capsys):
    table = dense_vs_naive.accuracy_table(fake_runs(0.005))
    assert list(table.index.get_level_values("seed")) == ["0", "1", "2", "mean"] * 2
    assert table.loc[("cora", "mean"), "naive"] == pytest.approx(0.81)
    assert table["dense - naive"].to_numpy() == pytest.approx(-0.005)
    for gap, status in ((0.005, 0), (0.02, 1)):
        monkeypatch.setattr(dense_vs_naive, "load_runs", lambda *_, gap=gap, **__: fake_runs(gap))
        assert dense_vs_naive.main(["unused"]) == status
    assert "differ by 0.0200" in capsys.readouterr().out


def test_eval_crosscheck(tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({
        "dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(tmp_path / "data")},
        "model": {"num_layers": 2, "hidden_dim": 8, "fanouts": [3, 3]},
        "training": {"batch_size": 64, "epochs": 1},
    }))
    csv = tmp_path / "eval.csv"
    assert dense_vs_naive_eval.main([str(config), "--seeds", "0", "--csv", str(csv)]) == 0
    table = pd.read_csv(csv, index_col=[0, 1])
    assert list(table.columns) == ["naive 3,3", "dense 3,3", "naive 25,25", "dense 25,25", "all"]
    assert len(table) == 4 and table.notna().all().all()
