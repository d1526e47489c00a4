"""The ``gnnsuite`` commands that run a simulator on what the experiments layer measures and draws.

- ``gnnsuite simulate SPEC --calibrate-from RUN_DIR|RUNS [--profile NAME] [--contention measure|FILE]``: a
  simulated run of the pipelined system (:func:`simulators.simulate_run.simulate_run`); ``--contention measure``
  runs the contention microbenchmark here (:func:`experiments.measure.contention.measure_for_run`), ``FILE`` reads
  a stored measurement.
- ``gnnsuite simulate-async SPEC [--out DIR] [--gantt PNG]``: the asynchronous GNN pipeline modes
  (:mod:`simulators.async_gnn_model`); a spec whose durations are ``measured`` gets them timed here
  (:mod:`experiments.measure.kernel_timing`); the Gantt chart is :func:`experiments.figures.async_gnn.plot_simulated_gantt`.
- ``gnnsuite simulate-disk SPEC|RUN_DIR --calibrate-from RUN_DIR [--json]``: the epoch times of a disk run predicted
  from its policy's plans and its store's sizes (:mod:`simulators.disk_epoch_model`), calibrated on a recorded disk
  run; a recorded run's measured epoch times are printed beside (:mod:`experiments.measure.disk_simulation`).

They live here, not in :mod:`simulators`, because the simulators never measure nor draw. :func:`add_commands`
adds both to the ``gnnsuite`` subcommands; errors a user causes are :class:`~suite.errors.SuiteError` (one line,
exit status 2).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from suite.errors import ConfigError


def _contention(value: str | None, spec, calibrate_from: Path):
    """The contention measurement ``--contention`` names: measured here, read from a file, or None."""
    from simulators.simulate_run import pipeline_options, stored_contention

    if value is None:
        return None
    if value == "measure":
        from experiments.measure.contention import measure_for_run

        options = pipeline_options(spec)
        return measure_for_run(calibrate_from, max_loaders=max(1, options.batch_loader_threads))
    return stored_contention(value, calibrate_from)


def _cmd_simulate(args: argparse.Namespace) -> int:
    from simulators.simulate_run import find_calibration_run, hardware_profile, pipeline_options, simulate_run
    from suite.config import load_spec

    spec = load_spec(args.spec, args.set)
    calibrate_from = find_calibration_run(spec, args.calibrate_from)
    if calibrate_from != Path(args.calibrate_from):
        print(f"calibrating on {calibrate_from}")
    pipeline_options(spec), hardware_profile(args.profile)  # refused before anything is measured
    summary = simulate_run(spec, calibrate_from, args.out, profile=args.profile, batches=args.batches,
                           seed=args.seed, contention=_contention(args.contention, spec, calibrate_from))
    times = ", ".join(f"{t:.2f}" for t in summary["epoch_time_s"])
    print(f"{summary['run_dir']}: simulated epochs {times} s, compute utilization "
          f"{summary['compute_utilization']:.3f}, staleness max {summary['staleness']['max']}")
    return 0


def _write_async_tables(out: Path, spec, results) -> Path:
    """``summary.csv``, ``tasks.csv`` and ``summary.json`` of the simulated modes under ``out``; the tasks' path."""
    from simulators.async_gnn_model.tables import summary_table, tasks_table
    from suite.io import atomic_write_bytes, atomic_write_json

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / "summary.csv", summary_table(results).to_csv(index=False).encode())
    atomic_write_bytes(out / "tasks.csv", tasks_table(results).to_csv(index=False).encode())
    atomic_write_json(out / "summary.json", {"spec": json.loads(spec.model_dump_json()),
                                             "modes": [r.summary for r in results]})
    return out / "tasks.csv"


def _cmd_simulate_async(args: argparse.Namespace) -> int:
    import pandas as pd

    from experiments.measure.kernel_timing import durations_for
    from simulators.async_gnn_model.partitions import build_partitions
    from simulators.async_gnn_model.simulation import simulate_modes
    from simulators.async_gnn_model.spec import async_spec_from_dict
    from simulators.async_gnn_model.tables import summary_table
    from suite.config import apply_overrides, read_yaml

    data = read_yaml(args.spec)
    if not isinstance(data, dict):
        raise ConfigError(f"{args.spec}: expected a mapping at the top level")
    spec = async_spec_from_dict(apply_overrides(data, args.set), source=str(args.spec))
    graph = build_partitions(spec)
    results = simulate_modes(spec, graph, durations_for(spec, graph))
    summary = summary_table(results)
    columns = ["mode", "makespan_s", "speedup", "iterations_per_s", "utilization_mean", "feature_staleness_mean",
               "feature_staleness_max", "gradient_staleness_max", "weight_staleness_max"]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary[columns].to_string(index=False))
    if args.out:
        _write_async_tables(Path(args.out), spec, results)
        print(f"wrote {args.out}/summary.csv, tasks.csv, summary.json", file=sys.stderr)
    if args.gantt:
        from experiments.figures.async_gnn import plot_simulated_gantt

        with tempfile.TemporaryDirectory() as scratch:
            tasks = Path(args.out) / "tasks.csv" if args.out else _write_async_tables(Path(scratch), spec, results)
            print(f"wrote {plot_simulated_gantt(tasks, args.gantt, title=spec.name)}", file=sys.stderr)
    return 0


def _add_simulate_async(commands: argparse._SubParsersAction) -> None:
    simulate = commands.add_parser(
        "simulate-async", help="simulate synchronous/asynchronous micro/macro GNN pipelines (SimPy)",
        description="Simulate the modes of a YAML spec (see experiments/specs/async_gnn.yaml): makespan, throughput, "
                    "utilization, staleness; optionally the tasks and a Gantt chart.")
    simulate.add_argument("spec", help="simulation spec YAML file")
    simulate.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                          help="override a spec field, e.g. --set pipeline.staleness_bound=2 (repeatable)")
    simulate.add_argument("--out", help="folder for summary.csv, tasks.csv and summary.json")
    simulate.add_argument("--gantt", help="write the Gantt chart of the modes to this PNG")
    simulate.set_defaults(func=_cmd_simulate_async)


def _add_simulate(commands: argparse._SubParsersAction) -> None:
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
                             "(experiments.measure.contention microbenchmark) or read a stored measurement "
                             "(default: none)")
    parser.add_argument("--out", default="out/simulated", help="results folder (default out/simulated)")
    parser.set_defaults(func=_cmd_simulate)


def _cmd_simulate_disk(args: argparse.Namespace) -> int:
    import numpy as np

    from experiments.measure.disk_simulation import calibrate_on, compute_threads, load_run, spec_work
    from simulators.disk_epoch_model import predict
    from suite.config import load_spec
    from suite.io import strict_json_dumps
    from systems.disk.disk_system import DiskOptions

    target = Path(args.spec)
    recorded = load_run(target) if target.is_dir() else None
    spec = recorded.spec if recorded else load_spec(target, args.set)
    work = recorded.work if recorded else spec_work(spec)
    costs = calibrate_on(load_run(Path(args.calibrate_from)))
    if recorded:  # its compute threads are known (a spec's are the calibration run's)
        costs = costs.with_compute_threads(compute_threads(recorded))
    options = DiskOptions.model_validate(spec.system.options)
    prediction = predict(work, costs, prefetch=options.prefetch,
                         keeps_resident=spec.training.task != "link_prediction")
    measured = {int(r["epoch"]): r["epoch_time_s"] for r in recorded.epochs} if recorded else {}
    rows = [{"epoch": e, "predicted_epoch_s": float(t), "predicted_serial_epoch_s": float(prediction.serial_s[e]),
             "states": work[e].num_states, "read_bytes": float(work[e].read_bytes.sum()),
             "measured_epoch_s": measured.get(e)} for e, t in enumerate(prediction.epoch_time_s)]
    if args.json:
        print(strict_json_dumps({"costs": costs.as_dict(), "epochs": rows,
                                 "simulation_s": prediction.simulation_s}, indent=2))
        return 0
    for row in rows:
        measured_text = f"  measured {row['measured_epoch_s']:.3f} s" if row["measured_epoch_s"] is not None else ""
        print(f"epoch {row['epoch']}: predicted {row['predicted_epoch_s']:.3f} s (serial "
              f"{row['predicted_serial_epoch_s']:.3f} s), {row['states']} states, "
              f"{row['read_bytes'] / 1e6:.1f} MB read{measured_text}")
    print(f"simulated {prediction.states} states in {prediction.simulation_s * 1e3:.2f} ms; mean predicted epoch "
          f"{np.mean(prediction.epoch_time_s):.3f} s")
    return 0


def _add_simulate_disk(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("simulate-disk", help="predict a disk run's epoch times from its plans (calibrated "
                                                       "on a recorded disk run)",
                                 description="Predict the epoch times of a disk node-classification or link-prediction "
                                             "run from its policy's plans, its store's sizes and costs fitted on a "
                                             "recorded disk run's state records (prefetch overlap included).")
    parser.add_argument("spec", help="run spec YAML of the disk system, or a recorded run's folder (then its measured "
                                     "epoch times are printed beside)")
    parser.add_argument("--calibrate-from", required=True, metavar="RUN_DIR",
                        help="a recorded disk run of the same workload whose state records calibrate the costs")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a spec field")
    parser.add_argument("--json", action="store_true", help="print the costs and epochs as JSON")
    parser.set_defaults(func=_cmd_simulate_disk)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add ``simulate-async``, ``simulate`` and ``simulate-disk`` to the ``gnnsuite`` subcommands."""
    _add_simulate_async(commands)
    _add_simulate(commands)
    _add_simulate_disk(commands)


__all__ = ["add_commands"]
