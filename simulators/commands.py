"""Command-line subcommand of the simulators: ``gnnsuite workdepth``.

:func:`add_commands` is called by :func:`suite.cli.build_parser`. The simulation commands that may measure or
draw (``simulate``, ``simulate-async``) are :mod:`experiments.simulator_commands`. Errors a user causes are
:class:`~suite.errors.SuiteError` (one line, exit status 2).
"""

from __future__ import annotations

import argparse

from suite.errors import ConfigError
from suite.io import strict_json_dumps

_SIZES = ("n", "m", "k", "L", "d")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _cmd_workdepth(args: argparse.Namespace) -> int:
    import pandas as pd

    from simulators.work_depth_model import MODELS, count_forward, work_depth_table

    models = [MODELS.get(args.model).name] if args.model else None
    given = {name: getattr(args, f"size_{name}") for name in _SIZES}
    sizes = None
    if any(value is not None for value in given.values()):
        missing = [f"--{name}" for name, value in given.items() if value is None]
        if missing:
            raise ConfigError(f"workdepth: give all of --n --m --k --L --d to evaluate (missing {' '.join(missing)})")
        sizes = given
    table = work_depth_table(models, sizes)
    if args.count:
        if sizes is None:
            raise ConfigError("workdepth: --count needs the sizes --n --m --k --L --d")
        from simulators.op_dag import random_graph

        import numpy as np

        try:
            graph = random_graph(sizes["n"], sizes["d"], sizes["m"], np.random.default_rng(args.seed))
        except ValueError as err:
            raise ConfigError(f"workdepth --count: {err}") from None
        if sizes["n"] > args.max_count_nodes:
            raise ConfigError(f"workdepth --count: --n {sizes['n']} exceeds --max-count-nodes "
                              f"{args.max_count_nodes} (the traced DAG is for small graphs)")
        counts = [count_forward(name, graph, sizes["k"], sizes["L"], args.seed) for name in table["model"]]
        table["counted_forward_work"] = [c.work for c in counts]
        table["counted_forward_depth"] = [c.depth for c in counts]
    if args.json:
        print(strict_json_dumps(table.to_dict(orient="records"), indent=2))
        return 0
    columns = [c for c in table.columns if c != "description" or args.model]
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 90):
        print(table[columns].to_string(index=False))
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add ``workdepth`` to the ``gnnsuite`` subcommands."""
    workdepth = commands.add_parser(
        "workdepth", help="work and depth of GNN models (formulas; evaluated and counted at given sizes)",
        description="Work W and depth D of one layer, a forward pass and a training iteration, as leading terms in "
                    "n (nodes), m (edges), k (features), L (layers), d (max degree); evaluated (log base 2) when "
                    "all five sizes are given; --count also traces the real forward pass on a random graph.")
    workdepth.add_argument("--model", help="one registered model (default: all); see the table")
    for name in _SIZES:
        workdepth.add_argument(f"--{name}", dest=f"size_{name}", type=_positive_int, metavar="INT")
    workdepth.add_argument("--count", action="store_true",
                           help="count W and D of the traced forward pass on a random graph with these sizes")
    workdepth.add_argument("--max-count-nodes", type=_positive_int, default=2048,
                           help="largest n --count accepts (default 2048)")
    workdepth.add_argument("--seed", type=int, default=0, help="seed of the random graph and weights")
    workdepth.add_argument("--json", action="store_true", help="print the rows as JSON")
    workdepth.set_defaults(func=_cmd_workdepth)
