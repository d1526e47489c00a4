"""A simulated run, recorded like a real one (what ``gnnsuite simulate SPEC --calibrate-from RUN_DIR|RUNS`` does).

The spec is an ordinary run spec of the ``pipelined`` system; the simulator (:mod:`simulators.pipeline_model`) runs its
epochs with the service times calibrated on the recorded run ``RUN_DIR`` (:mod:`simulators.calibrate`; or the
sync pipelined run of the same workload in the results folder ``RUNS``; a run of another workload, see
:func:`workload_difference`, is refused with a one-line error), on the
recorded machine or, with ``--profile``, on one of :data:`simulators.calibrate.HARDWARE` (what-if). The run folder
has the real layout (``config.yaml``, ``records.jsonl`` with ``epoch``, ``batch`` and ``queues`` records,
``summary.json``), so ``gnnsuite results`` and the figures read simulated and measured runs alike; the summary
says ``"simulated": true`` with the calibration run and the hardware, and has no accuracy (nothing is trained).
Its run id is the spec's with ``-sim`` (and the profile) appended to the label, so it never overwrites the
measured run, and what-ifs on different hardware never overwrite each other.

A contention measurement (what oversubscribing the recorded machine's cores costs beyond sharing them,
:mod:`simulators.contention_model`) is passed in: read from a file (:func:`stored_contention`, ``--contention FILE``) or
measured by the experiments layer (``--contention measure``, :mod:`experiments.measure.contention`); without one
the cores are shared max-min fairly. The summary says which (``contention``). What-ifs on other hardware never
use it. The command itself is :mod:`experiments.simulator_commands` (it may measure).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from simulators.calibrate import HARDWARE, Calibration, Hardware, calibrate, model_for, summary_of
from simulators.contention_model import Contention, load_contention
from simulators.pipeline_model import simulate
from simulators.trace import SimulatedTrace
from suite.config import RunSpec, validate_system_options
from suite.errors import ConfigError
from suite.recorder import Recorder, read_summary


def simulated_spec(spec: RunSpec, profile: str | None = None, batches: int | None = None) -> RunSpec:
    """The spec with ``-sim`` (and the what-if profile) appended to its label, and ``batches`` as its
    ``training.limit_batches``, so that its run id differs from the measured run's and between what-ifs."""
    label = spec.name or f"{spec.system.name}-{spec.dataset.preset or spec.dataset.name}-{spec.model.encoder}"
    update: dict[str, Any] = {"name": f"{label}-sim" + (f"-{profile}" if profile else "")}
    if batches is not None:
        update["training"] = spec.training.model_copy(update={"limit_batches": batches})
    return spec.model_copy(update=update)


def batches_per_epoch(spec: RunSpec, override: int | None) -> int:
    """``override``, else ``training.limit_batches``, else the training nodes of the dataset / batch size."""
    if override is not None:
        return override
    if spec.training.limit_batches is not None:
        return spec.training.limit_batches
    from suite.datasets import open_dataset

    store = open_dataset(spec.dataset)
    train = store.split("train")
    if train is None:
        raise ConfigError(f"{store.path}: no train split to count batches from (give --batches)")
    return -(-len(train) // spec.training.batch_size)


WORKLOAD_SECTIONS = ("dataset", "model", "sampler")
WORKLOAD_TRAINING = ("task", "batch_size", "optimizer")
"""What a calibration run must share with the simulated spec: the data (its identity, not how its paths were
written), the model, the sampler, and the training task, batch size and optimizer. The system's options (workers,
queues, bounds), epochs, batches per epoch and seeds are what a simulation varies."""


def workload_difference(spec: RunSpec, recorded: RunSpec) -> str | None:
    """The first field in which ``recorded`` (a calibration run's spec) does another workload than ``spec``, as
    ``model.num_layers: 3 in the run, 2 in the spec``; None when the workloads are the same."""
    mine, theirs = spec.identity(), recorded.identity()
    pairs = [(section, mine[section], theirs[section]) for section in WORKLOAD_SECTIONS]
    pairs += [(f"training.{key}", mine["training"][key], theirs["training"][key]) for key in WORKLOAD_TRAINING]
    for path, value, other in pairs:
        if value == other:
            continue
        if isinstance(value, dict) and isinstance(other, dict):
            key = next(k for k in sorted(set(value) | set(other)) if value.get(k) != other.get(k))
            path, value, other = f"{path}.{key}", value.get(key), other.get(key)
        return f"{path}: {other!r} in the run, {value!r} in the spec"
    return None


def find_calibration_run(spec: RunSpec, folder: str | Path) -> Path:
    """The calibration run for ``spec`` named by ``--calibrate-from``: ``folder`` itself if it is a run folder,
    else the completed ``sync`` pipelined run of ``spec``'s workload in the results folder ``folder`` (the one of
    the lowest seed if there are several). Errors are one line: what is wrong, and what to run first."""
    from suite.config import read_yaml, spec_from_dict
    from suite.errors import SuiteError

    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"--calibrate-from: {folder}: no such folder (record a run first, e.g. gnnsuite run SPEC "
                          "--set system.name=pipelined --set system.options.sync=true --out " f"{folder.parent})")
    if (folder / "config.yaml").is_file():
        return folder
    candidates = []
    for run in sorted(p for p in folder.iterdir() if (p / "config.yaml").is_file()):
        summary = read_summary(run) or {}
        try:
            recorded = spec_from_dict(read_yaml(run / "config.yaml"), source=str(run / "config.yaml"))
        except SuiteError:
            continue
        if summary.get("status") == "completed" and recorded.system.name == "pipelined" and \
                recorded.system.options.get("sync") and workload_difference(spec, recorded) is None:
            candidates.append((recorded.seed, run))
    if not candidates:
        raise ConfigError(f"--calibrate-from: {folder}: no completed sync pipelined run of this spec's workload "
                          "(record one first: gnnsuite run SPEC --set system.name=pipelined --set "
                          f"system.options.sync=true --out {folder})")
    return min(candidates)[1]


def pipeline_options(spec: RunSpec) -> Any:
    """The effective options of ``spec``'s ``pipelined`` system (ConfigError for another system)."""
    if spec.system.name != "pipelined":
        raise ConfigError(f"system.name: the pipeline simulator simulates 'pipelined' runs, got {spec.system.name!r}")
    return validate_system_options(spec).effective()


def stored_contention(path: str | Path, calibrate_from: str | Path) -> Contention:
    """The contention measurement stored in ``path`` for the calibration run ``calibrate_from`` (``--contention
    FILE``); one-line ConfigErrors."""
    if not Path(path).is_file():
        raise ConfigError(f"--contention: {path}: expected 'measure' or a stored measurement (JSON file)")
    try:
        return load_contention(path, calibrate_from)
    except (ValueError, KeyError) as error:
        raise ConfigError(f"--contention: {error}") from None


def hardware_profile(profile: str | None) -> Hardware | None:
    """The what-if hardware ``--profile`` names (None: the recorded machine); one-line ConfigError if unknown."""
    if profile is not None and profile not in HARDWARE:
        raise ConfigError(f"--profile: unknown hardware {profile!r} (known: {', '.join(sorted(HARDWARE))})")
    return HARDWARE.get(profile) if profile else None


def _feature_dim(calibrate_from: str | Path, calibration: Calibration, hardware: Hardware | None) -> int | None:
    feature_dim = ((read_summary(calibrate_from) or {}).get("dataset_info") or {}).get("feature_dim")
    if feature_dim is None and hardware is not None:  # summaries before feature_dim was recorded
        from suite.datasets import open_dataset

        feature_dim = open_dataset(calibration.spec.dataset).feature_dim
    return feature_dim


def _record_epoch(recorder: Recorder, trace: SimulatedTrace, epoch: int) -> dict[str, Any]:
    """Record one simulated epoch's batches, queues and epoch record; return its measures."""
    measures = summary_of(trace)
    for batch in sorted(trace.batches, key=lambda b: b.index):
        recorder.record("batch", **batch.record())
    recorder.record("queues", epoch=epoch, occupancy={k: [[t, n] for t, n in v]
                                                      for k, v in trace.queue_occupancy.items()})
    recorder.record("epoch", epoch=epoch, epoch_time_s=measures["epoch_time_s"], examples=None,
                    stage_busy_s=trace.busy_s(), staleness_mean=measures["staleness_mean"],
                    staleness_max=measures["staleness_max"], pipeline_efficiency=measures["pipeline_efficiency"],
                    bottleneck_stage=measures["bottleneck_stage"],
                    compute_utilization=measures["compute_utilization"], simulated=True)
    return measures


def _run_summary(spec: RunSpec, epochs: list[dict[str, Any]], count: int) -> dict[str, Any]:
    """The summary fields of a simulated run that come from its spec and its epochs."""
    train_s = sum(e["epoch_time_s"] for e in epochs)
    return {
        "system": spec.system.name, "dataset": spec.dataset.preset or spec.dataset.name,
        "task": spec.training.task, "model": spec.model.encoder, "sampler": spec.sampler.name, "seed": spec.seed,
        "epochs": len(epochs), "batches_per_epoch": count,
        "epoch_time_s": [e["epoch_time_s"] for e in epochs], "train_time_s": train_s,
        "compute_utilization": sum(e["compute_utilization"] * e["epoch_time_s"] for e in epochs) / train_s,
        "pipeline_efficiency": [e["pipeline_efficiency"] for e in epochs],
        "staleness": {"mean": sum(e["staleness_mean"] for e in epochs) / len(epochs),
                      "max": max(e["staleness_max"] for e in epochs)},
        "metrics": {"main": None, "valid": {}, "test": {}},
    }


def simulate_run(spec: RunSpec, calibrate_from: str | Path, out: str | Path, *, profile: str | None = None,
                 batches: int | None = None, seed: int | None = None,
                 contention: Contention | None = None) -> dict[str, Any]:
    """Simulate ``spec``'s epochs and record them under ``out``; return the summary. ``contention``: a measurement
    of the machine (:class:`~simulators.contention_model.Contention`, e.g. :func:`stored_contention`, or measured by
    :func:`experiments.measure.contention.measure_for_run`), or None (max-min sharing only)."""
    options = pipeline_options(spec)
    hardware = hardware_profile(profile)
    calibration = calibrate(calibrate_from, contention=contention)
    different = workload_difference(spec, calibration.spec)
    if different is not None:
        raise ConfigError(f"--calibrate-from: {calibrate_from} recorded another workload ({different}); calibrate "
                          "on a run of the same dataset, model, sampler and batch size")
    model = model_for(options, calibration, hardware, feature_dim=_feature_dim(calibrate_from, calibration, hardware))
    count = batches_per_epoch(spec, batches)
    recorder = Recorder(out, simulated_spec(spec, profile, batches))
    started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    epochs = [_record_epoch(recorder, simulate(model, count, seed=(spec.seed if seed is None else seed) + epoch,
                                               epoch=epoch), epoch)
              for epoch in range(spec.training.epochs)]
    return recorder.finish({
        "simulated": True, "calibrated_from": str(calibrate_from),
        "contention": (contention.describe() if contention is not None and hardware is None
                       else "none (max-min sharing only)"),
        "hardware": (hardware.__dict__ if hardware else {"name": "recorded machine",
                                                          "cpu_cores": calibration.cpu_cores}),
        **_run_summary(spec, epochs, count), "started_at": started_at, "run_dir": str(recorder.run_dir),
    })


__all__ = ["batches_per_epoch", "find_calibration_run", "hardware_profile", "pipeline_options", "simulate_run",
           "simulated_spec", "stored_contention", "workload_difference"]
