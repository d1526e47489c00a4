"""Shared fixtures: where the real datasets live, and tiny stores built by hand."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The compiled sampler kernels check every index in the tests (an IndexError instead of a segmentation fault);
# set before any test imports them, inherited by the CLI subprocesses the tests start.
os.environ.setdefault("GNNSUITE_KERNEL_BOUNDSCHECK", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """The project's ``shared/`` folder: ``$GNNSUITE_SHARED`` or the ``shared`` folder beside the checkout."""
    return Path(os.environ.get("GNNSUITE_SHARED", REPO_ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """``shared/datasets``; tests that need it fail loudly (not skip) when it is absent."""
    path = shared_dir() / "datasets"
    assert path.is_dir(), f"{path} is missing: set GNNSUITE_SHARED to the project's shared/ folder"
    return path
