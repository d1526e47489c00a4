"""Normalisations of node feature rows applied when a run reads them (``dataset.feature_normalization``).

Each is a pure function of one batch of rows that treats every row on its own, so a system may apply it to the
whole table at load or to the rows it gathers per batch (the disk system's buffer rows): the result is the same.

- ``none``: the rows as stored;
- ``row``: every row divided by the sum of its entries (Kipf & Welling's preprocessing of bag-of-words features,
  used by Shchur et al.); a row that sums to zero stays zero.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from suite.errors import ConfigError


def row_normalize(rows: torch.Tensor) -> torch.Tensor:
    """``rows`` with every row divided by its sum (rows summing to 0 left at 0), as float32."""
    rows = rows.to(torch.float32)
    sums = rows.sum(dim=1, keepdim=True)
    return rows / torch.where(sums == 0, torch.ones_like(sums), sums)


def unchanged(rows: torch.Tensor) -> torch.Tensor:
    """``rows`` as float32."""
    return rows.to(torch.float32)


FEATURE_NORMALIZATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"none": unchanged, "row": row_normalize}
"""Normalisation name (``dataset.feature_normalization``) -> function of a batch of rows."""


def normalize_features(rows: torch.Tensor, name: str) -> torch.Tensor:
    """``rows`` normalised by the registered normalisation ``name`` (float32); ConfigError naming the field if
    unknown."""
    if name not in FEATURE_NORMALIZATIONS:
        raise ConfigError(f"dataset.feature_normalization: unknown normalisation {name!r} "
                          f"(known: {', '.join(FEATURE_NORMALIZATIONS)})")
    return FEATURE_NORMALIZATIONS[name](rows)


__all__ = ["FEATURE_NORMALIZATIONS", "normalize_features", "row_normalize", "unchanged"]
