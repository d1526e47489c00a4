"""One run of any registered system on a test store, recorded under a folder (the runner's bookkeeping left out)."""

from __future__ import annotations

from pathlib import Path

import torch

from suite.config import RunSpec
from suite.graph import GraphStore
from suite.recorder import Recorder
from suite.registry import SYSTEMS
from systems.base import RunOutcome


def run_system(spec: RunSpec, store: GraphStore, out: Path) -> RunOutcome:
    """Train ``spec.system.name`` on ``store`` on the CPU, recording into ``out``; the run's outcome."""
    recorder = Recorder(out, spec)
    try:
        return SYSTEMS.get(spec.system.name)(spec, store, torch.device("cpu"), recorder).run()
    finally:
        recorder.close()


__all__ = ["run_system"]
