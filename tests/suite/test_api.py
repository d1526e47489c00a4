"""The Python API (``import suite``), ``gnnsuite eval`` / ``predict`` / ``export``, and TensorBoard tracking, on real
runs of the tiny synthetic store."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import suite
from suite.checkpoint import checkpoint_path, load_checkpoint
from suite.cli import main
from suite.errors import DataError
from suite.recorder import read_records


def node_spec(cache_dir: Path, system: str = "in_memory", **options) -> dict:
    return {"name": f"api-{system}", "dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(cache_dir)},
            "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 16, "fanouts": [5, 5]},
            "system": {"name": system, "options": {"compute_threads": 1, **options}},
            "training": {"batch_size": 32, "epochs": 3}, "evaluation": {"batch_size": 64}, "seed": 2}


def link_spec(cache_dir: Path, encoder: str = "shallow") -> dict:
    layers = {"shallow": {"num_layers": 0, "fanouts": []}, "graphsage": {"num_layers": 1, "fanouts": [4]}}[encoder]
    return {"name": f"api-lp-{encoder}",
            "dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(cache_dir)},
            "model": {"encoder": encoder, **layers, "hidden_dim": 16, "decoder": "distmult", "embedding_dim": 8,
                      "learnable_embeddings": True},
            "system": {"name": "in_memory", "options": {"compute_threads": 1}},
            "training": {"task": "link_prediction", "batch_size": 128, "epochs": 2,
                         "negatives": {"num_chunks": 2, "negatives_per_positive": 16}},
            "evaluation": {"batch_size": 50}, "seed": 4}


@pytest.fixture(scope="module")
def node_run(cache_dir, tmp_path_factory) -> suite.Run:
    return suite.run(node_spec(cache_dir), out=tmp_path_factory.mktemp("api-node"))


@pytest.fixture(scope="module")
def link_run(cache_dir, tmp_path_factory) -> suite.Run:
    return suite.run(link_spec(cache_dir), out=tmp_path_factory.mktemp("api-link"))


def test_run_returns_the_run_and_its_tables(node_run, cache_dir):
    assert node_run.status == "completed" and node_run.run_dir.is_dir()
    assert node_run.metrics["main"] == "accuracy"
    assert list(node_run.epochs()["epoch"]) == [0, 1, 2]
    assert set(node_run.evals()["split"]) == {"valid", "test"}
    table = suite.load_runs(node_run.run_dir.parent)
    assert list(table["run_id"]) == [node_run.run_id]
    again = suite.run(node_spec(cache_dir), out=node_run.run_dir.parent)  # complete: not repeated
    assert again.summary.get("skipped") and again.run_id == node_run.run_id
    store = suite.open_dataset("synthetic", preset="tiny", cache_dir=str(cache_dir))
    assert store.num_nodes == node_run.summary["dataset_info"]["num_nodes"]
    assert suite.open_dataset(store.path).num_nodes == store.num_nodes


def test_run_with_a_path_and_overrides(cache_dir, tmp_path):
    import yaml

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(node_spec(cache_dir)))
    result = suite.run(path, overrides=["training.epochs=1", "evaluation.splits=[]"], out=tmp_path / "out")
    assert result.status == "completed" and result.summary["epochs"] == 1


def test_run_grid_returns_one_run_per_point(cache_dir, tmp_path):
    grid = {"base": {**node_spec(cache_dir), "training": {"batch_size": 32, "epochs": 1}},
            "axes": {"seed": [0, 1]}}
    runs = suite.run_grid(grid, out=tmp_path)
    assert [r.status for r in runs] == ["completed", "completed"]
    assert len(suite.load_runs(tmp_path)) == 2 and len(suite.load_evals(tmp_path)) == 4


@pytest.mark.parametrize("system, options", [("in_memory", {}), ("pipelined", {"sync": True}),
                                             ("disk", {"num_partitions": 4, "buffer_capacity": 2})])
def test_eval_reproduces_the_recorded_test_metric_exactly(cache_dir, tmp_path, system, options):
    run = suite.run(node_spec(cache_dir, system, **options), out=tmp_path)
    model = suite.load_model(run.run_dir)
    assert model.evaluate("test") == run.metrics["test"]
    assert model.evaluate("valid") == run.metrics["valid"]


def test_cli_eval_says_equal_to_the_recorded_metric(link_run, capsys):
    assert main(["eval", str(link_run.run_dir), "--split", "test", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["equal_to_recorded"] is True
    assert result["metrics"]["mrr"] == link_run.metrics["test"]["mrr"]
    assert result["metrics"] == link_run.metrics["test"]


def test_results_show_mrr_for_link_prediction(link_run, capsys):
    assert main(["results", str(link_run.run_dir.parent)]) == 0
    out = capsys.readouterr().out
    assert "metrics.test.mrr" in out and "metrics.test.accuracy" not in out


def test_eval_with_changed_evaluation_settings(node_run, capsys):
    assert main(["eval", str(node_run.run_dir), "--set", "evaluation.fanouts=[-1,-1]", "--json"]) == 0
    assert "accuracy" in json.loads(capsys.readouterr().out)["metrics"]


@pytest.mark.parametrize("fmt", ["npy", "parquet", "csv"])
def test_export_reload_round_trip_reproduces_the_ranking(link_run, tmp_path, fmt):
    """Exported embeddings and relation parameters, read back from the file, rank the test triples exactly as the
    run's evaluation did (shallow encoder: the representations are the embeddings)."""
    from systems.tasks.link_prediction import known_triples, rank_triples

    assert main(["export", str(link_run.run_dir), "--what", "embeddings", "--format", fmt,
                 "--out", str(tmp_path / "z")]) == 0
    assert main(["export", str(link_run.run_dir), "--what", "relations", "--out", str(tmp_path / f"r.{fmt}")]) == 0
    z, relations = (_read_matrix(tmp_path / f"{name}.{fmt}") for name in ("z", "r"))
    saved = load_checkpoint(checkpoint_path(link_run.run_dir))["task"]["embeddings"]["weight"]
    np.testing.assert_allclose(z, saved.numpy(), rtol=0, atol=0 if fmt != "csv" else 1e-7)
    model = suite.load_model(link_run.run_dir)
    decoder = model.model.decoder
    with torch.no_grad():
        decoder.relations.copy_(torch.from_numpy(relations.copy()))
    store = model.store
    spec = model.spec
    metrics = rank_triples(decoder, torch.from_numpy(z), store.edges("test"), known_triples(store),
                           batch_size=spec.evaluation.batch_size, filtered=spec.evaluation.filtered)
    expected = link_run.metrics["test"]
    if fmt == "csv":  # decimal text: equal to 7 digits
        assert metrics["mrr"] == pytest.approx(expected["mrr"], abs=1e-6)
    else:
        assert metrics == expected


def _read_matrix(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path)
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    assert frame.columns[0] in ("node", "relation") and list(frame.iloc[:, 0]) == list(range(len(frame)))
    return frame.iloc[:, 1:].to_numpy(dtype=np.float32)


def test_export_encoded_nodes_and_predictions_of_node_classification(node_run, tmp_path):
    assert main(["export", str(node_run.run_dir), "--what", "encoded-nodes", "--out", str(tmp_path / "z.npy")]) == 0
    assert main(["export", str(node_run.run_dir), "--what", "predictions", "--out", str(tmp_path / "p.parquet")]) == 0
    logits = np.load(tmp_path / "z.npy")
    predictions = pd.read_parquet(tmp_path / "p.parquet")
    assert logits.shape == (node_run.summary["dataset_info"]["num_nodes"], 4)
    assert (predictions["predicted"].to_numpy() == logits.argmax(1)).all()
    probabilities = predictions[[c for c in predictions.columns if c.startswith("p") and c[1:].isdigit()]]
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)


def test_predict_nodes_and_triples(node_run, link_run, tmp_path):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("node\n3\n0\n7\n")
    assert main(["predict", str(node_run.run_dir), "--nodes", str(nodes), "--out", str(tmp_path / "p.csv")]) == 0
    table = pd.read_csv(tmp_path / "p.csv")
    assert list(table["node"]) == [3, 0, 7]
    exported = tmp_path / "all.npy"
    assert main(["export", str(node_run.run_dir), "--what", "predictions", "--out", str(exported)]) == 0
    assert list(table["predicted"]) == list(np.load(exported)[[3, 0, 7], 0].astype(int))

    model = suite.load_model(link_run.run_dir)
    test = model.store.edges("test").to(torch.int64)
    np.save(tmp_path / "triples.npy", test.numpy())
    assert main(["predict", str(link_run.run_dir), "--triples", str(tmp_path / "triples.npy"), "--top-k", "3",
                 "--out", str(tmp_path / "t.parquet")]) == 0
    scored = pd.read_parquet(tmp_path / "t.parquet")
    assert len(scored) == len(test) and len(json.loads(scored["top_tails"].iloc[0])) == 3
    # the filtered ranks of both sides give the recorded filtered MRR
    reciprocal = np.concatenate([1 / scored["tail_rank"].to_numpy(), 1 / scored["head_rank"].to_numpy()])
    assert reciprocal.mean() == pytest.approx(link_run.metrics["test"]["filtered_mrr"], rel=1e-9)


def test_bad_inputs_are_one_line_errors(node_run, tmp_path, capsys):
    def fails(argv, *fragments):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and all(f in err[0] for f in fragments), err

    fails(["eval", str(tmp_path)], "config.yaml")
    fails(["eval", str(node_run.run_dir), "--set", "training.epochs=9"], "evaluation.")
    fails(["export", str(node_run.run_dir), "--what", "embeddings", "--out", str(tmp_path / "e.npy")],
          "learnable embeddings")
    fails(["export", str(node_run.run_dir), "--what", "encoded-nodes", "--out", str(tmp_path / "e.txt")], ".txt")
    nodes = tmp_path / "bad.csv"
    nodes.write_text("1\n999999\n")
    fails(["predict", str(node_run.run_dir), "--nodes", str(nodes), "--out", str(tmp_path / "p.csv")], "999999")
    assert not (tmp_path / "p.csv").exists() and not (tmp_path / "e.txt").exists()
    nodes.write_text("1\nx\n")
    fails(["predict", str(node_run.run_dir), "--nodes", str(nodes), "--out", str(tmp_path / "p.csv")], str(nodes))


def test_tensorboard_event_file_reads_back(cache_dir, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = suite.run(node_spec(cache_dir), out=tmp_path, log_to=["tensorboard"])
    accumulator = EventAccumulator(str(run.run_dir / "tensorboard"))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    assert {"train/loss", "train/examples_per_s", "stage_busy_s/compute", "valid/accuracy", "test/accuracy"} <= tags
    losses = [event.value for event in accumulator.Scalars("train/loss")]
    assert [event.step for event in accumulator.Scalars("train/loss")] == [0, 1, 2]
    np.testing.assert_allclose(losses, run.summary["loss"], rtol=1e-6)
    assert accumulator.Scalars("test/accuracy")[-1].value == pytest.approx(run.metrics["test"]["accuracy"])
    records = [r for r in read_records(run.run_dir) if r["kind"] == "epoch"]
    assert len(records) == 3  # the records stay the source of truth


def test_mlflow_tracker_logs_the_records(cache_dir, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow", reason="optional extra: pip install 'gnnsuite[mlflow]'")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    run = suite.run(node_spec(cache_dir), out=tmp_path / "runs", log_to=["mlflow"])
    client = mlflow.tracking.MlflowClient()
    (logged,) = client.search_runs(["0"])
    assert logged.info.run_name == run.run_id and logged.data.tags["status"] == "completed"
    losses = [m.value for m in sorted(client.get_metric_history(logged.info.run_id, "train/loss"),
                                      key=lambda m: m.step)]
    np.testing.assert_allclose(losses, run.summary["loss"], rtol=1e-6)
    assert logged.data.params["training.epochs"] == "3"


def test_unknown_tracker_is_a_one_line_error(node_run, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text((node_run.run_dir / "config.yaml").read_text())
    assert main(["run", str(spec), "--out", str(tmp_path / "o"), "--log-to", "wandb", "--quiet"]) == 2
    assert "--log-to: unknown tracker 'wandb'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_disk_link_prediction_loads_from_its_committed_generation(cache_dir, tmp_path):
    """The disk system's link prediction keeps its state in its embedding generations: eval reproduces its test
    metric, and the exported table (original node order) ranks the test triples as the run did."""
    from systems.tasks.link_prediction import known_triples, rank_triples

    spec = link_spec(cache_dir)
    spec["system"] = {"name": "disk", "options": {"compute_threads": 1, "num_partitions": 4, "buffer_capacity": 2,
                                                  "policy": "beta"}}
    run = suite.run(spec, out=tmp_path / "runs")
    model = suite.load_model(run.run_dir)
    assert model.evaluate("test") == run.metrics["test"]
    model.export("embeddings", tmp_path / "z.npy")
    z = torch.from_numpy(np.load(tmp_path / "z.npy"))
    store = model.store
    metrics = rank_triples(model.model.decoder, z, store.edges("test"), known_triples(store),
                           batch_size=model.spec.evaluation.batch_size)
    assert metrics["mrr"] == pytest.approx(run.metrics["test"]["mrr"], rel=1e-6)
    with pytest.raises(DataError, match="last committed epoch"):
        suite.load_model(run.run_dir, "best")
