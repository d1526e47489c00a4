"""How fast DENSE samples: against the rate of random gathers, and against the naive sampler at 1 to 5 layers.

Usage::

    python experiments/measure/dense_speed.py [--workdir /tmp/gnnsuite-dense-speed] [--part gather layers]
        [--gather-spec papers-like-s,feature_dim=0,label_rate=0] [--gather-roots 1000] [--gather-fanouts 15 10 5]
        [--layers-spec livejournal-like] [--layers-roots 10000] [--layers-fanout 20] [--max-layers 5]
        [--backends auto torch] [--repeats 15] [--layer-repeats 5] [--warmup 2] [--replace] [--seed 0]

Graphs are synthetic stores (``PRESET[,field=value...]``, see :func:`suite.data.synthetic.config_from_spec`),
generated under ``--workdir`` (outside the repository) on first use and reused afterwards.

Part ``gather`` (the papers setting): ``--gather-roots`` uniformly random roots, fanouts ``15, 10, 5``, incoming
edges, one thread (``torch.set_num_threads(1)``; the numba kernels are single-threaded anyway). Every timed
repeat samples one batch with each DENSE backend, then gathers as many uniformly random positions of the same
``indices`` array as DENSE sampled edges (``torch.index_select``, the random-access bound of sampling), all in
this process, interleaved. Printed: medians of time per batch, sampled edges/s, and DENSE's rate divided by the
gather rate (``ratio``: median of the per-repeat ratios; ``ratio_of_medians`` too).

Part ``layers`` (MariusGNN's setting): ``--layers-roots`` random roots, fanout ``--layers-fanout`` at every hop,
outgoing edges, 1 to ``--max-layers`` layers; naive and DENSE (default backends: the same compiled one-hop
kernels) on the same roots and seeds, interleaved, one thread. Printed per layer count: median time per batch and
sampled edges of both, the naive/DENSE time ratio (speedup) and edge ratio; DENSE is no less efficient per
sampled edge than naive when ``speedup >= edge ratio``.

Timings on a shared machine are noisy: read the ratios (both sides measured in the same repeat), not the
absolute times.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch


from suite.data import GraphStore
from suite.data.synthetic import config_from_spec, generate
from systems.sampling.dense import DenseSampler
from systems.sampling.naive import NaiveSampler
from systems.sampling.sampler import SamplingGraph


def open_store(spec: str, workdir: Path) -> GraphStore:
    """The store of ``spec`` under ``workdir``, generated on first use."""
    config = config_from_spec(spec)
    path = workdir / spec.replace(",", "__").replace("=", "-")
    if not (path / "metadata.json").exists():
        print(f"generating {spec} into {path} ...", flush=True)
        started = time.perf_counter()
        generate(config, path, overwrite=True)
        print(f"  done in {time.perf_counter() - started:.0f} s", flush=True)
    return GraphStore.open(path)


def timed(call):
    """``(seconds, result)`` of ``call()``."""
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def median(values) -> float:
    return statistics.median(values)


def gather_part(args: argparse.Namespace) -> None:
    graph = SamplingGraph.from_store(open_store(args.gather_spec, args.workdir), "in")
    fanouts = tuple(args.gather_fanouts)
    samplers = {backend: DenseSampler(graph, fanouts, replace=args.replace, backend=backend)
                for backend in args.backends}
    names = {backend: f"dense[{sampler.backend}]" for backend, sampler in samplers.items()}
    print(f"\n== DENSE vs random gathers: {args.gather_spec} ({graph.num_nodes:,} nodes, {len(graph.indices):,} "
          f"edges, in), {args.gather_roots} roots, fanouts {list(fanouts)}, replace={args.replace}, 1 thread")
    pick = torch.Generator().manual_seed(args.seed)
    times = {backend: [] for backend in samplers}
    gathers, ratios, edges = [], {backend: [] for backend in samplers}, []
    for repeat in range(-args.warmup, args.repeats):
        roots = torch.randperm(graph.num_nodes, generator=pick)[: args.gather_roots]
        for backend, sampler in samplers.items():
            seconds, sample = timed(lambda: sampler.sample(roots, torch.Generator().manual_seed(repeat)))
            if repeat >= 0:
                times[backend].append(seconds)
        positions = torch.randint(0, len(graph.indices), (sample.num_sampled_edges,), generator=pick)
        seconds, _ = timed(lambda: torch.index_select(graph.indices, 0, positions))
        if repeat >= 0:
            gathers.append(seconds)
            edges.append(sample.num_sampled_edges)
            for backend in samplers:
                ratios[backend].append(seconds / times[backend][-1])
    num_edges = median(edges)
    print(f"sampled edges per batch (median): {num_edges:,.0f}; unique nodes per hop (last batch): "
          f"{list(sample.unique_nodes_per_hop)}; one-hop calls {sample.one_hop_calls:,}")
    print(f"{'':>14} {'ms/batch':>10} {'Medges/s':>10} {'ratio':>7} {'ratio_of_medians':>17}")
    print(f"{'gather':>14} {median(gathers) * 1e3:10.2f} {num_edges / median(gathers) / 1e6:10.1f}")
    for backend in samplers:
        t = median(times[backend])
        print(f"{names[backend]:>14} {t * 1e3:10.2f} {num_edges / t / 1e6:10.1f} {median(ratios[backend]):7.3f} "
              f"{median(gathers) / t:17.3f}")


def layers_part(args: argparse.Namespace) -> None:
    graph = SamplingGraph.from_store(open_store(args.layers_spec, args.workdir), "out")
    print(f"\n== naive vs DENSE: {args.layers_spec} ({graph.num_nodes:,} nodes, {len(graph.indices):,} edges, out), "
          f"{args.layers_roots:,} roots, fanout {args.layers_fanout}, replace={args.replace}, 1 thread")
    print(f"{'layers':>6} {'naive ms':>10} {'dense ms':>10} {'naive edges':>13} {'dense edges':>13} "
          f"{'speedup':>8} {'edge ratio':>10} {'per-edge ok':>11} {'one-hop calls naive/dense':>26}")
    pick = torch.Generator().manual_seed(args.seed)
    for num_layers in range(1, args.max_layers + 1):
        fanouts = (args.layers_fanout,) * num_layers
        naive = NaiveSampler(graph, fanouts, replace=args.replace)
        dense = DenseSampler(graph, fanouts, replace=args.replace)
        result = {"naive": ([], []), "dense": ([], [])}
        calls = {}
        warmup = args.warmup if num_layers <= 2 else 1
        for repeat in range(-warmup, args.layer_repeats):
            roots = torch.randperm(graph.num_nodes, generator=pick)[: args.layers_roots]
            order = [("naive", naive), ("dense", dense)]
            if repeat % 2:
                order.reverse()
            for name, sampler in order:
                seconds, sample = timed(lambda: sampler.sample(roots, torch.Generator().manual_seed(repeat)))
                if repeat >= 0:
                    result[name][0].append(seconds)
                    result[name][1].append(sample.num_sampled_edges)
                    calls[name] = (sum(b.num_dst for b in sample.blocks) if name == "naive"
                                   else sample.one_hop_calls)
                del sample
        (naive_t, naive_e), (dense_t, dense_e) = result["naive"], result["dense"]
        speedup = median(naive_t) / median(dense_t)
        edge_ratio = median(naive_e) / median(dense_e)
        print(f"{num_layers:6d} {median(naive_t) * 1e3:10.1f} {median(dense_t) * 1e3:10.1f} {median(naive_e):13,.0f} "
              f"{median(dense_e):13,.0f} {speedup:8.2f} {edge_ratio:10.2f} {str(speedup >= edge_ratio):>11} "
              f"{calls['naive']:>12,} / {calls['dense']:<12,}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/gnnsuite-dense-speed"))
    parser.add_argument("--part", nargs="+", choices=("gather", "layers"), default=["gather", "layers"])
    parser.add_argument("--gather-spec", default="papers-like-s,feature_dim=0,label_rate=0")
    parser.add_argument("--gather-roots", type=int, default=1000)
    parser.add_argument("--gather-fanouts", type=int, nargs="+", default=[15, 10, 5])
    parser.add_argument("--layers-spec", default="livejournal-like")
    parser.add_argument("--layers-roots", type=int, default=10_000)
    parser.add_argument("--layers-fanout", type=int, default=20)
    parser.add_argument("--max-layers", type=int, default=5)
    parser.add_argument("--backends", nargs="+", choices=("auto", "numba", "torch"), default=["auto", "torch"])
    parser.add_argument("--repeats", type=int, default=15, help="timed batches of the gather part")
    parser.add_argument("--layer-repeats", type=int, default=5, help="timed batches per layer count")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--replace", action="store_true", help="sample with replacement when degree > fanout")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    if "gather" in args.part:
        gather_part(args)
    if "layers" in args.part:
        layers_part(args)


if __name__ == "__main__":
    main()
