"""Link prediction from disk: every edge once per epoch, IO exactly the plan's, negatives from the buffer,
generations that survive a kill, checksums that catch corruption, and a resumed run equal to an uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from suite.config import spec_from_dict
from suite.errors import ConfigError, DataError
from suite.data import GraphStore
from suite.io import IOCounters
from suite.recorder import Recorder, read_records, read_summary
from suite.runner import run_spec
from systems.disk.disk_embeddings import MANIFEST, EmbeddingStore, crc32
from systems.disk.disk_link_prediction import EMBEDDINGS_FOLDER, DiskLinkPrediction, EmbeddingBuffer
from systems.disk.disk_system import DiskSystem, disk_system
from systems.models.rgcn import RelationLookup
from systems.sampling.sampler import LayerBlock
from systems.sampling.dense import DenseSampler
from tests.support.disk import run

pytestmark = pytest.mark.usefixtures("one_thread")  # fixtures one_thread and tiny: tests/systems/conftest.py

REPO = Path(__file__).resolve().parents[3]


def lp_spec(store: GraphStore, options: dict[str, Any], epochs: int = 4, **model: Any):
    return spec_from_dict({
        "dataset": {"name": "store", "root": str(store.path)},
        "model": {"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": "distmult", "embedding_dim": 32,
                  "learnable_embeddings": True, "dropout": 0.0, **model},
        "sampler": {"name": "dense", "direction": "both"},
        "system": {"name": "disk", "device": "cpu", "options": options},
        "training": {"task": "link_prediction", "batch_size": 64, "epochs": epochs, "optimizer": "adagrad",
                     "learning_rate": 0.1, "negatives": {"num_chunks": 4, "negatives_per_positive": 50,
                                                         "degree_fraction": 0.5}},
        "evaluation": {"every": 2, "batch_size": 128},
        "seed": 0,
    })


BETA = {"policy": "beta", "num_partitions": 6, "buffer_capacity": 2}


def train(system: DiskSystem, epochs: int) -> list:
    """Set up and train ``system`` epoch by epoch, committing each one (as the harness does), without the
    teardown: the caller evaluates, then tears down."""
    system.setup()
    stats = []
    for epoch in range(epochs):
        stats.append(system.train_epoch(epoch))
        system.checkpoint(epoch, 0.0, stats[-1], None)
    return stats


@pytest.mark.parametrize("options", [
    {"policy": "in_memory", "num_partitions": 4, "buffer_capacity": 4},
    BETA,
    {"policy": "comet", "num_partitions": 8, "buffer_capacity": 4, "fine_to_coarse_ratio": 2},
    {"policy": "random", "num_partitions": 6, "buffer_capacity": 2},
], ids=lambda o: o["policy"])
def test_every_policy_trains_each_edge_once_per_epoch_and_fits_them(tiny, tmp_path, options):
    spec = lp_spec(tiny, options, epochs=6)
    system = disk_system(spec, tiny, torch.device("cpu"), Recorder(tmp_path, spec))
    assert isinstance(system, DiskLinkPrediction)
    try:
        stats = train(system, 6)
        fitted = system.evaluate("train")
    finally:
        system.teardown()
    assert all(epoch.examples == len(tiny.edges("train")) for epoch in stats)
    assert stats[-1].loss < stats[0].loss
    # 300 entities: a random ranking has an MRR of about 0.02 (the in-memory system reaches 0.2 in 12 epochs)
    assert fitted["filtered_mrr"] > 0.15, fitted


def test_graphsage_encoder_trains_from_the_buffer(tiny, tmp_path):
    spec = lp_spec(tiny, BETA, epochs=2, encoder="graphsage", num_layers=1, hidden_dim=16, fanouts=[5])
    outcome, _, _ = run(spec, tiny, tmp_path)
    assert all(stats.sampled_edges > 0 for stats in outcome.epochs)
    assert outcome.test_metrics["mrr"] > 0.02


def test_io_is_exactly_the_plans_partitions_read_and_written_back(tiny, tmp_path):
    outcome, system, _ = run(lp_spec(tiny, BETA, epochs=1), tiny, tmp_path)
    plan = system.plan(epoch=0)
    sizes = np.diff(system.pstore.array("partition_offsets"))
    row_bytes = 2 * 32 * 4
    loaded = sum(int(sizes[plan.transition(k).partitions_loaded].sum()) for k in range(plan.num_states))
    stats = outcome.epochs[0].extra
    # every partition loaded is written back exactly once (at its eviction or at the end of the epoch)
    assert stats["io_write_bytes"] == loaded * row_bytes
    bucket_bytes = stats["io_read_bytes"] - loaded * row_bytes
    offsets = system.pstore.array("bucket_edge_offsets")
    assert 0 < bucket_bytes
    assert bucket_bytes % (3 * 8) == 0 and bucket_bytes // 24 >= int(offsets[-1])  # every bucket read at least once
    assert stats["swaps"] == plan.swaps


def test_negatives_and_positives_come_from_the_buffer(tiny, tmp_path):
    spec = lp_spec(tiny, BETA, epochs=1)
    system = disk_system(spec, tiny, torch.device("cpu"), Recorder(tmp_path, spec))
    system.setup()
    try:
        system.embedding_store.begin_epoch()
        plan, steps, first = system.begin_pass(("train", 0))
        plan.examples_by_state()
        seen = 0
        for data, _ in system.walk(("train", 0), plan, steps, first):
            k = data.step.index
            resident = set(system.buffer.resident_rows().tolist())
            edges = data.examples
            seen += len(edges)
            assert set(edges[:, 0].tolist()) <= resident and set(edges[:, 2].tolist()) <= resident
            system.bind_training_state(data, plan, torch.Generator().manual_seed(k))
            drawn = system.task.negative_sampler.sample(64, torch.Generator().manual_seed(k))
            assert set(drawn.tails.reshape(-1).tolist()) <= resident
            assert set(drawn.heads.reshape(-1).tolist()) <= resident
        assert seen == len(tiny.edges("train"))
    finally:
        system.teardown()


def test_prefetch_changes_timing_only(tiny, tmp_path):
    with_prefetch, _, _ = run(lp_spec(tiny, BETA, epochs=2), tiny, tmp_path / "a")
    without, _, _ = run(lp_spec(tiny, {**BETA, "prefetch": False}, epochs=2), tiny, tmp_path / "b")
    assert [s.loss for s in with_prefetch.epochs] == [s.loss for s in without.epochs]
    assert with_prefetch.test_metrics == without.test_metrics


# ---------------------------------------------------------------------------------------------- the store
def _store(folder: Path, offsets=(0, 3, 5, 8), width: int = 4) -> EmbeddingStore:
    return EmbeddingStore(folder, np.array(offsets), width, IOCounters(), evict=True)


def _initial(partition: int) -> torch.Tensor:
    sizes = (3, 2, 3)
    return torch.full((sizes[partition], 4), float(partition))


def test_an_unreadable_manifest_is_one_error_naming_the_file_and_its_cause(tmp_path):
    """An IO error reading the manifest names the cause as every IO error does (the fault sweep found "(EIO)"
    missing: the OSError's text was wrapped in parentheses instead)."""
    from suite.errors import DataError

    (tmp_path / MANIFEST).mkdir()  # reading a folder: EISDIR, an OSError as a failing disk's EIO is
    with pytest.raises(DataError, match=rf"{MANIFEST}: unreadable manifest: is a directory \(EISDIR\)$"):
        _store(tmp_path).open(_initial)
    (tmp_path / MANIFEST).rmdir()
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(DataError, match=rf"{MANIFEST}: unreadable manifest \("):
        _store(tmp_path).open(_initial)


def test_generations_commit_atomically_and_reads_see_write_backs(tmp_path):
    store = _store(tmp_path)
    assert store.open(_initial) is False
    assert json.loads((tmp_path / MANIFEST).read_text())["generation"] == 0
    store.begin_epoch()
    store.write_async(1, torch.full((2, 4), 7.0))
    out = torch.empty(3, 4)
    store.read(1, out)  # waits for the write, reads the new generation
    assert torch.equal(out[:2], torch.full((2, 4), 7.0))
    store.read(0, out)  # not written back: the committed generation
    assert torch.equal(out, torch.zeros(3, 4))
    store.finish_epoch()  # partitions 0 and 2 copied forward
    assert json.loads((tmp_path / MANIFEST).read_text())["generation"] == 0  # nothing committed yet
    store.commit({"dense": 1}, {"epoch": 0})
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["generation"] == 1 and manifest["history"] == [{"epoch": 0}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dense.g1.pt", "embeddings.g1.npy", MANIFEST]
    table = store.load_all()
    assert torch.equal(table[3:5], torch.full((2, 4), 7.0)) and torch.equal(table[5:], torch.full((3, 4), 2.0))
    assert manifest["checksums"][1] == crc32(torch.full((2, 4), 7.0))
    store.close()
    reopened = _store(tmp_path)
    assert reopened.open(_initial) is True and reopened.dense_state() == {"dense": 1}
    reopened.close()


def test_write_backs_wait_for_the_writer_beyond_the_bound(tmp_path):
    """A writer slower than the training must not queue copies without bound (they held the whole table): the
    second write-back with ``max_pending_writes=1`` returns only once the first finished."""
    import threading

    store = EmbeddingStore(tmp_path, np.array([0, 3, 5, 8]), 4, IOCounters(), evict=True, max_pending_writes=1)
    store.open(_initial)
    store.begin_epoch()
    writer_free = threading.Event()
    store._writer.submit(writer_free.wait)  # the writer thread busy (a slow disk) until the timer frees it
    started = time.perf_counter()  # before the timer: it frees the writer 0.3 s after its own start
    threading.Timer(0.3, writer_free.set).start()
    store.write_async(0, torch.full((3, 4), 5.0))  # nothing unfinished yet: queued at once
    assert time.perf_counter() - started < 0.25
    first = store._pending[0]
    store.write_async(2, torch.full((3, 4), 6.0))  # one unfinished: waits for it
    assert first.done() and time.perf_counter() - started >= 0.3
    store.finish_epoch()
    store.commit({}, {"epoch": 0})
    assert torch.equal(store.load_all()[[0, 5]], torch.tensor([[5.0] * 4, [6.0] * 4]))
    store.close()
    with pytest.raises(ValueError, match="max_pending_writes"):
        EmbeddingStore(tmp_path / "other", np.array([0, 3]), 4, IOCounters(), max_pending_writes=0)


def test_an_uncommitted_epoch_is_discarded_on_reopen(tmp_path):
    store = _store(tmp_path)
    store.open(_initial)
    store.begin_epoch()
    store.write_async(0, torch.full((3, 4), 9.0))
    store.wait_writes()
    store.close()  # killed before the commit
    reopened = _store(tmp_path)
    assert reopened.open(_initial) is True
    assert sorted(p.name for p in tmp_path.iterdir()) == ["embeddings.g0.npy", MANIFEST]
    assert torch.equal(reopened.load_all()[:3], torch.zeros(3, 4))
    reopened.close()


def test_corrupted_and_truncated_partitions_fail_naming_the_file(tmp_path):
    store = _store(tmp_path)
    store.open(_initial)
    store.close()
    path = tmp_path / "embeddings.g0.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # a flipped byte in the last partition
    path.write_bytes(bytes(data))
    store = _store(tmp_path)
    store.open(_initial)
    with pytest.raises(DataError, match=r"embeddings\.g0\.npy: partition 2 .*CRC-32"):
        store.load_all()
    store.close()
    path.write_bytes(bytes(data[:-8]))
    with pytest.raises(DataError, match=r"embeddings\.g0\.npy: .*truncated"):
        _store(tmp_path).open(_initial)


class _RunsCode:
    """Unpickling this object would call ``os.getpid`` (any callable could be there): a file that runs code."""

    def __reduce__(self):
        return (os.getpid, ())


def test_a_dense_state_that_would_run_code_is_refused(tmp_path):
    store = _store(tmp_path)
    store.open(_initial)
    store.dense_file = "dense.g1.pt"  # as a committed epoch names it
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "optimizer_steps": 3,
                "torch_rng": torch.get_rng_state()}, tmp_path / store.dense_file)
    assert store.dense_state()["optimizer_steps"] == 3  # tensors, numbers, containers, optimizer state: loaded
    torch.save({"model": _RunsCode()}, tmp_path / store.dense_file)
    with pytest.raises(DataError, match=r"dense\.g1\.pt: unreadable dense state \(UnpicklingError"):
        store.dense_state()
    store.close()


def test_a_manifest_of_another_layout_is_refused(tmp_path):
    store = _store(tmp_path)
    store.open(_initial)
    store.close()
    with pytest.raises(DataError, match="manifest.json: manifest does not describe"):
        _store(tmp_path, offsets=(0, 4, 8)).open(_initial)


def test_embedding_buffer_writes_back_on_eviction(tmp_path):
    store = _store(tmp_path)
    store.open(_initial)
    store.begin_epoch()
    buffer = EmbeddingBuffer(store, capacity=2)
    buffer.install(0, 2)
    buffer.frames[0, :3] += 1.0
    buffer.install(0, 1)  # evicts partition 2: written back from a copy
    store.wait_writes()
    out = torch.empty(3, 4)
    store.read(2, out)
    assert torch.equal(out, torch.full((3, 4), 3.0))
    assert buffer.resident_rows().tolist() == [0, 1]
    store.close()


def test_link_prediction_needs_learnable_embeddings(tiny, tmp_path):
    spec = lp_spec(tiny, BETA)
    spec = spec.model_copy(update={"model": spec.model.model_copy(update={"learnable_embeddings": False})})
    with pytest.raises(ConfigError, match="model.learnable_embeddings"):
        disk_system(spec, tiny, torch.device("cpu"), Recorder(tmp_path, spec))


def test_link_prediction_refuses_in_buffer_evaluation(tiny, tmp_path):
    spec = lp_spec(tiny, BETA)
    spec = spec.model_copy(update={"evaluation": spec.evaluation.model_copy(update={"graph": "buffer"})})
    with pytest.raises(ConfigError, match="evaluation.graph: .*'buffer' is for node classification"):
        disk_system(spec, tiny, torch.device("cpu"), Recorder(tmp_path, spec))


def test_link_prediction_refuses_subset_negatives(tiny, tmp_path):
    """The buffer already restricts the negatives; an in-memory option on top of it is an error, not ignored."""
    spec = lp_spec(tiny, BETA)
    negatives = spec.training.negatives.model_copy(update={"subset_fraction": 0.5})
    spec = spec.model_copy(update={"training": spec.training.model_copy(update={"negatives": negatives})})
    with pytest.raises(ConfigError, match="training.negatives.subset_fraction: the disk system"):
        disk_system(spec, tiny, torch.device("cpu"), Recorder(tmp_path, spec))


# ---------------------------------------------------------------------------------------------- kill and resume
def _final(run_dir: Path) -> tuple[dict, list[float]]:
    summary = read_summary(run_dir)
    losses = [r["loss"] for r in read_records(run_dir) if r["kind"] == "epoch"]
    return summary, losses


@pytest.mark.parametrize("after_generation", [1, 3])
def test_a_killed_run_resumes_to_the_metrics_of_an_uninterrupted_one(tiny, tmp_path, after_generation):
    spec = lp_spec(tiny, BETA, epochs=5)
    run_spec(spec, tmp_path / "reference")
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(spec.to_yaml())
    out = tmp_path / "killed"
    manifest = out / spec.run_id / EMBEDDINGS_FOLDER / MANIFEST
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-m", "suite", "run", str(spec_file), "--out", str(out), "--quiet"],
                             cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        try:
            if json.loads(manifest.read_text())["generation"] >= after_generation:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.005)
    assert child.poll() is None, "the run finished before it could be killed"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert read_summary(out / spec.run_id) is None  # killed: no summary
    resumed = run_spec(spec, out)
    summary, losses = _final(out / spec.run_id)
    reference_summary, reference_losses = _final(tmp_path / "reference" / spec.run_id)
    assert losses == reference_losses
    assert summary["metrics"]["test"] == reference_summary["metrics"]["test"] == resumed["metrics"]["test"]
    assert summary["metrics"]["valid_curve"] == reference_summary["metrics"]["valid_curve"]
    replayed = [r for r in read_records(out / spec.run_id) if r["kind"] == "epoch" and r.get("resumed")]
    assert 1 <= len(replayed) < 5


def test_rgcn_reads_each_states_relation_types_from_the_buffer(tiny_directed, tmp_path):
    """R-GCN from disk: in every state the encoder holds that state's lookup, and the relation types it gives the
    sampled edges (buffer rows) are the store's types of the same edges (node ids); evaluation, over the whole
    graph in node ids, gets the store's lookup. Then a full run trains. (A directed store: its CSRs, which the
    store's lookup reads, hold each edge once, as the buckets do.)"""
    tiny = tiny_directed
    spec = lp_spec(tiny, BETA, epochs=2, encoder="rgcn", num_layers=1, hidden_dim=16, fanouts=[-1], num_bases=2)
    system = disk_system(spec, tiny, torch.device("cpu"), Recorder(tmp_path / "walk", spec))
    system.setup()
    store_lookup = RelationLookup.from_store(system.pstore, "both")
    encoder = system.task.model.encoder
    checked = []
    bind = system.bind_training_state

    def bind_and_check(data, plan, shuffle):  # the epoch binds each state it walks through bind_training_state
        state_roots = bind(data, plan, shuffle)
        assert encoder.relation_lookup is data.relation_lookup is not None
        node_row = system.buffer.node_row
        row_node = torch.full((len(data.graph.indptr) - 1,), -1, dtype=torch.int64)
        row_node[node_row[node_row >= 0]] = torch.nonzero(node_row >= 0).flatten()
        roots = system.buffer.resident_rows()[::7]
        block = DenseSampler(data.graph, [-1]).sample(roots, torch.Generator().manual_seed(0)).blocks[0]
        by_node = LayerBlock(row_node[block.src_nodes], block.num_dst, block.edge_index, block.dst_start)
        assert bool((by_node.src_nodes >= 0).all())
        src, dst = block.edge_index
        typed = lambda b, lookup: sorted(zip(b.src_nodes[src].tolist(), lookup.edge_types(b).tolist(),  # noqa
                                             b.src_nodes[dst + b.dst_start].tolist()))
        in_buffer = [(int(row_node[s]), r, int(row_node[d])) for s, r, d in typed(block, data.relation_lookup)]
        assert sorted(in_buffer) == typed(by_node, store_lookup)
        checked.append(len(src))
        return state_roots

    system.bind_training_state = bind_and_check
    try:
        system.train_epoch(0)
        system.evaluate("valid")
        assert encoder.relation_lookup.num_nodes == system.pstore.num_nodes
    finally:
        system.teardown()
    assert len(checked) > 1 and sum(checked) > 500
    outcome, _, _ = run(spec, tiny, tmp_path / "run")
    assert outcome.epochs[-1].loss < outcome.epochs[0].loss and outcome.test_metrics["mrr"] > 0.02
