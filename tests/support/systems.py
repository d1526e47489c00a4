"""One run of any registered system on a test store, recorded under a folder (the runner's bookkeeping left out)."""

from __future__ import annotations

from pathlib import Path

import torch

from suite.config import RunSpec
from suite.graph import GraphStore
from suite.recorder import Recorder
from suite.registry import SYSTEMS
from systems.system import RunOutcome


def run_class(system_class: type, spec: RunSpec, store: GraphStore, out: Path,
              progress: bool = False) -> tuple[RunOutcome, Recorder]:
    """Train ``system_class`` on ``store`` on the CPU, recording into ``out``; the outcome and the recorder."""
    recorder = Recorder(out, spec)
    try:
        outcome = system_class(spec, store, torch.device("cpu"), recorder).run(progress=progress)
    finally:
        recorder.close()
    return outcome, recorder


def run_system(spec: RunSpec, store: GraphStore, out: Path) -> RunOutcome:
    """Train the system the spec names (``system.name``) on ``store``; the run's outcome."""
    return run_class(SYSTEMS.get(spec.system.name), spec, store, out)[0]


__all__ = ["run_class", "run_system"]
