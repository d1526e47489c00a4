"""The checks a run depends on (suite.data.store_checks): rules, checksums, the cache in metadata.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import suite.data.store_checks as checks
from suite.errors import DataError
from suite.data import GraphStore, create_store
from suite.io import file_checksum

# 4 nodes, in-CSR of the edges 0->1, 0->2, 1->2, 2->0, 3->2 (in_indices: sources by destination).
GOOD = {
    "in_indptr": np.array([0, 1, 2, 5, 5], dtype=np.int64),
    "in_indices": np.array([2, 0, 0, 1, 3], dtype=np.int32),
    "out_indptr": np.array([0, 2, 3, 4, 5], dtype=np.int64),
    "out_indices": np.array([1, 2, 2, 0, 2], dtype=np.int32),
    "features": np.arange(12, dtype=np.float32).reshape(4, 3),
    "in_relations": np.array([1, 0, 1, 0, 1], dtype=np.int32),
    "out_relations": np.array([0, 1, 0, 1, 1], dtype=np.int32),
    "labels": np.array([0, 1, -1, 1], dtype=np.int64),
    "train_nodes": np.array([0, 1], dtype=np.int64),
    "train_edges": np.array([[0, 0, 1], [1, 1, 2]], dtype=np.int64),
}


def write_store(path: Path, **replace: np.ndarray) -> GraphStore:
    """The 4-node store with some arrays replaced (metadata consistent with what is written); opened."""
    with create_store(path) as writer:
        for key, array in {**GOOD, **replace}.items():
            writer.write_array(key, array)
        writer.finalize(name="t", num_nodes=4, num_edges=5, directed=True, num_relations=2, num_classes=2,
                        feature_dim=3)
    return GraphStore.open(path)


def test_a_fresh_store_is_checked_from_its_metadata_without_reading(tmp_path, monkeypatch):
    store = write_store(tmp_path / "s")
    assert set(store.metadata["checks"]["files"]) == set(GOOD)
    monkeypatch.setattr(checks, "scan_file", lambda *a, **k: pytest.fail("a cached scan was recomputed"))
    store.check_for_run()
    assert store.tensor("labels").tolist() == [0, 1, -1, 1]


@pytest.mark.parametrize(("key", "bad", "message"), [
    ("in_indices", np.array([2, 0, 0, 2_000_000_000, 3], dtype=np.int32),
     r"in_indices\.npy: row 3: node id 2000000000 is out of range \[0, 4\) \(num_nodes"),
    ("out_indices", np.array([1, 2, -7, 0, 2], dtype=np.int32), r"out_indices\.npy: row 2: node id -7"),
    ("labels", np.array([0, 99, -1, 1], dtype=np.int64),
     r"labels\.npy: row 1: label 99 is out of range \[-1, 2\) \(num_classes"),
    ("labels", np.array([0, 1, -2, 1], dtype=np.int64), r"labels\.npy: row 2: label -2"),
    ("features", np.array([[0, 1, 2], [3, np.nan, 5], [6, 7, 8], [9, 10, np.inf]], dtype=np.float32),
     r"features\.npy: 2 non-finite values \(NaN or inf\), the first in row 1"),
    ("in_indptr", np.array([0, 3, 2, 5, 5], dtype=np.int64), r"in_indptr\.npy: offsets decrease"),
    ("out_indptr", np.array([0, 2, 3, 4, 4], dtype=np.int64), r"out_indptr\.npy: must start at 0 and end at 5"),
    ("train_nodes", np.array([0, 4], dtype=np.int64), r"train_nodes\.npy: row 1: node id 4"),
    ("train_edges", np.array([[0, 0, 1], [1, 2, 2]], dtype=np.int64),
     r"train_edges\.npy: row 1: relation id 2 is out of range \[0, 2\)"),
    ("in_relations", np.array([1, 0, 5, 0, 1], dtype=np.int32), r"in_relations\.npy: row 2: relation id 5"),
    ("train_edges", np.array([[0, 0, 1], [1, 1, 9]], dtype=np.int64), r"train_edges\.npy: row 1: destination node"),
])
def test_every_rule_names_the_file_and_the_first_bad_row(tmp_path, key, bad, message):
    store = write_store(tmp_path / "s", **{key: bad})  # GraphStore.open reads only headers: it succeeds
    with pytest.raises(DataError, match=message):
        store.check_for_run()
    with pytest.raises(DataError, match=message):  # no array of it is ever handed out unchecked
        GraphStore.open(store.path).tensor("train_nodes")


def test_a_changed_file_is_scanned_again_and_a_corrupted_one_fails_its_checksum(tmp_path):
    store = write_store(tmp_path / "s")
    features = store.file("features")
    data = bytearray(features.read_bytes())
    data[-2] ^= 0x01  # a bit of the last value: still finite
    features.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"features\.npy: checksum mismatch \(file changed since it was written"):
        GraphStore.open(store.path).check_for_run()

    np.save(features, np.full((4, 3), np.nan, dtype=np.float32))  # a buggy writer that updates the checksum
    meta = json.loads((store.path / "metadata.json").read_text())
    meta["files"]["features"]["checksum"] = file_checksum(features)
    (store.path / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(DataError, match=r"features\.npy: 12 non-finite values"):
        GraphStore.open(store.path).check_for_run()


def test_scans_are_cached_in_the_metadata_once_and_reused(tmp_path, monkeypatch):
    store = write_store(tmp_path / "s")
    meta_path = store.path / "metadata.json"
    meta = json.loads(meta_path.read_text())
    del meta["checks"]  # a store written before the checks existed
    meta_path.write_text(json.dumps(meta))
    scanned = []
    real = checks.scan_file
    monkeypatch.setattr(checks, "scan_file", lambda path, *a: scanned.append(Path(path).name) or real(path, *a))
    GraphStore.open(store.path).check_for_run()
    assert sorted(scanned) == sorted(f"{key}.npy" for key in GOOD)
    assert set(json.loads(meta_path.read_text())["checks"]["files"]) == set(GOOD)
    scanned.clear()
    GraphStore.open(store.path).check_for_run()
    assert scanned == []
    np.save(store.file("labels"), GOOD["labels"])  # same bytes, new file: its signature changed
    GraphStore.open(store.path).check_for_run()
    assert scanned == ["labels.npy"]


def test_metadata_that_cannot_be_read_is_one_line(tmp_path):
    store = write_store(tmp_path / "s")
    meta_path = store.path / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta_path.unlink()
    meta_path.mkdir()  # unreadable as a file (as root, permissions do not stop a read)
    with pytest.raises(DataError, match=r"metadata\.json: missing"):
        GraphStore.open(store.path)
    meta_path.rmdir()
    meta["files"]["labels"]["path"] = "../../etc/passwd"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(DataError, match=r"files\.labels\.path' must be a relative path inside the store"):
        GraphStore.open(store.path)
    meta["files"]["labels"]["path"] = "labels.npy"
    meta["files"]["labels"]["shape"] = "four"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(DataError, match=r"files\.labels\.shape' has the wrong type"):
        GraphStore.open(store.path)
