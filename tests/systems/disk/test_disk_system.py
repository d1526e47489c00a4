"""The disk system on a small planted-partition store: every policy learns, IO is exactly the plan's, sampling
sees only the buffer, a full-graph evaluation predicts what the in-memory task predicts, prefetching changes timing
only, bad stores and options fail clearly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from suite.data.partition import PartitionLayout
from suite.config import spec_from_dict
from suite.errors import ConfigError, DataError
from suite.data import GraphStore
from suite.io import resident_pages
from suite.recorder import Recorder, read_records
from systems.disk.disk_system import disk_system, partitioned_store
from tests.support.disk import run
from tests.support.graphs import planted_partition, write_node_store


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> GraphStore:
    graph = planted_partition(num_nodes=600, num_classes=3, signal=0.4, seed=4)
    return write_node_store(tmp_path_factory.mktemp("disk") / "store", graph.src, graph.dst, graph.features,
                            graph.labels, graph.splits, name="planted")


def make_spec(store: GraphStore, options: dict[str, Any], epochs: int = 3, graph: str = "full",
              encoder: str = "graphsage", **training):
    return spec_from_dict({
        "dataset": {"name": "store", "root": str(store.path)},
        "model": {"encoder": encoder, "num_layers": 2, "hidden_dim": 32, "fanouts": [10, 10], "dropout": 0.2},
        "system": {"name": "disk", "device": "cpu", "options": options},
        "training": {"batch_size": 32, "epochs": epochs, "learning_rate": 0.01, **training},
        "evaluation": {"every": epochs, "graph": graph},
    })


@pytest.mark.parametrize("options", [
    {"policy": "in_memory", "num_partitions": 4, "buffer_capacity": 4},
    {"policy": "sequential", "num_partitions": 8, "buffer_capacity": 4},
    {"policy": "dispersed", "num_partitions": 8, "buffer_capacity": 4, "fine_to_coarse_ratio": 2},
    {"policy": "beta", "num_partitions": 8, "buffer_capacity": 4},
    {"policy": "comet", "num_partitions": 8, "buffer_capacity": 4, "fine_to_coarse_ratio": 2},
    {"policy": "random", "num_partitions": 8, "buffer_capacity": 4},
], ids=lambda o: o["policy"])
def test_every_policy_trains_each_node_once_per_epoch_and_learns(store, tmp_path, options):
    outcome, system, _ = run(make_spec(store, options), store, tmp_path)
    train = len(system.train_nodes)
    assert all(stats.examples == train for stats in outcome.epochs)
    assert outcome.test_metrics["accuracy"] > 0.6  # 3 classes: chance is 1/3
    assert all(stats.extra["states"] >= 1 for stats in outcome.epochs)


def _bucket_bytes(pstore: GraphStore, partitions: list[int]) -> int:
    sizes = PartitionLayout.from_store(pstore).bucket_sizes().numpy()
    return int(sizes[np.ix_(partitions, partitions)].sum()) * 3 * 8


def test_bytes_read_are_exactly_the_plans_partitions_and_buckets(store, tmp_path):
    """Each state entered (those holding training nodes) reads the partitions it holds that the last state entered
    did not, and the buckets between its partitions not held before."""
    options = {"policy": "beta", "num_partitions": 8, "buffer_capacity": 3, "coalesce_bytes": 0}
    outcome, system, _ = run(make_spec(store, options, epochs=1, ), store, tmp_path)
    plan = system.plan(system.train_nodes, epoch=0)
    pstore, row_bytes = system.pstore, pstore_row_bytes(system.pstore)
    sizes = np.diff(pstore.array("partition_offsets"))
    expected, partitions_read, held = 0, 0, set()
    for k in plan.states_with_examples():
        members = {int(x) for x in plan.state(int(k))}
        loads = sorted(members - held)
        expected += int(sizes[loads].sum()) * row_bytes
        partitions_read += len(loads)
        # buckets stay cached while both partitions are resident: a state reads those with a new partition
        expected += _bucket_bytes(pstore, sorted(members)) - _bucket_bytes(pstore, sorted(members & held))
        held = members
    stats = outcome.epochs[0]
    assert stats.extra["states_entered"] == len(plan.states_with_examples()) <= plan.num_states
    assert stats.extra["io_read_bytes"] == expected
    assert stats.extra["swaps"] == plan.swaps and stats.extra["partitions_read"] == partitions_read
    assert stats.extra["disk_rchar"] >= expected  # what the process passed through read calls
    assert 0 <= stats.extra["io_wait_s"] <= outcome.epoch_time_s[0]


def pstore_row_bytes(pstore: GraphStore) -> int:
    return pstore.feature_dim * np.dtype(pstore.metadata["files"]["features"]["dtype"]).itemsize


def test_sampling_sees_only_the_buffer(store, tmp_path):
    spec = make_spec(store, {"policy": "beta", "num_partitions": 8, "buffer_capacity": 2}, epochs=1)
    recorder = Recorder(tmp_path, spec)
    system = disk_system(spec, store, torch.device("cpu"), recorder)
    system.setup()
    try:
        plan, steps, first = system.begin_pass(("train", 0))
        checked = 0
        for data, _ in system.walk(("train", 0), plan, steps, first):
            resident = system.buffer.frame_partition
            # the buffer holds what the plan's state holds, also after states without examples were skipped
            assert sorted(int(x) for x in resident if x >= 0) == sorted(int(x) for x in plan.state(data.step.index))
            frames = torch.unique(data.graph.indices // system.buffer.max_rows)
            assert all(resident[int(f)] >= 0 for f in frames)
            # every in-buffer edge is a real edge between resident partitions, mapped back to global ids
            rows = torch.arange(len(data.graph.indptr) - 1)
            dst_rows = torch.repeat_interleave(rows, data.graph.indptr[1:] - data.graph.indptr[:-1])
            to_global = torch.full((len(rows),), -1, dtype=torch.int64)
            live = system.buffer.node_row >= 0
            to_global[system.buffer.node_row[live]] = torch.nonzero(live).squeeze(1)
            src, dst = to_global[data.graph.indices], to_global[dst_rows]
            assert (src >= 0).all() and (dst >= 0).all()
            csr = system.pstore.csr("in")
            for s_, d_ in zip(src[:50].tolist(), dst[:50].tolist()):
                assert s_ in csr.indices[csr.indptr[d_]:csr.indptr[d_ + 1]].tolist()
            checked += 1
        assert checked == len(plan.states_with_examples()) < plan.num_states
    finally:
        system.teardown()
        recorder.close()


def test_prefetch_changes_timing_not_results(store, tmp_path):
    base = {"policy": "comet", "num_partitions": 8, "buffer_capacity": 4, "fine_to_coarse_ratio": 2}
    with_prefetch, _, _ = run(make_spec(store, {**base, "prefetch": True}, epochs=2), store, tmp_path / "a")
    without, _, _ = run(make_spec(store, {**base, "prefetch": False}, epochs=2), store, tmp_path / "b")
    assert [s.loss for s in with_prefetch.epochs] == [s.loss for s in without.epochs]
    assert with_prefetch.test_metrics == without.test_metrics
    assert [s.extra["io_read_bytes"] for s in with_prefetch.epochs] == [s.extra["io_read_bytes"]
                                                                         for s in without.epochs]


@pytest.mark.parametrize("options", [
    {"policy": "beta", "num_partitions": 8, "buffer_capacity": 2},
    {"policy": "dispersed", "num_partitions": 8, "buffer_capacity": 2, "order": "train-first"},
], ids=lambda o: o["policy"])
def test_skipping_states_without_training_nodes_changes_reads_not_results(store, tmp_path, monkeypatch, options):
    """A pass enters only the states that hold training nodes; entering every state of the plan (MariusGNN's walk,
    here by making every state count as holding examples) trains on the same buffers, so the same results, and
    reads more."""
    from systems.disk.plan import BufferPlan

    skipping, _, _ = run(make_spec(store, options, epochs=2), store, tmp_path / "skip")
    with monkeypatch.context() as patch:
        patch.setattr(BufferPlan, "states_with_examples", lambda plan: np.arange(plan.num_states))
        every, _, _ = run(make_spec(store, options, epochs=2), store, tmp_path / "every")
    assert [s.loss for s in skipping.epochs] == [s.loss for s in every.epochs]
    assert skipping.test_metrics == every.test_metrics
    assert all(s.extra["states_entered"] < s.extra["states"] for s in skipping.epochs)
    assert all(s.extra["states_entered"] == s.extra["states"] for s in every.epochs)
    assert sum(s.extra["io_read_bytes"] for s in skipping.epochs) < sum(s.extra["io_read_bytes"] for s in every.epochs)


def test_reads_are_evicted_from_the_page_cache(store, tmp_path):
    options = {"policy": "beta", "num_partitions": 8, "buffer_capacity": 4, "evict_page_cache": True}
    _, system, _ = run(make_spec(store, options, epochs=1), store, tmp_path)
    resident, total = resident_pages(system.pstore.file("features"))
    assert total > 0 and resident <= 1  # at most the header page, which is read with buffered IO


def test_records_have_io_and_policy_fields(store, tmp_path):
    _, _, recorder = run(make_spec(store, {"policy": "beta", "num_partitions": 8, "buffer_capacity": 4}, epochs=1),
                         store, tmp_path)
    epoch = [r for r in read_records(recorder.run_dir) if r["kind"] == "epoch"][0]
    for key in ("states", "swaps", "io_read_bytes", "disk_read_bytes", "io_wait_s", "policy"):
        assert key in epoch


def test_truncated_partition_file_is_a_clear_error(store, tmp_path):
    import shutil

    copy = tmp_path / "store"
    shutil.copytree(store.path, copy)
    pstore = partitioned_store(GraphStore.open(copy), 8, "train-first", 0)
    features = pstore.file("features")
    with open(features, "r+b") as handle:
        handle.truncate(features.stat().st_size - 100)
    spec = make_spec(GraphStore.open(copy), {"policy": "beta", "num_partitions": 8, "buffer_capacity": 4})
    with pytest.raises(DataError, match="features.npy"):
        run(spec, GraphStore.open(copy), tmp_path / "runs")


def test_a_corrupted_feature_partition_fails_its_checksum(store, tmp_path):
    import shutil

    copy = tmp_path / "store"
    shutil.copytree(store.path, copy)
    pstore = partitioned_store(GraphStore.open(copy), 8, "train-first", 0)
    assert len(pstore.metadata["partitioning"]["feature_crc32"]) == 8
    features = pstore.file("features")
    data = bytearray(features.read_bytes())
    data[-3] ^= 0x40  # one bit of the last partition's last row
    features.write_bytes(bytes(data))
    options = {"policy": "beta", "num_partitions": 8, "buffer_capacity": 4}
    with pytest.raises(DataError, match=r"features\.npy: partition 7 .*CRC-32"):
        run(make_spec(GraphStore.open(copy), options), GraphStore.open(copy), tmp_path / "runs")
    unchecked = make_spec(GraphStore.open(copy), {**options, "verify_checksums": False}, epochs=1)
    run(unchecked, GraphStore.open(copy), tmp_path / "unchecked")  # the check can be turned off


def test_a_corrupted_edge_bucket_fails_its_checksum_naming_the_bucket(store, tmp_path):
    import shutil

    from suite.data.partition import verify_partitioning

    copy = tmp_path / "store"
    shutil.copytree(store.path, copy)
    pstore = partitioned_store(GraphStore.open(copy), 4, "train-first", 0)
    layout = PartitionLayout.from_store(pstore)
    sizes = layout.bucket_sizes().numpy()
    assert len(layout.bucket_crc32) == layout.num_buckets == (sizes > 0).sum()  # the non-empty buckets only
    offsets = np.concatenate([[0], np.cumsum(sizes.ravel())])  # dense bucket boundaries
    partitions = pstore.array("partition_offsets")
    edges = pstore.file("bucket_edges")
    data = bytearray(edges.read_bytes())
    first, last = int(offsets[1 * 4 + 2]), int(offsets[1 * 4 + 3]) - 1  # bucket (1, 2)'s rows: 3 int64 (24 bytes)
    # 8 bytes changed so that the rows stay in range and sorted by (dst, src, rel): only the CRC can tell
    for row, column, value in ((first, 2, int(partitions[2])), (last, 2, int(partitions[3]) - 1),
                               (first, 0, int(partitions[1]))):
        start = len(data) - (int(offsets[-1]) - row) * 24 + 8 * column
        if int.from_bytes(data[start:start + 8], "little") != value:
            data[start:start + 8] = value.to_bytes(8, "little")
            break
    edges.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"bucket_edges\.npy: bucket \(1, 2\) \(edges from partition 1 to "
                                        r"partition 2, \d+ rows\) fails its CRC-32 check"):
        verify_partitioning(GraphStore.open(pstore.path))
    options = {"policy": "in_memory", "num_partitions": 4, "buffer_capacity": 4}
    with pytest.raises(DataError, match=r"bucket_edges\.npy: bucket \(1, 2\) .*fails its CRC-32 check"):
        run(make_spec(GraphStore.open(copy), options, epochs=1), GraphStore.open(copy), tmp_path / "runs")


def test_runs_needing_the_same_partitioned_store_at_once_build_it_once(store, tmp_path):
    import shutil
    import threading

    import suite.data.partition as partition

    copy = tmp_path / "store"
    shutil.copytree(store.path, copy)
    built, results, errors = [], [], []
    real = partition.partition_store

    def counting(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    def run_one() -> None:
        try:
            results.append(partitioned_store(GraphStore.open(copy), 4, "train-first", 0).path)
        except Exception as err:  # noqa: BLE001 - collected for the assertion
            errors.append(err)

    partition.partition_store = counting
    try:
        threads = [threading.Thread(target=run_one) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        partition.partition_store = real
    assert errors == [] and len(set(results)) == 1 and len(results) == 3 and built == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store", "store-p4-train-first-s0"]  # no lock left


def test_bad_options_name_the_field(store):
    with pytest.raises(ConfigError, match="system.options.policy: .*unknown policy 'lru'"):
        make_spec(store, {"policy": "lru"})
    with pytest.raises(ConfigError, match="system.options.buffer_capacity"):
        spec = make_spec(store, {"policy": "beta", "num_partitions": 4, "buffer_capacity": 8})
        disk_system(spec, store, torch.device("cpu"), None)


def test_the_buffer_simulator_prices_the_same_plan_to_the_byte(store, tmp_path):
    """Issue 8: simulators.buffer_model on the plan the disk system executed gives its swaps and bytes exactly."""
    from simulators.buffer_model import DiskModel, simulate

    for policy, options in (("beta", {}), ("comet", {"fine_to_coarse_ratio": 2}), ("dispersed", {})):
        spec_options = {"policy": policy, "num_partitions": 8, "buffer_capacity": 4, "coalesce_bytes": 0, **options}
        outcome, system, _ = run(make_spec(store, spec_options, epochs=1), store, tmp_path / policy)
        plan = system.plan(system.train_nodes, epoch=0)
        pstore = system.pstore
        sizes = np.diff(pstore.array("partition_offsets")) * pstore_row_bytes(pstore)
        buckets = PartitionLayout.from_store(pstore).bucket_sizes().numpy()
        result = simulate(plan, DiskModel(partition_bytes=sizes, learnable=False, bucket_edges=buckets,
                                          edge_bytes=24.0, edge_reads="resident"))
        stats = outcome.epochs[0]
        assert result.swaps == stats.extra["swaps"]
        assert result.bytes_read == stats.extra["io_read_bytes"], policy
        assert result.bytes_written == 0


# ---------------------------------------------------------------------------------------------- residency
@pytest.fixture(scope="module")
def few_labels(tmp_path_factory) -> GraphStore:
    """600 nodes, 75 of them labeled (30 train, 15 valid, 30 test): with p = 8 and a labeled-first order every
    labeled node is in partition 0, as MariusGNN lays out papers100M."""
    graph = planted_partition(num_nodes=600, num_classes=3, signal=0.4, seed=5)
    order = np.random.default_rng(0).permutation(600)
    splits = {"train": np.sort(order[:30]), "valid": np.sort(order[30:45]), "test": np.sort(order[45:75])}
    return write_node_store(tmp_path_factory.mktemp("few") / "store", graph.src, graph.dst, graph.features,
                            graph.labels, splits, name="few-labels")


SEQUENTIAL_LABELED_FIRST = {"policy": "sequential", "num_partitions": 8, "buffer_capacity": 4,
                            "order": "labeled-first"}


def test_in_buffer_evaluation_reads_nothing_and_the_rotation_is_read_ahead(few_labels, tmp_path):
    """``evaluation.graph: buffer``: resident partitions are not read again (evaluations read nothing) and the next
    epoch's partitions are read while the evaluation before it computes (``sequential_rotation``: each epoch's
    free slots are 3 partitions the last epoch did not hold)."""
    options = {**SEQUENTIAL_LABELED_FIRST, "policy": "sequential_rotation"}
    spec = make_spec(few_labels, options, epochs=3, graph="buffer").model_copy(deep=True)
    spec = spec.model_copy(update={"evaluation": spec.evaluation.model_copy(update={"every": 1})})
    outcome, system, recorder = run(spec, few_labels, tmp_path)
    # epoch 0 fills the buffer (partition 0 + 3 others); later epochs read only the 3 rotated partitions
    assert [stats.extra["partitions_read"] for stats in outcome.epochs] == [4, 3, 3]
    records = read_records(recorder.run_dir)
    states = [r for r in records if r["kind"] == "state"]
    evaluations = [r for r in states if r["pass"] != "train"]
    assert len(evaluations) == 4 and all(not r["loads"] and not r["reads"] for r in evaluations)
    warm = [r for r in states if r["pass"] == "train" and r["epoch"] > 0]
    for record in warm:  # read by the prefetch thread while the evaluation before it computed
        assert record["waited_on"] == "prefetch" and record["reads"]
        assert all(read["ahead"] for read in record["reads"])
        assert all(read["end"] <= record["compute_start"] for read in record["reads"])
    passes = [r for r in records if r["kind"] == "pass_io"]
    assert {r["pass"] for r in passes} == {"valid", "test"}
    assert all(r["eval_graph"] == "buffer" and r["io_read_bytes"] == 0 for r in passes)
    assert outcome.summary_extra["evaluation"]["graph"] == "buffer"  # summary.json's "evaluation"
    # nothing is read that no state needed (a pass prepared ahead twice would read its partitions twice)
    needed = sum(stats.extra["io_read_bytes"] for stats in outcome.epochs) + sum(r["io_read_bytes"] for r in passes)
    assert needed == outcome.io_read_bytes
    assert 0.0 <= outcome.test_metrics["accuracy"] <= 1.0


def test_full_graph_evaluation_predicts_what_the_in_memory_task_predicts(store, tmp_path):
    """``evaluation.graph: full`` (the default): a disk run's evaluations, with a buffer of half the partitions,
    give exactly the in-memory task's accuracy and predictions for the same weights on the same (partitioned)
    store; they leave the buffer alone and read only feature rows, recorded apart from training's reads."""
    from systems.tasks.node_classification import NodeClassificationTask, labeled

    spec = make_spec(store, {"policy": "sequential", "num_partitions": 8, "buffer_capacity": 4}, epochs=2)
    outcome, system, recorder = run(spec, store, tmp_path)
    in_memory = NodeClassificationTask(spec, system.pstore, torch.device("cpu"))
    in_memory.setup()
    in_memory.model.load_state_dict(system.task.model.state_dict())
    assert in_memory.evaluate("test") == outcome.test_metrics
    assert in_memory.evaluate("valid") == outcome.valid_metrics[-1][1]
    nodes = labeled(system.pstore.split("test").to(torch.int64), system.labels)
    predicted, io = system.predict_over_whole_graph(nodes)
    assert torch.equal(predicted, in_memory.predict_nodes(nodes))

    row_bytes = pstore_row_bytes(system.pstore)
    assert 0 < io["io_read_bytes"] <= store.num_nodes * row_bytes and io["io_reads"] == 1  # one batch
    records = read_records(recorder.run_dir)
    assert {r["pass"] for r in records if r["kind"] == "state"} == {"train"}  # evaluations walk no buffer state
    passes = [r for r in records if r["kind"] == "pass_io"]
    assert [(r["pass"], r["eval_graph"]) for r in passes] == [("valid", "full"), ("test", "full")]
    assert all(0 < r["io_read_bytes"] <= store.num_nodes * row_bytes and r["io_read_s"] > 0 for r in passes)
    evaluation = outcome.summary_extra["evaluation"]  # summary.json's "evaluation"
    assert evaluation["graph"] == "full"
    assert evaluation["io_read_bytes"] == sum(r["io_read_bytes"] for r in passes)
    trained = sum(stats.extra["io_read_bytes"] for stats in outcome.epochs)
    assert outcome.io_read_bytes == trained + evaluation["io_read_bytes"]


def test_rows_on_demand_reads_each_distinct_row_once(tmp_path, monkeypatch):
    from suite.io import IOCounters
    from systems.disk import buffer
    from systems.disk.buffer import PartitionArray, RowsOnDemand

    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    np.save(tmp_path / "rows.npy", table)
    for max_extents, read_bytes in ((buffer.ROW_SET_MAX_EXTENTS, 8 * 16),  # rows 0..7: one extent, gaps read through
                                    (0, 3 * 16)):  # through the memory map: the 3 distinct rows
        monkeypatch.setattr(buffer, "ROW_SET_MAX_EXTENTS", max_extents)
        counters = IOCounters()
        rows = RowsOnDemand(PartitionArray(tmp_path / "rows.npy", counters))
        try:
            got = rows.index_select(0, torch.tensor([7, 2, 7, 0]))
        finally:
            rows.source.close()
        assert torch.equal(got, torch.from_numpy(table[[7, 2, 7, 0]]))
        assert rows.bytes_read == read_bytes == counters.snapshot()["bytes_read"] and rows.reads == 1


def test_a_row_set_is_read_as_extents_in_file_order(tmp_path, monkeypatch):
    from suite.io import IOCounters
    from systems.disk import buffer
    from systems.disk.buffer import PartitionArray, row_extents

    # 1 KiB rows; gaps of at most 8 KiB (8 rows) read through; at most 16 KiB (16 rows) a read
    starts, stops = row_extents(np.array([0, 1, 5, 40]), 1024, 8 << 10, 16 << 10)
    assert starts.tolist() == [0, 40] and stops.tolist() == [6, 41]
    starts, stops = row_extents(np.arange(0, 40, 2), 1024, 8 << 10, 16 << 10)
    assert starts.tolist() == [0, 16, 32] and stops.tolist() == [15, 31, 39]
    assert [a.tolist() for a in row_extents(np.array([3]), 1 << 30, 0, 1)] == [[3], [4]]
    assert [len(a) for a in row_extents(np.array([], dtype=np.int64), 8, 0, 8)] == [0, 0]

    table = np.arange(64 * 256, dtype=np.float32).reshape(64, 256)  # 1 KiB rows
    np.save(tmp_path / "wide.npy", table)
    monkeypatch.setattr(buffer, "ROW_SET_GAP_BYTES", 8 << 10)
    monkeypatch.setattr(buffer, "ROW_SET_EXTENT_BYTES", 16 << 10)
    source = PartitionArray(tmp_path / "wide.npy", IOCounters())
    try:
        wanted = np.array([40, 5, 0, 1, 63, 30])  # any order: rows come back in it
        rows, nbytes = source.read_row_set(wanted)
    finally:
        source.close()
    assert torch.equal(rows, torch.from_numpy(table[wanted]))
    assert nbytes == (6 + 1 + 1 + 1) * 1024  # [0, 6), [30, 31), [40, 41), [63, 64): the gaps > 8 rows skipped


def test_the_timeline_reads_as_a_table(few_labels, tmp_path):
    from suite.results import load_timeline

    run(make_spec(few_labels, SEQUENTIAL_LABELED_FIRST, epochs=2), few_labels, tmp_path)
    table = load_timeline(tmp_path)
    assert {"run_dir", "pass", "epoch", "state", "activity", "lane", "start", "end", "bytes"} <= set(table.columns)
    assert {"read", "build", "wait", "compute"} <= set(table["activity"])
    assert (table["end"] >= table["start"]).all()
    reads = table[table["activity"] == "read"]
    assert set(reads["lane"]) <= {"prefetch", "compute"} and (reads["bytes"] > 0).all()


def test_the_pipelined_disk_system_trains_within_its_staleness_bound(few_labels, store, tmp_path):
    base = {"policy": "comet", "num_partitions": 8, "buffer_capacity": 4, "fine_to_coarse_ratio": 2}
    piped = {**base, "pipeline": {"batch_loader_threads": 2, "staleness_bound": 4}}
    outcome, _, recorder = run(make_spec(store, piped), store, tmp_path / "a")
    assert outcome.test_metrics["accuracy"] > 0.6
    assert all(0 <= s < 4 for stats in outcome.epochs for s in stats.staleness)
    assert any(r["kind"] == "batch" for r in read_records(recorder.run_dir))
    synchronous, _, _ = run(make_spec(store, base, epochs=2), store, tmp_path / "b")
    in_sync, _, _ = run(make_spec(store, {**base, "pipeline": {"sync": True}}, epochs=2), store, tmp_path / "c")
    assert [s.loss for s in in_sync.epochs] == [s.loss for s in synchronous.epochs]


def test_the_thread_budget_leaves_a_core_to_the_prefetch_thread(store, tmp_path):
    from suite.threads import usable_cores

    options = {"policy": "beta", "num_partitions": 8, "buffer_capacity": 4}
    outcome, _, _ = run(make_spec(store, options, epochs=1), store, tmp_path / "a")
    assert outcome.threads["own_threads"] == 1 and outcome.threads["source"] == "default"
    assert outcome.threads["compute"] == max(1, usable_cores() - 1)
    pinned, _, _ = run(make_spec(store, {**options, "compute_threads": 3}, epochs=1), store, tmp_path / "b")
    assert pinned.threads["compute"] == 3 and pinned.threads["source"] == "option"


def test_rgcn_from_the_buffer_computes_what_it_computes_over_the_whole_graph(tiny_directed, tmp_path):
    """Node classification with R-GCN from disk. With the whole graph in the buffer, its output for every node
    (full 2-hop neighbourhoods, the state's in-buffer graph and relation lookup over buffer rows) equals the same
    model's output over the store's graph and lookup in node ids; then a run with a buffer of half the partitions
    trains. (A directed store: its CSRs hold each edge once, as the buckets do.)"""
    from systems.models.rgcn import RelationLookup
    from systems.sampling.sampler import SamplingGraph
    from systems.sampling.dense import DenseSampler

    store = tiny_directed
    spec = spec_from_dict({
        "dataset": {"name": "store", "root": str(store.path)},
        "model": {"encoder": "rgcn", "num_layers": 2, "hidden_dim": 16, "fanouts": [-1, -1], "dropout": 0.0,
                  "num_bases": 2},
        "sampler": {"name": "dense", "direction": "both"},
        "system": {"name": "disk", "device": "cpu",
                   "options": {"policy": "in_memory", "num_partitions": 4, "buffer_capacity": 4}},
        "training": {"batch_size": 32, "epochs": 4, "learning_rate": 0.01},
        "evaluation": {"every": 4},
    })
    system = disk_system(spec, store, torch.device("cpu"), Recorder(tmp_path / "whole", spec))
    system.setup()
    model = system.task.model.eval()
    nodes = torch.arange(store.num_nodes)
    try:
        plan, steps, first = system.begin_pass(("train", 0))
        data, _ = next(system.walk(("train", 0), plan, steps, first))
        system.bind_training_state(data, plan, torch.Generator().manual_seed(0))
        assert model.relation_lookup is data.relation_lookup is not None
        rows = system.buffer.node_row[nodes]
        assert bool((rows >= 0).all())
        sample = DenseSampler(data.graph, [-1, -1]).sample(rows, torch.Generator().manual_seed(0))
        from_buffer = model(system.buffer.rows[sample.input_nodes].float(), sample)
        pstore = system.pstore
        model.relation_lookup = RelationLookup.from_store(pstore, "both")
        sample = DenseSampler(SamplingGraph.from_store(pstore, "both"), [-1, -1]).sample(
            nodes, torch.Generator().manual_seed(0))
        whole = model(torch.from_numpy(np.asarray(pstore.array("features")))[sample.input_nodes].float(), sample)
    finally:
        system.teardown()
    assert from_buffer.shape == (store.num_nodes, store.num_classes)
    assert torch.allclose(from_buffer, whole, atol=1e-5)
    half = spec.model_copy(update={"system": spec.system.model_copy(update={"options": {
        "policy": "comet", "num_partitions": 8, "buffer_capacity": 4, "fine_to_coarse_ratio": 2}})})
    outcome, _, _ = run(half, store, tmp_path / "half")
    assert outcome.epochs[-1].loss < outcome.epochs[0].loss
    assert outcome.test_metrics["accuracy"] > 0.25  # 4 classes


def test_an_encoder_that_reads_no_neighbours_trains_from_disk_and_evaluates_either_way(store, tmp_path):
    """``model.encoder: mlp`` reads only the roots' own rows: the disk system builds no in-buffer graph for it
    (its states read feature partitions only), samples the roots alone, and a full-graph evaluation predicts what
    an in-buffer one predicts (neither needs a neighbour). It used to fail with an AttributeError (a sampler over
    the missing graph)."""
    options = {"policy": "sequential", "num_partitions": 8, "buffer_capacity": 4}
    accuracies = {}
    for graph in ("full", "buffer"):
        outcome, system, _ = run(make_spec(store, options, graph=graph, encoder="mlp"), store, tmp_path / graph)
        assert not system.needs_graph and system.task.train_sampler is None  # released after the last state
        assert all(stats.examples == len(system.train_nodes) for stats in outcome.epochs)
        accuracies[graph] = outcome.test_metrics["accuracy"]
    assert accuracies["full"] == accuracies["buffer"]
    assert accuracies["full"] > 0.45  # 3 classes: chance is 1/3; the features alone carry the planted signal


# ---------------------------------------------------------------------------------------------- dispersed states
DISPERSED_LABELED_FIRST = {"policy": "dispersed", "num_partitions": 8, "buffer_capacity": 2,
                           "order": "labeled-first"}


def test_state_batches_cut_roots_and_give_an_empty_state_no_batch():
    from systems.disk.disk_system import state_batches_of

    batches = state_batches_of(torch.arange(5), batch_size=2, epoch=3, first_index=7)
    assert [b.roots.tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    assert [b.index for b in batches] == [7, 8, 9] and all(b.epoch == 3 for b in batches)
    assert state_batches_of(torch.empty(0, dtype=torch.int64), batch_size=2, epoch=0, first_index=0) == []


def test_every_dispersed_state_holds_the_stores_rows_and_each_training_node_once(few_labels, tmp_path):
    """``dispersed`` with every training node in partition 0 (labeled-first, p = 8, c = 2): after every swap the
    buffer rows of every resident node are the store's feature rows, each state's training nodes are resident, and
    over the epoch every training node is trained exactly once."""
    spec = make_spec(few_labels, DISPERSED_LABELED_FIRST, epochs=1)
    recorder = Recorder(tmp_path, spec)
    system = disk_system(spec, few_labels, torch.device("cpu"), recorder)
    system.setup()
    try:
        features = system.pstore.features
        plan, steps, first = system.begin_pass(("train", 0))
        trained = []
        for data, _ in system.walk(("train", 0), plan, steps, first):
            live = torch.nonzero(system.buffer.node_row >= 0).squeeze(1)
            assert torch.equal(system.buffer.rows[system.buffer.node_row[live]], features[live])
            nodes = system.train_nodes[torch.from_numpy(plan.examples_of_state(data.step.index))]
            rows = system.bind_training_state(data, plan, torch.Generator().manual_seed(0))
            assert sorted(rows.tolist()) == sorted(system.buffer.node_row[nodes].tolist())
            assert torch.equal(system.buffer.rows[system.buffer.node_row[nodes]], features[nodes])
            assert torch.equal(system.labels_by_row[system.buffer.node_row[nodes]], system.labels[nodes])
            trained.extend(nodes.tolist())
        assert sorted(trained) == sorted(system.train_nodes.tolist())
    finally:
        system.teardown()
        recorder.close()


def test_a_dispersed_state_without_training_nodes_takes_no_optimizer_step(few_labels, tmp_path):
    """The epoch's optimizer steps are the batches of the states that hold training nodes (one each here: 30
    training nodes, batches of 32); a state without any trains nothing (before, it took one step on an empty batch,
    which Adam's momentum turns into a move of every weight)."""
    spec = make_spec(few_labels, DISPERSED_LABELED_FIRST, epochs=1)
    outcome, system, _ = run(spec, few_labels, tmp_path)
    _, offsets = system.plan(system.train_nodes, epoch=0).examples_by_state()
    per_state = np.diff(offsets)
    assert per_state.sum() == len(system.train_nodes) == 30
    assert (per_state == 0).any()  # the case under test: some states hold no training node
    assert system.task.optimizer_steps == int((per_state > 0).sum())
    assert len(outcome.epochs[0].staleness) == int((per_state > 0).sum())  # one per batch
