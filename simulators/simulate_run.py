"""``gnnsuite simulate SPEC --calibrate-from RUN_DIR|RUNS [--profile NAME]``: a simulated run, recorded like a real one.

The spec is an ordinary run spec of the ``pipelined`` system; the simulator (:mod:`simulators.pipeline`) runs its
epochs with the service times calibrated on the recorded run ``RUN_DIR`` (:mod:`simulators.calibrate`; or the
sync pipelined run of the same workload in the results folder ``RUNS``; a run of another workload, see
:func:`workload_difference`, is refused with a one-line error), on the
recorded machine or, with ``--profile``, on one of :data:`simulators.calibrate.HARDWARE` (what-if). The run folder
has the real layout (``config.yaml``, ``records.jsonl`` with ``epoch``, ``batch`` and ``queues`` records,
``summary.json``), so ``gnnsuite results`` and the figures read simulated and measured runs alike; the summary
says ``"simulated": true`` with the calibration run and the hardware, and has no accuracy (nothing is trained).
Its run id is the spec's with ``-sim`` (and the profile) appended to the label, so it never overwrites the
measured run, and what-ifs on different hardware never overwrite each other.

``--contention measure`` measures, on this machine, what oversubscribing its cores costs beyond sharing them
(:mod:`simulators.contention`, a microbenchmark of the calibration run's workload) and simulates with it;
``--contention FILE`` reads such a measurement (JSON of :meth:`simulators.contention.Contention.to_dict`); the
default is max-min sharing only. The summary says which (``contention``). What-ifs on other hardware never use it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
from pathlib import Path
from typing import Any

from suite.config import RunSpec, load_spec, validate_system_options
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


def simulate_run(spec: RunSpec, calibrate_from: str | Path, out: str | Path, *, profile: str | None = None,
                 batches: int | None = None, seed: int | None = None, contention: str | None = None) -> dict[str, Any]:
    """Simulate ``spec``'s epochs and record them under ``out``; return the summary. ``contention``: None (max-min
    sharing only), ``"measure"`` (measure it here for the calibration run's workload) or a stored measurement."""
    from simulators.calibrate import HARDWARE, calibrate, model_for, summary_of
    from simulators.contention import load_contention, measure_for_run
    from simulators.pipeline import simulate

    if spec.system.name != "pipelined":
        raise ConfigError(f"system.name: the pipeline simulator simulates 'pipelined' runs, got {spec.system.name!r}")
    options = validate_system_options(spec).effective()
    if profile is not None and profile not in HARDWARE:
        raise ConfigError(f"--profile: unknown hardware {profile!r} (known: {', '.join(sorted(HARDWARE))})")
    hardware = HARDWARE.get(profile) if profile else None
    measured = None
    if contention == "measure":
        measured = measure_for_run(calibrate_from, max_loaders=max(1, options.batch_loader_threads))
    elif contention is not None:
        if not Path(contention).is_file():
            raise ConfigError(f"--contention: {contention}: expected 'measure' or a stored measurement (JSON file)")
        try:
            measured = load_contention(contention, calibrate_from)
        except (ValueError, KeyError) as error:
            raise ConfigError(f"--contention: {error}") from None
    calibration = calibrate(calibrate_from, contention=measured)
    different = workload_difference(spec, calibration.spec)
    if different is not None:
        raise ConfigError(f"--calibrate-from: {calibrate_from} recorded another workload ({different}); calibrate "
                          "on a run of the same dataset, model, sampler and batch size")
    calibration_summary = read_summary(calibrate_from) or {}
    feature_dim = (calibration_summary.get("dataset_info") or {}).get("feature_dim")
    if feature_dim is None and hardware is not None:  # summaries before feature_dim was recorded
        from suite.datasets import open_dataset

        feature_dim = open_dataset(calibration.spec.dataset).feature_dim
    model = model_for(options, calibration, hardware, feature_dim=feature_dim)
    count = batches_per_epoch(spec, batches)
    sim_spec = simulated_spec(spec, profile, batches)
    recorder = Recorder(out, sim_spec)
    epochs, started_at = [], _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    for epoch in range(spec.training.epochs):
        trace = simulate(model, count, seed=(spec.seed if seed is None else seed) + epoch, epoch=epoch)
        measures = summary_of(trace)
        epochs.append(measures)
        for batch in sorted(trace.batches, key=lambda b: b.index):
            recorder.record("batch", **batch.record())
        recorder.record("queues", epoch=epoch, occupancy={k: [[t, n] for t, n in v]
                                                          for k, v in trace.queue_occupancy.items()})
        recorder.record("epoch", epoch=epoch, epoch_time_s=measures["epoch_time_s"], examples=None,
                        stage_busy_s=trace.busy_s(), staleness_mean=measures["staleness_mean"],
                        staleness_max=measures["staleness_max"], pipeline_efficiency=measures["pipeline_efficiency"],
                        bottleneck_stage=measures["bottleneck_stage"],
                        compute_utilization=measures["compute_utilization"], simulated=True)
    train_s = sum(e["epoch_time_s"] for e in epochs)
    return recorder.finish({
        "simulated": True, "calibrated_from": str(calibrate_from),
        "contention": (measured.describe() if measured is not None and hardware is None
                       else "none (max-min sharing only)"),
        "hardware": (hardware.__dict__ if hardware else {"name": "recorded machine",
                                                          "cpu_cores": calibration.cpu_cores}),
        "system": spec.system.name, "dataset": spec.dataset.preset or spec.dataset.name,
        "task": spec.training.task, "model": spec.model.encoder, "sampler": spec.sampler.name, "seed": spec.seed,
        "epochs": len(epochs), "batches_per_epoch": count,
        "epoch_time_s": [e["epoch_time_s"] for e in epochs], "train_time_s": train_s,
        "compute_utilization": sum(e["compute_utilization"] * e["epoch_time_s"] for e in epochs) / train_s,
        "pipeline_efficiency": [e["pipeline_efficiency"] for e in epochs],
        "staleness": {"mean": sum(e["staleness_mean"] for e in epochs) / len(epochs),
                      "max": max(e["staleness_max"] for e in epochs)},
        "metrics": {"main": None, "valid": {}, "test": {}},
        "started_at": started_at, "run_dir": str(recorder.run_dir),
    })


def _cmd_simulate(args: argparse.Namespace) -> int:
    spec = load_spec(args.spec, args.set)
    calibrate_from = find_calibration_run(spec, args.calibrate_from)
    if calibrate_from != Path(args.calibrate_from):
        print(f"calibrating on {calibrate_from}")
    summary = simulate_run(spec, calibrate_from, args.out, profile=args.profile, batches=args.batches,
                           seed=args.seed, contention=args.contention)
    times = ", ".join(f"{t:.2f}" for t in summary["epoch_time_s"])
    print(f"{summary['run_dir']}: simulated epochs {times} s, compute utilization "
          f"{summary['compute_utilization']:.3f}, staleness max {summary['staleness']['max']}")
    return 0


def add_command(commands: argparse._SubParsersAction) -> None:
    """Add ``simulate`` to the ``gnnsuite`` subcommands."""
    parser = commands.add_parser("simulate", help="simulate a pipelined run spec (calibrated on a recorded run)")
    parser.add_argument("spec", help="run spec YAML of the pipelined system")
    parser.add_argument("--calibrate-from", required=True, metavar="RUN_DIR|RUNS",
                        help="a recorded pipelined run of the same workload (ideally sync: true) whose batch times "
                             "calibrate the stages, or a results folder holding one (its sync run is taken)")
    parser.add_argument("--profile", help="what-if hardware (p3.2xlarge, g5.xlarge, p4d.24xlarge)")
    parser.add_argument("--batches", type=int, help="batches per epoch (default: from the spec and dataset)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a spec field")
    parser.add_argument("--seed", type=int, help="simulation seed (default: the spec's)")
    parser.add_argument("--contention", metavar="measure|FILE",
                        help="slowdown of oversubscribed stages beyond sharing the cores: 'measure' it here "
                             "(simulators.contention microbenchmark) or read a stored measurement (default: none)")
    parser.add_argument("--out", default="out/simulated", help="results folder (default out/simulated)")
    parser.set_defaults(func=_cmd_simulate)


__all__ = ["add_command", "batches_per_epoch", "simulate_run", "simulated_spec"]
