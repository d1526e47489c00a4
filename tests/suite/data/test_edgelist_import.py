"""``gnnsuite datasets import``: edge lists in CSV, TSV (SNAP layout) and Parquet into stores, checked by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from suite.cli import main
from suite.errors import ConfigError, DataError
from suite.data import GraphStore
from suite.data.loaders.edgelist import EdgeListFormat, IdMap, import_edge_list, parse_fractions

SNAP = "# Directed graph (each unordered pair of nodes is saved once): soc-LiveJournal1.txt\n" \
       "# Nodes: 4 Edges: 5\n# FromNodeId\tToNodeId\n" \
       "10\t20\n20\t30\n30\t10\n10\t40\n40\t10\n"


def out_edges(store: GraphStore) -> list[tuple[int, int]]:
    csr = store.csr("out")
    return [(v, int(w)) for v in range(store.num_nodes) for w in csr.indices[csr.indptr[v]:csr.indptr[v + 1]]]


def node_ids(store: GraphStore) -> list:
    return pd.read_parquet(store.path / "node_ids.parquet")["id"].tolist()


def test_snap_edge_list_remapped_in_order_of_appearance(tmp_path: Path) -> None:
    (tmp_path / "lj.txt").write_text(SNAP)
    store = import_edge_list(tmp_path / "lj.txt", tmp_path / "s")
    # row by row, source before destination
    assert node_ids(store) == [10, 20, 30, 40]
    assert (store.num_nodes, store.num_edges, store.num_relations) == (4, 5, 1)
    assert sorted(out_edges(store)) == [(0, 1), (0, 3), (1, 2), (2, 0), (3, 0)]
    assert store.edges("train").tolist() == [[0, 0, 1], [1, 0, 2], [2, 0, 0], [0, 0, 3], [3, 0, 0]]
    assert store.edges("valid") is None and store.edges("test") is None
    store.verify()


def test_no_remap_keeps_ids_and_undirected_stores_both_directions(tmp_path: Path) -> None:
    (tmp_path / "g.tsv").write_text("0\t2\n2\t3\n")
    store = import_edge_list(tmp_path / "g.tsv", tmp_path / "s", remap=False, directed=False)
    assert store.num_nodes == 4 and not (store.path / "node_ids.parquet").exists()
    assert sorted(out_edges(store)) == [(0, 2), (2, 0), (2, 3), (3, 2)]


def test_csv_with_header_names_string_ids_relations_and_weights(tmp_path: Path) -> None:
    (tmp_path / "kg.csv").write_text("weight,head,relation,tail\n0.5,alice,knows,bob\n2,bob,likes,carol\n"
                                     "1.5,carol,knows,alice\n")
    fmt = EdgeListFormat(source="head", destination="tail", relation="relation", weight="weight", header=True)
    store = import_edge_list(tmp_path / "kg.csv", tmp_path / "s", fmt=fmt)
    assert node_ids(store) == ["alice", "bob", "carol"]
    assert pd.read_parquet(store.path / "relation_ids.parquet")["id"].tolist() == ["knows", "likes"]
    assert store.num_relations == 2
    assert store.edges("train").tolist() == [[0, 0, 1], [1, 1, 2], [2, 0, 0]]
    assert store.array("train_edge_weights").tolist() == [0.5, 2.0, 1.5]
    csr = store.csr("out")
    assert csr.relations.tolist() == [0, 1, 0]


def test_positions_select_columns_without_header(tmp_path: Path) -> None:
    (tmp_path / "e.tsv").write_text("x\t1\t7\n y\t2\t8\n")
    fmt = EdgeListFormat(source=2, destination=1)
    store = import_edge_list(tmp_path / "e.tsv", tmp_path / "s", fmt=fmt)
    assert node_ids(store) == [7, 1, 8, 2]
    assert store.edges("train").tolist() == [[0, 0, 1], [2, 0, 3]]


def test_parquet_matches_the_same_edges_in_csv(tmp_path: Path) -> None:
    src, dst = ["a", "b", "c", "a"], ["b", "c", "a", "c"]
    pq.write_table(pa.table({"s": src, "d": dst}), tmp_path / "e.parquet")
    (tmp_path / "e.csv").write_text("s,d\n" + "".join(f"{a},{b}\n" for a, b in zip(src, dst)))
    fmt = EdgeListFormat(source="s", destination="d", header=True)
    from_parquet = import_edge_list(tmp_path / "e.parquet", tmp_path / "p", fmt=fmt)
    from_csv = import_edge_list(tmp_path / "e.csv", tmp_path / "c", fmt=fmt)
    assert from_parquet.edges("train").tolist() == from_csv.edges("train").tolist()
    assert node_ids(from_parquet) == node_ids(from_csv) == ["a", "b", "c"]


def test_splits_do_not_depend_on_the_chunk_size(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    edges = rng.integers(0, 500, (3000, 2))
    (tmp_path / "e.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in edges))
    split = parse_fractions("0.8,0.1,0.1", "--split")
    small = import_edge_list(tmp_path / "e.tsv", tmp_path / "small", split=split, chunk_bytes=1 << 10, seed=3)
    large = import_edge_list(tmp_path / "e.tsv", tmp_path / "large", split=split, seed=3)
    for name in ("train", "valid", "test"):
        assert small.edges(name).tolist() == large.edges(name).tolist()
    counts = [len(large.edges(name)) for name in ("train", "valid", "test")]
    assert sum(counts) == 3000 and 2300 < counts[0] < 2500 and 200 < counts[1] < 400
    assert large.num_edges == counts[0]  # the CSRs hold the training edges only
    other = import_edge_list(tmp_path / "e.tsv", tmp_path / "other", split=split, seed=4)
    assert other.edges("valid").tolist() != large.edges("valid").tolist()


def test_given_valid_and_test_files(tmp_path: Path) -> None:
    (tmp_path / "train.tsv").write_text("a\tb\nb\tc\n")
    (tmp_path / "valid.tsv").write_text("c\ta\n")
    (tmp_path / "test.tsv").write_text("a\tc\nd\ta\n")
    store = import_edge_list(tmp_path / "train.tsv", tmp_path / "s", valid=tmp_path / "valid.tsv",
                             test=tmp_path / "test.tsv")
    assert store.edges("valid").tolist() == [[2, 0, 0]]
    assert store.edges("test").tolist() == [[0, 0, 2], [3, 0, 0]]  # d: a node seen only in test
    assert store.num_nodes == 4 and store.num_edges == 2


def test_features_labels_and_node_splits(tmp_path: Path) -> None:
    (tmp_path / "e.tsv").write_text("3\t1\n1\t0\n")
    features = np.arange(5 * 2, dtype=np.float32).reshape(5, 2)  # row k: original node k (4 has no edge)
    np.save(tmp_path / "x.npy", features)
    (tmp_path / "labels.txt").write_text("# node label\n0 1\n1 0\n3 2\n4 1\n")
    store = import_edge_list(tmp_path / "e.tsv", tmp_path / "s", features=tmp_path / "x.npy",
                             labels=tmp_path / "labels.txt", node_split=(0.5, 0.25, 0.25))
    originals = node_ids(store)
    assert originals == [3, 1, 0, 2, 4]  # 2 and 4 added (isolated) from the feature rows
    assert store.features.numpy().tolist() == features[originals].tolist()
    assert store.labels.tolist() == [2, 0, 1, -1, 1]
    assert store.num_classes == 3 and store.feature_dim == 2
    splits = [store.split(name).tolist() for name in ("train", "valid", "test")]
    assert sorted(sum(splits, [])) == [0, 1, 2, 4]


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        ("1\t2\n3\t4\t5\n", {}, r"e\.tsv: line 2: expected 2 fields separated by '\\t', got 3"),
        ("# c\n1\t2\n3\n", {}, r"e\.tsv: line 3: expected 2 fields"),
        ("1\t2\n\n3\t4\n", {}, r"e\.tsv: line 2: missing source value"),
        ("1\t2\n3\t\n", {}, r"e\.tsv: line 2: missing destination value"),
        ("1\t2\n3\tx\n", {"id_type": "int"}, r"e\.tsv: line 2: destination 'x' is not an integer"),
        ("1\t2\t0.5\n3\t4\theavy\n", {"weight": 2}, r"e\.tsv: line 2: weight 'heavy' is not a number"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, text: str, fmt: dict, expected: str) -> None:
    (tmp_path / "e.tsv").write_text(text)
    with pytest.raises(DataError, match=expected) as info:
        import_edge_list(tmp_path / "e.tsv", tmp_path / "s", fmt=EdgeListFormat(**fmt))
    assert "\n" not in str(info.value)
    assert not (tmp_path / "s").exists()


def test_bad_row_far_into_a_chunked_file_names_its_line(tmp_path: Path) -> None:
    lines = [f"{i}\t{i + 1}\n" for i in range(20000)]
    lines[15321] = "7\tseven\n"
    (tmp_path / "e.tsv").write_text("".join(lines))
    with pytest.raises(DataError, match=r"e\.tsv: line 15322: destination 'seven' is not an integer"):
        import_edge_list(tmp_path / "e.tsv", tmp_path / "s", fmt=EdgeListFormat(id_type="int"), chunk_bytes=4096)


def test_no_remap_rejects_negative_and_non_integer_ids(tmp_path: Path) -> None:
    (tmp_path / "e.tsv").write_text("1\t2\n-3\t4\n")
    with pytest.raises(DataError, match=r"line 2: source id -3 is negative"):
        import_edge_list(tmp_path / "e.tsv", tmp_path / "s", remap=False)
    (tmp_path / "f.tsv").write_text("1\t2\n3\tq\n")
    with pytest.raises(DataError, match=r"f\.tsv: line 2: destination id 'q' is not an integer"):
        import_edge_list(tmp_path / "f.tsv", tmp_path / "s", remap=False)


def test_unknown_columns_and_options_are_config_errors(tmp_path: Path) -> None:
    (tmp_path / "e.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError, match=r"--source: no column 'src' in .*e\.csv \(its header names a, b\)"):
        import_edge_list(tmp_path / "e.csv", tmp_path / "s", fmt=EdgeListFormat(source="src", header=True))
    with pytest.raises(ConfigError, match=r"--relation: column 5 does not exist"):
        import_edge_list(tmp_path / "e.csv", tmp_path / "s", fmt=EdgeListFormat(relation=5))
    with pytest.raises(ConfigError, match=r"--split: expected three non-negative fractions"):
        parse_fractions("0.9,0.2,0.1", "--split")


def test_id_map_grows_in_order_of_first_appearance() -> None:
    ids = IdMap()
    assert ids.map(np.array([5, 7, 5])).tolist() == [0, 1, 0]
    assert ids.map(np.array([9, 7, 11, 9])).tolist() == [2, 1, 3, 2]
    assert ids.lookup(np.array([11, 4])).tolist() == [3, -1]
    assert ids.originals().tolist() == [5, 7, 9, 11]


def test_import_command(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "lj.txt").write_text(SNAP)
    assert main(["datasets", "import", str(tmp_path / "lj.txt"), "--out", str(tmp_path / "s"), "--split",
                 "0.6,0.2,0.2", "--quiet", "--json"]) == 0
    store = GraphStore.open(tmp_path / "s")
    assert store.name == "lj" and store.metadata["source"]["loader"] == "edge_list"
    (tmp_path / "bad.txt").write_text("1\t2\n3\n")
    assert main(["datasets", "import", str(tmp_path / "bad.txt"), "--out", str(tmp_path / "b")]) == 2
    assert "bad.txt: line 2: expected 2 fields" in capsys.readouterr().err
    assert main(["datasets", "import", str(tmp_path / "lj.txt"), "--out", str(tmp_path / "c"), "--source",
                 "from", "--header"]) == 2


def test_line_blocks_end_at_line_ends_and_skip_leading_lines(tmp_path: Path) -> None:
    from suite.data.loaders.edgelist import _line_blocks

    path = tmp_path / "e.tsv"
    path.write_bytes(b"# comment\n1\t2\n3\t4\n55555\t6\n7\t8")  # no newline after the last line
    blocks = list(_line_blocks(path, 1, 5))
    assert all(block.endswith(b"\n") for block in blocks[:-1])
    assert b"".join(blocks) == b"1\t2\n3\t4\n55555\t6\n7\t8"
    assert b"55555\t6\n" in blocks  # a line longer than the block size makes its block longer


def test_import_reads_small_blocks_like_one(tmp_path: Path) -> None:
    path = tmp_path / "e.tsv"
    path.write_text("# snap\n" + "".join(f"{i * 7 % 13}\t{i * 5 % 11}\n" for i in range(200)))
    small = import_edge_list(path, tmp_path / "small", chunk_bytes=16)
    whole = import_edge_list(path, tmp_path / "whole")
    assert small.edges("train").tolist() == whole.edges("train").tolist()
    assert small.num_nodes == whole.num_nodes
