"""systems.memory: the built-in systems' peak-memory estimates, their arithmetic on the 4-node store by hand, and
what a refusal suggests."""

from __future__ import annotations

import math

import numpy as np
import pytest

from suite.config import spec_from_dict
from suite.memory import FIRST_USE, RUNTIME, MemoryEstimate, estimate_memory
from systems.memory import (AUTOGRAD_FACTOR, FILTER_BYTES_PER_TRIPLE, FIRST_USE_BYTES,
                            PARTITION_BYTES_PER_SORTED_EDGE, PERMUTE_BYTES_PER_CHUNK_BYTE, batch_roots, disk_estimate,
                            distinct, feature_cache_estimate, hop_sizes, in_memory_estimate, pipelined_estimate)
from tests.support.graphs import write_node_store, write_tiny_store


@pytest.fixture
def tiny_store(tmp_path):
    """4 nodes; in-degrees 1, 1, 3, 0 (edges 0->1, 0->2, 1->2, 2->0, 3->2); 3 float32 features; 2 classes."""
    return write_tiny_store(tmp_path / "tiny")


def _spec(store, **sections):
    base = {"dataset": {"name": "store", "root": str(store.path)},
            "model": {"num_layers": 1, "fanouts": [2], "hidden_dim": 8},
            "training": {"batch_size": 2}, "evaluation": {"splits": []}}
    for name, section in sections.items():
        base[name] = {**base.get(name, {}), **section}
    return spec_from_dict(base)


def test_hop_sizes_by_hand():
    # Roots draw the uniform mean of min(deg, 2) = (1 + 1 + 2 + 0) / 4 = 1 neighbour each: 2 draws. A draw hits
    # node v with probability deg_v / 5 = .2, .2, .6, 0: distinct nodes reached 2 (1 - e^-.4) + (1 - e^-1.2);
    # the half of them outside the 2 roots' frontier (2 of 4 nodes) are new.
    sizes = hop_sizes(2, [2], np.array([1, 1, 3, 0]))
    reached = 2 * -math.expm1(-0.4) - math.expm1(-1.2)
    assert sizes[0] == (2.0, 0.0)
    assert sizes[1][1] == pytest.approx(2.0) and sizes[1][0] == pytest.approx(2 + reached / 2)


def test_hop_sizes_never_exceed_the_graph_and_degree_weight_later_hops():
    degree = np.array([100] + [1] * 99)
    sizes = hop_sizes(50, [10, 10, 10], degree)
    assert all(nodes <= 100 for nodes, _ in sizes)
    # hop 1: uniform roots draw (10 + 99) / 100 each; hop 2: nodes reached along edges draw (100*10 + 99) / 199
    assert sizes[1][1] == pytest.approx(50 * 1.09)
    assert sizes[2][1] == pytest.approx(sizes[1][0] * 1099 / 199)


def test_distinct_draws():
    assert distinct(0, 10) == 0 and distinct(1e9, 10) == pytest.approx(10)
    assert distinct(10, 10) == pytest.approx(10 * (1 - math.exp(-1)))


def test_in_memory_estimate_by_hand(tiny_store):
    estimate = in_memory_estimate(_spec(tiny_store), tiny_store, runtime_bytes=1000)
    resident = estimate.resident
    assert resident[RUNTIME] == 1000
    assert resident["first use (kernels, arenas)"] == FIRST_USE_BYTES[("in_memory", "node_classification")]
    assert resident["features (float32 copy)"] == 4 * 3 * 4
    assert resident["graph (CSR copy)"] == 5 * 8 + 5 * 8  # int64 indptr of 4 + 1 entries, 5 in-neighbours
    assert resident["labels"] == 4 * 8
    files = tiny_store.metadata["files"]
    assert resident["store pages (memory-mapped)"] == sum(
        files[key]["bytes"] for key in ("features", "labels", "train_nodes", "valid_nodes", "test_nodes",
                                        "in_indptr", "in_indices"))
    nodes = 2 + (2 * -math.expm1(-0.4) - math.expm1(-1.2)) / 2  # the sample's input rows (test_hop_sizes_by_hand)
    # one layer: 2 draws (messages of width 3), 2 destinations (aggregates of width 3, three outputs of width 2
    # classes), edge_index 2 x 2 int64; training doubles it, and the input rows
    layer = 4 * (2 * 3 + 2 * 3 + 3 * 2 * 2) + 2 * 8 * 2
    train = estimate.phases["train"]
    assert train == {"batch inputs": int(nodes * 3 * 4 * AUTOGRAD_FACTOR), "activations": int(layer * AUTOGRAD_FACTOR)}
    assert set(estimate.phases) == {"train"}  # no evaluation: evaluation.splits is empty
    assert estimate.peak_bytes == sum(resident.values()) + sum(train.values())
    assert estimate.peak_phase == "train"


def test_wide_rows_of_the_suites_graphsage_count_the_sparse_adjacency_not_a_row_per_edge(tiny_store):
    """From SPARSE_MIN_WIDTH features on, the suite's GraphSAGE aggregates a mean or sum as a sparse product: an
    adjacency entry per draw (two int64 ids and a float32 count, built and coalesced) instead of a gathered row."""
    from systems.memory import layer_bytes, sparse_aggregation
    from systems.models.sparse_aggregation import SPARSE_MIN_WIDTH

    sizes = [(2.0, 0.0), (5.0, 4.0)]  # 2 destinations, 4 draws
    rest = 4 * (2 * SPARSE_MIN_WIDTH + 3 * 2 * 2) + 2 * 8 * 4  # aggregates, outputs (2 classes), edge_index
    assert layer_bytes(sizes, SPARSE_MIN_WIDTH, 8, 2, aggregation="mean") == [4 * 2 * (2 * 8 + 4) + rest]
    gathered = [4 * 4 * SPARSE_MIN_WIDTH + rest]  # a row of the input width per draw
    assert layer_bytes(sizes, SPARSE_MIN_WIDTH, 8, 2, aggregation="max") == gathered
    assert layer_bytes(sizes, SPARSE_MIN_WIDTH, 8, 2, aggregation=None) == gathered
    narrow = SPARSE_MIN_WIDTH - 1
    assert layer_bytes(sizes, narrow, 8, 2, aggregation="sum") == [
        4 * 4 * narrow + 4 * (2 * narrow + 3 * 2 * 2) + 2 * 8 * 4]
    assert sparse_aggregation(_spec(tiny_store)) == "mean"
    assert sparse_aggregation(_spec(tiny_store, model={"encoder": "gcn"})) is None
    assert sparse_aggregation(_spec(tiny_store, system={"name": "pyg", "device": "cpu"})) is None  # PyG's own model


def test_evaluation_holds_one_layer_without_gradients(tiny_store):
    spec = _spec(tiny_store, training={"batch_size": 1}, evaluation={"splits": ["valid"], "batch_size": 1})
    estimate = in_memory_estimate(spec, tiny_store, runtime_bytes=0)
    evaluate, train = estimate.phases["evaluate"], estimate.phases["train"]
    assert evaluate["batch inputs"] * AUTOGRAD_FACTOR == pytest.approx(train["batch inputs"], abs=1)
    assert evaluate["activations"] * AUTOGRAD_FACTOR == train["activations"]  # one layer: the sum is the max


def test_a_batch_holds_no_more_roots_than_its_split_has_nodes(tiny_store):
    # 2 training nodes and 1 validation node: batches of 1,000 are batches of 2 and 1
    big = in_memory_estimate(_spec(tiny_store, training={"batch_size": 1000},
                                   evaluation={"splits": ["valid"], "batch_size": 1000}), tiny_store, 0)
    exact = in_memory_estimate(_spec(tiny_store, training={"batch_size": 2},
                                     evaluation={"splits": ["valid"], "batch_size": 1}), tiny_store, 0)
    assert big.phases == exact.phases
    assert batch_roots(1000, tiny_store, ["valid", "test"]) == 1 and batch_roots(1, tiny_store, ["train"]) == 1


def test_registered_by_name_and_read_through_the_harness(tiny_store):
    spec = _spec(tiny_store)
    assert estimate_memory(spec, tiny_store, runtime_bytes=7, warm=False) == in_memory_estimate(spec, tiny_store, 7)


def test_pipelined_counts_the_batches_in_flight(tiny_store):
    sync = pipelined_estimate(_spec(tiny_store, system={"name": "pipelined", "options": {"sync": True}}),
                              tiny_store, 0)
    bounded = pipelined_estimate(_spec(tiny_store, system={"name": "pipelined", "options": {"staleness_bound": 3}}),
                                 tiny_store, 0)
    inputs = sync.phases["train"]["batch inputs"]
    assert "batches in flight (inputs)" not in sync.phases["train"]
    assert bounded.phases["train"]["batches in flight (inputs)"] == 2 * inputs // 2  # 3 in flight: 2 more


def _disk_spec(store, capacity, partitions=4, **more):
    return _spec(store, system={"name": "disk", "options": {"num_partitions": partitions,
                                                          "buffer_capacity": capacity, **more}})


def test_disk_buffer_by_hand(tiny_store):
    estimate = disk_estimate(_disk_spec(tiny_store, 2, read_ahead_frames=1), tiny_store, 0)
    row = tiny_store.metadata["files"]["features"]["bytes"] / 4  # a feature row as the store holds it
    # frames: c = 2 plus 1 read-ahead, of ceil(4 / 4) = 1 row each
    assert estimate.resident["buffer (feature rows)"] == int(3 * 1 * row)
    # the in-buffer CSR of c/p = 1/2 of the partitions holds 1/4 of the 5 edges, built twice (current and next)
    assert estimate.resident["in-buffer CSR x2"] == int(2 * ((3 + 1) * 8 + 5 / 4 * 2 * 8))


def test_disk_counts_partitioning_until_the_partitioned_store_exists(tiny_store):
    from suite.data.partition import RESIDENT_BYTES_PER_NODE, partition_store
    from systems.disk.disk_system import partitioned_store_path

    spec = _disk_spec(tiny_store, 2, order="random")
    estimate = disk_estimate(spec, tiny_store, runtime_bytes=1000)
    files = tiny_store.metadata["files"]
    # every input file read through its map, node order + inverse + 40 B a node, one sort of the 5 edges
    assert estimate.setup["partition"] == {
        "input store pages (read whole)": sum(entry["bytes"] for entry in files.values()),
        "node order, its inverse, per-node counts": 4 * (8 + 8 + RESIDENT_BYTES_PER_NODE),
        "largest pass (one sort of edges, or a chunk of rows)": max(PARTITION_BYTES_PER_SORTED_EDGE * 5,
                                                                     PERMUTE_BYTES_PER_CHUNK_BYTE
                                                                     * files["features"]["bytes"])}
    # a setup phase runs before the buffer and maps exist: its peak is the runtime plus the phase; the input pages
    # are file pages, dropped under a memory limit: in the peak, not in what must fit
    assert estimate.phase_peaks()["partition"] == 1000 + sum(estimate.setup["partition"].values())
    assert estimate.reclaimable == {"input store pages (read whole)"}
    assert estimate.phase_peaks(reclaimable=False)["partition"] == estimate.phase_peaks()["partition"] - sum(
        entry["bytes"] for entry in files.values())
    partition_store(tiny_store, partitioned_store_path(tiny_store, 4, "random", spec.seed), 4, order="random",
                    seed=spec.seed)
    after = disk_estimate(spec, tiny_store, runtime_bytes=1000)
    assert after.setup == {} and after.resident == estimate.resident and after.phases == estimate.phases


def test_a_disk_run_whose_partitioning_is_the_peak_is_told_to_partition_first(tmp_path, monkeypatch):
    # 40 nodes, every ordered pair an edge (1,560), one feature: sorting the edges needs more than a small batch
    src, dst = np.nonzero(~np.eye(40, dtype=bool))
    dense = write_node_store(tmp_path / "dense", src, dst, np.ones((40, 1)), np.arange(40) % 2,
                             {"train": np.arange(4)}, directed=True)
    monkeypatch.setitem(FIRST_USE_BYTES, ("disk", "node_classification"), 0)
    spec = _disk_spec(dense, 1, order="random")
    estimate = disk_estimate(spec, dense, 0)
    assert estimate.required_phase == "partition"
    hint = estimate.suggest(estimate.required_bytes - 1)
    assert hint.startswith("partitioning the store inside the run needs ")
    assert f"gnnsuite datasets partition {dense.path} -p 4 --order random --seed {spec.seed} --out " in hint


def test_disk_estimate_grows_with_the_buffer_and_suggests_one_that_fits(tiny_store):
    peaks = [disk_estimate(_disk_spec(tiny_store, c), tiny_store, 0).peak_bytes for c in (1, 2, 4)]
    assert peaks[0] < peaks[1] < peaks[2]
    large = disk_estimate(_disk_spec(tiny_store, 4), tiny_store, 0)
    assert large.suggest(peaks[1]) == "system.options.buffer_capacity: 2 would fit (estimated)"
    assert large.suggest(100).startswith("no buffer fits: even one of 16 partitions needs ")


def test_in_memory_refusal_suggests_the_disk_system(tiny_store):
    estimate = in_memory_estimate(_spec(tiny_store), tiny_store, 0)
    hint = estimate.suggest(estimate.peak_bytes * 10)
    assert hint.startswith("use the disk system (system.name: disk, system.options: {num_partitions: 16")
    assert "would not fit" in estimate.suggest(10)


def test_link_prediction_counts_embeddings_and_ranking(tiny_store):
    spec = _spec(tiny_store, model={"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": "distmult",
                                    "embedding_dim": 4, "learnable_embeddings": True},
                 training={"task": "link_prediction", "batch_size": 2,
                           "negatives": {"num_chunks": 1, "negatives_per_positive": 3}},
                 evaluation={"splits": ["valid"], "batch_size": 2})
    estimate = in_memory_estimate(spec, tiny_store, 0)
    assert estimate.resident["embeddings + Adagrad state"] == 2 * 4 * 4 * 4
    assert estimate.resident["edge splits (int64 copies)"] == 5 * 3 * 8  # 5 train edges, no valid/test file
    assert estimate.phases["train"]["scores"] == 2 * 2 * 3 * 4 * 3
    evaluate = estimate.phases["evaluate"]
    # the store has no valid edges: a scoring block of 1 query (at most the split's edges) x 4 entities, float32,
    # 4 copies (the matrix, its comparisons, the scorer's temporaries: measured)
    assert evaluate["scores against every entity"] == 1 * 4 * 4 * 4
    assert evaluate["known-triple filter"] == 5 * FILTER_BYTES_PER_TRIPLE
    sampled = in_memory_estimate(spec.model_copy(update={"evaluation": spec.evaluation.model_copy(
        update={"negatives": 3})}), tiny_store, 0).phases["evaluate"]
    assert sampled["sampled candidates' rows"] == 1 * 3 * 4 * 4  # 1 query x 3 candidates x 4 wide
    assert isinstance(estimate, MemoryEstimate)


def test_feature_cache_counts_its_slots_and_suggests_a_cache_that_fits(tiny_store):
    def estimate(fraction, policy="s3fifo"):
        spec = _spec(tiny_store, system={"name": "feature_cache",
                                         "options": {"cache_fraction": fraction, "policy": policy}})
        return feature_cache_estimate(spec, tiny_store, runtime_bytes=0)

    row_bytes = 3 * 4  # 3 float32 features
    assert estimate(0.5).resident["cache slots (feature rows)"] == 2 * row_bytes  # 2 of 4 rows
    assert estimate(0.0).resident["cache slots (feature rows)"] == 0
    # S3-FIFO keeps a ghost stamp per node and 17 bytes per slot; Belady a next use per node; LRU 8 bytes per slot
    assert estimate(0.5).resident["cache policy state"] == 4 * 8 + 2 * 17
    assert estimate(0.5, "belady").resident["cache policy state"] == 4 * 8
    assert estimate(0.5, "lru").resident["cache policy state"] == 2 * 8
    assert "features (float32 copy)" not in estimate(0.5).resident  # the rows stay on disk
    full, empty = estimate(1.0), estimate(0.0)
    budget = (full.peak_bytes + empty.peak_bytes) // 2
    hint = full.suggest(budget)
    assert "cache_fraction" in hint
    fraction = float(hint.split("cache_fraction: ")[1].rstrip(")"))
    assert 0 <= fraction < 1 and estimate(fraction).peak_bytes <= budget
    assert "not fit" in full.suggest(empty.peak_bytes - 1)
    assert estimate_memory(_spec(tiny_store, system={"name": "feature_cache"}), tiny_store, 0).peak_bytes > 0


def test_a_warm_process_holds_the_first_use_in_its_runtime(tiny_store):
    spec = _spec(tiny_store)
    cold = estimate_memory(spec, tiny_store, runtime_bytes=100, warm=False)
    warm = estimate_memory(spec, tiny_store, runtime_bytes=100, warm=True)
    assert FIRST_USE in cold.resident and FIRST_USE not in warm.resident
    assert cold.peak_bytes - warm.peak_bytes == FIRST_USE_BYTES[("in_memory", "node_classification")]
