"""Shchur et al.'s ``.npz`` graphs and MUSAE's Facebook Page-Page: counts and splits of the real shared files (each
prepared once), the ``--name`` path, the split options and the one-line errors on tiny files in the same layouts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from suite.cli import main
from suite.config import DatasetSpec
from suite.datasets import open_dataset
from suite.errors import ConfigError, DataError
from suite.data import GraphStore
from suite.data.loaders import NodeSplitOptions, prepare

# name: (folder, nodes, directed edges after symmetrisation, feature dim, classes)
REAL_GRAPHS = {
    "amazon-computers": ("amazon-computers", 13752, 491722, 767, 10),
    "coauthor-cs": ("coauthor-cs", 18333, 163788, 6805, 15),
    "coauthor-physics": ("coauthor-physics", 34493, 495924, 8415, 5),
    "facebook-page-page": ("facebook-page-page", 22470, 2 * (171002 - 179), 4714, 4),
}
SHCHUR = ("amazon-computers", "coauthor-cs", "coauthor-physics")


@pytest.fixture(scope="module")
def real_stores(shared_datasets: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, GraphStore]:
    out = tmp_path_factory.mktemp("real")
    return {name: prepare(name, shared_datasets / folder, out / name) for name, (folder, *_) in REAL_GRAPHS.items()}


@pytest.mark.parametrize("name", list(REAL_GRAPHS))
def test_real_graph_counts(real_stores: dict[str, GraphStore], name: str) -> None:
    store = real_stores[name]
    _, nodes, edges, feature_dim, classes = REAL_GRAPHS[name]
    assert (store.num_nodes, store.num_edges, store.feature_dim, store.num_classes) == (nodes, edges, feature_dim,
                                                                                        classes)
    assert store.features.shape == (nodes, feature_dim)
    out, into = store.csr("out"), store.csr("in")
    assert np.array_equal(out.indptr.numpy(), into.indptr.numpy())  # symmetric: in- and out-lists agree
    assert np.array_equal(out.indices.numpy(), into.indices.numpy())
    src = np.repeat(np.arange(nodes), out.degrees().numpy())
    assert not (src == out.indices.numpy()).any()  # no self-loops


@pytest.mark.parametrize("name", SHCHUR)
def test_shchur_split_is_20_30_per_class(real_stores: dict[str, GraphStore], name: str) -> None:
    store = real_stores[name]
    labels = store.labels.numpy()
    splits = {key: store.array(key) for key in ("train_nodes", "valid_nodes", "test_nodes")}
    counts = {key: np.bincount(labels[nodes], minlength=store.num_classes) for key, nodes in splits.items()}
    assert (counts["train_nodes"] == 20).all() and (counts["valid_nodes"] == 30).all()
    assert np.array_equal(counts["test_nodes"], np.bincount(labels) - 50)
    assert np.array_equal(np.sort(np.concatenate(list(splits.values()))), np.arange(store.num_nodes))
    assert store.metadata["node_split"] == {"protocol": "per_class", "train_per_class": 20, "valid_per_class": 30,
                                            "seed": 0}


def test_shchur_features_are_the_files(real_stores: dict[str, GraphStore], shared_datasets: Path) -> None:
    content = np.load(shared_datasets / "coauthor-physics" / "ms_academic_phy.npz")
    indptr, indices, data = content["attr_indptr"], content["attr_indices"], content["attr_data"]
    features = real_stores["coauthor-physics"].features
    for row in (0, 17, 34492):
        expected = np.zeros(features.shape[1], np.float32)
        expected[indices[indptr[row]:indptr[row + 1]]] = data[indptr[row]:indptr[row + 1]]
        assert np.array_equal(features[row].float().numpy(), expected)
    assert np.array_equal(real_stores["coauthor-physics"].labels.numpy(), content["labels"])


def test_facebook_labels_features_and_fraction_split(real_stores: dict[str, GraphStore],
                                                     shared_datasets: Path) -> None:
    store = real_stores["facebook-page-page"]
    assert store.metadata["class_names"] == ["company", "government", "politician", "tvshow"]
    assert store.labels[0] == 3  # node 0 is "The Voice of China", a tvshow
    lists = json.loads((shared_datasets / "facebook-page-page" / "facebook.json").read_text())
    assert store.features[554].float().sum() == len(set(lists["554"]))
    sizes = [len(store.array(key)) for key in ("train_nodes", "valid_nodes", "test_nodes")]
    assert sizes == [13482, 4494, 4494]
    assert store.metadata["node_split"] == {"protocol": "fraction", "fractions": [0.6, 0.2, 0.2], "seed": 0}


# ---------------------------------------------------------------------------------------------- tiny files
def write_npz(path: Path, **changes) -> Path:
    """A 12-node graph in Shchur et al.'s layout: two classes of six, a one-directional ring plus a self-loop."""
    num_nodes = 12
    src = np.arange(num_nodes)
    dst = (src + 1) % num_nodes
    src, dst = np.append(src, 3), np.append(dst, 3)
    order = np.argsort(src, kind="stable")
    adj_indptr = np.searchsorted(src[order], np.arange(num_nodes + 1)).astype(np.int32)
    attr_indptr = np.arange(num_nodes + 1, dtype=np.int32)
    arrays = dict(
        adj_data=np.ones(len(src), np.float32), adj_indices=dst[order].astype(np.int32), adj_indptr=adj_indptr,
        adj_shape=np.array([num_nodes, num_nodes]), attr_data=np.arange(1, num_nodes + 1, dtype=np.float32),
        attr_indices=(np.arange(num_nodes) % 4).astype(np.int32), attr_indptr=attr_indptr,
        attr_shape=np.array([num_nodes, 4]), labels=np.repeat([0, 1], 6),
    )
    arrays.update(changes)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **{key: value for key, value in arrays.items() if value is not None})
    return path


def test_any_shchur_file_by_name(tmp_path: Path) -> None:
    write_npz(tmp_path / "raw" / "amazon_electronics_photo.npz")
    store = prepare("shchur", tmp_path / "raw", tmp_path / "store", dataset_name="tiny-photo",
                    split=NodeSplitOptions(per_class=(2, 1), seed=3))
    assert (store.name, store.num_nodes, store.num_edges, store.feature_dim) == ("tiny-photo", 12, 24, 4)
    assert store.features[5, 1] == 6 and store.features.dtype.itemsize == 2  # counts kept exactly, as float16
    labels = store.labels.numpy()
    assert np.bincount(labels[store.array("train_nodes")]).tolist() == [2, 2]
    assert np.bincount(labels[store.array("valid_nodes")]).tolist() == [1, 1]
    assert len(store.array("test_nodes")) == 6
    assert store.metadata["node_split"]["seed"] == 3


def test_split_seed_and_fractions(tmp_path: Path) -> None:
    write_npz(tmp_path / "raw" / "graph.npz")

    def train(options: NodeSplitOptions | None, out: str) -> list[int]:
        return prepare("shchur", tmp_path / "raw", tmp_path / out, split=options).array("train_nodes").tolist()

    with pytest.raises(DataError, match=r"graph.npz: class 0 has 6 nodes, fewer than the 20 \+ 30"):
        train(None, "default")  # Shchur's default draws 50 nodes of each class
    assert not (tmp_path / "default").exists()
    assert train(NodeSplitOptions(per_class=(2, 1)), "same") == train(NodeSplitOptions(per_class=(2, 1)), "again")
    draws = {tuple(train(NodeSplitOptions(seed=seed, per_class=(2, 1)), f"seed{seed}")) for seed in range(4)}
    assert len(draws) > 1
    fractions = prepare("shchur", tmp_path / "raw", tmp_path / "fractions",
                        split=NodeSplitOptions(fractions=(0.5, 0.25, 0.25)))
    assert [len(fractions.array(k)) for k in ("train_nodes", "valid_nodes", "test_nodes")] == [6, 3, 3]


@pytest.mark.parametrize("changes, message", [
    ({"attr_shape": None}, r"graph.npz: missing key 'attr_shape' \(Shchur et al.'s .npz layout"),
    ({"adj_shape": np.array([12, 11])}, r"graph.npz: adjacency: adj_shape is \[12, 11\], expected square"),
    ({"adj_indptr": np.arange(12, dtype=np.int32)}, r"graph.npz: adjacency: adj_indptr must hold 13"),
    ({"attr_shape": np.array([11, 4])}, r"graph.npz: features: attr_shape is \[11, 4\], expected \(12, columns\)"),
    ({"attr_indices": np.full(12, 9, np.int32)}, r"graph.npz: attr_indices: column 9 at position 0 is out of range"),
    ({"labels": np.zeros((12, 2), np.int64)}, r"graph.npz: labels must be one integer class per node"),
])
def test_bad_shchur_file_is_one_line_naming_it(tmp_path: Path, changes: dict, message: str) -> None:
    write_npz(tmp_path / "raw" / "graph.npz", **changes)
    with pytest.raises(DataError, match=message) as caught:
        prepare("shchur", tmp_path / "raw", tmp_path / "store", split=NodeSplitOptions(per_class=(1, 1)))
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "store").exists()


def test_shchur_folder_errors(tmp_path: Path, shared_datasets: Path) -> None:
    (tmp_path / "raw").mkdir()
    with pytest.raises(DataError, match=r"raw: expected shchur.npz or exactly one .npz file .*found 0"):
        prepare("shchur", tmp_path / "raw", tmp_path / "store")
    (tmp_path / "raw" / "broken.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match=r"broken.npz: not a readable .npz file"):
        prepare("shchur", tmp_path / "raw", tmp_path / "store")
    with pytest.raises(DataError, match=r"amazon_electronics_computers.npz: missing \(Shchur et al. .npz file of "
                                         r"amazon-computers\)"):
        prepare("amazon-computers", shared_datasets / "coauthor-cs", tmp_path / "store")
    with pytest.raises(ConfigError, match="node split options: only the loaders shchur, .* draw a node split"):
        prepare("cora", shared_datasets / "planetoid", tmp_path / "store", split=NodeSplitOptions(seed=1))
    with pytest.raises(ConfigError, match="per-class counts or fractions, not both"):
        NodeSplitOptions(per_class=(1, 1), fractions=(0.5, 0.25, 0.25))


def write_musae(root: Path, edges: str = "id_1,id_2\n0,1\n1,2\n2,2\n3,0\n1,0\n",
                features: str = '{"0": [0, 2], "1": [1], "2": [], "3": [2]}',
                target: str = "id,facebook_id,page_name,page_type\n0,10,a,tvshow\n1,11,b,company\n2,12,c,company\n"
                              "3,13,d,government\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "facebook_edges.csv").write_text(edges)
    (root / "facebook.json").write_text(features)
    (root / "facebook_target.csv").write_text(target)
    return root


def test_tiny_musae_files(tmp_path: Path) -> None:
    store = prepare("facebook-page-page", write_musae(tmp_path / "raw"), tmp_path / "store",
                    split=NodeSplitOptions(fractions=(0.5, 0.25, 0.25), seed=1))
    assert (store.num_nodes, store.num_edges, store.feature_dim, store.num_classes) == (4, 6, 3, 3)
    assert store.labels.tolist() == [2, 0, 0, 1]
    assert store.features.float().tolist() == [[1, 0, 1], [0, 1, 0], [0, 0, 0], [0, 0, 1]]
    assert [len(store.array(k)) for k in ("train_nodes", "valid_nodes", "test_nodes")] == [2, 1, 1]


@pytest.mark.parametrize("changes, message", [
    ({"edges": "a,b\n0,1\n"}, r"facebook_edges.csv: missing column 'id_1'"),
    ({"edges": "id_1,id_2\n0,7\n"}, r"facebook_edges.csv: column 'id_2': node id \(of 4 in facebook_target.csv\) 7"),
    ({"features": '{"0": [0], "9": [1]}'}, r"facebook.json: key '9' is not a node id in \[0, 4\)"),
    ({"features": '{"0": ["x"]}'}, r"facebook.json: node 0: expected a list of non-negative integer feature ids"),
    ({"target": "id,page_name\n0,a\n"}, r"facebook_target.csv: missing column 'page_type'"),
    ({"target": "id,page_type\n0,a\n5,b\n"}, r"facebook_target.csv: column 'id': node id 5 at position 1"),
])
def test_bad_musae_file_is_one_line_naming_it(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(DataError, match=message) as caught:
        prepare("facebook-page-page", write_musae(tmp_path / "raw", **changes), tmp_path / "store")
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "store").exists()


def test_cli_prepare_takes_name_and_split_options(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    write_npz(tmp_path / "raw" / "some_graph.npz")
    assert main(["datasets", "prepare", "shchur", "--root", str(tmp_path / "raw"), "--name", "mine", "--out",
                 str(tmp_path / "store"), "--per-class", "3,2", "--split-seed", "5", "--quiet", "--json"]) == 0
    store = GraphStore.open(tmp_path / "store")
    assert store.name == "mine"
    assert store.metadata["node_split"] == {"protocol": "per_class", "train_per_class": 3, "valid_per_class": 2,
                                            "seed": 5}
    assert main(["datasets", "prepare", "shchur", "--root", str(tmp_path / "raw"), "--out", str(tmp_path / "x"),
                 "--per-class", "3", "--quiet"]) != 0
    assert "--per-class: expected two" in capsys.readouterr().err


def test_run_spec_names_the_dataset_and_its_split(shared_datasets: Path, tmp_path: Path) -> None:
    root = str(shared_datasets / "amazon-computers")
    spec = DatasetSpec.model_validate({"name": "amazon-computers", "root": root, "cache_dir": str(tmp_path),
                                       "split": {"seed": 4, "per_class": [20, 30]}})
    store = open_dataset(spec)
    assert (store.num_nodes, store.num_edges) == (13752, 491722)
    assert store.metadata["node_split"]["seed"] == 4
    default = open_dataset(DatasetSpec(name="amazon-computers", root=root, cache_dir=str(tmp_path)))
    assert default.path != store.path and default.metadata["node_split"]["seed"] == 0
    with pytest.raises(ConfigError, match="dataset.split: node split options: only the loaders"):
        open_dataset(DatasetSpec.model_validate({"name": "cora", "root": str(shared_datasets / "planetoid"),
                                                 "cache_dir": str(tmp_path), "split": {"seed": 1}}))


def test_split_of_the_largest_component(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # the 12-node ring cut into a path of 9 nodes (0-8) and one of 3 (9-11): class 0 is nodes 0-5, class 1 nodes 6-11
    src, dst = np.array([0, 1, 2, 3, 4, 5, 6, 7, 9, 10]), np.array([1, 2, 3, 4, 5, 6, 7, 8, 10, 11])
    order = np.argsort(src, kind="stable")
    write_npz(tmp_path / "raw" / "graph.npz", adj_data=np.ones(len(src), np.float32),
              adj_indices=dst[order].astype(np.int32),
              adj_indptr=np.searchsorted(src[order], np.arange(13)).astype(np.int32))
    store = prepare("shchur", tmp_path / "raw", tmp_path / "store",
                    split=NodeSplitOptions(per_class=(1, 1), component="largest"))
    chosen = np.concatenate([store.array(k) for k in ("train_nodes", "valid_nodes", "test_nodes")])
    assert sorted(chosen.tolist()) == list(range(9))  # every node of the component, none of the other
    assert store.num_nodes == 12 and store.labels.tolist() == [0] * 6 + [1] * 6  # the store keeps every node
    assert store.metadata["node_split"]["component"] == "largest"
    every = prepare("shchur", tmp_path / "raw", tmp_path / "every", split=NodeSplitOptions(per_class=(1, 1)))
    assert sum(len(every.array(k)) for k in ("train_nodes", "valid_nodes", "test_nodes")) == 12
    assert "component" not in every.metadata["node_split"]  # the metadata of stores split as before the option
    facebook = prepare("facebook-page-page", write_musae(tmp_path / "fb", edges="id_1,id_2\n0,1\n1,2\n"),
                       tmp_path / "fb-store", split=NodeSplitOptions(fractions=(0.5, 0.0, 0.5), component="largest"))
    assert sorted(np.concatenate([facebook.array(k) for k in ("train_nodes", "test_nodes")]).tolist()) == [0, 1, 2]
    assert main(["datasets", "prepare", "shchur", "--root", str(tmp_path / "raw"), "--out", str(tmp_path / "cli"),
                 "--per-class", "1,1", "--split-component", "largest", "--quiet"]) == 0
    assert GraphStore.open(tmp_path / "cli").metadata["node_split"]["component"] == "largest"
    with pytest.raises(ConfigError, match="component must be one of all, largest"):
        NodeSplitOptions(component="biggest")  # type: ignore[arg-type]


def test_the_split_component_is_in_the_run_id_only_when_given(shared_datasets: Path) -> None:
    root = str(shared_datasets / "amazon-computers")
    base = {"dataset": {"name": "amazon-computers", "root": root, "split": {"seed": 1}}}
    from suite.config import RunSpec

    default = RunSpec.model_validate(base)
    explicit = RunSpec.model_validate({"dataset": {**base["dataset"], "split": {"seed": 1, "component": "all"}}})
    largest = RunSpec.model_validate({"dataset": {**base["dataset"], "split": {"seed": 1, "component": "largest"}}})
    assert default.run_id == explicit.run_id != largest.run_id
