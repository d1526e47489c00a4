"""Fixtures of the system tests: a planted-partition store, the synthetic ``tiny`` link-prediction store, one
intra-op thread. Their graph builders are in :mod:`tests.support.graphs`."""

from __future__ import annotations

import pytest
import torch

from suite.data import GraphStore
from suite.data.synthetic import PRESETS, generate
from tests.support.graphs import planted_partition, write_node_store


@pytest.fixture(scope="module")
def easy_store(tmp_path_factory) -> GraphStore:
    """A homophilous 3-class planted partition (600 nodes) whose features alone predict the class only weakly."""
    graph = planted_partition(num_nodes=600, num_classes=3, signal=0.4, seed=0)
    return write_node_store(tmp_path_factory.mktemp("pp") / "store", graph.src, graph.dst, graph.features,
                            graph.labels, graph.splits, name="planted")


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors: one intra-op thread (on a shared 2-core machine, OpenMP barriers dominate otherwise); a module
    opts in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> GraphStore:
    """The synthetic ``tiny`` preset: 300 nodes, 3 relation types, held-out valid/test edges."""
    return generate(PRESETS.get("tiny"), tmp_path_factory.mktemp("lp") / "tiny")


@pytest.fixture(scope="module")
def tiny_directed(tmp_path_factory) -> GraphStore:
    """``tiny`` as a directed graph: its CSRs hold each edge once, as the disk system's edge buckets do (an
    undirected store's CSRs hold each edge both ways, its buckets once)."""
    import dataclasses

    config = dataclasses.replace(PRESETS.get("tiny"), directed=True, name="tiny-directed")
    return generate(config, tmp_path_factory.mktemp("lp") / "tiny-directed")
