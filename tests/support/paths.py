"""Where the checkout and the project's shared folder are."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """The project's ``shared/`` folder: ``$GNNSUITE_SHARED`` or the ``shared`` folder beside the checkout."""
    return Path(os.environ.get("GNNSUITE_SHARED", REPO_ROOT.parent / "shared"))


__all__ = ["REPO_ROOT", "shared_dir"]
