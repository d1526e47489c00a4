"""Import and partitioning under a real cgroup v1 memory limit (issue 34, item 4), small: an edge list whose import
with the old fixed sizes (one 64 MiB block for the whole 16 MB file, about 15 B a byte of text) would hold more than
the limit leaves beside the interpreter completes inside it, its chunks and sorts fitted to the cgroup's limit, and
writes the same store as an import without a limit. Skipped where no memory cgroup can be made."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from experiments.cgroups import memory_cgroup, memory_cgroup_unavailable
from experiments.measure.memory_cap import gnnsuite, outcome, write_edge_list
from suite.data.store import GraphStore

pytestmark = pytest.mark.skipif(memory_cgroup_unavailable() is not None, reason=str(memory_cgroup_unavailable()))

MiB = 1 << 20
LIMIT = 320 * MiB  # the interpreter with numpy, pandas, pyarrow and torch holds about 185 MiB of it
EDGES, NODES = 1_000_000, 100_000


def test_import_and_partition_complete_under_a_limit_that_fixed_sizes_exceed(tmp_path: Path):
    edges = tmp_path / "edges.tsv"
    assert write_edge_list(edges, EDGES, NODES) == 16 * EDGES
    assert gnnsuite(["datasets", "import", str(edges), "--out", str(tmp_path / "free"), "--quiet"])[0] == 0
    commands = {
        "import": ["datasets", "import", str(edges), "--out", str(tmp_path / "capped"), "--quiet"],
        "partition": ["datasets", "partition", str(tmp_path / "capped"), "-p", "4", "--out",
                      str(tmp_path / "capped-p4"), "--quiet"]}
    for name, argv in commands.items():
        with memory_cgroup(LIMIT, name=f"gnnsuite-test-edgelist-{name}-{tmp_path.name}") as cgroup:
            code, stderr, _, _ = gnnsuite(argv, cgroup.prefix)
            assert outcome(code, stderr)[0] == "completed", (name, code, stderr[-400:])
            assert cgroup.oom_kills == 0 and cgroup.peak_bytes <= LIMIT
    free, capped = GraphStore.open(tmp_path / "free"), GraphStore.open(tmp_path / "capped")
    assert capped.num_edges == EDGES
    for key in ("train_edges", "out_indptr", "out_indices", "in_indices"):
        assert np.array_equal(free.array(key), capped.array(key)), key
    assert GraphStore.open(tmp_path / "capped-p4").array("bucket_edges").shape == (EDGES, 3)
