"""Translate a Marius (MariusGNN) training config into a run spec: ``gnnsuite import-marius CONFIG.yaml --out SPEC``.

Marius configs (``model``, ``storage``, ``training``, ``evaluation``; the schema of Marius's
``docs/config_interface/full_schema.rst`` and ``marius_config.py``) are read as they are. Every field is either
mapped, accepted without effect (the reason is in :data:`FIELD_TABLE`), or refused with a one-line
:class:`~suite.errors.ConfigError` naming the field; a field the table does not know is refused too. The
documented table of every field is in ``docs/datasets.md`` (generated from :data:`FIELD_TABLE` by
:func:`field_table_markdown`, and checked against it by the tests).

The dataset: Marius reads a preprocessed folder (``storage.dataset.dataset_dir``); the spec names a registered
dataset instead. By default the folder's name is looked up in :data:`MARIUS_DATASETS` (``fb15k_237`` ->
``fb15k237``...) and the folder itself becomes ``dataset.root``; ``--dataset NAME`` and ``--root DIR`` override
both (e.g. the OpenKE raw files of FB15k-237, or a store from ``gnnsuite datasets import``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from suite.errors import ConfigError

MARIUS_DATASETS = {
    "fb15k": "fb15k", "fb15k_237": "fb15k237", "fb15k237": "fb15k237", "wn18": "wn18", "wn18rr": "wn18rr",
    "ogbn_arxiv": "ogbn-arxiv", "ogbn_products": "ogbn-products", "ogbn_papers100m": "ogbn-papers100M",
    "ogbl_wikikg2": "ogbl-wikikg2", "ogbl_citation2": "ogbl-citation2", "ogbl_ppa": "ogbl-ppa",
    "ogbl_collab": "ogbl-collab", "cora": "cora",
}
"""Marius's preprocessed dataset folder names -> the suite's registered dataset names."""

MAPPED, NO_EFFECT, REFUSED = "mapped", "accepted, no effect", "refused"

FIELD_TABLE: list[tuple[str, str, str]] = [
    # (Marius field, status, suite field or reason)
    ("model.random_seed", MAPPED, "seed (modulo 2^32: the suite's seeds are 32-bit)"),
    ("model.learning_task", MAPPED, "training.task: LINK_PREDICTION/LP -> link_prediction, "
                                    "NODE_CLASSIFICATION/NC -> node_classification"),
    ("model.encoder.layers", MAPPED, "one layer per stage (parallel layers in a stage are refused); see below"),
    ("model.encoder.layers[].type: EMBEDDING", MAPPED, "model.learnable_embeddings: true, "
                                                       "model.embedding_dim = output_dim"),
    ("model.encoder.layers[].type: FEATURE", MAPPED, "model.learnable_embeddings: false (the store's features)"),
    ("model.encoder.layers[].type: GNN", MAPPED, "model.encoder (options.type GRAPH_SAGE -> graphsage, or gcn with "
                                                 "aggregator GCN; GAT -> gat; RGCN -> rgcn), model.num_layers = "
                                                 "number of GNN layers, model.hidden_dim = output_dim of the first "
                                                 "(with more than one)"),
    ("model.encoder.layers[].type: REDUCTION / DENSE", REFUSED, "no reduction or dense layers in the suite's "
                                                               "encoders"),
    ("model.encoder.layers[].input_dim / output_dim", MAPPED, "checked for a chain; dims as above (the last GNN "
                                                              "layer's output is the embedding width for links, the "
                                                              "classes for nodes)"),
    ("model.encoder.layers[].init", MAPPED, "EMBEDDING: NORMAL std -> model.embedding_init_scale; GLOROT_NORMAL / "
                                            "GLOROT_UNIFORM -> a normal of Glorot's std sqrt(2 / (num_nodes + dim)); "
                                            "other types refused; GNN layers: PyG's initialization (only the "
                                            "default GLOROT_UNIFORM/GLOROT_NORMAL accepted)"),
    ("model.encoder.layers[].bias / bias_init", NO_EFFECT, "GNN layers: PyG layers carry a bias initialized at "
                                                           "zero; EMBEDDING/FEATURE: a zero bias of Marius's "
                                                           "default init changes nothing at start (a non-ZEROS "
                                                           "bias_init is refused)"),
    ("model.encoder.layers[].activation", MAPPED, "RELU or NONE accepted (the suite's encoders apply their own "
                                                  "non-linearity between layers: ReLU, ELU for GAT); others refused"),
    ("model.encoder.layers[].optimizer", REFUSED, "per-layer optimizers (DEFAULT accepted)"),
    ("model.encoder.layers[].options.aggregator", MAPPED, "GRAPH_SAGE: MEAN -> graphsage mean, GCN -> encoder gcn"),
    ("model.encoder.layers[].options.num_heads", MAPPED, "model.heads"),
    ("model.encoder.layers[].options.average_heads", MAPPED, "false accepted (heads concatenated, as the suite's "
                                                             "GAT); true (Marius's default) refused"),
    ("model.encoder.layers[].options.input_dropout", MAPPED, "model.dropout"),
    ("model.encoder.layers[].options.attention_dropout", REFUSED, "unless 0"),
    ("model.encoder.layers[].options.negative_slope", REFUSED, "unless 0.2 (PyG's)"),
    ("model.encoder.train_neighbor_sampling", MAPPED, "model.fanouts, reversed (Marius lists the first layer, the "
                                                      "outermost hop, first; the suite lists it last): ALL -> -1, "
                                                      "UNIFORM -> options.max_neighbors; DROPOUT refused; "
                                                      "sampler dense with replacement (MariusGNN's)"),
    ("model.encoder.train_neighbor_sampling[].use_incoming_nbrs / use_outgoing_nbrs", MAPPED,
     "sampler.direction in / out / both (equal in every layer)"),
    ("model.encoder.train_neighbor_sampling[].use_hashmap_sets", NO_EFFECT, "DENSE picks its set structure itself"),
    ("model.encoder.eval_neighbor_sampling", MAPPED, "evaluation.fanouts (as train_neighbor_sampling)"),
    ("model.decoder.type", MAPPED, "DISTMULT -> distmult, COMPLEX -> complex, TRANSE -> transe (L1); NODE -> "
                                   "node classification without a decoder"),
    ("model.decoder.options.inverse_edges", MAPPED, "model.inverse_relations (Marius's default true)"),
    ("model.decoder.options.use_relation_features", REFUSED, "unless false"),
    ("model.decoder.options.edge_decoder_method", MAPPED, "CORRUPT_NODE (the suite's) accepted; others refused"),
    ("model.decoder.optimizer", REFUSED, "a separate decoder optimizer (the suite steps relation embeddings with "
                                         "the dense optimizer); accepted when equal to model.dense_optimizer"),
    ("model.loss.type", MAPPED, "SOFTMAX_CE -> training.loss softmax (links), RANKING -> margin; "
                                "CROSS_ENTROPY / SOFTMAX_CE (nodes) -> cross-entropy; others refused"),
    ("model.loss.options.margin", MAPPED, "training.margin"),
    ("model.loss.options.reduction", NO_EFFECT, "the suite averages; with Adagrad and Adam a constant loss scale "
                                                "changes nothing but the epsilon term"),
    ("model.dense_optimizer", MAPPED, "training.optimizer (ADAM, ADAGRAD, SGD), training.learning_rate, "
                                      "options.weight_decay -> training.weight_decay; other non-default options "
                                      "refused"),
    ("model.sparse_optimizer", MAPPED, "ADAGRAD: options.learning_rate -> training.embedding_learning_rate; other "
                                       "types and non-default options refused"),
    ("storage.device_type", MAPPED, "system.device (cpu, cuda)"),
    ("storage.device_ids", MAPPED, "one id -> cuda:<id>; several refused (multi-GPU)"),
    ("storage.dataset.dataset_dir", MAPPED, "dataset.name from the folder's name (MARIUS_DATASETS) and "
                                            "dataset.root = the folder, unless --dataset / --root are given"),
    ("storage.dataset.num_edges / num_train / num_valid / num_test / num_nodes / num_relations / "
     "node_feature_dim / rel_feature_dim / num_classes / initialized", NO_EFFECT,
     "counts are read from the store"),
    ("storage.edges.type", MAPPED, "DEVICE_MEMORY / HOST_MEMORY: in memory; FLAT_FILE: edges from disk (system "
                                   "disk)"),
    ("storage.nodes", NO_EFFECT, "node id lists live in the store"),
    ("storage.embeddings.type / storage.features.type", MAPPED, "PARTITION_BUFFER -> system disk; DEVICE_MEMORY / "
                                                                "HOST_MEMORY -> in_memory or pipelined"),
    ("storage.*.options.num_partitions / buffer_capacity / fine_to_coarse_ratio", MAPPED,
     "system.options.num_partitions / buffer_capacity / fine_to_coarse_ratio"),
    ("storage.*.options.prefetching", MAPPED, "system.options.prefetch"),
    ("storage.*.options.edge_bucket_ordering", MAPPED, "system.options.policy: COMET -> comet, OLD_BETA / NEW_BETA "
                                                       "/ BETA -> beta; others refused"),
    ("storage.*.options.node_partition_ordering", MAPPED, "node classification: system.options.policy DISPERSED "
                                                          "-> dispersed, SEQUENTIAL -> sequential; others refused"),
    ("storage.*.options.randomly_assign_edge_buckets", MAPPED, "true (COMET's) accepted; false refused"),
    ("storage.*.options.num_cache_partitions", REFUSED, "unless 0"),
    ("storage.*.options.dtype", NO_EFFECT, "the suite stores float32 embeddings and its own id widths"),
    ("storage.prefetch", MAPPED, "system.options.prefetch"),
    ("storage.shuffle_input", MAPPED, "true accepted (the suite always shuffles); false refused"),
    ("storage.full_graph_evaluation", MAPPED, "true accepted (the disk system evaluates on the whole table); "
                                              "false refused"),
    ("storage.export_encoded_nodes / model_dir / log_level", NO_EFFECT, "outputs go to the run folder"),
    ("training.batch_size", MAPPED, "training.batch_size"),
    ("training.num_epochs", MAPPED, "training.epochs"),
    ("training.negative_sampling.num_chunks / negatives_per_positive / degree_fraction", MAPPED,
     "training.negatives.*; negatives_per_positive -1 -> training.negatives: all"),
    ("training.negative_sampling.filtered", MAPPED, "false accepted; true refused (training negatives are not "
                                                    "filtered)"),
    ("training.negative_sampling.local_filter_mode", NO_EFFECT, "only used by filtered training negatives"),
    ("training.pipeline.sync", MAPPED, "true -> system in_memory (disk: no pipeline); false -> system pipelined "
                                       "(disk: system.options.pipeline)"),
    ("training.pipeline.staleness_bound / batch_host_queue_size / batch_device_queue_size / batch_loader_threads / "
     "batch_transfer_threads / compute_threads", MAPPED, "the pipeline options of the same names "
                                                         "(compute_threads -> compute_workers)"),
    ("training.pipeline.gradients_device_queue_size / gradients_host_queue_size / gradient_transfer_threads / "
     "gradient_update_threads / gpu_sync_interval / gpu_model_average", NO_EFFECT,
     "one device; embedding updates run in the update stage"),
    ("training.epochs_per_shuffle", MAPPED, "1 accepted (the suite reshuffles every epoch); others refused"),
    ("training.logs_per_epoch / save_model", NO_EFFECT, "records are written per epoch; the model is kept in the "
                                                        "run folder"),
    ("training.checkpoint / resume_from_checkpoint", REFUSED, "unless empty"),
    ("training.resume_training", REFUSED, "unless false"),
    ("evaluation.batch_size", MAPPED, "evaluation.batch_size"),
    ("evaluation.negative_sampling.negatives_per_positive", MAPPED, "evaluation.negatives (-1 or absent: all "
                                                                    "entities); num_chunks must be 1"),
    ("evaluation.negative_sampling.filtered", MAPPED, "evaluation.filtered"),
    ("evaluation.negative_sampling.degree_fraction", REFUSED, "unless 0 (evaluation candidates are uniform)"),
    ("evaluation.negative_sampling.local_filter_mode", NO_EFFECT, "see training"),
    ("evaluation.epochs_per_eval", MAPPED, "evaluation.every"),
    ("evaluation.pipeline / checkpoint_dir", NO_EFFECT, "evaluation runs synchronously; outputs in the run folder"),
]


def field_table_markdown() -> str:
    """The mapping table as Markdown (``docs/datasets.md`` holds it)."""
    lines = ["| Marius field | status | suite field / reason |", "|---|---|---|"]
    lines += [f"| `{field}` | {status} | {text} |" for field, status, text in FIELD_TABLE]
    return "\n".join(lines)


class _Reader:
    """Walks a section of the Marius config, remembering which keys were read so that unknown ones are refused."""

    def __init__(self, data: Any, path: str, source: str):
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: {path}: expected a mapping, got {type(data).__name__}")
        self.data, self.path, self.source, self.read = data, path, source, set()

    def where(self, key: str | None = None) -> str:
        return f"{self.path}.{key}" if key is not None else self.path

    def fail(self, key: str | None, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {self.where(key)}: {message}")

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return self.data.get(key, default)

    def section(self, key: str) -> "_Reader":
        return _Reader(self.get(key), self.where(key), self.source)

    def upper(self, key: str, default: str | None = None) -> str | None:
        value = self.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {value!r}")
        return value.upper()

    def number(self, key: str, default: Any = None, kind: type = float) -> Any:
        value = self.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not
                                                                              isinstance(value, int)):
            raise self.fail(key, f"expected {'an integer' if kind is int else 'a number'}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(key, f"must be finite, got {value}")
        return value

    def require(self, key: str, allowed: tuple, reason: str, default: Any = None) -> Any:
        """The value of ``key``; refused (naming the field) unless it is one of ``allowed``."""
        value = self.get(key, default)
        normalized = value.upper() if isinstance(value, str) else value
        if normalized not in allowed:
            raise self.fail(key, f"{value!r} is not supported ({reason})")
        return normalized

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.read)
        if unknown:
            raise self.fail(unknown[0], "not a Marius field the suite knows (refused; see docs/datasets.md)")


def _optimizer(reader: _Reader, name: str, allowed: tuple[str, ...]) -> tuple[str, dict[str, float]]:
    kind = reader.upper("type", "ADAGRAD")
    if kind not in allowed:
        raise reader.fail("type", f"{kind!r} is not supported (known: {', '.join(allowed)})")
    options = reader.section("options")
    values = {"learning_rate": options.number("learning_rate", 0.1)}
    weight_decay = options.number("weight_decay", 0.0)
    if weight_decay:
        values["weight_decay"] = weight_decay
    defaults = {"eps": (1e-10, 1e-8), "init_value": (0.0,), "lr_decay": (0.0,), "beta_1": (0.9,),
                "beta_2": (0.999,), "amsgrad": (False,)}
    for key, accepted in defaults.items():
        value = options.get(key)
        if value is not None and value not in accepted:
            raise options.fail(key, f"{value!r} is not supported (the suite uses torch's default {accepted[0]!r})")
    options.done()
    reader.done()
    return kind.lower(), values


def _sampling(layers: Any, path: str, source: str) -> tuple[list[int], str] | None:
    if not layers:
        return None
    if not isinstance(layers, list):
        raise ConfigError(f"{source}: {path}: expected a list (one entry per GNN layer)")
    fanouts, directions = [], set()
    for index, layer in enumerate(layers):
        reader = _Reader(layer, f"{path}[{index}]", source)
        kind = reader.upper("type", "ALL")
        options = reader.section("options")
        if kind == "ALL":
            fanouts.append(-1)
        elif kind == "UNIFORM":
            count = options.number("max_neighbors", kind=int)
            if count is None or count <= 0:
                raise options.fail("max_neighbors", "required for UNIFORM sampling, a positive integer")
            fanouts.append(count)
        else:
            raise reader.fail("type", f"{kind!r} neighbour sampling is not supported (ALL, UNIFORM)")
        incoming, outgoing = reader.get("use_incoming_nbrs", True), reader.get("use_outgoing_nbrs", True)
        if not (incoming or outgoing):
            raise reader.fail("use_incoming_nbrs", "a layer must use incoming or outgoing neighbours")
        directions.add("both" if incoming and outgoing else "in" if incoming else "out")
        reader.get("use_hashmap_sets")
        options.done()
        reader.done()
    if len(directions) > 1:
        raise ConfigError(f"{source}: {path}: every layer must use the same neighbour directions "
                          f"(got {sorted(directions)})")
    return fanouts[::-1], directions.pop()


def _encoder(model: _Reader, spec: dict, num_nodes: int | None) -> dict:
    """``model.encoder``: its layers and neighbour sampling -> the spec's model, sampler and evaluation fanouts."""
    encoder = model.section("encoder")
    stages = encoder.get("layers")
    if not isinstance(stages, list) or not stages:
        raise encoder.fail("layers", "expected a list of stages (lists of layers)")
    target = spec["model"]
    gnn: list[tuple[str, _Reader, dict]] = []
    input_layer = None
    for s, stage in enumerate(stages):
        if not isinstance(stage, list) or len(stage) != 1:
            raise encoder.fail(f"layers[{s}]", "expected one layer per stage (parallel layers are not supported)")
        layer = _Reader(stage[0], f"{encoder.where('layers')}[{s}][0]", model.source)
        kind = _layer(layer, s, target, num_nodes, gnn)
        input_layer = kind if s == 0 else input_layer
    if input_layer not in ("EMBEDDING", "FEATURE"):
        raise encoder.fail("layers", "the first layer must be EMBEDDING or FEATURE")
    if not gnn:
        target.update(encoder="shallow" if input_layer == "EMBEDDING" else "mlp", num_layers=0, fanouts=[])
        if input_layer == "FEATURE":
            raise encoder.fail("layers", "a FEATURE layer without GNN layers is not supported")
    else:
        _gnn_layers(encoder, gnn, input_layer, target)
    _neighbor_sampling(model, encoder, len(gnn), spec)
    return spec


def _layer(layer: _Reader, position: int, target: dict, num_nodes: int | None,
           gnn: list[tuple[str, _Reader, dict]]) -> str:
    """One encoder layer: an input layer's fields into ``target``, a GNN layer appended to ``gnn``; its type."""
    kind = layer.upper("type")
    output_dim = layer.number("output_dim", kind=int)
    input_dim = layer.number("input_dim", -1, kind=int)
    activation = layer.upper("activation", "NONE")
    if activation not in ("NONE", "RELU"):
        raise layer.fail("activation", f"{activation!r} is not supported (RELU, NONE)")
    optimizer = layer.section("optimizer")
    if optimizer.data and optimizer.upper("type", "DEFAULT") != "DEFAULT":
        raise optimizer.fail("type", "per-layer optimizers are not supported (DEFAULT: the dense optimizer)")
    optimizer.read.update(optimizer.data)
    bias_init = layer.section("bias_init")
    if bias_init.data and bias_init.upper("type", "ZEROS") not in ("ZEROS", "ZEROES"):
        raise bias_init.fail("type", "only a zero bias initialization is supported")
    bias_init.read.update(bias_init.data)
    layer.get("bias")
    init = layer.section("init")
    init_type = init.upper("type", "GLOROT_UNIFORM")
    init_options = init.section("options")
    options = layer.section("options")
    if kind in ("EMBEDDING", "FEATURE"):
        if position != 0:
            raise layer.fail("type", f"{kind} must be the first layer")
        if output_dim is None or output_dim <= 0:
            raise layer.fail("output_dim", "required, a positive integer")
        target["learnable_embeddings"] = kind == "EMBEDDING"
        target["embedding_dim"] = output_dim
        if kind == "EMBEDDING":
            target["embedding_init_scale"] = _embedding_init_scale(init, init_type, init_options, num_nodes,
                                                                   output_dim)
    elif kind == "GNN":
        if init_type not in ("GLOROT_UNIFORM", "GLOROT_NORMAL"):
            raise init.fail("type", f"{init_type!r}: GNN layers keep PyG's (Glorot) initialization")
        gnn.append((options.upper("type"), options, {"input_dim": input_dim, "output_dim": output_dim}))
        if options.get("type") is None:
            raise options.fail("type", "required (GRAPH_SAGE, GAT, RGCN)")
    else:
        raise layer.fail("type", f"{kind!r} layers are not supported (EMBEDDING, FEATURE, GNN)")
    init_options.read.update(k for k in init_options.data if k in ("mean", "std", "scale_factor", "constant"))
    init_options.done()
    init.done()
    if kind != "GNN":
        options.done()
    layer.done()
    return kind


def _embedding_init_scale(init: _Reader, init_type: str, init_options: _Reader, num_nodes: int | None,
                          dim: int) -> float:
    """The standard deviation of an EMBEDDING layer's initialization (normal, or Glorot's for ``num_nodes``)."""
    if init_type == "NORMAL":
        if init_options.number("mean", 0.0) != 0.0:
            raise init_options.fail("mean", "only zero-mean normal initialization is supported")
        return float(init_options.number("std", 1.0))
    if init_type in ("GLOROT_NORMAL", "GLOROT_UNIFORM"):
        if num_nodes is None:
            raise init.fail("type", f"{init_type} needs storage.dataset.num_nodes (Glorot's std)")
        return math.sqrt(2.0 / (num_nodes + dim))
    raise init.fail("type", f"{init_type!r} is not supported for embeddings (NORMAL, GLOROT_NORMAL, "
                            f"GLOROT_UNIFORM)")


def _gnn_layers(encoder: _Reader, gnn: list[tuple[str, _Reader, dict]], input_layer: str, target: dict) -> None:
    """The GNN layers (all of one type) -> encoder, heads, dropout, number of layers and hidden size."""
    kinds = {kind for kind, _, _ in gnn}
    if len(kinds) > 1:
        raise encoder.fail("layers", f"all GNN layers must have the same type (got {sorted(kinds)})")
    kind, first, dims = gnn[0]
    for _, options, _ in gnn:
        if kind == "GRAPH_SAGE":
            aggregator = options.require("aggregator", ("MEAN", "GCN"), "MEAN or GCN", "MEAN")
            target["encoder"] = "gcn" if aggregator == "GCN" else "graphsage"
        elif kind == "GAT":
            _gat_options(options, target)
        elif kind == "RGCN":
            target["encoder"] = "rgcn"
        else:
            raise first.fail("type", f"{kind!r} GNN layers are not supported (GRAPH_SAGE, GAT, RGCN)")
        target["dropout"] = float(options.number("input_dropout", 0.0))
        options.done()
    target["num_layers"] = len(gnn)
    if len(gnn) > 1 or (dims["output_dim"] is not None and input_layer == "EMBEDDING"):
        target["hidden_dim"] = dims["output_dim"]


def _gat_options(options: _Reader, target: dict) -> None:
    """A GAT layer's options (the suite's GAT concatenates hidden heads, PyG's slope, no attention dropout)."""
    target["encoder"] = "gat"
    target["heads"] = options.number("num_heads", 10, kind=int)
    if options.get("average_heads", True):
        raise options.fail("average_heads", "the suite's GAT concatenates hidden heads; set "
                                            "average_heads: false to accept that")
    if options.number("attention_dropout", 0.0):
        raise options.fail("attention_dropout", "is not supported (0 only)")
    if options.number("negative_slope", 0.2) != 0.2:
        raise options.fail("negative_slope", "is not supported (PyG's 0.2 only)")


def _neighbor_sampling(model: _Reader, encoder: _Reader, layers: int, spec: dict) -> None:
    """``train_neighbor_sampling`` / ``eval_neighbor_sampling`` -> fanouts, the DENSE sampler and its direction."""
    train = _sampling(encoder.get("train_neighbor_sampling"), encoder.where("train_neighbor_sampling"), model.source)
    evaluation = _sampling(encoder.get("eval_neighbor_sampling"), encoder.where("eval_neighbor_sampling"),
                           model.source)
    encoder.get("embedding_dim")
    encoder.done()
    if not layers:
        return
    if train is None:
        raise encoder.fail("train_neighbor_sampling", "required for GNN layers (one entry per layer)")
    if len(train[0]) != layers:
        raise encoder.fail("train_neighbor_sampling", f"{len(train[0])} entries for {layers} GNN layers")
    spec["model"]["fanouts"] = train[0]
    spec["sampler"] = {"name": "dense", "replace": True, "direction": train[1]}
    if evaluation is not None:
        if len(evaluation[0]) != layers:
            raise encoder.fail("eval_neighbor_sampling", f"{len(evaluation[0])} entries for {layers} layers")
        spec.setdefault("evaluation", {})["fanouts"] = evaluation[0]


def _buffer(storage: _Reader, key: str, task: str, system: dict) -> bool:
    backend = storage.section(key)
    kind = backend.upper("type", "DEVICE_MEMORY")
    options = backend.section("options")
    options.get("dtype")
    if kind in ("DEVICE_MEMORY", "HOST_MEMORY"):
        options.done()
        backend.done()
        return False
    if kind != "PARTITION_BUFFER":
        raise backend.fail("type", f"{kind!r} is not supported (PARTITION_BUFFER, DEVICE_MEMORY, HOST_MEMORY)")
    target = system.setdefault("options", {})
    for name in ("num_partitions", "buffer_capacity", "fine_to_coarse_ratio"):
        value = options.number(name, kind=int)
        if value is not None:
            target[name] = value
    if "num_partitions" not in target or "buffer_capacity" not in target:
        raise options.fail("num_partitions", "num_partitions and buffer_capacity are required for PARTITION_BUFFER")
    prefetching = options.get("prefetching")
    if prefetching is not None:
        target["prefetch"] = bool(prefetching)
    if options.number("num_cache_partitions", 0, kind=int):
        raise options.fail("num_cache_partitions", "is not supported (0 only)")
    if not options.get("randomly_assign_edge_buckets", True):
        raise options.fail("randomly_assign_edge_buckets", "false is not supported (COMET assigns at random)")
    if task == "link_prediction":
        ordering = options.require("edge_bucket_ordering", ("COMET", "OLD_BETA", "NEW_BETA", "BETA"),
                                   "COMET, OLD_BETA, NEW_BETA", "COMET")
        target["policy"] = "comet" if ordering == "COMET" else "beta"
        options.get("node_partition_ordering")
    else:
        ordering = options.require("node_partition_ordering", ("DISPERSED", "SEQUENTIAL"), "DISPERSED, SEQUENTIAL",
                                   "DISPERSED")
        target["policy"] = ordering.lower()
        options.get("edge_bucket_ordering")
    options.done()
    backend.done()
    return True


def _pipeline(reader: _Reader) -> tuple[bool, dict]:
    sync = reader.get("sync", True)
    options = {}
    for name in ("staleness_bound", "batch_host_queue_size", "batch_device_queue_size", "batch_loader_threads",
                 "batch_transfer_threads"):
        value = reader.number(name, kind=int)
        if value is not None and not sync:
            options[name] = value
    compute = reader.number("compute_threads", kind=int)
    if compute is not None and not sync:
        options["compute_workers"] = compute
    for name in ("gradients_device_queue_size", "gradients_host_queue_size", "gradient_transfer_threads",
                 "gradient_update_threads", "gpu_sync_interval", "gpu_model_average"):
        reader.get(name)
    reader.done()
    return bool(sync), options


_TASKS = {"LINK_PREDICTION": "link_prediction", "LP": "link_prediction", "NODE_CLASSIFICATION": "node_classification",
          "NC": "node_classification"}
_DECODERS = {"DISTMULT": "distmult", "COMPLEX": "complex", "TRANSE": "transe"}


def translate(config: Any, source: str = "<marius config>", dataset: str | None = None,
              root: str | None = None) -> dict:
    """A Marius config (parsed YAML) -> run-spec data (validate with :func:`suite.config.spec_from_dict`).

    The sections are read in a fixed order (model, storage, training, evaluation), so the first field that is
    refused is the one named.

    Args:
        config: the Marius config.
        source: its file, for messages.
        dataset, root: the spec's ``dataset.name`` / ``dataset.root`` (default: from
            ``storage.dataset.dataset_dir``).

    Raises:
        ConfigError: ``<source>: <marius field>: <why>`` for a refused or malformed field.
    """
    top = _Reader(config, "<root>", source)
    top.path = ""
    model, storage = top.section("model"), top.section("storage")
    training, evaluation = top.section("training"), top.section("evaluation")
    for reader, name in ((model, "model"), (storage, "storage"), (training, "training"), (evaluation, "evaluation")):
        reader.path = name
    top.done()
    spec: dict[str, Any] = {"model": {}, "training": {}, "evaluation": {}}
    data = storage.section("dataset")
    task = _model(model, spec, data)
    spec["dataset"] = _dataset(data, dataset, root)
    system = _system(storage, task)
    _training(training, task, spec["training"], system)
    spec["system"] = system
    _evaluation(evaluation, task, spec["evaluation"])
    return spec


def _model(model: _Reader, spec: dict, data: _Reader) -> str:
    """``model``: the task, seed, encoder (sized by ``storage.dataset.num_nodes``), decoder, optimizers and loss
    into ``spec``; returns the task."""
    task_name = model.upper("learning_task")
    if task_name not in _TASKS:
        raise model.fail("learning_task", f"expected LINK_PREDICTION or NODE_CLASSIFICATION, got {task_name!r}")
    task = _TASKS[task_name]
    spec["training"]["task"] = task
    seed = model.number("random_seed", kind=int)
    if seed is not None:
        spec["seed"] = seed % 2**32
    _encoder(model, spec, data.number("num_nodes", kind=int))
    decoder = model.section("decoder")
    _decoder(decoder, task, spec["model"])
    _optimizers(model, decoder, task, spec["training"])
    _loss(model.section("loss"), task, spec["training"])
    model.done()
    return task


def _decoder(decoder: _Reader, task: str, target: dict) -> None:
    """``model.decoder`` (its ``optimizer`` is read with the optimizers)."""
    decoder_type = decoder.upper("type", "DISTMULT" if task == "link_prediction" else "NODE")
    decoder_options = decoder.section("options")
    if task == "link_prediction":
        if decoder_type not in _DECODERS:
            raise decoder.fail("type", f"{decoder_type!r} is not a link-prediction decoder (DISTMULT, COMPLEX, "
                                       f"TRANSE)")
        target["decoder"] = _DECODERS[decoder_type]
        target["inverse_relations"] = bool(decoder_options.get("inverse_edges", True))
        if decoder_options.get("use_relation_features", False):
            raise decoder_options.fail("use_relation_features", "is not supported (false only)")
        decoder_options.require("edge_decoder_method", ("CORRUPT_NODE", "TRAIN"), "CORRUPT_NODE", "CORRUPT_NODE")
    elif decoder_type != "NODE":
        raise decoder.fail("type", f"node classification takes the NODE decoder, got {decoder_type!r}")
    decoder_options.done()


def _optimizers(model: _Reader, decoder: _Reader, task: str, target: dict) -> None:
    """``model.dense_optimizer``, ``model.decoder.optimizer`` and ``model.sparse_optimizer``."""
    dense_data = model.get("dense_optimizer") or {"type": "ADAGRAD"}
    optimizer, values = _optimizer(_Reader(dense_data, "model.dense_optimizer", model.source), "dense",
                                   ("ADAM", "ADAGRAD", "SGD"))
    if decoder.get("optimizer") not in (None, dense_data):
        raise decoder.fail("optimizer", "a separate decoder optimizer is not supported (relation embeddings use "
                                        "model.dense_optimizer)")
    decoder.done()
    target.update(optimizer=optimizer, learning_rate=float(values["learning_rate"]))
    if "weight_decay" in values:
        target["weight_decay"] = float(values["weight_decay"])
    sparse = model.get("sparse_optimizer")
    if sparse is not None:
        _, sparse_values = _optimizer(_Reader(sparse, "model.sparse_optimizer", model.source), "sparse",
                                      ("ADAGRAD",))
        if "weight_decay" in sparse_values:
            raise ConfigError(f"{model.source}: model.sparse_optimizer.options.weight_decay: is not supported")
        if task == "link_prediction":
            target["embedding_learning_rate"] = float(sparse_values["learning_rate"])


def _loss(loss: _Reader, task: str, target: dict) -> None:
    """``model.loss``."""
    loss_type = loss.upper("type", "SOFTMAX_CE")
    loss_options = loss.section("options")
    loss_options.get("reduction")
    if task == "link_prediction":
        if loss_type == "SOFTMAX_CE":
            target["loss"] = "softmax"
        elif loss_type == "RANKING":
            target["loss"] = "margin"
            target["margin"] = float(loss_options.number("margin", 0.1))
        else:
            raise loss.fail("type", f"{loss_type!r} is not supported for link prediction (SOFTMAX_CE, RANKING)")
    elif loss_type not in ("CROSS_ENTROPY", "SOFTMAX_CE"):
        raise loss.fail("type", f"{loss_type!r} is not supported for node classification (CROSS_ENTROPY)")
    loss_options.done()
    loss.done()


def _dataset(data: _Reader, dataset: str | None, root: str | None) -> dict:
    """``storage.dataset`` -> the spec's ``dataset`` (a name the suite knows and its folder)."""
    directory = data.get("dataset_dir")
    for key in ("num_edges", "num_train", "num_valid", "num_test", "num_relations", "node_feature_dim",
                "rel_feature_dim", "num_classes", "initialized"):
        data.get(key)
    data.done()
    if dataset is None:
        if not isinstance(directory, str) or not directory:
            raise data.fail("dataset_dir", "required (or give --dataset)")
        folder = Path(directory.rstrip("/")).name.lower()
        if folder not in MARIUS_DATASETS:
            raise data.fail("dataset_dir", f"folder {folder!r} is not a dataset the suite knows (known: "
                                           f"{', '.join(sorted(MARIUS_DATASETS))}); give --dataset NAME --root DIR")
        dataset = MARIUS_DATASETS[folder]
    spec = {"name": dataset}
    if root is not None or directory:
        spec["root"] = root if root is not None else directory
    return spec


def _device(storage: _Reader) -> str:
    """``storage.device_type`` and ``device_ids`` -> ``cpu``, ``cuda`` or ``cuda:<id>``."""
    device = storage.get("device_type", "cpu")
    if not isinstance(device, str) or device.lower() not in ("cpu", "cuda", "gpu"):
        raise storage.fail("device_type", f"expected CPU or CUDA, got {device!r}")
    device = "cpu" if device.lower() == "cpu" else "cuda"
    ids = storage.get("device_ids") or []
    if len(ids) > 1:
        raise storage.fail("device_ids", "several devices are not supported by one run here (one id at most)")
    if ids and device == "cuda":
        device = f"cuda:{int(ids[0])}"
    return device


def _system(storage: _Reader, task: str) -> dict:
    """``storage`` -> the spec's ``system``: ``disk`` when a partition buffer or on-disk edges are asked for."""
    system: dict[str, Any] = {"name": "in_memory", "device": _device(storage)}
    buffered_key = "embeddings" if task == "link_prediction" else "features"
    edges = storage.section("edges")
    edges_on_disk = edges.upper("type", "DEVICE_MEMORY") == "FLAT_FILE"
    if edges.upper("type", "DEVICE_MEMORY") not in ("FLAT_FILE", "DEVICE_MEMORY", "HOST_MEMORY"):
        raise edges.fail("type", "expected FLAT_FILE, DEVICE_MEMORY or HOST_MEMORY")
    edges.section("options").read.add("dtype")
    edges.read.add("options")
    buffered = _buffer(storage, buffered_key, task, system)
    other = storage.section("features" if task == "link_prediction" else "embeddings")
    if other.upper("type", "DEVICE_MEMORY") == "PARTITION_BUFFER":
        raise other.fail("type", f"PARTITION_BUFFER is supported for the {buffered_key} of this task only")
    other.read.update(other.data)
    storage.get("nodes")
    if buffered or edges_on_disk:
        system["name"] = "disk"
        if not buffered:
            raise edges.fail("type", f"FLAT_FILE edges need a PARTITION_BUFFER for the {buffered_key}")
    prefetch = storage.get("prefetch")
    if prefetch is not None and system["name"] == "disk":
        system["options"]["prefetch"] = bool(prefetch)
    if not storage.get("shuffle_input", True):
        raise storage.fail("shuffle_input", "false is not supported (the suite shuffles every epoch)")
    if not storage.get("full_graph_evaluation", True):
        raise storage.fail("full_graph_evaluation", "false is not supported")
    for key in ("export_encoded_nodes", "model_dir", "log_level"):
        storage.get(key)
    storage.done()
    return system


def _training(training: _Reader, task: str, target: dict, system: dict) -> None:
    """``training``: batch size, epochs, negatives, and the pipeline (which may change ``system``)."""
    for key, name, kind in (("batch_size", "batch_size", int), ("num_epochs", "epochs", int)):
        value = training.number(key, kind=kind)
        if value is not None:
            target[name] = value
    negatives = training.section("negative_sampling")
    if task == "link_prediction":
        per_positive = negatives.number("negatives_per_positive", kind=int)
        if per_positive == -1:
            target["negatives"] = {"mode": "all"}
        else:
            target["negatives"] = {key: value for key, value in (
                ("num_chunks", negatives.number("num_chunks", kind=int)),
                ("negatives_per_positive", per_positive),
                ("degree_fraction", negatives.number("degree_fraction"))) if value is not None}
        if negatives.get("filtered", False):
            raise negatives.fail("filtered", "true is not supported (training negatives are not filtered)")
        negatives.get("local_filter_mode")
    negatives.done()
    sync, pipeline = _pipeline(training.section("pipeline"))
    if not sync:
        if system["name"] == "disk":
            system["options"]["pipeline"] = pipeline
        else:
            system["name"] = "pipelined"
            system["options"] = pipeline
    if training.number("epochs_per_shuffle", 1, kind=int) != 1:
        raise training.fail("epochs_per_shuffle", "only 1 is supported (the suite reshuffles every epoch)")
    for key in ("logs_per_epoch", "save_model"):
        training.get(key)
    if training.get("checkpoint") or training.get("resume_from_checkpoint"):
        raise training.fail("checkpoint", "is not supported")
    if training.get("resume_training", False):
        raise training.fail("resume_training", "is not supported (the disk system resumes killed runs itself)")
    training.done()


def _evaluation(evaluation: _Reader, task: str, target: dict) -> None:
    """``evaluation``: batch size, frequency and candidates."""
    value = evaluation.number("batch_size", kind=int)
    if value is not None:
        target["batch_size"] = value
    every = evaluation.number("epochs_per_eval", kind=int)
    if every is not None:
        target["every"] = every
    negatives = evaluation.section("negative_sampling")
    if task == "link_prediction":
        per_positive = negatives.number("negatives_per_positive", kind=int)
        chunks = negatives.number("num_chunks", 1, kind=int)
        if per_positive not in (None, -1):
            if chunks != 1:
                raise negatives.fail("num_chunks", "only 1 is supported for evaluation")
            target["negatives"] = per_positive
        if negatives.number("degree_fraction", 0.0):
            raise negatives.fail("degree_fraction", "is not supported (evaluation candidates are uniform)")
        filtered = negatives.get("filtered")
        if filtered is not None:
            target["filtered"] = bool(filtered)
        negatives.get("local_filter_mode")
    negatives.done()
    evaluation.get("pipeline")
    evaluation.get("checkpoint_dir")
    evaluation.done()


def import_marius(path: str | Path, out: str | Path, *, dataset: str | None = None, root: str | None = None,
                  overwrite: bool = False) -> "object":
    """Translate the Marius config ``path`` into the run spec ``out`` (YAML, validated, written atomically).

    Returns:
        The validated :class:`~suite.config.RunSpec`.
    """
    from suite.config import read_yaml, spec_from_dict
    from suite.io import atomic_write_bytes

    path, out = Path(path), Path(out)
    if out.exists() and not overwrite:
        raise ConfigError(f"{out}: exists (use --overwrite)")
    data = translate(read_yaml(path), str(path), dataset, root)
    spec = spec_from_dict(data, source=f"{path} (translated)")
    header = f"# Translated from the Marius config {path} by gnnsuite import-marius (see docs/datasets.md).\n"
    atomic_write_bytes(out, (header + spec.to_yaml()).encode())
    return spec


__all__ = ["FIELD_TABLE", "MARIUS_DATASETS", "field_table_markdown", "import_marius", "translate"]
