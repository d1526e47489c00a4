"""Tests of suite.data.partition on tiny stores whose partitioned layout was worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suite.errors import ConfigError, DataError
from suite.data import partition as partition_module
from suite.data.csr import EdgeChunk, write_csrs
from suite.data.partition import (
    LAYOUT_VERSION,
    ORDERINGS,
    PartitionLayout,
    inverse_permutation,
    partition_offsets,
    partition_store,
    verify_partitioning,
)
from suite.data.store import GraphStore, create_store

# --------------------------------------------------------------------------------------------- fixtures
# The hand-checked node-classification graph: 6 nodes, 8 directed edges (one self-loop).
EDGES_6 = np.array([(0, 1), (0, 2), (1, 3), (2, 5), (3, 4), (4, 0), (5, 1), (5, 5)], dtype=np.int64)
FEATURES_6 = np.array([[v, 10 * v] for v in range(6)], dtype=np.float32)
LABELS_6 = np.array([0, 1, 1, 2, 2, -1], dtype=np.int64)
ORDER_6 = np.array([3, 0, 5, 1, 4, 2], dtype=np.int64)  # node_map: new id i is original node ORDER_6[i]


def build_store(path: Path, num_nodes: int, src, dst, rel=None, *, num_relations: int = 1, features=None,
                labels=None, num_classes: int = 0, arrays: dict | None = None, directed: bool = True) -> GraphStore:
    """A store from explicit edges (CSRs through write_csrs) plus optional features, labels and extra arrays."""
    with create_store(path) as writer:
        chunk = EdgeChunk(np.asarray(src, np.int64), np.asarray(dst, np.int64),
                          None if rel is None else np.asarray(rel, np.int32))
        m = write_csrs(writer, [chunk], num_nodes, num_relations=num_relations)
        if features is not None:
            writer.write_array("features", np.asarray(features))
        if labels is not None:
            writer.write_array("labels", np.asarray(labels, np.int64))
        for key, value in (arrays or {}).items():
            writer.write_array(key, np.asarray(value))
        writer.finalize(
            name=path.name, num_nodes=num_nodes, num_edges=m, directed=directed, num_relations=num_relations,
            num_classes=num_classes, feature_dim=0 if features is None else np.asarray(features).shape[1],
            labeled_nodes=None if labels is None else int((np.asarray(labels) >= 0).sum()),
        )
    return GraphStore.open(path)


@pytest.fixture
def store6(tmp_path) -> GraphStore:
    return build_store(
        tmp_path / "six", 6, EDGES_6[:, 0], EDGES_6[:, 1], features=FEATURES_6, labels=LABELS_6, num_classes=3,
        arrays={"train_nodes": np.array([0, 4, 5]), "valid_nodes": np.array([1]), "test_nodes": np.array([2, 3]),
                "node_weights": np.arange(6, dtype=np.float32)},
    )


@pytest.fixture
def order_file(tmp_path) -> Path:
    path = tmp_path / "order.npy"
    np.save(path, ORDER_6)
    return path


def random_store(path: Path, n: int = 120, m: int = 700, num_relations: int = 3, seed: int = 1) -> GraphStore:
    rng = np.random.default_rng(seed)
    train = rng.choice(n, size=n // 3, replace=False)
    return build_store(
        path, n, rng.integers(0, n, m), rng.integers(0, n, m), rng.integers(0, num_relations, m),
        num_relations=num_relations, features=rng.standard_normal((n, 5)).astype(np.float32),
        labels=rng.integers(-1, 4, n), num_classes=4, arrays={"train_nodes": train},
    )


def edge_rows(store: GraphStore) -> np.ndarray:
    """All edges of a store as sorted (src, rel, dst) rows."""
    csr = store.csr("out")
    src = np.repeat(np.arange(store.num_nodes), csr.degrees().numpy())
    rel = np.zeros(len(src), np.int64) if csr.relations is None else csr.relations.numpy()
    return sort_rows(np.column_stack([src, rel, csr.indices.numpy()]))


def sort_rows(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.int64)
    return rows[np.lexsort(rows.T[::-1])]


def map_back(rows: np.ndarray, node_map: np.ndarray) -> np.ndarray:
    rows = np.array(rows, dtype=np.int64)
    rows[:, 0], rows[:, 2] = node_map[rows[:, 0]], node_map[rows[:, 2]]
    return rows


def dense_bucket_offsets(store) -> list[int]:
    """The ``p * p + 1`` bucket boundaries of a partitioned store, from its sparse bucket index."""
    return [0, *np.cumsum(PartitionLayout.from_store(store).bucket_sizes().numpy().ravel()).tolist()]


# --------------------------------------------------------------------------------------------- by hand
@pytest.mark.parametrize("small_chunks", [False, True])
def test_given_order_matches_hand_computed_layout(store6, order_file, tmp_path, small_chunks):
    tuning = dict(chunk_edges=2, max_bucket_edges=2, chunk_bytes=8) if small_chunks else {}
    out = partition_store(store6, tmp_path / "out", 3, order=order_file, **tuning)
    out.verify()
    verify_partitioning(out)
    # inverse (original -> new): 3->0, 0->1, 5->2, 1->3, 4->4, 2->5; partitions {0,1} {2,3} {4,5}
    assert out.array("node_map").tolist() == [3, 0, 5, 1, 4, 2]
    assert out.array("partition_offsets").tolist() == [0, 2, 4, 6]
    # relabelled edges: (1,3) (1,5) (3,0) (5,2) (0,4) (4,1) (2,3) (2,2); bucket = (src//2)*3 + dst//2
    # the sparse index: non-empty buckets (0,1) (0,2) (1,0) (1,1) (2,0) (2,1)
    assert out.array("bucket_row_offsets").tolist() == [0, 2, 4, 6]
    assert out.array("bucket_dst").tolist() == [1, 2, 0, 1, 0, 1]
    assert out.array("bucket_edge_offsets").tolist() == [0, 1, 3, 4, 6, 7, 8]
    assert dense_bucket_offsets(out) == [0, 0, 1, 3, 4, 6, 6, 7, 8, 8]
    assert out.array("bucket_edges").tolist() == [
        [1, 0, 3],                # (0, 1)
        [0, 0, 4], [1, 0, 5],     # (0, 2)
        [3, 0, 0],                # (1, 0)
        [2, 0, 2], [2, 0, 3],     # (1, 1)
        [4, 0, 1],                # (2, 0)
        [5, 0, 2],                # (2, 1)
    ]
    assert out.array("out_indptr").tolist() == [0, 1, 3, 5, 6, 7, 8]
    assert out.array("out_indices").tolist() == [4, 3, 5, 2, 3, 0, 1, 2]
    assert out.array("features").tolist() == [[3, 30], [0, 0], [5, 50], [1, 10], [4, 40], [2, 20]]
    assert out.array("labels").tolist() == [2, 0, -1, 1, 2, 1]
    assert out.array("train_nodes").tolist() == [1, 4, 2]
    assert out.array("valid_nodes").tolist() == [3]
    assert out.array("test_nodes").tolist() == [5, 0]
    # the relabelled graph mapped back through node_map is the original graph
    expected = sort_rows(np.column_stack([EDGES_6[:, 0], np.zeros(8, np.int64), EDGES_6[:, 1]]))
    assert np.array_equal(sort_rows(map_back(edge_rows(out), ORDER_6)), expected)
    # metadata: counts, provenance and the note about the dropped extra key
    meta = out.metadata
    assert (meta["num_nodes"], meta["num_edges"], meta["num_classes"], meta["feature_dim"]) == (6, 8, 3, 2)
    assert meta["labeled_nodes"] == 5
    part = meta["partitioning"]
    assert part["num_partitions"] == 3 and part["order"] == "file" and part["order_file"] == str(order_file)
    assert part["source_store"] == str(store6.path) and part["source_checksum"].startswith("sha256:")
    assert part["bucket_source"] == "edges" and part["dropped_keys"] == ["node_weights"]
    assert not out.has("node_weights")
    assert meta["source"]["store"] == str(store6.path)
    assert not list(out.path.glob("_*")), "scratch folders must not stay in the store"


def test_layout_accessors(store6, order_file, tmp_path):
    layout = PartitionLayout.from_store(partition_store(store6, tmp_path / "out", 3, order=order_file))
    assert layout.num_partitions == 3
    assert layout.partition_range(1) == (2, 4)
    assert layout.partition_sizes().tolist() == [2, 2, 2]
    assert layout.bucket(0, 2).tolist() == [[0, 0, 4], [1, 0, 5]]
    assert layout.bucket(2, 2).tolist() == []
    assert layout.bucket_sizes().tolist() == [[0, 1, 2], [1, 2, 0], [1, 1, 0]]
    import torch
    assert layout.partition_of(torch.tensor([0, 1, 2, 5])).tolist() == [0, 0, 1, 2]


def test_partition_offsets_are_balanced():
    assert partition_offsets(7, 3).tolist() == [0, 3, 5, 7]
    assert partition_offsets(10, 6).tolist() == [0, 2, 4, 6, 8, 9, 10]
    assert partition_offsets(5, 5).tolist() == [0, 1, 2, 3, 4, 5]
    assert partition_offsets(4, 1).tolist() == [0, 4]


def test_inverse_permutation():
    assert inverse_permutation(ORDER_6).tolist() == [1, 3, 5, 0, 4, 2]


# --------------------------------------------------------------------------------------------- link prediction
def test_link_prediction_buckets_hold_train_edges_with_relations(tmp_path):
    train = np.array([(0, 1, 2), (3, 0, 1), (4, 1, 0), (2, 0, 4), (1, 0, 3), (0, 0, 3)], dtype=np.int64)
    store = build_store(
        tmp_path / "kg", 5, train[:, 0], train[:, 2], train[:, 1], num_relations=2,
        arrays={"train_edges": train, "valid_edges": np.array([(1, 1, 3)]), "test_edges": np.array([(2, 0, 0)])},
    )
    order = tmp_path / "kg-order.npy"
    np.save(order, np.array([4, 2, 0, 3, 1]))  # inverse: 0->2, 1->4, 2->1, 3->3, 4->0
    for name, tuning in (("a", {}), ("b", dict(chunk_edges=2, max_bucket_edges=2, chunk_bytes=24))):
        out = partition_store(store, tmp_path / name, 2, order=order, **tuning)
        out.verify()
        verify_partitioning(out)
        # 5 nodes in 2 partitions: {0,1,2} {3,4}; relabelled train edges: (2,1,1) (3,0,4) (0,1,2) (1,0,0)
        # (4,0,3) (2,0,3)
        assert out.array("partition_offsets").tolist() == [0, 3, 5]
        assert dense_bucket_offsets(out) == [0, 3, 4, 4, 6]
        assert out.array("bucket_dst").tolist() == [0, 1, 1]
        assert out.array("bucket_edges").tolist() == [
            [1, 0, 0], [2, 1, 1], [0, 1, 2],  # (0, 0), by destination
            [2, 0, 3],                        # (0, 1)
            [4, 0, 3], [3, 0, 4],             # (1, 1)
        ]
        assert out.array("train_edges").tolist() == [[2, 1, 1], [3, 0, 4], [0, 1, 2], [1, 0, 0], [4, 0, 3],
                                                     [2, 0, 3]]
        assert out.array("valid_edges").tolist() == [[4, 1, 3]]
        assert out.array("test_edges").tolist() == [[1, 0, 2]]
        assert out.array("out_relations").tolist() == [1, 0, 1, 0, 0, 0]  # out-CSR by (src, dst, rel)
        assert out.metadata["partitioning"]["bucket_source"] == "train_edges"
        assert out.num_relations == 2


def test_train_first_for_link_prediction_puts_train_edge_endpoints_first(tmp_path):
    train = np.array([(5, 0, 6), (6, 0, 7)])
    store = build_store(tmp_path / "kg", 8, [0, 1, 5, 6], [1, 2, 6, 7],
                        arrays={"train_edges": train, "test_edges": np.array([(0, 0, 1)])})
    out = partition_store(store, tmp_path / "out", 4, order="train-first")
    assert sorted(out.array("node_map")[:3].tolist()) == [5, 6, 7]
    assert out.array("bucket_edges")[:, [0, 2]].max() < 3


# --------------------------------------------------------------------------------------------- orderings
def test_train_first_puts_training_nodes_in_the_first_partitions(tmp_path):
    store = random_store(tmp_path / "g", n=120)
    train = np.asarray(store.array("train_nodes"))
    out = partition_store(store, tmp_path / "out", 6, order="train-first", seed=3)  # 20 nodes per partition
    node_map = np.asarray(out.array("node_map"))
    assert set(node_map[: len(train)].tolist()) == set(train.tolist())
    assert sorted(out.array("train_nodes").tolist()) == list(range(len(train)))
    # 40 training nodes fill partitions 0 and 1 exactly
    assert out.array("partition_offsets")[2] == len(train) == 40
    assert out.metadata["partitioning"]["order"] == "train-first"
    assert "train-first" in ORDERINGS and "random" in ORDERINGS


def test_labeled_first_puts_training_then_evaluated_nodes_first(store6, tmp_path):
    # train {0, 4, 5}, valid {1}, test {2, 3}: with 6 nodes everything is labeled, so check the groups' order
    out = partition_store(store6, tmp_path / "out", 3, order="labeled-first", seed=1)
    node_map = np.asarray(out.array("node_map")).tolist()
    assert set(node_map[:3]) == {0, 4, 5} and set(node_map[3:]) == {1, 2, 3}
    assert sorted(out.array("train_nodes").tolist()) == [0, 1, 2]
    assert sorted(out.array("valid_nodes").tolist() + out.array("test_nodes").tolist()) == [3, 4, 5]
    assert out.metadata["partitioning"]["layout_version"] == LAYOUT_VERSION


def test_labeled_first_leaves_unlabeled_nodes_last(tmp_path):
    rng = np.random.default_rng(4)
    order = rng.permutation(120)
    train, valid, test = order[:10], order[10:15], order[15:25]  # 25 labeled of 120, 20 per partition
    store = build_store(tmp_path / "g", 120, rng.integers(0, 120, 500), rng.integers(0, 120, 500),
                        features=rng.standard_normal((120, 3)).astype(np.float32),
                        arrays={"train_nodes": train, "valid_nodes": valid, "test_nodes": test})
    out = partition_store(store, tmp_path / "out", 6, order="labeled-first", seed=3)
    node_map = np.asarray(out.array("node_map")).tolist()
    assert set(node_map[:10]) == set(train.tolist())
    assert set(node_map[10:25]) == set(valid.tolist()) | set(test.tolist())
    # every labeled node is in the first two partitions
    assert max(out.array("valid_nodes").max(), out.array("test_nodes").max()) < out.array("partition_offsets")[2]


def test_neighborhood_first_puts_training_nodes_then_their_in_neighbours(store6, tmp_path):
    # train {0, 4, 5}; in-edges 4 -> 0, 3 -> 4, 2 -> 5 and 5 -> 5: the neighbours outside training are {2, 3}, then
    # the evaluated node 1 (valid; test {2, 3} are neighbours already)
    out = partition_store(store6, tmp_path / "out", 3, order="neighborhood-first", seed=1)
    node_map = np.asarray(out.array("node_map")).tolist()
    assert set(node_map[:3]) == {0, 4, 5} and set(node_map[3:5]) == {2, 3} and node_map[5] == 1


def test_neighborhood_first_orders_neighbours_by_how_many_training_nodes_they_reach(tmp_path):
    # train {0, 1}; node 5 is an in-neighbour of both, node 6 of one; 2 (valid) and 3 (test) of none; 4 and 7 rest
    store = build_store(tmp_path / "g", 8, [5, 5, 6, 4, 7], [0, 1, 0, 7, 2],
                        arrays={"train_nodes": [0, 1], "valid_nodes": [2], "test_nodes": [3]})
    for seed in range(4):
        order = partition_module.ORDERINGS.get("neighborhood-first")(store, seed).tolist()
        assert set(order[:2]) == {0, 1} and order[2:4] == [5, 6] and set(order[4:6]) == {2, 3}
        assert set(order[6:]) == {4, 7}
    unsplit = build_store(tmp_path / "u", 3, [0], [1], arrays={"train_edges": np.array([[0, 0, 1]])})
    assert partition_module.ORDERINGS.get("neighborhood-first")(unsplit, 0).tolist() == \
        partition_module.ORDERINGS.get("train-first")(unsplit, 0).tolist()


def test_train_first_needs_a_training_split(tmp_path):
    store = build_store(tmp_path / "g", 3, [0], [1])
    with pytest.raises(ConfigError, match="train-first"):
        partition_store(store, tmp_path / "out", 1, order="train-first")
    assert not (tmp_path / "out").exists()


def test_random_order_is_deterministic_by_seed(tmp_path):
    store = random_store(tmp_path / "g")
    a = partition_store(store, tmp_path / "a", 4, order="random", seed=7)
    b = partition_store(store, tmp_path / "b", 4, order="random", seed=7)
    c = partition_store(store, tmp_path / "c", 4, order="random", seed=8)
    for key in ("node_map", "bucket_edges", "bucket_edge_offsets", "bucket_dst", "features", "out_indices"):
        assert np.array_equal(a.array(key), b.array(key)), key
    assert not np.array_equal(a.array("node_map"), c.array("node_map"))
    assert sorted(a.array("node_map").tolist()) == list(range(store.num_nodes))
    assert a.metadata["partitioning"]["seed"] == 7


def test_every_edge_is_in_exactly_one_right_bucket(tmp_path, monkeypatch):
    store = random_store(tmp_path / "g", n=150, m=900)
    monkeypatch.setattr(partition_module, "_MAX_OPEN_BINS", 3)  # several scatter rounds over the edges
    out = partition_store(store, tmp_path / "out", 5, seed=2, chunk_edges=97, max_bucket_edges=60, chunk_bytes=64,
                          progress=True)
    out.verify()
    verify_partitioning(out)
    offsets = np.asarray(out.array("partition_offsets"))
    bucket_offsets = np.asarray(dense_bucket_offsets(out))
    rows = np.asarray(out.array("bucket_edges"))
    assert len(rows) == bucket_offsets[-1] == store.num_edges
    assert (np.diff(bucket_offsets) >= 0).all()
    bucket = np.searchsorted(bucket_offsets, np.arange(len(rows)), side="right") - 1
    src_part = np.searchsorted(offsets, rows[:, 0], side="right") - 1
    dst_part = np.searchsorted(offsets, rows[:, 2], side="right") - 1
    assert np.array_equal(bucket, src_part * 5 + dst_part)
    # the buckets hold exactly the relabelled edges (as a multiset), which map back to the original edges
    node_map = np.asarray(out.array("node_map"))
    assert np.array_equal(sort_rows(rows), edge_rows(out))
    assert np.array_equal(sort_rows(map_back(rows, node_map)), edge_rows(store))
    assert np.array_equal(out.array("features"), store.array("features")[node_map])
    assert np.array_equal(out.array("labels"), store.array("labels")[node_map])
    # bounded-memory settings give the same bytes as the defaults
    default = partition_store(store, tmp_path / "default", 5, seed=2)
    for key in ("bucket_edges", "bucket_row_offsets", "bucket_dst", "bucket_edge_offsets", "bucket_crc32",
                "out_indices", "in_indices", "in_relations", "features"):
        assert np.array_equal(out.array(key), default.array(key)), key


def test_repartitioning_composes_node_map(store6, order_file, tmp_path):
    first = partition_store(store6, tmp_path / "first", 3, order=order_file)
    second_order = np.array([5, 4, 3, 2, 1, 0])
    second = partition_store(first, tmp_path / "second", 2, order=second_order)
    node_map = np.asarray(second.array("node_map"))
    assert node_map.tolist() == ORDER_6[second_order].tolist()
    assert np.array_equal(second.array("features"), FEATURES_6[node_map])
    assert second.array("partition_offsets").tolist() == [0, 3, 6]
    verify_partitioning(second)


# --------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("p", [0, 7, -1])
def test_bad_num_partitions(store6, tmp_path, p):
    with pytest.raises(ConfigError, match=rf"^num_partitions must be in \[1, 6\], got {p}$"):
        partition_store(store6, tmp_path / "out", p)


@pytest.mark.parametrize("content", [
    np.array([3, 0, 5, 1, 4, 3]),      # 3 twice, 2 missing
    np.array([3, 0, 5, 1, 4]),         # too short
    np.array([3, 0, 5, 1, 4, 6]),      # out of range
    np.array([3, 0, 5, 1, 4, 2.0]),    # not integers
])
def test_invalid_order_file_names_the_file(store6, tmp_path, content):
    path = tmp_path / "bad-order.npy"
    np.save(path, content)
    with pytest.raises(DataError) as err:
        partition_store(store6, tmp_path / "out", 3, order=path)
    message = str(err.value)
    assert message.startswith(str(path)) and "\n" not in message
    assert not (tmp_path / "out").exists()


def test_missing_or_unreadable_order_file(store6, tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        partition_store(store6, tmp_path / "out", 3, order=str(tmp_path / "missing.npy"))
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(b"not an npy file")
    with pytest.raises(DataError, match=str(garbage)):
        partition_store(store6, tmp_path / "out", 3, order=garbage)


def test_unknown_ordering_name(store6, tmp_path):
    with pytest.raises(ConfigError, match="unknown ordering 'degree'.*random, train-first"):
        partition_store(store6, tmp_path / "out", 3, order="degree")


def test_out_must_differ_and_must_not_exist(store6, tmp_path):
    with pytest.raises(ConfigError, match="out must differ"):
        partition_store(store6, store6.path, 3, overwrite=True)
    partition_store(store6, tmp_path / "out", 3)
    with pytest.raises(DataError, match="already exists"):
        partition_store(store6, tmp_path / "out", 2)
    assert partition_store(store6, tmp_path / "out", 2, overwrite=True).array("partition_offsets").tolist() == [
        0, 3, 6]


def test_interruption_leaves_no_store(store6, order_file, tmp_path, monkeypatch):
    def interrupted(writer, *args, **kwargs):
        writer.write_array("bucket_dst", np.zeros(3, np.int64))
        raise KeyboardInterrupt

    monkeypatch.setattr(partition_module, "_write_buckets", interrupted)
    with pytest.raises(KeyboardInterrupt):
        partition_store(store6, tmp_path / "out", 3, order=order_file)
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


@pytest.mark.parametrize(("swap", "message"), [
    ([0, 1], r"bucket_edges.npy: row 0 lies in bucket \(0, 1\) but its edge belongs to bucket \(0, 2\)"),  # (0,1) <-> (0,2)
    ([1, 2], r"bucket_edges.npy: rows 1 and 2 are not sorted by \(bucket, dst, src, rel\)"),  # inside (0,2)
])
def test_verify_partitioning_detects_a_bad_layout(store6, order_file, tmp_path, swap, message):
    out = partition_store(store6, tmp_path / "out", 3, order=order_file)
    edges = np.load(out.file("bucket_edges"))
    edges[swap] = edges[swap[::-1]]
    np.save(out.file("bucket_edges"), edges)
    with pytest.raises(DataError, match=message):
        verify_partitioning(GraphStore.open(out.path))


def test_store_verify_includes_the_partition_layout(store6, order_file, tmp_path):
    import json

    from suite.io import file_checksum

    out = partition_store(store6, tmp_path / "out", 3, order=order_file)
    edges = np.load(out.file("bucket_edges"))
    edges[[0, 1]] = edges[[1, 0]]
    np.save(out.file("bucket_edges"), edges)
    meta = json.loads((out.path / "metadata.json").read_text())
    meta["files"]["bucket_edges"]["checksum"] = file_checksum(out.file("bucket_edges"))  # a buggy writer
    (out.path / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match=r"bucket_edges.npy: row 0 lies in bucket \(0, 1\)"):
        GraphStore.open(out.path).verify()


def test_fine_partitions_keep_a_sparse_bucket_index(tmp_path):
    """p = n = 150 (one node per partition, 22,500 buckets): the index lists only the non-empty buckets (at most one
    per distinct edge), and reads back the same buckets as the dense view."""
    store = random_store(tmp_path / "g", n=150, m=400)
    out = partition_store(store, tmp_path / "out", 150, seed=1)
    verify_partitioning(out)
    layout = PartitionLayout.from_store(out)
    sizes = layout.bucket_sizes().numpy()
    assert layout.num_buckets == (sizes > 0).sum() <= store.num_edges
    assert out.metadata["partitioning"]["num_buckets"] == layout.num_buckets
    assert len(out.array("bucket_row_offsets")) == 151 and "bucket_offsets" not in out.metadata["files"]
    i, j = np.argwhere(sizes > 0)[0]
    assert len(layout.bucket(int(i), int(j))) == sizes[i, j]
    empty = np.argwhere(sizes == 0)[0]
    assert layout.bucket_entry(int(empty[0]), int(empty[1])) == -1 and len(layout.bucket(*map(int, empty))) == 0


def test_crc32_segments_equal_zlib():
    import zlib

    from suite.data.crc import crc32_segments

    data = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)
    starts, stops = np.array([0, 7, 7, 100]), np.array([7, 7, 4000, 5000])
    assert crc32_segments(data, starts, stops).tolist() == [zlib.crc32(data[a:b]) for a, b in zip(starts, stops)]
