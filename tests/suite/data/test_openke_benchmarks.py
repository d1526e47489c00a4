"""Every OpenKE benchmark name on one loader, and ``gnnsuite datasets prepare openke --name NAME``.

Fixtures are tiny folders in OpenKE's published layout (``benchmarks/<NAME>/``: ``entity2id.txt``,
``relation2id.txt``, ``train2id.txt``, ``valid2id.txt``, ``test2id.txt``, plus the extra files OpenKE ships
beside them, ``type_constrain.txt`` and ``1-1.txt``..., which the loader ignores).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.cli import main
from suite.errors import ConfigError, DataError
from suite.data import GraphStore
from suite.data.loaders import LOADERS, prepare
from suite.data.loaders.openke import OPENKE_BENCHMARKS

WORDNET_ENTITIES = ["00260881", "00260622", "01332730", "06066555", "03754979", "00001740"]


def write_benchmark(root: Path, entities: list[str], relations: list[str], train: list[tuple[int, int, int]],
                    valid: list[tuple[int, int, int]], test: list[tuple[int, int, int]]) -> Path:
    """An OpenKE benchmark folder: names to ids, then ``head tail relation`` triples after a count line."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "entity2id.txt").write_text(f"{len(entities)}\n" + "".join(f"{e}\t{i}\n" for i, e in enumerate(entities)))
    (root / "relation2id.txt").write_text(f"{len(relations)}\n" + "".join(f"{r}\t{i}\n" for i, r in enumerate(relations)))
    for stem, triples in (("train2id", train), ("valid2id", valid), ("test2id", test)):
        (root / f"{stem}.txt").write_text(f"{len(triples)}\n" + "".join(f"{h} {t} {r}\n" for h, t, r in triples))
    (root / "type_constrain.txt").write_text(f"{len(relations)}\n0\t1\t0\n")  # shipped by OpenKE, not read
    (root / "1-1.txt").write_text("0\n")
    return root


def wordnet_like(root: Path) -> Path:
    # hypernym is the only relation with a self-loop-free chain; WN18RR keeps 11 relations, here 3
    return write_benchmark(root, WORDNET_ENTITIES, ["_hypernym", "_derivationally_related_form", "_member_meronym"],
                           train=[(0, 1, 0), (1, 2, 0), (2, 3, 1), (3, 2, 1), (4, 5, 2), (0, 5, 2)],
                           valid=[(2, 4, 0)], test=[(5, 0, 1), (1, 3, 2)])


def test_every_benchmark_name_is_registered() -> None:
    for name in ("openke", "fb15k", "fb15k237", "wn18", "wn18rr", "yago3-10"):
        assert name in LOADERS
    assert set(OPENKE_BENCHMARKS) == {"fb15k", "fb15k237", "wn18", "wn18rr", "yago3-10"}


@pytest.mark.parametrize("name", ["fb15k", "wn18", "wn18rr", "yago3-10", "openke"])
def test_benchmark_folder_prepares(tmp_path: Path, name: str) -> None:
    store = prepare(name, wordnet_like(tmp_path / "raw"), tmp_path / "kg")
    assert (store.num_nodes, store.num_relations, store.num_edges) == (6, 3, 6)
    assert store.name == name
    # columns (src, rel, dst) from the file's (head, tail, relation)
    assert store.edges("valid").tolist() == [[2, 0, 4]]
    assert store.edges("test").tolist() == [[5, 1, 0], [1, 2, 3]]
    out = store.csr("out")
    assert out.indices[out.indptr[0]:out.indptr[1]].tolist() == [1, 5]
    assert out.relations[out.indptr[0]:out.indptr[1]].tolist() == [0, 2]
    store.verify()


def test_prepare_command_takes_any_benchmark_name(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    raw = wordnet_like(tmp_path / "raw")
    out = tmp_path / "stores" / "codex-s"
    assert main(["datasets", "prepare", "openke", "--name", "codex-s", "--root", str(raw), "--out", str(out),
                 "--quiet"]) == 0
    store = GraphStore.open(out)
    assert store.name == "codex-s" and store.num_relations == 3
    assert store.metadata["source"]["loader"] == "openke"


def test_prepare_command_default_output_is_under_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = wordnet_like(tmp_path / "raw")
    monkeypatch.chdir(tmp_path)
    assert main(["datasets", "prepare", "wn18rr", "--root", str(raw), "--quiet"]) == 0
    assert GraphStore.open(tmp_path / "data" / "wn18rr").num_nodes == 6


def test_only_openke_takes_another_name(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ConfigError, match="--name: only the loaders openke, marius"):
        prepare("cora", tmp_path, tmp_path / "out", dataset_name="mycora")
    assert main(["datasets", "prepare", "cora", "--name", "x", "--root", str(tmp_path), "--out",
                 str(tmp_path / "o")]) == 2
    assert "--name" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["wn18rr", "yago3-10"])
def test_bad_benchmark_file_names_file_and_line(tmp_path: Path, name: str) -> None:
    raw = wordnet_like(tmp_path / "raw")
    (raw / "test2id.txt").write_text("2\n5 0 1\n1 3 7\n")
    with pytest.raises(DataError, match=r"test2id\.txt: line 3: relation id 7 is out of range \[0, 3\)"):
        prepare(name, raw, tmp_path / "kg")
    assert not (tmp_path / "kg").exists()


def test_dataset_spec_resolves_every_benchmark_name(tmp_path: Path) -> None:
    from suite.config import DatasetSpec
    from suite.datasets import open_dataset

    raw = wordnet_like(tmp_path / "raw")
    for name in ("wn18rr", "openke"):
        store = open_dataset(DatasetSpec(name=name, root=str(raw), cache_dir=str(tmp_path / "cache")))
        assert store.num_edges == 6


def test_real_fb15k237_through_the_openke_name(shared_datasets: Path, tmp_path: Path) -> None:
    store = prepare("openke", shared_datasets / "fb15k237", tmp_path / "kg", dataset_name="fb15k-237")
    assert (store.num_nodes, store.num_relations) == (14541, 237)
    assert [len(store.edges(s)) for s in ("train", "valid", "test")] == [272115, 17535, 20466]
    head, tail, relation = map(int, (shared_datasets / "fb15k237" / "test2id.txt").read_text().split("\n")[1].split())
    assert store.edges("test")[0].tolist() == [head, relation, tail]
    assert store.name == "fb15k-237"
