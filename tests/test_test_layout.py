"""The tests' own layout: no test module imports another test module or a conftest module.

Fixtures are shared through ``conftest.py`` (pytest finds them), plain helpers through :mod:`tests.support`; a test
module imported by another would run its tests twice or drag its module-level fixtures along.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

TESTS = REPO_ROOT / "tests"


def module_name(path: Path) -> str:
    """Dotted module name of a file under the checkout (``tests/systems/conftest.py`` -> ``tests.systems.conftest``)."""
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, package: str) -> list[str]:
    """Every module ``source`` imports, as dotted names: ``from A import b`` gives ``A`` and ``A.b``; relative
    imports are resolved against ``package`` (the dotted package the source lives in)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[:len(parts) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.append(module)
            names.extend(f"{module}.{alias.name}" for alias in node.names)
    return names


def is_test_or_conftest(module: str) -> bool:
    """Whether ``module`` is a file of this checkout named ``test_*.py`` or ``conftest.py``."""
    last = module.rsplit(".", 1)[-1]
    if not (last.startswith("test_") or last == "conftest"):
        return False
    return (REPO_ROOT / Path(*module.split("."))).with_suffix(".py").is_file()


def package_of(path: Path) -> str:
    """The dotted package a file of the checkout belongs to."""
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


@pytest.mark.parametrize("path", sorted(TESTS.rglob("*.py")), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_imports_of_test_or_conftest_modules(path: Path) -> None:
    names = imported_modules(path.read_text(), package_of(path))
    offending = sorted({name for name in names if is_test_or_conftest(name)})
    assert not offending, (f"{path.relative_to(REPO_ROOT)} imports {', '.join(offending)}: share fixtures through "
                           "conftest.py and helpers through tests/support/")


def test_the_check_sees_every_form_of_such_imports() -> None:
    source = ("from tests.systems.test_in_memory import STAGES\nfrom . import conftest\nimport tests.conftest\n"
              "from .sampling.test_naive import global_edges\nfrom tests.support.graphs import in_graph\n"
              "import numpy\n")
    names = imported_modules(source, "tests.systems")
    assert sorted({n for n in names if is_test_or_conftest(n)}) == [
        "tests.conftest", "tests.systems.conftest", "tests.systems.sampling.test_naive",
        "tests.systems.test_in_memory"]


def test_the_scheduling_lists_name_existing_tests():
    # read as data (tests never import a conftest module)
    tree = ast.parse((TESTS / "conftest.py").read_text())
    lists = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
             if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
             and node.targets[0].id in ("SPLIT", "LONGEST_FIRST")}
    assert set(lists) == {"SPLIT", "LONGEST_FIRST"}
    for prefix in (*lists["SPLIT"], *lists["LONGEST_FIRST"]):
        path = prefix.split("::", 1)[0]
        assert (REPO_ROOT / path).is_file(), f"tests/conftest.py names {path}, which does not exist"
