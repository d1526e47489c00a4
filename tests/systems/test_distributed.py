"""Data-parallel training (systems/distributed.py): 2 ranks on CPU (gloo) against 1 rank, the recorded per-rank
stage and all-reduce times, option validation, torchrun, and a killed rank failing the run quickly."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml

from suite.config import spec_from_dict
from suite.errors import ConfigError
from suite.recorder import read_records, read_summary
from suite.runner import run_spec
from systems.batch import Batch
from systems.distributed import RankFailure, world_size_of
from systems.tasks.task import Task

REPO_ROOT = Path(__file__).resolve().parents[2]


def _spec(cache_dir: Path, system: str = "in_memory", world_size: int = 1, **training) -> dict:
    # Full neighbourhoods and no dropout: a share's forward pass is exactly its rows of the global batch's, so
    # 2 ranks compute the 1-rank gradients up to float rounding. Batches of 50 of the 140 training nodes: the last
    # global batch (40) splits unevenly only if odd; 45 makes it 23 + 22.
    options = {"world_size": world_size} if world_size > 1 else {}
    return {"dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(cache_dir)},
            "model": {"encoder": "graphsage", "num_layers": 2, "fanouts": [-1, -1], "hidden_dim": 32,
                      "dropout": 0.0},
            "system": {"name": system, "device": "cpu", "options": options},
            "training": {"epochs": 2, "batch_size": 45, **training}}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("dp-data")


def _compare(one: dict, two: dict) -> None:
    assert two["status"] == "completed"
    assert two["epochs"] == one["epochs"]
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5, abs=1e-6)
    assert two["metrics"]["valid"]["accuracy"] == pytest.approx(one["metrics"]["valid"]["accuracy"], abs=1e-9)
    assert two["metrics"]["test"]["accuracy"] == pytest.approx(one["metrics"]["test"]["accuracy"], abs=1e-9)


def _check_rank_records(run_dir: Path, world: int) -> None:
    epochs = [r for r in read_records(run_dir) if r["kind"] == "epoch"]
    assert epochs
    for record in epochs:
        assert record["world_size"] == world and record["examples"] == 140
        ranks = record["ranks"]
        assert [r["rank"] for r in ranks] == list(range(world))
        assert sum(r["examples"] for r in ranks) == 140
        for entry in ranks:
            assert entry["allreduce_calls"] == 4  # one per global batch: ceil(140 / 45)
            assert entry["allreduce_s"] > 0 and entry["allreduce_bytes"] > 0
            stages = set(entry["stage_busy_s"])  # in_memory: sample, gather, ...; pipelined: load, ...
            assert {"transfer", "compute"} <= stages and ("sample" in stages or "load" in stages)
            assert entry["pid"] > 0
    summary = read_summary(run_dir)
    assert summary["data_parallel"]["world_size"] == world and summary["data_parallel"]["backend"] == "gloo"
    assert len(summary["data_parallel"]["ranks"]) == world


def test_two_ranks_match_one_rank(tmp_path: Path, cache_dir: Path):
    one = run_spec(spec_from_dict(_spec(cache_dir)), tmp_path)
    two_spec = spec_from_dict(_spec(cache_dir, world_size=2))
    two = run_spec(two_spec, tmp_path)
    _compare(one, two)
    _check_rank_records(tmp_path / two_spec.run_id, 2)
    # only rank 0 wrote a run folder, in the usual layout
    assert sorted(p.name for p in (tmp_path / two_spec.run_id).iterdir()) == ["config.yaml", "records.jsonl",
                                                                              "summary.json"]


@pytest.mark.slow
def test_two_ranks_match_one_rank_pipelined(tmp_path: Path, cache_dir: Path):
    options = {"batch_loader_threads": 2, "staleness_bound": 4}
    one_data = _spec(cache_dir, system="pipelined")
    one_data["system"]["options"] = options
    two_data = copy.deepcopy(one_data)
    two_data["system"]["options"] = {**options, "world_size": 2}
    one = run_spec(spec_from_dict(one_data), tmp_path)
    two_spec = spec_from_dict(two_data)
    _compare(one, run_spec(two_spec, tmp_path))
    _check_rank_records(tmp_path / two_spec.run_id, 2)


@pytest.mark.slow
def test_torchrun_launch(tmp_path: Path, cache_dir: Path):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(_spec(cache_dir, world_size=2, epochs=1)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "suite", "run", str(spec_path), "--out", str(tmp_path / "out"), "--quiet"],
                          env=env, capture_output=True, text=True, timeout=300, start_new_session=True)
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = spec_from_dict(_spec(cache_dir, world_size=2, epochs=1)).run_id
    assert read_summary(tmp_path / "out" / run_id)["status"] == "completed"
    _check_rank_records(tmp_path / "out" / run_id, 2)


@pytest.mark.slow
def test_a_killed_rank_fails_the_run_quickly(tmp_path: Path, cache_dir: Path):
    data = _spec(cache_dir, world_size=2, epochs=200, batch_size=8)
    data["system"]["options"]["dist_timeout_s"] = 120
    data["evaluation"] = {"splits": []}
    spec = spec_from_dict(data)
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["summary"] = run_spec(spec, tmp_path)
        except BaseException as err:  # noqa: BLE001
            outcome["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    run_dir = tmp_path / spec.run_id
    deadline = time.monotonic() + 240
    ranks = None
    while ranks is None:
        assert thread.is_alive() and time.monotonic() < deadline, outcome
        epochs = [r for r in read_records(run_dir) if r["kind"] == "epoch"] if run_dir.exists() else []
        ranks = epochs[0]["ranks"] if epochs else None
        time.sleep(0.1)
    killed = time.monotonic()
    os.kill(ranks[1]["pid"], signal.SIGKILL)
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert time.monotonic() - killed < 60  # well within the collectives' timeout (120 s)
    error = outcome.get("error")
    assert isinstance(error, RankFailure), outcome
    assert "rank 1 of 2 died (killed by SIGKILL)" in str(error)
    summary = read_summary(run_dir)
    assert summary["status"] == "failed" and "rank 1 of 2 died" in summary["error"]
    assert [r for r in read_records(run_dir) if r["kind"] == "epoch"]  # what rank 0 recorded is kept
    with pytest.raises(ProcessLookupError):
        os.kill(ranks[0]["pid"], 0)  # rank 0 is gone too


def _lp_spec(cache_dir: Path, world_size: int = 1, system: str = "in_memory", decoder: str = "distmult",
             encoder: str = "shallow", negatives: str = "chunked") -> dict:
    # Learnable embeddings (sparse Adagrad), chunked negatives: 4 chunks of 25 per global batch of 100, so each of
    # 2 ranks takes 2 whole chunks with the negatives the global batch drew for them.
    model = {"encoder": encoder, "num_layers": 0, "fanouts": [], "decoder": decoder, "embedding_dim": 16,
             "learnable_embeddings": True, "dropout": 0.0}
    if encoder != "shallow":
        model.update(num_layers=1, fanouts=[-1])  # full neighbourhoods: the share's sample is the global one's
    return {"dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(cache_dir)}, "model": model,
            "system": {"name": system, "device": "cpu",
                       "options": {"world_size": world_size} if world_size > 1 else {}},
            "training": {"task": "link_prediction", "batch_size": 100, "epochs": 3, "optimizer": "adagrad",
                         "learning_rate": 0.1, "negatives": {"num_chunks": 4, "negatives_per_positive": 20,
                                                             "degree_fraction": 0.5}},
            "evaluation": {"batch_size": 256}, "seed": 0} | ({} if negatives == "chunked" else {
                "training": {"task": "link_prediction", "batch_size": 100, "epochs": 3, "optimizer": "adagrad",
                             "learning_rate": 0.1, "negatives": negatives}})


def _compare_link_prediction(tmp_path: Path, cache_dir: Path, **options) -> tuple[dict, dict]:
    """1 rank vs 2 ranks: what must be equal is equal, and each rank's share and exchange is recorded."""
    one = run_spec(spec_from_dict(_lp_spec(cache_dir, **options)), tmp_path)
    two_spec = spec_from_dict(_lp_spec(cache_dir, world_size=2, **options))
    two = run_spec(two_spec, tmp_path)
    assert two["status"] == "completed" and two["epochs"] == one["epochs"] == 3
    # Equal up to float rounding: the loss of every epoch (the same global batches, the same negatives, the same
    # dense all-reduced step and the same sparse Adagrad update of the embedding rows, whose per-rank gradient rows
    # are summed in another order), hence the trained embeddings and every ranking metric.
    assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)
    for split in ("valid", "test"):
        for metric in ("mrr", "hits@1", "hits@10", "unfiltered_mrr"):
            assert two["metrics"][split][metric] == pytest.approx(one["metrics"][split][metric], abs=1e-6), metric
    # May differ: times (stage busy, epoch, wall), and the last float digits of the loss.
    epochs = [r for r in read_records(tmp_path / two_spec.run_id) if r["kind"] == "epoch"]
    train_edges = epochs[0]["examples"]
    batches = -(-train_edges // 100)
    for record in epochs:
        ranks = record["ranks"]
        assert sum(r["examples"] for r in ranks) == record["examples"] == train_edges
        assert all(r["examples"] > 0 for r in ranks)
        for entry in ranks:  # one sparse exchange per global batch, on every rank (an empty share joins too)
            assert entry["embedding_exchange_calls"] == batches and entry["embedding_exchange_bytes"] > 0
    dp = read_summary(tmp_path / two_spec.run_id)["data_parallel"]
    assert [r["embedding_exchange_calls"] for r in dp["ranks"]] == [3 * batches] * 2
    print(f"\n1 rank : loss {one['loss']}, valid mrr {one['metrics']['valid']['mrr']:.6f}, "
          f"test mrr {one['metrics']['test']['mrr']:.6f}")
    print(f"2 ranks: loss {two['loss']}, valid mrr {two['metrics']['valid']['mrr']:.6f}, "
          f"test mrr {two['metrics']['test']['mrr']:.6f}; per rank examples "
          f"{[r['examples'] for r in dp['ranks']]}, exchanges {[r['embedding_exchange_calls'] for r in dp['ranks']]}, "
          f"exchanged MB {[round(r['embedding_exchange_bytes'] / 1e6, 2) for r in dp['ranks']]}")
    return one, two


def test_link_prediction_two_ranks_match_one_rank(tmp_path: Path, cache_dir: Path):
    _compare_link_prediction(tmp_path, cache_dir)


@pytest.mark.slow
@pytest.mark.parametrize("options", [{"decoder": "dot"}, {"encoder": "graphsage"}, {"system": "pipelined"}],
                         ids=["dot-no-dense-parameters", "graphsage-full-neighbourhoods", "pipelined"])
def test_link_prediction_two_ranks_match_one_rank_variants(tmp_path: Path, cache_dir: Path, options: dict):
    _compare_link_prediction(tmp_path, cache_dir, **options)


@pytest.mark.parametrize("negatives", ["all", pytest.param("kvsall", marks=pytest.mark.slow)])  # one path per rank
def test_all_entity_link_prediction_two_ranks_match_one_rank(tmp_path: Path, cache_dir: Path, negatives: str):
    """1vsAll and KvsAll: each rank keeps every entity as a candidate and its share of the examples (queries)."""
    _compare_link_prediction(tmp_path, cache_dir, negatives=negatives)


def test_rgcn_link_prediction_two_ranks_match_one_rank(tmp_path: Path, cache_dir: Path):
    """R-GCN (relation types of the sampled edges looked up on every rank) over full neighbourhoods."""
    _compare_link_prediction(tmp_path, cache_dir, encoder="rgcn")


def test_link_prediction_share_is_whole_chunks(tmp_path: Path, cache_dir: Path):
    """``shard_sampled``: the ranks' shares of one sampled global batch are its chunks, with their negatives, and
    together they are the global batch (the node ids map back to the same global ids)."""
    from suite.datasets import open_dataset
    from systems.tasks.link_prediction import LinkPredictionTask

    spec = spec_from_dict(_lp_spec(cache_dir))
    spec = spec.model_copy(update={"training": spec.training.model_copy(update={"batch_size": 90})})
    task = LinkPredictionTask(spec, open_dataset(spec.dataset), torch.device("cpu"))
    task.setup()
    whole = task.plan_epoch(0)[0]
    task.sample(whole)
    nodes = whole.sample.roots
    shares = []
    for rank in range(3):
        share = task.plan_epoch(0)[0]
        task.sample(share)
        task.shard_sampled(share, rank, 3)
        shares.append(share)
    assert [s.num_examples for s in shares] == [46, 23, 21]  # chunks of 23: 2 + 1 + 1 (the last one short)
    assert all(s.extra["global_examples"] == 90 for s in shares)
    assert torch.equal(torch.cat([s.roots for s in shares]), whole.roots)
    for key in ("src", "dst"):
        assert torch.equal(torch.cat([s.sample.roots[s.extra[key]] for s in shares]), nodes[whole.extra[key]])
    for key in ("tail_neg", "head_neg"):
        assert torch.equal(torch.cat([s.sample.roots[s.extra[key]] for s in shares]), nodes[whole.extra[key]])
    empty = task.plan_epoch(0)[0]
    task.sample(empty)
    task.shard_sampled(empty, 4, 5)  # 4 chunks, 5 ranks: the last share is empty
    assert empty.num_examples == 0 and empty.sample is None and empty.extra["global_examples"] == 90


# ---------------------------------------------------------------------------------------------- no processes
def test_options_are_validated(tmp_path: Path):
    base = _spec(tmp_path)
    assert world_size_of(spec_from_dict(base)) == 1
    data = copy.deepcopy(base)
    data["system"]["options"] = {"world_size": 0}
    with pytest.raises(ConfigError, match=r"system\.options\.world_size: .*greater than or equal to 1"):
        spec_from_dict(data, "s.yaml")
    data["system"] = {"name": "pipelined", "options": {"world_size": 2, "in_order_compute": False}}
    with pytest.raises(ConfigError, match=r"system\.options\.in_order_compute: must be true with world_size > 1"):
        spec_from_dict(data, "s.yaml")
    data["system"] = {"name": "pipelined", "options": {"world_size": 2, "dist_backend": "mpi"}}
    with pytest.raises(ConfigError, match=r"system\.options\.dist_backend"):
        spec_from_dict(data, "s.yaml")
    data["system"] = {"name": "pipelined", "options": {"world_size": 3, "dist_timeout_s": 30}}
    assert world_size_of(spec_from_dict(data)) == 3


def test_default_shard_splits_the_roots():
    batch = Batch(epoch=1, index=2, roots=torch.arange(7))
    shares = [Task.shard(None, batch, rank, 3) for rank in range(3)]  # type: ignore[arg-type]
    assert torch.equal(torch.cat([s.roots for s in shares]), batch.roots)
    assert [len(s.roots) for s in shares] == [3, 2, 2]
    assert all(s.epoch == 1 and s.index == 2 and s.extra["global_examples"] == 7 for s in shares)
    assert [len(Task.shard(None, Batch(0, 0, torch.arange(1)), r, 2).roots) for r in range(2)] == [1, 0]
