"""The in-buffer graph: the held buckets' CSR over buffer frames, by hand and checked against the store's own CSR
restricted to the resident partitions; reads by coalesced extents; and the frame-level steps of a plan."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from suite.io import IOCounters
from suite.data.partition import PartitionLayout
from systems.disk.graph import BufferedGraph, _counting_order, coalesced_extents, state_csr
from systems.disk.policies import PolicySpec, make_plan
from systems.disk.disk_system import partitioned_store, plan_steps
from tests.support.graphs import planted_partition, write_node_store


@pytest.fixture(scope="module")
def pstore(tmp_path_factory):
    graph = planted_partition(num_nodes=300, num_classes=3, seed=1)
    store = write_node_store(tmp_path_factory.mktemp("graph") / "store", graph.src, graph.dst, graph.features,
                             graph.labels, graph.splits, directed=True)
    return partitioned_store(store, 6, "random", 0)


def test_state_csr_by_hand():
    """Bucket (0, 1) of partitions of sizes 3 and 2 (partition 1 in frame 0, partition 0 in frame 2, frames of 4
    rows: rows 0-1 and 8-10): edges 0->1, 2->0, 1->1 (local ids) in the bucket's order (by destination), i.e.
    buffer rows 8->1, 10->0, 9->1."""
    src, dst = np.array([10, 8, 9]), np.array([0, 1, 1])
    graph = state_csr(src, dst, np.zeros(3, dtype=np.int64), 12, "both")
    neighbours = {r: graph.indices[graph.indptr[r]:graph.indptr[r + 1]].tolist() for r in range(12)}
    assert neighbours[0] == [10] and neighbours[1] == [8, 9]  # in-neighbours, in the bucket's order
    assert neighbours[8] == [1] and neighbours[9] == [1] and neighbours[10] == [0]  # out-neighbours
    assert sum(len(v) for v in neighbours.values()) == 6
    into = state_csr(src, dst, np.zeros(3, dtype=np.int64), 12, "in")
    assert into.indptr.tolist() == [0, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3] and into.indices.tolist() == [10, 8, 9]


def test_extents_merge_adjacent_and_close_ranges():
    starts, stops = np.array([0, 3, 10, 40]), np.array([3, 5, 12, 41])
    assert [x.tolist() for x in coalesced_extents(starts, stops, 0)] == [[0, 10, 40], [5, 12, 41]]
    assert [x.tolist() for x in coalesced_extents(starts, stops, 5)] == [[0, 40], [12, 41]]
    assert [x.tolist() for x in coalesced_extents(starts, stops, 28)] == [[0], [41]]


def test_counting_order_is_stable():
    keys = np.array([2, 0, 2, 1, 0, 2])
    assert _counting_order(keys, 3).tolist() == [1, 4, 3, 0, 2, 5]


@pytest.mark.parametrize("direction", ["in", "out", "both"])
def test_assembled_csr_is_the_graph_restricted_to_the_buffer(pstore, direction):
    graph = BufferedGraph(pstore, direction, IOCounters(), evict=False)
    offsets = pstore.array("partition_offsets")
    max_rows = int(np.diff(offsets).max())
    layout = np.array([4, -1, 1, 0, -1])  # partition 4 in frame 0, 1 in frame 2, 0 in frame 3
    graph.hold(layout)
    csr = graph.build(layout, max_rows)
    to_global = {}
    for frame, part in enumerate(layout):
        if part >= 0:
            for r in range(int(offsets[part + 1] - offsets[part])):
                to_global[frame * max_rows + r] = int(offsets[part]) + r
    resident = lambda v: any(offsets[p] <= v < offsets[p + 1] for p in (4, 1, 0))  # noqa: E731
    stores = {"in": [pstore.csr("in")], "out": [pstore.csr("out")], "both": [pstore.csr("in"), pstore.csr("out")]}
    for row in range(len(csr.indptr) - 1):
        got = [to_global[int(v)] for v in csr.indices[csr.indptr[row]:csr.indptr[row + 1]]]
        if row not in to_global:
            assert got == []
            continue
        node = to_global[row]
        expected = []
        for store_csr in stores[direction]:
            part = [int(v) for v in store_csr.indices[store_csr.indptr[node]:store_csr.indptr[node + 1]]]
            expected.extend(sorted(v for v in part if resident(v)))
        # same multiset, and within each direction ordered by (neighbour partition, id): ids are sorted here
        assert sorted(got) == sorted(expected), (direction, node)
        if direction != "both":
            assert got == sorted(got)


def test_a_held_bucket_is_not_read_again(pstore):
    counters = IOCounters()
    graph = BufferedGraph(pstore, "in", counters, evict=False)
    graph.hold(np.array([0, 1]))
    first = counters.snapshot()["bytes_read"]
    graph.hold(np.array([0, 1, 2]))  # reads only the buckets with partition 2
    bucket_rows = PartitionLayout.from_store(pstore).bucket_sizes().numpy()
    new = bucket_rows[2, [0, 1, 2]].sum() + bucket_rows[[0, 1], 2].sum()
    assert graph.held_edges == bucket_rows[:3, :3].sum()
    read = counters.snapshot()["bytes_read"] - first
    assert read >= new * 3 * 8  # the new buckets, and between them (coalesced) at most the rows of the extents
    graph.hold(np.array([2]))  # drops the others, reads nothing
    assert graph.held_buckets == [(2, 2)] and counters.snapshot()["bytes_read"] - first == read
    graph.close()


def test_without_coalescing_only_the_new_buckets_are_read(pstore):
    counters = IOCounters()
    graph = BufferedGraph(pstore, "in", counters, evict=False, coalesce_bytes=0)
    graph.hold(np.array([0, 1]))
    first = counters.snapshot()["bytes_read"]
    events = graph.hold(np.array([0, 1, 2]))
    bucket_rows = PartitionLayout.from_store(pstore).bucket_sizes().numpy()
    new = bucket_rows[2, [0, 1, 2]].sum() + bucket_rows[[0, 1], 2].sum()
    assert counters.snapshot()["bytes_read"] - first == new * 3 * 8
    # (0, 2), (1, 2) and the run (2, 0) (2, 1) (2, 2) adjacent on disk: three reads
    assert len(events) == 3 and sum(event.bytes for event in events) == new * 3 * 8
    graph.close()


def test_the_csr_does_not_depend_on_the_frames(pstore):
    graph = BufferedGraph(pstore, "in", IOCounters(), evict=False)
    offsets = pstore.array("partition_offsets")
    max_rows = int(np.diff(offsets).max())
    lists = []
    for layout in (np.array([0, 3, 5, -1]), np.array([-1, 5, 0, 3])):
        graph.hold(layout)
        csr = graph.build(layout, max_rows)
        frame_of = {int(p): f for f, p in enumerate(layout) if p >= 0}
        by_node = {}
        for part in (0, 3, 5):
            for r in range(int(offsets[part + 1] - offsets[part])):
                row = frame_of[part] * max_rows + r
                nbrs = csr.indices[csr.indptr[row]:csr.indptr[row + 1]]
                by_node[int(offsets[part]) + r] = [int(layout[int(v) // max_rows]) * 10_000 + int(v) % max_rows
                                                   for v in nbrs]
        lists.append(by_node)
    assert lists[0] == lists[1]  # same neighbour lists, in the same order, as (partition, row) pairs


def test_plan_steps_keep_residents_and_read_into_free_frames():
    spec = PolicySpec(8, 3)
    plan = make_plan("beta", spec, randomize=False)
    # the canonical BETA p=8, c=3 starts with {0, 1, 2}; partitions 1 and 6 are resident in frames 0 and 3
    steps = plan_steps(plan, np.array([1, -1, -1, 6, -1]))
    first = steps[0]
    assert sorted(plan.state(0).tolist()) == [0, 1, 2]
    assert first.loads.tolist() == [0, 2] and first.frames.tolist() == [1, 2] and first.ahead.all()
    assert first.evicts.tolist() == [3] and sorted(first.layout.tolist()) == [-1, -1, 0, 1, 2]
    for k, step in enumerate(steps):
        assert sorted(p for p in step.layout.tolist() if p >= 0) == sorted(plan.state(k).tolist())
        if k:
            assert len(step.loads) == len(plan.transition(k).partitions_loaded)
            assert step.ahead.all()  # 5 frames for 3 partitions: every read has a free frame
    tight = plan_steps(plan, np.full(3, -1))  # no spare frame: each swap reuses the evicted frame
    assert all(not step.ahead.any() for step in tight[1:])
    assert all(set(step.frames.tolist()) <= set(step.evicts.tolist()) for step in tight[1:])


def test_typed_state_csr_by_hand():
    """The bucket of test_state_csr_by_hand with relations 0, 2, 1 of R = 3: in-neighbours keep ``r``,
    out-neighbours (reverse edges) get ``r + 3``; the graph's relations follow its neighbour lists."""
    graph = state_csr(np.array([10, 8, 9]), np.array([0, 1, 1]), np.array([0, 2, 1]), 12, "both", relations=3)
    types = {r: graph.relations[graph.indptr[r]:graph.indptr[r + 1]].tolist() for r in range(12)}
    assert types[0] == [0] and types[1] == [2, 1]
    assert types[8] == [5] and types[9] == [4] and types[10] == [3]


@pytest.mark.parametrize("direction", ["in", "out", "both"])
def test_typed_in_buffer_graph_has_the_stores_relation_types(tiny, direction):
    """Every typed edge of the in-buffer graph, mapped back to node ids, is one of the store's typed training edges
    (the buckets hold those) between resident partitions, and each of those is there once: a multiset of
    (node, neighbour, type), ``type + R`` for out-neighbours."""
    pstore = partitioned_store(tiny, 4, "random", 0)
    relations = pstore.num_relations
    assert relations == 3
    graph = BufferedGraph(pstore, direction, IOCounters(), evict=False, typed=True)
    offsets = pstore.array("partition_offsets")
    max_rows = int(np.diff(offsets).max())
    layout = np.array([3, -1, 0])
    graph.hold(layout)
    csr = graph.build(layout, max_rows)
    frame_rows = np.full(len(layout) * max_rows, -1)
    for frame, part in enumerate(layout):
        if part >= 0:
            size = int(offsets[part + 1] - offsets[part])
            frame_rows[frame * max_rows:frame * max_rows + size] = np.arange(offsets[part], offsets[part] + size)
    rows = np.repeat(np.arange(len(csr.indptr) - 1), np.diff(csr.indptr.numpy()))
    got = sorted(zip(frame_rows[rows].tolist(), frame_rows[csr.indices.numpy()].tolist(), csr.relations.tolist()))
    resident = np.zeros(pstore.num_nodes, dtype=bool)
    for part in (3, 0):
        resident[offsets[part]:offsets[part + 1]] = True
    src, rel, dst = pstore.edges("train").numpy().T
    keep = resident[src] & resident[dst]
    expected = []
    if direction in ("in", "both"):
        expected += list(zip(dst[keep].tolist(), src[keep].tolist(), rel[keep].tolist()))
    if direction in ("out", "both"):
        expected += list(zip(src[keep].tolist(), dst[keep].tolist(), (rel[keep] + relations).tolist()))
    assert len(set(rel[keep].tolist())) == 3 and len(expected) > 50 and got == sorted(expected)
    graph.close()


def test_a_run_of_adjacent_partitions_is_one_scatter_read(pstore):
    from systems.disk.buffer import FeatureBuffer, PartitionArray, partition_runs

    assert [(r.start, r.stop) for r in partition_runs(np.array([2, 3, 4, 7, 9, 10]))] == [(0, 3), (3, 4), (4, 6)]
    counters = IOCounters()
    offsets = pstore.array("partition_offsets")
    buffer = FeatureBuffer(PartitionArray(pstore.file("features"), counters, evict=False), offsets, 4,
                           checksums=pstore.metadata["partitioning"]["feature_crc32"])
    nbytes = buffer.read_run([1, 2, 3], [3, 0, 2])  # partitions 1..3 into frames 3, 0, 2
    features = pstore.array("features")
    assert nbytes == (offsets[4] - offsets[1]) * features.shape[1] * features.dtype.itemsize
    assert counters.snapshot()["reads"] == 1
    for part, frame in ((1, 3), (2, 0), (3, 2)):
        size = int(offsets[part + 1] - offsets[part])
        assert np.array_equal(buffer.frames[frame, :size].numpy(), features[offsets[part]:offsets[part + 1]])
    buffer.source.close()
