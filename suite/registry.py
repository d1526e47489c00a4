"""Registries of plugins by name: a new plugin is one registered object, never an edit of the code using it.

Example::

    SYSTEMS = Registry[type]("system")

    @SYSTEMS.register("disk")
    class DiskSystem: ...

    SYSTEMS.get("disk")  # -> DiskSystem; an unknown name raises ConfigError listing the known ones
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from suite.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object map with one-line errors for unknown names, filled eagerly or lazily.

    Eager: ``register(name, obj)`` (or as a decorator). Lazy: ``declare(name, "package.module:attribute")`` or a
    whole table with ``declare_table``; the module is imported the first time ``get(name)`` asks for it, so that
    knowing a name (``names()``, ``in``) imports nothing.

    Args:
        kind: what the registry holds (``"system"``, ``"preset"``...), used in error messages.
        table: lazy entries ``{name: "module:attribute"}`` to declare at construction.
    """

    def __init__(self, kind: str, table: Mapping[str, str] | None = None):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._targets: dict[str, str] = {}
        self._order: list[str] = []
        if table:
            self.declare_table(table)

    def register(self, name: str, item: T | None = None) -> Callable[[T], T] | T:
        """Register ``item`` under ``name``; without ``item``, return a decorator that does."""
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
        self._check_new(name)
        self._targets[name] = target
        self._order.append(name)

    def declare_table(self, table: Mapping[str, str]) -> None:
        """Declare every ``name: target`` of ``table`` (see :meth:`declare`)."""
        for name, target in table.items():
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
        return self._targets.get(name)

    def get(self, name: str) -> T:
        """The object registered as ``name`` (importing its module if it was declared lazily); raises
        :class:`ConfigError` naming the known ones."""
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
        return [self.get(name) for name in self._order]

    def names(self) -> list[str]:
        """Registered names, sorted (imports nothing)."""
        return sorted(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._order)


# The suite's plugin registries. Plugins register themselves when their module is imported; importing
# :mod:`suite.plugins` imports the built-in ones and any installed package's ``gnnsuite.plugins`` entry points.
SYSTEMS: Registry = Registry("system")
SAMPLERS: Registry = Registry("sampler")
MODELS: Registry = Registry("model")
POLICIES: Registry = Registry("policy")
DATASETS: Registry = Registry("dataset")
MACHINES: Registry = Registry("machine profile")
TASKS: Registry = Registry("task")
DECODERS: Registry = Registry("decoder")
# Wrappers ``variant(system_class) -> system_class`` the runner applies by name (``data_parallel``: one rank of a
# data-parallel run, registered by :mod:`systems.distributed`).
SYSTEM_VARIANTS: Registry = Registry("system variant")
