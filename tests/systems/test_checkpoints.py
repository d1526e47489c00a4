"""Checkpoints and resume: a real ``gnnsuite run`` subprocess killed (SIGKILL) at a random moment of its training
resumes from its last checkpoint and ends with the metrics and losses of an uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from suite.config import spec_from_dict
from suite.datasets import open_dataset
from suite.recorder import read_records, read_summary
from suite.runner import run_spec
from suite.checkpoint import checkpoint_path, load_checkpoint

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    """The tiny synthetic preset, generated once for the module."""
    path = tmp_path_factory.mktemp("checkpoint-data")
    open_dataset(spec_from_dict({"dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(path)}}).dataset)
    return path


def node_spec(cache_dir: Path, system: str, epochs: int = 30, **options) -> dict:
    return {"name": f"ckpt-{system}", "dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(cache_dir)},
            "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 32, "fanouts": [5, 5], "dropout": 0.5},
            "system": {"name": system, "options": {"compute_threads": 1, **options}},
            "training": {"batch_size": 16, "epochs": epochs}, "evaluation": {"every": 2}, "seed": 3}


def link_spec(cache_dir: Path, epochs: int = 5) -> dict:
    return {"name": "ckpt-lp", "dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(cache_dir)},
            "model": {"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": "distmult",
                      "embedding_dim": 16, "learnable_embeddings": True},
            "system": {"name": "in_memory", "options": {"compute_threads": 1}},
            "training": {"task": "link_prediction", "batch_size": 64, "epochs": epochs,
                         "negatives": {"num_chunks": 2, "negatives_per_positive": 20}},
            "evaluation": {"every": 1}, "seed": 5}


def _cli(spec_file: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "suite", "run", str(spec_file), "--out", str(out), "--quiet"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def _epoch_records(run_dir: Path) -> int:
    return sum(1 for r in read_records(run_dir) if r.get("kind") == "epoch")


def kill_and_resume(spec: dict, out: Path, rng: random.Random) -> tuple[dict, int]:
    """Start ``gnnsuite run``, SIGKILL it at a random moment after a random epoch (>= 1) finished and before the
    run completes, then run the same command again; return the resumed summary and the epochs done at the kill."""
    spec_file = out.with_suffix(".yaml")
    spec_file.write_text(yaml.safe_dump(spec))
    run_dir = out / spec_from_dict(spec).run_id
    epochs = spec["training"]["epochs"]
    after = rng.randint(1, epochs - 2)
    process = subprocess.Popen(_cli(spec_file, out), cwd=REPO_ROOT, env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while _epoch_records(run_dir) < after and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    times = [r["epoch_time_s"] for r in read_records(run_dir) if r.get("kind") == "epoch"]
    time.sleep(rng.uniform(0.0, min(times[1:] or times or [0.05])))  # within the next epoch (or its evaluation)
    process.send_signal(signal.SIGKILL)
    _, err = process.communicate()
    assert process.returncode == -signal.SIGKILL, f"the run ended before the kill: {err.decode()[-2000:]}"
    assert read_summary(run_dir) is None  # killed: no summary
    done_at_kill = _epoch_records(run_dir)
    resumed = subprocess.run(_cli(spec_file, out), cwd=REPO_ROOT, env=_env(), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    return read_summary(run_dir), done_at_kill


class Interrupted(BaseException):
    """Stands for a kill inside the process (a BaseException: nothing in the run catches it)."""


def interrupt_after(monkeypatch, epoch: int) -> None:
    """Make the next in-process run stop abruptly when it records the epoch after ``epoch`` (trained, not yet
    checkpointed): the run folder keeps the checkpoint of ``epoch`` and a summary with status ``failed``."""
    from suite import recorder as recorder_module

    class InterruptingRecorder(recorder_module.Recorder):
        def record(self, kind, **fields):
            super().record(kind, **fields)
            if kind == "epoch" and fields.get("epoch") == epoch + 1 and not fields.get("resumed"):
                raise Interrupted()

    monkeypatch.setattr("suite.runner.Recorder", InterruptingRecorder)


def interrupt_and_resume(spec: dict, out: Path, monkeypatch, epoch: int) -> dict:
    """Run in-process, interrupted after ``epoch``; then run again (resuming) and return the summary."""
    with monkeypatch.context() as patch:
        interrupt_after(patch, epoch)
        with pytest.raises(Interrupted):
            run_spec(spec_from_dict(spec), out)
    run_dir = out / spec_from_dict(spec).run_id
    assert load_checkpoint(checkpoint_path(run_dir))["epoch"] == epoch
    return run_spec(spec_from_dict(spec), out)


ON_CUDA = torch.cuda.is_available()
"""The systems take the GPU where there is one (``system.device: auto``), whose float atomics (scatter, index_add)
sum in no fixed order: two uninterrupted runs there already differ in the last digits (seen on an H200: losses
equal to 1e-8). On the CPU the comparison is exact."""


def same(resumed, uninterrupted) -> bool:
    """Equal (on the CPU), or equal to a relative 1e-5 number by number (on CUDA), through nested lists and dicts."""
    if not ON_CUDA:
        return resumed == uninterrupted
    if isinstance(resumed, dict) and isinstance(uninterrupted, dict):
        return resumed.keys() == uninterrupted.keys() and all(same(resumed[k], uninterrupted[k]) for k in resumed)
    if isinstance(resumed, list) and isinstance(uninterrupted, list):
        return len(resumed) == len(uninterrupted) and all(map(same, resumed, uninterrupted))
    if isinstance(resumed, float) or isinstance(uninterrupted, float):
        return resumed == pytest.approx(uninterrupted, rel=1e-5, abs=1e-7)
    return resumed == uninterrupted


def assert_same_training(resumed: dict, uninterrupted: dict) -> None:
    assert resumed["status"] == uninterrupted["status"] == "completed"
    assert same(resumed["loss"], uninterrupted["loss"]), (resumed["loss"], uninterrupted["loss"])
    assert same(resumed["metrics"]["valid_curve"], uninterrupted["metrics"]["valid_curve"])
    assert same(resumed["metrics"]["test"], uninterrupted["metrics"]["test"])
    assert resumed["epochs"] == uninterrupted["epochs"]


@pytest.mark.parametrize("system, options", [("in_memory", {}), ("pipelined", {"sync": True})])
def test_killed_run_resumes_to_the_uninterrupted_metrics(cache_dir, tmp_path, system, options):
    seed = random.randrange(2**32)
    print(f"kill moment seed {seed}")
    spec = node_spec(cache_dir, system, **options)
    reference = run_spec(spec_from_dict(spec), tmp_path / "reference")
    resumed, done_at_kill = kill_and_resume(spec, tmp_path / "killed", random.Random(seed))
    assert 1 <= done_at_kill < spec["training"]["epochs"]
    assert_same_training(resumed, reference)
    run_dir = Path(resumed["run_dir"])
    epochs = [r for r in read_records(run_dir) if r.get("kind") == "epoch"]
    assert [r["epoch"] for r in epochs] == list(range(spec["training"]["epochs"]))
    assert any(r.get("resumed") for r in epochs)  # the replayed epochs are marked


def test_link_prediction_with_learnable_embeddings_resumes_exactly(cache_dir, tmp_path, monkeypatch):
    spec = link_spec(cache_dir)
    reference = run_spec(spec_from_dict(spec), tmp_path / "reference")
    resumed = interrupt_and_resume(spec, tmp_path / "killed", monkeypatch, epoch=2)
    assert_same_training(resumed, reference)
    saved = load_checkpoint(checkpoint_path(resumed["run_dir"]))
    assert saved["task"]["embeddings"]["weight"].shape[1] == 16
    assert saved["epoch"] == spec["training"]["epochs"] - 1


@pytest.mark.parametrize("policy, ratio", [("sequential", 1), ("dispersed", 2)])
def test_disk_node_classification_resumes_exactly(cache_dir, tmp_path, monkeypatch, policy, ratio):
    """The buffer's layout before the resumed epoch is replayed from the plans, so the in-buffer samples match."""
    spec = node_spec(cache_dir, "disk", epochs=5, num_partitions=4, buffer_capacity=2, policy=policy,
                     fine_to_coarse_ratio=ratio)
    spec["evaluation"]["every"] = 1
    reference = run_spec(spec_from_dict(spec), tmp_path / "reference")
    resumed = interrupt_and_resume(spec, tmp_path / "killed", monkeypatch, epoch=2)
    assert_same_training(resumed, reference)


def test_checkpoints_are_written_every_k_epochs_and_best_by_validation(cache_dir, tmp_path):
    spec = node_spec(cache_dir, "in_memory", epochs=5)
    spec["training"]["checkpoint_every"] = 2
    spec["evaluation"]["every"] = 1
    summary = run_spec(spec_from_dict(spec), tmp_path)
    last = load_checkpoint(checkpoint_path(summary["run_dir"], "last"))
    best = load_checkpoint(checkpoint_path(summary["run_dir"], "best"))
    assert last["epoch"] == 4
    curve = [point["accuracy"] for point in summary["metrics"]["valid_curve"]]
    assert best["epoch"] == curve.index(max(curve))
    assert best["best"]["value"] == max(curve)
    assert set(last["task"]) == {"model", "optimizer", "optimizer_steps", "embeddings"}
    assert isinstance(last["rng"]["torch"], torch.Tensor)
    # the identity of a run ignores the checkpoint interval
    assert spec_from_dict(spec).run_id == spec_from_dict({**spec, "training": {**spec["training"],
                                                                               "checkpoint_every": 1}}).run_id


def test_overwrite_starts_over_and_no_checkpoints_with_zero(cache_dir, tmp_path, monkeypatch):
    spec = node_spec(cache_dir, "in_memory", epochs=4)
    with monkeypatch.context() as patch:
        interrupt_after(patch, 1)
        with pytest.raises(Interrupted):
            run_spec(spec_from_dict(spec), tmp_path)
    summary = run_spec(spec_from_dict(spec), tmp_path, overwrite=True)  # starts over: nothing replayed
    assert not any(r.get("resumed") for r in read_records(summary["run_dir"]))
    assert load_checkpoint(checkpoint_path(summary["run_dir"]))["epoch"] == 3

    spec["training"]["checkpoint_every"] = 0
    spec["name"] = "no-checkpoints"
    summary = run_spec(spec_from_dict(spec), tmp_path)
    assert not (Path(summary["run_dir"]) / "checkpoints").exists()


def test_a_torn_or_foreign_checkpoint_is_a_one_line_error(cache_dir, tmp_path):
    from suite.errors import DataError

    spec = node_spec(cache_dir, "in_memory", epochs=2)
    summary = run_spec(spec_from_dict(spec), tmp_path)
    path = checkpoint_path(summary["run_dir"])
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DataError, match="cannot read the checkpoint"):
        load_checkpoint(path)


def test_asynchronous_in_order_pipeline_resumes_exactly_for_node_classification(cache_dir, tmp_path, monkeypatch):
    """Node classification from features, compute in admission order: loading reads nothing the model changes, so
    the asynchronous pipeline's continuation equals the uninterrupted run (the claim of docs/api.md)."""
    spec = node_spec(cache_dir, "pipelined", epochs=4, batch_loader_threads=2, staleness_bound=4)
    spec["evaluation"]["every"] = 1
    reference = run_spec(spec_from_dict(spec), tmp_path / "reference")
    resumed = interrupt_and_resume(spec, tmp_path / "killed", monkeypatch, epoch=1)
    assert_same_training(resumed, reference)
