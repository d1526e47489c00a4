"""``gnnsuite import-marius``: Marius (MariusGNN) configs, written in Marius's schema, into run specs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from suite.cli import main
from suite.config import load_spec
from suite.errors import ConfigError
from suite import import_marius
from suite.data.marius import FIELD_TABLE, field_table_markdown, translate

REPO = Path(__file__).resolve().parents[3]

# Marius's FB15k-237 DistMult sample (docs/config_interface), as a user shares it
DISTMULT = """
model:
  learning_task: LINK_PREDICTION
  encoder:
    layers:
      - - type: EMBEDDING
          output_dim: 50
          bias: true
          init:
            type: GLOROT_NORMAL
  decoder:
    type: DISTMULT
    options:
      inverse_edges: true
  loss:
    type: SOFTMAX_CE
    options:
      reduction: SUM
  dense_optimizer:
    type: ADAM
    options:
      learning_rate: 0.01
  sparse_optimizer:
    type: ADAGRAD
    options:
      learning_rate: 0.1
storage:
  full_graph_evaluation: true
  device_type: cpu
  dataset:
    dataset_dir: /home/data/datasets/fb15k_237/
    num_edges: 272115
    num_train: 272115
    num_nodes: 14541
    num_relations: 237
    num_valid: 17535
    num_test: 20466
  edges:
    type: DEVICE_MEMORY
    options:
      dtype: int
  embeddings:
    type: DEVICE_MEMORY
    options:
      dtype: float
training:
  batch_size: 1000
  negative_sampling:
    num_chunks: 10
    negatives_per_positive: 10
    degree_fraction: 0
    filtered: false
  num_epochs: 10
  pipeline:
    sync: true
  epochs_per_shuffle: 1
  logs_per_epoch: 10
  resume_training: false
evaluation:
  batch_size: 1000
  negative_sampling:
    filtered: true
  epochs_per_eval: 1
  pipeline:
    sync: true
"""

# a disk-based COMET link-prediction run (MariusGNN's artifact style: GraphSAGE over embeddings, partition buffer)
COMET = """
model:
  random_seed: 8589934597
  learning_task: LP
  encoder:
    train_neighbor_sampling:
      - type: UNIFORM
        options:
          max_neighbors: 20
        use_incoming_nbrs: true
        use_outgoing_nbrs: true
    eval_neighbor_sampling:
      - type: ALL
    layers:
      - - type: EMBEDDING
          output_dim: 32
          init:
            type: NORMAL
            options:
              mean: 0.0
              std: 0.001
      - - type: GNN
          input_dim: 32
          output_dim: 32
          options:
            type: GRAPH_SAGE
            aggregator: MEAN
          activation: NONE
  decoder:
    type: DISTMULT
    options:
      inverse_edges: false
  loss:
    type: SOFTMAX_CE
  dense_optimizer:
    type: ADAGRAD
    options:
      learning_rate: 0.1
storage:
  device_type: cuda
  dataset:
    dataset_dir: datasets/ogbl_wikikg2/
  edges:
    type: FLAT_FILE
  embeddings:
    type: PARTITION_BUFFER
    options:
      dtype: float
      num_partitions: 16
      buffer_capacity: 4
      prefetching: true
      fine_to_coarse_ratio: 2
      num_cache_partitions: 0
      edge_bucket_ordering: COMET
      randomly_assign_edge_buckets: true
  prefetch: true
training:
  batch_size: 5000
  negative_sampling:
    num_chunks: 10
    negatives_per_positive: 500
    degree_fraction: 0.5
  num_epochs: 3
  pipeline:
    sync: false
    staleness_bound: 8
    batch_loader_threads: 4
    compute_threads: 1
evaluation:
  batch_size: 1000
  negative_sampling:
    num_chunks: 1
    negatives_per_positive: 500
    filtered: false
  epochs_per_eval: 3
"""

# papers100M-style node classification: features, 3 GraphSAGE layers, disk features, dispersed ordering
PAPERS = """
model:
  learning_task: NODE_CLASSIFICATION
  encoder:
    train_neighbor_sampling:
      - type: UNIFORM
        options:
          max_neighbors: 30
      - type: UNIFORM
        options:
          max_neighbors: 20
      - type: UNIFORM
        options:
          max_neighbors: 10
    layers:
      - - type: FEATURE
          output_dim: 128
      - - type: GNN
          options:
            type: GRAPH_SAGE
            aggregator: MEAN
          input_dim: 128
          output_dim: 256
          activation: RELU
      - - type: GNN
          options:
            type: GRAPH_SAGE
            aggregator: MEAN
          input_dim: 256
          output_dim: 256
          activation: RELU
      - - type: GNN
          options:
            type: GRAPH_SAGE
            aggregator: MEAN
          input_dim: 256
          output_dim: 172
  decoder:
    type: NODE
  loss:
    type: CROSS_ENTROPY
    options:
      reduction: SUM
  dense_optimizer:
    type: ADAM
    options:
      learning_rate: 0.003
storage:
  device_type: cuda
  dataset:
    dataset_dir: /data/ogbn_papers100m/
    num_nodes: 111059956
    num_classes: 172
  edges:
    type: FLAT_FILE
  features:
    type: PARTITION_BUFFER
    options:
      num_partitions: 32
      buffer_capacity: 8
      node_partition_ordering: DISPERSED
      fine_to_coarse_ratio: 1
training:
  batch_size: 1000
  num_epochs: 10
  pipeline:
    sync: true
evaluation:
  batch_size: 1000
  epochs_per_eval: 1
"""


def translated(text: str, **kwargs) -> dict:
    return translate(yaml.safe_load(text), "marius.yaml", **kwargs)


def test_fb15k237_distmult(tmp_path: Path) -> None:
    (tmp_path / "marius.yaml").write_text(DISTMULT)
    spec = import_marius(tmp_path / "marius.yaml", tmp_path / "spec.yaml")
    assert spec.dataset.name == "fb15k237" and spec.dataset.root == "/home/data/datasets/fb15k_237/"
    assert spec.training.task == "link_prediction" and spec.system.name == "in_memory"
    assert (spec.model.encoder, spec.model.decoder, spec.model.inverse_relations) == ("shallow", "distmult", True)
    assert spec.model.learnable_embeddings and spec.model.embedding_dim == 50
    assert math.isclose(spec.model.embedding_init_scale, math.sqrt(2 / (14541 + 50)))
    assert (spec.training.optimizer, spec.training.learning_rate, spec.training.embedding_learning_rate) == (
        "adam", 0.01, 0.1)
    negatives = spec.training.negatives
    assert (negatives.num_chunks, negatives.negatives_per_positive, negatives.degree_fraction) == (10, 10, 0.0)
    assert (spec.training.batch_size, spec.training.epochs, spec.training.loss) == (1000, 10, "softmax")
    assert spec.evaluation.filtered and spec.evaluation.negatives is None and spec.evaluation.every == 1
    # the written spec loads as any other (and can point at the OpenKE files instead)
    assert load_spec(tmp_path / "spec.yaml") == spec
    assert main(["import-marius", str(tmp_path / "marius.yaml"), "--out", str(tmp_path / "openke.yaml"),
                 "--root", "/work/shared/datasets/fb15k237"]) == 0
    assert load_spec(tmp_path / "openke.yaml").dataset.root == "/work/shared/datasets/fb15k237"


def test_disk_comet_link_prediction() -> None:
    spec = translated(COMET)
    assert spec["seed"] == 8589934597 % 2**32
    assert spec["dataset"] == {"name": "ogbl-wikikg2", "root": "datasets/ogbl_wikikg2/"}
    assert spec["model"] | {} == {**spec["model"], "encoder": "graphsage", "num_layers": 1, "fanouts": [20],
                                  "embedding_dim": 32, "embedding_init_scale": 0.001, "inverse_relations": False}
    assert spec["sampler"] == {"name": "dense", "replace": True, "direction": "both"}
    assert spec["evaluation"]["fanouts"] == [-1] and spec["evaluation"]["negatives"] == 500
    system = spec["system"]
    assert system["name"] == "disk" and system["device"] == "cuda"
    options = system["options"]
    assert (options["policy"], options["num_partitions"], options["buffer_capacity"],
            options["fine_to_coarse_ratio"], options["prefetch"]) == ("comet", 16, 4, 2, True)
    assert options["pipeline"] == {"staleness_bound": 8, "batch_loader_threads": 4, "compute_workers": 1}
    assert spec["training"]["negatives"] == {"num_chunks": 10, "negatives_per_positive": 500,
                                             "degree_fraction": 0.5}
    from suite.config import spec_from_dict

    assert spec_from_dict(spec).system.options["policy"] == "comet"


def test_papers100m_style_node_classification() -> None:
    spec = translated(PAPERS)
    assert spec["training"]["task"] == "node_classification"
    assert spec["dataset"]["name"] == "ogbn-papers100M"
    model = spec["model"]
    assert (model["encoder"], model["num_layers"], model["hidden_dim"], model["learnable_embeddings"]) == (
        "graphsage", 3, 256, False)
    assert model["fanouts"] == [10, 20, 30]  # Marius lists the outermost hop first, the suite last
    assert "decoder" not in model
    assert spec["system"]["name"] == "disk" and spec["system"]["options"]["policy"] == "dispersed"
    assert spec["evaluation"]["graph"] == "full"  # storage.full_graph_evaluation defaults to true
    assert (spec["training"]["optimizer"], spec["training"]["learning_rate"]) == ("adam", 0.003)
    from suite.config import spec_from_dict

    assert spec_from_dict(spec).model.fanouts == (10, 20, 30)


def test_full_graph_evaluation_false_is_in_buffer_evaluation() -> None:
    config = yaml.safe_load(PAPERS)
    config["storage"]["full_graph_evaluation"] = False
    spec = translate(config, "m.yaml")
    assert spec["evaluation"]["graph"] == "buffer"
    from suite.config import spec_from_dict

    assert spec_from_dict(spec).evaluation.graph == "buffer"


def test_gat_heads_and_negatives_all() -> None:
    config = yaml.safe_load(DISTMULT)
    config["model"]["encoder"]["layers"].append([{"type": "GNN", "input_dim": 50, "output_dim": 50,
                                                  "options": {"type": "GAT", "num_heads": 5,
                                                              "average_heads": False}}])
    config["model"]["encoder"]["train_neighbor_sampling"] = [{"type": "ALL", "use_outgoing_nbrs": False}]
    config["training"]["negative_sampling"] = {"negatives_per_positive": -1}
    spec = translate(config, "m.yaml")
    assert (spec["model"]["encoder"], spec["model"]["heads"]) == ("gat", 5)
    assert spec["sampler"]["direction"] == "in" and spec["model"]["fanouts"] == [-1]
    assert spec["training"]["negatives"] == {"mode": "all"}


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("model", "decoder", "options", "use_relation_features"), True,
         "model.decoder.options.use_relation_features: is not supported"),
        (("model", "loss", "type"), "BCE_WITH_LOGITS", "model.loss.type: 'BCE_WITH_LOGITS' is not supported"),
        (("model", "dense_optimizer", "options", "amsgrad"), True, "model.dense_optimizer.options.amsgrad"),
        (("storage", "device_ids"), [0, 1], "storage.device_ids: several devices"),
        (("training", "negative_sampling", "filtered"), True, "training.negative_sampling.filtered: true is not"),
        (("training", "epochs_per_shuffle"), 2, "training.epochs_per_shuffle: only 1"),
        (("training", "checkpoint"), {"interval": 1}, "training.checkpoint: is not supported"),
        (("training", "unknown_knob"), 3, "training.unknown_knob: not a Marius field the suite knows"),
        (("storage", "full_graph_evaluation"), False, "storage.full_graph_evaluation: false is supported for node"),
        (("storage", "dataset", "dataset_dir"), "/data/my_graph", "storage.dataset.dataset_dir: folder 'my_graph'"),
        (("model", "learning_task"), "GRAPH_GENERATION", "model.learning_task: expected LINK_PREDICTION"),
    ],
)
def test_refused_fields_name_themselves(path: tuple, value, expected: str) -> None:
    config = yaml.safe_load(DISTMULT)
    node = config
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(")) as info:
        translate(config, "m.yaml")
    assert str(info.value).startswith("m.yaml: ") and "\n" not in str(info.value)


def test_refused_layouts() -> None:
    config = yaml.safe_load(PAPERS)
    config["model"]["encoder"]["layers"][1][0]["options"]["type"] = "GAT"
    with pytest.raises(ConfigError, match="all GNN layers must have the same type"):
        translate(config, "m.yaml")
    config = yaml.safe_load(PAPERS)
    config["model"]["encoder"]["train_neighbor_sampling"][0] = {"type": "DROPOUT", "options": {"rate": 0.1}}
    with pytest.raises(ConfigError, match=r"train_neighbor_sampling\[0\]\.type: 'DROPOUT'"):
        translate(config, "m.yaml")
    config = yaml.safe_load(PAPERS)
    config["model"]["encoder"]["layers"][1].append(config["model"]["encoder"]["layers"][1][0])
    with pytest.raises(ConfigError, match=r"layers\[1\]: expected one layer per stage"):
        translate(config, "m.yaml")
    config = yaml.safe_load(COMET)
    config["storage"]["embeddings"]["options"]["edge_bucket_ordering"] = "HILBERT"
    with pytest.raises(ConfigError, match="edge_bucket_ordering: 'HILBERT' is not supported"):
        translate(config, "m.yaml")


def test_command_errors_exit_2_and_write_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = yaml.safe_load(DISTMULT)
    config["model"]["decoder"]["type"] = "HOLE"
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(config))
    assert main(["import-marius", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "s.yaml")]) == 2
    assert "model.decoder.type: 'HOLE' is not a link-prediction decoder" in capsys.readouterr().err
    assert not (tmp_path / "s.yaml").exists()


def test_mapping_table_is_documented() -> None:
    docs = (REPO / "docs" / "datasets.md").read_text()
    assert field_table_markdown() in docs
    assert len(FIELD_TABLE) > 50
