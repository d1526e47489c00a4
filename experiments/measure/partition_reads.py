"""Read time per byte of the partition buffer's feature reads at fine vs coarse partitioning (issue 30, item 2).

Usage::

    python experiments/measure/partition_reads.py --out /tmp/partition-reads \
        [--graph papers-like-s,num_nodes=800000,avg_degree=4] [--fine 4096] [--coarse 16] [--fraction 0.25] \
        [--repeats 10] [--seed 0] [--run-partitions 4096 8192] [--run-graph tiny-like...]

One synthetic store is generated and partitioned at both ``p`` (``labeled-first`` order, as the disk system's
``sequential`` policy expects). A *fill* is what the buffer reads to enter the epoch's state of MariusGNN's
SEQUENTIAL ordering (:class:`systems.disk.policies.node_policies.SequentialPolicy` with ``c = fraction * p``: the
partitions of the training nodes and a fresh random draw of the others): with the features file evicted from the
page cache, every partition of the state is read into its buffer frame as the disk system does (one scatter read
per run of adjacent partitions, runs spread over ``--threads`` threads,
:meth:`systems.disk.buffer.FeatureBuffer.read_partitions`; CRC-32 checks off, they are not IO). A store partitioned
before at ``--out`` is reused (its partitioning time is then not measured). Repeats alternate coarse and fine (paired, side by side, so that load on a shared machine hits both);
repeat ``r`` plans epoch ``r``. Reported: seconds per byte at each ``p`` (median), and the ratio fine / coarse of
each pair with its geometric mean and a 95 % t-interval on the log ratios.

``--run-partitions``: also time a full disk node-classification run (one epoch, full-graph evaluation) of a small
graph partitioned at each of those ``p`` (the partitioning and the epoch timed apart).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import numpy as np


def fill_partitions(pstore, num_partitions: int, capacity: int, seed: int, epoch: int) -> np.ndarray:
    """The partitions (ascending) of the SEQUENTIAL state of ``epoch`` (training partitions + a fresh draw)."""
    from systems.disk.policies import PolicySpec, make_plan

    offsets = pstore.array("partition_offsets")
    train = np.asarray(pstore.array("train_nodes"))
    parts = np.searchsorted(offsets, train, side="right") - 1
    spec = PolicySpec(num_partitions, capacity, task="node_classification", train_partitions=parts)
    return np.sort(make_plan("sequential", spec, seed=seed, epoch=epoch).state(0))


def time_fill(pstore, partitions: np.ndarray, capacity: int, threads: int) -> tuple[float, int, int]:
    """``(seconds, bytes, reads)`` of reading ``partitions`` into a cold buffer (the features file evicted), runs
    read by ``threads`` threads as the disk system's ``read_threads``."""
    import concurrent.futures

    from suite.io import IOCounters, evict_page_cache
    from systems.disk.buffer import FeatureBuffer, PartitionArray

    evict_page_cache(pstore.file("features"), sync=True)
    counters = IOCounters()
    buffer = FeatureBuffer(PartitionArray(pstore.file("features"), counters, evict=True),
                           pstore.array("partition_offsets"), capacity)
    frames = np.arange(len(partitions))
    pool = concurrent.futures.ThreadPoolExecutor(threads) if threads > 1 else None
    try:
        started = time.perf_counter()
        nbytes = sum(run[-1] for run in buffer.read_partitions(partitions, frames, pool))
        seconds = time.perf_counter() - started
    finally:
        buffer.source.close()
        if pool is not None:
            pool.shutdown()
    return seconds, nbytes, counters.snapshot()["reads"]


def log_ratio_interval(ratios: list[float]) -> tuple[float, float, float]:
    """Geometric mean of ``ratios`` and its 95 % t-interval (on the logs)."""
    from scipy import stats

    logs = np.log(ratios)
    mean = float(logs.mean())
    half = float(stats.t.ppf(0.975, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs))) if len(logs) > 1 else 0
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def measure_reads(store, out: Path, fine: int, coarse: int, fraction: float, repeats: int, seed: int,
                  threads: int) -> dict:
    """Partition ``store`` at both ``p`` and time paired cold fills (see the module docstring)."""
    from suite.data import GraphStore
    from suite.data.partition import partition_store

    stores, partition_s = {}, {}
    for p in (coarse, fine):
        started = time.perf_counter()
        path = out / f"p{p}"
        stores[p] = (GraphStore.open(path) if (path / "metadata.json").exists() else
                     partition_store(store, path, p, order="labeled-first", seed=seed))
        partition_s[p] = time.perf_counter() - started
    rows = []
    for repeat in range(repeats):
        pair = {}
        for p in (coarse, fine):
            capacity = max(1, int(round(fraction * p)))
            parts = fill_partitions(stores[p], p, capacity, seed, repeat)
            seconds, nbytes, reads = time_fill(stores[p], parts, capacity, threads)
            pair[p] = seconds / nbytes
            rows.append({"repeat": repeat, "p": p, "c": capacity, "partitions": len(parts), "reads": reads,
                         "bytes": nbytes, "seconds": seconds, "s_per_byte": seconds / nbytes})
        rows[-1]["ratio"] = pair[fine] / pair[coarse]
    ratios = [row["ratio"] for row in rows if "ratio" in row]
    geo, low, high = log_ratio_interval(ratios)
    summary = {
        "store": str(store.path), "feature_bytes": int(store.metadata["files"]["features"]["bytes"]),
        "fine": fine, "coarse": coarse, "fraction": fraction, "repeats": repeats, "read_threads": threads,
        "partition_s": partition_s,
        **{f"median_mb_per_s_p{p}": 1e-6 / statistics.median(r["s_per_byte"] for r in rows if r["p"] == p)
           for p in (coarse, fine)},
        **{f"median_reads_p{p}": statistics.median(r["reads"] for r in rows if r["p"] == p) for p in (coarse, fine)},
        "ratio_geomean": geo, "ratio_ci95": [low, high], "goal": "<= 1.2",
    }
    return {"summary": summary, "rows": rows}


def time_node_classification(store, out: Path, partitions: list[int], fraction: float, seed: int) -> list[dict]:
    """Partition ``store`` at each ``p`` (timed) and run one epoch of disk node classification (timed)."""
    import torch

    from suite.config import spec_from_dict
    from suite.recorder import Recorder
    from systems.disk.disk_system import disk_system, partitioned_store

    results = []
    for p in partitions:
        capacity = max(1, int(round(fraction * p)))
        started = time.perf_counter()
        partitioned_store(store, p, "labeled-first", seed)
        partition_s = time.perf_counter() - started
        spec = spec_from_dict({
            "dataset": {"name": "store", "root": str(store.path)}, "seed": seed,
            "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 32, "fanouts": [10, 10]},
            "system": {"name": "disk", "device": "cpu", "options": {
                "policy": "sequential", "num_partitions": p, "buffer_capacity": capacity, "order": "labeled-first"}},
            "training": {"batch_size": 256, "epochs": 1, "learning_rate": 0.01},
            "evaluation": {"every": 1, "graph": "full"},
        })
        recorder = Recorder(out / f"run-p{p}", spec)
        system = disk_system(spec, store, torch.device("cpu"), recorder)
        started = time.perf_counter()
        try:
            outcome = system.run()
        finally:
            recorder.close()
        results.append({"p": p, "c": capacity, "partition_s": partition_s, "run_s": time.perf_counter() - started,
                        "epoch_s": outcome.epoch_time_s[0], "states": outcome.epochs[0].extra["states"],
                        "io_read_bytes": outcome.epochs[0].extra["io_read_bytes"],
                        "io_reads": outcome.epochs[0].extra["io_reads"],
                        "test_accuracy": outcome.test_metrics.get("accuracy")})
    return results


def main(argv: list[str] | None = None) -> int:
    """Generate, partition, measure; print and write ``partition_reads.json`` under ``--out``."""
    from suite.data.synthetic import config_from_spec, generate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="scratch folder (stores, runs, the result)")
    parser.add_argument("--graph", default="papers-like-s,num_nodes=800000,avg_degree=4")
    parser.add_argument("--fine", type=int, default=4096)
    parser.add_argument("--coarse", type=int, default=16)
    parser.add_argument("--fraction", type=float, default=0.25, help="c / p")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=16, help="read threads (the disk system's read_threads)")
    parser.add_argument("--run-partitions", type=int, nargs="*", default=[])
    parser.add_argument("--run-graph", default="papers-like-s,num_nodes=100000,avg_degree=10")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {}
    if args.repeats:
        path = args.out / "store"
        store = generate(config_from_spec(args.graph), path, overwrite=True) if not path.exists() else None
        from suite.data import GraphStore

        store = store or GraphStore.open(path)
        result["reads"] = measure_reads(store, args.out, args.fine, args.coarse, args.fraction, args.repeats,
                                        args.seed, args.threads)
        print(json.dumps(result["reads"]["summary"], indent=2))
    if args.run_partitions:
        path = args.out / "run-store"
        store = generate(config_from_spec(args.run_graph), path, overwrite=True)
        result["runs"] = time_node_classification(store, args.out, args.run_partitions, args.fraction, args.seed)
        print(json.dumps(result["runs"], indent=2))
    (args.out / "partition_reads.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
