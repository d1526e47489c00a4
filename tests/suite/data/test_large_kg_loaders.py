"""Published-layout loaders of Freebase86m (DGL-KE/Marius), WikiKG90Mv2 and MAG240M (OGB-LSC).

Every fixture is a tiny folder the test writes in the dataset's published layout; arrays are read in blocks, so
the tests also run the loaders with blocks smaller than the arrays.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from suite.cli import main
from suite.errors import DataError
from suite.data import GraphStore
from suite.data.loaders import LOADERS, prepare
from suite.data.loaders import raw_files as loader_raw_files


def _assert_prepare_fails(tmp_path: Path, capsys: pytest.CaptureFixture, dataset: str, raw: Path,
                          message: str) -> None:
    """``datasets prepare <dataset>`` from ``raw`` exits 2 with one line on stderr that holds ``message``, and
    leaves neither the store nor its temporary folder behind."""
    out = tmp_path / "store"
    assert main(["datasets", "prepare", dataset, "--root", str(raw), "--out", str(out), "--quiet"]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1
    assert not out.exists() and not list(tmp_path.glob(".store*"))


TRIPLES = {"train": [(0, 1, 0), (1, 2, 1), (2, 0, 0), (3, 4, 2), (0, 2, 1)], "valid": [(4, 0, 2)],
           "test": [(1, 3, 0), (2, 4, 1)]}
"""Freebase triples in the file's order ``head tail relation``: 5 entities (one more in entity2id.txt), 3
relations."""


def write_freebase(root: Path, count_lines: bool = False, dictionaries: bool = True) -> Path:
    """DGL-KE's Freebase.zip unpacked: ``Freebase/{train,valid,test}.txt`` (+ entity2id/relation2id)."""
    folder = root / "Freebase"
    folder.mkdir(parents=True)
    for split, triples in TRIPLES.items():
        head = f"{len(triples)}\n" if count_lines else ""
        (folder / f"{split}.txt").write_text(head + "".join(f"{h}\t{t}\t{r}\n" for h, t, r in triples))
    if dictionaries:
        (folder / "entity2id.txt").write_text("6\n" + "".join(f"/m/0{i}\t{i}\n" for i in range(6)))
        (folder / "relation2id.txt").write_text("3\n" + "".join(f"/r/{i}\t{i}\n" for i in range(3)))
    return root


@pytest.mark.parametrize("count_lines", [False, True])
def test_freebase86m_reads_dglke_layout(tmp_path: Path, count_lines: bool) -> None:
    store = prepare("freebase86m", write_freebase(tmp_path / "raw", count_lines), tmp_path / "fb")
    assert (store.num_nodes, store.num_relations, store.num_edges) == (6, 3, 5)  # entity 5 isolated
    assert store.edges("train").tolist() == [[h, r, t] for h, t, r in TRIPLES["train"]]
    assert store.edges("valid").tolist() == [[4, 2, 0]]
    assert store.edges("test").tolist() == [[1, 0, 3], [2, 1, 4]]
    out = store.csr("out")
    assert out.indices[out.indptr[0]:out.indptr[1]].tolist() == [1, 2]
    assert out.relations[out.indptr[0]:out.indptr[1]].tolist() == [0, 1]
    assert store.metadata["source"]["loader"] == "freebase86m"
    store.verify()


def test_freebase86m_counts_from_ids_without_dictionaries(tmp_path: Path) -> None:
    store = prepare("freebase86m", write_freebase(tmp_path / "raw", dictionaries=False) / "Freebase", tmp_path / "fb")
    assert (store.num_nodes, store.num_relations) == (5, 3)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda f: (f / "valid.txt").write_text("4\t0\t2\n4\t0\n"), "valid.txt: line 2: expected 3 fields"),
    (lambda f: (f / "test.txt").write_text("1\t9\t0\n"), "test.txt: line 1: destination id 9 is out of range [0, 6)"),
    (lambda f: (f / "train.txt").write_text("0\t1\t7\n"), "train.txt: line 1: relation id 7 is out of range [0, 3)"),
    (lambda f: (f / "test.txt").unlink(), "test.txt: missing"),
    (lambda f: (f / "entity2id.txt").write_text("9\n/m/0\t0\n"), "entity2id.txt: line 1: header says 9 entities"),
])
def test_freebase86m_errors_name_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture, edit,
                                              message: str) -> None:
    raw = write_freebase(tmp_path / "raw")
    edit(raw / "Freebase")
    _assert_prepare_fails(tmp_path, capsys, "freebase86m", raw, message)


# ---------------------------------------------------------------------------------------------- WikiKG90Mv2
def write_wikikg(root: Path, features: bool = True) -> Path:
    """``wikikg90m-v2/processed/`` as OGB-LSC publishes it (int64 ids, float16 features)."""
    processed = root / "wikikg90m-v2" / "processed"
    processed.mkdir(parents=True)
    np.save(processed / "train_hrt.npy", np.array([[0, 0, 1], [1, 1, 2], [2, 0, 3], [0, 1, 3]], np.int64))
    np.save(processed / "val_hr.npy", np.array([[3, 0], [1, 1]], np.int64))
    np.save(processed / "val_t.npy", np.array([0, 4], np.int64))
    np.save(processed / "test-dev_hr.npy", np.array([[2, 1]], np.int64))
    np.save(processed / "test-challenge_hr.npy", np.array([[4, 0], [0, 1]], np.int64))
    if features:
        np.save(processed / "entity_feat.npy", np.arange(6 * 4, dtype=np.float16).reshape(6, 4))
        np.save(processed / "relation_feat.npy", np.ones((3, 4), np.float16))
    return root


def test_wikikg90m_v2_reads_processed_arrays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("suite.data.loaders.ogb_lsc.DEFAULT_CHUNK_EDGES", 3)  # several blocks per file
    monkeypatch.setattr("suite.data.loaders.ogb_lsc.FEATURE_ROWS", 4)
    store = prepare("wikikg90m-v2", write_wikikg(tmp_path / "raw"), tmp_path / "kg")
    assert (store.num_nodes, store.num_relations, store.num_edges, store.feature_dim) == (6, 3, 4, 4)
    assert store.edges("train").tolist() == [[0, 0, 1], [1, 1, 2], [2, 0, 3], [0, 1, 3]]
    assert store.edges("valid").tolist() == [[3, 0, 0], [1, 1, 4]]
    assert store.edges("test") is None
    assert store.array("test_dev_queries").tolist() == [[2, 1]]
    assert store.array("test_challenge_queries").tolist() == [[4, 0], [0, 1]]
    assert store.array("features").dtype == np.float16
    assert store.array("features")[5].tolist() == [20, 21, 22, 23]
    assert store.array("relation_features").shape == (3, 4)
    out = store.csr("out")
    assert out.indices[out.indptr[0]:out.indptr[1]].tolist() == [1, 3]
    store.verify()


def test_wikikg90m_v2_counts_from_ids_without_features(tmp_path: Path) -> None:
    store = prepare("wikikg90m-v2", write_wikikg(tmp_path / "raw", features=False) / "wikikg90m-v2" / "processed",
                    tmp_path / "kg")
    assert (store.num_nodes, store.num_relations, store.feature_dim) == (5, 2, 0)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda p: np.save(p / "train_hrt.npy", np.zeros((3, 2), np.int64)),
     "train_hrt.npy: shape (3, 2), expected (*, 3)"),
    (lambda p: np.save(p / "train_hrt.npy", np.array([[0, 5, 1]])), "train_hrt.npy (column 1): relation id 5"),
    (lambda p: np.save(p / "val_t.npy", np.array([0])), "val_t.npy: shape (1,), expected (2,)"),
    (lambda p: (p / "val_hr.npy").unlink(), "val_hr.npy: missing (needed with val_t.npy)"),
    (lambda p: (p / "test-dev_hr.npy").write_bytes(b"not npy"), "test-dev_hr.npy: not a readable .npy file"),
    (lambda p: (p / "train_hrt.npy").unlink(), "train_hrt.npy: missing"),
])
def test_wikikg90m_v2_errors_name_the_file(tmp_path: Path, capsys: pytest.CaptureFixture, edit, message: str) -> None:
    raw = write_wikikg(tmp_path / "raw")
    edit(raw / "wikikg90m-v2" / "processed")
    _assert_prepare_fails(tmp_path, capsys, "wikikg90m-v2", raw, message)


# ---------------------------------------------------------------------------------------------- MAG240M
def write_mag(root: Path, splits: dict | None = None) -> Path:
    """``mag240m_kddcup2021/`` as OGB-LSC publishes it: 5 papers, 3 authors, 1 institution, 3 classes."""
    folder = root / "mag240m_kddcup2021"
    for sub in ("paper", "paper___cites___paper", "author___writes___paper",
                "author___affiliated_with___institution"):
        (folder / "processed" / sub).mkdir(parents=True)
    torch.save({"paper": 5, "author": 3, "institution": 1, "num_classes": 3}, folder / "meta.pt")
    torch.save(splits or {"train": np.array([0, 1]), "valid": np.array([2]), "test-dev": np.array([3]),
                          "test-challenge": np.array([4])}, folder / "split_dict.pt")
    paper = folder / "processed" / "paper"
    np.save(paper / "node_feat.npy", np.arange(10, dtype=np.float16).reshape(5, 2))
    np.save(paper / "node_label.npy", np.array([2, 0, 1, np.nan, np.nan], np.float32))
    np.save(paper / "node_year.npy", np.array([2019, 2018, 2020, 2021, 2021], np.int64))
    np.save(folder / "processed" / "paper___cites___paper" / "edge_index.npy",
            np.array([[1, 2, 2, 3, 4], [0, 0, 1, 2, 2]], np.int64))
    np.save(folder / "processed" / "author___writes___paper" / "edge_index.npy", np.array([[0, 1], [0, 1]]))
    np.save(folder / "processed" / "author___affiliated_with___institution" / "edge_index.npy",
            np.array([[0], [0]]))
    return root


def test_mag240m_reads_the_paper_citation_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("suite.data.loaders.ogb_lsc.DEFAULT_CHUNK_EDGES", 2)
    monkeypatch.setattr("suite.data.loaders.ogb_lsc.FEATURE_ROWS", 2)
    store = prepare("mag240m", write_mag(tmp_path / "raw"), tmp_path / "mag")
    assert (store.num_nodes, store.num_edges, store.num_classes, store.feature_dim) == (5, 5, 3, 2)
    assert store.array("labels").tolist() == [2, 0, 1, -1, -1]
    assert store.array("node_year").tolist() == [2019, 2018, 2020, 2021, 2021]
    assert store.array("features").dtype == np.float16 and store.array("features")[4].tolist() == [8, 9]
    assert store.split("train").tolist() == [0, 1]
    assert store.split("test").tolist() == [3]
    assert store.array("test_challenge_nodes").tolist() == [4]
    cited = store.csr("in")
    assert cited.indices[cited.indptr[2]:cited.indptr[3]].tolist() == [3, 4]  # papers 3 and 4 cite paper 2
    assert "author___writes___paper" in store.metadata["source"]["not_stored"]
    assert store.metadata["directed"] is True
    store.verify()


def test_mag240m_release_1_test_split_and_root_folder(tmp_path: Path) -> None:
    raw = write_mag(tmp_path / "raw", {"train": np.array([0]), "valid": np.array([1]), "test": np.array([3, 4])})
    store = prepare("mag240m", raw / "mag240m_kddcup2021", tmp_path / "mag")
    assert store.split("test").tolist() == [3, 4]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda f: np.save(f / "processed/paper/node_feat.npy", np.zeros((4, 2), np.float16)),
     "node_feat.npy: shape (4, 2), expected (5, *)"),
    (lambda f: np.save(f / "processed/paper___cites___paper/edge_index.npy", np.array([[0], [7]])),
     "edge_index.npy: edge destination id out of range [0, 5)"),
    (lambda f: np.save(f / "processed/paper/node_label.npy", np.array([0, 1, 5, 0, 0], np.float32)),
     "node_label.npy: label 5"),
    (lambda f: torch.save({"train": np.array([0, 9]), "valid": np.array([1])}, f / "split_dict.pt"),
     "split_dict.pt (split 'train'): paper id 9 at position 1 is out of range [0, 5)"),
    (lambda f: (f / "split_dict.pt").write_bytes(b"garbage"), "split_dict.pt: not a readable torch.save file"),
    (lambda f: torch.save({"author": 3}, f / "meta.pt"), "meta.pt: 'paper' must be a non-negative integer"),
    (lambda f: (f / "processed/paper/node_year.npy").unlink(), "node_year.npy: missing"),
])
def test_mag240m_errors_name_the_file(tmp_path: Path, capsys: pytest.CaptureFixture, edit, message: str) -> None:
    raw = write_mag(tmp_path / "raw")
    edit(raw / "mag240m_kddcup2021")
    _assert_prepare_fails(tmp_path, capsys, "mag240m", raw, message)


def test_npy_blocks_cover_the_array_along_either_axis(tmp_path: Path) -> None:
    array = np.arange(14).reshape(2, 7)
    np.save(tmp_path / "a.npy", array)
    assert np.array_equal(np.concatenate(list(loader_raw_files.npy_blocks(tmp_path / "a.npy", 3, axis=1)), axis=1), array)
    assert [b.shape for b in loader_raw_files.npy_blocks(tmp_path / "a.npy", 1)] == [(1, 7), (1, 7)]


def test_every_large_dataset_is_registered() -> None:
    assert {"freebase86m", "wikikg90m-v2", "mag240m"} <= set(LOADERS.names())
    assert GraphStore  # the opened stores above are GraphStores


# ---------------------------------------------------------------------------------------------- marius_preprocess
def write_marius(root: Path, dtype=np.int32, num_relations: int = 3) -> Path:
    """A ``marius_preprocess`` output folder: dataset.yaml and ``edges/*.bin`` rows ``(src, rel, dst)``."""
    (root / "edges").mkdir(parents=True)
    splits = {"train": [[0, 0, 1], [1, 2, 2], [2, 1, 0], [3, 0, 4]], "validation": [[4, 1, 0]], "test": [[1, 0, 3]]}
    for split, rows in splits.items():
        array = np.array(rows, dtype)
        if num_relations == 1:
            array = array[:, [0, 2]]
        array.tofile(root / "edges" / f"{split}_edges.bin")
    (root / "dataset.yaml").write_text(
        f"dataset_dir: {root}/\nnum_edges: 4\nnum_nodes: 6\nnum_relations: {num_relations}\nnum_train: 4\n"
        "num_valid: 1\nnum_test: 1\nnode_feature_dim: -1\nrel_feature_dim: -1\nnum_classes: -1\ninitialized: false\n")
    return root


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_marius_preprocessed_folder(tmp_path: Path, dtype) -> None:
    store = prepare("freebase86m", write_marius(tmp_path / "fb", dtype), tmp_path / "s")
    assert (store.num_nodes, store.num_relations, store.num_edges) == (6, 3, 4)
    assert store.edges("train").tolist() == [[0, 0, 1], [1, 2, 2], [2, 1, 0], [3, 0, 4]]
    assert store.edges("valid").tolist() == [[4, 1, 0]] and store.edges("test").tolist() == [[1, 0, 3]]
    assert store.metadata["source"]["loader"] == "marius"
    store.verify()
    untyped = prepare("marius", write_marius(tmp_path / "lj", num_relations=1), tmp_path / "u",
                      dataset_name="livejournal")
    assert untyped.name == "livejournal" and untyped.num_relations == 1
    assert untyped.edges("train")[:, 1].tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize(("edit", "message"), [
    (lambda r: np.array([[0, 0, 9]], np.int32).tofile(r / "edges/test_edges.bin"),
     "test_edges.bin: row 0: destination node id 9 is out of range [0, 6)"),
    (lambda r: np.zeros(5, np.int32).tofile(r / "edges/train_edges.bin"),
     "train_edges.bin: 20 bytes is not 4 rows (dataset.yaml num_train) of 3 int32 or int64 columns"),
    (lambda r: (r / "edges/validation_edges.bin").unlink(), "validation_edges.bin: missing (dataset.yaml says num_valid"),
    (lambda r: (r / "dataset.yaml").write_text("num_nodes: many\n"), "dataset.yaml: num_nodes must be a non-negative"),
])
def test_marius_errors_name_the_file(tmp_path: Path, capsys: pytest.CaptureFixture, edit, message: str) -> None:
    raw = write_marius(tmp_path / "raw")
    edit(raw)
    _assert_prepare_fails(tmp_path, capsys, "marius", raw, message)
