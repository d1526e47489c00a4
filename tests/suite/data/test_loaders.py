"""Loaders: Cora (Planetoid), FB15k-237 (OpenKE), OGB fixtures in ogb's own layout, and failure modes."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from suite.errors import ConfigError, DataError
from suite.data import GraphStore
from suite.data.loaders import LOADERS, prepare
from tests.support.paths import REPO_ROOT
from tests.suite.data.ogb_fixtures import (
    make_ogbl_citation2,
    make_ogbl_collab,
    make_ogbl_wikikg2,
    make_ogbn_arxiv,
    make_ogbn_papers100m,
)


def edge_keys(src, dst, num_nodes: int) -> np.ndarray:
    """Sorted ``src * n + dst`` of a multiset of edges (for comparing edge multisets)."""
    return np.sort(np.asarray(src, dtype=np.int64) * num_nodes + np.asarray(dst, dtype=np.int64))


def csr_triples(store: GraphStore) -> np.ndarray:
    """Lexicographically sorted ``(src, rel, dst)`` rows of the out-CSR."""
    csr = store.csr("out")
    src = np.repeat(np.arange(store.num_nodes), csr.degrees().numpy())
    rel = np.zeros_like(src) if csr.relations is None else csr.relations.numpy()
    rows = np.stack([src, rel, csr.indices.numpy()], axis=1).astype(np.int64)
    return rows[np.lexsort(rows.T[::-1])]


def sort_rows(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.int64)
    return rows[np.lexsort(rows.T[::-1])]


# ---------------------------------------------------------------------------------------------- Cora
@pytest.fixture(scope="module")
def cora(shared_datasets: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    return prepare("cora", shared_datasets / "planetoid", tmp_path_factory.mktemp("stores") / "cora")


def test_registry_lists_every_dataset() -> None:
    for name in ("cora", "citeseer", "pubmed", "fb15k237", "ogbn-arxiv", "ogbn-products", "ogbn-papers100M",
                 "ogbl-collab", "ogbl-citation2", "ogbl-wikikg2", "ogbl-ppa", "ogbl-ddi"):
        assert name in LOADERS
    with pytest.raises(ConfigError, match="unknown dataset loader 'nope'"):
        prepare("nope", ".", "out")


def test_cora_counts(cora: GraphStore) -> None:
    assert (cora.num_nodes, cora.num_edges, cora.feature_dim, cora.num_classes) == (2708, 10556, 1433, 7)
    assert not cora.directed and cora.num_relations == 1
    assert [len(cora.split(s)) for s in ("train", "valid", "test")] == [140, 500, 1000]
    assert cora.features.dtype.is_floating_point and cora.features.shape == (2708, 1433)
    assert cora.labels.min() >= 0 and cora.labels.max() == 6
    assert cora.metadata["labeled_nodes"] == 2708
    assert set(cora.metadata["source"]["files"]) == {f"ind.cora.{s}" for s in
                                                     ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")}
    assert all(r["checksum"].startswith("sha256:") for r in cora.metadata["source"]["files"].values())
    cora.verify()


def test_cora_matches_pyg(cora: GraphStore, shared_datasets: Path) -> None:
    from torch_geometric.io import read_planetoid_data

    data = read_planetoid_data(str(shared_datasets / "planetoid"), "cora")
    n = cora.num_nodes
    src, dst = cora.edge_index().numpy()
    assert np.array_equal(edge_keys(src, dst, n), edge_keys(*data.edge_index.numpy(), n))
    # undirected: the in-CSR holds the same edge set (each edge in both directions)
    assert np.array_equal(edge_keys(dst, src, n), edge_keys(src, dst, n))
    assert np.array_equal(cora.features.numpy(), data.x.numpy())
    assert np.array_equal(cora.labels.numpy(), data.y.numpy())
    for split, mask in (("train", data.train_mask), ("valid", data.val_mask), ("test", data.test_mask)):
        assert np.array_equal(cora.split(split).numpy(), mask.nonzero().view(-1).numpy())


def test_planetoid_missing_file(tmp_path: Path, shared_datasets: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    for path in (shared_datasets / "planetoid").glob("ind.cora.*"):
        if not path.name.endswith(".graph"):
            (raw / path.name).symlink_to(path)
    with pytest.raises(DataError, match=r"ind\.cora\.graph: missing"):
        prepare("cora", raw, tmp_path / "cora")
    assert not (tmp_path / "cora").exists()


# ---------------------------------------------------------------------------------------------- FB15k-237
@pytest.fixture(scope="module")
def fb15k237(shared_datasets: Path, tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    return prepare("fb15k237", shared_datasets / "fb15k237", tmp_path_factory.mktemp("stores") / "fb15k237")


def test_fb15k237_counts(fb15k237: GraphStore) -> None:
    store = fb15k237
    assert (store.num_nodes, store.num_relations, store.num_edges) == (14541, 237, 272115)
    assert store.directed and store.feature_dim == 0 and store.num_classes == 0
    assert not store.has("features") and not store.has("labels")
    assert [len(store.edges(s)) for s in ("train", "valid", "test")] == [272115, 17535, 20466]
    assert store.has("in_relations") and store.has("out_relations")
    store.verify()


def test_fb15k237_triples_match_raw_file(fb15k237: GraphStore, shared_datasets: Path) -> None:
    lines = (shared_datasets / "fb15k237" / "test2id.txt").read_text().splitlines()
    test = fb15k237.edges("test").numpy()
    for row in (0, 1, 777, len(lines) - 2):  # file line row + 2 (after the count line)
        head, tail, relation = map(int, lines[row + 1].split())
        assert tuple(test[row]) == (head, relation, tail)  # store columns: (src, rel, dst)
    train_lines = (shared_datasets / "fb15k237" / "train2id.txt").read_text().splitlines()
    head, tail, relation = map(int, train_lines[1].split())
    assert tuple(fb15k237.edges("train")[0].tolist()) == (head, relation, tail)
    # the CSRs hold exactly the training triples (as a multiset, relations included)
    assert np.array_equal(csr_triples(fb15k237), sort_rows(fb15k237.edges("train").numpy()))
    csr = fb15k237.csr("out")
    begin, end = int(csr.indptr[head]), int(csr.indptr[head + 1])
    neighbours = list(zip(csr.indices[begin:end].tolist(), csr.relations[begin:end].tolist()))
    assert (tail, relation) in neighbours


# ---------------------------------------------------------------------------------------------- OpenKE errors
def write_openke(root: Path, **overrides: str) -> Path:
    """A valid 5-entity, 2-relation OpenKE folder; ``overrides`` replace whole files by name stem."""
    files = {
        "entity2id": "5\n/m/a\t0\n/m/b\t1\n/m/c\t2\n/m/d\t3\n/m/e\t4\n",
        "relation2id": "2\n/r/x\t0\n/r/y\t1\n",
        "train2id": "4\n0 1 0\n1 2 1\n2 3 0\n3 4 1\n",
        "valid2id": "1\n0 2 1\n",
        "test2id": "2\n1 3 0\n4 0 1\n",
    }
    files.update(overrides)
    root.mkdir(parents=True, exist_ok=True)
    for stem, text in files.items():
        if text is not None:
            (root / f"{stem}.txt").write_text(text)
    return root


def test_openke_small_folder(tmp_path: Path) -> None:
    store = prepare("fb15k237", write_openke(tmp_path / "raw"), tmp_path / "kg")
    assert (store.num_nodes, store.num_relations, store.num_edges) == (5, 2, 4)
    assert store.edges("valid").tolist() == [[0, 1, 2]]
    assert store.edges("test").tolist() == [[1, 0, 3], [4, 1, 0]]
    store.verify()


def test_openke_keeps_repeated_triples(tmp_path: Path) -> None:
    raw = write_openke(tmp_path / "raw", train2id="3\n0 1 0\n0 1 0\n2 3 1\n")
    store = prepare("fb15k237", raw, tmp_path / "kg")
    assert store.num_edges == 3 and store.csr("out").degrees()[0] == 2


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"valid2id": None}, r"valid2id\.txt: missing"),
        ({"train2id": "5\n0 1 0\n1 2 1\n2 3 0\n3 4 1\n"}, r"train2id\.txt: line 1: header says 5 triples but 4"),
        ({"train2id": "3\n0 1 0\n1 2 1\n2 3 0\n3 4 1\n"}, r"train2id\.txt: line 1: header says 3 triples but 4"),
        ({"train2id": "four\n0 1 0\n"}, r"train2id\.txt: line 1: expected the number of triples"),
        ({"train2id": "4\n0 1 0\n1 2\n2 3 0\n3 4 1\n"}, r"train2id\.txt: line 3: expected three integers"),
        ({"train2id": "4\n0 1 0\n1 2 1\n2 3 0 7\n3 4 1\n"}, r"train2id\.txt: line 4: expected three integers"),
        ({"train2id": "4\n0 1 0 9\n1 2 1\n2 3 0\n3 4 1\n"}, r"train2id\.txt: line 2: expected three integers"),
        ({"train2id": "4\n0 1 0\n1 2 1\n2 x 0\n3 4 1\n"}, r"train2id\.txt: line 4: expected three integers"),
        ({"train2id": "4\n0 1 0\n1 2.5 1\n2 3 0\n3 4 1\n"}, r"train2id\.txt: line 3: expected three integers"),
        ({"train2id": "4\n0 1 0\n\n2 3 0\n3 4 1\n"}, r"train2id\.txt: line 3: expected three integers"),
        ({"valid2id": "1\n0 5 1\n"}, r"valid2id\.txt: line 2: tail entity id 5 is out of range \[0, 5\)"),
        ({"test2id": "2\n1 3 0\n-1 0 1\n"}, r"test2id\.txt: line 3: head entity id -1 is out of range"),
        ({"train2id": "4\n0 1 0\n1 2 1\n2 3 2\n3 4 1\n"}, r"train2id\.txt: line 4: relation id 2 is out of range"),
        ({"test2id": "0\n"}, r"test2id\.txt: line 1: the split is empty"),
        ({"entity2id": "6\n/m/a\t0\n/m/b\t1\n"}, r"entity2id\.txt: line 1: header says 6 entities but 2"),
        ({"relation2id": ""}, r"relation2id\.txt: line 1: expected the number of relations"),
    ],
)
def test_openke_bad_input(tmp_path: Path, overrides: dict[str, str | None], expected: str) -> None:
    raw = write_openke(tmp_path / "raw", **overrides)
    with pytest.raises(DataError, match=expected) as info:
        prepare("fb15k237", raw, tmp_path / "kg")
    assert "\n" not in str(info.value)
    assert str(raw) in str(info.value)
    assert not (tmp_path / "kg").exists()


# ---------------------------------------------------------------------------------------------- staging
def test_interrupted_preparation_leaves_no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import suite.data.loaders.openke as openke

    real_write_csrs = openke.write_csrs

    def write_then_interrupt(writer, *args, **kwargs):
        real_write_csrs(writer, *args, **kwargs)  # files exist in the staging folder...
        raise KeyboardInterrupt  # ...when the user presses Ctrl-C

    monkeypatch.setattr(openke, "write_csrs", write_then_interrupt)
    out = tmp_path / "stores" / "kg"
    with pytest.raises(KeyboardInterrupt):
        prepare("fb15k237", write_openke(tmp_path / "raw"), out)
    assert not out.exists()
    assert list((tmp_path / "stores").iterdir()) == []  # no staging folder left behind either


def test_existing_store_needs_overwrite(tmp_path: Path) -> None:
    raw = write_openke(tmp_path / "raw")
    prepare("fb15k237", raw, tmp_path / "kg")
    with pytest.raises(DataError, match="already exists"):
        prepare("fb15k237", raw, tmp_path / "kg")
    write_openke(raw, valid2id="2\n0 2 1\n3 0 0\n")
    store = prepare("fb15k237", raw, tmp_path / "kg", overwrite=True)
    assert len(store.edges("valid")) == 2


# ---------------------------------------------------------------------------------------------- OGB
@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Fail on any network access or interactive prompt (ogb's download paths); yields the attempts."""
    from suite.data.loaders.ogb import import_ogb

    import_ogb()
    attempts: list[tuple] = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access attempted in an offline test")

    def no_prompt(*args, **kwargs):
        attempts.append(("input", *args))
        raise AssertionError("ogb prompted for input")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr("builtins.input", no_prompt)
    for module in ("ogb.nodeproppred.dataset", "ogb.linkproppred.dataset"):
        monkeypatch.setattr(f"{module}.decide_download", refuse)
        monkeypatch.setattr(f"{module}.download_url", refuse)
    yield attempts
    assert attempts == []


def test_ogbn_arxiv_fixture(tmp_path: Path, offline: list) -> None:
    raw = make_ogbn_arxiv(tmp_path / "ogb")
    store = prepare("ogbn-arxiv", tmp_path / "ogb", tmp_path / "arxiv")
    assert (store.num_nodes, store.num_edges, store.feature_dim, store.num_classes) == (10, 12, 4, 40)
    assert store.directed  # arxiv: add_inverse_edge is False in ogb's table
    src, dst = store.edge_index().numpy()
    assert np.array_equal(edge_keys(src, dst, 10), edge_keys(raw["edges"][:, 0], raw["edges"][:, 1], 10))
    assert np.allclose(store.features.numpy(), raw["features"]) and store.features.dtype.is_floating_point
    assert store.labels.tolist() == raw["labels"].tolist()
    assert store.array("node_year").tolist() == raw["years"].tolist()
    for split in ("train", "valid", "test"):
        assert store.split(split).tolist() == raw[split].tolist()
    source = store.metadata["source"]
    assert source["loader"] == "ogb" and source["dataset"] == "ogbn-arxiv" and source["eval_metric"] == "acc"
    assert "raw/edge.csv.gz" in source["files"] and "bytes" in source["files"]["raw/edge.csv.gz"]
    store.verify()
    assert not (tmp_path / "ogb" / "ogbn_arxiv" / "processed").exists()  # nothing written into the dataset
    # preparing again works (ogb's processed cache is neither written nor read)
    again = prepare("ogbn-arxiv", tmp_path / "ogb" / "ogbn_arxiv", tmp_path / "arxiv", overwrite=True)
    assert again.num_edges == 12


def test_ogbn_papers100m_fixture_nan_labels(tmp_path: Path, offline: list) -> None:
    raw = make_ogbn_papers100m(tmp_path / "ogb")
    store = prepare("ogbn-papers100M", tmp_path / "ogb", tmp_path / "papers")
    assert (store.num_nodes, store.num_edges, store.feature_dim, store.num_classes) == (8, 9, 3, 172)
    assert store.labels.tolist() == [5, -1, 171, -1, 0, -1, 1, 2]
    assert store.metadata["labeled_nodes"] == 5
    assert np.array_equal(store.features.numpy(), raw["features"])
    assert store.split("train").tolist() == [0, 2, 4] and store.split("test").tolist() == [7]
    src, dst = store.edge_index().numpy()
    assert np.array_equal(edge_keys(src, dst, 8), edge_keys(*raw["edges"], 8))
    store.verify()


def test_ogbl_collab_fixture(tmp_path: Path, offline: list) -> None:
    raw = make_ogbl_collab(tmp_path / "ogb")
    store = prepare("ogbl-collab", tmp_path / "ogb", tmp_path / "collab")
    train = raw["train"]
    assert (store.num_nodes, store.num_edges, store.feature_dim) == (6, 2 * len(train), 2)
    assert not store.directed  # ogb adds the inverse of every training edge
    src, dst = store.edge_index().numpy()
    expected = edge_keys(np.concatenate([train[:, 0], train[:, 1]]), np.concatenate([train[:, 1], train[:, 0]]), 6)
    assert np.array_equal(edge_keys(src, dst, 6), expected)
    assert store.edges("train").tolist() == [[s, 0, d] for s, d in train.tolist()]
    assert store.edges("test").tolist() == [[4, 0, 5], [0, 0, 2]]
    assert store.array("valid_edges_neg").tolist() == raw["valid_neg"].tolist()
    assert store.array("test_edges_neg").tolist() == raw["test_neg"].tolist()
    assert store.array("train_edges_year").tolist() == raw["year"].tolist()
    assert store.metadata["source"]["not_stored"] == ["edge_weight", "edge_year"]
    store.verify()


def test_ogbl_citation2_fixture(tmp_path: Path, offline: list) -> None:
    raw = make_ogbl_citation2(tmp_path / "ogb")
    store = prepare("ogbl-citation2", tmp_path / "ogb", tmp_path / "citation2")
    assert (store.num_nodes, store.num_edges, store.feature_dim, store.directed) == (7, 5, 3, True)
    assert sort_rows(csr_triples(store)).tolist() == sort_rows(
        np.stack([raw["train"][:, 0], np.zeros(5), raw["train"][:, 1]], axis=1)).tolist()
    assert store.edges("valid").tolist() == [[5, 0, 0]]
    assert store.edges("test").tolist() == [[6, 0, 1], [6, 0, 2]]
    assert store.array("test_dst_neg").tolist() == raw["test_neg"].tolist()
    assert store.array("node_year").tolist() == list(range(1990, 1997))
    store.verify()


def test_ogbl_wikikg2_fixture(tmp_path: Path, offline: list) -> None:
    raw = make_ogbl_wikikg2(tmp_path / "ogb")
    store = prepare("ogbl-wikikg2", tmp_path / "ogb", tmp_path / "wikikg2")
    train = raw["train"]  # (head, relation, tail)
    assert (store.num_nodes, store.num_edges, store.num_relations, store.feature_dim) == (6, 5, 3, 0)
    assert np.array_equal(csr_triples(store), sort_rows(train))  # (src, rel, dst) with the repeat kept
    assert store.edges("train").tolist() == train.tolist()
    assert store.edges("test").tolist() == raw["test"].tolist()
    assert store.array("valid_src_neg").tolist() == raw["valid_head_neg"].tolist()
    assert store.array("test_dst_neg").tolist() == raw["test_tail_neg"].tolist()
    store.verify()


def test_ogb_missing_files_fail_without_download(tmp_path: Path, offline: list) -> None:
    with pytest.raises(DataError, match=r"ogbn_arxiv: missing"):
        prepare("ogbn-arxiv", tmp_path / "ogb", tmp_path / "out")
    make_ogbn_arxiv(tmp_path / "ogb")
    folder = tmp_path / "ogb" / "ogbn_arxiv"
    (folder / "raw" / "node-label.csv.gz").unlink()
    with pytest.raises(DataError, match=r"node-label\.csv\.gz: missing"):
        prepare("ogbn-arxiv", tmp_path / "ogb", tmp_path / "out")
    (folder / "RELEASE_v1.txt").unlink()  # ogb itself would ask whether to re-download
    with pytest.raises(DataError, match=r"RELEASE_v1\.txt: missing"):
        prepare("ogbn-arxiv", tmp_path / "ogb", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_ogb_bad_split_is_a_data_error(tmp_path: Path, offline: list) -> None:
    import pandas as pd

    make_ogbn_arxiv(tmp_path / "ogb")
    split = tmp_path / "ogb" / "ogbn_arxiv" / "split" / "time" / "test.csv.gz"
    pd.DataFrame([[3], [10]]).to_csv(split, header=False, index=False, compression="gzip")
    with pytest.raises(DataError, match=r"test\.csv\.gz: node id 10 at position 1 is out of range \[0, 10\)"):
        prepare("ogbn-arxiv", tmp_path / "ogb", tmp_path / "out")


def test_importing_ogb_starts_no_version_check() -> None:
    # ogb/version.py starts a thread querying PyPI when `outdated` imports; import_ogb() must prevent that
    code = ("from suite.data.loaders.ogb import import_ogb; import_ogb(); import ogb.version; "
            "assert ogb.version.check_outdated is None")
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True, timeout=120)


def test_ogb_edge_out_of_range_is_a_data_error(tmp_path: Path, offline: list) -> None:
    import pandas as pd

    make_ogbn_arxiv(tmp_path / "ogb")
    edges = tmp_path / "ogb" / "ogbn_arxiv" / "raw" / "edge.csv.gz"
    pd.DataFrame([[0, 1], [1, 12]] + [[2, 3]] * 10).to_csv(edges, header=False, index=False, compression="gzip")
    with pytest.raises(DataError, match=r"edge\.csv\.gz: edge destination id out of range \[0, 10\)"):
        prepare("ogbn-arxiv", tmp_path / "ogb", tmp_path / "out")
    assert not (tmp_path / "out").exists()
