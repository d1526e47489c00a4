"""The ``gnnsuite`` command line (also ``python -m suite``).

Exit status: 0 success; 1 a grid with failed runs; 2 an error the user can cause (:class:`suite.errors.SuiteError`:
bad spec, dataset or file, an output that exists without ``--overwrite``, a run folder or store another process is
writing, and a run that *diverged*: its loss became NaN or infinite, recorded with status ``diverged``), printed as
one line on stderr naming the file or field; also an operating-system error on a named file (unreadable, disk
full); 130 Ctrl-C. No exit leaves half-written output (writers stage and rename).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from suite.errors import ConfigError, SuiteError
from suite.io import strict_json_dumps

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


def _print_info(info: dict, as_json: bool) -> None:
    if as_json:
        print(strict_json_dumps(info, indent=2))
        return
    width = max(len(key) for key in info)
    for key, value in info.items():
        print(f"{key:<{width}}  {value}")


# ---------------------------------------------------------------------------------------------- datasets
def _synthetic_overrides(args: argparse.Namespace, fields: Sequence[dataclasses.Field]) -> dict:
    return {f.name: getattr(args, f.name) for f in fields if getattr(args, f.name, None) is not None}


def _add_synthetic_options(parser: argparse.ArgumentParser) -> Sequence[dataclasses.Field]:
    """One ``--field-name`` option per SyntheticConfig field, so every generator parameter is settable."""
    from suite.graph.synthetic import SyntheticConfig, parse_field_value

    fields = [f for f in dataclasses.fields(SyntheticConfig) if f.name != "name"]
    group = parser.add_argument_group("generator parameters (override the preset)")
    for field in fields:
        group.add_argument(f"--{field.name.replace('_', '-')}", dest=field.name, default=None,
                           type=functools.partial(parse_field_value, field.name),
                           metavar=str(field.type).split(" ")[0].upper())
    return fields


def _cmd_generate(args: argparse.Namespace) -> int:
    from suite.graph.synthetic import PRESETS, SyntheticConfig, generate

    config = PRESETS.get(args.preset)
    overrides = _synthetic_overrides(args, dataclasses.fields(SyntheticConfig))
    try:
        config = dataclasses.replace(config, **overrides)
    except TypeError as err:
        raise ConfigError(f"generator parameters: {err}") from None
    started = time.perf_counter()
    store = generate(config, Path(args.out), overwrite=args.overwrite, progress=not args.quiet)
    print(f"wrote {store.path} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    _print_info(store.info(), args.json)
    return 0


def _cmd_prepare(args: argparse.Namespace) -> int:
    from suite.graph.loaders import prepare

    store = prepare(args.name, Path(args.root), Path(args.out), overwrite=args.overwrite, progress=not args.quiet)
    print(f"wrote {args.out}", file=sys.stderr)
    _print_info(store.info(), args.json)
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from suite.graph.store import GraphStore

    started = time.perf_counter()
    store = GraphStore.open(args.store)
    opened = time.perf_counter() - started
    info = store.info()
    info["open_s"] = round(opened, 4)
    if args.verify:
        started = time.perf_counter()
        store.verify(progress=not args.quiet)
        info["verified"] = True
        info["verify_s"] = round(time.perf_counter() - started, 2)
    _print_info(info, args.json)
    return 0


def _cmd_partition(args: argparse.Namespace) -> int:
    from suite.graph.partition import partition_store
    from suite.graph.store import GraphStore

    store = GraphStore.open(args.store)
    out = Path(args.out) if args.out else Path(args.store).with_name(
        f"{Path(args.store).name}-p{args.num_partitions}-{Path(args.order).stem}"
    )
    result = partition_store(store, out, args.num_partitions, order=args.order, seed=args.seed,
                             overwrite=args.overwrite, progress=not args.quiet)
    print(f"wrote {out}", file=sys.stderr)
    _print_info(result.info(), args.json)
    return 0


def _add_common(parser: argparse.ArgumentParser, *, writes: bool) -> None:
    parser.add_argument("--json", action="store_true", help="print the store's info as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    if writes:
        parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")


def _datasets_parser(commands: argparse._SubParsersAction) -> None:
    from suite.graph.loaders import LOADERS
    from suite.graph.partition import ORDERINGS
    from suite.graph.synthetic import PRESETS

    datasets = commands.add_parser("datasets", help="generate, prepare, inspect and partition graph stores")
    sub = datasets.add_subparsers(dest="datasets_command", required=True, metavar="COMMAND")

    generate = sub.add_parser("generate", help="write a synthetic graph store")
    generate.add_argument("--preset", default="tiny", help=f"one of: {', '.join(PRESETS.names())} (default tiny)")
    generate.add_argument("--out", required=True, help="output store folder")
    _add_common(generate, writes=True)
    _add_synthetic_options(generate)
    generate.set_defaults(func=_cmd_generate)

    prepare = sub.add_parser("prepare", help="convert a raw dataset into a graph store")
    prepare.add_argument("name", help=f"one of: {', '.join(LOADERS.names())}")
    prepare.add_argument("--root", required=True, help="folder holding the raw files")
    prepare.add_argument("--out", required=True, help="output store folder")
    _add_common(prepare, writes=True)
    prepare.set_defaults(func=_cmd_prepare)

    info = sub.add_parser("info", help="print a store's counts")
    info.add_argument("store", help="store folder")
    info.add_argument("--verify", action="store_true", help="recompute checksums and check ranges")
    _add_common(info, writes=False)
    info.set_defaults(func=_cmd_info)

    partition = sub.add_parser("partition", help="reorder nodes and write p partitions with p x p edge buckets")
    partition.add_argument("store", help="input store folder")
    partition.add_argument("-p", "--num-partitions", type=int, required=True, help="number of partitions")
    partition.add_argument("--order", default="random",
                           help=f"one of: {', '.join(ORDERINGS.names())}, or a .npy file with a permutation")
    partition.add_argument("--seed", type=int, default=0, help="seed of the random order")
    partition.add_argument("--out", help="output store folder (default: <store>-p<N>-<order> beside the input)")
    _add_common(partition, writes=True)
    partition.set_defaults(func=_cmd_partition)


# ---------------------------------------------------------------------------------------------- runs
def _cmd_run(args: argparse.Namespace) -> int:
    from suite.config import load_spec
    from suite.runner import run_spec

    spec = load_spec(args.spec, args.set)
    try:
        summary = run_spec(spec, Path(args.out), overwrite=args.overwrite, progress=not args.quiet)
    except SuiteError as err:
        raise type(err)(f"{args.spec}: {err}") from None
    if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 speaks for the run
        _print_run(summary)
    return 0


def _print_run(summary: dict) -> None:
    metrics = summary.get("metrics", {})
    main = metrics.get("main", "accuracy")
    state = "skipped (already complete)" if summary.get("skipped") else summary.get("status")
    print(f"{summary['run_id']}: {state}")
    if summary.get("run_dir"):
        print(f"  recorded in {summary['run_dir']} (config.yaml, records.jsonl, summary.json)")
    for split in ("valid", "test"):
        value = metrics.get(split, {}).get(main)
        if value is not None:
            print(f"  {split} {main}: {value:.4f}")
    times = summary.get("epoch_time_s") or []
    if times:
        print(f"  epochs: {len(times)}, mean epoch time: {sum(times) / len(times):.3f} s, "
              f"train examples/s: {summary.get('train_examples_per_s') or 0:.0f}")


def _cmd_grid(args: argparse.Namespace) -> int:
    from suite.grid import expand_grid, failures, run_grid

    from suite.executors import ExecutorOptions, parse_memory

    specs = expand_grid(Path(args.grid), args.set)
    options = ExecutorOptions(address=args.address, cpus_per_run=args.cpus_per_run, gpus_per_run=args.gpus_per_run,
                              memory_per_run=parse_memory(args.memory_per_run), retries=args.retries,
                              slurm_partition=args.slurm_partition, slurm_account=args.slurm_account,
                              slurm_qos=args.slurm_qos, slurm_constraint=args.slurm_constraint,
                              slurm_setup=tuple(args.slurm_setup), timeout_min=args.timeout_min,
                              submitit_cluster=args.submitit_cluster)
    print(f"{args.grid}: {len(specs)} runs -> {args.out} ({args.executor})", file=sys.stderr)
    summaries = run_grid(specs, Path(args.out), jobs=args.jobs, overwrite=args.overwrite, progress=not args.quiet,
                         executor=args.executor, executor_options=options)
    skipped = sum(1 for s in summaries if s.get("skipped"))
    failed = failures(summaries)
    print(f"{len(summaries) - skipped - len(failed)} ran, {skipped} already complete, {len(failed)} failed")
    for summary in failed:
        print(f"  failed: {summary.get('run_id')}: {summary.get('error')}", file=sys.stderr)
    return 1 if failed else 0


def _cmd_results(args: argparse.Namespace) -> int:
    import pandas as pd

    from suite.results import export, load_epochs, load_runs

    runs = load_runs(args.dir, include_incomplete=not args.completed_only)
    columns = [c for c in args.columns.split(",") if c in runs.columns] if args.columns else [
        c for c in ("run_id", "status", "system", "dataset", "model", "sampler", "seed", "metrics.valid.accuracy",
                    "metrics.test.accuracy", "train_examples_per_s", "compute_utilization", "cost_usd.run",
                    "placement.executor", "placement.node_name", "placement.attempt")
        if c in runs.columns
    ]
    with pd.option_context("display.width", 200, "display.max_columns", 50, "display.max_colwidth", 60):
        print(runs[columns].to_string(index=False) if len(runs) else f"{args.dir}: no runs")
    if args.export:
        print(f"wrote {export(runs, args.export)}", file=sys.stderr)
    if args.export_epochs:
        print(f"wrote {export(load_epochs(args.dir), args.export_epochs)}", file=sys.stderr)
    return 0


def _runs_parser(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run one spec (YAML) and record its results")
    run.add_argument("spec", help="run spec YAML file")
    run.add_argument("--out", default="out/runs", help="results folder (default out/runs)")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="override a spec field, e.g. --set training.epochs=3 (repeatable)")
    run.add_argument("--overwrite", action="store_true", help="redo the run even if it is complete")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.set_defaults(func=_cmd_run)

    grid = commands.add_parser("grid", help="run every point of a grid (base spec + axes), skipping finished runs")
    grid.add_argument("grid", help="grid YAML file")
    grid.add_argument("--out", default="out/runs", help="results folder (default out/runs)")
    grid.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every run")
    grid.add_argument("--jobs", type=int, default=None,
                      help="runs at once (local: a process pool when > 1, default 1; ray/slurm: tasks in flight, "
                           "default: as the cluster's resources allow)")
    grid.add_argument("--executor", default="local", help="grid executor: local (default), ray, slurm")
    scale = grid.add_argument_group("ray and slurm executors (pip install 'gnnsuite[scale]')")
    scale.add_argument("--address", help="ray: address of a running cluster (auto, host:6379, ray://host:10001); "
                                         "default: a local instance for the grid")
    scale.add_argument("--cpus-per-run", type=float, help="CPUs per run (default: the spec's world_size, else 1)")
    scale.add_argument("--gpus-per-run", type=float,
                       help="GPUs per run (default: world_size when system.device is cuda, else 0)")
    scale.add_argument("--memory-per-run", help="memory per run: 8G, 512M or bytes (default: none requested)")
    scale.add_argument("--retries", type=int, default=1,
                       help="times a run whose worker, node or job died is submitted again in this grid (default 1)")
    scale.add_argument("--slurm-partition", help="slurm: partition (default: the cluster's)")
    scale.add_argument("--slurm-account", help="slurm: account to charge (default: yours)")
    scale.add_argument("--slurm-qos", help="slurm: quality of service (default: the partition's)")
    scale.add_argument("--slurm-constraint", help="slurm: node features required, e.g. a100")
    scale.add_argument("--slurm-setup", action="append", default=[], metavar="LINE",
                       help="slurm: a shell line run in the job before Python (module load ..., source venv); "
                            "repeatable")
    scale.add_argument("--timeout-min", type=int, default=24 * 60, help="slurm: time limit per run in minutes")
    scale.add_argument("--submitit-cluster", default="slurm", choices=("slurm", "local", "debug"),
                       help="slurm: submit to Slurm (default), or run submitit's jobs on this machine")
    grid.add_argument("--overwrite", action="store_true", help="redo complete runs")
    grid.add_argument("--quiet", action="store_true", help="no progress bars")
    grid.set_defaults(func=_cmd_grid)

    results = commands.add_parser("results", help="load every run under a folder into one table")
    results.add_argument("dir", help="results folder")
    results.add_argument("--columns", help="comma-separated columns to print")
    results.add_argument("--export", help="write the run table to a .csv or .parquet file")
    results.add_argument("--export-epochs", help="write the per-epoch table to a .csv or .parquet file")
    results.add_argument("--completed-only", action="store_true", help="leave out unfinished runs")
    results.set_defaults(func=_cmd_results)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one-line :class:`ConfigError` (exit status 2, like every other
    error a user can cause) instead of argparse's usage text."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser of ``gnnsuite``."""
    from suite import __version__

    import suite

    parser = _Parser(prog="gnnsuite", description=suite.__doc__)
    parser.add_argument("--version", action="version", version=f"gnnsuite {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _datasets_parser(commands)
    _runs_parser(commands)
    from simulators.cli import add_commands as _simulator_commands
    _simulator_commands(commands)
    from simulators.simulate_run import add_command as _simulate_command
    _simulate_command(commands)
    from experiments.reproduce import add_command as _reproduce_command
    _reproduce_command(commands)
    return parser


def _one_line(text: str) -> str:
    """Messages quote user input (file contents, values): never let one span lines."""
    return " ".join(text.split()) if "\n" in text or "\r" in text else text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except SuiteError as err:
        print(f"gnnsuite: error: {_one_line(str(err))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as err:  # a named file that cannot be read or written (permissions, a full disk, ...)
        if err.filename is None:
            raise
        print(f"gnnsuite: error: {err.filename}: {err.strerror or err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("gnnsuite: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
