"""Fixtures of the grid executor tests: the scale-out engines (required, not skipped, where
``GNNSUITE_REQUIRE_ENGINES`` names them, as in CI), a tiny grid, and a 2-node Ray cluster on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import child_env, require_engine


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    """A dataset cache holding the ``tiny`` synthetic store (generated once per module, before any worker
    needs it)."""
    from suite.config import spec_from_dict
    from suite.datasets import open_dataset

    path = tmp_path_factory.mktemp("exec-data")
    open_dataset(spec_from_dict({"dataset": {"name": "synthetic", "preset": "tiny", "cache_dir": str(path)}}).dataset)
    return path


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator:
    """A Ray cluster of two nodes on this machine, each a separate ``ray start`` process tree with 1 CPU and the
    label ``node-name`` (``head``, ``worker1``), in a loopback-only network namespace where it can be made;
    stopped (its processes, by pid) at the end even when a test failed, and checked to leave no process behind."""
    require_engine("ray")
    from suite.ray_cluster import LocalRayCluster

    cluster = LocalRayCluster(extra_env={"PYTHONPATH": child_env()["PYTHONPATH"]})
    try:
        cluster.start_head(num_cpus=1, name="head")
        cluster.add_node("worker1", num_cpus=1)
        yield cluster
    finally:
        left = cluster.stop(grace_s=3)
        assert left == [], f"Ray processes left behind: {left}"
