"""Compile the suite's numba kernels into their on-disk caches before the test workers start.

A fresh clone has no numba cache, so every test worker and every process the tests start would compile the same
kernels at the same time (about a minute and a half of ``make test`` on two cores). This runs one tiny run of each
kind that uses kernels (store generation and its checksums, both samplers, the disk system for node classification
and link prediction, TransE's distances, every feature-cache policy) in one process, with the tests' settings
(``GNNSUITE_KERNEL_BOUNDSCHECK=1``, as tests/conftest.py sets), into a temporary folder.

    python -m tests.support.warm_kernels
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

os.environ.setdefault("GNNSUITE_KERNEL_BOUNDSCHECK", "1")  # before any kernel module is imported

SHALLOW_LP = {"model": {"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": "distmult",
                        "embedding_dim": 8, "learnable_embeddings": True, "dropout": 0.0},
              "sampler": {"name": "dense", "direction": "both"},
              "training": {"task": "link_prediction", "optimizer": "adagrad", "learning_rate": 0.1,
                           "negatives": {"num_chunks": 2, "negatives_per_positive": 10}},
              "evaluation": {"batch_size": 128}}
NC = {"model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 8, "fanouts": [5, 5]}}
FEATURE_CACHE_POLICIES = ("belady", "lru", "s3fifo", "static_degree", "none")


def _specs(store: str) -> list[dict]:
    dataset = {"name": "store", "root": store}
    disk = {"name": "disk", "options": {"policy": "sequential", "num_partitions": 4, "buffer_capacity": 2}}
    specs = [{**NC, "sampler": {"name": sampler}} for sampler in ("dense", "naive")]
    specs.append({**NC, "system": disk})
    specs.append({**SHALLOW_LP, "system": {**disk, "options": {**disk["options"], "policy": "beta"}}})
    specs.append({**SHALLOW_LP, "model": {**SHALLOW_LP["model"], "decoder": "transe"}})
    specs += [{**NC, "system": {"name": "feature_cache", "options": {"policy": policy, "cache_fraction": 0.25}}}
              for policy in FEATURE_CACHE_POLICIES]
    for spec in specs:
        spec.update(dataset=dataset, seed=0)
        spec["system"] = {"device": "cpu", **spec.get("system", {})}
        spec["training"] = {"epochs": 1, "batch_size": 64, **spec.get("training", {})}
    return specs


def main() -> int:
    from suite.config import spec_from_dict
    from suite.data.synthetic import generate
    from suite.runner import run_spec

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="warm-kernels-") as folder:
        generate("tiny", os.path.join(folder, "store"))
        for number, data in enumerate(_specs(os.path.join(folder, "store"))):
            summary = run_spec(spec_from_dict(data, f"warm-up spec {number}"), os.path.join(folder, "runs"))
            if summary.get("status") != "completed":
                print(f"warm-up run {number} did not complete: {summary.get('error')}", file=sys.stderr)
                return 1
    print(f"numba kernels compiled and cached in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
