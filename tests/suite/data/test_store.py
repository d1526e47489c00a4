"""GraphStore: layout, zero-copy access, verification and one-line errors on bad stores."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

from suite.errors import DataError
from suite.data import GraphStore, create_store, index_dtype
from suite.data.csr import EdgeChunk, write_csrs
from suite.io import file_checksum

from tests.support.graphs import write_tiny_store


def _rewrite(store: GraphStore, key: str, array: np.ndarray, fix_metadata: bool = True) -> None:
    """Replace one file's content; optionally update metadata as a buggy writer would."""
    path = store.file(key)
    np.save(path, array)
    if fix_metadata:
        meta = json.loads((store.path / "metadata.json").read_text())
        entry = meta["files"][key]
        entry.update(bytes=path.stat().st_size, checksum=file_checksum(path), dtype=str(array.dtype),
                     shape=list(array.shape))
        (store.path / "metadata.json").write_text(json.dumps(meta))


def _edit_metadata(store: GraphStore, **fields) -> None:
    meta = json.loads((store.path / "metadata.json").read_text())
    meta.update(fields)
    (store.path / "metadata.json").write_text(json.dumps(meta))


def test_hand_checked_csrs(tiny_store):
    incoming = tiny_store.csr("in")
    assert incoming.indptr.tolist() == [0, 1, 2, 5, 5]
    assert incoming.indices.tolist() == [2, 0, 0, 1, 3]
    assert incoming.relations.tolist() == [1, 0, 1, 0, 1]
    outgoing = tiny_store.csr("out")
    assert outgoing.indptr.tolist() == [0, 2, 3, 4, 5]
    assert outgoing.indices.tolist() == [1, 2, 2, 0, 2]
    assert outgoing.relations.tolist() == [0, 1, 0, 1, 1]
    assert outgoing.degrees().tolist() == [2, 1, 1, 1]
    assert incoming.indices.dtype == torch.int32 and incoming.indptr.dtype == torch.int64
    assert tiny_store.edge_index().tolist() == [[0, 0, 1, 2, 3], [1, 2, 2, 0, 2]]


def test_metadata_lists_every_file_with_size_and_checksum(tiny_store):
    meta = tiny_store.metadata
    assert (meta["num_nodes"], meta["num_edges"], meta["num_relations"], meta["feature_dim"]) == (4, 5, 2, 3)
    for key, entry in meta["files"].items():
        path = tiny_store.path / entry["path"]
        assert entry["bytes"] == path.stat().st_size
        assert entry["checksum"] == file_checksum(path)
        assert meta["dtypes"][key] == entry["dtype"]
    assert meta["source"] == {"made": "by hand"}
    assert tiny_store.info()["train_nodes"] == 2


def test_tensors_are_zero_copy_and_private(tiny_store):
    array = tiny_store.array("features")
    tensor = tiny_store.features
    assert isinstance(array, np.memmap)
    assert tensor.data_ptr() == array.ctypes.data
    tensor[0, 0] = 99.0  # copy-on-write: visible through the map, never written to the file
    assert np.load(tiny_store.file("features"))[0, 0] == 0.0
    tiny_store.verify()


def test_split_and_edge_accessors(tiny_store):
    assert tiny_store.split("train").tolist() == [0, 1]
    assert tiny_store.split("test").numel() == 0
    assert tiny_store.labels.tolist() == [0, 1, -1, 1]
    assert tiny_store.edges("train")[:, 1].tolist() == [0, 1, 0, 1, 1]
    assert tiny_store.edges("valid") is None
    with pytest.raises(DataError, match="no 'valid_edges'"):
        tiny_store.tensor("valid_edges")


def test_index_dtype_switches_at_two_to_the_31():
    assert index_dtype(2**31 - 1) == np.int32
    assert index_dtype(2**31) == np.int64


def test_write_csrs_dedup_symmetrize_and_small_buckets(tmp_path):
    src = np.array([0, 0, 1, 2, 2, 4])
    dst = np.array([1, 1, 2, 2, 3, 0])
    with create_store(tmp_path / "g") as writer:
        m = write_csrs(writer, [EdgeChunk(src[:2], dst[:2]), EdgeChunk(src[2:], dst[2:])], 5, symmetrize=True,
                       drop_self_loops=True, deduplicate=True, max_bucket_edges=2)
        writer.finalize(name="g", num_nodes=5, num_edges=m, directed=False)
    store = GraphStore.open(tmp_path / "g")
    store.verify()
    # undirected edges {0,1}, {1,2}, {2,3}, {0,4}; the self-loop 2-2 and the duplicate 0-1 are dropped
    assert m == 8
    assert store.csr("out").indptr.tolist() == [0, 2, 4, 6, 7, 8]
    assert store.csr("out").indices.tolist() == [1, 4, 0, 2, 1, 3, 2, 0]
    assert torch.equal(store.csr("in").indptr, store.csr("out").indptr)
    assert not store.has("in_relations")


def test_write_csrs_rejects_out_of_range_ids(tmp_path):
    with pytest.raises(ValueError, match="destination id out of range"):
        with create_store(tmp_path / "g") as writer:
            write_csrs(writer, [EdgeChunk(np.array([0]), np.array([7]))], 3)
    assert not (tmp_path / "g").exists()
    assert os.listdir(tmp_path) == []


def test_interrupted_store_never_appears(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with create_store(tmp_path / "g") as writer:
            writer.write_array("labels", np.zeros(3, dtype=np.int64))
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_existing_output_needs_overwrite(tmp_path, tiny_store):
    with pytest.raises(DataError, match="already exists"):
        write_tiny_store(tiny_store.path)
    with create_store(tiny_store.path, overwrite=True) as writer:
        writer.write_array("in_indptr", np.zeros(1, dtype=np.int64))
        writer.write_array("out_indptr", np.zeros(1, dtype=np.int64))
        writer.write_array("in_indices", np.zeros(0, dtype=np.int32))
        writer.write_array("out_indices", np.zeros(0, dtype=np.int32))
        writer.finalize(name="empty", num_nodes=0, num_edges=0, directed=True)
    assert GraphStore.open(tiny_store.path).name == "empty"
    assert sorted(os.listdir(tiny_store.path.parent)) == ["tiny"]


# ------------------------------------------------------------------------------------------ bad stores
def test_missing_file(tiny_store):
    tiny_store.file("labels").unlink()
    with pytest.raises(DataError, match=r"labels\.npy: missing"):
        GraphStore.open(tiny_store.path)


def test_short_file(tiny_store):
    path = tiny_store.file("in_indices")
    os.truncate(path, path.stat().st_size - 4)
    with pytest.raises(DataError, match=r"in_indices\.npy: file is short"):
        GraphStore.open(tiny_store.path)


def test_wrong_dtype(tiny_store):
    _rewrite(tiny_store, "labels", np.array([0, 1, -1, 1], dtype=np.float64))
    with pytest.raises(DataError, match=r"labels\.npy: dtype float64 is not allowed"):
        GraphStore.open(tiny_store.path)


def test_file_dtype_differs_from_metadata(tiny_store):
    _rewrite(tiny_store, "train_nodes", np.array([0, 1], dtype=np.int64).view(np.float64), fix_metadata=False)
    with pytest.raises(DataError, match=r"train_nodes\.npy: dtype is float64, metadata says int64"):
        GraphStore.open(tiny_store.path)


def test_metadata_counts_disagree_with_files(tiny_store):
    _edit_metadata(tiny_store, num_nodes=5)
    with pytest.raises(DataError, match=r"features\.npy: shape \(4, 3\) does not match metadata counts \(expected \(5, 3\)\)"):
        GraphStore.open(tiny_store.path)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_nodes": "4"}, "field 'num_nodes' must be int"),
        ({"directed": 1}, "field 'directed' must be bool"),
        ({"format_version": 99}, "field 'format_version' is 99"),
        ({"num_relations": 0}, "field 'num_relations' must be >= 1"),
    ],
)
def test_bad_metadata_fields(tiny_store, fields, message):
    _edit_metadata(tiny_store, **fields)
    with pytest.raises(DataError, match=message):
        GraphStore.open(tiny_store.path)


def test_missing_metadata_field_and_invalid_json(tiny_store):
    meta = json.loads((tiny_store.path / "metadata.json").read_text())
    del meta["num_edges"]
    (tiny_store.path / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match="field 'num_edges' is missing"):
        GraphStore.open(tiny_store.path)
    (tiny_store.path / "metadata.json").write_text("{not json")
    with pytest.raises(DataError, match=r"metadata\.json: invalid JSON"):
        GraphStore.open(tiny_store.path)
    (tiny_store.path / "metadata.json").unlink()
    with pytest.raises(DataError, match=r"metadata\.json: missing"):
        GraphStore.open(tiny_store.path)


def test_verify_catches_changed_bytes(tiny_store):
    path = tiny_store.file("features")
    with open(path, "r+b") as handle:
        handle.seek(-4, os.SEEK_END)
        handle.write(np.float32(1.5).tobytes())
    with pytest.raises(DataError, match=r"features\.npy: checksum mismatch"):
        GraphStore.open(tiny_store.path).verify()


def _features_with_nan_at(row: int, column: int) -> np.ndarray:
    features = np.arange(12, dtype=np.float32).reshape(4, 3)
    features[row, column] = np.nan
    return features


@pytest.mark.parametrize(
    ("key", "array", "message"),
    [
        ("in_indices", np.array([2, 0, 0, 1, 4], dtype=np.int32),
         r"in_indices\.npy: value 4 at row 4 is out of range \[0, 4\)"),
        ("features", _features_with_nan_at(2, 1), r"features\.npy: non-finite value \(NaN or inf\) in row 2"),
        ("out_indptr", np.array([0, 3, 2, 4, 5], dtype=np.int64), r"out_indptr\.npy: offsets decrease at row 2"),
        ("train_edges", np.array([[0, 2, 1]], dtype=np.int64),
         r"train_edges\.npy: value 2 at row 0, column 1 is out of range \[0, 2\)"),
        ("out_indices", np.array([1, 2, 2, 0, 1], dtype=np.int32), "in-degree of node 1 disagrees"),
    ],
    ids=["index_out_of_range", "nan_features", "decreasing_indptr", "relation_out_of_range_in_edge_list",
         "inconsistent_csrs"],
)
def test_verify_catches_a_corrupt_file(tiny_store, key, array, message):
    _rewrite(tiny_store, key, array)
    with pytest.raises(DataError, match=message):
        GraphStore.open(tiny_store.path).verify()


# ------------------------------------------------------------------------------------------ scale
def _store_with_sparse_features(path: Path, num_nodes: int, feature_dim: int) -> None:
    """A store whose features file is large but sparse on disk (header + holes)."""
    with create_store(path) as writer:
        writer.write_array("in_indptr", np.zeros(num_nodes + 1, dtype=np.int64))
        writer.write_array("out_indptr", np.zeros(num_nodes + 1, dtype=np.int64))
        writer.write_array("in_indices", np.zeros(0, dtype=np.int32))
        writer.write_array("out_indices", np.zeros(0, dtype=np.int32))
        features = writer.path_for("features")
        header = np.lib.format.open_memmap(features, mode="w+", dtype=np.float32, shape=(num_nodes, feature_dim))
        del header
        writer._files["features"] = {}
        writer.finalize(name="big", num_nodes=num_nodes, num_edges=0, directed=True, feature_dim=feature_dim)


def test_opening_a_gibibyte_store_is_instant_and_takes_no_memory(tmp_path):
    _store_with_sparse_features(tmp_path / "big", num_nodes=1 << 21, feature_dim=128)  # 1 GiB of features
    rss_before = psutil.Process().memory_info().rss
    started = time.perf_counter()
    store = GraphStore.open(tmp_path / "big")
    features = store.features
    elapsed = time.perf_counter() - started
    assert store.file("features").stat().st_size >= 1 << 30
    assert features.shape == (1 << 21, 128)
    assert elapsed < 0.5
    assert psutil.Process().memory_info().rss - rss_before < 32 << 20


def test_verify_reports_the_same_rows_when_reading_in_small_chunks(tiny_store, monkeypatch):
    monkeypatch.setattr("suite.data.store._VERIFY_CHUNK", 2)
    GraphStore.open(tiny_store.path).verify()
    _rewrite(tiny_store, "out_indptr", np.array([0, 2, 3, 2, 5], dtype=np.int64))
    with pytest.raises(DataError, match=r"out_indptr\.npy: offsets decrease at row 3"):
        GraphStore.open(tiny_store.path).verify()
    _rewrite(tiny_store, "out_indptr", np.array([0, 2, 3, 4, 5], dtype=np.int64))
    _rewrite(tiny_store, "in_indices", np.array([2, 0, 0, -1, 3], dtype=np.int32))
    with pytest.raises(DataError, match=r"value -1 at row 3 is out of range"):
        GraphStore.open(tiny_store.path).verify()


def test_write_csrs_single_key_sort_equals_lexsort_fallback(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    src, dst, rel = rng.integers(0, 50, 2000), rng.integers(0, 50, 2000), rng.integers(0, 3, 2000)

    def build(path):
        with create_store(path) as writer:
            m = write_csrs(writer, [EdgeChunk(src, dst, rel)], 50, num_relations=3, deduplicate=True,
                           max_bucket_edges=300)
            writer.finalize(name="r", num_nodes=50, num_edges=m, directed=True, num_relations=3)
        return GraphStore.open(path)

    fast = build(tmp_path / "fast")
    monkeypatch.setattr("suite.data.csr._sort_key", lambda *args: None)
    fallback = build(tmp_path / "fallback")
    unique = {(int(s), int(d), int(r)) for s, d, r in zip(src, dst, rel)}
    assert fast.num_edges == fallback.num_edges == len(unique)
    for key in ("in_indptr", "in_indices", "in_relations", "out_indptr", "out_indices", "out_relations"):
        assert np.array_equal(fast.array(key), fallback.array(key)), key
    out = fast.csr("out")
    rows = torch.repeat_interleave(torch.arange(50), out.degrees())
    assert set(zip(rows.tolist(), out.indices.tolist(), out.relations.tolist())) == unique
