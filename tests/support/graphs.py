"""Small graphs built by hand or sampled: sampling graphs from neighbour lists, node-classification stores,
planted partitions, and the tiny typed store of the graph tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from suite.data import GraphStore, create_store
from suite.data.csr import EdgeChunk, write_csrs
from systems.sampling.sampler import SamplingGraph


def graph_from_lists(neighbours: list[list[int]]) -> SamplingGraph:
    """A SamplingGraph whose node ``v`` has exactly the neighbour list ``neighbours[v]`` (in that order)."""
    degrees = torch.tensor([len(row) for row in neighbours], dtype=torch.int64)
    indptr = torch.zeros(len(neighbours) + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(degrees, 0)
    indices = torch.tensor([v for row in neighbours for v in row], dtype=torch.int64)
    return SamplingGraph(indptr, indices)


def in_graph(edge_index: torch.Tensor, num_nodes: int) -> SamplingGraph:
    """The in-neighbour SamplingGraph of ``edge_index`` (``(2, m)`` src, dst): node v's neighbours = sources."""
    src, dst = edge_index
    order = torch.argsort(dst, stable=True)
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    return SamplingGraph(indptr, src[order])


def write_node_store(path: Path, src: np.ndarray, dst: np.ndarray, features: np.ndarray, labels: np.ndarray,
                     splits: dict[str, np.ndarray], *, directed: bool = False, name: str = "test") -> GraphStore:
    """Write a node-classification store (both edge directions added when ``directed`` is False)."""
    num_nodes = len(labels)
    with create_store(path) as writer:
        num_edges = write_csrs(writer, [EdgeChunk(src, dst)], num_nodes, symmetrize=not directed,
                               deduplicate=True, drop_self_loops=True)
        writer.write_array("features", features.astype(np.float32))
        writer.write_array("labels", labels.astype(np.int64))
        for split, nodes in splits.items():
            writer.write_array(f"{split}_nodes", nodes.astype(np.int64))
        writer.finalize(name=name, num_nodes=num_nodes, num_edges=num_edges, directed=directed,
                        num_classes=int(labels.max()) + 1, feature_dim=features.shape[1])
    return GraphStore.open(path)


@dataclass(frozen=True)
class PlantedPartition:
    """A homophilous graph whose labels are the planted communities; features carry a weak class signal."""

    src: np.ndarray
    dst: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    splits: dict[str, np.ndarray]


def planted_partition(num_nodes: int = 600, num_classes: int = 3, degree_in: float = 8.0, degree_out: float = 1.0,
                      feature_dim: int = 16, signal: float = 0.4, seed: int = 0) -> PlantedPartition:
    """Sample a planted-partition graph (expected degrees ``degree_in`` within, ``degree_out`` across classes).

    Features are Gaussian noise plus ``signal`` times a class-specific unit direction, so a node's own features
    predict its class only weakly, while averaging over same-class neighbours predicts it well.
    Splits: 30 % train, 20 % valid, 50 % test.
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, num_classes, num_nodes)
    same = labels[:, None] == labels[None, :]
    size = num_nodes / num_classes
    probability = np.where(same, degree_in / size, degree_out / (num_nodes - size))
    upper = np.triu(rng.random((num_nodes, num_nodes)) < probability, k=1)
    src, dst = np.nonzero(upper)
    centres = np.eye(num_classes, feature_dim)
    features = rng.normal(size=(num_nodes, feature_dim)) + signal * centres[labels] * np.sqrt(feature_dim) / 2
    order = rng.permutation(num_nodes)
    cut_train, cut_valid = int(0.3 * num_nodes), int(0.5 * num_nodes)
    splits = {"train": np.sort(order[:cut_train]), "valid": np.sort(order[cut_train:cut_valid]),
              "test": np.sort(order[cut_valid:])}
    return PlantedPartition(src, dst, features.astype(np.float32), labels, splits)


# 4 nodes, directed edges 0->1, 0->2, 1->2, 2->0, 3->2 with relations 0, 1, 0, 1, 1.
TINY_SRC = np.array([0, 0, 1, 2, 3])
TINY_DST = np.array([1, 2, 2, 0, 2])
TINY_REL = np.array([0, 1, 0, 1, 1])


def write_tiny_store(path: Path, **finalize_overrides) -> GraphStore:
    """Write the tiny typed store with features, labels and splits; return it opened."""
    with create_store(path) as writer:
        num_edges = write_csrs(writer, [EdgeChunk(TINY_SRC, TINY_DST, TINY_REL)], 4, num_relations=2)
        writer.write_array("features", np.arange(12, dtype=np.float32).reshape(4, 3))
        writer.write_array("labels", np.array([0, 1, -1, 1], dtype=np.int64))
        writer.write_array("train_nodes", np.array([0, 1], dtype=np.int64))
        writer.write_array("valid_nodes", np.array([3], dtype=np.int64))
        writer.write_array("test_nodes", np.array([], dtype=np.int64))
        writer.write_array("train_edges", np.stack([TINY_SRC, TINY_REL, TINY_DST], axis=1).astype(np.int64))
        fields = dict(name="tiny-hand", num_nodes=4, num_edges=num_edges, directed=True, num_relations=2,
                      num_classes=2, feature_dim=3, source={"made": "by hand"})
        fields.update(finalize_overrides)
        writer.finalize(**fields)
    return GraphStore.open(path)


__all__ = ["PlantedPartition", "TINY_DST", "TINY_REL", "TINY_SRC", "graph_from_lists", "in_graph", "planted_partition", "write_node_store", "write_tiny_store"]
