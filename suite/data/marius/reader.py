"""A reader of one section of a Marius config that remembers which keys were read, so unknown ones are refused."""

from __future__ import annotations

import math
from typing import Any

from suite.errors import ConfigError


class Reader:
    """Walks a section of the Marius config, remembering which keys were read so that unknown ones are refused."""

    def __init__(self, data: Any, path: str, source: str):
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: {path}: expected a mapping, got {type(data).__name__}")
        self.data, self.path, self.source, self.read = data, path, source, set()

    def where(self, key: str | None = None) -> str:
        return f"{self.path}.{key}" if key is not None else self.path

    def fail(self, key: str | None, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {self.where(key)}: {message}")

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return self.data.get(key, default)

    def section(self, key: str) -> "Reader":
        return Reader(self.get(key), self.where(key), self.source)

    def upper(self, key: str, default: str | None = None) -> str | None:
        value = self.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {value!r}")
        return value.upper()

    def number(self, key: str, default: Any = None, kind: type = float) -> Any:
        value = self.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not
                                                                              isinstance(value, int)):
            raise self.fail(key, f"expected {'an integer' if kind is int else 'a number'}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(key, f"must be finite, got {value}")
        return value

    def require(self, key: str, allowed: tuple, reason: str, default: Any = None) -> Any:
        """The value of ``key``; refused (naming the field) unless it is one of ``allowed``."""
        value = self.get(key, default)
        normalized = value.upper() if isinstance(value, str) else value
        if normalized not in allowed:
            raise self.fail(key, f"{value!r} is not supported ({reason})")
        return normalized

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.read)
        if unknown:
            raise self.fail(unknown[0], "not a Marius field the suite knows (refused; see docs/datasets.md)")
