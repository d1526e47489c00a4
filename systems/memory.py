"""Peak-memory estimates of the built-in systems (the ``memory_estimates`` plugin table, read by
:mod:`suite.memory`): pure functions of the run spec, the store's counts and degrees, and the memory the process
holds already (``runtime_bytes``: interpreter and libraries).

What each part counts (bytes; float32 rows, int64 ids, as the systems hold them):

- **store pages**: the store files a system reads through its copy-on-write memory maps stay resident (file-backed)
  while the store is open; they count in the resident set like the copies made from them.
- **features / graph / labels**: the copies a system makes (features as float32, the CSR of the sampling direction
  as int64 ``indptr`` and ``indices``).
- **buffer** (disk): ``frames x max_rows`` rows of features (node classification) or of ``[embedding | Adagrad
  state]`` (link prediction), and the in-buffer CSR of the held buckets (two while the next state is prepared).
- **embeddings** (link prediction in memory): the learnable table and its Adagrad state.
- **batch**: the sampled neighbourhood of a batch (node counts from the expected sample per hop, deduplicated
  within the graph: :func:`hop_sizes`), its gathered input rows and the encoder's activations (messages per edge,
  aggregates and layer outputs), twice in training (the gradients); link prediction adds the negatives' scores.
  An evaluation batch holds one layer at a time; link prediction's ranking holds a bounded block of scores (or of
  sampled candidates' rows) and the filter of known triples.
- **first use**: what the process adds on its first batches beyond the data (compiled kernels, torch's kernels,
  allocator arenas, modules imported late): :data:`FIRST_USE_BYTES`, calibrated on the 300-node store.

- **partition** (disk, a setup phase: the store not yet partitioned): partitioning runs before the run holds its
  data, so its peak is the runtime plus the input store's pages (every file is read through its memory map), the
  node order and its inverse with the pass's per-node arrays, and the largest out-of-core pass: one in-memory sort
  of edges (:data:`PARTITION_BYTES_PER_SORTED_EDGE`) or a chunk of feature rows being permuted
  (:data:`PERMUTE_BYTES_PER_CHUNK_BYTE`), with the sizes fitted to the memory available as the disk system fits
  them (so this part alone reads the machine's memory, as the run will).

Not modelled: the PyG system's own loader (estimated as the in-memory system), data-parallel ranks (one process
each), CUDA memory.

The estimate is a model, not a bound: it is checked against measured peak RSS by
``experiments/measure/memory_estimate.py``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from suite.config import RunSpec, validate_system_options
from suite.data import GraphStore
from suite.memory import FIRST_USE, RUNTIME, MemoryEstimate, format_bytes
from systems.models.sparse_aggregation import uses_sparse_product

FLOAT, LONG = 4, 8
MiB = 1 << 20

FIRST_USE_BYTES = {("in_memory", "node_classification"): 65 * MiB, ("in_memory", "link_prediction"): 145 * MiB,
                   ("disk", "node_classification"): 70 * MiB, ("disk", "link_prediction"): 145 * MiB}
"""Resident memory a run adds on first use beyond its data (numba-compiled kernels, torch's kernels, allocator
arenas, modules imported on first use), by ``(system, task)`` (``in_memory`` also for the pipelined and PyG
systems): the peak RSS of runs on the ``tiny`` store (300 nodes) minus their estimate without it, rounded to
5 MiB (``experiments/measure/memory_estimate.py``, its calibration cases), measured with the runs' mmap threshold
fixed (:func:`suite.memory.bound_allocator`; with glibc's rising threshold they were 130, 230, 135 and 230 MiB)."""


def first_use(system: str, task: str) -> int:
    """:data:`FIRST_USE_BYTES` of ``system`` (the disk system's, or the in-memory one's) for ``task``."""
    return FIRST_USE_BYTES[("disk" if system == "disk" else "in_memory", task)]


FILTER_BYTES_PER_TRIPLE = 3 * LONG + 2 * 2 * LONG + LONG
"""The filter of filtered ranking (``suite.metrics.TripleFilter``): the concatenated ``(src, rel, dst)`` int64 copy,
two groups (tails by ``(src, rel)``, heads by ``(dst, rel)``) of an int64 key and member each, and a sort's
permutation."""

ALL_ENTITY_SCORE_COPIES = 4
"""Ranking against every entity holds a batch's score matrix, its comparisons and the scorer's temporaries: the
growth of the resident set during FB15k-237's filtered ranking (DistMult, batches of 1,000 queries by 14,541
entities, one thread, after a warm-up pass) was 3.2 to 3.8 score matrices in three measurements (it was 3 here
before, which underestimated the grids' link-prediction runs by a median 19 %)."""

PARTITION_BYTES_PER_SORTED_EDGE = 75
"""Partitioning's largest pass sorts one bin of bucket edges in memory (``(src, rel, dst)`` int64 rows, their
bucket ids, the sort's order and the sorted copies): the bucket pass added 195, 392 and 703 MiB of anonymous memory
for 2.8M, 5.6M and 11.2M edges (73, 73, 66 B an edge) on papers-like-s stores of 100,000 to 400,000 nodes, more
than the CSR rebuild before it (61 and 41 B an edge) or a streamed chunk (the scatter writes a one-bin chunk as it
comes). :mod:`suite.data.out_of_core` sizes the passes under a memory limit with more conservative costs (160 B a
streamed edge, 128 B a sorted one)."""

INPUT_PAGES = "input store pages (read whole)"
"""The partition phase's part for the input store's file pages: in the resident set while mapped, but reclaimable
(:attr:`suite.memory.MemoryEstimate.reclaimable`): under a memory limit the kernel drops them, so a run is not
refused for them."""

PERMUTE_BYTES_PER_CHUNK_BYTE = 2
"""Partitioning permutes feature rows in chunks of ``chunk_bytes``: the rows read and their gathered copy (the
pass added 133 to 141 MiB of anonymous memory with 64 MiB chunks on papers-like-s stores of 100,000 to 400,000
nodes)."""

AUTOGRAD_FACTOR = 2.0
"""Training keeps a batch's activations for the backward pass and allocates their gradients: twice the forward."""


# ---------------------------------------------------------------------------------------------- store arithmetic
def shape(store: GraphStore, key: str) -> tuple[int, ...]:
    """The shape of the store's array ``key`` as its metadata records it (() when absent)."""
    entry = store.metadata.get("files", {}).get(key)
    return tuple(entry["shape"]) if entry else ()


def file_bytes(store: GraphStore, keys: Sequence[str]) -> int:
    """Bytes of the store files ``keys`` (those present), as their metadata records them."""
    files = store.metadata.get("files", {})
    return int(sum(files[key]["bytes"] for key in keys if key in files))


def csr_keys(direction: str) -> list[str]:
    """The store files of the CSR(s) a sampling ``direction`` reads."""
    sides = ("in", "out") if direction == "both" else (direction,)
    return [f"{side}_{part}" for side in sides for part in ("indptr", "indices")]


def degrees(store: GraphStore, direction: str) -> np.ndarray:
    """Every node's neighbour count in ``direction`` (from the CSR offsets)."""
    sides = ("in", "out") if direction == "both" else (direction,)
    return sum(np.diff(np.asarray(store.csr(side).indptr.numpy(), dtype=np.int64)) for side in sides)


def distinct(draws: float, population: int) -> float:
    """Expected distinct nodes among ``draws`` uniform draws from ``population`` (``n (1 - e^(-k/n))``)."""
    return population * -math.expm1(-draws / population) if population else 0.0


def hop_sizes(roots: float, fanouts: Sequence[int], degree: np.ndarray) -> list[tuple[float, float]]:
    """``(nodes, edges)`` of every hop from the roots outwards, in a graph with these node ``degree``\\ s.

    The roots are uniform nodes (each draws ``min(degree, fanout)`` neighbours, all of them for -1); a node
    reached later was reached along an edge, so in proportion to its degree (it draws the degree-weighted mean).
    The draws of a hop hit node ``v`` with probability ``degree[v] / sum(degree)``: their distinct count is
    ``sum(1 - exp(-draws * p_v))``, of which those outside the hop's frontier are new."""
    degree = np.asarray(degree, dtype=np.float64)
    population, total = len(degree), float(degree.sum())
    if population == 0 or total == 0:
        return [(float(roots), 0.0)] * (len(fanouts) + 1)
    weight = degree / total
    sizes, nodes = [(float(roots), 0.0)], min(float(roots), population)
    for hop, fanout in enumerate(fanouts):
        taken = degree if fanout < 0 else np.minimum(degree, fanout)
        per_node = float(taken.mean()) if hop == 0 else float((degree * taken).sum() / total)
        draws = nodes * per_node
        reached = float(-np.expm1(-draws * weight).sum())
        nodes = min(population, nodes + reached * (1 - nodes / population))
        sizes.append((nodes, draws))
    return sizes


def layer_bytes(sizes: list[tuple[float, float]], in_dim: int, hidden_dim: int, out_dim: int,
                heads: int = 1, aggregation: str | None = None) -> list[float]:
    """Forward activations of every layer of a message-passing encoder over one sample (``sizes`` from
    :func:`hop_sizes`), outermost first: the messages (one row of the layer's input width per edge and head; where
    the suite's GraphSAGE, ``aggregation`` given, computes the layer's aggregation as a sparse-dense product,
    :func:`systems.models.sparse_aggregation.uses_sparse_product`, the sparse adjacency instead: its two ids and
    count per edge, built and coalesced), the aggregates, three output-wide tensors per destination (the two linear
    maps and the activation) and the sample's ``edge_index`` (two ids per edge); the layer's input rows are not
    counted."""
    layers = len(sizes) - 1
    per_layer = []
    for layer in range(layers):
        hop = layers - layer  # the layer consuming hop ``hop``'s nodes
        dst_nodes, edges = sizes[hop - 1][0], sizes[hop][1]
        width_in = in_dim if layer == 0 else hidden_dim
        width_out = out_dim if layer == layers - 1 else hidden_dim
        sparse = aggregation is not None and uses_sparse_product(aggregation, width_in)
        per_edge = 2 * (2 * LONG + FLOAT) if sparse else FLOAT * width_in * heads
        per_layer.append(edges * per_edge + FLOAT * (dst_nodes * width_in + 3 * dst_nodes * width_out)
                         + 2 * LONG * edges)
    return per_layer


def sparse_aggregation(spec: RunSpec) -> str | None:
    """The aggregation of the suite's GraphSAGE, which aggregates wide rows as a sparse-dense product
    (:mod:`systems.models.sparse_aggregation`); None for every other encoder, and for PyG's own model (the ``pyg``
    system), which gather a row per edge."""
    return spec.model.aggregation if spec.model.encoder == "graphsage" and spec.system.name != "pyg" else None


def sample_bytes(spec: RunSpec, roots: float, fanouts: Sequence[int], degree: np.ndarray | None, in_dim: int,
                 out_dim: int, training: bool) -> dict[str, int]:
    """A batch's gathered input rows and encoder activations, its neighbourhood drawn from a graph of these node
    ``degree``\\ s (None, or no ``fanouts``: the encoder reads the roots only).

    Training keeps every layer's activations for the backward pass and allocates their gradients
    (:data:`AUTOGRAD_FACTOR` times the sum over layers, inputs included); an evaluation (no gradients) holds one
    layer's at a time, with its input rows (the largest layer)."""
    if degree is None or spec.model.encoder in ("mlp", "shallow") or not fanouts:
        sizes = [(float(roots), 0.0)]
    else:
        sizes = hop_sizes(roots, fanouts, degree)
    inputs = sizes[-1][0] * in_dim * FLOAT
    heads = spec.model.heads if spec.model.encoder == "gat" else 1
    if len(sizes) == 1:
        layers = [roots * (spec.model.hidden_dim + out_dim) * FLOAT]
    else:
        layers = layer_bytes(sizes, in_dim, spec.model.hidden_dim, out_dim, heads, sparse_aggregation(spec))
    if training:
        return {"batch inputs": int(inputs * AUTOGRAD_FACTOR), "activations": int(sum(layers) * AUTOGRAD_FACTOR)}
    hidden_inputs = [sizes[len(sizes) - 1 - layer][0] * spec.model.hidden_dim * FLOAT * (layer > 0)
                     for layer in range(len(layers))]
    return {"batch inputs": int(inputs), "activations": int(max(a + b for a, b in zip(layers, hidden_inputs)))}


def buffer_degrees(degree: np.ndarray, capacity: int, partitions: int) -> np.ndarray:
    """The degrees of a buffer of ``capacity`` of ``partitions`` partitions: a ``capacity / partitions`` share of
    the nodes (every k-th), each keeping that share of its neighbours (the held buckets)."""
    share = capacity / partitions
    return degree[::max(1, round(1 / share))] * share


def uses_graph(spec: RunSpec) -> bool:
    """Whether the encoder reads sampled neighbours."""
    return spec.model.encoder not in ("shallow", "mlp") and bool(spec.model.fanouts)


def largest_split(spec: RunSpec, store: GraphStore) -> int:
    """Edges of the largest evaluated split (``evaluation.splits``)."""
    return max([shape(store, f"{split}_edges")[0] for split in spec.evaluation.splits
                if shape(store, f"{split}_edges")] or [0])


def batch_roots(batch_size: int, store: GraphStore, splits: Sequence[str]) -> int:
    """Roots of the largest node-classification batch: ``batch_size``, or fewer when no split among ``splits``
    has that many nodes (Shchur et al.'s splits train on 20 nodes a class: a batch of 1,024 holds 100 on Coauthor
    Physics)."""
    sizes = [shape(store, f"{split}_nodes")[0] for split in splits if shape(store, f"{split}_nodes")]
    return min(batch_size, max(sizes)) if sizes else batch_size


def num_classes(store: GraphStore) -> int:
    """Output width of node classification."""
    return int(store.num_classes or 1)


# ---------------------------------------------------------------------------------------------- in memory
def _node_classification(spec: RunSpec, store: GraphStore, runtime: int, batches_in_flight: int) -> MemoryEstimate:
    n, d = store.num_nodes, store.feature_dim
    direction = spec.sampler.direction
    keys = ["features", "labels", "train_nodes", "valid_nodes", "test_nodes", *csr_keys(direction)]
    graph = shape(store, csr_keys(direction)[1])[0] if shape(store, csr_keys(direction)[1]) else store.num_edges
    edges = sum(shape(store, k)[0] for k in csr_keys(direction)[1::2]) or graph
    resident = {
        RUNTIME: runtime,
        FIRST_USE: first_use(spec.system.name, "node_classification"),
        "store pages (memory-mapped)": file_bytes(store, keys),
        "features (float32 copy)": n * d * FLOAT,
        "graph (CSR copy)": (n + 1) * LONG + edges * LONG,
        "labels": n * LONG,
    }
    degree = degrees(store, direction) if uses_graph(spec) else None
    train = sample_bytes(spec, batch_roots(spec.training.batch_size, store, ["train"]), spec.model.fanouts, degree,
                         d, num_classes(store), True)
    if batches_in_flight > 1:
        train["batches in flight (inputs)"] = (batches_in_flight - 1) * train["batch inputs"] // 2
    phases = {"train": train}
    if spec.evaluation.splits:
        phases["evaluate"] = sample_bytes(spec, batch_roots(spec.evaluation.batch_size, store, spec.evaluation.splits),
                                          spec.evaluation.fanouts or spec.model.fanouts, degree, d,
                                          num_classes(store), False)
    return MemoryEstimate(resident, phases, suggest=lambda budget: _use_disk(spec, store, runtime, budget))


def _link_prediction(spec: RunSpec, store: GraphStore, runtime: int, batches_in_flight: int) -> MemoryEstimate:
    n = store.num_nodes
    dim = spec.model.embedding_dim
    direction = spec.sampler.direction
    graph = uses_graph(spec)
    split_keys = ["train_edges", "valid_edges", "test_edges"]
    known = sum(shape(store, k)[0] for k in split_keys if shape(store, k))
    in_dim = dim if spec.model.learnable_embeddings else store.feature_dim
    resident = {
        RUNTIME: runtime,
        FIRST_USE: first_use(spec.system.name, "link_prediction"),
        "store pages (memory-mapped)": file_bytes(store, split_keys + (csr_keys(direction) if graph else [])
                                                  + ([] if spec.model.learnable_embeddings else ["features"])),
        "edge splits (int64 copies)": known * 3 * LONG,
    }
    if spec.model.learnable_embeddings:
        resident["embeddings + Adagrad state"] = 2 * n * dim * FLOAT
    else:
        resident["features (float32 copy)"] = n * store.feature_dim * FLOAT
    degree = degrees(store, direction) if graph else None
    if graph:
        edges = sum(shape(store, k)[0] for k in csr_keys(direction)[1::2])
        resident["graph (CSR copy)"] = (n + 1) * LONG + edges * LONG
    phases = {"train": _link_batch(spec, n, degree, in_dim, True)}
    if batches_in_flight > 1:
        phases["train"]["batches in flight"] = (batches_in_flight - 1) * phases["train"]["batch inputs"] // 2
    if spec.evaluation.splits:
        phases["evaluate"] = _link_evaluation(spec, n, known, graph, largest_split(spec, store))
    return MemoryEstimate(resident, phases, suggest=lambda budget: _use_disk(spec, store, runtime, budget))


def _link_batch(spec: RunSpec, population: int, degree: np.ndarray | None, in_dim: int,
                training: bool) -> dict[str, int]:
    """A link-prediction batch: its endpoints and the chunks' shared negatives (their rows, encoded), and the
    scores of every positive against its negatives (both sides; scores, softmax and gradient)."""
    batch, negatives = spec.training.batch_size, spec.training.negatives
    dim = spec.model.embedding_dim
    shared = negatives.num_chunks * negatives.negatives_per_positive * 2
    roots = distinct(2 * batch + shared, population)
    parts = sample_bytes(spec, roots, spec.model.fanouts, degree, in_dim, dim, training)
    parts["scores"] = int(2 * batch * negatives.negatives_per_positive * FLOAT * 3)
    return parts


def _link_evaluation(spec: RunSpec, num_nodes: int, known_triples: int, graph: bool,
                     largest_split: int) -> dict[str, int]:
    """Ranking: the queries of a scoring batch (at most ``evaluation.batch_size`` and the ``largest_split``'s
    edges, and bounded by the ranking's
    score budget, ``systems.tasks.link_prediction._EVAL_SCORE_ELEMENTS``) against every entity (their scores, the
    filtered copy and the comparison) or against ``evaluation.negatives`` sampled ones per query (their gathered
    rows and scores); the filter of known triples (:data:`FILTER_BYTES_PER_TRIPLE`); and all nodes'
    representations for an encoder that reads neighbours."""
    from systems.tasks.link_prediction import _EVAL_SCORE_ELEMENTS

    dim, sampled = spec.model.embedding_dim, spec.evaluation.negatives
    batch = min(spec.evaluation.batch_size, max(1, largest_split))
    if sampled is None:
        rows = max(1, min(batch, _EVAL_SCORE_ELEMENTS // max(num_nodes, 1)))
        parts = {"scores against every entity": rows * num_nodes * FLOAT * ALL_ENTITY_SCORE_COPIES}
    else:
        rows = max(1, min(batch, _EVAL_SCORE_ELEMENTS // (sampled * dim)))
        parts = {"sampled candidates' rows": rows * sampled * dim * FLOAT,
                 "scores against sampled candidates": rows * sampled * FLOAT * 3}
    parts["known-triple filter"] = known_triples * FILTER_BYTES_PER_TRIPLE
    if graph:
        parts["encoded node table"] = num_nodes * dim * FLOAT
    return parts


def in_memory_estimate(spec: RunSpec, store: GraphStore, runtime_bytes: int) -> MemoryEstimate:
    """The in-memory system: the whole store's inputs copied into memory, one batch at a time."""
    variant = _link_prediction if spec.training.task == "link_prediction" else _node_classification
    return variant(spec, store, runtime_bytes, batches_in_flight=1)


def pipelined_estimate(spec: RunSpec, store: GraphStore, runtime_bytes: int) -> MemoryEstimate:
    """The pipelined system: as in memory, plus the batches in flight (at most the staleness bound, at most the
    queues and workers can hold) with their gathered inputs."""
    options = validate_system_options(spec)
    effective = options.effective() if hasattr(options, "effective") else options
    if getattr(effective, "sync", False):
        in_flight = 1
    else:
        queued = (effective.batch_loader_threads + effective.batch_host_queue_size
                  + effective.batch_transfer_threads + effective.batch_device_queue_size + 1)
        in_flight = max(1, min(effective.staleness_bound, queued))
    variant = _link_prediction if spec.training.task == "link_prediction" else _node_classification
    return variant(spec, store, runtime_bytes, batches_in_flight=in_flight)


CACHE_POLICY_STATE = {"none": (0, 0), "static_degree": (0, 0), "lru": (0, LONG), "s3fifo": (LONG, 2 * LONG + 1),
                      "belady": (LONG, 0)}
"""Bytes a feature-cache policy keeps ``(per node of the table, per cache slot)`` (systems/feature_cache/policies.py:
S3-FIFO's ghost stamps per node and ring, frequency and row per slot; LRU's last use per slot; Belady's next use
per node); an unknown policy counts as the largest."""

READ_AMPLIFICATION = 2
"""Bytes an O_DIRECT batch read holds per byte of the rows it misses: extents are aligned to 4 KiB blocks and merged
across gaps (``merge_gap_bytes``), so a batch reads more than its rows (about twice on papers-like-s's 512-byte
rows, systems/feature_cache/direct_io.py), bounded by the table."""


def feature_cache_estimate(spec: RunSpec, store: GraphStore, runtime_bytes: int) -> MemoryEstimate:
    """The feature-cache system: the graph and labels in memory, the feature rows on disk; the cache's slots and
    maps, its policy's state, the batches sampled ahead (ids and blocks; Belady's window) and the batches in flight
    with their gathered rows, and the read buffers of the batch being read (:data:`READ_AMPLIFICATION`)."""
    options = validate_system_options(spec)
    n, d = store.num_nodes, store.feature_dim
    direction = spec.sampler.direction
    dtype = store.metadata.get("dtypes", {}).get("features")
    row_bytes = d * np.dtype(dtype).itemsize if dtype else file_bytes(store, ["features"]) / max(1, n)
    capacity = options.cache_rows(n, max(1, int(row_bytes)))
    per_node, per_slot = CACHE_POLICY_STATE.get(options.policy, max(CACHE_POLICY_STATE.values()))
    edges = sum(shape(store, k)[0] for k in csr_keys(direction)[1::2]) or store.num_edges
    resident = {
        RUNTIME: runtime_bytes,
        FIRST_USE: first_use("in_memory", "node_classification"),
        "store pages (memory-mapped)": file_bytes(store, ["labels", "train_nodes", "valid_nodes", "test_nodes",
                                                          *csr_keys(direction)]),
        "graph (CSR copy)": (n + 1) * LONG + edges * LONG,
        "labels": n * LONG,
        "cache slots (feature rows)": int(capacity * row_bytes),
        "cache maps (row <-> slot)": (n + capacity) * LONG,
        "cache policy state": n * per_node + capacity * per_slot,
    }
    degree = degrees(store, direction) if uses_graph(spec) else None
    roots = batch_roots(spec.training.batch_size, store, ["train"])
    train = sample_bytes(spec, roots, spec.model.fanouts, degree, d, num_classes(store), True)
    sizes = hop_sizes(roots, spec.model.fanouts, degree) if degree is not None else [(float(roots), 0.0)]
    rows, sampled_edges = sizes[-1][0], sum(edges for _, edges in sizes)
    ids = rows * LONG + sampled_edges * 2 * LONG
    ahead = options.lookahead_batches if options.policy == "belady" else 1
    in_flight = options.prefetch_depth if options.prefetch else 1
    miss = 1.0 - capacity / max(1, n)
    train["batches sampled ahead (ids, blocks)"] = int(ahead * ids)
    train["batches in flight (gathered rows)"] = int((in_flight - 1) * rows * d * FLOAT)
    table = file_bytes(store, ["features"])
    # one load worker reads one batch at a time: one batch's aligned read buffers
    train["read buffers (missed rows' extents)"] = int(min(table, rows * miss * row_bytes * READ_AMPLIFICATION))
    phases = {"train": train}
    if spec.evaluation.splits:
        eval_roots = batch_roots(spec.evaluation.batch_size, store, spec.evaluation.splits)
        phases["evaluate"] = sample_bytes(spec, eval_roots, spec.evaluation.fanouts or spec.model.fanouts, degree, d,
                                          num_classes(store), False)
        eval_rows = (hop_sizes(eval_roots, spec.evaluation.fanouts or spec.model.fanouts, degree)[-1][0]
                     if degree is not None else eval_roots)
        phases["evaluate"]["read buffers (missed rows' extents)"] = int(
            min(table, eval_rows * miss * row_bytes * READ_AMPLIFICATION))
    return MemoryEstimate(resident, phases, suggest=lambda budget: _smaller_cache(spec, store, runtime_bytes,
                                                                                  budget))


def _smaller_cache(spec: RunSpec, store: GraphStore, runtime: int, budget: int) -> str:
    """The refusal's hint for the feature-cache system: the largest cache fraction (in steps of 0.05) that fits."""
    for step in range(19, -1, -1):
        fraction = step / 20
        trial = spec.model_copy(update={"system": spec.system.model_copy(update={
            "options": {**dict(spec.system.options), "cache_bytes": None, "cache_fraction": fraction}})})
        if feature_cache_estimate(trial, store, runtime).required_bytes <= budget:
            return f"use a smaller cache (system.options.cache_fraction: {fraction:g})"
    return "even an empty cache would not fit: the graph and the batches alone exceed the budget"


def _use_disk(spec: RunSpec, store: GraphStore, runtime: int, budget: int) -> str:
    """The refusal's hint for a system that holds the whole store: the disk system, with a buffer that fits."""
    if spec.training.task == "link_prediction" and not spec.model.learnable_embeddings:
        return "the disk system trains link prediction only with model.learnable_embeddings: true"
    degree = degrees(store, spec.sampler.direction) if uses_graph(spec) else None
    for partitions in (16, 32, 64, 128):
        disk = spec.model_copy(update={"system": spec.system.model_copy(update={
            "name": "disk", "options": {"num_partitions": partitions, "buffer_capacity": 1}})})
        capacity = _largest_capacity(disk, store, runtime, budget, partitions, degree)
        if capacity:
            return (f"use the disk system (system.name: disk, system.options: {{num_partitions: {partitions}, "
                    f"buffer_capacity: {capacity}}})")
    return "even the disk system with 128 partitions would not fit"


# ---------------------------------------------------------------------------------------------- disk
def disk_estimate(spec: RunSpec, store: GraphStore, runtime_bytes: int) -> MemoryEstimate:
    """The disk system: a buffer of ``frames`` partitions (``c`` plus read-ahead), the in-buffer CSR of the held
    buckets (the current state's and the next one's), per-node maps; evaluation over the whole graph reads its
    CSR (and, for link prediction, the whole embedding table)."""
    degree = degrees(store, spec.sampler.direction) if uses_graph(spec) else None
    return _disk(spec, store, runtime_bytes, degree)


def _disk(spec: RunSpec, store: GraphStore, runtime_bytes: int, degree: np.ndarray | None) -> MemoryEstimate:
    options = validate_system_options(spec)
    p, c, frames = options.num_partitions, options.buffer_capacity, options.frames
    n = store.num_nodes
    max_rows = -(-n // p)
    buffer_rows = frames * max_rows
    directed_edges = store.num_edges * (2 if spec.sampler.direction == "both" else 1)
    held_edges = directed_edges * (c / p) ** 2
    link = spec.training.task == "link_prediction"
    dim = spec.model.embedding_dim
    resident = {
        RUNTIME: runtime_bytes,
        FIRST_USE: first_use("disk", spec.training.task),
        "per-node maps (row, partition, label)": n * LONG * (1 if link else 3),
    }
    if link:
        resident["buffer (embeddings + Adagrad)"] = buffer_rows * 2 * dim * FLOAT
        # write-backs in flight (``max(1, c - 1)``, systems.disk.disk_link_prediction) and the evicted frame's copy
        resident["write-back copies"] = max(2, c) * max_rows * 2 * dim * FLOAT
        resident["in-buffer edges (int64 triples)"] = int(held_edges * 3 * LONG)
    else:
        row_bytes = file_bytes(store, ["features"]) / max(1, n)
        resident["buffer (feature rows)"] = int(buffer_rows * row_bytes)
        resident["labels (pages + copy)"] = file_bytes(store, ["labels"]) + n * LONG
    if degree is not None:  # two CSRs: the current state's and the next one's, prepared ahead
        resident["in-buffer CSR x2"] = int(2 * ((buffer_rows + 1) * LONG + held_edges * 2 * LONG))
    in_buffer = buffer_degrees(degree, c, p) if degree is not None else None
    if link:
        train = _link_batch(spec, c * max_rows, in_buffer, dim, True)
    else:
        train = sample_bytes(spec, batch_roots(spec.training.batch_size, store, ["train"]), spec.model.fanouts,
                             in_buffer, store.feature_dim, num_classes(store), True)
    phases = {"train": train}
    if spec.evaluation.splits:
        phases["evaluate"] = _disk_evaluation(spec, store, degree, link)
    from systems.disk.disk_system import needs_partitioning

    setup = ({"partition": partition_bytes(store, runtime_bytes)}
             if needs_partitioning(store, p, options.order, options.order_seed(spec.seed)) else {})
    return MemoryEstimate(resident, phases, setup=setup, reclaimable=frozenset({INPUT_PAGES}),
                          suggest=lambda budget: _smaller_buffer(spec, store, runtime_bytes, budget, degree))


def partition_bytes(store: GraphStore, runtime_bytes: int) -> dict[str, int]:
    """What partitioning ``store`` holds beyond the runtime (:func:`suite.data.partition.partition_store` as the
    disk system calls it: its default sizes fitted to the memory available, as the run fits them once it holds the
    node order and its inverse)."""
    from suite.data.out_of_core import (MIN_CHUNK_BYTES, MIN_CHUNK_EDGES, MIN_SORTED_EDGES, MemoryBudget,
                                        OutOfCoreSizes, sizes_for)
    from suite.data.partition import DEFAULT_SIZES, RESIDENT_BYTES_PER_NODE
    from suite.errors import MemoryLimitError
    from suite.memory import available_memory

    n = store.num_nodes
    order_and_inverse = n * 2 * LONG
    available = available_memory()
    budget = None if available.bytes is None else MemoryBudget(
        available.bytes, lambda: runtime_bytes + order_and_inverse, available.source)
    try:
        sizes = sizes_for(budget, DEFAULT_SIZES, "partition", RESIDENT_BYTES_PER_NODE * n)
    except MemoryLimitError:  # the run stops there; its estimate holds the smallest sizes
        sizes = OutOfCoreSizes(MIN_CHUNK_EDGES, MIN_SORTED_EDGES, MIN_CHUNK_BYTES)
    edges = max(store.num_edges, shape(store, "train_edges")[0] if shape(store, "train_edges") else 0)
    largest = max(PARTITION_BYTES_PER_SORTED_EDGE * min(edges, sizes.max_bucket_edges),
                  PERMUTE_BYTES_PER_CHUNK_BYTE * min(file_bytes(store, ["features"]), sizes.chunk_bytes))
    return {INPUT_PAGES: file_bytes(store, list(store.metadata.get("files", {}))),
            "node order, its inverse, per-node counts": order_and_inverse + RESIDENT_BYTES_PER_NODE * n,
            "largest pass (one sort of edges, or a chunk of rows)": int(largest)}


def _disk_evaluation(spec: RunSpec, store: GraphStore, degree: np.ndarray | None, link: bool) -> dict[str, int]:
    """What an evaluation adds: over the whole graph, its CSR and, for link prediction, the whole embedding
    table (read from disk) and the ranking; for node classification the evaluation batch and the feature pages it
    touches (read on demand through a memory map)."""
    n = store.num_nodes
    parts: dict[str, int] = {}
    whole_graph = spec.evaluation.graph == "full" or link
    if degree is not None and whole_graph:
        parts["whole-graph CSR"] = (n + 1) * LONG + int(degree.sum()) * LONG
        parts["whole-graph CSR pages"] = file_bytes(store, csr_keys(spec.sampler.direction))
    if link:
        known = sum(shape(store, k)[0] for k in ("train_edges", "valid_edges", "test_edges") if shape(store, k))
        parts["embedding table (read whole)"] = n * 2 * spec.model.embedding_dim * FLOAT
        parts.update(_link_evaluation(spec, n, known, degree is not None, largest_split(spec, store)))
        return parts
    fanouts = spec.evaluation.fanouts or spec.model.fanouts
    options = validate_system_options(spec)
    graph = degree if whole_graph or degree is None else buffer_degrees(degree, options.buffer_capacity,
                                                                         options.num_partitions)
    roots = batch_roots(spec.evaluation.batch_size, store, spec.evaluation.splits)
    parts.update(sample_bytes(spec, roots, fanouts, graph, store.feature_dim, num_classes(store), False))
    if spec.evaluation.graph == "full":
        evaluated = sum(shape(store, f"{split}_nodes")[0] for split in spec.evaluation.splits
                        if shape(store, f"{split}_nodes"))
        sizes = hop_sizes(roots, fanouts, degree) if degree is not None else [(roots, 0.0)]
        touched = distinct(evaluated / roots * sizes[-1][0], n) if evaluated else 0.0
        parts["feature pages read on demand"] = int(file_bytes(store, ["features"]) * touched / max(1, n))
    return parts


def _largest_capacity(spec: RunSpec, store: GraphStore, runtime: int, budget: int, partitions: int,
                      degree: np.ndarray | None) -> int | None:
    """The largest buffer capacity (at most ``partitions``) whose disk estimate fits ``budget``; None if none."""
    options = dict(spec.system.options)
    best = None
    for capacity in range(1, partitions + 1):
        trial = spec.model_copy(update={"system": spec.system.model_copy(update={
            "options": {**options, "num_partitions": partitions, "buffer_capacity": capacity}})})
        if _without_setup(_disk(trial, store, runtime, degree)).required_bytes > budget:
            break
        best = capacity
    return best


def _without_setup(estimate: MemoryEstimate) -> MemoryEstimate:
    """``estimate`` without its setup phases (partitioning, which no buffer capacity changes)."""
    return dataclasses.replace(estimate, setup={})


def _smaller_buffer(spec: RunSpec, store: GraphStore, runtime: int, budget: int, degree: np.ndarray | None) -> str:
    """The refusal's hint for the disk system: the largest buffer capacity that fits (more partitions if none)."""
    options = validate_system_options(spec)
    estimate = _disk(spec, store, runtime, degree)
    if estimate.required_phase == "partition":
        from systems.disk.disk_system import partitioned_store_path

        seed = options.order_seed(spec.seed)
        out = partitioned_store_path(store, options.num_partitions, options.order, seed)
        return (f"partitioning the store inside the run needs {format_bytes(estimate.required_bytes)}: partition it "
                f"beforehand, sized to the memory (gnnsuite datasets partition {store.path} -p "
                f"{options.num_partitions} --order {options.order} --seed {seed} --out {out} --memory-limit SIZE)")
    capacity = _largest_capacity(spec, store, runtime, budget, options.num_partitions, degree)
    if capacity:
        return f"system.options.buffer_capacity: {capacity} would fit (estimated)"
    for partitions in (2 * options.num_partitions, 4 * options.num_partitions):
        capacity = _largest_capacity(spec, store, runtime, budget, partitions, degree)
        if capacity:
            return (f"num_partitions: {partitions} with buffer_capacity: {capacity} would fit (estimated)")
    smallest = spec.model_copy(update={"system": spec.system.model_copy(update={
        "options": {**spec.system.options, "num_partitions": 4 * options.num_partitions, "buffer_capacity": 1}})})
    least = _without_setup(_disk(smallest, store, runtime, degree))
    if least.required_phase == "evaluate":
        return (f"no buffer fits: the evaluation alone needs {format_bytes(least.required_bytes)} (lower "
                f"evaluation.batch_size" + (", or evaluation.graph: buffer" if spec.training.task ==
                                            "node_classification" else "") + ")")
    return (f"no buffer fits: even one of {4 * options.num_partitions} partitions needs "
            f"{format_bytes(least.required_bytes)}")


def pyg_estimate(spec: RunSpec, store: GraphStore, runtime_bytes: int) -> MemoryEstimate:
    """The PyG peer: like the in-memory system (the whole graph and features in memory, one batch at a time)."""
    return in_memory_estimate(spec, store, runtime_bytes)


__all__ = ["AUTOGRAD_FACTOR", "FIRST_USE_BYTES", "PARTITION_BYTES_PER_SORTED_EDGE", "PERMUTE_BYTES_PER_CHUNK_BYTE",
           "batch_roots", "buffer_degrees", "disk_estimate", "distinct", "feature_cache_estimate", "hop_sizes",
           "in_memory_estimate", "layer_bytes", "partition_bytes", "pipelined_estimate", "pyg_estimate",
           "sample_bytes", "sparse_aggregation"]
