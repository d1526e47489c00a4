"""Runs of the in-memory system on a test store: a spec with overrides, and a run with its recorder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suite.config import RunSpec
from suite.graph import GraphStore
from suite.recorder import Recorder
from systems.system import RunOutcome
from systems.in_memory import InMemorySystem
from tests.support.systems import run_class


def make_spec(**sections: Any) -> RunSpec:
    """A run spec on the test store; ``sections`` override whole sections or fields (``seed=3``).

    Built with ``RunSpec.model_validate`` rather than ``spec_from_dict``: the name checks of the latter import
    every plugin module of the suite, and these tests need only the in-memory system.
    """
    data: dict[str, Any] = {
        "dataset": {"name": "store"},
        "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 32, "fanouts": (10, 10), "dropout": 0.2},
        "training": {"batch_size": 64, "epochs": 8, "learning_rate": 0.01},
        "evaluation": {"every": 4, "batch_size": 256},
        "seed": 0,
    }
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return RunSpec.model_validate(data)


def run(spec: RunSpec, store: GraphStore, out: Path, progress: bool = False) -> tuple[RunOutcome, Recorder]:
    """A run of the in-memory system: its outcome and recorder."""
    return run_class(InMemorySystem, spec, store, out, progress)


__all__ = ["make_spec", "run"]
