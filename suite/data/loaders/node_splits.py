"""Seeded node splits for datasets published without a fixed one (Shchur et al.'s graphs, MUSAE's).

Two protocols, each a frozen object whose :meth:`assign` turns the labels into the ``train_nodes`` /
``valid_nodes`` / ``test_nodes`` index arrays and whose :meth:`describe` is recorded in the store's metadata
(``node_split``):

- :class:`PerClassSplit`: Shchur et al.'s protocol, ``train_per_class`` training and ``valid_per_class``
  validation nodes drawn at random from every class, all other labelled nodes for testing;
- :class:`FractionSplit`: a random permutation of the labelled nodes cut at the given fractions.

Either draws from every labelled node (``component: all``) or from those of the graph's largest connected component
only (``component: largest``: Shchur et al. reduced each graph to it; the other nodes stay in the store, unlabelled
for the split, and since a GNN's messages never cross components, training and testing on the component inside the
whole graph is training and testing on the component alone). The loader passes the labels through
:func:`split_labels` with the graph's edges.

:class:`NodeSplitOptions` is what a user asks for (``datasets prepare --per-class/--node-split/--split-seed/
--split-component``, or a run spec's ``dataset.split``); :func:`split_for` resolves it against a loader's default
protocol.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from suite.errors import ConfigError, DataError
from suite.data.store import NODE_SPLITS


@dataclass(frozen=True)
class PerClassSplit:
    """``train_per_class`` training and ``valid_per_class`` validation nodes per class, the rest test (seeded)."""

    train_per_class: int = 20
    valid_per_class: int = 30
    seed: int = 0
    component: "Component" = "all"

    def assign(self, labels: np.ndarray, where: str) -> dict[str, np.ndarray]:
        """The sorted node ids of each split; DataError naming ``where`` when a class has too few nodes."""
        rng = np.random.default_rng(self.seed)
        needed = self.train_per_class + self.valid_per_class
        parts: dict[str, list[np.ndarray]] = {key: [] for key in NODE_SPLITS}
        for label in np.unique(labels[labels >= 0]):
            members = rng.permutation(np.flatnonzero(labels == label))
            if len(members) < needed:
                raise DataError(f"{where}: class {int(label)} has {len(members)} nodes, fewer than the "
                                f"{self.train_per_class} + {self.valid_per_class} the per-class split draws")
            cuts = np.split(members, [self.train_per_class, needed])
            for key, part in zip(NODE_SPLITS, cuts):
                parts[key].append(part)
        return {key: np.sort(np.concatenate(chosen or [np.empty(0, np.int64)])).astype(np.int64)
                for key, chosen in parts.items()}

    def describe(self) -> dict[str, Any]:
        """The protocol and its parameters, for the store's metadata."""
        return {"protocol": "per_class", "train_per_class": self.train_per_class,
                "valid_per_class": self.valid_per_class, "seed": self.seed, **_component_field(self.component)}


@dataclass(frozen=True)
class FractionSplit:
    """A seeded random permutation of the labelled nodes cut at ``fractions`` (train, valid, test)."""

    fractions: tuple[float, float, float] = (0.6, 0.2, 0.2)
    seed: int = 0
    component: "Component" = "all"

    def assign(self, labels: np.ndarray, where: str) -> dict[str, np.ndarray]:
        """The sorted node ids of each split (sizes rounded down, the remainder to test)."""
        del where
        labelled = np.random.default_rng(self.seed).permutation(np.flatnonzero(labels >= 0))
        num_train = math.floor(self.fractions[0] * len(labelled))
        num_valid = math.floor(self.fractions[1] * len(labelled))
        cuts = np.split(labelled, [num_train, num_train + num_valid])
        return {key: np.sort(part).astype(np.int64) for key, part in zip(NODE_SPLITS, cuts)}

    def describe(self) -> dict[str, Any]:
        """The protocol and its parameters, for the store's metadata."""
        return {"protocol": "fraction", "fractions": list(self.fractions), "seed": self.seed,
                **_component_field(self.component)}


Component = Literal["all", "largest"]
"""The nodes a split draws from: every labelled node, or those of the largest connected component."""
COMPONENTS: tuple[str, ...] = ("all", "largest")


def _component_field(component: str) -> dict[str, str]:
    # stores split from every node keep the metadata they had before the option existed
    return {} if component == "all" else {"component": component}


def largest_component(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> np.ndarray:
    """``(num_nodes,)`` bool: the nodes of the largest (weakly) connected component of the edges ``src -> dst``
    (the one with the smallest node id among equals)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    if num_nodes == 0:
        return np.zeros(0, dtype=bool)
    graph = coo_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(num_nodes, num_nodes))
    _, component = connected_components(graph, directed=True, connection="weak")
    return component == np.argmax(np.bincount(component))


def split_labels(labels: np.ndarray, component: str, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The labels a split of ``component`` draws from: ``labels`` itself (``all``), or a copy with every node
    outside the largest connected component of ``src -> dst`` unlabelled (-1; ``largest``)."""
    if component == "all":
        return labels
    return np.where(largest_component(src, dst, len(labels)), labels, -1)


NodeSplit = PerClassSplit | FractionSplit


@dataclass(frozen=True)
class NodeSplitOptions:
    """The split a user asks for: ``per_class`` (train, valid) or ``fractions`` (train, valid, test), at most one;
    neither keeps the loader's default protocol. ``seed`` seeds the draw either way."""

    seed: int = 0
    per_class: tuple[int, int] | None = None
    fractions: tuple[float, float, float] | None = None
    component: Component = "all"

    def __post_init__(self) -> None:
        if self.component not in COMPONENTS:
            raise ConfigError(f"node split: component must be one of {', '.join(COMPONENTS)}, got {self.component!r}")
        if self.per_class is not None and self.fractions is not None:
            raise ConfigError("node split: give per-class counts or fractions, not both")
        if self.per_class is not None and (len(self.per_class) != 2 or min(self.per_class) < 0):
            raise ConfigError(f"node split: per-class counts must be two non-negative integers train,valid, "
                              f"got {self.per_class}")
        if self.fractions is not None and (len(self.fractions) != 3 or min(self.fractions) < 0
                                           or abs(sum(self.fractions) - 1) > 1e-6):
            raise ConfigError(f"node split: fractions must be three non-negative numbers train,valid,test summing "
                              f"to 1, got {self.fractions}")


def split_for(options: NodeSplitOptions | None, default: Callable[[int], NodeSplit]) -> NodeSplit:
    """The protocol ``options`` ask for, or ``default(seed)`` when they name none."""
    options = options or NodeSplitOptions()
    if options.per_class is not None:
        return PerClassSplit(*options.per_class, seed=options.seed, component=options.component)
    if options.fractions is not None:
        return FractionSplit(options.fractions, seed=options.seed, component=options.component)
    return dataclasses.replace(default(options.seed), component=options.component)


def parse_per_class(text: str, option: str) -> tuple[int, int]:
    """``"20,30"`` -> ``(20, 30)`` (ConfigError naming ``option``)."""
    try:
        values = tuple(int(value) for value in text.split(","))
    except ValueError:
        raise ConfigError(f"{option}: expected two integers train,valid, got {text!r}") from None
    if len(values) != 2 or min(values) < 0:
        raise ConfigError(f"{option}: expected two non-negative integers train,valid, got {text!r}")
    return values[0], values[1]


__all__ = ["COMPONENTS", "Component", "FractionSplit", "NodeSplit", "NodeSplitOptions", "PerClassSplit",
           "largest_component", "parse_per_class", "split_for", "split_labels"]
