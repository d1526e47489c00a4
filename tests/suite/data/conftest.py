"""A tiny hand-made store used across graph tests (written by :func:`tests.support.graphs.write_tiny_store`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.data import GraphStore
from tests.support.graphs import write_tiny_store


@pytest.fixture
def tiny_store(tmp_path: Path) -> GraphStore:
    """The tiny typed store, freshly written."""
    return write_tiny_store(tmp_path / "tiny")
