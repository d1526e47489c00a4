"""The ``gnnsuite`` command line (also ``python -m suite``).

Errors a user can cause are :class:`suite.errors.SuiteError`: they print as one line on stderr and exit with
status 2. Ctrl-C exits with status 130 and leaves no half-written output (writers stage and rename).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import typing
from collections.abc import Callable, Sequence
from pathlib import Path

from suite.errors import ConfigError, SuiteError

EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130


def _print_info(info: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(info, indent=2))
        return
    width = max(len(key) for key in info)
    for key, value in info.items():
        print(f"{key:<{width}}  {value}")


# ---------------------------------------------------------------------------------------------- datasets
def _synthetic_overrides(args: argparse.Namespace, fields: Sequence[dataclasses.Field]) -> dict:
    return {f.name: getattr(args, f.name) for f in fields if getattr(args, f.name, None) is not None}


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _add_synthetic_options(parser: argparse.ArgumentParser) -> Sequence[dataclasses.Field]:
    """One ``--field-name`` option per SyntheticConfig field, so every generator parameter is settable."""
    from suite.graph.synthetic import SyntheticConfig

    fields = [f for f in dataclasses.fields(SyntheticConfig) if f.name != "name"]
    hints = typing.get_type_hints(SyntheticConfig)
    group = parser.add_argument_group("generator parameters (override the preset)")
    for field in fields:
        kind = hints[field.name]
        convert: Callable = _parse_bool if kind is bool else kind if kind in (int, float, str) else str
        group.add_argument(f"--{field.name.replace('_', '-')}", dest=field.name, type=convert, default=None,
                           metavar=getattr(kind, "__name__", "VALUE").upper())
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


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser of ``gnnsuite``."""
    from suite import __version__

    parser = argparse.ArgumentParser(prog="gnnsuite", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"gnnsuite {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _datasets_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except SuiteError as err:
        print(f"gnnsuite: error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("gnnsuite: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
