"""Runs of the disk system on a test store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from suite.recorder import Recorder
from systems.disk.disk_system import DiskSystem, disk_system


def run(spec, store, out: Path) -> tuple[Any, DiskSystem, Recorder]:
    """Run ``spec`` with the disk system on ``store`` into ``out``; returns ``(outcome, system, recorder)``."""
    recorder = Recorder(out, spec)
    system = disk_system(spec, store, torch.device("cpu"), recorder)
    try:
        outcome = system.run()
    finally:
        recorder.close()
    return outcome, system, recorder


__all__ = ["run"]
