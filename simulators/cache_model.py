"""Feature-cache simulator: replays a recorded access trace (:mod:`systems.feature_cache.trace`) under any cache
policy and budget, and counts hits, misses and the bytes the reads would cover.

It runs the system's own parts without the rows' values: the registered policy classes
(:data:`~systems.feature_cache.policies.CACHE_POLICIES`), the cache's bookkeeping
(:class:`~systems.feature_cache.cache.CacheState`: lookup, then the policy's placement applied) and the reader's
extent planning (:func:`~systems.feature_cache.direct_io.plan_extents`, block alignment and merge gap). Replayed
with the policy, capacity, merge gap and window it was recorded under, it gives the run's numbers exactly:
per training epoch the hits, misses and ``io_read_bytes`` of its ``epoch`` record (the pinned rows read first
included), per evaluation its ``pass_io`` record. Under another policy or budget it answers "what would this run
have read", so a trace of a small run prices papers100M-scale budgets on paper (memory: the policy's state, one
int64 per table row).

Usage::

    python -m simulators.cache_model RUN_DIR/cache_trace.npz [--policy lru belady] [--fraction 0.05 0.25]
        [--cache-rows N] [--merge-gap BYTES] [--lookahead K] [--json]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from suite.errors import ConfigError, SuiteError
from suite.io import strict_json_dumps
from systems.feature_cache.cache import CacheState
from systems.feature_cache.direct_io import plan_extents
from systems.feature_cache.policies import CACHE_POLICIES, CacheContext
from systems.feature_cache.trace import CacheTrace


@dataclass
class SegmentCount:
    """What one segment's lookups did: distinct rows looked up (``hits + misses``), rows kept, rows and extents read,
    bytes the reads covered (``io_read_bytes``, as the reader counts them)."""

    hits: int = 0
    misses: int = 0
    admitted: int = 0
    rows_read: int = 0
    extents: int = 0
    io_read_bytes: int = 0

    @property
    def hit_rate(self) -> float | None:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else None

    def as_dict(self) -> dict[str, float | int | None]:
        return {"cache_hits": self.hits, "cache_misses": self.misses, "cache_admitted": self.admitted,
                "rows_read": self.rows_read, "extents": self.extents, "io_read_bytes": self.io_read_bytes,
                "hit_rate": self.hit_rate}


@dataclass
class CacheSimulation:
    """A replay's counts per segment (``train:<epoch>``, ``eval:<split>:<epochs trained>``) and in total."""

    policy: str
    capacity: int
    merge_gap_bytes: int
    lookahead_batches: int
    segments: dict[str, SegmentCount] = field(default_factory=dict)

    def total(self, prefix: str = "") -> SegmentCount:
        """The sum over the segments whose name starts with ``prefix``."""
        total = SegmentCount()
        for name, count in self.segments.items():
            if name.startswith(prefix):
                for key in vars(total):
                    setattr(total, key, getattr(total, key) + getattr(count, key))
        return total


def simulate_cache(trace: CacheTrace, policy: str | None = None, capacity: int | None = None,
                   merge_gap_bytes: int | None = None, lookahead_batches: int | None = None) -> CacheSimulation:
    """Replay ``trace`` under ``policy`` with ``capacity`` rows, reads merged across ``merge_gap_bytes``, a look-ahead
    window of ``lookahead_batches`` (each default: what the trace was recorded under)."""
    policy = trace.policy if policy is None else policy
    capacity = trace.capacity if capacity is None else capacity
    gap = trace.merge_gap_bytes if merge_gap_bytes is None else merge_gap_bytes
    window = trace.lookahead_batches if lookahead_batches is None else lookahead_batches
    if policy not in CACHE_POLICIES:
        raise ConfigError(f"policy: unknown cache policy {policy!r} (known: {', '.join(CACHE_POLICIES.names())})")
    if capacity < 0 or gap < 0 or window < 1:
        raise ConfigError(f"capacity, merge gap >= 0 and lookahead >= 1 expected, got {capacity}, {gap}, {window}")
    capacity = min(capacity, trace.num_rows)
    state = CacheState(CACHE_POLICIES.get(policy)(CacheContext(capacity, trace.num_rows, trace.degrees)),
                       trace.num_rows)
    result = CacheSimulation(policy, state.capacity, gap, window,
                             {name: SegmentCount() for name in trace.segments})
    windows = trace.windows(window) if state.policy.looks_ahead else np.zeros(trace.num_lookups, dtype=np.int64)

    def read(rows: np.ndarray, count: SegmentCount) -> None:
        extents = plan_extents(rows, trace.data_offset, trace.row_bytes, trace.file_size, gap)
        count.rows_read += len(rows)
        count.extents += len(extents.lengths)
        count.io_read_bytes += int(extents.needed.sum())

    for index in range(trace.num_lookups):
        count = result.segments[trace.segments[trace.segment_of_lookup[index]]]
        if index == trace.fill_at:  # the pinned rows were read as its epoch began
            read(state.pin(), count)
        rows = trace.lookup(index)
        before = (state.stats.hits, state.stats.misses, state.stats.admitted)
        slots = state.lookup(rows)
        read(rows[slots < 0], count)
        future = [trace.lookup(i) for i in range(index + 1, index + 1 + int(windows[index]))]
        state.admit(rows, slots, future)
        count.hits += state.stats.hits - before[0]
        count.misses += state.stats.misses - before[1]
        count.admitted += state.stats.admitted - before[2]
    return result


def compare_budgets(trace: CacheTrace, policies: Sequence[str], capacities: Sequence[int],
                    merge_gap_bytes: int | None = None, lookahead_batches: int | None = None) -> list[dict]:
    """One row per (policy, capacity): training and evaluation hit rates and bytes read, per epoch on average."""
    epochs = max(1, sum(name.startswith("train:") for name in trace.segments))
    table_bytes = trace.num_rows * trace.row_bytes
    rows = []
    for policy in policies:
        for capacity in capacities:
            simulation = simulate_cache(trace, policy, capacity, merge_gap_bytes, lookahead_batches)
            train, evaluation = simulation.total("train:"), simulation.total("eval:")
            rows.append({"policy": policy, "budget_rows": capacity, "cache_rows": simulation.capacity,
                         "cache_share": simulation.capacity * trace.row_bytes / table_bytes if table_bytes else 0.0,
                         "train_hit_rate": train.hit_rate, "train_bytes_per_epoch": train.io_read_bytes / epochs,
                         "train_extents_per_epoch": train.extents / epochs, "eval_hit_rate": evaluation.hit_rate,
                         "eval_bytes": evaluation.io_read_bytes})
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m simulators.cache_model",
                                     description="Replay a feature-cache access trace under policies and budgets.")
    parser.add_argument("trace", help="cache_trace.npz of a feature_cache run (system.options.record_trace)")
    parser.add_argument("--policy", nargs="+", default=None, help="policies (default: every registered one)")
    parser.add_argument("--fraction", type=float, nargs="+", default=None,
                        help="budgets as fractions of the feature table (default: the recorded budget)")
    parser.add_argument("--cache-rows", type=int, nargs="+", default=None, help="budgets in rows")
    parser.add_argument("--merge-gap", type=int, default=None, help="merge gap in bytes (default: recorded)")
    parser.add_argument("--lookahead", type=int, default=None, help="belady's window (default: recorded)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simulators.cache_model``: print hit rates and bytes per policy and budget; exit 2 on bad input."""
    args = build_parser().parse_args(argv)
    try:
        trace = CacheTrace.load(args.trace)
        capacities = list(args.cache_rows or [])
        capacities += [int(f * trace.num_rows) for f in args.fraction or []]
        rows = compare_budgets(trace, args.policy or CACHE_POLICIES.names(), capacities or [trace.capacity],
                               args.merge_gap, args.lookahead)
    except SuiteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(strict_json_dumps(rows, indent=2))
        return 0
    import pandas as pd

    with pd.option_context("display.width", 200, "display.precision", 4):
        print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["CacheSimulation", "SegmentCount", "compare_budgets", "simulate_cache"]
