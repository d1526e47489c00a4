"""Synthetic graph generator: configuration, determinism, the statistics it promises, and atomic output."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from suite.errors import ConfigError, DataError
from suite.data import GraphStore
from suite.data import synthetic
from suite.data.synthetic import PRESETS, SyntheticConfig, config_from_spec, generate

REPO_ROOT = Path(__file__).resolve().parents[3]
TINY = PRESETS.get("tiny")


def _checksums(store: GraphStore) -> dict[str, str]:
    return {key: entry["checksum"] for key, entry in store.metadata["files"].items()}


def _edge_set(store: GraphStore) -> set[tuple[int, int, int]]:
    src, dst = store.edge_index().tolist()
    csr = store.csr("out")
    rel = [0] * len(src) if csr.relations is None else csr.relations.tolist()
    return set(zip(src, rel, dst))


def _hill_tail_index(degrees: np.ndarray, tail: int) -> float:
    """Hill estimate of the tail index alpha of P(D > d) ~ d**-alpha from the ``tail`` largest degrees."""
    top = np.sort(degrees)[::-1][: tail + 1].astype(np.float64)
    return tail / np.log(top[:tail] / top[tail]).sum()


def _nearest_class_mean_accuracy(x: torch.Tensor, labels: torch.Tensor, train: torch.Tensor,
                                 test: torch.Tensor, num_classes: int) -> float:
    means = torch.zeros(num_classes, x.shape[1], dtype=x.dtype).index_add_(0, labels[train], x[train])
    means /= torch.bincount(labels[train], minlength=num_classes).clamp(min=1).unsqueeze(1)
    predicted = torch.cdist(x[test], means).argmin(dim=1)
    return (predicted == labels[test]).double().mean().item()


# ---------------------------------------------------------------------------------------------- configuration
def test_presets_exist_with_the_statistics_they_stand_for():
    assert {"tiny", "arxiv-like", "products-like", "livejournal-like", "papers-like-s"} <= set(PRESETS.names())
    for name in PRESETS:
        assert PRESETS.get(name).name == name
    arxiv, products = PRESETS.get("arxiv-like"), PRESETS.get("products-like")
    assert (arxiv.num_nodes, arxiv.feature_dim, arxiv.num_classes) == (169_343, 128, 40)
    assert 13 <= arxiv.avg_degree <= 14
    assert (products.feature_dim, products.num_classes) == (100, 47) and 2.3e6 < products.num_nodes < 2.5e6
    assert 45 <= products.avg_degree <= 55
    livejournal = PRESETS.get("livejournal-like")
    assert livejournal.directed and livejournal.feature_dim == 0
    assert 65e6 < livejournal.num_nodes * livejournal.avg_degree < 72e6
    papers = PRESETS.get("papers-like-s")
    assert (papers.feature_dim, papers.num_classes) == (128, 172) and 0.012 < papers.label_rate < 0.016
    assert 27 < papers.avg_degree < 31 and papers.num_nodes <= 3_000_000
    tiny = PRESETS.get("tiny")
    assert tiny.num_nodes < 1000 and tiny.feature_dim and tiny.has_labels and tiny.label_rate < 1
    assert tiny.num_relations > 1 and tiny.has_edge_splits


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown preset 'nope' \(known: .*arxiv-like.*tiny"):
        PRESETS.get("nope")
    with pytest.raises(ConfigError, match="unknown preset"):
        generate("nope", "/nonexistent/never-written")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_nodes": -3}, "synthetic.num_nodes must be > 0, got -3"),
        ({"num_nodes": 2.5}, "synthetic.num_nodes must be an integer, got 2.5"),
        ({"num_nodes": True}, "synthetic.num_nodes must be a number, got True"),
        ({"avg_degree": -1}, "synthetic.avg_degree must be in [0, num_nodes - 1"),
        ({"avg_degree": float("nan")}, "synthetic.avg_degree must be finite"),
        ({"power_law_exponent": 1.0}, "synthetic.power_law_exponent must be > 1, got 1.0"),
        ({"max_degree": 0}, "synthetic.max_degree must be >= 1 or None, got 0"),
        ({"num_classes": 0}, "synthetic.num_classes must be >= 1, got 0"),
        ({"homophily": 1.5}, "synthetic.homophily must be in [0, 1], got 1.5"),
        ({"feature_dim": -1}, "synthetic.feature_dim must be >= 0, got -1"),
        ({"feature_dtype": "float64"}, "synthetic.feature_dtype must be one of float32, float16"),
        ({"signal": -0.1}, "synthetic.signal must be >= 0"),
        ({"label_rate": -0.5}, "synthetic.label_rate must be in [0, 1]"),
        ({"train_fraction": 0.9}, "synthetic.train_fraction must be such that train_fraction + valid_fraction"),
        ({"num_relations": 0}, "synthetic.num_relations must be >= 1, got 0"),
        ({"relation_noise": 2}, "synthetic.relation_noise must be in [0, 1], got 2.0"),
        ({"valid_edge_fraction": 1.0}, "synthetic.valid_edge_fraction must be in [0, 1)"),
        ({"valid_edge_fraction": 0.6, "test_edge_fraction": 0.5}, "synthetic.valid_edge_fraction must be such"),
        ({"directed": "yes"}, "synthetic.directed must be true or false, got 'yes'"),
        ({"seed": -1}, "synthetic.seed must be >= 0, got -1"),
        ({"name": ""}, "synthetic.name must be a non-empty string"),
        ({"num_nodez": 5}, "synthetic.num_nodez is not a field (known: name, num_nodes"),
    ],
)
def test_bad_values_raise_one_line_config_errors_naming_the_field(overrides, message):
    with pytest.raises(ConfigError) as raised:
        TINY.replace(**overrides)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_config_is_frozen_and_coerces_numbers():
    config = SyntheticConfig(avg_degree=4, num_nodes=np.int64(50))
    assert isinstance(config.avg_degree, float) and type(config.num_nodes) is int
    assert config == SyntheticConfig(avg_degree=4.0, num_nodes=50)
    with pytest.raises(Exception):
        config.num_nodes = 3  # type: ignore[misc]
    assert SyntheticConfig.from_dict(config.to_dict()) == config


def test_config_from_spec():
    config = config_from_spec("arxiv-like, num_nodes=1000,avg_degree=2.5,directed=true,max_degree=none")
    assert config == PRESETS.get("arxiv-like").replace(num_nodes=1000, avg_degree=2.5, directed=True,
                                                       max_degree=None)
    with pytest.raises(ConfigError, match="synthetic.num_nodes must be a number, got 'many'"):
        config_from_spec("tiny,num_nodes=many")
    with pytest.raises(ConfigError, match="expected field=value"):
        config_from_spec("tiny,num_nodes")
    with pytest.raises(ConfigError, match="synthetic.bogus is not a field"):
        config_from_spec("tiny,bogus=1")
    assert synthetic.parse_field_value("max_degree", "100") == 100
    assert synthetic.parse_field_value("max_degree", "None") is None
    assert synthetic.parse_field_value("signal", "1e-1") == 0.1


def test_cap_weights_bounds_the_expected_degree():
    weights = np.random.default_rng(0).pareto(1.2, 100_000) + 1
    capped = synthetic.cap_weights(weights.copy(), avg_degree=10, max_degree=50)
    assert (10 * capped / capped.mean()).max() <= 50 * (1 + 1e-6)
    assert (10 * weights / weights.mean()).max() > 50


# ---------------------------------------------------------------------------------------------- the store
def test_tiny_store_counts_files_and_verify(tmp_path):
    store = generate("tiny", tmp_path / "tiny")
    store.verify()
    assert store.path == tmp_path / "tiny" and store.name == "tiny"
    assert (store.num_nodes, store.num_relations, store.num_classes, store.feature_dim) == (300, 3, 4, 16)
    assert not store.directed
    expected = {"in_indptr", "in_indices", "in_relations", "out_indptr", "out_indices", "out_relations",
                "features", "labels", "train_nodes", "valid_nodes", "test_nodes", "train_edges", "valid_edges",
                "test_edges"}
    assert set(store.metadata["files"]) == expected
    assert sorted(p.name for p in store.path.iterdir()) == sorted([f"{k}.npy" for k in expected] + ["metadata.json"])
    assert store.metadata["source"] == {"generator": "synthetic", **TINY.to_dict()}
    assert store.features.dtype == torch.float32 and store.features.shape == (300, 16)
    # Stored edges: about n * avg_degree, less the held-out 10% and a few duplicates.
    assert 0.7 * 300 * 8 * 0.9 <= store.num_edges <= 300 * 8 * 0.9
    src, dst = store.edge_index()
    assert (src != dst).all()
    assert len(_edge_set(store)) == store.num_edges  # (src, rel, dst) triples are unique
    assert _edge_set(store) == {(d, r, s) for s, r, d in _edge_set(store)}  # undirected: both directions


def test_directed_float16_variant(tmp_path):
    config = TINY.replace(directed=True, feature_dtype="float16", num_nodes=500)
    store = generate(config, tmp_path / "g")
    store.verify()
    assert store.directed and store.features.dtype == torch.float16
    assert len(store.edges("train")) == store.num_edges
    assert _edge_set(store) != {(d, r, s) for s, r, d in _edge_set(store)}


def test_no_features_no_labels(tmp_path):
    # Fewer communities than the preset's 64: at 3000 nodes those would be so small that many edges collide.
    config = PRESETS.get("livejournal-like").replace(num_nodes=3000, max_degree=None, num_classes=8)
    store = generate(config, tmp_path / "lj")
    store.verify()
    assert not store.has("features") and not store.has("labels") and not store.has("train_nodes")
    assert store.num_classes == 0 and store.feature_dim == 0 and store.metadata["labeled_nodes"] == 0
    assert store.has("train_edges") and not store.has("out_relations")
    assert 0.75 * 3000 * 14.23 * 0.9 <= store.num_edges <= 3000 * 14.23 * 0.9  # less duplicates


def test_overwrite(tmp_path):
    generate("tiny", tmp_path / "g")
    with pytest.raises(DataError, match="already exists"):
        generate("tiny", tmp_path / "g")
    store = generate(TINY.replace(seed=5), tmp_path / "g", overwrite=True)
    assert store.metadata["source"]["seed"] == 5


# ---------------------------------------------------------------------------------------------- determinism
def test_same_seed_same_files_different_seed_different(tmp_path):
    config = TINY.replace(num_nodes=2000)
    first = generate(config, tmp_path / "a")
    again = generate(config, tmp_path / "b")
    other = generate(config.replace(seed=1), tmp_path / "c")
    assert _checksums(first) == _checksums(again)
    differing = {k for k, v in _checksums(first).items() if _checksums(other)[k] != v}
    assert differing == set(_checksums(first))


def test_output_does_not_depend_on_chunking(tmp_path, monkeypatch):
    config = TINY.replace(num_nodes=3000)
    reference = generate(config, tmp_path / "a")
    small = generate(config, tmp_path / "b", chunk_edges=1000, max_bucket_edges=2000)
    assert _checksums(small) == _checksums(reference)
    monkeypatch.setattr(synthetic, "EDGE_BLOCK", 1000)  # the random streams change with the block size
    assert _checksums(generate(config, tmp_path / "c"))["out_indices"] != _checksums(reference)["out_indices"]


# ---------------------------------------------------------------------------------------------- statistics
@pytest.mark.parametrize("homophily", [0.2, 0.85])
def test_measured_homophily_matches_config(tmp_path, homophily):
    config = TINY.replace(num_nodes=5000, num_classes=5, label_rate=1.0, homophily=homophily,
                          valid_edge_fraction=0.0, test_edge_fraction=0.0, feature_dim=0)
    store = generate(config, tmp_path / "g")
    src, dst = store.edge_index()
    labels = store.labels
    measured = (labels[src] == labels[dst]).double().mean().item()
    assert measured == pytest.approx(homophily, abs=0.03)


def test_realized_homophily_predicts_the_stored_graphs_below_the_drawn_one(tmp_path):
    # hubs in small classes: many same-class self-loops and repeats, so the stored graph is clearly less homophilous
    config = SyntheticConfig(num_nodes=4000, avg_degree=40, num_classes=20, class_skew=1.0, homophily=0.4,
                             feature_dim=0, label_rate=1.0, seed=3)
    store = generate(config, tmp_path / "g")
    src, dst = store.edge_index()
    measured = (store.labels[src] == store.labels[dst]).double().mean().item()
    estimate = synthetic.realized_homophily(config)
    assert measured < config.homophily - 0.02
    assert estimate == pytest.approx(measured, abs=0.005)
    assert synthetic.realized_homophily(config.replace(homophily=0.6)) > estimate


def test_degrees_are_heavy_tailed_with_the_configured_exponent(tmp_path):
    estimates = {}
    for gamma in (2.2, 3.0):
        config = SyntheticConfig(num_nodes=20_000, avg_degree=10, power_law_exponent=gamma, feature_dim=0,
                                 label_rate=0.0, num_classes=4)
        degrees = generate(config, tmp_path / str(gamma)).csr("out").degrees().numpy()
        assert degrees.mean() > 8
        estimates[gamma] = _hill_tail_index(degrees, tail=400)  # expected gamma - 1
        assert estimates[gamma] == pytest.approx(gamma - 1, abs=0.4)
    assert estimates[2.2] < estimates[3.0] - 0.4
    config = SyntheticConfig(num_nodes=20_000, avg_degree=10, power_law_exponent=2.2, feature_dim=0,
                             label_rate=0.0)
    degrees = generate(config, tmp_path / "heavy").csr("out").degrees().numpy()
    assert degrees.max() > 50 * degrees.mean()
    capped = generate(config.replace(max_degree=100), tmp_path / "capped").csr("out").degrees().numpy()
    assert capped.max() < 150


def test_label_rate_and_disjoint_sorted_splits(tmp_path):
    config = TINY.replace(num_nodes=20_000, label_rate=0.3, train_fraction=0.5, valid_fraction=0.2,
                          test_fraction=0.3, feature_dim=0, avg_degree=2)
    store = generate(config, tmp_path / "g")
    labels = store.labels.numpy()
    labeled = np.flatnonzero(labels >= 0)
    assert len(labeled) / 20_000 == pytest.approx(0.3, abs=0.015)
    assert store.metadata["labeled_nodes"] == len(labeled)
    splits = {name: store.split(name).numpy() for name in ("train", "valid", "test")}
    for name, fraction in (("train", 0.5), ("valid", 0.2), ("test", 0.3)):
        nodes = splits[name]
        assert (np.diff(nodes) > 0).all(), f"{name}_nodes not sorted and unique"
        assert len(nodes) / len(labeled) == pytest.approx(fraction, abs=0.03)
    union = np.concatenate(list(splits.values()))
    assert len(np.unique(union)) == len(union)
    assert np.array_equal(np.sort(union), labeled)
    assert set(np.unique(labels[labeled])) == set(range(config.num_classes))


@pytest.mark.parametrize("directed", [False, True])
def test_link_prediction_splits_are_held_out_of_the_graph(tmp_path, directed):
    config = TINY.replace(num_nodes=1000, directed=directed, valid_edge_fraction=0.1, test_edge_fraction=0.15)
    store = generate(config, tmp_path / "g")
    store.verify()
    graph = _edge_set(store)
    train = {tuple(e) for e in store.edges("train").tolist()}
    valid = [tuple(e) for e in store.edges("valid").tolist()]
    test = [tuple(e) for e in store.edges("test").tolist()]
    if directed:
        assert train == graph
    else:
        assert train == {(s, r, d) for s, r, d in graph if s < d}
        assert all(s < d for s, _, d in valid + test)
    assert len(set(valid)) == len(valid) and len(set(test)) == len(test)
    assert not set(valid) & set(test)
    assert not (set(valid) | set(test)) & graph
    assert all(s != d for s, _, d in valid + test)
    # Held-out edges that duplicate another edge are dropped: at this size (hubs of degree ~n) many are.
    sampled = config.num_sampled_edges
    assert 0.6 * 0.10 * sampled < len(valid) <= 1.2 * 0.10 * sampled
    assert 0.6 * 0.15 * sampled < len(test) <= 1.2 * 0.15 * sampled
    assert len(valid) < len(test)
    assert store.edges("valid").dtype == torch.int64 and store.edges("valid").shape[1] == 3


def test_relations_are_in_range_and_a_function_of_the_classes(tmp_path):
    config = TINY.replace(num_nodes=4000, num_classes=4, num_relations=5, relation_noise=0.1, label_rate=1.0,
                          directed=True, valid_edge_fraction=0.0, test_edge_fraction=0.0)
    store = generate(config, tmp_path / "g")
    src, dst = store.edge_index()
    relations = store.csr("out").relations.long()
    assert relations.min() >= 0 and relations.max() < 5
    assert len(torch.unique(relations)) > 1
    labels = store.labels
    pair = labels[src] * config.num_classes + labels[dst]
    counts = torch.zeros(config.num_classes**2, 5).index_put_((pair, relations), torch.ones(len(pair)),
                                                              accumulate=True)
    # Each class pair has one dominant relation: 90% + 10%/5 expected.
    dominant = counts.max(dim=1).values.sum() / counts.sum()
    assert dominant.item() > 0.85
    noisy = generate(config.replace(relation_noise=1.0), tmp_path / "noisy")
    src, dst = noisy.edge_index()
    pair = noisy.labels[src] * config.num_classes + noisy.labels[dst]
    counts = torch.zeros(config.num_classes**2, 5).index_put_(
        (pair, noisy.csr("out").relations.long()), torch.ones(len(pair)), accumulate=True)
    assert (counts.max(dim=1).values.sum() / counts.sum()).item() < 0.4


def test_features_alone_are_clearly_worse_than_neighbour_averaged_features(tmp_path):
    config = SyntheticConfig(num_nodes=6000, avg_degree=12, num_classes=8, homophily=0.75, feature_dim=32,
                             signal=1.0, label_rate=1.0, train_fraction=0.5, valid_fraction=0.0,
                             test_fraction=0.5)
    store = generate(config, tmp_path / "g")
    x, labels = store.features.double(), store.labels
    train, test = store.split("train"), store.split("test")
    raw = _nearest_class_mean_accuracy(x, labels, train, test, config.num_classes)
    csr = store.csr("in")
    dst = torch.repeat_interleave(torch.arange(store.num_nodes), csr.degrees())
    summed = x.clone().index_add_(0, dst, x[csr.indices.long()])
    averaged = summed / (csr.degrees() + 1).unsqueeze(1)
    smoothed = _nearest_class_mean_accuracy(averaged, labels, train, test, config.num_classes)
    assert 1 / config.num_classes + 0.05 < raw < 0.6
    assert smoothed > raw + 0.2
    # With no signal in the features, neither is better than chance.
    blind = generate(config.replace(signal=0.0), tmp_path / "blind")
    chance = _nearest_class_mean_accuracy(blind.features.double(), blind.labels, train, test, config.num_classes)
    assert chance < 1 / config.num_classes + 0.05


# ---------------------------------------------------------------------------------------------- atomicity
@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_interrupted_generation_leaves_no_folder(tmp_path, monkeypatch, error):
    calls = []
    original = synthetic.sample_edges

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise error
        return original(*args, **kwargs)

    monkeypatch.setattr(synthetic, "EDGE_BLOCK", 100)
    monkeypatch.setattr(synthetic, "sample_edges", failing)
    with pytest.raises(type(error)):
        generate("tiny", tmp_path / "g")
    assert len(calls) == 3
    assert list(tmp_path.iterdir()) == []


def test_interrupted_overwrite_keeps_the_old_store(tmp_path, monkeypatch):
    old = generate("tiny", tmp_path / "g")
    before = _checksums(old)

    def failing(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(synthetic, "_write_edge_splits", failing)
    with pytest.raises(KeyboardInterrupt):
        generate(TINY.replace(seed=3), tmp_path / "g", overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["g"]
    assert _checksums(GraphStore.open(tmp_path / "g")) == before


# ---------------------------------------------------------------------------------------------- memory
_CHILD = textwrap.dedent("""
    import sys
    from suite.data.synthetic import config_from_spec, generate
    store = generate(config_from_spec(sys.argv[1]), sys.argv[2])
    print(store.num_edges)
""")


@pytest.mark.slow
def test_peak_memory_is_bounded_on_a_bigger_graph(tmp_path):
    num_nodes = 2_000_000
    spec = f"arxiv-like,num_nodes={num_nodes},avg_degree=16,feature_dim=32,max_degree=20000"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    child = subprocess.Popen([sys.executable, "-c", _CHILD, spec, str(tmp_path / "g")], env=env,
                             stdout=subprocess.PIPE, text=True)
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.stdout.close()
    assert os.waitstatus_to_exitcode(status) == 0
    assert int(output.strip()) > 0.9 * num_nodes * 16
    peak = usage.ru_maxrss * 1024
    budget = 2 * 2**30 + 8 * 8 * num_nodes  # 2 GiB + 8 words per node
    assert peak <= budget, f"peak RSS {peak / 2**20:.0f} MiB over budget {budget / 2**20:.0f} MiB"
