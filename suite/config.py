"""Run specs: typed, frozen, validated on load from YAML, with ``--set a.b=value`` overrides.

A :class:`RunSpec` is everything that determines a run. Its fully resolved form (defaults filled in) is written
with every result, and the run id is derived from it, so two runs with equal specs are the same run.

Errors name the file and the field path, on one line: ``experiments/specs/cora.yaml: model.fanouts: expected 2 entries
(one per layer, model.num_layers=2), got 3``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, model_validator

from suite.errors import ConfigError, describe_os_error

ALL_NEIGHBOURS = -1


class _YamlLoader(yaml.SafeLoader):
    """YAML 1.1 safe loader that also reads ``1e-3`` as a float (PyYAML alone reads it as a string)."""


_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def yaml_load(text: str) -> Any:
    """Parse YAML text with the suite's loader (safe; ``1e-3`` is a float)."""
    return yaml.load(text, Loader=_YamlLoader)


FLOAT32_MAX = 3.4028234663852886e38
"""Largest float32: learning rates and other factors torch applies to float32 tensors must stay below it (a
larger one is a RuntimeError deep inside the optimizer step)."""


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class NodeSplitSpec(_Spec):
    """The node split drawn by a loader of a dataset without a fixed one (Shchur's graphs, Facebook Page-Page)."""

    seed: int = Field(0, description="seed of the draw")
    # strict=False on the containers only: YAML gives lists, which strict mode rejects for tuples.
    per_class: tuple[StrictInt, StrictInt] | None = Field(
        None, strict=False, description="training and validation nodes per class, the rest test (e.g. [20, 30])")
    fractions: tuple[float, float, float] | None = Field(
        None, strict=False, description="fractions train, valid, test of the labelled nodes (e.g. [0.6, 0.2, 0.2])")
    component: Literal["all", "largest"] = Field(
        "all", description="the nodes the split draws from: every labelled node, or those of the graph's largest "
                           "connected component (Shchur et al.'s protocol; the store keeps every node)")

    @model_validator(mode="after")
    def _one_protocol(self) -> "NodeSplitSpec":
        if self.per_class is not None and self.fractions is not None:
            raise ValueError("give per_class or fractions, not both (neither: the loader's default protocol)")
        if self.per_class is not None and min(self.per_class) < 0:
            raise ValueError(f"per_class: expected two non-negative counts, got {list(self.per_class)}")
        if self.fractions is not None and (min(self.fractions) < 0 or abs(sum(self.fractions) - 1) > 1e-6):
            raise ValueError(f"fractions: expected three non-negative fractions summing to 1, got "
                             f"{list(self.fractions)}")
        return self


class DatasetSpec(_Spec):
    """Which graph to train on (resolved to a GraphStore by the dataset registry)."""

    name: str = Field(description="registered dataset: 'synthetic', 'store', 'cora', 'fb15k237', 'ogbn-arxiv', ...")
    preset: str | None = Field(None, description="synthetic: generator preset")
    params: dict[str, Any] = Field(default_factory=dict, description="synthetic: generator parameter overrides")
    root: str | None = Field(None, description="raw-data folder of a loader, or the folder of an existing store")
    cache_dir: str = Field("data", description="where generated or prepared stores are kept (reused when present)")
    split: NodeSplitSpec | None = Field(None, description="node split of a dataset without a fixed one "
                                                          "('amazon-computers', 'coauthor-cs', 'facebook-page-page'..."
                                                          "); None: the loader's default protocol, seed 0")
    feature_normalization: Literal["none", "row"] = Field(
        "none", description="applied to the feature rows a run reads (suite.data.feature_normalization): 'none', "
                            "or 'row' (each row divided by its sum, Kipf & Welling's preprocessing of "
                            "bag-of-words features); the store is unchanged")


class ModelSpec(_Spec):
    """The encoder and its shape."""

    encoder: str = Field("graphsage", description="registered model: 'graphsage', 'mlp', ...")
    num_layers: int = Field(2, ge=0)
    hidden_dim: int = Field(128, gt=0)
    # strict=False on the container only: YAML gives lists, which strict mode rejects for tuples; items stay strict.
    fanouts: tuple[StrictInt, ...] = Field((10, 10), strict=False,
                                           description="neighbours sampled per layer, outermost last; -1 = all")
    aggregation: Literal["mean", "max", "sum"] = "mean"
    dropout: float = Field(0.5, ge=0.0, lt=1.0)
    input_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout on the input features of the first "
                                                                  "layer (Kipf & Welling's GCN drops them too); "
                                                                  "'dropout' acts between layers")
    gcn_normalization: Literal["row", "symmetric"] = Field(
        "row", description="gcn: 'row' averages a node with its neighbours (D^-1 (A + I)); 'symmetric' is Kipf & "
                           "Welling's D^-1/2 (A + I) D^-1/2 with the degrees of the graph sampled from")
    decoder: str | None = Field(None, description="link prediction: registered edge decoder 'distmult', 'complex', "
                                                  "'dot', 'transe' (L1), 'transe_l2'; None for node "
                                                  "classification")
    heads: int = Field(4, gt=0, description="gat: attention heads of every hidden layer (concatenated; hidden_dim "
                                            "must be divisible by it)")
    num_bases: int | None = Field(None, gt=0, description="rgcn: basis decomposition of the relation weights "
                                                          "(None: one full matrix per relation)")
    embedding_dim: int = Field(100, gt=0, description="link prediction: width of the learnable node embeddings and "
                                                      "of the encoder's output (the decoder's width)")
    inverse_relations: bool = Field(False, description="link prediction: a separate relation embedding for "
                                                       "predicting heads (Marius's inverse edges)")
    learnable_embeddings: bool = Field(False, description="link prediction: the encoder reads a learnable node "
                                                          "embedding table instead of the store's features")
    embedding_init_scale: float = Field(0.001, gt=0.0, le=FLOAT32_MAX, description="std of the normal initialization of the "
                                                                   "learnable node embeddings")
    embedding_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="link prediction: dropout on the node "
                                                                      "representations the decoder scores, in "
                                                                      "training (LibKGE's entity-embedder dropout)")
    relation_dropout: float = Field(0.0, ge=0.0, lt=1.0, description="link prediction: dropout on the relation "
                                                                     "embeddings the decoder scores with, in "
                                                                     "training (LibKGE's relation-embedder dropout)")

    @model_validator(mode="after")
    def _fanouts_match_layers(self) -> "ModelSpec":
        if len(self.fanouts) != self.num_layers:
            raise ValueError(
                f"fanouts: expected {self.num_layers} entries (one per layer, model.num_layers={self.num_layers}), "
                f"got {len(self.fanouts)}"
            )
        if any(f == 0 or f < ALL_NEIGHBOURS for f in self.fanouts):
            raise ValueError(f"fanouts: each must be > 0 or -1 (all neighbours), got {list(self.fanouts)}")
        return self


class SamplerSpec(_Spec):
    """Multi-hop neighbourhood sampling."""

    name: str = Field("naive", description="registered sampler: 'naive', 'dense', 'pyg'")
    replace: bool = Field(False, description="sample with replacement when degree > fanout (as MariusGNN)")
    direction: Literal["in", "out", "both"] = Field("in", description="which neighbours: in-, out- or both")


class SystemSpec(_Spec):
    """The training system and its options."""

    name: str = Field("in_memory", description="registered system: 'in_memory', 'pipelined', 'disk'")
    device: str = Field("auto", description="'auto' (CUDA when present), 'cpu', 'cuda', 'cuda:1', ...")
    options: dict[str, Any] = Field(default_factory=dict, description="system-specific options")


class NegativeSamplingSpec(_Spec):
    """Negatives of link-prediction training (Marius's chunked sampling).

    The positives of a batch are split into ``num_chunks`` chunks of consecutive edges; every chunk shares one set
    of ``negatives_per_positive`` corrupting nodes per side (heads and tails), of which a ``degree_fraction``
    are drawn proportionally to degree (endpoints of random training edges) and the rest uniformly.
    """

    mode: Literal["chunked", "all", "kvsall"] = Field(
        "chunked", description="'chunked': sampled negatives as below; 'all': every entity is a candidate (1vsAll, "
                               "LibKGE's and PyKEEN's LCWA-style softmax over all entities); 'kvsall': the distinct "
                               "(h, r, ?) and (?, r, t) queries, binary cross-entropy against all entities with "
                               "every known answer as target (LibKGE's KvsAll); shorthand training.negatives: "
                               "all / kvsall")
    num_chunks: int = Field(10, gt=0, description="chunks per batch; the positives of a chunk share negatives")
    negatives_per_positive: int = Field(1000, gt=0, description="negatives scored against every positive (per side)")
    degree_fraction: float = Field(0.5, ge=0.0, le=1.0, description="fraction of negatives drawn by degree")
    label_smoothing: float = Field(0.0, ge=0.0, lt=1.0, description="kvsall: targets (1 - eps) * y + eps / "
                                                                    "num_entities")
    subset_fraction: float | None = Field(
        None, gt=0.0, le=1.0, description="chunked, systems that hold every node (in_memory, pipelined): draw the "
                                          "negatives from a random subset of this fraction of the nodes (uniform "
                                          "ones; by-degree ones from the training edges inside it), a new subset "
                                          "every subset_batches batches: the distribution a disk buffer holding "
                                          "that fraction of the partitions gives; null: from all nodes")
    subset_batches: int = Field(1, gt=0, description="batches that share one negative subset (subset_fraction)")


class TrainingSpec(_Spec):
    """The task and the optimization loop."""

    task: Literal["node_classification", "link_prediction"] = "node_classification"
    batch_size: int = Field(1000, gt=0)
    epochs: int = Field(5, gt=0)
    optimizer: Literal["adam", "sgd", "adagrad"] = "adam"
    learning_rate: float = Field(0.01, gt=0.0, le=FLOAT32_MAX)
    weight_decay: float = Field(0.0, ge=0.0, le=FLOAT32_MAX)
    limit_batches: int | None = Field(None, gt=0, description="train on the first k batches of every epoch only "
                                                              "(quick measurements); None = all")
    loss: Literal["softmax", "margin"] = Field("softmax", description="link prediction: cross-entropy of every "
                                                                      "positive against its negatives, or margin")
    margin: float = Field(1.0, ge=0.0, le=FLOAT32_MAX, description="link prediction: the margin of the margin loss")
    negatives: NegativeSamplingSpec = Field(default_factory=NegativeSamplingSpec,
                                            description="link prediction: training negatives ('all' or '1vsAll' "
                                                        "for mode: all)")
    embedding_learning_rate: float | None = Field(None, gt=0.0, le=FLOAT32_MAX, description="link prediction: Adagrad learning "
                                                                            "rate of the node embedding table; "
                                                                            "None = learning_rate")
    regularization: float = Field(0.0, ge=0.0, le=FLOAT32_MAX, description="link prediction: weight of the L2 penalty on the "
                                                           "embeddings a batch scores (mean squared norm)")
    regularizer: Literal["l2", "n3"] = Field("l2", description="link prediction: the penalty 'regularization' "
                                                               "weighs: l2 (mean squared norm of the batch's node "
                                                               "rows) or n3 (Lacroix et al. 2018: mean of the "
                                                               "cubed absolute values of node and relation rows)")
    gradient_precision: Literal["float32", "bfloat16"] = Field(
        "float32", description="link prediction, softmax loss (chunked negatives; all entities with a "
                               "dot-product decoder): precision of the two matrix products of the scores' "
                               "backward (bfloat16: inputs rounded, float32 accumulation; the scores, the loss "
                               "and everything else stay float32)")
    score_precision: Literal["float32", "bfloat16"] = Field(
        "float32", description="link prediction, softmax loss of sampled (chunked) negatives with a dot-product "
                               "decoder: precision of the forward's score products (bfloat16: inputs rounded, "
                               "float32 accumulation, the scores rounded to bfloat16, then softmax, loss and "
                               "gradients in float32, as mixed-precision training does; evaluation stays float32)")
    checkpoint_every: int = Field(1, ge=0, description="write the last checkpoint (model, optimizer, learnable "
                                                       "embeddings, RNG, epoch) every k epochs and after the last "
                                                       "one, and the best one when the validation metric improves; "
                                                       "0: none (a killed run then starts over). Not part of the "
                                                       "run's identity")


class EvaluationSpec(_Spec):
    """When and how to evaluate."""

    every: int = Field(1, gt=0, description="evaluate on valid every k epochs; test after the last epoch")
    test_every: int | None = Field(None, gt=0, description="also evaluate on test every k epochs (a test curve); "
                                                           "None: after the last epoch only")
    splits: tuple[Literal["valid", "test"], ...] = Field(
        ("valid", "test"), strict=False, description="splits evaluated ([] for speed-only runs)")
    batch_size: int = Field(4096, gt=0)
    fanouts: tuple[StrictInt, ...] | None = Field(None, strict=False,
                                                  description="sampling at evaluation; None = the training fanouts")
    target_metric: float | None = Field(None, description="the validation metric the run aims at: the summary "
                                                          "records the time (time_to_target) and the cost to "
                                                          "first reach it")
    restore_best: bool = Field(False, description="test with the parameters of the epoch whose validation main "
                                                  "metric was best (the first of equals; model selection as "
                                                  "Shchur et al.'s early stopping): they are restored after the "
                                                  "last epoch, before the test evaluation (needs 'valid' in "
                                                  "splits)")
    graph: Literal["full", "buffer"] = Field(
        "full", description="node classification from disk: 'full' samples evaluation neighbourhoods over the whole "
                            "graph (the store's CSR, feature rows read from disk per batch; MariusGNN's "
                            "storage.full_graph_evaluation), 'buffer' only inside the partition buffer's states; "
                            "systems that hold the whole graph evaluate over it either way")
    filtered: bool = Field(True, description="link prediction: the main MRR/Hits@k rank against candidates that "
                                             "are not known true triples (train+valid+test); both are recorded")
    negatives: int | None = Field(None, gt=0, description="link prediction: rank against this many uniformly "
                                                          "sampled entities per query (large graphs); None = all")
    valid_sample: int | None = Field(None, gt=0, description="link prediction: validate on this many validation "
                                                             "triples only, the same seeded sample in every run "
                                                             "(systems.tasks.link_prediction.validation_sample; "
                                                             "a cheap curve of time to MRR); None = all")
    validations_per_epoch: int = Field(1, gt=0, description="validate this many times per epoch, after evenly "
                                                            "spaced batches (the last at the epoch's end): a finer "
                                                            "curve of time to target; more than 1 needs 'valid' in "
                                                            "splits, every = 1 and a system that can stop between "
                                                            "batches (in_memory); the evaluations' time is not "
                                                            "training time")
    test_sample: int | None = Field(None, gt=0, description="link prediction: test on this many test triples only, "
                                                            "the same seeded sample in every run (an unbiased "
                                                            "estimate of the whole split's metrics, for quick "
                                                            "settings); None = all")


class MachineSpec(_Spec):
    """The machine profile a run is priced on."""

    profile: str = Field("local", description="registered machine profile: 'local', 'p3.2xlarge', ...")
    hourly_usd: float | None = Field(None, ge=0.0, description="price per hour of the 'local' profile")


class RunSpec(_Spec):
    """Everything that determines one run."""

    name: str | None = Field(None, description="a label for the run (part of the run id)")
    dataset: DatasetSpec
    model: ModelSpec = Field(default_factory=ModelSpec)
    sampler: SamplerSpec = Field(default_factory=SamplerSpec)
    system: SystemSpec = Field(default_factory=SystemSpec)
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    evaluation: EvaluationSpec = Field(default_factory=EvaluationSpec)
    machine: MachineSpec = Field(default_factory=MachineSpec)
    seed: int = Field(0, ge=0, lt=2**32, description="seed of every random choice of the run (a 32-bit unsigned "
                                                      "integer, as numpy's and torch's generators take)")

    @model_validator(mode="before")
    @classmethod
    def _negatives_shorthand(cls, data: Any) -> Any:
        """``training.negatives: all`` (or ``1vsAll``) is ``training.negatives: {mode: all}``; ``kvsall`` (any
        case) is ``{mode: kvsall}``."""
        training = data.get("training") if isinstance(data, dict) else None
        if isinstance(training, dict) and isinstance(training.get("negatives"), str):
            value = training["negatives"]
            if value.lower() not in ("all", "1vsall", "kvsall"):
                raise ValueError(f"training.negatives: expected 'all', '1vsAll', 'KvsAll' or a mapping, got {value!r}")
            mode = "kvsall" if value.lower() == "kvsall" else "all"
            data = {**data, "training": {**training, "negatives": {"mode": mode}}}
        return data

    @model_validator(mode="after")
    def _evaluation_fanouts_match_layers(self) -> "RunSpec":
        fanouts = self.evaluation.fanouts
        if fanouts is not None and len(fanouts) != self.model.num_layers:
            raise ValueError(
                f"evaluation.fanouts: expected {self.model.num_layers} entries (model.num_layers), got {len(fanouts)}"
            )
        if self.evaluation.restore_best and "valid" not in self.evaluation.splits:
            raise ValueError("evaluation.restore_best: selects by the validation metric; 'valid' must be in "
                             f"evaluation.splits, got {list(self.evaluation.splits)}")
        if self.evaluation.validations_per_epoch > 1 and ("valid" not in self.evaluation.splits
                                                          or self.evaluation.every != 1):
            raise ValueError("evaluation.validations_per_epoch: validations within every epoch need 'valid' in "
                             f"evaluation.splits and evaluation.every = 1, got splits {list(self.evaluation.splits)}"
                             f" and every = {self.evaluation.every}")
        return self

    def resolved(self) -> dict[str, Any]:
        """The spec with every default filled in, as plain data (lists, dicts, scalars)."""
        return json.loads(self.model_dump_json())

    def identity(self) -> dict[str, Any]:
        """What determines the run's outcome, as plain data: :meth:`resolved` with the dataset section replaced by
        :func:`dataset_identity` (the data, not how its paths were written) and ``system.options`` completed with
        the registered system's defaults. Equal identities are the same run, whichever command recorded it."""
        identity = self.resolved()
        identity["dataset"] = dataset_identity(self.dataset)
        identity["system"]["options"] = _resolved_options(self)
        return identity

    @property
    def run_id(self) -> str:
        """``<label>-s<seed>-<hash>``: a readable label and the first 12 hex digits of the SHA-256 of
        :meth:`identity` (so ``cache_dir: data`` and ``cache_dir: /abs/data`` name the same run), without the
        fields in :data:`NOT_IDENTITY` (how a run is kept, not what it computes) and without fields added later
        while they hold their defaults."""
        return self._run_id(_kept_in_the_id(self.identity()))

    @property
    def legacy_run_id(self) -> str:
        """The run id of run folders recorded before :meth:`identity` (a hash of the spec as written, paths
        included); the runner and grids still find completed runs under it."""
        return self._run_id(_kept_in_the_id(self.resolved()))

    def _run_id(self, content: dict[str, Any]) -> str:
        canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:12]
        label = self.name or f"{self.system.name}-{self.dataset.preset or self.dataset.name}-{self.model.encoder}"
        return f"{_slug(label)}-s{self.seed}-{digest}"

    def to_yaml(self) -> str:
        """The resolved spec as YAML."""
        return yaml.safe_dump(self.resolved(), sort_keys=False)


NOT_IDENTITY: tuple[tuple[str, ...], ...] = (("training", "checkpoint_every"),)
"""Spec fields left out of the run id: a run resumed with another checkpoint interval is the same run."""


_ADDED_FIELDS = {("dataset", "split"): None, ("model", "heads"): 4, ("model", "num_bases"): None,
                 ("training", "negatives", "mode"): "chunked", ("training", "regularizer"): "l2",
                 ("training", "negatives", "label_smoothing"): 0.0, ("dataset", "feature_normalization"): "none",
                 ("model", "input_dropout"): 0.0, ("evaluation", "restore_best"): False,
                 ("evaluation", "valid_sample"): None, ("evaluation", "test_sample"): None,
                 ("evaluation", "validations_per_epoch"): 1,
                 ("training", "negatives", "subset_fraction"): None,
                 ("training", "negatives", "subset_batches"): 1, ("model", "gcn_normalization"): "row",
                 ("dataset", "split", "component"): "all", ("model", "embedding_dropout"): 0.0,
                 ("model", "relation_dropout"): 0.0, ("training", "score_precision"): "float32"}
"""Fields added after runs were recorded: left at these defaults they are not part of the run id, so the ids of
earlier runs (and the results they name) stay valid; the resolved spec written with a result holds them all."""

EARLIER_EVALUATION_GRAPH = {"disk": "buffer"}
"""How runs recorded before ``evaluation.graph`` existed evaluated, by system (every other system: ``full``, the
whole graph). At that value the field is left out of the run id, so those runs keep their ids; a disk run at the
default ``full`` evaluates otherwise and is another run."""


def _without_added_defaults(resolved: dict[str, Any]) -> dict[str, Any]:
    for path, default in _ADDED_FIELDS.items():
        node = resolved
        for part in path[:-1]:
            node = node.get(part, {})
        if path[-1] in node and node[path[-1]] == default:
            del node[path[-1]]
    evaluation, system = resolved.get("evaluation", {}), resolved.get("system", {}).get("name")
    if evaluation.get("graph") == EARLIER_EVALUATION_GRAPH.get(system, "full"):
        del evaluation["graph"]
    return resolved


def _kept_in_the_id(content: dict[str, Any]) -> dict[str, Any]:
    """``content`` without the :data:`NOT_IDENTITY` fields and the added fields at their defaults."""
    content = _without_added_defaults(content)
    for path in NOT_IDENTITY:
        node = content
        for part in path[:-1]:
            node = node.get(part, {})
        node.pop(path[-1], None)
    return content


def dataset_identity(dataset: DatasetSpec) -> dict[str, Any]:
    """The dataset section as the data it names, independent of how its paths were written.

    ``cache_dir`` (where a store is kept) is left out; a synthetic dataset is its full generator configuration
    (preset defaults and ``params`` merged: the key of its cache entry); a ``root`` that holds a store
    (``metadata.json``) is the SHA-256 of the store's file checksums; any other ``root`` (raw files of a loader) is
    its absolute, resolved path. A section that cannot be resolved (an unknown preset, an unreadable store) keeps
    what was written; the run then fails with its one-line error.
    """
    identity = dataset.model_dump(mode="json", exclude={"cache_dir"})
    if dataset.name == "synthetic":
        try:
            import dataclasses

            from suite.data.synthetic import PRESETS

            config = dataclasses.replace(PRESETS.get(dataset.preset or "tiny"), **dataset.params)
            identity.update(preset=dataset.preset or "tiny", params=json.loads(json.dumps(
                dataclasses.asdict(config), sort_keys=True, default=str)))
        except Exception:  # noqa: BLE001 - reported by the dataset resolver, with the field
            pass
    if dataset.root is not None:
        root = Path(dataset.root).expanduser()
        identity["root"] = _store_checksum(root) or str(root.resolve())
    return identity


def _store_checksum(root: Path) -> str | None:
    """``store-sha256:<hex>`` over the file checksums recorded in ``root/metadata.json``; None if it has none."""
    try:
        stat = (root / "metadata.json").stat()
    except OSError:
        return None
    return _metadata_checksum(str((root / "metadata.json").resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _metadata_checksum(path: str, mtime_ns: int, size: int) -> str | None:
    """:func:`_store_checksum` of one version of a ``metadata.json`` (cached by its path, mtime and size)."""
    try:
        files = json.loads(Path(path).read_text())["files"]
        checksums = {name: entry["checksum"] for name, entry in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None  # not a readable store: opening it gives the one-line error
    digest = hashlib.sha256(json.dumps(checksums, sort_keys=True).encode()).hexdigest()
    return f"store-sha256:{digest}"


def _resolved_options(spec: "RunSpec") -> Any:
    """``system.options`` with the registered system's defaults filled in (as given if it has no options model or
    they do not validate), without the options its model lists in ``ADDED_OPTIONS`` while they hold those values
    (options added after runs were recorded, as :data:`_ADDED_FIELDS` for the spec's own fields)."""
    try:
        options = validate_system_options(spec)
    except Exception:  # noqa: BLE001 - reported with the field when the run starts
        options = None
    if options is None:
        return spec.resolved()["system"]["options"]
    dumped = json.loads(options.model_dump_json())
    for name, default in getattr(type(options), "ADDED_OPTIONS", {}).items():
        if name in dumped and dumped[name] == default:  # added after runs were recorded: their ids stay valid
            del dumped[name]
    return dumped


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-")[:60] or "run"


# ---------------------------------------------------------------------------------------------- loading
def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """Parse ``a.b=value`` into ``(("a", "b"), value)``; the value is read as YAML (``3``, ``[5, 5]``, ``true``)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key.path=value")
    key, raw = text.split("=", 1)
    path = tuple(part for part in key.strip().split("."))
    if not all(path):
        raise ConfigError(f"--set {text!r}: empty field name in {key!r}")
    try:
        value = yaml_load(raw)
    except yaml.YAMLError as err:
        raise ConfigError(f"--set {key}: value {raw!r} is not valid YAML ({err.problem})") from None
    return path, value


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings to one level with dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``); lists stay."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Return a copy of ``data`` with each ``a.b=value`` override set (intermediate mappings are created)."""
    result = json.loads(json.dumps(data))
    for text in overrides:
        path, value = parse_override(text)
        node = result
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {text}: {'.'.join(path[: depth + 1])} is not a mapping")
            node = child
        node[path[-1]] = value
    return result


_SUBFIELD_MESSAGE = re.compile(r"^([a-z_][a-z_.]*): (.*)$")


def _format_error(source: str, err: ValidationError) -> str:
    """One line: ``source: field.path: message`` for the first validation error.

    Cross-field validators raise messages of the form ``"subfield: text"``; the subfield joins the path.
    """
    first = err.errors()[0]
    location = [str(part) for part in first["loc"]]
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown field"
    elif first["type"] == "missing":
        message = "required field is missing"
    elif first["type"] != "value_error" and not isinstance(first.get("input"), dict):
        message += f" (got {first.get('input')!r})"
    subfield = _SUBFIELD_MESSAGE.match(message)
    if first["type"] == "value_error" and subfield:
        location.append(subfield.group(1))
        message = subfield.group(2)
    return f"{source}: {'.'.join(location) or '<root>'}: {message}"


def validated(model: type[BaseModel], data: Any, source: str = "<spec>") -> Any:
    """Validate plain data (a mapping) into ``model``; any error is one :class:`ConfigError` line naming ``source``
    and the field path (``spec.yaml: training.epochs: ...``). Shared by every typed config of the suite."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(source, err)) from None


def spec_from_dict(data: Any, source: str = "<spec>") -> RunSpec:
    """Validate plain data into a :class:`RunSpec`; errors name ``source`` and the field path."""
    spec = validated(RunSpec, data, source)
    _check_registered_names(spec, source)
    return spec


def _check_registered_names(spec: RunSpec, source: str) -> None:
    from suite.registry import DATASETS, DECODERS, MACHINES, MODELS, SAMPLERS, SYSTEMS

    for field, registry, name in (
        ("dataset.name", DATASETS, spec.dataset.name),
        ("model.encoder", MODELS, spec.model.encoder),
        *((("model.decoder", DECODERS, spec.model.decoder),) if spec.model.decoder is not None else ()),
        ("sampler.name", SAMPLERS, spec.sampler.name),
        ("system.name", SYSTEMS, spec.system.name),
        ("machine.profile", MACHINES, spec.machine.profile),
    ):
        if name not in registry:
            known = ", ".join(registry.names()) or "none"
            raise ConfigError(f"{source}: {field}: unknown {registry.kind} {name!r} (known: {known})")
    validate_system_options(spec, source)


def validate_system_options(spec: RunSpec, source: str = "<spec>") -> BaseModel | None:
    """Validate ``system.options`` against the registered system's ``options_model`` (a pydantic model), if any.

    Returns the validated options (None for systems without options); errors name ``source`` and the option,
    e.g. ``grid.yaml: system.options.staleness_bound: Input should be greater than or equal to 1 (got 0)``.
    """
    from suite.registry import SYSTEMS

    for path, value in _non_finite(spec.system.options):
        raise ConfigError(f"{source}: system.options.{path}: must be a finite number, got {value}")
    model = getattr(SYSTEMS.get(spec.system.name), "options_model", None)
    if model is None:
        return None
    try:
        return model.model_validate(spec.system.options)
    except ValidationError as err:
        message = _format_error(source, err)
        raise ConfigError(message.replace(f"{source}: ", f"{source}: system.options.", 1)) from None


def _non_finite(value: Any, path: str = "") -> list[tuple[str, float]]:
    """``(field path, value)`` of every NaN or infinite float inside ``value`` (nested dicts and lists)."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [(path, value)]
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _non_finite(item, f"{path}.{key}" if path else key)]
    if isinstance(value, (list, tuple)):
        return [found for i, item in enumerate(value) for found in _non_finite(item, f"{path}.{i}")]
    return []


def read_yaml(path: str | os.PathLike) -> Any:
    """Parse a YAML file; errors name the file and the line."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read ({describe_os_error(err)})") from None
    try:
        return yaml_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: invalid YAML{where} ({getattr(err, 'problem', err)})") from None


def load_spec(path: str | os.PathLike, overrides: list[str] | tuple[str, ...] = ()) -> RunSpec:
    """Load a run spec from YAML, apply ``--set`` overrides, validate; relative dataset paths resolve from CWD."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return spec_from_dict(apply_overrides(data, overrides), source=str(path))
