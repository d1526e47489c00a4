"""A feature cache over a small table written to a folder, and replays of row sequences through it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from suite.io import IOCounters
from systems.feature_cache.cache import FeatureCache
from systems.feature_cache.direct_io import ExtentReader
from systems.feature_cache.policies import CACHE_POLICIES, CacheContext


def write_table(folder: Path, rows: int = 64, dim: int = 8, seed: int = 0,
                dtype: type = np.float32) -> tuple[Path, np.ndarray]:
    """A ``(rows, dim)`` ``.npy`` table of random values (``dtype``) in ``folder``: its path and its values."""
    table = np.random.default_rng(seed).standard_normal((rows, dim)).astype(dtype)
    path = folder / "features.npy"
    np.save(path, table)
    return path, table


def make_cache(path: Path, policy: str, capacity: int, degrees: np.ndarray | None = None,
               direct: bool = True) -> FeatureCache:
    """A cache of ``capacity`` rows of the table at ``path`` under the registered ``policy``."""
    reader = ExtentReader(path, IOCounters(), direct=direct, io_threads=2)
    context = CacheContext(capacity, reader.shape[0], degrees)
    return FeatureCache(reader, CACHE_POLICIES.get(policy)(context))


def replay(cache: FeatureCache, table: np.ndarray, batches: Sequence[Sequence[int]],
           lookahead: int | None = None) -> list[int]:
    """Serve ``batches`` (row ids) in order through ``cache`` (``lookahead``: batches a look-ahead policy sees,
    the current one included; default all); check every gathered row against ``table``; the hits per batch."""
    distinct = [np.unique(np.asarray(batch, dtype=np.int64)) for batch in batches]
    size = len(batches) if lookahead is None else lookahead
    cache.fill()
    hits = []
    for i, batch in enumerate(batches):
        before = cache.stats.hits
        nodes = torch.tensor(batch, dtype=torch.int64)
        got = cache.gather(nodes, distinct[i + 1:i + size])
        assert torch.equal(got, torch.from_numpy(table[np.asarray(batch)])), f"batch {i}: wrong rows"
        hits.append(cache.stats.hits - before)
    return hits


__all__ = ["make_cache", "replay", "write_table"]
