"""What the translation knows: Marius's dataset folder names and the table of every Marius config field
(mapped, accepted without effect, or refused), with its Markdown rendering for ``docs/datasets.md``."""

from __future__ import annotations

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
    ("storage.full_graph_evaluation", MAPPED, "node classification: evaluation.graph true -> full, false -> "
                                              "buffer; link prediction: true accepted, false refused"),
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
