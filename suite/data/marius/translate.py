"""A Marius config (parsed YAML) -> run-spec data: the task, decoder, losses, dataset, device, system (buffer,
pipeline), training and evaluation sections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suite.data.marius.model_sections import encoder_section, optimizer_section
from suite.data.marius.fields import MARIUS_DATASETS
from suite.data.marius.reader import Reader
from suite.errors import ConfigError


def _buffer(storage: Reader, key: str, task: str, system: dict) -> bool:
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


def _pipeline(reader: Reader) -> tuple[bool, dict]:
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
    top = Reader(config, "<root>", source)
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
    system = _system(storage, task, spec["evaluation"])
    _training(training, task, spec["training"], system)
    spec["system"] = system
    _evaluation(evaluation, task, spec["evaluation"])
    return spec


def _model(model: Reader, spec: dict, data: Reader) -> str:
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
    encoder_section(model, spec, data.number("num_nodes", kind=int))
    decoder = model.section("decoder")
    _decoder(decoder, task, spec["model"])
    _optimizers(model, decoder, task, spec["training"])
    _loss(model.section("loss"), task, spec["training"])
    model.done()
    return task


def _decoder(decoder: Reader, task: str, target: dict) -> None:
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


def _optimizers(model: Reader, decoder: Reader, task: str, target: dict) -> None:
    """``model.dense_optimizer``, ``model.decoder.optimizer`` and ``model.sparse_optimizer``."""
    dense_data = model.get("dense_optimizer") or {"type": "ADAGRAD"}
    optimizer, values = optimizer_section(Reader(dense_data, "model.dense_optimizer", model.source), "dense",
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
        _, sparse_values = optimizer_section(Reader(sparse, "model.sparse_optimizer", model.source), "sparse",
                                      ("ADAGRAD",))
        if "weight_decay" in sparse_values:
            raise ConfigError(f"{model.source}: model.sparse_optimizer.options.weight_decay: is not supported")
        if task == "link_prediction":
            target["embedding_learning_rate"] = float(sparse_values["learning_rate"])


def _loss(loss: Reader, task: str, target: dict) -> None:
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


def _dataset(data: Reader, dataset: str | None, root: str | None) -> dict:
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


def _device(storage: Reader) -> str:
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


def _system(storage: Reader, task: str, evaluation: dict) -> dict:
    """``storage`` -> the spec's ``system``: ``disk`` when a partition buffer or on-disk edges are asked for; and
    ``full_graph_evaluation`` -> ``evaluation.graph`` (node classification)."""
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
    full_graph = bool(storage.get("full_graph_evaluation", True))
    if task == "node_classification":
        evaluation["graph"] = "full" if full_graph else "buffer"
    elif not full_graph:
        raise storage.fail("full_graph_evaluation", "false is supported for node classification only (link "
                                                    "prediction evaluates over the whole graph)")
    for key in ("export_encoded_nodes", "model_dir", "log_level"):
        storage.get(key)
    storage.done()
    return system


def _training(training: Reader, task: str, target: dict, system: dict) -> None:
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


def _evaluation(evaluation: Reader, task: str, target: dict) -> None:
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
