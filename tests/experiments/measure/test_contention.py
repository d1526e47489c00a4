"""The contention microbenchmark (experiments/measure/contention.py): a smoke run that records where its numbers
come from, and loader processes that never free memory a load reads."""

from __future__ import annotations

import json
import time

import pytest

from experiments.measure.contention import _LoadAgain, _Loaders, _workload, measure_contention


def test_the_microbenchmark_runs_and_records_where_its_numbers_come_from(sync_pipelined_run):
    spec, _ = sync_pipelined_run
    # One core (so one loader beside compute oversubscribes it), a tiny graph and short windows: a smoke run.
    contention = measure_contention(spec, num_nodes=2000, num_edges=10_000, feature_dim=8, num_classes=3,
                                    max_loaders=2, cores=1, threads=1, window_s=0.05, repeats=1,
                                    attempts=1, quiet_wait_s=0.0)
    assert contention.load_scale["thread"] == 1.0 and contention.load_scale.get("process", 1.0) > 0
    for kind in ("thread", "process"):
        table = contention.table(kind)
        assert set(table.factors) == {(True, 1), (True, 2), (False, 2)}
        assert table.factors[(True, 1)]["compute"] > 0
    data = json.loads(json.dumps(contention.to_dict()))
    provenance = data["provenance"]
    assert provenance["workload"]["sampler"] == spec.sampler.name and provenance["torch_threads"] == 1
    assert {"measured_at", "machine", "load_average_before", "other_processes_cores", "quiet", "raw"} <= set(provenance)
    state = provenance["raw"]["repeats"][0]["kinds"]["thread"]["states"][0]
    assert {"window_s", "loads_s", "other_cores", "attempts_other_cores", "factors"} <= set(state)


@pytest.mark.parametrize("sampler", ["naive", "dense"])
def test_loader_processes_never_free_memory_their_next_load_reads(sampler):
    """The segfault of the naive sampler's contention calibrations: a worker's queue thread pickled a load whose
    sample holds the workload's ``roots`` tensor itself, which moved (freed) the roots' memory while the worker's
    next load read it. Loads are handed over without moving any tensor the workload keeps, and a burst of loads in
    two worker processes (compiled kernels with bounds checks, as in every test) all succeed."""
    from multiprocessing.reduction import ForkingPickler

    import torch

    from suite.config import spec_from_dict

    spec = spec_from_dict({"dataset": {"name": "synthetic", "preset": "tiny"}, "sampler": {"name": sampler},
                           "model": {"num_layers": 3, "fanouts": [5, 5, 5]}, "training": {"batch_size": 200}})
    work = _workload(spec, 5000, 50_000, 8, 3, 5000, 0)
    kept = (work.roots, work.features, work.labels)
    with _Loaders(work, "process", 2) as loaders:
        pointers = [tensor.data_ptr() for tensor in kept]
        ForkingPickler.dumps(_LoadAgain(work)[0])  # what a worker's queue thread does with every load
        assert [tensor.data_ptr() for tensor in kept] == pointers
        deadline = time.perf_counter() + 20
        while len(loaders.stamps) < 40 and time.perf_counter() < deadline and loaders.error is None:
            time.sleep(0.01)
        loaders.check()
        assert len(loaders.stamps) >= 40
    sample = work.load()[0]  # the parent's workload still samples what it sampled before
    assert torch.equal(sample.roots, work.roots)
