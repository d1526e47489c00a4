"""MariusGNN's sampling comparison: time per mini-batch of multi-hop sampling, naive (DGL-style) vs DENSE vs PyG.

Usage::

    python -m experiments.figures.sampling [--quick] [--data-dir data] [--csv out/results/sampling.csv]
        [--png out/results/sampling.png] [--no-plot] [--settings livejournal papers] [--layers 1 2 3 4 5]
        [--samplers naive dense pyg] [--repeats 5] [--warmup 1] [--long-batch-s 10] [--long-repeats 3]
        [--min-seconds 5] [--max-repeats 25] [--max-memory-gib 8] [--replace] [--threads N] [--seed 0]

Settings (as in MariusGNN's evaluation of DENSE, on the suite's synthetic stand-ins of the graphs):

- ``livejournal``: the ``livejournal-like`` preset, 10,000 uniformly random roots (all nodes), fanout 20 at every
  hop, *outgoing* edges (``SamplingGraph.from_store(store, "out")``), 1 to 5 layers;
- ``papers``: the ``papers-like-s`` preset, 1,000 uniformly random *training* nodes as roots, incoming edges,
  fanouts ``15, 10, 5`` for 3 layers (first hop from the roots first, as PyG's ``num_neighbors``); fewer layers
  take a prefix (``15`` and ``15, 10``) and more layers add hops of fanout 5 at the outside (``15, 10, 5, 5`` and
  ``15, 10, 5, 5, 5``), the smallest fanout of the original setting, so the extension adds the least work per
  hop.

Samplers (one row each per setting x layer count): ``naive`` (:class:`~systems.sampling.naive.NaiveSampler`),
``dense`` (DENSE, :class:`~systems.sampling.dense.DenseSampler`, with its default ``truncate=True``: in the
``papers`` setting the lists of the roots and of ``delta_1``, which outer layers cut to their smaller fanouts, are
shuffled while sampling, and that cost is timed), both with their default backend (compiled numba one-hop kernels
when numba is installed; recorded in ``backend``; both take their large outputs from the same recycling
:class:`~systems.sampling.kernels.BufferPool`), and ``pyg``: PyG's own C++ sampler
through :class:`torch_geometric.sampler.NeighborSampler` on the same CSR (handed over as PyG's transposed
adjacency, so nothing is copied or re-sorted: :func:`systems.sampling.pyg.neighbor_sampler`, as the registered
``pyg`` sampler does), which needs ``pyg-lib`` or ``torch-sparse`` (``make peers``). The timed call is PyG's
``sample_from_nodes``, i.e. PyG's own output (node list and edge lists, which PyG's loaders consume); the
registered sampler's assembly of layer-wise blocks from it is not timed, which favours PyG. A sampler that cannot run (not installed, not
registered) gets one ``skipped`` row per setting x layer count with the reason. Every sampler of the ``SAMPLERS``
table (:mod:`systems.plugins`) runs by default, and what the experiment needs from one (the timed call, its counts,
its memory estimate, what implements it) comes from its :class:`~systems.sampling.sampler.Sampler` class, so a newly
registered sampler gets its rows and its line in the figure. On request (``--samplers``), a sampler's ``variants``
run too: ``naive-torch`` and ``dense-torch`` run the same two algorithms on their pure-torch backend. All sample without
replacement by default (``--replace``: with replacement when degree > fanout, as MariusGNN; for every sampler).

Measurement protocol (``DESIGN.md``, *Measuring honestly*):

- all samplers run in this one process, interleaved: every timed repeat draws new random roots (from a
  generator seeded with ``--seed``, the same root sequence at every layer count) and runs every sampler on the
  *same* roots, in an order rotated per repeat; the samplers' own randomness is seeded per repeat;
- ``--warmup`` untimed batches per sampler and configuration come first (on other roots); the reported time is the
  median wall time (``time.perf_counter``) of ``--repeats`` timed calls of ``sample(roots, generator)``, i.e.
  sampling and building the sampler's output structure, nothing else (stats are read after the clock stops);
- short configurations get more timed repeats: after the ``--repeats`` rounds, rounds of naive and DENSE (the
  samplers the claim compares; not the peers) continue while their calls in the configuration took less than
  ``--min-seconds`` in total (default 5 s; 0 in quick mode), up to ``--max-repeats`` (default 25): a median of 5
  batches of ~40 ms is at the mercy of a neighbour's burst of activity, one of 25 much less, and the long
  configurations, which dominate the run time, are unaffected (in the full setting papers gets 25 pairs up to 4
  layers and 11 at 5, where PyG's 9-s batches used to stop the rounds at 5, one of them a cold outlier);
- a configuration whose batch is expected to take longer than ``--long-batch-s`` (extrapolated from the previous
  layer count) gets ``--long-repeats`` timed repeats and no warm-up (such a batch is its own warm-up, and the
  whole grid has to fit in minutes); every row records the repeats and warm-ups it really had;
- threads: torch's default (``torch.get_num_threads()``, recorded) unless ``--threads``; DENSE's numba kernels
  and PyG's sampler are single-threaded, the torch code paths use torch's intra-op pool. On a machine shared with
  other busy processes, a pool of more threads than free cores stalls in every parallel op (the pool waits for a
  descheduled worker), which slows the op-heavy torch paths far more than the compiled ones: compare with
  ``--threads 1`` before reading a speedup as the algorithm's;
- ratios are against DENSE at the same setting and layer count: ``time_ratio_vs_dense`` = this row's median
  time / DENSE's, ``edges_ratio_vs_dense`` = this row's sampled edges / DENSE's (so the naive row holds the
  naive/DENSE speedup and edge ratio).

Counted per batch (medians over the timed repeats): ``sampled_edges``; ``unique_nodes_per_hop`` = sizes of
``[roots, delta_1, ..., delta_K]`` (the nodes first reached at each hop; for the naive sampler, the growth of its
per-hop frontier, which holds every node within h hops); ``one_hop_calls`` = nodes whose one-hop neighbourhood is
sampled over all hops (naive: the frontier at every hop, so repeated nodes count again; DENSE: its
``one_hop_calls``; PyG: every node except the outermost delta).

Memory guard: before a configuration runs, its sampled edges are bounded from the previous layer count
(edges(K-1) + min(nodes to sample at hop K x fanout_K, sum over all nodes of min(degree, fanout_K))) and priced at
the sampler's measured peak bytes per sampled edge (peak resident set growth during a call, from ``VmHWM`` after
resetting it through ``/proc/self/clear_refs``; at least :data:`MIN_BYTES_PER_EDGE`). Above ``--max-memory-gib``
(or 80% of the memory available now) it is recorded as ``skipped`` with the estimate instead of run.

Stores are generated once into ``--data-dir`` (default ``data/``, git-ignored; the same cache entries
``gnnsuite`` runs use, ``<preset>-<hash>``) and reused. ``--quick``: 20,000-node versions of both graphs (no
features), 500 / 100 roots, 60 repeats after 1 warm-up (10 for PyG, ``--peer-repeats``: the claim compares naive and
DENSE); about 20 seconds, for tests and ``gnnsuite reproduce --quick``.

Output: a tidy CSV (one row per setting x layer count x sampler, with provenance: git SHA, a hash of the sampler
sources, torch / PyG versions, threads, CPU, date), written atomically, and the figure that
:func:`plot_sampling` draws from that CSV alone (``--no-plot`` to skip it).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import matplotlib.pyplot as plt
import torch

from experiments.common import DATA, REPO_ROOT, RESULTS, Figure, Mode, Paths, Plot, add_common_options, cli, provenance
from experiments.compare import TableSpec
from experiments.style import (COLORS, MARIUSGNN, caption, color_of, display_label, error_bars, flagged_under_load,
                                 load_note, marker_of, next_marker, save_figure, styled)
from experiments.report import (Estimate, Finding, INCONCLUSIVE, NOT_TESTABLE, claim, load_exclusions, split_under_load,
                                table_interval)
from suite.load import LoadMonitor, load_columns
from suite.provenance import reset_peak_rss, status_kib
from suite.stats import Interval, above, bootstrap_interval, combine, ratio_interval, slope_interval

if TYPE_CHECKING:
    from systems.sampling.sampler import SampleCounts

DEFAULT_CSV = RESULTS / "sampling.csv"
DEFAULT_PNG = RESULTS / "sampling.png"
MIN_BYTES_PER_EDGE = 48
"""Floor of the memory price of one sampled edge, before a sampler has been measured (bytes)."""
QUICK_NODES = 20_000
QUICK_REPEATS = 60
"""Timed repeats per configuration in quick mode: enough paired naive/DENSE ratios for a 95 % interval that
decides the claim (batches take milliseconds there)."""
QUICK_PEER_REPEATS = 10
"""Timed repeats of the peers (PyG: 0.1 s a batch) in quick mode; the claim does not read them."""
CLAIM_SAMPLERS = ("naive", "dense")
"""The samplers the DENSE claim compares; the others (peers, torch backends) may get fewer repeats."""

COLUMNS = (
    "setting", "dataset", "num_nodes", "num_edges", "direction", "root_pool", "num_roots", "layers", "fanouts",
    "replace", "sampler", "status", "reason", "time_s", "time_s_ci_low", "time_s_ci_high", "time_s_min",
    "time_s_max", "repeats", "warmup", "times_s", "sampled_edges", "estimated_edges", "unique_nodes_per_hop",
    "total_unique_nodes", "one_hop_calls", "sampled_edges_per_s", "time_ratio_vs_dense",
    "time_ratio_vs_dense_ci_low", "time_ratio_vs_dense_ci_high", "paired_repeats", "edges_ratio_vs_dense",
    "peak_extra_mib", "foreign_cores", "under_load", "threads", "backend", "quick", "seed", "git_sha",
    "sampling_code_sha", "torch", "torch_geometric", "python", "cpu_model", "cpu_cores", "date",
)
"""Columns of the CSV, in order. ``time_s`` is the median time per batch, ``time_s_ci_low``/``_high`` its 95 %
bootstrap interval (:func:`suite.stats.bootstrap_interval`), ``times_s`` every timed repeat in order (a JSON list;
repeat ``r`` of every sampler of a configuration ran on the same roots); ``sampled_edges``, ``one_hop_calls`` and
each entry of ``unique_nodes_per_hop`` (a JSON list) are medians over the timed repeats; ``estimated_edges`` is
the memory guard's upper estimate; ``peak_extra_mib`` is the largest growth of the resident set during one call (a
lower bound of what the call allocated: memory the allocator already held is reused without growing it);
``time_ratio_vs_dense`` is the geometric mean over the ``paired_repeats`` repeats both ran of this sampler's time /
DENSE's time on the same roots, with its 95 % t interval (``_ci_low``/``_high``, :func:`suite.stats.ratio_interval`);
``foreign_cores`` and ``under_load`` are the other processes' CPU use while the configuration (setting x layer
count, all its samplers) was measured (:mod:`suite.load`; ``under_load``: at least 0.25 cores)."""
INTEGER_COLUMNS = ("repeats", "warmup", "sampled_edges", "estimated_edges", "total_unique_nodes", "one_hop_calls",
                   "paired_repeats")


# ---------------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Setting:
    """One graph and batch shape of the comparison.

    Attributes:
        name: short name in the CSV (``livejournal``, ``papers``).
        preset: synthetic generator preset.
        params: generator overrides (the quick mode shrinks the graphs).
        direction: which neighbours are sampled (``in`` or ``out``).
        num_roots: roots per batch.
        root_pool: ``all`` (uniform over nodes) or ``train`` (uniform over the training nodes).
        fanouts: fanout per hop for the largest layer count, first hop first; K layers use ``fanouts[:K]``.
    """

    name: str
    preset: str
    params: dict[str, Any]
    direction: str
    num_roots: int
    root_pool: str
    fanouts: tuple[int, ...]


def make_settings(quick: bool = False, num_nodes: int | None = None) -> dict[str, Setting]:
    """The two settings; ``quick`` (or an explicit ``num_nodes``) shrinks the graphs and the batches."""
    nodes = num_nodes or (QUICK_NODES if quick else None)
    small = {"num_nodes": nodes, "feature_dim": 0} if nodes else {}
    return {
        "livejournal": Setting("livejournal", "livejournal-like", small, "out", 500 if nodes else 10_000, "all",
                               (20, 20, 20, 20, 20)),
        "papers": Setting("papers", "papers-like-s", small, "in", 100 if nodes else 1_000, "train",
                          (15, 10, 5, 5, 5)),
    }


@dataclass(frozen=True)
class Timing:
    """How every configuration is timed and guarded.

    Attributes:
        repeats: timed batches per configuration; warmup: untimed batches first.
        long_batch_s: expected batch time above which ``long_repeats`` and no warm-up apply.
        long_repeats: timed batches of such long configurations.
        peer_repeats: at most this many timed repeats for samplers other than naive and DENSE (none: as repeats).
        min_seconds: keep adding timed rounds of the compared samplers while their calls took less than this in all.
        max_repeats: cap of those extra rounds.
        max_memory_gib: skip configurations estimated to need more.
        replace: sample with replacement when degree > fanout.
        seed: seed of the roots.
    """

    repeats: int = 5
    warmup: int = 1
    long_batch_s: float = 10.0
    long_repeats: int = 3
    peer_repeats: int | None = None
    min_seconds: float = 5.0
    max_repeats: int = 25
    max_memory_gib: float = 8.0
    replace: bool = False
    seed: int = 0

    @classmethod
    def of_mode(cls, mode: Mode, **given: Any) -> "Timing":
        """The defaults of ``mode`` (quick: :data:`QUICK_REPEATS`, :data:`QUICK_PEER_REPEATS`, no minimum time),
        with the ``given`` values (``None``: the default) over them."""
        defaults = ({"repeats": QUICK_REPEATS, "peer_repeats": QUICK_PEER_REPEATS, "min_seconds": 0.0}
                    if mode == "quick" else {})
        return cls(**{**defaults, **{name: value for name, value in given.items() if value is not None}})


def open_store(setting: Setting, data_dir: Path):
    """Generate (once, into ``data_dir``) and open the setting's store, through the suite's dataset cache."""
    from suite.config import DatasetSpec
    from suite.datasets import synthetic_dataset

    spec = DatasetSpec(name="synthetic", preset=setting.preset, params=setting.params, cache_dir=str(data_dir))
    return synthetic_dataset(spec, progress=False)


# ---------------------------------------------------------------------------------------------- samplers
@dataclass(frozen=True)
class SamplerAdapter:
    """A registered sampler (or one of its ``variants``) as the experiment drives it; what differs between
    samplers comes from their class (:class:`systems.sampling.sampler.Sampler`: ``timed_sample``, ``counts``,
    ``nodes_to_sample_next``, ``implementation``).

    Attributes:
        name: row label (the registered name, ``NAME-VARIANT`` for a variant).
        sampler: the registered class.
        options: its constructor options (a variant's).
    """

    name: str
    sampler: type
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def backend(self) -> str:
        """What implements it (recorded; a measured row adds the instance's backend, e.g. DENSE's ``numba``)."""
        return self.sampler.implementation()

    def build(self, graph, fanouts: tuple[int, ...], replace: bool) -> Callable[[torch.Tensor, int], Any]:
        """``sample(roots, seed)``: one timed call of a sampler built for ``fanouts`` (its ``backend`` attribute:
        the instance's, if any)."""
        instance = self.sampler(graph, fanouts, replace=replace, **self.options)

        def sample(roots: torch.Tensor, seed: int):
            return instance.timed_sample(roots, seed)

        sample.backend = getattr(instance, "backend", None)  # e.g. DENSE's "numba" or "torch"
        return sample

    def stats(self, output: Any) -> SampleCounts:
        """The counts of one output of ``sample`` (after the clock stops)."""
        return self.sampler.counts(output)

    def to_sample_per_hop(self, stats: SampleCounts) -> int:
        """From the counts at K-1 layers, the nodes whose neighbours hop K samples (for the memory estimate)."""
        return self.sampler.nodes_to_sample_next(stats)


def sampler_names() -> list[str]:
    """The names ``--samplers`` accepts: every registered sampler (in the order of its table), then their variants
    (``naive-torch``: a sampler's ``variants``; none for one that does not import)."""
    from suite.registry import SAMPLERS

    names = SAMPLERS.names_in_order()
    return names + [f"{name}-{variant}" for name in names for variant in _variants(name)]


def _variants(name: str) -> Mapping[str, Mapping[str, Any]]:
    from suite.registry import SAMPLERS

    try:
        return getattr(SAMPLERS.get(name), "variants", {})
    except Exception:  # noqa: BLE001  (a sampler that does not import: its row says why, see available_samplers)
        return {}


def default_samplers() -> list[str]:
    """Every registered sampler (without the variants)."""
    from suite.registry import SAMPLERS

    return SAMPLERS.names_in_order()


def available_samplers(names: Sequence[str]) -> tuple[dict[str, SamplerAdapter], dict[str, str]]:
    """The adapters of ``names`` (registered samplers, or ``NAME-VARIANT``) that can run here, and a reason for
    each one that cannot (it does not import, is no :class:`~systems.sampling.sampler.Sampler`, or says what it misses).

    Raises:
        ValueError: a name that is neither registered nor a registered sampler's variant.
    """
    from suite.registry import SAMPLERS
    from systems.sampling.sampler import Sampler

    known = sampler_names()
    adapters: dict[str, SamplerAdapter] = {}
    missing: dict[str, str] = {}
    for name in names:
        registered, _, variant = (name, "", "") if name in SAMPLERS else name.partition("-")
        if registered not in SAMPLERS or (variant and name not in known):
            raise ValueError(f"unknown sampler {name!r} (known: {', '.join(known)})")
        try:
            cls = SAMPLERS.get(registered)
        except Exception as err:  # noqa: BLE001  (not written yet, or broken: record why)
            missing[name] = f"{registered} sampler unavailable ({type(err).__name__}: {err})"
            continue
        if not (isinstance(cls, type) and issubclass(cls, Sampler)):
            missing[name] = f"{registered}: {cls!r} does not derive from systems.sampling.sampler.Sampler"
            continue
        reason = cls.missing_reason()
        if reason is not None:
            missing[name] = reason
            continue
        adapters[name] = SamplerAdapter(name, cls, cls.variants[variant] if variant else {})
    return adapters, missing


# ---------------------------------------------------------------------------------------------- memory
def _available_bytes() -> int:
    import psutil

    return psutil.virtual_memory().available


# ---------------------------------------------------------------------------------------------- the grid
@dataclass
class Measured:
    """Timed repeats of one sampler in one configuration."""

    times: list[float] = field(default_factory=list)
    stats: list[SampleCounts] = field(default_factory=list)
    peak_extra: int | None = None
    warmup: int = 0
    backend: str | None = None

    def median_stats(self) -> SampleCounts:
        hops = [statistics.median(s.unique_nodes_per_hop[i] for s in self.stats)
                for i in range(len(self.stats[0].unique_nodes_per_hop))]
        from systems.sampling.sampler import SampleCounts

        return SampleCounts(round(statistics.median(s.sampled_edges for s in self.stats)),
                            [round(h) for h in hops], round(statistics.median(s.one_hop_calls for s in self.stats)))


def _call(sample: Callable, roots: torch.Tensor, seed: int, adapter: SamplerAdapter,
          measured: Measured | None) -> None:
    """One batch; timed and counted into ``measured`` unless it is a warm-up (None)."""
    gc.collect(1)  # the young generations hold the last batch's garbage; a full collection cost 7 ms a batch
    base = status_kib("VmRSS")
    tracked = base is not None and reset_peak_rss()
    started = time.perf_counter()
    result = sample(roots, seed)
    elapsed = time.perf_counter() - started
    if measured is None:
        return
    measured.times.append(elapsed)
    measured.stats.append(adapter.stats(result))
    if tracked:
        extra = (status_kib("VmHWM") - base) * 1024
        measured.peak_extra = max(measured.peak_extra or 0, extra)
    del result


def _draw_roots(pool: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    return pool[torch.randperm(len(pool), generator=generator)[:count]]


def _edge_cap(graph, fanout: int) -> int:
    """Most edges one hop can sample when each node appears once: sum over nodes of min(degree, fanout)."""
    degrees = graph.indptr.diff()
    return int(degrees.sum() if fanout < 0 else degrees.clamp(max=fanout).sum())


@dataclass
class History:
    """What the previous layer count of a sampler measured (for the estimates of the next)."""

    layers: int
    stats: SampleCounts
    time_s: float
    bytes_per_edge: float


def _estimate(graph, fanouts: tuple[int, ...], num_roots: int, adapter: SamplerAdapter,
              previous: History | None) -> tuple[int, float, float]:
    """Upper estimate of the sampled edges of ``len(fanouts)`` layers, bytes per edge, and seconds per batch.

    Hop K samples at most min(nodes to sample x fanout_K, sum over nodes of min(degree, fanout_K)) edges (the cap
    holds because the nodes a hop samples are distinct); the earlier hops sampled what the previous layer count
    measured.
    """
    if previous is None or previous.layers != len(fanouts) - 1:  # no history: products of fanouts, capped
        nodes, edges = num_roots, 0
        for fanout in fanouts:
            cap = _edge_cap(graph, fanout)
            grow = min(nodes * fanout, cap) if fanout > 0 else cap
            edges, nodes = edges + grow, min(graph.num_nodes, nodes + grow)
        return edges, MIN_BYTES_PER_EDGE if previous is None else previous.bytes_per_edge, 0.0
    fanout = fanouts[-1]
    cap = _edge_cap(graph, fanout)
    grow = min(adapter.to_sample_per_hop(previous.stats) * fanout, cap) if fanout > 0 else cap
    edges = previous.stats.sampled_edges + grow
    return edges, previous.bytes_per_edge, previous.time_s * edges / max(previous.stats.sampled_edges, 1)


def run_setting(setting: Setting, store, layers: Sequence[int], adapters: dict[str, SamplerAdapter],
                missing: dict[str, str], timing: Timing, provenance: dict[str, Any]) -> list[dict]:
    """All rows of one setting: every layer count x sampler, increasing layer counts."""
    from systems.sampling.sampler import SamplingGraph

    graph = SamplingGraph.from_store(store, setting.direction)
    pool = store.split("train") if setting.root_pool == "train" else None
    pool = torch.arange(graph.num_nodes) if pool is None else pool.to(torch.int64)
    num_roots = min(setting.num_roots, len(pool))
    budget = min(timing.max_memory_gib * 2**30, 0.8 * _available_bytes())
    history: dict[str, History] = {}
    over_budget: dict[str, int] = {}  # sampler -> the layer count that first went over the memory budget
    rows = []
    for num_layers in sorted(layers):
        fanouts = setting.fanouts[:num_layers]
        base = {
            "setting": setting.name, "dataset": store.name, "num_nodes": graph.num_nodes,
            "num_edges": int(graph.indptr[-1]), "direction": setting.direction, "root_pool": setting.root_pool,
            "num_roots": num_roots, "layers": num_layers, "fanouts": "-".join(map(str, fanouts)),
            "replace": timing.replace, **provenance,
        }
        plans: dict[str, tuple[int, int]] = {}  # sampler -> (warm-ups, timed repeats)
        estimates: dict[str, int] = {}
        for name, adapter in adapters.items():
            skip = {**base, "sampler": name, "status": "skipped", "backend": adapter.backend}
            if name in over_budget:
                rows.append({**skip, "reason": f"memory: {over_budget[name]} layers were already over budget"})
                continue
            est_edges, bytes_per_edge, est_time = _estimate(graph, fanouts, num_roots, adapter, history.get(name))
            estimates[name] = est_edges
            if est_edges * bytes_per_edge > budget:
                over_budget[name] = num_layers
                rows.append({**skip, "estimated_edges": est_edges,
                             "reason": f"memory: ~{est_edges:,} sampled edges x {bytes_per_edge:.0f} B/edge = "
                                       f"{est_edges * bytes_per_edge / 2**30:.1f} GiB > budget "
                                       f"{budget / 2**30:.1f} GiB"})
                print(f"[{setting.name} L={num_layers}] {name}: skipped ({rows[-1]['reason']})", flush=True)
                continue
            long = est_time > timing.long_batch_s
            plans[name] = ((0, min(timing.long_repeats, timing.repeats), False) if long
                           else (timing.warmup, timing.repeats, name in CLAIM_SAMPLERS))
            if name not in CLAIM_SAMPLERS and timing.peer_repeats is not None:  # a peer: the first rounds only
                warmup, repeats, _ = plans[name]
                plans[name] = (warmup, min(repeats, timing.peer_repeats), False)
        for name, reason in missing.items():
            rows.append({**base, "sampler": name, "status": "skipped", "reason": reason})

        with LoadMonitor() as monitor:
            measured = measure_interleaved(graph, fanouts, {n: adapters[n] for n in plans}, plans, pool, num_roots,
                                           timing.seed, timing.replace, timing.min_seconds, timing.max_repeats)
        load = load_columns(monitor.result)
        for name, result in measured.items():
            stats = result.median_stats()
            time_s = statistics.median(result.times)
            # Priced by the latest (largest) run: small runs overprice (fixed costs), which errs on the safe side.
            bytes_per_edge = max(MIN_BYTES_PER_EDGE, (result.peak_extra or 0) / max(stats.sampled_edges, 1))
            history[name] = History(num_layers, stats, time_s, bytes_per_edge)
            median = bootstrap_interval(result.times)
            rows.append({
                **base, "sampler": name, "status": "ok", "reason": "", "time_s": time_s,
                "time_s_ci_low": median.low, "time_s_ci_high": median.high,
                "time_s_min": min(result.times), "time_s_max": max(result.times), "repeats": len(result.times),
                "warmup": result.warmup, "times_s": json.dumps([round(t, 7) for t in result.times]), **load,
                "sampled_edges": stats.sampled_edges, "estimated_edges": estimates[name],
                "unique_nodes_per_hop": json.dumps(stats.unique_nodes_per_hop),
                "total_unique_nodes": sum(stats.unique_nodes_per_hop), "one_hop_calls": stats.one_hop_calls,
                "sampled_edges_per_s": stats.sampled_edges / time_s if time_s > 0 else math.nan,
                "peak_extra_mib": None if result.peak_extra is None else result.peak_extra / 2**20,
                "backend": adapters[name].backend + (f" ({result.backend})" if result.backend else ""),
            })
            print(f"[{setting.name} L={num_layers}] {name}: {time_s:.4f} s/batch [{median.low:.4f}, "
                  f"{median.high:.4f}] ({len(result.times)} repeats), {stats.sampled_edges:,} edges, nodes/hop "
                  f"{stats.unique_nodes_per_hop}, one-hop calls {stats.one_hop_calls:,}", flush=True)
        del measured
        gc.collect()
    return rows


def measure_interleaved(graph, fanouts: tuple[int, ...], adapters: dict[str, SamplerAdapter],
                        plans: dict[str, tuple[int, int, bool]], pool: torch.Tensor, num_roots: int, seed: int,
                        replace: bool, min_seconds: float = 0.0, max_repeats: int = 0) -> dict[str, Measured]:
    """Warm-ups, then timed repeats with every sampler on the same new roots (order rotated per repeat).

    ``plans[name] = (warm-ups, timed repeats, extendable)``: after the planned repeats, rounds of the extendable
    samplers continue while their timed calls in this configuration took less than ``min_seconds`` in all, up to
    ``max_repeats`` repeats (a slow peer's calls do not count: they would stop the rounds of the fast samplers
    the claim compares).
    """
    samples = {name: adapter.build(graph, fanouts, replace) for name, adapter in adapters.items()}
    results = {name: Measured(warmup=plans[name][0], backend=getattr(samples[name], "backend", None))
               for name in adapters}
    names = list(adapters)
    warm_roots = torch.Generator().manual_seed(seed + 1_000_003)
    for w in range(max((p[0] for p in plans.values()), default=0)):
        roots = _draw_roots(pool, num_roots, warm_roots)
        for name in names:
            if w < plans[name][0]:
                _call(samples[name], roots, seed + 7919 * (w + 1), adapters[name], None)
    timed_roots = torch.Generator().manual_seed(seed)
    planned = max((p[1] for p in plans.values()), default=0)
    extendable = [name for name in names if plans[name][2]]
    r = 0
    while r < planned or (extendable and r < max_repeats
                          and sum(sum(results[n].times) for n in extendable) < min_seconds):
        roots = _draw_roots(pool, num_roots, timed_roots)
        order = names[r % len(names):] + names[:r % len(names)] if names else []
        for name in order:
            if r < plans[name][1] or (r >= planned and name in extendable):
                _call(samples[name], roots, seed + r, adapters[name], results[name])
        r += 1
    return results


def paired_times(row_times: str | float, dense_times: str | float) -> tuple[list[float], list[float]]:
    """The repeats two samplers of one configuration both ran (a common prefix of the rounds: repeat ``r`` of
    both used the same roots), from their ``times_s`` cells."""
    if not isinstance(row_times, str) or not isinstance(dense_times, str):
        return [], []
    mine, dense = json.loads(row_times), json.loads(dense_times)
    count = min(len(mine), len(dense))
    return mine[:count], dense[:count]


def add_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """``time_ratio_vs_dense`` (geometric mean of the paired per-repeat ratios, with its 95 % interval and the
    number of pairs) and ``edges_ratio_vs_dense`` (median sampled edges / DENSE's) of every measured row against
    DENSE's row of the same setting and layer count (NaN where DENSE has no measured row)."""
    table = table.copy()
    key = ["setting", "layers"]
    dense = table[(table["sampler"] == "dense") & (table["status"] == "ok")].set_index(key)
    index = pd.MultiIndex.from_frame(table[key])
    dense_times = dense["times_s"].reindex(index).to_numpy(object)
    ratios = [ratio_interval(*paired_times(mine, theirs)) if status == "ok" else None
              for mine, theirs, status in zip(table["times_s"], dense_times, table["status"])]
    table["time_ratio_vs_dense"] = [r.estimate if r else math.nan for r in ratios]
    table["time_ratio_vs_dense_ci_low"] = [r.low if r else math.nan for r in ratios]
    table["time_ratio_vs_dense_ci_high"] = [r.high if r else math.nan for r in ratios]
    table["paired_repeats"] = pd.array([r.n if r and r.n else None for r in ratios], dtype="Int64")
    table["edges_ratio_vs_dense"] = (table["sampled_edges"].to_numpy(float)
                                     / dense["sampled_edges"].reindex(index).to_numpy(float))
    return table


def sampling_code_sha() -> str:
    """SHA-256 (12 hex digits) of the sources of ``systems/sampling`` (names and contents, sorted by name): pins
    the samplers measured even when the git tree is dirty."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted((REPO_ROOT / "systems" / "sampling").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


PROVENANCE = ("threads", "git_sha", "sampling_code_sha", "torch", "torch_geometric", "python", "cpu_model",
              "cpu_cores", "date")
"""Provenance columns shared by every row."""


def summary_table(table: pd.DataFrame) -> pd.DataFrame:
    """One line per setting x layer count: time and edges per sampler side by side, and naive/DENSE ratios."""
    ok = table[table["status"] == "ok"]
    wide = ok.pivot_table(index=["setting", "layers"], columns="sampler", values=["time_s", "sampled_edges"],
                          aggfunc="first")
    wide.columns = [f"{sampler}_{value}" for value, sampler in wide.columns]
    naive = table[table["sampler"] == "naive"].set_index(["setting", "layers"])
    wide["naive/dense time"] = naive["time_ratio_vs_dense"].reindex(wide.index)
    wide["naive/dense edges"] = naive["edges_ratio_vs_dense"].reindex(wide.index)
    if "dense-torch_time_s" in wide and "naive-torch_time_s" in wide:
        wide["naive-torch/dense-torch time"] = wide["naive-torch_time_s"] / wide["dense-torch_time_s"]
    return wide.reset_index()


def run(*, mode: Mode = "full", csv: Path = DEFAULT_CSV, png: Path | None = DEFAULT_PNG, data: Path = DATA,
        num_nodes: int | None = None, settings: Sequence[str] = ("livejournal", "papers"),
        layers: Sequence[int] = (1, 2, 3, 4, 5), samplers: Sequence[str] | None = None,
        timing: Timing | None = None, threads: int | None = None) -> pd.DataFrame:
    """Run the grid and write the table to ``csv`` (and its figure to ``png``; none: no figure); return the table.

    ``quick`` mode (or ``num_nodes``) shrinks the graphs and batches; ``timing`` defaults to
    :meth:`Timing.of_mode`; ``threads``: ``torch.set_num_threads`` (none: torch's default); ``data``: the store
    cache; ``samplers``: names of :func:`sampler_names` (none: every registered sampler)."""
    from suite.results import export

    quick = mode == "quick"
    timing = timing or Timing.of_mode(mode)
    if threads is not None:
        torch.set_num_threads(threads)
    setups = make_settings(quick, num_nodes)
    adapters, missing = available_samplers(default_samplers() if samplers is None else samplers)
    for name, reason in missing.items():
        print(f"{name}: skipped ({reason})", flush=True)
    prov = provenance(*PROVENANCE, sampling_code_sha=sampling_code_sha())
    gc.collect()
    gc.freeze()  # the imports' objects: out of the collector's way, so the collections between batches are cheap
    print(f"torch threads: {prov['threads']} ({'set by --threads' if threads else 'default'}), "
          f"torch {prov['torch']}", flush=True)
    rows: list[dict] = []
    started = time.perf_counter()
    for name in settings:
        setting = setups[name]
        t0 = time.perf_counter()
        store = open_store(setting, data)
        print(f"[{name}] store {store.name} ({store.num_nodes:,} nodes, {store.num_edges:,} edges) ready in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        rows += run_setting(setting, store, layers, adapters, missing, timing, prov)
    for row in rows:
        row.update(quick=quick, seed=timing.seed)
    table = add_ratios(pd.DataFrame(rows).reindex(columns=list(COLUMNS)))
    for column in INTEGER_COLUMNS:  # counts stay integers next to the skipped rows' blanks
        table[column] = table[column].astype("Int64")
    order = {name: i for i, name in enumerate(sampler_names())}
    table = table.sort_values(["setting", "layers", "sampler"], key=lambda c: c.map(order) if c.name == "sampler"
                              else c, kind="stable").reset_index(drop=True)
    export(table, csv)
    print(f"wrote {csv} ({len(table)} rows) in {time.perf_counter() - started:.0f} s", flush=True)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary_table(table).to_string(index=False))
        skipped = table[table["status"] == "skipped"]
        if len(skipped):
            print(skipped[["setting", "layers", "sampler", "reason"]].to_string(index=False))
    if png is not None:

        plot_sampling(csv, png)
        print(f"wrote {png}", flush=True)
    return table


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options: the keyword arguments of :func:`run` (quick mode changes the defaults of the
    repeats)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_options(parser, quick=f"small graphs and batches, {QUICK_REPEATS} repeats (seconds)",
                       data=("--data-dir",), seed=0)
    parser.add_argument("--num-nodes", type=int, help="graph size override for both settings (implies small "
                        "batches, like --quick)")
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="output table (default: %(default)s)")
    parser.add_argument("--png", type=Path, default=DEFAULT_PNG, help="output figure (default: %(default)s)")
    parser.add_argument("--no-plot", dest="png", action="store_const", const=None, help="do not draw the figure")
    parser.add_argument("--settings", nargs="+", default=["livejournal", "papers"],
                        choices=["livejournal", "papers"])
    parser.add_argument("--layers", nargs="+", type=int, default=[1, 2, 3, 4, 5], choices=[1, 2, 3, 4, 5])
    parser.add_argument("--samplers", nargs="+", default=default_samplers(), choices=sampler_names(),
                        help="default: every registered sampler, %(default)s")
    parser.add_argument("--repeats", type=int,
                        help=f"timed batches per configuration (default 5; quick {QUICK_REPEATS})")
    parser.add_argument("--warmup", type=int, help="untimed batches first (default 1)")
    parser.add_argument("--long-batch-s", type=float, default=10.0,
                        help="expected batch time above which --long-repeats and no warm-up apply")
    parser.add_argument("--long-repeats", type=int, default=3)
    parser.add_argument("--peer-repeats", type=int,
                        help="at most this many timed repeats for samplers other than naive and DENSE, in the first "
                             f"rounds (default: as --repeats; quick {QUICK_PEER_REPEATS})")
    parser.add_argument("--min-seconds", type=float,
                        help="keep adding timed rounds of naive and DENSE while their calls in a configuration took "
                             "less than this in all (default 5; quick 0)")
    parser.add_argument("--max-repeats", type=int, default=25, help="cap of those extra rounds (default 25)")
    parser.add_argument("--max-memory-gib", type=float, default=8.0,
                        help="skip configurations estimated to need more (default: %(default)s)")
    parser.add_argument("--replace", action="store_true", help="sample with replacement when degree > fanout")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: leave torch's default)")
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    timing_fields = [field.name for field in dataclasses.fields(Timing)]
    timing = Timing.of_mode(args.mode, **{name: getattr(args, name) for name in timing_fields})
    if timing.repeats < 1 or timing.long_repeats < 1 or timing.warmup < 0:
        parser.error("--repeats and --long-repeats must be >= 1, --warmup >= 0")
    options = {name: value for name, value in vars(args).items() if name not in timing_fields}
    return argparse.Namespace(**options, timing=timing)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return cli(run, vars(parse_args(argv)), "sampling")


# ---------------------------------------------------------------------------------------------- the figure
def _setting_title(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    fanouts = rows.sort_values("layers")["fanouts"].iloc[-1]
    return (f"{first['setting']}: {first['dataset']} ({int(first['num_nodes']):,} nodes)\n"
            f"{int(first['num_roots']):,} roots, {first['direction']}-edges, fanouts {fanouts}")


def sampler_styles(samplers: Sequence[str]) -> dict[str, tuple[str, str, str]]:
    """``(marker, label, colour)`` of each sampler of a sampling table, from its registered class (its ``label``
    and ``marker``; a backend variant ``NAME-BACKEND`` is NAME's label with the backend named, drawn with its own
    marker); one not registered here is labelled by its name. Every sampler gets a distinct marker."""
    styles: dict[str, tuple[str, str, str]] = {}
    for sampler in samplers:
        base, _, backend = sampler.partition("-")
        label = display_label("SAMPLERS", base) + (f", {backend} backend" if backend else "")
        taken = [marker for marker, _, _ in styles.values()]
        marker = next_marker(taken) if backend else marker_of("SAMPLERS", base, taken)
        styles[sampler] = (marker, label, color_of(sampler))
    return styles


def plot_sampling(csv_path: str | Path, out_png: str | Path) -> Path:
    """Sampling comparison (``experiments/figures/sampling.py``): per setting, time per batch vs layers (log y, one line
    per sampler: the median with its 95 % bootstrap interval; naive / DENSE annotated with its paired 95 %
    interval) above sampled edges per batch vs layers (log y). Rows measured under foreign load are hollow.

    Reads only ``csv_path``; skipped rows are listed under the panels with their reasons.
    """
    table = pd.read_csv(csv_path)
    settings = list(dict.fromkeys(table["setting"]))
    with styled():
        fig, axes = plt.subplots(2, len(settings), figsize=(6.0 * len(settings), 8.0), squeeze=False,
                                 sharex="col", layout="constrained")
        for column, setting in enumerate(settings):
            rows = table[table["setting"] == setting]
            ok = rows[rows["status"] == "ok"]
            time_ax, edges_ax = axes[0][column], axes[1][column]
            styles = sampler_styles(list(dict.fromkeys(table["sampler"])))
            for sampler in dict.fromkeys(rows["sampler"]):
                marker, label, color = styles[sampler]
                line = ok[ok["sampler"] == sampler].sort_values("layers")
                if line.empty:
                    continue
                peer = sampler not in CLAIM_SAMPLERS  # dashed and hollow: never hides DENSE's line
                style = {"linestyle": "--" if peer else "-", "markerfacecolor": "none" if peer else color,
                         "zorder": 1.8 if peer else 2.2}
                time_ax.errorbar(line["layers"], line["time_s"], yerr=error_bars(line, "time_s"), marker=marker,
                                 color=color, label=label, **style)
                loaded = line[flagged_under_load(line)]
                time_ax.plot(loaded["layers"], loaded["time_s"], marker, color=color, markerfacecolor="white",
                             markersize=9, linestyle="none")
                edges_ax.plot(line["layers"], line["sampled_edges"], marker=marker, color=color, label=label,
                              **style, markersize=8 if peer else 5)
            naive = ok[ok["sampler"] == "naive"].dropna(subset=["time_ratio_vs_dense"])
            for _, row in naive.iterrows():
                low, high = row.get("time_ratio_vs_dense_ci_low"), row.get("time_ratio_vs_dense_ci_high")
                interval = f"\n[{low:.2f}, {high:.2f}]" if pd.notna(low) and pd.notna(high) else ""
                time_ax.annotate(f"{row['time_ratio_vs_dense']:.2f}x{interval}", (row["layers"], row["time_s"]),
                                 textcoords="offset points", xytext=(0, 8), ha="center", fontsize=7,
                                 color=COLORS["naive"])
                edges_ax.annotate(f"{row['edges_ratio_vs_dense']:.1f}x", (row["layers"], row["sampled_edges"]),
                                  textcoords="offset points", xytext=(0, 7), ha="center", fontsize=7,
                                  color=COLORS["naive"])
            for ax in (time_ax, edges_ax):
                ax.set_yscale("log")
                low, high = ax.get_ylim()
                ax.set_ylim(low, high * 3)  # room for the annotations
                ax.grid(True, which="both", alpha=0.25)
            time_ax.set_title(_setting_title(rows))
            time_ax.set_ylabel("time per batch (s): median, 95 % CI")
            edges_ax.set_ylabel("sampled edges per batch (median)")
            edges_ax.set_xlabel("layers (hops)")
            edges_ax.set_xticks(sorted(rows["layers"].unique()))
            time_ax.legend(loc="upper left")
            skipped = rows[rows["status"] == "skipped"]
            notes = [f"{s} skipped: {', '.join(f'L{int(l)}' for l in grp['layers'])} ({grp['reason'].iloc[0]})"
                     for s, grp in skipped.groupby("sampler", sort=False)]
            if notes:
                edges_ax.text(0.0, -0.16, "\n".join(notes), transform=edges_ax.transAxes, fontsize=7, va="top",
                              wrap=True)
        first = table.iloc[0]
        repeats = table["repeats"].dropna()
        fig.suptitle(f"Multi-hop sampling per mini-batch (annotations: naive / DENSE, paired by roots)\n"
                     f"{int(first['threads'])} torch threads, torch {first['torch']}, {str(first['date'])[:10]}, "
                     f"git {str(first['git_sha'])[:10]}, samplers {first.get('sampling_code_sha', '?')}")
        caption(fig, f"{MARIUSGNN}, Fig. 7 as the report cites it (DENSE vs layer-wise sampling time as layers grow)",
                f"{Path(csv_path).name}, {'quick (small graphs)' if bool(first.get('quick')) else 'full'} mode",
                "95 % bootstrap interval of the median over "
                + (f"{int(repeats.min())}" if len(repeats) and repeats.min() == repeats.max() else
                   f"{int(repeats.min()) if len(repeats) else 0}-{int(repeats.max()) if len(repeats) else 0}")
                + " timed repeats; ratio intervals: paired log t over the repeats",
                load_note(table.drop_duplicates(["setting", "layers"]),
                                      lambda r: f"{r['setting']} L{int(r['layers'])}"))
        return save_figure(fig, out_png)


# ---------------------------------------------------------------------------------------------- the claims
@claim("dense-speedup", "DENSE samples faster than layer-wise sampling, and its advantage grows with the number "
       "of layers (MariusGNN, Fig. 7)", ("sampling.csv",))
def dense_speedup(results: Path) -> Finding:
    table = pd.read_csv(results / "sampling.csv")
    ok = table[table["status"] == "ok"]
    used, loaded = split_under_load(ok)
    parts, verdicts, estimates = [], [], []
    for setting, rows in used.groupby("setting", sort=False):
        by = {(r["sampler"], int(r["layers"])): r for _, r in rows.iterrows()}
        layers = sorted(l for s, l in by if s == "naive" and l >= 3 and ("dense", l) in by)
        if not layers:
            continue
        ratios, xs, logs = [], [], []
        for count in layers:
            ratio = table_interval(by[("naive", count)], "time_ratio_vs_dense", "paired_repeats", "paired log t")
            ratios.append(ratio)
            estimates.append(Estimate(f"{setting} L{count} naive/DENSE time", ratio, "> 1"))
            verdicts.append(above(ratio, 1.0))
            naive, dense = paired_times(by[("naive", count)]["times_s"], by[("dense", count)]["times_s"])
            xs += [count] * len(naive)
            logs += [math.log(a / b) for a, b in zip(naive, dense) if a > 0 and b > 0]
        slope = slope_interval(xs, logs)
        growth = Interval(math.exp(slope.estimate), math.exp(slope.low), math.exp(slope.high), slope.n, slope.method) \
            if slope.defined else Interval(math.nan, math.nan, math.nan, slope.n, slope.method)
        estimates.append(Estimate(f"{setting} growth of naive/DENSE per layer", growth, "> 1"))
        verdicts.append(above(slope, 0.0, min_n=3) if len(layers) > 1 else INCONCLUSIVE)
        edges = ", ".join(f"{by[('naive', c)]['edges_ratio_vs_dense']:.2f}" for c in layers)
        repeats = sorted({int(by[("naive", c)]["paired_repeats"]) for c in layers})
        parts.append(f"{setting}: naive/DENSE time {'; '.join(str(r) for r in ratios)} at "
                     f"{', '.join(map(str, layers))} layers ({'-'.join(map(str, repeats))} paired repeats), growth "
                     f"x{growth} per layer (edges {edges})")
    if not parts:
        return Finding("no setting with naive and DENSE rows at 3 or more layers measured without load", "",
                       INCONCLUSIVE, excluded=load_exclusions(loaded, lambda r: f"{r['setting']} L{r['layers']}"))
    quick = bool(table["quick"].iloc[0])
    setting = (f"{'quick (small graphs)' if quick else 'full'}: "
               + ", ".join(f"{s} {r['dataset']} {int(r['num_roots'])} roots"
                           for s, r in used[used["sampler"] == "naive"].groupby("setting").first().iterrows())
               + "; faster: every 3+ layer ratio > 1; grows: the slope of log(naive/DENSE) over layers > 0")
    return Finding("; ".join(parts), setting, combine(verdicts), tuple(estimates),
                   excluded=load_exclusions(loaded.drop_duplicates(["setting", "layers"]),
                                      lambda r: f"{r['setting']} L{int(r['layers'])}"))


@claim("dense-vs-pyg", "DENSE samples faster than PyG's sampler, in sampled edges/s, at every layer count (the "
       "peer a PyG user has today)", ("sampling.csv",), peer=True)
def dense_vs_pyg(results: Path) -> Finding:
    table = pd.read_csv(results / "sampling.csv")
    pyg = table[table["sampler"] == "pyg"]
    if pyg.empty or (pyg["status"] != "ok").all():
        reason = pyg["reason"].dropna().iloc[0] if len(pyg) and pyg["reason"].notna().any() else "no pyg row"
        return Finding(f"PyG rows skipped: {reason}", "", NOT_TESTABLE, reason=f"PyG could not sample here: {reason}")
    rows, loaded = split_under_load(pyg[pyg["status"] == "ok"])
    parts, verdicts, estimates = [], [], []
    for setting, group in rows.groupby("setting", sort=False):
        ratios = []
        for _, row in group.sort_values("layers").iterrows():
            # edges/s of DENSE over PyG's = PyG's time / DENSE's (paired repeats) x DENSE's edges / PyG's
            edges = float(row["edges_ratio_vs_dense"]) if pd.notna(row.get("edges_ratio_vs_dense")) else 1.0
            time_ratio = table_interval(row, "time_ratio_vs_dense", "paired_repeats", "paired log t over repeats")
            speedup = time_ratio.scaled(1.0 / edges) if edges > 0 else time_ratio
            name = f"{setting} L{int(row['layers'])} DENSE/PyG edges/s"
            estimates.append(Estimate(name, speedup, "> 1"))
            verdicts.append(above(speedup, 1.0))
            ratios.append(f"{int(row['layers'])}L x{speedup}")
        parts.append(f"{setting}: DENSE/PyG sampled edges/s {', '.join(ratios)}")
    backend = str(pyg["backend"].dropna().iloc[0]) if pyg["backend"].notna().any() else "PyG"
    quick = bool(table["quick"].iloc[0]) if "quick" in table else False
    setting = (f"{'quick (small graphs)' if quick else 'full'}: paired repeats on the same roots, geometric mean of "
               f"PyG's time / DENSE's with its 95 % interval, scaled by DENSE's / PyG's sampled edges; PyG = {backend}")
    return Finding("; ".join(parts), setting, combine(verdicts) if verdicts else INCONCLUSIVE, tuple(estimates),
                   excluded=load_exclusions(loaded, lambda r: f"{r['setting']} L{int(r['layers'])}"))


# ---------------------------------------------------------------------------------------------- the job
def _reproduce(mode: Mode, paths: Paths) -> None:
    run(mode=mode, csv=paths.results / "sampling.csv", png=paths.results / "sampling.png", data=paths.data)


FIGURE = Figure(
    "sampling", "DENSE vs naive sampling: time per batch and sampled edges vs layers", _reproduce,
    ("sampling.csv", "sampling.png"), "about 8 minutes (measured 8.4 on the quiet 2 cores at 16234ac from a fresh "
    "data folder); livejournal-like and papers-like-s stores, ~4 GiB", __name__,
    plots=(Plot("sampling", plot_sampling, "sampling.csv"),), claims=(dense_speedup, dense_vs_pyg),
    tables={"sampling.csv": TableSpec(("setting", "layers", "sampler"))})
"""The sampling figure, registered in :data:`experiments.plugins.FIGURES`."""


__all__ = ["COLUMNS", "SamplerAdapter", "Setting", "Timing", "add_ratios", "available_samplers", "default_samplers",
           "make_settings", "main", "run", "sampler_names", "summary_table"]

if __name__ == "__main__":
    raise SystemExit(main())
