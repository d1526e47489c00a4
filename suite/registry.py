"""Registries of plugins by name: a new plugin is one registered object, never an edit of the code using it.

Example::

    SYSTEMS = Registry[type]("system")

    @SYSTEMS.register("disk")
    class DiskSystem: ...

    SYSTEMS.get("disk")  # -> DiskSystem; an unknown name raises ConfigError listing the known ones
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from suite.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> object map with decorator registration and one-line errors for unknown names.

    Args:
        kind: what the registry holds (``"system"``, ``"preset"``...), used in error messages.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T | None = None) -> Callable[[T], T] | T:
        """Register ``item`` under ``name``; without ``item``, return a decorator that does."""
        if item is not None:
            self._add(name, item)
            return item

        def decorator(obj: T) -> T:
            self._add(name, obj)
            return obj

        return decorator

    def _add(self, name: str, item: T) -> None:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item

    def get(self, name: str) -> T:
        """The object registered as ``name``; raises :class:`ConfigError` naming the known ones."""
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "none"
            raise ConfigError(f"unknown {self.kind} {name!r} (known: {known})") from None

    def in_order(self) -> list[T]:
        """The registered objects in registration order."""
        return list(self._items.values())

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)


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
