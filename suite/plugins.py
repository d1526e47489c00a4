"""Import the built-in plugins (and installed third-party ones) so that the registries are complete.

Third-party packages add plugins by declaring an entry point in the group ``gnnsuite.plugins`` that names a
module; importing it registers its classes (``@SYSTEMS.register("mine")``).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from suite.registry import DATASETS, DECODERS, MACHINES, MODELS, POLICIES, SAMPLERS, SYSTEMS, TASKS

BUILTIN_MODULES = (
    "suite.datasets",
    "suite.cost",
    "systems.sampling",
    "systems.models",
    "systems.tasks",
    "systems.in_memory",
    "systems.disk.policies",
    "systems.pipelined",
    "systems.pyg_baseline",
    "systems.disk.system",
    "systems.disk.node_classification",
    "systems.disk.link_prediction",
)

__all__ = ["DATASETS", "DECODERS", "MACHINES", "MODELS", "POLICIES", "SAMPLERS", "SYSTEMS", "TASKS", "load_plugins"]

_loaded = False


def load_plugins() -> None:
    """Import every built-in plugin module and every ``gnnsuite.plugins`` entry point (once)."""
    global _loaded
    if _loaded:
        return
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    for entry in entry_points(group="gnnsuite.plugins"):
        entry.load()
    _loaded = True


load_plugins()
