"""Two writers: of one run folder (in-memory and disk link prediction), of one store; and a killed writer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from suite.cli import main
from suite.config import load_spec
from suite.datasets import open_dataset
from suite.data import GraphStore
from suite.recorder import read_records, read_summary
from suite.results import load_epochs
from tests.support.paths import REPO_ROOT

EPOCHS = {"in_memory": 8, "disk_link_prediction": 2}
SPECS = {
    "in_memory": {"model": {"num_layers": 2, "fanouts": [5, 5], "hidden_dim": 16},
                  "training": {"epochs": EPOCHS["in_memory"], "batch_size": 8}},
    "disk_link_prediction": {
        "model": {"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": "distmult", "embedding_dim": 16,
                  "learnable_embeddings": True, "dropout": 0.0},
        "sampler": {"name": "dense", "direction": "both"},
        "system": {"name": "disk", "device": "cpu",
                   "options": {"policy": "beta", "num_partitions": 4, "buffer_capacity": 2}},
        "training": {"task": "link_prediction", "batch_size": 32, "epochs": EPOCHS["disk_link_prediction"],
                     "optimizer": "adagrad", "learning_rate": 0.1,
                     "negatives": {"num_chunks": 2, "negatives_per_positive": 20}},
        "evaluation": {"splits": []}},
}


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "suite", *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(condition, process: subprocess.Popen, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the first writer ended before {what}: {process.communicate()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _one_line_error(capsys, *fragments: str) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gnnsuite: error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_a_second_writer_of_a_run_folder_is_refused_naming_the_first(tmp_path, capsys, kind):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({"dataset": {"name": "synthetic", "preset": "tiny",
                                                     "cache_dir": str(tmp_path / "data")}, **SPECS[kind]}))
    spec = load_spec(spec_path)
    open_dataset(spec.dataset)  # generated once, before either writer starts
    runs = tmp_path / "runs"
    run_dir = runs / spec.run_id
    first = _start("run", str(spec_path), "--out", str(runs), "--quiet")
    _wait_for(lambda: (run_dir / ".lock").exists() and (run_dir / "records.jsonl").exists(), first,
              "it held the run folder")
    assert main(["run", str(spec_path), "--out", str(runs), "--quiet"]) == 2  # the second writer, meanwhile
    _one_line_error(capsys, f"run folder {run_dir}: in use by process {first.pid}")
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["epochs"] == EPOCHS[kind]
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines].count("epoch") == EPOCHS[kind]  # every line parses
    assert len(load_epochs(runs)) == EPOCHS[kind]
    assert not (run_dir / ".lock").exists()


def test_two_runs_started_together_record_one_clean_run(tmp_path):
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump({"dataset": {"name": "synthetic", "preset": "tiny",
                                                     "cache_dir": str(tmp_path / "data")}, **SPECS["in_memory"]}))
    runs = tmp_path / "runs"
    writers = [_start("run", str(spec_path), "--out", str(runs), "--quiet") for _ in range(2)]
    results = [(writer.wait(timeout=300), *writer.communicate()) for writer in writers]
    codes = sorted(code for code, _, _ in results)
    ran = [out for code, out, _ in results if code == 0 and "completed" in out]
    assert len(ran) == 1, results  # one ran; the other was refused (exit 2) or found it complete (skipped)
    assert codes == [0, 2] or any("skipped" in out for _, out, _ in results), results
    for code, _, err in results:
        if code == 2:
            assert "in use by process" in err and len(err.strip().splitlines()) == 1, err
    assert len(load_epochs(runs)) == EPOCHS["in_memory"]
    run_dir = next(runs.iterdir())
    assert read_summary(run_dir)["status"] == "completed"
    assert len(read_records(run_dir)) == 2 * EPOCHS["in_memory"] + 1


def test_a_second_generate_is_refused_and_a_killed_ones_leftovers_are_removed(tmp_path, capsys):
    out = tmp_path / "store"
    lock = tmp_path / ".store.lock"
    first = _start("datasets", "generate", "--preset", "tiny", "--num-nodes", "400000", "--out", str(out), "--quiet")
    _wait_for(lambda: any(p.name.startswith(".store.partial-") for p in tmp_path.iterdir()), first,
              "it started writing")
    assert main(["datasets", "generate", "--preset", "tiny", "--out", str(out), "--quiet"]) == 2
    _one_line_error(capsys, f"{out}: output folder: in use by process {first.pid}")
    first.send_signal(signal.SIGKILL)  # killed mid-way: its staging folder and lock file stay behind
    first.wait()
    partial = [p for p in tmp_path.iterdir() if p.name.startswith(".store.partial-")]
    assert partial and lock.exists() and not out.exists()

    assert main(["datasets", "generate", "--preset", "tiny", "--out", str(out), "--quiet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_nodes"] == 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # the dead writer's leftovers are gone
    GraphStore.open(out).verify()
    assert main(["datasets", "generate", "--preset", "tiny", "--out", str(out), "--quiet"]) == 2
    _one_line_error(capsys, f"{out}: output already exists (pass --overwrite to replace it)")
    assert sorted(os.listdir(tmp_path)) == ["store"]


def test_a_failed_preparation_leaves_no_lock_file(tmp_path):
    cache = tmp_path / "data"
    spec_path = Path(tmp_path / "spec.yaml")
    spec_path.write_text(f"dataset: {{name: cora, root: {tmp_path}, cache_dir: {cache}}}\n")
    assert main(["run", str(spec_path), "--out", str(tmp_path / "runs"), "--quiet"]) == 2  # no raw files there
    assert not (tmp_path / "runs").exists() and list(cache.iterdir()) == []
