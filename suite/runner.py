"""Run one spec end to end: resolve the dataset, build the registered system, train, summarize, record.

``summary.json`` is computed here, the same way for every system, from what the system measured
(:class:`suite.run_contract.RunOutcome`) plus process counters and provenance.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from suite.config import RunSpec
from suite.errors import ConfigError, DivergedError
from suite.memory import RUNTIME, MemoryEstimate, bound_allocator, note_run_started, process_is_warm
from suite.data import GraphStore
from suite.metrics import GpuUtilizationSampler
from suite.provenance import io_counters, machine_info, peak_rss_bytes, reset_peak_rss, versions
from suite.recorder import Recorder, completed_run, read_summary
from suite.run_contract import RunOutcome, System, main_metric
from suite.load import LoadMonitor, MachineLoad
from suite import ranks


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; otherwise the named device, checked to exist."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"system.device: {name!r} is not a torch device") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"system.device: {name!r} requested but CUDA is not available")
    return device


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def summarize(spec: RunSpec, store: GraphStore, outcome: RunOutcome, *, wall_time_s: float,
              gpu_utilization: float | None, process_io: tuple[int, int],
              machine_load: MachineLoad | None = None) -> dict[str, Any]:
    """The measured part of ``summary.json`` (pure: from the outcome and counters given)."""
    from suite.pricing import cost_summary, time_to_target

    train_s = sum(outcome.epoch_time_s)
    stage_busy: dict[str, float] = defaultdict(float)
    staleness: list[int] = []
    for stats in outcome.epochs:
        for stage, seconds in stats.stage_busy_s.items():
            stage_busy[stage] += seconds
        staleness.extend(stats.staleness)
    valid_curve = [(epoch, metrics) for epoch, metrics in outcome.valid_metrics]
    main = main_metric(spec.training.task)
    main_curve = [(epoch, metrics.get(main)) for epoch, metrics in valid_curve]
    return {
        "system": spec.system.name,
        "dataset": spec.dataset.preset or spec.dataset.name,
        "dataset_info": {"name": store.name, "num_nodes": store.num_nodes, "num_edges": store.num_edges,
                         "feature_dim": store.feature_dim},
        "task": spec.training.task,
        "model": spec.model.encoder,
        "num_layers": spec.model.num_layers,
        "fanouts": list(spec.model.fanouts),
        "sampler": spec.sampler.name,
        "seed": spec.seed,
        "epochs": len(outcome.epoch_time_s),
        "epoch_time_s": outcome.epoch_time_s,
        "train_time_s": train_s,
        "eval_time_s": list(getattr(outcome, "eval_time_s", [])),
        "valid_points": list(getattr(outcome, "valid_points", [])),
        "wall_time_s": wall_time_s,
        "train_examples_per_s": sum(s.examples for s in outcome.epochs) / train_s if train_s else None,
        "sampled_edges_per_s": sum(s.sampled_edges for s in outcome.epochs) / train_s if train_s else None,
        "loss": [s.loss for s in outcome.epochs],
        "stage_busy_s": dict(stage_busy),
        "compute_utilization": stage_busy.get("compute", 0.0) / train_s if train_s else None,
        "gpu_utilization": gpu_utilization,
        "staleness": {"mean": sum(staleness) / len(staleness) if staleness else 0.0, "max": max(staleness, default=0)},
        "io_read_bytes": outcome.io_read_bytes,
        "io_write_bytes": outcome.io_write_bytes,
        "process_io_read_bytes": process_io[0],
        "process_io_write_bytes": process_io[1],
        "partition_swaps": outcome.partition_swaps,
        "peak_rss_bytes": peak_rss_bytes(),
        "threads": outcome.threads,
        "machine_load": machine_load.to_dict() if machine_load is not None else None,
        "metrics": {
            "main": main,
            "valid": valid_curve[-1][1] if valid_curve else {},
            "valid_curve": [{"epoch": epoch, **metrics} for epoch, metrics in valid_curve],
            "test": outcome.test_metrics,
            "test_curve": [{"epoch": epoch, **metrics} for epoch, metrics in outcome.test_curve],
        },
        "time_to_target": time_to_target(outcome.epoch_time_s, main_curve, spec.evaluation.target_metric),
        "cost_usd": cost_summary(
            spec.machine.profile, spec.machine.hourly_usd, wall_time_s, outcome.epoch_time_s,
            main_curve, spec.evaluation.target_metric,
        ),
    }


def check_inputs(spec: RunSpec, store: GraphStore) -> None:
    """Every check of the run's inputs that needs no training, made before the run folder exists: the store's
    ids, labels, finiteness and checksums (:meth:`GraphStore.check_for_run`), then what the task needs from it.

    Raises:
        DataError / ConfigError: one line naming the file or field.
    """
    from suite.registry import TASKS

    store.check_for_run()  # before anything reaches a compiled kernel or the run folder
    if spec.training.task in TASKS:
        TASKS.get(spec.training.task).check_inputs(spec, store)


def run_spec(spec: RunSpec, out: str | os.PathLike, *, overwrite: bool = False,
             progress: bool = False, placement: Mapping[str, Any] | None = None,
             log_to: tuple[str, ...] | list[str] = (), memory_limit: int | None = None) -> dict[str, Any]:
    """Run ``spec`` into ``out/<run_id>`` and return its summary.

    A run already complete there is not repeated (its summary is returned with ``"skipped": True``) unless
    ``overwrite``. A run folder holding a checkpoint of an unfinished run (killed) resumes from it
    (:mod:`suite.checkpoint`), unless ``overwrite``, which starts over. ``log_to`` names trackers
    (:mod:`suite.tracking`: ``tensorboard``, ``mlflow``) that mirror the records while the run goes. The dataset and device are resolved before the run folder is created, so bad input leaves
    no folder; a failure during training leaves a summary with status ``failed`` (never ``completed``).
    ``placement`` (where a grid executor runs it: executor, node, attempt) is recorded as the summary's
    ``placement``. Before the run folder exists, the system's peak memory is estimated (:mod:`suite.memory`) and a
    run that would exceed the memory available (or ``memory_limit`` bytes) stops with
    :class:`~suite.errors.MemoryLimitError`; the estimate is recorded as the summary's ``memory_estimate``.
    """
    from suite.datasets import open_dataset
    from suite.registry import SYSTEMS

    done = None if overwrite else completed_run(out, spec)
    if done is not None:
        return {**read_summary(done), "skipped": True}
    # --- data-parallel runs (suite/ranks.py): spawn the ranks, or run as one of them ------------------------
    if ranks.world_size_of(spec) > 1:
        if not ranks.is_rank_process():
            return ranks.launch(spec, out, device=resolve_device(spec.system.device), rank_module="suite.runner",
                                overwrite=overwrite, progress=progress, placement=placement)
        try:
            return _run_rank(spec, out, progress, placement)
        finally:
            ranks.shutdown_rank()
    # ---------------------------------------------------------------------------------------------------------
    # the run's own peak, also when a grid runs several runs in one process
    peak_since = "run start" if reset_peak_rss() else "process start"
    store = open_dataset(spec.dataset, progress=progress)
    check_inputs(spec, store)
    device = resolve_device(spec.system.device)
    system_class = SYSTEMS.get(spec.system.name)
    memory = check_run_memory(spec, store, memory_limit)
    if log_to:
        from suite.tracking import check_trackers

        check_trackers(tuple(log_to))
    summary_extra = ({"memory_estimate": {"peak_bytes": memory.peak_bytes, "peak_phase": memory.peak_phase,
                                         "runtime_bytes": memory.resident.get(RUNTIME, 0),
                                         "warm_process": process_is_warm()}}
                     if memory is not None else {})
    summary_extra["peak_rss_since"] = peak_since
    return _run(spec, out, store, device, system_class, Recorder(out, spec, open=False, log_to=tuple(log_to)),
                progress, placement, resume=not overwrite, summary_extra=summary_extra)


def check_run_memory(spec: RunSpec, store: GraphStore, memory_limit: int | None = None) -> MemoryEstimate | None:
    """The registered peak-memory estimate of the run (None for a system without one), checked against the memory
    available (:func:`suite.memory.available_memory`, at most ``memory_limit`` bytes).

    Raises:
        MemoryLimitError: the estimate exceeds it (one line saying what would fit).
    """
    from suite.memory import MEMORY_ESTIMATES, available_memory, check_memory, estimate_memory

    if spec.system.name not in MEMORY_ESTIMATES:
        if memory_limit is not None:
            raise ConfigError(f"--memory-limit: system {spec.system.name!r} declares no memory estimate")
        return None
    import_plugins(spec)
    estimate = estimate_memory(spec, store)
    check_memory(estimate, available_memory(memory_limit), spec.system.name)
    return estimate


def import_plugins(spec: RunSpec) -> None:
    """Import the plugins ``spec`` names (system, task, encoder, decoder, sampler), as the run will: the memory
    their libraries take is then part of the runtime an estimate starts from (:data:`suite.memory.RUNTIME`)."""
    from suite.registry import DECODERS, MODELS, SAMPLERS, SYSTEMS, TASKS

    SYSTEMS.get(spec.system.name)
    TASKS.get(spec.training.task)
    MODELS.get(spec.model.encoder)
    SAMPLERS.get(spec.sampler.name)
    if spec.model.decoder is not None:
        DECODERS.get(spec.model.decoder)


def dry_run(spec: RunSpec, memory_limit: int | None = None) -> dict[str, Any]:
    """What ``gnnsuite run --dry-run`` reports, running nothing: the dataset opened and checked, the system's
    options validated, its peak-memory estimate and the memory available (no run folder is created; a dataset not
    yet in the cache is generated or prepared, as the run would)."""
    from suite.datasets import open_dataset
    from suite.memory import MEMORY_ESTIMATES, available_memory, estimate_memory
    from suite.registry import SYSTEMS

    store = open_dataset(spec.dataset)
    check_inputs(spec, store)
    resolve_device(spec.system.device)
    import_plugins(spec)
    available = available_memory(memory_limit)
    estimate = estimate_memory(spec, store) if spec.system.name in MEMORY_ESTIMATES else None
    return {"run_id": spec.run_id, "system": spec.system.name, "dataset": store.name, "num_nodes": store.num_nodes,
            "num_edges": store.num_edges, "estimate": estimate, "available": available,
            "fits": None if estimate is None or available.bytes is None else estimate.required_bytes <= available.bytes}


def _run_rank(spec: RunSpec, out: str | os.PathLike, progress: bool,
              placement: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One rank of a data-parallel run: join the group, open the dataset (rank 0 first: it may generate it),
    run the data-parallel system; only rank 0 records."""
    import torch.distributed as dist

    from suite.datasets import open_dataset
    from suite.registry import SYSTEM_VARIANTS, SYSTEMS

    context, device = ranks.init_rank(spec, resolve_device(spec.system.device))
    if context.rank != 0:
        dist.barrier()
    store = open_dataset(spec.dataset, progress=progress and context.rank == 0)
    check_inputs(spec, store)
    if context.rank == 0:
        dist.barrier()
    system_class = SYSTEM_VARIANTS.get("data_parallel")(SYSTEMS.get(spec.system.name))
    recorder = Recorder(out, spec, open=False) if context.rank == 0 else ranks.NullRecorder(out, spec)
    summary = _run(spec, out, store, device, system_class, recorder, progress, placement)
    return summary if context.rank == 0 else {**summary, "rank": context.rank}


def _run(spec: RunSpec, out: str | os.PathLike, store: GraphStore, device: torch.device, system_class: type[System],
         recorder: Any, progress: bool, placement: Mapping[str, Any] | None = None,
         resume: bool = True, summary_extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Train ``system_class`` on ``store``, summarize, and finish (or fail) the run through ``recorder``.

    The system is constructed (validating its options against the spec and the store) before ``recorder`` opens
    the run folder, so bad input leaves no folder. A loss that becomes non-finite stops the run with status
    ``diverged`` (:class:`~suite.errors.DivergedError`, re-raised after the summary is written).
    """
    run_dir = Path(out) / spec.run_id
    started_at, started = _now(), time.perf_counter()
    io_before = io_counters()
    torch.manual_seed(spec.seed)
    mmap_threshold = bound_allocator()
    system: System = system_class(spec, store, device, recorder)
    note_run_started()
    system.resume = resume
    recorder.open()  # the run folder's lock: a second writer of this run stops here, before changing anything
    if not resume:
        import shutil

        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)  # suite.checkpoint.CHECKPOINT_DIR
    try:
        with GpuUtilizationSampler(device) as gpu, LoadMonitor() as load:
            outcome = system.run(progress=progress)
        io_after = io_counters()
        summary = summarize(spec, store, outcome, wall_time_s=time.perf_counter() - started,
                            gpu_utilization=gpu.mean(),
                            process_io=(io_after[0] - io_before[0], io_after[1] - io_before[1]),
                            machine_load=load.result)
    except DivergedError as err:
        recorder.diverge(err, {"started_at": started_at, "finished_at": _now(),
                               **({"placement": dict(placement)} if placement else {})})
        raise
    except BaseException as err:
        recorder.fail(err, {"started_at": started_at, "finished_at": _now(),
                            **({"placement": dict(placement)} if placement else {})})
        raise
    machine = machine_info()
    if outcome.threads:  # the threads the run computed with (its last epoch's budget), not the process's now
        machine["torch_threads"] = (outcome.threads.get("per_epoch") or [outcome.threads["compute"]])[-1]
    summary.update(machine=machine, versions=versions(), device=str(device), started_at=started_at,
                   finished_at=_now(), run_dir=str(run_dir))
    if placement:
        summary["placement"] = dict(placement)
    summary.update(getattr(outcome, "summary_extra", {}))
    summary.update(summary_extra or {})
    summary["malloc_mmap_threshold"] = mmap_threshold
    return recorder.finish(summary)


# A rank started by suite.ranks.launch (``python -m suite.runner PAYLOAD``). It calls the imported modules, not
# this __main__ copy, since their globals (the rank context) are the ones the suite uses.
if __name__ == "__main__":
    import sys

    from suite.ranks import rank_main
    from suite.runner import run_spec as _run_spec

    sys.exit(rank_main(sys.argv[1], _run_spec))
