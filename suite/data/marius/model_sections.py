"""The model side of a Marius config: optimizers, the encoder's GNN layers, their sampling and initialization."""

from __future__ import annotations

import math
from typing import Any

from suite.data.marius.reader import Reader
from suite.errors import ConfigError


def optimizer_section(reader: Reader, name: str, allowed: tuple[str, ...]) -> tuple[str, dict[str, float]]:
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
        reader = Reader(layer, f"{path}[{index}]", source)
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


def encoder_section(model: Reader, spec: dict, num_nodes: int | None) -> dict:
    """``model.encoder``: its layers and neighbour sampling -> the spec's model, sampler and evaluation fanouts."""
    encoder = model.section("encoder")
    stages = encoder.get("layers")
    if not isinstance(stages, list) or not stages:
        raise encoder.fail("layers", "expected a list of stages (lists of layers)")
    target = spec["model"]
    gnn: list[tuple[str, Reader, dict]] = []
    input_layer = None
    for s, stage in enumerate(stages):
        if not isinstance(stage, list) or len(stage) != 1:
            raise encoder.fail(f"layers[{s}]", "expected one layer per stage (parallel layers are not supported)")
        layer = Reader(stage[0], f"{encoder.where('layers')}[{s}][0]", model.source)
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


def _layer(layer: Reader, position: int, target: dict, num_nodes: int | None,
           gnn: list[tuple[str, Reader, dict]]) -> str:
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


def _embedding_init_scale(init: Reader, init_type: str, init_options: Reader, num_nodes: int | None,
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


def _gnn_layers(encoder: Reader, gnn: list[tuple[str, Reader, dict]], input_layer: str, target: dict) -> None:
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


def _gat_options(options: Reader, target: dict) -> None:
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


def _neighbor_sampling(model: Reader, encoder: Reader, layers: int, spec: dict) -> None:
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
