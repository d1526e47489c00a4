"""Import the plugins so that the registries are complete: the harness's own (datasets, machine profiles), then
every installed ``gnnsuite.plugins`` entry point.

The layers above the harness and third-party packages add plugins by declaring an entry point in the group
``gnnsuite.plugins`` that names a module; importing it registers its classes (``@SYSTEMS.register("mine")``).
This distribution declares ``systems = "systems.plugins"`` (the built-in samplers, models, tasks, systems and
policies), so the harness never imports a system module by name.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from suite.registry import DATASETS, DECODERS, MACHINES, MODELS, POLICIES, SAMPLERS, SYSTEMS, TASKS

PLUGINS_GROUP = "gnnsuite.plugins"
BUILTIN_MODULES = ("suite.datasets", "suite.cost")

__all__ = ["DATASETS", "DECODERS", "MACHINES", "MODELS", "POLICIES", "SAMPLERS", "SYSTEMS", "TASKS", "load_plugins"]

_loaded = False


def load_plugins() -> None:
    """Import the harness's plugin modules and every ``gnnsuite.plugins`` entry point (once), in the order of the
    entry points' names."""
    global _loaded
    if _loaded:
        return
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    for entry in sorted(entry_points(group=PLUGINS_GROUP), key=lambda entry: entry.name):
        entry.load()
    if not SYSTEMS.names():
        raise ImportError("no training system is registered: the gnnsuite.plugins entry points are missing; "
                          "install the suite (pip install -e .) so that its entry points exist")
    _loaded = True


load_plugins()
