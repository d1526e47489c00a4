"""Measure the feature-cache system (issue 31): its read bandwidth against ``dd iflag=direct`` on the same file, and
its policies against the in-memory system at one budget.

Usage::

    python -m experiments.measure.feature_cache bandwidth STORE [--batch-rows 20000] [--repeats 3] [--threads 16]
        [--gaps 0 4096 16384]
    python -m experiments.measure.feature_cache policies [--preset arxiv-like] [--params '{"num_nodes": 200000}']
        [--fraction 0.25] [--seeds 0 1 2] [--epochs 2] [--limit-batches 30] [--out /tmp/feature-cache]
        [--policies s3fifo belady] [--pack off|on|both]

``bandwidth`` reads the store's ``features.npy`` through :class:`~systems.feature_cache.direct_io.ExtentReader`
(``O_DIRECT``; default threads and extents) twice: the whole table in order (batches of ``--batch-rows`` rows: one
extent each, what ``dd`` does) and random batches of ``--batch-rows`` distinct rows (a mini-batch's pattern: many
short extents; per ``--gaps`` merge gap: bytes and reads per batch, read and row bandwidth); beside them
``dd iflag=direct bs=4M`` on the same file, interleaved with the reader's repeats. Median over repeats.

``policies`` runs, per seed, the in-memory system and the feature-cache system with each registered policy at
``--fraction`` of the feature table (2-layer GraphSAGE, fanouts 10,5, batch 1000, test split only), side by side,
and prints per policy: test accuracy minus the in-memory run's of the same seed, epoch time over the in-memory
run's (mean of the per-seed ratios; under load when the machine is shared: the summary's ``machine_load`` says),
bytes read per training epoch, and the training hit rate; with ``--pack on|both`` the packed runs (DiskGNN-style,
their packing pass inside the epoch time) with the pass's bytes read and written and seconds; for every unpacked run
the cache simulator's replay of its recorded trace (simulated over measured training bytes, hits equal or not).
The runs go to ``--out`` (never the tracked results/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np


def bandwidth(store_path: Path, batch_rows: int, repeats: int, threads: int | None = None,
              gaps: tuple[int, ...] = (0,)) -> dict:
    """Bytes/s of sequential and random-batch reads through the reader (per merge gap: bytes read, reads, and
    rows delivered per second), and of ``dd iflag=direct``, repeats interleaved."""
    from experiments.figures.disk_nc import dd_read_bandwidth
    from suite.data import GraphStore
    from suite.io import IOCounters
    from systems.feature_cache.direct_io import DEFAULT_IO_THREADS, ExtentReader

    path = GraphStore.open(store_path).file("features")
    reader = ExtentReader(path, IOCounters(), io_threads=threads or DEFAULT_IO_THREADS)
    rows = reader.shape[0]
    rng = np.random.default_rng(0)
    batches = [np.unique(rng.integers(0, rows, size=batch_rows)) for _ in range(10)]
    sequential, dd = [], []
    scattered: dict[int, list[tuple[float, int, int, float]]] = {gap: [] for gap in gaps}
    try:
        reader.read_rows(np.arange(min(rows, 16)))  # compiles the read loop before anything is timed
        reader.read_rows(np.array([0, rows - 1]))
        for _ in range(repeats):
            dd.append(dd_read_bandwidth(path))
            started, before = time.perf_counter(), reader.stats.bytes
            for first in range(0, rows, batch_rows):
                reader.read_rows(np.arange(first, min(rows, first + batch_rows)))
            sequential.append((reader.stats.bytes - before) / (time.perf_counter() - started))
            for gap in gaps:
                reader.merge_gap_bytes = gap
                reader.take_stats()
                started = time.perf_counter()
                for batch in batches:
                    reader.read_rows(batch)
                seconds = time.perf_counter() - started
                stats = reader.take_stats()
                scattered[gap].append((stats.bytes / seconds, stats.bytes, stats.extents,
                                       stats.rows * reader.row_bytes / seconds))
        direct = reader.direct
    finally:
        reader.close()
    dd_median = statistics.median(d for d in dd if d is not None) if any(d is not None for d in dd) else None
    result = {"file": str(path), "file_bytes": path.stat().st_size, "o_direct": direct, "io_threads": reader.io_threads,
              "repeats": repeats, "reader_sequential_Bps": statistics.median(sequential),
              "reader_sequential_Bps_all": sequential, "dd_direct_Bps": dd_median, "dd_direct_Bps_all": dd,
              "random_batches": {str(gap): {"read_Bps": statistics.median(r[0] for r in runs),
                                            "bytes_per_batch": runs[0][1] / len(batches),
                                            "reads_per_batch": runs[0][2] / len(batches),
                                            "row_Bps": statistics.median(r[3] for r in runs)}
                                 for gap, runs in scattered.items()},
              "rows_per_random_batch": statistics.mean(len(b) for b in batches)}
    result["sequential_over_dd"] = result["reader_sequential_Bps"] / dd_median if dd_median else None
    return result


def policy_runs(preset: str, params: dict, fraction: float, seeds: list[int], epochs: int, limit_batches: int | None,
                out: Path, policies: list[str] | None = None, pack: str = "off") -> list[dict]:
    """One summary per (seed, system/policy/packing) run: in-memory, then each cache policy (``policies``, default
    every registered one) unpacked, packed or both (``pack``: off, on, both). Unpacked runs record their access
    trace; the cache simulator replays it (same policy, budget, gap, window) and its training bytes and hits go
    beside the measured ones (``simulated``)."""
    from simulators.cache_model import simulate_cache
    from suite.config import RunSpec
    from suite.runner import run_spec
    from systems.feature_cache.policies import CACHE_POLICIES
    from systems.feature_cache.trace import TRACE_FILE, CacheTrace

    base = {
        "dataset": {"name": "synthetic", "preset": preset, "params": params, "cache_dir": "data"},
        "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 64, "fanouts": [10, 5], "dropout": 0.5},
        "sampler": {"name": "dense"},
        "training": {"batch_size": 1000, "epochs": epochs, "learning_rate": 0.005, "limit_batches": limit_batches},
        "evaluation": {"every": epochs, "batch_size": 4096, "splits": ["test"]},
    }
    packings = {"off": [False], "on": [True], "both": [False, True]}[pack]
    summaries = []
    for seed in seeds:
        systems = [("in_memory", {})] + [
            ("feature_cache", {"policy": name, "cache_fraction": fraction, "pack": packed, "record_trace": not packed})
            for name in (policies or CACHE_POLICIES.names()) for packed in packings]
        for name, options in systems:
            spec = RunSpec.model_validate({**base, "seed": seed,
                                           "system": {"name": name, "device": "cpu", "options": options}})
            summary = run_spec(spec, out)
            label = options.get("policy", "-") + (" packed" if options.get("pack") else "")
            row = {"seed": seed, "system": name, "policy": label, **summary}
            if options.get("record_trace"):
                simulation = simulate_cache(CacheTrace.load(Path(out) / spec.run_id / TRACE_FILE)).total("train:")
                row["simulated"] = {"train_io_read_bytes": simulation.io_read_bytes,
                                    "train_cache_hits": simulation.hits, "train_cache_misses": simulation.misses}
            summaries.append(row)
    return summaries


def policy_table(summaries: list[dict]) -> list[dict]:
    """Per policy, over seeds: accuracy minus in-memory, epoch-time ratio (mean), bytes per epoch, hit rate, packing
    cost, simulated over measured bytes."""
    memory = {s["seed"]: s for s in summaries if s["system"] == "in_memory"}
    rows = []
    for policy in dict.fromkeys(s["policy"] for s in summaries if s["system"] == "feature_cache"):
        runs = [s for s in summaries if s["policy"] == policy]
        cache = [s["feature_cache"] for s in runs]
        row = {
            "policy": policy, "seeds": len(runs),
            "accuracy_minus_in_memory": [_accuracy(s) - _accuracy(memory[s["seed"]]) for s in runs],
            "epoch_time_ratio": statistics.mean(_epoch_s(s) / _epoch_s(memory[s["seed"]]) for s in runs),
            "epoch_time_ratios": [_epoch_s(s) / _epoch_s(memory[s["seed"]]) for s in runs],
            "train_bytes_per_epoch": statistics.mean(c["train"]["io_read_bytes"] for c in cache) / _epochs(runs[0]),
            "hit_rate": statistics.mean(c["train"]["hit_rate"] or 0.0 for c in cache),
            "cache_share": cache[0]["cache_share"], "o_direct": cache[0]["direct_io"],
            "under_load": any((s.get("machine_load") or {}).get("under_load") for s in runs)
        }
        if cache[0].get("pack"):
            row["pack_read_bytes_per_epoch"] = statistics.mean(c["pack"]["pack_read_bytes"] for c in cache) / \
                _epochs(runs[0])
            row["pack_write_bytes_per_epoch"] = statistics.mean(c["pack"]["pack_write_bytes"] for c in cache) / \
                _epochs(runs[0])
            row["pack_s_per_epoch"] = statistics.mean(c["pack"]["pack_s"] for c in cache) / _epochs(runs[0])
        if all("simulated" in s for s in runs):
            row["simulated_over_measured_bytes"] = [s["simulated"]["train_io_read_bytes"] /
                                                    s["feature_cache"]["train"]["io_read_bytes"] for s in runs]
            row["simulated_hits_equal"] = all(s["simulated"]["train_cache_hits"] ==
                                              s["feature_cache"]["train"]["cache_hits"] for s in runs)
        rows.append(row)
    return rows


def _accuracy(summary: dict) -> float:
    return summary["metrics"]["test"]["accuracy"]


def _epochs(summary: dict) -> int:
    return summary["epochs"]


def _epoch_s(summary: dict) -> float:
    return summary["train_time_s"] / _epochs(summary)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    bw = commands.add_parser("bandwidth")
    bw.add_argument("store", type=Path)
    bw.add_argument("--batch-rows", type=int, default=20000)
    bw.add_argument("--repeats", type=int, default=3)
    bw.add_argument("--threads", type=int, default=None)
    bw.add_argument("--gaps", type=int, nargs="+", default=[0])
    runs = commands.add_parser("policies")
    runs.add_argument("--preset", default="arxiv-like")
    runs.add_argument("--params", type=json.loads, default={})
    runs.add_argument("--fraction", type=float, default=0.25)
    runs.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    runs.add_argument("--epochs", type=int, default=2)
    runs.add_argument("--limit-batches", type=int, default=None)
    runs.add_argument("--out", type=Path, default=Path("/tmp/feature-cache"))
    runs.add_argument("--policies", nargs="+", default=None, help="cache policies (default: every registered one)")
    runs.add_argument("--pack", choices=["off", "on", "both"], default="off",
                      help="run each policy unpacked, packed (system.options.pack) or both")
    args = parser.parse_args(argv)
    if args.command == "bandwidth":
        result = bandwidth(args.store, args.batch_rows, args.repeats, args.threads, tuple(args.gaps))
        print(json.dumps(result, indent=2))
        return
    summaries = policy_runs(args.preset, args.params, args.fraction, args.seeds, args.epochs, args.limit_batches,
                            args.out, args.policies, args.pack)
    print(json.dumps(policy_table(summaries), indent=2, default=str))


if __name__ == "__main__":
    main()
