"""One training step (sample + gather + forward + backward + optimizer step) with DENSE against the naive sampler.

Usage::

    python experiments/measure/dense_training_step.py [--preset arxiv-like] [--fanouts 15 10 5] [--batch-size 1000]
        [--repeats 20] [--warmup 3] [--encoder graphsage] [--device cpu] [--threads N] [--clock wall|cpu]
        [--no-truncate]
        [--csv out/dense_training_step.csv]

Both samplers run side by side in one process on the same graph, model shape and batches: the steps alternate
between the samplers (naive, dense, dense, naive, naive, dense, ...: the order flips every step) so that both see
the same machine noise, each sampler has its own model and optimizer built from the same seed, and the i-th step
of both samplers uses the same roots.
After ``--warmup`` steps each, ``--repeats`` steps each are timed; the table reports per-stage medians
(``sample``, ``gather``, ``compute`` = transfer + forward + backward + step; on CUDA the compute stage is
synchronized) and the median of whole steps, plus per batch the sampled edges, the edges the layers aggregate
over (``block_edges``, summed over the layers) and the input nodes, and the naive/dense ratios of the median
sample and step (> 1: DENSE is faster). The samplers' backend (numba kernels or torch operations) is the default
one; set ``GNNSUITE_SAMPLER_BACKEND=torch`` to time the torch backend.

Times are wall times (``--clock wall``) or the process's CPU time (``--clock cpu``: with ``--threads 1`` on CPU,
every operation runs in the calling thread, so this is the work of the step without the time spent waiting for
a core, robust on a machine shared with other busy processes; not meaningful with a GPU).

DENSE runs with its default ``truncate=True``: layer ``l`` aggregates over at most its own fanout of each node's
(once) sampled neighbours, so its layers do the naive layers' amount of work (``block_edges`` about equal) while
sampling stays deduplicated; ``--no-truncate`` times MariusGNN's reuse of every node's whole sample at every layer
(more edges at the outer layers when the fanouts decrease outwards).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from torch.nn import functional as F

import suite.plugins  # noqa: F401  (registers the built-in samplers, models and datasets)
from suite.config import DatasetSpec, ModelSpec
from suite.datasets import open_dataset
from suite.registry import MODELS, SAMPLERS
from systems.sampling.sampler import SamplingGraph

STAGES = ("sample", "gather", "compute")


@dataclass
class Contender:
    """One sampler with its own model and optimizer, and what its timed steps measured."""

    name: str
    sampler: object
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    stage_s: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in STAGES})
    step_s: list[float] = field(default_factory=list)
    sampled_edges: list[int] = field(default_factory=list)
    block_edges: list[int] = field(default_factory=list)
    input_nodes: list[int] = field(default_factory=list)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
"""``wall``: elapsed time; ``cpu``: CPU time of the whole process (all its threads)."""


def train_step(contender: Contender, roots: torch.Tensor, features: torch.Tensor, labels: torch.Tensor,
               generator: torch.Generator, device: torch.device, record: bool,
               clock: Callable[[], float] = time.perf_counter) -> None:
    """One step of ``contender`` on ``roots``; its stage times (by ``clock``) are appended when ``record``."""
    started = clock()
    sample = contender.sampler.sample(roots, generator)
    sampled = clock()
    x, y = features[sample.input_nodes], labels[roots]
    gathered = clock()
    x, y, sample = x.to(device), y.to(device), sample.to(device)
    loss = F.cross_entropy(contender.model(x, sample), y)
    contender.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    contender.optimizer.step()
    _synchronize(device)
    finished = clock()
    if record:
        for stage, seconds in zip(STAGES, (sampled - started, gathered - sampled, finished - gathered)):
            contender.stage_s[stage].append(seconds)
        contender.step_s.append(finished - started)
        contender.sampled_edges.append(sample.num_sampled_edges)
        contender.block_edges.append(sum(block.edge_index.shape[1] for block in sample.blocks))  # built already
        contender.input_nodes.append(len(sample.input_nodes))


def build_contenders(names: Sequence[str], graph: SamplingGraph, spec: ModelSpec, in_dim: int, out_dim: int,
                     device: torch.device, seed: int, learning_rate: float, truncate: bool = True
                     ) -> list[Contender]:
    """One :class:`Contender` per sampler name, every model initialized from ``seed`` (DENSE with ``truncate``)."""
    contenders = []
    for name in names:
        torch.manual_seed(seed)
        model = MODELS.get(spec.encoder)(spec, in_dim, out_dim).to(device).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
        options = {"truncate": truncate} if name == "dense" else {}
        contenders.append(Contender(name, SAMPLERS.get(name)(graph, spec.fanouts, **options), model, optimizer))
    return contenders


def summarize(contenders: Sequence[Contender]) -> pd.DataFrame:
    """One row per sampler: median seconds per stage and per step, mean edges and input nodes per batch."""
    rows = []
    for contender in contenders:
        row = {"sampler": contender.name, "backend": getattr(contender.sampler, "backend", "-")}
        row.update({f"{stage}_ms": 1e3 * statistics.median(contender.stage_s[stage]) for stage in STAGES})
        row["step_ms"] = 1e3 * statistics.median(contender.step_s)
        row["sampled_edges"] = statistics.fmean(contender.sampled_edges)
        row["block_edges"] = statistics.fmean(contender.block_edges)
        row["input_nodes"] = statistics.fmean(contender.input_nodes)
        rows.append(row)
    table = pd.DataFrame(rows).set_index("sampler")
    table["naive/this sample"] = table.loc["naive", "sample_ms"] / table["sample_ms"]
    table["naive/this step"] = table.loc["naive", "step_ms"] / table["step_ms"]
    return table


def run(args: argparse.Namespace) -> pd.DataFrame:
    """Time the steps of every sampler in ``args.samplers`` side by side; return the summary table."""
    device = torch.device(args.device)
    store = open_dataset(DatasetSpec(name="synthetic", preset=args.preset, cache_dir=args.cache_dir))
    graph = SamplingGraph.from_store(store, "in")
    features = store.features.to(torch.float32, copy=True)
    labels = store.labels.to(torch.int64, copy=True)
    train = store.split("train").to(torch.int64)
    train = train[labels[train] >= 0]
    spec = ModelSpec(encoder=args.encoder, num_layers=len(args.fanouts), hidden_dim=args.hidden_dim,
                     fanouts=tuple(args.fanouts), dropout=0.5)
    contenders = build_contenders(args.samplers, graph, spec, features.shape[1], store.num_classes or
                                  int(labels.max()) + 1, device, args.seed, args.learning_rate, args.truncate)
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(args.seed))
    batches = train[order].split(args.batch_size)
    from suite.load import LoadMonitor, load_columns

    monitor = LoadMonitor().start()
    for step in range(args.warmup + args.repeats):
        roots = batches[step % len(batches)]
        # The order alternates per step, so that neither sampler always runs right after the other's step.
        for contender in (contenders if step % 2 == 0 else contenders[::-1]):
            generator = torch.Generator().manual_seed(args.seed + step)
            train_step(contender, roots, features, labels, generator, device, record=step >= args.warmup,
                       clock=CLOCKS[args.clock])
    return summarize(contenders).assign(**load_columns(monitor.stop()))  # foreign load while timing


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="arxiv-like", help="synthetic dataset preset")
    parser.add_argument("--cache-dir", default="data", help="where the generated store is kept")
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5], help="one per layer, outermost last")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--hidden-dim", type=int, default=128)
    parser.add_argument("--encoder", default="graphsage")
    parser.add_argument("--samplers", nargs="+", default=["naive", "dense"])
    parser.add_argument("--learning-rate", type=float, default=0.005)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per sampler")
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per sampler")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-truncate", dest="truncate", action="store_false",
                        help="DENSE layers use every node's whole sample (MariusGNN's reuse) instead of their fanout")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's default)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall time (default), or the process's CPU time: with --threads 1 on CPU, the work "
                             "done, without the time spent waiting for a core on a shared machine")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, help="also write the table as CSV")
    args = parser.parse_args(argv)
    if "naive" not in args.samplers:
        parser.error("--samplers must include naive (the reference of the ratio)")
    return args


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: print the table (and write it as CSV with ``--csv``)."""
    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    table = run(args)
    print(f"{args.encoder}, {len(args.fanouts)} layers, fanouts {args.fanouts}, batch {args.batch_size}, "
          f"{args.preset}, {args.device}, torch threads {torch.get_num_threads()}, "
          f"DENSE {'truncated to each layer' if args.truncate else 'whole samples'}, {args.clock} clock; "
          f"medians of {args.repeats} steps after {args.warmup} warm-up steps each")
    print(table.to_string(float_format=lambda v: f"{v:,.2f}"))
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.csv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
