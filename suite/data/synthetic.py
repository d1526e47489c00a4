"""Synthetic graphs with planted communities and power-law degrees: the suite's embedded default datasets.

The model is a degree-corrected stochastic block model in the Chung-Lu style:

* every node ``v`` gets a class ``c(v)`` (class ``k`` with probability proportional to ``(k+1)**-class_skew``)
  and a weight ``w(v)`` drawn from a Pareto law with tail exponent ``power_law_exponent - 1``, so that the
  degree distribution has ``P(deg = k) ~ k**-power_law_exponent``; weights are capped so that no expected
  degree exceeds ``max_degree`` (and ``num_nodes - 1``);
* every edge draws its source with probability proportional to ``w``; with probability ``homophily`` its
  destination is drawn (again proportional to ``w``) from the source's class, otherwise from the other classes.
  ``homophily`` is thus the *edge homophily* of the edges drawn: the fraction whose endpoints share a class (the
  stored graph's is a little lower, as self-loops and repeats, dropped, fall mostly inside classes:
  :func:`realized_homophily`);
* an edge's relation type is a fixed random function of the two endpoint classes (a ``C x C`` table, symmetric
  for undirected graphs), replaced by a uniformly random relation with probability ``relation_noise``, so
  relations are learnable from node embeddings;
* node features are ``class mean + N(0, I)`` noise; class means are ``N(0, signal**2 / (2 d) I)``, so two class
  means lie about ``signal`` noise standard deviations apart whatever the dimension ``d``. ``signal`` sets what
  features alone achieve, ``homophily`` how much averaging over neighbours adds (the feature-bearing presets are
  calibrated on both, see "Synthetic presets" in docs/datasets.md);
* a fraction ``label_rate`` of the nodes is labeled and split into train/valid/test; with link-prediction splits,
  a fraction of the edges is held out of the graph into ``valid_edges``/``test_edges``.

Generation streams: edges are drawn in fixed blocks of :data:`EDGE_BLOCK` edges and nodes in blocks of
:data:`NODE_BLOCK` rows, each with its own random stream (``SeedSequence(seed, spawn_key=(stream, block))``),
and handed to the out-of-core :func:`~suite.data.csr.write_csrs` (which drops self-loops and repeated
``(src, rel, dst)`` triples) and to ``.npy`` appenders. Memory is O(num_nodes) words (classes, the class-sorted
node order and its cumulative weights, the CSR builder's degree counts) plus a few blocks and the CSR builder's
sort buffers (bounded by ``max_bucket_edges``) plus, with link-prediction splits, the held-out edges (24 bytes
each, sorted in memory to remove duplicates). The output depends only on the configuration (not on
``chunk_edges`` or ``max_bucket_edges``). Measured on 2 cores: ~1M stored edges in 1.5 to 2 s; 1M nodes and
20M edges with 128 features in 30 s and 1 GB peak RSS; livejournal-like in 2 min and 1.2 GB
(``experiments/measure/dataset_generation.py``).

Example::

    from suite.data.synthetic import PRESETS, generate

    store = generate(PRESETS.get("arxiv-like").replace(seed=1), "/tmp/arxiv-like")
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from suite.errors import ConfigError
from suite.data.csr import DEFAULT_CHUNK_EDGES, EdgeChunk, write_csrs
from suite.data.npy import NpyAppender, read_npy_header
from suite.data.store import FEATURE_DTYPES, GraphStore, StoreWriter, create_store
from suite.registry import Registry

EDGE_BLOCK = 1 << 20
"""Edges drawn per random stream; fixed, so the output does not depend on how the edges are chunked."""
NODE_BLOCK = 1 << 16
"""Nodes (feature rows, labels, splits) drawn per random stream."""
MAX_BUCKET_EDGES = 1 << 24
"""Default largest edge bucket sorted in memory by :func:`write_csrs` (~0.8 GB of sort buffers at this size)."""
_TRAIN_EDGE_CHUNK = 1 << 22  # edges per read when streaming the CSR into train_edges
_STREAM_MODEL, _STREAM_NODES, _STREAM_EDGES = 0, 1, 2
_CAP_ITERATIONS = 50


# ---------------------------------------------------------------------------------------------- configuration
def _fail(field: str, requirement: str, value: Any) -> ConfigError:
    return ConfigError(f"synthetic.{field} must be {requirement}, got {value!r}")


@dataclass(frozen=True)
class SyntheticConfig:
    """Parameters of a synthetic graph; validated on construction (a bad value raises :class:`ConfigError`).

    Attributes:
        name: dataset name recorded in the store.
        num_nodes: number of nodes.
        avg_degree: average number of stored (directed) edges per node, i.e. the average out-degree of the CSR;
            for an undirected graph, the average degree. Counted before held-out link-prediction edges,
            duplicates and self-loops are removed, so the store holds fewer: ~1-2% fewer at millions of nodes,
            10-30% fewer on graphs of a few thousand nodes, where hub pairs and small communities collide.
        power_law_exponent: exponent ``gamma`` of the degree distribution ``P(k) ~ k**-gamma`` (> 1; real
            graphs: 2 to 3).
        max_degree: cap on any node's expected degree (None: only ``num_nodes - 1``).
        directed: directed graph; otherwise every edge is stored in both directions.
        num_classes: number of classes (planted communities), also when no node is labeled.
        class_skew: class ``k`` has probability proportional to ``(k + 1) ** -class_skew`` (0: balanced).
        homophily: fraction of edges whose endpoints share a class (in [0, 1]).
        feature_dim: node feature dimension (0: no features).
        feature_dtype: ``"float32"`` or ``"float16"``.
        signal: root-mean-square distance between two class means, in noise standard deviations. Averaging
            over neighbours helps more here than on real graphs (the noise is independent across nodes and
            the other-class neighbours are spread over all classes), so the presets that match a real graph's
            MLP and GNN accuracies have a lower ``homophily`` than the real graph.
        label_rate: fraction of labeled nodes (0: no labels); the others are labeled -1.
        train_fraction: fraction of the labeled nodes in ``train_nodes``.
        valid_fraction: fraction of the labeled nodes in ``valid_nodes``.
        test_fraction: fraction of the labeled nodes in ``test_nodes`` (the three sum to 1).
        num_relations: relation types (1: untyped).
        relation_noise: probability that an edge's relation is uniformly random instead of the function of its
            endpoint classes.
        valid_edge_fraction: fraction of the edges held out of the graph into ``valid_edges``.
        test_edge_fraction: fraction of the edges held out of the graph into ``test_edges``; when either is
            > 0, the store also holds ``train_edges`` (the graph's edges, once per undirected edge).
        seed: random seed (>= 0); the output is a function of the configuration alone.
    """

    name: str = "synthetic"
    num_nodes: int = 10_000
    avg_degree: float = 10.0
    power_law_exponent: float = 2.5
    max_degree: int | None = None
    directed: bool = False
    num_classes: int = 10
    class_skew: float = 0.0
    homophily: float = 0.7
    feature_dim: int = 64
    feature_dtype: str = "float32"
    signal: float = 1.0
    label_rate: float = 1.0
    train_fraction: float = 0.6
    valid_fraction: float = 0.2
    test_fraction: float = 0.2
    num_relations: int = 1
    relation_noise: float = 0.1
    valid_edge_fraction: float = 0.0
    test_edge_fraction: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            object.__setattr__(self, field.name, _coerce(field.name, field.type, value))
        self._check_ranges()

    def _check_ranges(self) -> None:
        if not self.name:
            raise _fail("name", "a non-empty string", self.name)
        if self.num_nodes <= 0:
            raise _fail("num_nodes", "> 0", self.num_nodes)
        if not 0 <= self.avg_degree <= max(self.num_nodes - 1, 0):
            raise _fail("avg_degree", f"in [0, num_nodes - 1 = {self.num_nodes - 1}]", self.avg_degree)
        if not self.power_law_exponent > 1:
            raise _fail("power_law_exponent", "> 1", self.power_law_exponent)
        if self.max_degree is not None and self.max_degree < 1:
            raise _fail("max_degree", ">= 1 or None", self.max_degree)
        for field in ("num_classes", "num_relations"):
            if getattr(self, field) < 1:
                raise _fail(field, ">= 1", getattr(self, field))
        for field in ("class_skew", "signal"):
            if not getattr(self, field) >= 0:
                raise _fail(field, ">= 0", getattr(self, field))
        if self.feature_dim < 0:
            raise _fail("feature_dim", ">= 0", self.feature_dim)
        if self.feature_dtype not in FEATURE_DTYPES:
            raise _fail("feature_dtype", f"one of {', '.join(FEATURE_DTYPES)}", self.feature_dtype)
        for field in ("homophily", "label_rate", "train_fraction", "valid_fraction", "test_fraction",
                      "relation_noise"):
            if not 0 <= getattr(self, field) <= 1:
                raise _fail(field, "in [0, 1]", getattr(self, field))
        split = self.train_fraction + self.valid_fraction + self.test_fraction
        if abs(split - 1) > 1e-6:
            raise _fail("train_fraction", "such that train_fraction + valid_fraction + test_fraction = 1", split)
        for field in ("valid_edge_fraction", "test_edge_fraction"):
            if not 0 <= getattr(self, field) < 1:
                raise _fail(field, "in [0, 1)", getattr(self, field))
        if self.valid_edge_fraction + self.test_edge_fraction >= 1:
            raise _fail("valid_edge_fraction", "such that valid_edge_fraction + test_edge_fraction < 1",
                        self.valid_edge_fraction + self.test_edge_fraction)
        if self.seed < 0:
            raise _fail("seed", ">= 0", self.seed)

    # ------------------------------------------------------------------ derived values
    @property
    def has_labels(self) -> bool:
        """Whether the store gets ``labels`` and node splits."""
        return self.label_rate > 0

    @property
    def has_edge_splits(self) -> bool:
        """Whether the store gets link-prediction edge splits."""
        return self.valid_edge_fraction + self.test_edge_fraction > 0

    @property
    def num_sampled_edges(self) -> int:
        """Edges drawn (undirected ones once), before held-out edges, duplicates and self-loops are removed."""
        stored = round(self.num_nodes * self.avg_degree)
        return stored if self.directed else stored // 2

    # ------------------------------------------------------------------ construction helpers
    def replace(self, **overrides: Any) -> "SyntheticConfig":
        """A copy with some fields changed (validated); an unknown field raises :class:`ConfigError`."""
        _check_field_names(overrides)
        return dataclasses.replace(self, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """Fields as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SyntheticConfig":
        """Build from a dict of fields (e.g. a store's ``metadata["source"]`` minus ``"generator"``)."""
        _check_field_names(data)
        return cls(**data)


_FIELD_NAMES = tuple(field.name for field in dataclasses.fields(SyntheticConfig))


def _check_field_names(fields: dict[str, Any]) -> None:
    unknown = sorted(set(fields) - set(_FIELD_NAMES))
    if unknown:
        raise ConfigError(f"synthetic.{unknown[0]} is not a field (known: {', '.join(_FIELD_NAMES)})")


def _coerce(field: str, kind: str, value: Any) -> Any:
    """Check ``value`` against the annotation ``kind`` (a string: ``"int"``, ``"float"``, ``"int | None"``...)."""
    if kind.endswith("| None"):
        if value is None:
            return None
        kind = kind.removesuffix("| None").strip()
    if kind == "bool":
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise _fail(field, "true or false", value)
    if kind == "str":
        if isinstance(value, str):
            return value
        raise _fail(field, "a string", value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise _fail(field, "a number", value)
    if kind == "int":
        if isinstance(value, numbers.Integral):
            return int(value)
        if float(value).is_integer():
            return int(value)
        raise _fail(field, "an integer", value)
    value = float(value)
    if not math.isfinite(value):
        raise _fail(field, "finite", value)
    return value


def parse_field_value(field: str, text: str) -> Any:
    """Parse the command-line text of a :class:`SyntheticConfig` field: numbers, ``true``/``false``, and
    ``none`` for optional fields (e.g. ``max_degree``).

    Raises:
        ConfigError: unknown field or unparsable text.
    """
    _check_field_names({field: None})
    kind = next(f.type for f in dataclasses.fields(SyntheticConfig) if f.name == field)
    lowered = text.strip().lower()
    if kind.endswith("| None") and lowered in ("none", "null"):
        return None
    if kind == "bool":
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise _fail(field, "true or false", text)
    if kind == "str":
        return text
    try:
        return float(text) if "." in text or "e" in lowered else int(text)
    except ValueError:
        raise _fail(field, "a number", text) from None


def config_from_spec(spec: str) -> SyntheticConfig:
    """Parse ``"PRESET[,field=value...]"``, e.g. ``"arxiv-like,num_nodes=1000000,avg_degree=20"``.

    Raises:
        ConfigError: unknown preset or field, or a bad value.
    """
    name, *assignments = [part.strip() for part in spec.split(",") if part.strip()] or [""]
    overrides = {}
    for assignment in assignments:
        field, sep, text = assignment.partition("=")
        field = field.strip()
        if not sep:
            raise ConfigError(f"synthetic spec {spec!r}: expected field=value, got {assignment!r}")
        overrides[field] = parse_field_value(field, text)
    return PRESETS.get(name).replace(**overrides)


# ---------------------------------------------------------------------------------------------- presets
PRESETS = Registry[SyntheticConfig]("preset")
"""Named configurations, each standing in for a real graph (statistics of the original in its comment)."""

# Every code path in a few hundred nodes: features, labels with unlabeled nodes, relations, LP splits.
PRESETS.register("tiny", SyntheticConfig(
    name="tiny", num_nodes=300, avg_degree=8.0, power_law_exponent=2.5, num_classes=4, homophily=0.8,
    feature_dim=16, signal=1.5, label_rate=0.8, train_fraction=0.6, valid_fraction=0.2, test_fraction=0.2,
    num_relations=3, relation_noise=0.1, valid_edge_fraction=0.05, test_edge_fraction=0.05,
))
# ogbn-arxiv: 169,343 nodes; 1,166,243 citations, used undirected: 2,315,598 stored edges (avg degree 13.7,
# max 13,161); 128 features; 40 classes (skewed; largest ~16%); all labeled; time split 90,941 / 29,799 /
# 48,603 (53.7% / 17.6% / 28.7%); edge homophily ~0.65. Calibrated (experiments/measure/calibrate_presets.py,
# docs/datasets.md "Synthetic presets") on OGB's features-only MLP 0.555 and GraphSAGE 0.715: at 40,000 nodes
# (homophily 0.313 there, the same realized edge homophily, 0.297, as 0.302 here at full size) signal 3.76 gives
# MLP 0.572 (sd 0.021) and GraphSAGE 0.730 (sd 0.020), seeds 0-2 (2 layers, hidden 64, fanouts 10,5). The
# homophily is half the real graph's: with independent feature noise and other-class neighbours spread over all
# classes, each neighbour here tells more about a node's class than on arxiv. This graph itself (full size, seed 0):
# MLP 0.592, GraphSAGE 0.748.
PRESETS.register("arxiv-like", SyntheticConfig(
    name="arxiv-like", num_nodes=169_343, avg_degree=13.7, power_law_exponent=2.5, max_degree=13_161,
    num_classes=40, class_skew=0.6, homophily=0.302, feature_dim=128, signal=3.76, label_rate=1.0,
    train_fraction=0.537, valid_fraction=0.176, test_fraction=0.287,
))
# ogbn-products: 2,449,029 nodes; 61,859,140 undirected edges = 123,718,280 stored (avg degree 50.5, max
# 17,481); 100 features; 47 classes (skewed); all labeled; sales-rank split 196,615 / 39,323 / 2,213,091
# (8.0% / 1.6% / 90.4%); edge homophily ~0.81. Calibrated on OGB's MLP 0.61 and GraphSAGE 0.79 (as arxiv-like):
# at 60,000 nodes, 20,000 of them training nodes (homophily 0.3 there: realized 0.282, as 0.284 here), signal
# 4.067 gives MLP 0.622 (sd 0.011) and GraphSAGE 0.796 (sd 0.008), seeds 0-2. More training nodes still help a
# little (MLP, seed 0: 0.610, 0.617, 0.624 with 20,000, 30,000, 40,000), so at full size expect ~0.01-0.03 more.
PRESETS.register("products-like", SyntheticConfig(
    name="products-like", num_nodes=2_449_029, avg_degree=50.5, power_law_exponent=2.5, max_degree=17_481,
    num_classes=47, class_skew=0.8, homophily=0.284, feature_dim=100, signal=4.067, label_rate=1.0,
    train_fraction=0.08, valid_fraction=0.016, test_fraction=0.904,
))
# SNAP soc-LiveJournal1 (link prediction in Marius/MariusGNN): 4,847,571 nodes; 68,993,773 directed edges
# (avg out-degree 14.2; max out-degree 20,293, max in-degree 13,906); no features, no labels; untyped.
# Communities only shape the structure. Held-out edges: 5% valid, 5% test.
PRESETS.register("livejournal-like", SyntheticConfig(
    name="livejournal-like", num_nodes=4_847_571, avg_degree=14.23, power_law_exponent=2.5, max_degree=20_293,
    directed=True, num_classes=64, homophily=0.7, feature_dim=0, label_rate=0.0,
    valid_edge_fraction=0.05, test_edge_fraction=0.05,
))
# ogbn-papers100M at 1/44 of its size: the original has 111,059,956 nodes and 1,615,685,872 citations, used
# undirected (avg degree 29.1); 128 features; 172 classes (very skewed); 1,546,782 labeled nodes (1.39%)
# split 1,207,179 / 125,265 / 214,338 (78.0% / 8.1% / 13.9%). Here 2.5M nodes with the same average degree,
# label rate and split. Calibrated on OGB's MLP 0.47 and GraphSAGE 0.66 (as arxiv-like): at 50,000 nodes with
# the full preset's 34,750 labeled nodes (label rate 0.695; homophily 0.388 there: realized 0.355, as 0.36 here)
# signal 3.662 gives MLP 0.468 (sd 0.008) and GraphSAGE 0.675 (sd 0.008), seeds 0-2 (at homophily 0.36). The
# reduced-size homophily did not carry over (full size, seed 0: GraphSAGE 0.622, -0.038), so homophily was then
# set on this graph itself: 0.385 gives MLP 0.447 (-0.023) and GraphSAGE 0.645 (-0.015), seed 0, full size.
PRESETS.register("papers-like-s", SyntheticConfig(
    name="papers-like-s", num_nodes=2_500_000, avg_degree=29.1, power_law_exponent=2.5, max_degree=20_000,
    num_classes=172, class_skew=1.0, homophily=0.385, feature_dim=128, signal=3.662, label_rate=0.0139,
    train_fraction=0.780, valid_fraction=0.081, test_fraction=0.139,
))


# ---------------------------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class Communities:
    """Everything drawn once per graph (O(num_nodes) words); edges and nodes are then drawn block by block.

    Attributes:
        classes: ``(n,)`` int32 class of every node.
        order: ``(n,)`` int64 node ids sorted by class (stable).
        cumulative: ``(n,)`` float64 inclusive cumulative weights of the nodes in ``order``.
        bounds: ``(C+1,)`` int64 offsets of each class's segment in ``order``.
        class_low: ``(C,)`` cumulative weight before each class's segment.
        class_high: ``(C,)`` cumulative weight at the end of each class's segment.
        means: ``(C, d)`` float32 class means of the features.
        relation_table: ``(C, C)`` relation of an edge between two classes (None when untyped).
    """

    classes: np.ndarray
    order: np.ndarray
    cumulative: np.ndarray
    bounds: np.ndarray
    class_low: np.ndarray
    class_high: np.ndarray
    means: np.ndarray
    relation_table: np.ndarray | None


def _rng(seed: int, stream: int, block: int = 0) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stream, block)))


def class_probabilities(num_classes: int, skew: float) -> np.ndarray:
    """Probability of each class: proportional to ``(k + 1) ** -skew``."""
    weights = np.arange(1, num_classes + 1, dtype=np.float64) ** -skew
    return weights / weights.sum()


def cap_weights(weights: np.ndarray, avg_degree: float, max_degree: float) -> np.ndarray:
    """Cap ``weights`` in place so that no expected degree ``avg_degree * w / mean(w)`` exceeds ``max_degree``.

    Capping lowers the mean, which lowers the cap; a few fixed-point rounds converge.
    """
    if avg_degree <= 0:
        return weights
    for _ in range(_CAP_ITERATIONS):
        limit = max_degree / avg_degree * weights.mean()
        if weights.max() <= limit * (1 + 1e-9):
            break
        np.minimum(weights, limit, out=weights)
    return weights


def degree_weights(rng: np.random.Generator, config: SyntheticConfig) -> np.ndarray:
    """Pareto weights (minimum 1, tail exponent ``power_law_exponent - 1``), capped by the maximum degree."""
    weights = rng.pareto(config.power_law_exponent - 1, size=config.num_nodes) + 1.0
    cap = min(config.max_degree or math.inf, config.num_nodes - 1)
    return cap_weights(weights, config.avg_degree, max(cap, 1))


def relation_table(rng: np.random.Generator, num_classes: int, num_relations: int, symmetric: bool) -> np.ndarray:
    """A random ``(C, C)`` map from (source class, destination class) to a relation; symmetric if asked."""
    table = rng.integers(0, num_relations, size=(num_classes, num_classes))
    if symmetric:
        table = np.triu(table) + np.triu(table, 1).T
    return table


def draw_communities(config: SyntheticConfig) -> Communities:
    """Draw classes, degree weights, feature means and the relation table of ``config``'s graph."""
    rng = _rng(config.seed, _STREAM_MODEL)
    probabilities = class_probabilities(config.num_classes, config.class_skew)
    classes = rng.choice(config.num_classes, size=config.num_nodes, p=probabilities).astype(np.int32)
    weights = degree_weights(rng, config)
    order = np.argsort(classes, kind="stable")
    cumulative = np.cumsum(weights[order])
    del weights
    counts = np.bincount(classes, minlength=config.num_classes)
    bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    exclusive = np.concatenate([[0.0], cumulative])
    scale = config.signal / math.sqrt(2 * max(config.feature_dim, 1))
    means = (rng.standard_normal((config.num_classes, config.feature_dim)) * scale).astype(np.float32)
    table = None
    if config.num_relations > 1:
        table = relation_table(rng, config.num_classes, config.num_relations, symmetric=not config.directed)
    return Communities(classes, order, cumulative, bounds, exclusive[bounds[:-1]], exclusive[bounds[1:]],
                       means, table)


def _locate(cumulative: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Positions ``p`` with ``cumulative[p-1] <= x < cumulative[p]`` (clipped to the last position).

    The keys are searched in sorted order (several times faster on large arrays: the binary searches then walk
    the array in order instead of missing the cache) and the positions put back in the order of ``x``.
    """
    order = np.argsort(x)
    position = np.empty(len(x), dtype=np.int64)
    position[order] = np.searchsorted(cumulative, x[order], side="right")
    return np.minimum(position, len(cumulative) - 1, out=position)


def sample_edges(model: Communities, rng: np.random.Generator, count: int,
                 homophily: float) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``count`` edges: sources by weight; destinations by weight in the source's class with probability
    ``homophily``, otherwise among the other classes. Returns ``(src, dst)`` node ids (int64)."""
    cumulative, total = model.cumulative, model.cumulative[-1]
    uniform = rng.random(count)
    uniform.sort()  # the edges of a block are an unordered sample: drawing sources in sorted order is free
    src = model.order[np.minimum(np.searchsorted(cumulative, uniform * total, side="right"), len(cumulative) - 1)]
    cls = model.classes[src]
    low, high = model.class_low[cls], model.class_high[cls]
    mass = high - low
    same = (rng.random(count) < homophily) | (total - mass <= 0)
    x = rng.random(count)
    x = np.where(same, low + x * mass, x * (total - mass))
    x += np.where(~same & (x >= low), mass, 0.0)
    position = _locate(cumulative, x)
    inside = np.clip(position, model.bounds[cls], model.bounds[cls + 1] - 1)
    position = np.where(same, inside, position)
    return src, model.order[position]


def realized_homophily(config: SyntheticConfig, sample_edges_count: int = EDGE_BLOCK) -> float:
    """The edge homophily the generated graph will have, estimated without generating it.

    Self-loops and repeated edges are dropped from the graph, and they fall mostly inside classes (a node and the
    hubs of its own class are drawn together often), so the stored graph's homophily is below
    ``config.homophily``: by ~1 % of it at millions of nodes, by 5-10 % at tens of thousands. This draws
    ``sample_edges_count`` edges of the model (the first edge stream) and weighs each by the chance that its node
    pair is stored, per draw: ``(1 - exp(-L)) / L``, where ``L`` is the pair's expected number of draws among all
    ``num_sampled_edges`` (both directions for undirected graphs); self-loops weigh 0. Within ~0.001 of the
    generated graph's homophily for a sample of 1M edges.
    """
    model = draw_communities(config)
    count = min(sample_edges_count, max(config.num_sampled_edges, 1))
    src, dst = sample_edges(model, _rng(config.seed, _STREAM_EDGES, 0), count, config.homophily)
    weights = np.empty(config.num_nodes)
    weights[model.order] = np.diff(model.cumulative, prepend=0.0)
    total, mass = model.cumulative[-1], model.class_high - model.class_low

    def draw_probability(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        same = model.classes[a] == model.classes[b]
        own = mass[model.classes[a]]
        inside = config.homophily * weights[b] / own
        outside = (1 - config.homophily) * weights[b] / np.maximum(total - own, 1e-300)
        return weights[a] / total * np.where(same, inside, outside)

    expected = draw_probability(src, dst) if config.directed else draw_probability(src, dst) + draw_probability(dst, src)
    expected *= config.num_sampled_edges
    kept = np.where(src == dst, 0.0, -np.expm1(-expected) / np.maximum(expected, 1e-300))
    same = model.classes[src] == model.classes[dst]
    return float((kept * same).sum() / max(kept.sum(), 1e-300))


def assign_relations(model: Communities, rng: np.random.Generator, src: np.ndarray, dst: np.ndarray,
                     num_relations: int, noise: float) -> np.ndarray:
    """Relation of each edge: the class-pair table entry, or a uniform relation with probability ``noise``."""
    rel = model.relation_table[model.classes[src], model.classes[dst]].astype(np.int32)
    noisy = rng.random(len(src)) < noise
    rel[noisy] = rng.integers(0, num_relations, size=int(noisy.sum()), dtype=np.int32)
    return rel


def _block_spans(total: int, block: int) -> Iterator[tuple[int, int, int]]:
    """``(index, start, stop)`` of consecutive blocks covering ``range(total)``."""
    for index, start in enumerate(range(0, total, block)):
        yield index, start, min(total, start + block)


def _progress(progress: bool, total: int, desc: str, unit: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=not progress, leave=False)


# ---------------------------------------------------------------------------------------------- nodes
def _split_masks(u: np.ndarray, config: SyntheticConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Train/valid/test masks from one uniform draw per node (labeled iff ``u < label_rate``)."""
    rate = config.label_rate
    train_end = rate * config.train_fraction
    valid_end = rate * (config.train_fraction + config.valid_fraction)
    return u < train_end, (u >= train_end) & (u < valid_end), (u >= valid_end) & (u < rate)


def _write_nodes(writer: StoreWriter, config: SyntheticConfig, model: Communities, progress: bool) -> int:
    """Stream features, labels and node splits block by block; return the number of labeled nodes."""
    labeled = 0
    with contextlib.ExitStack() as stack:
        features = labels = None
        if config.feature_dim:
            features = stack.enter_context(
                writer.appender("features", config.feature_dtype, (config.feature_dim,)))
        if config.has_labels:
            labels = stack.enter_context(writer.appender("labels", np.int64))
            splits = [stack.enter_context(writer.appender(f"{name}_nodes", np.int64))
                      for name in ("train", "valid", "test")]
        bar = stack.enter_context(_progress(progress, config.num_nodes, "nodes", "node"))
        for block, start, stop in _block_spans(config.num_nodes, NODE_BLOCK):
            rng = _rng(config.seed, _STREAM_NODES, block)
            u = rng.random(stop - start)
            classes = model.classes[start:stop]
            if labels is not None:
                masks = _split_masks(u, config)
                is_labeled = masks[0] | masks[1] | masks[2]
                labels.append(np.where(is_labeled, classes, -1).astype(np.int64))
                for out, mask in zip(splits, masks):
                    out.append(np.flatnonzero(mask) + start)
                labeled += int(is_labeled.sum())
            if features is not None:
                noise = rng.standard_normal((stop - start, config.feature_dim), dtype=np.float32)
                features.append(noise + model.means[classes])
            bar.update(stop - start)
    return labeled


# ---------------------------------------------------------------------------------------------- edges
def _edge_chunks(config: SyntheticConfig, model: Communities, heldout: list[NpyAppender],
                 progress: bool) -> Iterator[EdgeChunk]:
    """Draw the edges block by block; yield the graph's edges, append held-out ones to ``heldout``."""
    typed = config.num_relations > 1
    bounds = np.cumsum([config.valid_edge_fraction, config.test_edge_fraction])
    with _progress(progress, config.num_sampled_edges, "edges", "edge") as bar:
        for block, start, stop in _block_spans(config.num_sampled_edges, EDGE_BLOCK):
            rng = _rng(config.seed, _STREAM_EDGES, block)
            src, dst = sample_edges(model, rng, stop - start, config.homophily)
            rel = assign_relations(model, rng, src, dst, config.num_relations, config.relation_noise) \
                if typed else None
            if config.has_edge_splits:
                split = np.searchsorted(bounds, rng.random(stop - start), side="right")
                relations = rel if typed else np.zeros(len(src), np.int64)
                for index, out in enumerate(heldout):
                    mask = split == index
                    out.append(np.stack([src[mask], relations[mask], dst[mask]], axis=1))
                keep = split == len(heldout)
                src, dst, rel = src[keep], dst[keep], (rel[keep] if typed else None)
            yield EdgeChunk(src, dst, rel)
            bar.update(stop - start)


def first_unique_rows(edges: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the first occurrence of each distinct row of a ``(k, 3)`` array."""
    if len(edges) < 2:
        return np.arange(len(edges))
    order = np.lexsort((edges[:, 2], edges[:, 1], edges[:, 0]))  # stable: equal rows keep their order
    ordered = edges[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    return np.sort(order[first])


def csr_contains(indptr: np.ndarray, indices: np.ndarray, relations: np.ndarray | None, num_relations: int,
                 edges: np.ndarray) -> np.ndarray:
    """Whether each ``(src, rel, dst)`` row of ``edges`` is in a CSR whose rows are sorted by (neighbour, rel).

    A vectorized binary search inside every row at once: one loop iteration per halving, none per edge.

    Args:
        indptr: ``(r+1,)`` row offsets into ``indices`` (rows ``0..r-1``; ``edges[:, 0]`` must be below ``r``).
        indices: neighbour ids.
        relations: relation of each neighbour, or None (all 0).
        num_relations: relation types (keys are ``neighbour * num_relations + relation``).
        edges: ``(k, 3)`` queries.
    """
    found = np.zeros(len(edges), dtype=bool)
    if len(indices) == 0 or len(edges) == 0:
        return found

    def key(position: np.ndarray) -> np.ndarray:
        value = indices[position].astype(np.int64) * num_relations
        return value if relations is None else value + relations[position]

    src = edges[:, 0]
    target = edges[:, 2] * num_relations + edges[:, 1]
    low, end = indptr[src], indptr[src + 1]
    high = end.copy()
    last = len(indices) - 1
    while True:
        active = low < high
        if not active.any():
            break
        middle = (low + high) // 2
        below = active & (key(np.minimum(middle, last)) < target)
        low = np.where(below, middle + 1, low)
        high = np.where(active & ~below, middle, high)
    return (low < end) & (key(np.minimum(low, last)) == target)


def _read_slice(path: Path, start: int, stop: int) -> np.ndarray:
    """Elements ``start:stop`` of a 1-D ``.npy`` file, by an explicit read (no memory map: the pages read do
    not count toward the process' resident memory)."""
    dtype, _, offset = read_npy_header(path)
    with open(path, "rb") as handle:
        handle.seek(offset + start * dtype.itemsize)
        return np.fromfile(handle, dtype=dtype, count=stop - start)


def _csr_chunks(writer: StoreWriter, direction: str,
                chunk_edges: int) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray | None]]:
    """Stream a CSR written in the staging folder as ``(first_node, local_indptr, indices, relations)`` pieces of
    whole rows holding about ``chunk_edges`` edges (``local_indptr`` starts at 0)."""
    indptr = np.load(writer.path_for(f"{direction}_indptr"))
    typed = writer.has(f"{direction}_relations")
    num_nodes = len(indptr) - 1
    node = 0
    while node < num_nodes:
        stop = int(np.searchsorted(indptr, indptr[node] + chunk_edges, side="right")) - 1
        stop = min(num_nodes, max(stop, node + 1))
        low, high = int(indptr[node]), int(indptr[stop])
        indices = _read_slice(writer.path_for(f"{direction}_indices"), low, high)
        relations = _read_slice(writer.path_for(f"{direction}_relations"), low, high) if typed else None
        yield node, indptr[node : stop + 1] - low, indices, relations
        node = stop


def canonical_unique(parts: list[np.ndarray], directed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate ``(k, 3)`` edge lists, dropping self-loops and repeated edges (the first copy wins, so an
    edge of an earlier part shadows the same edge of a later one); undirected edges are ordered ``src < dst``.

    Returns:
        The edges and, for each, the index of the part it came from.
    """
    edges = np.concatenate(parts)
    origin = np.repeat(np.arange(len(parts)), [len(part) for part in parts])
    if not directed:
        edges[:, 0], edges[:, 2] = np.minimum(edges[:, 0], edges[:, 2]), np.maximum(edges[:, 0], edges[:, 2])
    keep = np.flatnonzero(edges[:, 0] != edges[:, 2])
    keep = keep[first_unique_rows(edges[keep])]
    return edges[keep], origin[keep]


def _write_train_edges(writer: StoreWriter, config: SyntheticConfig, queries: np.ndarray,
                       chunk_edges: int) -> np.ndarray:
    """Stream the out-CSR into ``train_edges`` (undirected edges once, ``src < dst``) and, in the same pass,
    look up every ``queries`` row in it. Returns whether each query is an edge of the graph."""
    present = np.zeros(len(queries), dtype=bool)
    by_source = np.argsort(queries[:, 0], kind="stable")
    sorted_sources = queries[by_source, 0]
    with writer.appender("train_edges", np.int64, (3,)) as out:
        for node, indptr, indices, relations in _csr_chunks(writer, "out", chunk_edges):
            stop = node + len(indptr) - 1
            src = np.repeat(np.arange(node, stop, dtype=np.int64), np.diff(indptr))
            rel = np.zeros(len(src), np.int64) if relations is None else relations.astype(np.int64)
            rows = np.stack([src, rel, indices.astype(np.int64)], axis=1)
            out.append(rows if config.directed else rows[src < rows[:, 2]])
            first, last = np.searchsorted(sorted_sources, [node, stop])
            if last > first:
                chosen = by_source[first:last]
                local = queries[chosen] - np.array([node, 0, 0])
                present[chosen] = csr_contains(indptr, indices, relations, config.num_relations, local)
    return present


def _write_edge_splits(writer: StoreWriter, config: SyntheticConfig, scratch: list[Path], chunk_edges: int) -> None:
    """Write ``train_edges`` from the graph, and the held-out edges that are not in it as valid/test splits."""
    edges, origin = canonical_unique([np.load(path) for path in scratch], config.directed)
    present = _write_train_edges(writer, config, edges, min(chunk_edges, _TRAIN_EDGE_CHUNK))
    for index, key in enumerate(("valid_edges", "test_edges")):
        writer.write_array(key, edges[~present & (origin == index)])


# ---------------------------------------------------------------------------------------------- entry point
def generate(
    config: SyntheticConfig | str,
    out: str | Path,
    *,
    overwrite: bool = False,
    progress: bool = False,
    chunk_edges: int = DEFAULT_CHUNK_EDGES,
    max_bucket_edges: int = MAX_BUCKET_EDGES,
) -> GraphStore:
    """Generate the graph of ``config`` into a new store at ``out`` and open it.

    The store is built in a hidden staging folder and renamed to ``out`` at the end: an error or interrupt
    leaves nothing at ``out``.

    Args:
        config: the configuration, or the name of a preset in :data:`PRESETS`.
        out: folder of the new store.
        overwrite: replace an existing store at ``out`` (otherwise that is an error).
        progress: show tqdm progress bars.
        chunk_edges: edges per read when building the CSRs (memory/speed only; the output does not depend on it).
        max_bucket_edges: largest edge bucket sorted in memory when building the CSRs (bounds peak memory).

    Returns:
        The new store, opened.

    Raises:
        ConfigError: unknown preset name.
        DataError: ``out`` exists and ``overwrite`` is false.
    """
    if isinstance(config, str):
        config = PRESETS.get(config)
    model = draw_communities(config)
    with create_store(out, overwrite=overwrite) as writer:
        labeled = _write_nodes(writer, config, model, progress)
        scratch = writer.root / "_synthetic"
        scratch.mkdir()
        heldout_paths = [scratch / "valid.npy", scratch / "test.npy"] if config.has_edge_splits else []
        try:
            with contextlib.ExitStack() as stack:
                heldout = [stack.enter_context(NpyAppender(path, np.int64, (3,))) for path in heldout_paths]
                num_edges = write_csrs(
                    writer, _edge_chunks(config, model, heldout, progress), config.num_nodes,
                    num_relations=config.num_relations, symmetrize=not config.directed, drop_self_loops=True,
                    deduplicate=True, chunk_edges=chunk_edges, max_bucket_edges=max_bucket_edges,
                )
            del model
            if config.has_edge_splits:
                _write_edge_splits(writer, config, heldout_paths, chunk_edges)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        writer.finalize(
            name=config.name,
            num_nodes=config.num_nodes,
            num_edges=num_edges,
            directed=config.directed,
            num_relations=config.num_relations,
            num_classes=config.num_classes if config.has_labels else 0,
            feature_dim=config.feature_dim,
            source={"generator": "synthetic", **config.to_dict()},
            labeled_nodes=labeled,
        )
    return GraphStore.open(out)
