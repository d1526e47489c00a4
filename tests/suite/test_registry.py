"""suite.registry.Registry: eager and lazy (declared) entries, one-line errors, nothing imported to know a name."""

from __future__ import annotations

import sys

import pytest

from suite.errors import ConfigError
from suite.registry import Registry


def test_eager_registration_and_unknown_name_lists_the_known_ones():
    registry = Registry("widget")
    registry.register("b", 2)

    @registry.register("a")
    def a():
        return 1

    assert registry.get("b") == 2 and registry.get("a") is a
    assert registry.names() == ["a", "b"] and registry.in_order() == [2, a]
    with pytest.raises(ConfigError, match=r"unknown widget 'c' \(known: a, b\)"):
        registry.get("c")
    with pytest.raises(ValueError, match="already registered"):
        registry.register("a", 3)


def test_declared_entry_imports_its_module_only_when_asked(tmp_path, monkeypatch):
    (tmp_path / "lazy_widget_module.py").write_text("VALUE = {'deep': 42}\nclass Thing:\n    size = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry("widget", table={"thing": "lazy_widget_module:Thing"})
    registry.declare("size", "lazy_widget_module:Thing.size")

    assert "thing" in registry and registry.names() == ["size", "thing"] and len(registry) == 2
    assert registry.target("thing") == "lazy_widget_module:Thing"
    assert "lazy_widget_module" not in sys.modules
    assert registry.get("thing").__name__ == "Thing"
    assert registry.get("size") == 7
    assert "lazy_widget_module" in sys.modules
    with pytest.raises(ValueError, match="already registered"):
        registry.declare("thing", "lazy_widget_module:VALUE")
    with pytest.raises(ValueError, match="is not 'package.module:attribute'"):
        registry.declare("bad", "lazy_widget_module")


def test_a_registry_filled_by_a_module_imports_it_on_first_use(tmp_path, monkeypatch):
    (tmp_path / "filling_widget_module.py").write_text(
        "from suite.registry import Registry\nimport sys\n"
        "WIDGETS = sys.modules['__widget_registry__']\nWIDGETS.register('built_in', 1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry("widget", filled_by="filling_widget_module")
    monkeypatch.setitem(sys.modules, "__widget_registry__", registry)
    assert "filling_widget_module" not in sys.modules
    assert "built_in" in registry and registry.get("built_in") == 1
    with pytest.raises(ValueError, match="already registered"):
        registry.register("built_in", 2)
