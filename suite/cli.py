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

from suite.errors import ConfigError, SuiteError, os_error_line
from suite.io import strict_json_dumps

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
DESCRIPTION = "gnnsuite: resource-efficient GNN training across disk, CPU memory and accelerator."
# Upper layers (simulators, experiments, third-party packages) add subcommands through entry points of this
# group, one named after each subcommand, naming a function ``add_commands(subparsers)`` that adds it; the harness
# never imports them by name, and imports only the invoked subcommand's module (all of them to list them).
COMMANDS_GROUP = "gnnsuite.commands"


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
    from suite.data.synthetic import SyntheticConfig, parse_field_value

    fields = [f for f in dataclasses.fields(SyntheticConfig) if f.name != "name"]
    group = parser.add_argument_group("generator parameters (override the preset)")
    for field in fields:
        group.add_argument(f"--{field.name.replace('_', '-')}", dest=field.name, default=None,
                           type=functools.partial(parse_field_value, field.name),
                           metavar=str(field.type).split(" ")[0].upper())
    return fields


def _cmd_generate(args: argparse.Namespace) -> int:
    from suite.data.synthetic import PRESETS, SyntheticConfig, generate

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


def _node_split_options(args: argparse.Namespace):
    """The ``--per-class`` / ``--node-split`` / ``--split-seed`` / ``--split-component`` options of ``prepare``; None
    when none is given."""
    from suite.data.loaders.edgelist import parse_fractions
    from suite.data.loaders.node_splits import NodeSplitOptions, parse_per_class

    if args.per_class is None and args.node_split is None and args.split_seed is None and \
            args.split_component is None:
        return None
    return NodeSplitOptions(
        seed=args.split_seed or 0,
        per_class=parse_per_class(args.per_class, "--per-class") if args.per_class is not None else None,
        fractions=parse_fractions(args.node_split, "--node-split") if args.node_split is not None else None,
        component=args.split_component or "all",
    )


def _cmd_prepare(args: argparse.Namespace) -> int:
    from suite.data.loaders import prepare

    name = args.dataset_name or args.name
    out = Path(args.out) if args.out else Path("data") / name
    store = prepare(args.name, Path(args.root), out, overwrite=args.overwrite, progress=not args.quiet,
                    dataset_name=name, split=_node_split_options(args))
    print(f"wrote {store.path}", file=sys.stderr)
    _print_info(store.info(), args.json)
    return 0


def _column(text: str | None) -> str | int | None:
    return int(text) if text is not None and text.isdigit() else text


def _memory_budget(args: argparse.Namespace):
    """The memory an out-of-core command may use (``--memory-limit``, the cgroup's limit, ``MemAvailable``)."""
    from suite.executors import parse_memory
    from suite.memory import memory_budget

    return memory_budget(parse_memory(args.memory_limit, "--memory-limit"))


def _cmd_import(args: argparse.Namespace) -> int:
    from suite.data.loaders.edgelist import EdgeListFormat, import_edge_list, parse_fractions

    fmt = EdgeListFormat(source=_column(args.source), destination=_column(args.destination),
                         relation=_column(args.relation), weight=_column(args.weight), header=args.header,
                         delimiter=args.delimiter, file_format=args.format, id_type=args.id_type)
    started = time.perf_counter()
    store = import_edge_list(
        Path(args.edges), Path(args.out), fmt=fmt,
        split=parse_fractions(args.split, "--split") if args.split else None, valid=args.valid, test=args.test,
        features=args.features, labels=args.labels,
        node_split=parse_fractions(args.node_split, "--node-split") if args.node_split else None,
        remap=not args.no_remap, directed=not args.undirected, seed=args.seed, name=args.name,
        overwrite=args.overwrite, chunk_bytes=args.chunk_mb << 20, memory=_memory_budget(args))
    print(f"wrote {store.path} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    _print_info(store.info(), args.json)
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from suite.data.store import GraphStore

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
    from suite.data.partition import partition_store
    from suite.data.store import GraphStore

    store = GraphStore.open(args.store)
    out = Path(args.out) if args.out else Path(args.store).with_name(
        f"{Path(args.store).name}-p{args.num_partitions}-{Path(args.order).stem}"
    )
    result = partition_store(store, out, args.num_partitions, order=args.order, seed=args.seed,
                             overwrite=args.overwrite, progress=not args.quiet, memory=_memory_budget(args))
    print(f"wrote {out}", file=sys.stderr)
    _print_info(result.info(), args.json)
    return 0


def _add_common(parser: argparse.ArgumentParser, *, writes: bool) -> None:
    parser.add_argument("--json", action="store_true", help="print the store's info as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    if writes:
        parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")


def _add_memory_limit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memory-limit", metavar="SIZE",
                        help="memory the command may use (8G, 512M, bytes): its chunks and sorts are sized to fit; "
                             "default: the memory available (MemAvailable, or the cgroup's limit)")


def _datasets_parser(commands: argparse._SubParsersAction, full: bool = True) -> None:
    """``gnnsuite datasets``; its subcommands only when ``full`` (their help lists the loaders, presets and
    orderings, which imports torch: two seconds that ``gnnsuite results`` and the like need not pay)."""
    datasets = commands.add_parser("datasets", help="generate, prepare, inspect and partition graph stores")
    if not full:
        return
    from suite.data.loaders import LOADERS
    from suite.data.partition import ORDERINGS
    from suite.data.synthetic import PRESETS

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
    prepare.add_argument("--name", dest="dataset_name",
                         help="name recorded in the store (default: the loader's; 'openke' takes any benchmark "
                              "folder, e.g. --name codex-m; 'shchur' any Shchur et al. .npz file)")
    prepare.add_argument("--out", help="output store folder (default: data/<name>)")
    prepare.add_argument("--per-class", help="datasets without a fixed split (Shchur's, MUSAE's): training and "
                                             "validation nodes per class, the rest test, e.g. 20,30 (Shchur's "
                                             "default)")
    prepare.add_argument("--node-split", help="datasets without a fixed split: fractions train,valid,test of the "
                                              "labelled nodes, e.g. 0.6,0.2,0.2 (MUSAE's default)")
    prepare.add_argument("--split-seed", type=int, help="seed of the node split draw (default 0)")
    prepare.add_argument("--split-component", choices=["all", "largest"],
                         help="datasets without a fixed split: draw it from every labelled node (default) or from "
                              "the largest connected component only (Shchur et al.'s protocol)")
    _add_common(prepare, writes=True)
    prepare.set_defaults(func=_cmd_prepare)

    edges = sub.add_parser("import", help="import an edge list (CSV, TSV, Parquet) as a graph store",
                           description="Read an edge list in chunks (bounded memory), remap node ids of any value "
                                       "to 0..n-1, and write a graph store (see docs/datasets.md).")
    edges.add_argument("edges", help="edge-list file: .csv (comma), .tsv/.txt/other (tab), .parquet")
    edges.add_argument("--out", required=True, help="output store folder")
    edges.add_argument("--source", default="0", help="source column: name (with --header) or 0-based position "
                                                     "(default 0)")
    edges.add_argument("--destination", default="1", help="destination column (default 1)")
    edges.add_argument("--relation", help="relation column (default: untyped)")
    edges.add_argument("--weight", help="weight column (kept as *_edge_weights)")
    edges.add_argument("--header", action="store_true", help="the first non-comment line names the columns")
    edges.add_argument("--delimiter", help="field separator (default: ',' for .csv, tab otherwise)")
    edges.add_argument("--format", choices=("csv", "parquet"), help="file format (default: from the suffix)")
    edges.add_argument("--id-type", default="auto", choices=("auto", "int", "string"),
                       help="type of the id columns (default: inferred from the first block)")
    edges.add_argument("--no-remap", action="store_true",
                       help="use the ids as node ids (non-negative integers; n = largest id + 1)")
    edges.add_argument("--undirected", action="store_true", help="store both directions of every edge")
    edges.add_argument("--split", help="edge split fractions train,valid,test, e.g. 0.9,0.05,0.05")
    edges.add_argument("--valid", help="file of validation edges (same format) instead of --split")
    edges.add_argument("--test", help="file of test edges (same format) instead of --split")
    edges.add_argument("--features", help=".npy node features, row k = node with original id k")
    edges.add_argument("--labels", help=".npy labels (row = original id) or a text file 'node label' per line")
    edges.add_argument("--node-split", help="node split fractions over labelled nodes, e.g. 0.8,0.1,0.1")
    edges.add_argument("--seed", type=int, default=0, help="seed of the split draws (default 0)")
    edges.add_argument("--name", help="name recorded in the store (default: the file's stem)")
    edges.add_argument("--chunk-mb", type=int, default=64,
                       help="MiB of input per batch at most (default 64; less when memory is short)")
    _add_memory_limit(edges)
    _add_common(edges, writes=True)
    edges.set_defaults(func=_cmd_import)

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
    _add_memory_limit(partition)
    _add_common(partition, writes=True)
    partition.set_defaults(func=_cmd_partition)


# ---------------------------------------------------------------------------------------------- runs
def _cmd_run(args: argparse.Namespace) -> int:
    from suite.config import load_spec
    from suite.runner import dry_run, run_spec

    from suite.executors import parse_memory

    spec = load_spec(args.spec, args.set)
    memory_limit = parse_memory(args.memory_limit, "--memory-limit")
    try:
        if args.dry_run:
            return _print_dry_run(dry_run(spec, memory_limit), args.json)
        summary = run_spec(spec, Path(args.out), overwrite=args.overwrite, progress=not args.quiet,
                           log_to=tuple(args.log_to), memory_limit=memory_limit)
    except SuiteError as err:
        raise type(err)(f"{args.spec}: {err}") from None
    if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 speaks for the run
        _print_run(summary)
    return 0


def _print_dry_run(plan: dict, as_json: bool) -> int:
    """Print what ``run --dry-run`` found: the run, its memory estimate and the memory available; exit status 0
    when it fits (or cannot be told), 2 when it does not (as the run would stop)."""
    from suite.memory import describe

    estimate, available = plan["estimate"], plan["available"]
    if as_json:
        print(strict_json_dumps({**{k: v for k, v in plan.items() if k not in ("estimate", "available")},
                                 "memory_estimate": estimate.to_dict() if estimate is not None else None,
                                 "available_bytes": available.bytes, "available_source": available.source},
                                indent=2))
    else:
        print(f"{plan['run_id']}: dry run (nothing trained or written)")
        print(f"  system {plan['system']} on {plan['dataset']}: {plan['num_nodes']} nodes, {plan['num_edges']} edges")
        lines = describe(estimate, available) if estimate is not None else ["no memory estimate for this system"]
        print("\n".join(f"  {line}" for line in lines))
    return EXIT_USER_ERROR if plan["fits"] is False else 0


def _print_run(summary: dict) -> None:
    from suite.run_contract import main_metric

    metrics = summary.get("metrics", {})
    main = metrics.get("main") or main_metric(summary.get("task", "node_classification"))
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
    from suite.grid import expand_grid, failures, run_grid, select_specs

    from suite.executors import ExecutorOptions, parse_memory

    specs = select_specs(expand_grid(Path(args.grid), args.set), args.where)
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
                    "metrics.test.accuracy", "metrics.valid.mrr", "metrics.test.mrr", "metrics.test.hits@10",
                    "train_examples_per_s", "compute_utilization", "cost_usd.run",
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
    run.add_argument("--log-to", action="append", default=[], metavar="TRACKER",
                     help="also log to a tracker: tensorboard (RUN_DIR/tensorboard), mlflow (repeatable)")
    run.add_argument("--dry-run", action="store_true",
                     help="check the spec and dataset and print the estimated peak memory; train nothing")
    run.add_argument("--memory-limit", metavar="SIZE",
                     help="stop before training when the estimated peak memory exceeds SIZE (8G, 512M, bytes); "
                          "default: the memory available (MemAvailable, or the cgroup's limit)")
    run.add_argument("--json", action="store_true", help="--dry-run: print the estimate as JSON")
    run.set_defaults(func=_cmd_run)

    grid = commands.add_parser("grid", help="run every point of a grid (base spec + axes), skipping finished runs")
    grid.add_argument("grid", help="grid YAML file")
    grid.add_argument("--out", default="out/runs", help="results folder (default out/runs)")
    grid.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every run")
    grid.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                      help="run only the points whose field equals the value (repeatable: all must hold)")
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


# ---------------------------------------------------------------------------------------------- trained models
def _cmd_eval(args: argparse.Namespace) -> int:
    from suite.model import load_model
    from suite.recorder import read_records
    from suite.run_contract import main_metric

    model = load_model(args.run_dir, args.checkpoint, device=args.device, overrides=args.set)
    metrics = model.evaluate(args.split)
    epoch = model.checkpoint["epoch"]
    recorded = next((r for r in reversed(read_records(args.run_dir)) if r.get("kind") == "eval"
                     and r.get("split") == args.split and r.get("epoch") == epoch), None)
    main = main_metric(model.spec.training.task)
    result = {"run_dir": str(args.run_dir), "checkpoint": args.checkpoint, "epoch": epoch, "split": args.split,
              "metrics": metrics}
    if recorded is not None and recorded.get(main) is not None:
        result["recorded"] = {main: recorded[main]}
        result["equal_to_recorded"] = metrics.get(main) == recorded[main]
    if args.json:
        print(strict_json_dumps(result, indent=2))
        return 0
    print(f"{args.run_dir}: {args.split} after epoch {epoch} ({args.checkpoint} checkpoint)")
    for key, value in metrics.items():
        print(f"  {key}: {value:.6f}" if isinstance(value, float) else f"  {key}: {value}")
    if "recorded" in result:
        verdict = "equal" if result["equal_to_recorded"] else "DIFFERENT"
        print(f"  recorded {main}: {result['recorded'][main]:.6f} ({verdict})")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    import pandas as pd

    from suite.model import load_model, read_ids
    from suite.results import export

    if (args.nodes is None) == (args.triples is None):
        raise ConfigError("predict: give exactly one of --nodes FILE or --triples FILE")
    model = load_model(args.run_dir, args.checkpoint, device=args.device)
    if args.nodes is not None:
        nodes = read_ids(args.nodes, columns=1)
        probabilities = model.predict_nodes(nodes)
        table = pd.DataFrame({"node": nodes.numpy(), "predicted": probabilities.argmax(1).numpy()})
        if args.top_k:
            top = probabilities.topk(min(args.top_k, probabilities.shape[1]), dim=1)
            table["top_classes"] = top.indices.tolist()
            table["top_probabilities"] = top.values.tolist()
        else:
            for c in range(probabilities.shape[1]):
                table[f"p{c}"] = probabilities[:, c].numpy()
    else:
        triples = read_ids(args.triples, columns=3)
        scored = model.score_triples(triples, top_k=args.top_k or 0)
        table = pd.DataFrame({"src": triples[:, 0].numpy(), "rel": triples[:, 1].numpy(),
                              "dst": triples[:, 2].numpy(), "score": scored["score"].numpy(),
                              "tail_rank": scored["tail_rank"].numpy(), "head_rank": scored["head_rank"].numpy()})
        if "top_tails" in scored:
            table["top_tails"] = scored["top_tails"].tolist()
    print(f"wrote {export(table, args.out)} ({len(table)} rows)", file=sys.stderr)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from suite.model import load_model

    out = Path(args.out)
    if args.format:
        if not out.suffix:
            out = out.with_suffix(f".{args.format}")
        elif out.suffix.lower().lstrip(".") != args.format:
            raise ConfigError(f"--format {args.format}: does not match --out {out} (suffix {out.suffix})")
    model = load_model(args.run_dir, args.checkpoint, device=args.device)
    started = time.perf_counter()
    path = model.export(args.what, out)
    print(f"wrote {path} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


def _models_parser(commands: argparse._SubParsersAction, full: bool = True) -> None:
    """``eval``, ``predict`` and ``export``; ``export``'s arguments only when ``full`` (its choices come from
    :mod:`suite.model`, which imports torch)."""

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run_dir", help="a run folder (OUT/<run_id>) with checkpoints")
        parser.add_argument("--checkpoint", default="last", choices=("last", "best"),
                            help="which checkpoint (default last: the state of the run's final metrics)")
        parser.add_argument("--device", default="cpu", help="where the model runs (default cpu)")

    evaluate = commands.add_parser("eval", help="re-evaluate a run's saved model (reproduces its recorded metric)")
    common(evaluate)
    evaluate.add_argument("--split", default="test", choices=("valid", "test"), help="split (default test)")
    evaluate.add_argument("--set", action="append", default=[], metavar="evaluation.KEY=VALUE",
                          help="change an evaluation setting, e.g. --set evaluation.fanouts=[-1,-1] (repeatable)")
    evaluate.add_argument("--json", action="store_true", help="print the result as JSON")
    evaluate.set_defaults(func=_cmd_eval)

    predict = commands.add_parser("predict", help="class probabilities of nodes, or scores and filtered ranks of "
                                                  "triples, as a table")
    common(predict)
    predict.add_argument("--nodes", help="node ids: .npy, .csv/.txt (one per line or a 'node' column), .parquet")
    predict.add_argument("--triples", help="(src, rel, dst) ids: .npy (k, 3), .csv/.tsv/.txt, .parquet")
    predict.add_argument("--top-k", type=int, default=0, help="nodes: the k likeliest classes; triples: the k best "
                                                             "filtered tails of each (src, rel)")
    predict.add_argument("--out", required=True, help="output table (.csv or .parquet)")
    predict.set_defaults(func=_cmd_predict)

    export = commands.add_parser("export", help="write node embeddings, encoder outputs, predictions or relation "
                                                "parameters of a run's saved model")
    if not full:
        return
    from suite.model import EXPORTS, FORMATS

    common(export)
    export.add_argument("--what", required=True, choices=EXPORTS, help="what to write")
    export.add_argument("--format", choices=FORMATS, help="file format (default: from --out's suffix)")
    export.add_argument("--out", required=True, help="output file")
    export.set_defaults(func=_cmd_export)


def _cmd_import_marius(args: argparse.Namespace) -> int:
    from suite import import_marius

    spec = import_marius(args.config, args.out, dataset=args.dataset, root=args.root, overwrite=args.overwrite)
    print(f"wrote {args.out}: {spec.training.task}, {spec.model.encoder}"
          f"{' + ' + spec.model.decoder if spec.model.decoder else ''}, system {spec.system.name}")
    return 0


def _marius_parser(commands: argparse._SubParsersAction) -> None:
    marius = commands.add_parser("import-marius", help="translate a Marius (MariusGNN) config into a run spec",
                                 description="Translate a Marius YAML config into a run spec; every Marius field is "
                                             "mapped or refused with a one-line error (table: docs/datasets.md).")
    marius.add_argument("config", help="Marius config YAML")
    marius.add_argument("--out", required=True, help="run spec YAML to write")
    marius.add_argument("--dataset", help="registered dataset name (default: from storage.dataset.dataset_dir)")
    marius.add_argument("--root", help="dataset.root (default: storage.dataset.dataset_dir)")
    marius.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    marius.set_defaults(func=_cmd_import_marius)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one-line :class:`ConfigError` (exit status 2, like every other
    error a user can cause) instead of argparse's usage text."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser of ``gnnsuite``: every subcommand, or for the command line ``argv`` the built-in ones
    and the upper layers' subcommand it invokes (all of them when it names none, or one that is unknown: the help
    and the error list them)."""
    from suite.version import __version__

    parser = _Parser(prog="gnnsuite", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"gnnsuite {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    invoked = None if argv is None else _command_word(argv)
    _datasets_parser(commands, full=invoked in (None, "datasets"))
    _runs_parser(commands)
    _models_parser(commands, full=invoked in (None, "export"))
    _marius_parser(commands)
    builtin = set(commands.choices)
    for add_commands in registered_commands(None if argv is None else "" if invoked in builtin else invoked):
        add_commands(commands)
    return parser


def _command_word(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` invokes: its first word that is not an option (the top-level options take no
    value); None when it names none."""
    return next((word for word in argv if not word.startswith("-")), None)


def registered_commands(command: str | None = None) -> list:
    """The ``add_commands(subparsers)`` functions of the upper layers' entry points (group
    :data:`COMMANDS_GROUP`), each once, in the order of their targets: only the one adding ``command`` when an
    entry point is named so, none for ``""``, otherwise all of them."""
    from importlib.metadata import entry_points

    entries = entry_points(group=COMMANDS_GROUP)
    if command is not None:
        named = [entry for entry in entries if entry.name == command]
        if named or command == "":
            entries = named
    targets = {entry.value: entry for entry in entries}
    return [targets[value].load() for value in sorted(targets)]


def _one_line(text: str) -> str:
    """Messages quote user input (file contents, values): never let one span lines."""
    return " ".join(text.split()) if "\n" in text or "\r" in text else text


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(argv).parse_args(argv)
        return args.func(args)
    except SuiteError as err:
        print(f"gnnsuite: error: {_one_line(str(err))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except OSError as err:  # a file that cannot be read or written (permissions, a full disk, an IO error, ...)
        print(f"gnnsuite: error: {_one_line(os_error_line(err))}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("gnnsuite: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
