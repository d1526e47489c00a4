"""Registries of plugins by name: a new plugin is one table line or one registered object, never an edit of the
code using it.

Example::

    SYSTEMS = Registry("system", plugin_table="systems")   # filled from the plugin tables on first lookup
    SYSTEMS.get("disk")  # -> imports systems.disk.disk_system, returns DiskSystem; an unknown name raises ConfigError
    "disk" in SYSTEMS    # True, and imports nothing

    PRESETS = Registry("preset")                            # filled by its own module
    PRESETS.register("tiny", SyntheticConfig(...))
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

from suite.errors import ConfigError
from suite.plugin_tables import plugin_table

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object map with one-line errors for unknown names, filled eagerly or lazily.

    Eager: ``register(name, obj)`` (or as a decorator). Lazy: ``declare(name, "package.module:attribute")`` or a
    whole table with ``declare_table``; the module is imported the first time ``get(name)`` asks for it, so that
    knowing a name (``names()``, ``in``) imports nothing.

    A registry with a ``plugin_table`` or a ``filled_by`` module fills itself on its first use (any lookup or
    registration), so no caller has a loading step to remember.

    Args:
        kind: what the registry holds (``"system"``, ``"preset"``...), used in error messages.
        table: lazy entries ``{name: "module:attribute"}`` to declare at construction.
        plugin_table: the kind of plugin table (:func:`suite.plugin_tables.plugin_table`: ``"systems"``,
            ``"samplers"``...) whose lines are declared on first use.
        filled_by: a module that registers this registry's entries when imported, imported on first use.
    """

    def __init__(self, kind: str, table: Mapping[str, str] | None = None, *, plugin_table: str | None = None,
                 filled_by: str | None = None):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._targets: dict[str, str] = {}
        self._order: list[str] = []
        self._plugin_table = plugin_table
        self._filled_by = filled_by
        self._filled = plugin_table is None and filled_by is None
        if table:
            self.declare_table(table)

    def _fill(self) -> None:
        """Declare the plugin table's lines and import the ``filled_by`` module, once (before the first use)."""
        if self._filled:
            return
        self._filled = True  # first: the filling module registers through this registry
        try:
            if self._plugin_table is not None:
                self._declare_lines(plugin_table(self._plugin_table))
            if self._filled_by is not None:
                importlib.import_module(self._filled_by)
        except BaseException:
            self._filled = False  # the next use reports the same error rather than an empty registry
            raise

    def register(self, name: str, item: T | None = None) -> Callable[[T], T] | T:
        """Register ``item`` under ``name``; without ``item``, return a decorator that does."""
        self._fill()
        if item is not None:
            self._add(name, item)
            return item

        def decorator(obj: T) -> T:
            self._add(name, obj)
            return obj

        return decorator

    def declare(self, name: str, target: str) -> None:
        """Declare ``name`` as the attribute ``target`` (``"package.module:attribute"``), imported on first use."""
        module, _, attribute = target.partition(":")
        if not module or not attribute:
            raise ValueError(f"{self.kind} {name!r}: target {target!r} is not 'package.module:attribute'")
        self._fill()
        self._check_new(name)
        self._targets[name] = target
        self._order.append(name)

    def declare_table(self, table: Mapping[str, str]) -> None:
        """Declare every ``name: target`` of ``table`` (see :meth:`declare`)."""
        self._declare_lines(table.items())

    def _declare_lines(self, lines: Iterable[tuple[str, str]]) -> None:
        for name, target in lines:
            self.declare(name, target)

    def _check_new(self, name: str) -> None:
        if name in self._items or name in self._targets:
            raise ValueError(f"{self.kind} {name!r} is already registered")

    def _add(self, name: str, item: T) -> None:
        self._check_new(name)
        self._items[name] = item
        self._order.append(name)

    def target(self, name: str) -> str | None:
        """Where a lazily declared ``name`` lives (``"module:attribute"``); None for an eager registration."""
        self._fill()
        return self._targets.get(name)

    def get(self, name: str) -> T:
        """The object registered as ``name`` (importing its module if it was declared lazily); raises
        :class:`ConfigError` naming the known ones."""
        self._fill()
        if name in self._items:
            return self._items[name]
        if name in self._targets:
            return self._resolve(name)
        known = ", ".join(self.names()) or "none"
        raise ConfigError(f"unknown {self.kind} {name!r} (known: {known})")

    def _resolve(self, name: str) -> T:
        module, _, attribute = self._targets[name].partition(":")
        item = importlib.import_module(module)
        for part in attribute.split("."):
            item = getattr(item, part)
        self._items[name] = item
        return item

    def in_order(self) -> list[T]:
        """The registered objects in registration (declaration) order; imports what is still lazy."""
        self._fill()
        return [self.get(name) for name in self._order]

    def names(self) -> list[str]:
        """Registered names, sorted (imports no plugin module)."""
        self._fill()
        return sorted(self._order)

    def names_in_order(self) -> list[str]:
        """Registered names in registration (declaration) order (imports no plugin module)."""
        self._fill()
        return list(self._order)

    def __contains__(self, name: object) -> bool:
        self._fill()
        return name in self._items or name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._fill()
        return len(self._order)


# The suite's plugin registries, each filled on first use from its plugin table (see :mod:`suite.plugin_tables`; the
# built-in lines: systems/plugins.py) or by the harness module that registers its entries. Registries the systems
# alone read (partition-buffer policies, cache policies, disk-system task variants) live in the systems.
SYSTEMS: Registry = Registry("system", plugin_table="systems")
SAMPLERS: Registry = Registry("sampler", plugin_table="samplers")
MODELS: Registry = Registry("model", plugin_table="models")
TASKS: Registry = Registry("task", plugin_table="tasks")
DECODERS: Registry = Registry("decoder", plugin_table="decoders")
# Wrappers ``variant(system_class) -> system_class`` the runner applies by name (``data_parallel``: one rank of a
# data-parallel run).
SYSTEM_VARIANTS: Registry = Registry("system variant", plugin_table="system_variants")
DATASETS: Registry = Registry("dataset", filled_by="suite.datasets")
MACHINES: Registry = Registry("machine profile", filled_by="suite.pricing")
