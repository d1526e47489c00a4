"""The systems layer's built-in plugins: importing this module registers every sampler, model, task, system,
policy and disk-system variant in :mod:`suite.registry`.

The harness finds this module through the ``gnnsuite.plugins`` entry point in ``pyproject.toml``
(:func:`suite.plugins.load_plugins`); it never names a system module itself.
"""

from __future__ import annotations

import importlib

PLUGIN_MODULES = (
    "systems.sampling",
    "systems.models",
    "systems.tasks",
    "systems.in_memory",
    "systems.distributed",
    "systems.disk.policies",
    "systems.pipelined",
    "systems.pyg_baseline",
    "systems.disk.disk_system",
    "systems.disk.disk_node_classification",
    "systems.disk.disk_link_prediction",
)

for _module in PLUGIN_MODULES:
    importlib.import_module(_module)
