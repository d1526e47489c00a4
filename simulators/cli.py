"""Command-line subcommands of the simulators: ``gnnsuite workdepth`` and ``gnnsuite simulate-async SPEC``.

:func:`add_commands` is called by :func:`suite.cli.build_parser`. Errors a user causes are
:class:`~suite.errors.SuiteError` (one line, exit status 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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

    from simulators.work_depth import MODELS, count_forward, work_depth_table

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


def _cmd_simulate_async(args: argparse.Namespace) -> int:
    import pandas as pd

    from simulators.async_gnn import async_spec_from_dict, plot_gantt, simulate_modes, summary_table, tasks_table
    from suite.config import apply_overrides, read_yaml
    from suite.io import atomic_write_bytes, atomic_write_json

    data = read_yaml(args.spec)
    if not isinstance(data, dict):
        raise ConfigError(f"{args.spec}: expected a mapping at the top level")
    spec = async_spec_from_dict(apply_overrides(data, args.set), source=str(args.spec))
    results = simulate_modes(spec)
    summary = summary_table(results)
    columns = ["mode", "makespan_s", "speedup", "iterations_per_s", "utilization_mean", "feature_staleness_mean",
               "feature_staleness_max", "gradient_staleness_max", "weight_staleness_max"]
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary[columns].to_string(index=False))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out / "summary.csv", summary.to_csv(index=False).encode())
        atomic_write_bytes(out / "tasks.csv", tasks_table(results).to_csv(index=False).encode())
        atomic_write_json(out / "summary.json", {"spec": json.loads(spec.model_dump_json()),
                                                 "modes": [r.summary for r in results]})
        print(f"wrote {out}/summary.csv, tasks.csv, summary.json", file=sys.stderr)
    if args.gantt:
        print(f"wrote {plot_gantt(tasks_table(results), args.gantt, title=spec.name)}", file=sys.stderr)
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add ``workdepth`` and ``simulate-async`` to the ``gnnsuite`` subcommands."""
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
