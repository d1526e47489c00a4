"""The plugin tables of the installed packages: ``{kind: {name: "package.module:attribute"}}``, read once.

The layers above the harness and third-party packages add plugins through an entry point of the group
``gnnsuite.plugins`` that names a mapping of tables, one per kind (this distribution:
``systems = "systems.plugins:TABLES"``). A registry declared with ``plugin_table=KIND``
(:class:`suite.registry.Registry`) declares the lines of table ``KIND`` the first time it is looked up, so there is
no loading step to call and knowing a name imports nothing but the table module; a plugin's own module is imported
when its name is first used.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib.metadata import entry_points

PLUGINS_GROUP = "gnnsuite.plugins"


@functools.cache
def plugin_tables() -> Mapping[str, tuple[tuple[str, str], ...]]:
    """Every ``gnnsuite.plugins`` entry point's tables merged by kind, in the order of the entry points' names
    (read once per process).

    Raises:
        ImportError: no entry point is installed (the suite is not installed: ``pip install -e .``).
    """
    merged: dict[str, list[tuple[str, str]]] = {}
    entries = sorted(entry_points(group=PLUGINS_GROUP), key=lambda entry: entry.name)
    if not entries:
        raise ImportError(f"no {PLUGINS_GROUP} entry point is installed; install the suite (pip install -e .) so "
                          "that its entry points exist")
    for entry in entries:
        tables = entry.load()
        if not isinstance(tables, Mapping):
            raise TypeError(f"entry point {entry.name} = {entry.value}: expected a mapping of tables "
                            "{kind: {name: 'module:attribute'}}")
        for kind, table in tables.items():
            merged.setdefault(kind, []).extend(table.items())
    return {kind: tuple(lines) for kind, lines in merged.items()}


def plugin_table(kind: str) -> tuple[tuple[str, str], ...]:
    """The ``(name, "module:attribute")`` lines of table ``kind`` over every installed entry point."""
    return plugin_tables().get(kind, ())


__all__ = ["PLUGINS_GROUP", "plugin_table", "plugin_tables"]
