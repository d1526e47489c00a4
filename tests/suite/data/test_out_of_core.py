"""Out-of-core sizes fitted to the memory left (issue 34, item 4): the pure sizing, checked by hand, and import and
partitioning under a budget: smaller chunks and sorts, the same store. A real cgroup limit is
tests/experiments/measure/test_memory_cap.py's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suite.data.loaders.edgelist import IdMap, SortedIdMap, import_edge_list
from suite.data.out_of_core import (MIN_CHUNK_BYTES, SAFETY, MemoryBudget, OutOfCoreSizes, fit_sizes,
                                    minimum_spare_bytes, sizes_for)
from suite.data.partition import partition_store
from suite.data.store import GraphStore
from suite.errors import MemoryLimitError

MiB = 1 << 20
LARGE = OutOfCoreSizes(chunk_edges=1 << 30, max_bucket_edges=1 << 30, chunk_bytes=1 << 40)


def test_sizes_are_half_the_spare_memory_over_each_pass_cost():
    # 256 MiB spare: 128 MiB planned; 160 B a streamed edge, 128 B a sorted edge, 16 B a byte of text
    assert SAFETY == 0.5
    assert fit_sizes(256 * MiB, LARGE, "import") == OutOfCoreSizes(128 * MiB // 160, 1 * MiB, 8 * MiB)
    assert fit_sizes(64 * MiB, LARGE, "import") == OutOfCoreSizes(32 * MiB // 160, 256 << 10, 2 * MiB)


def test_sizes_never_exceed_the_ceiling():
    ceiling = OutOfCoreSizes(chunk_edges=1000, max_bucket_edges=500, chunk_bytes=64 * MiB)
    assert fit_sizes(256 * MiB, ceiling, "import") == OutOfCoreSizes(1000, 500, 8 * MiB)
    assert fit_sizes(1 << 40, ceiling, "import") == ceiling


def test_too_little_memory_is_one_line_naming_the_pass():
    least = minimum_spare_bytes(LARGE)
    assert least == MIN_CHUNK_BYTES * 16 * 2  # a 1 MiB block at 16 B a byte, over the safety half: 32 MiB
    assert fit_sizes(least, LARGE, "partition of s").chunk_bytes == MIN_CHUNK_BYTES
    for spare in (least - 1, 0, -5 * MiB):
        with pytest.raises(MemoryLimitError, match=r"^partition of s: \d+ MiB of memory left, at least 32 MiB"):
            fit_sizes(spare, LARGE, "partition of s")


def test_a_budget_spares_what_is_not_held_nor_reserved():
    held = [100 * MiB]
    budget = MemoryBudget(356 * MiB, lambda: held[0], "--memory-limit")
    assert budget.spare_bytes() == 256 * MiB
    assert budget.spare_bytes(reserved_bytes=192 * MiB) == 64 * MiB
    assert budget.fit(LARGE, "import").chunk_bytes == 8 * MiB
    held[0] = 324 * MiB  # it held more since: the next block is smaller, then none fits
    assert budget.fit(LARGE, "import").chunk_bytes == 1 * MiB
    held[0] = 330 * MiB
    with pytest.raises(MemoryLimitError, match=r"import \(memory: --memory-limit\): 26 MiB of memory left"):
        budget.fit(LARGE, "import")
    assert sizes_for(None, LARGE, "import") == LARGE


@pytest.fixture(scope="module")
def edge_list(tmp_path_factory) -> Path:
    """300,000 random edges among 20,000 ids spread over 0..10^9 (remapped), tab-separated."""
    rng = np.random.default_rng(7)
    ids = rng.choice(10**9, size=20_000, replace=False)
    pairs = ids[rng.integers(0, len(ids), size=(300_000, 2))]
    path = tmp_path_factory.mktemp("edges") / "edges.tsv"
    np.savetxt(path, pairs, fmt="%d", delimiter="\t")
    return path


def _tight(spare_bytes: int) -> MemoryBudget:
    """A budget that always spares ``spare_bytes`` (less what a pass reserves): small chunks, several sorts."""
    return MemoryBudget(1 << 30, lambda: (1 << 30) - spare_bytes, "test")


def test_import_and_partition_under_a_tight_budget_write_the_same_store(edge_list: Path, tmp_path: Path):
    free = import_edge_list(edge_list, tmp_path / "free")
    tight = import_edge_list(edge_list, tmp_path / "tight", memory=_tight(48 * MiB))
    for key in ("train_edges", "out_indptr", "out_indices", "in_indptr", "in_indices"):
        assert np.array_equal(free.array(key), tight.array(key)), key
    ids = [(tmp_path / name / "node_ids.parquet").read_bytes() for name in ("free", "tight")]
    assert ids[0] == ids[1]
    parts = {name: partition_store(free, tmp_path / f"p-{name}", 4, seed=1, memory=memory)
             for name, memory in (("free", None), ("tight", _tight(48 * MiB)))}
    for key in ("bucket_edges", "bucket_edge_offsets", "bucket_crc32", "node_map", "out_indices", "in_indices"):
        assert np.array_equal(parts["free"].array(key), parts["tight"].array(key)), key


def test_partition_refuses_up_front_when_nothing_fits(tmp_path: Path, edge_list: Path):
    store = import_edge_list(edge_list, tmp_path / "s")
    with pytest.raises(MemoryLimitError, match=r"^partition of .*: \d+ MiB of memory left, at least"):
        partition_store(store, tmp_path / "p", 4, memory=_tight(1 * MiB))
    assert not (tmp_path / "p").exists()
    assert GraphStore.open(tmp_path / "s").num_edges == 300_000


def test_the_sorted_id_map_numbers_ids_as_the_pandas_one():
    rng = np.random.default_rng(3)
    batches = [rng.integers(-10**12, 10**12, size=50)[rng.integers(0, 50, size=200)] for _ in range(5)]
    batches.append(np.array([7, 7, -3, 7], np.int64))
    sorted_map, pandas_map = SortedIdMap(), IdMap()
    for batch in batches:
        assert sorted_map.map(batch).tolist() == pandas_map.map(batch).tolist()
    assert sorted_map.size == pandas_map.size
    assert sorted_map.originals().tolist() == pandas_map.originals().tolist()
    assert sorted_map.map(np.array([-3, 7])).tolist() == [sorted_map.size - 1, sorted_map.size - 2]
    assert sorted_map.lookup(np.array([5, -3, 10**13])).tolist() == [-1, sorted_map.size - 1, -1]
    assert sorted_map.lookup(np.array(["a"])).tolist() == [-1]
