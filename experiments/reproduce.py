"""``gnnsuite reproduce``: run every figure's experiment, redraw every figure, write ``REPORT.md``.

Each figure is a :class:`Job` registered in :data:`JOBS`: how to run its experiment in ``quick`` and ``full``
mode (the experiments' grids skip runs already recorded, so a second call only redraws), the tables and figures it
writes, and what the full mode costs. The report (:mod:`experiments.report`) is then generated from the tables
alone.

Modes: ``quick`` (the README's main command; <= 15 minutes on a 2-core machine; small settings) writes to
``results/``, whose files are the committed reference outputs; ``full`` (the paper-scale settings; its time and
disk needs are listed before it starts) writes to ``results/full/``. Runs go to ``out/reproduce-<mode>/``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from suite.errors import ConfigError  # noqa: E402
from suite.registry import Registry  # noqa: E402

MODES = ("quick", "full")


@dataclass(frozen=True)
class Paths:
    """Where a job reads and writes: ``results`` (tables and figures), ``runs`` (run folders), ``data``."""

    results: Path
    runs: Path
    data: Path


@dataclass(frozen=True)
class Job:
    """One figure's reproduction.

    Attributes:
        name: the figure's name (``--only NAME``).
        title: what the figure shows.
        run: ``run(mode, paths)`` runs the experiment and writes the job's outputs under ``paths.results``.
        outputs: file names the job writes under ``paths.results``.
        full_cost: expected time and disk of the full mode, on a 2-core machine.
    """

    name: str
    title: str
    run: Callable[[str, Paths], None]
    outputs: tuple[str, ...]
    full_cost: str


JOBS: Registry = Registry("figure")


def job(name: str, title: str, outputs: tuple[str, ...], full_cost: str):
    """Register the decorated ``run(mode, paths)`` as the job ``name``."""
    def register(run: Callable[[str, Paths], None]) -> Callable[[str, Paths], None]:
        JOBS.register(name, Job(name, title, run, outputs, full_cost))
        return run
    return register


def _check(status: int, what: str) -> None:
    if status:
        raise RuntimeError(f"{what} exited with status {status}")


# ---------------------------------------------------------------------------------------------- the jobs
@job("sampling", "DENSE vs naive sampling: time per batch and sampled edges vs layers",
     ("sampling.csv", "sampling.png"), "about 15 minutes; livejournal-like and papers-like-s stores, ~4 GiB")
def _sampling(mode: str, paths: Paths) -> None:
    from experiments import sampling

    args = ["--csv", str(paths.results / "sampling.csv"), "--png", str(paths.results / "sampling.png"),
            "--data-dir", str(paths.data)]
    _check(sampling.main(args + (["--quick"] if mode == "quick" else [])), "experiments/sampling.py")


@job("pipeline", "pipelined vs in-memory: epoch time, compute utilization, efficiency; async vs sync accuracy",
     ("pipeline_speed.csv", "pipeline_accuracy.csv", "pipeline_speed.png"),
     "about 40 minutes; arxiv-like and products-like stores, ~3 GiB")
def _pipeline(mode: str, paths: Paths) -> None:
    from experiments import pipeline

    args = ["--out", str(paths.runs / "pipeline"), "--results", str(paths.results), "--data-dir", str(paths.data),
            "--quiet"]
    _check(pipeline.main(args + (["--quick"] if mode == "quick" else [])), "experiments/pipeline.py")


@job("pipeline_validation", "pipeline simulator: predicted vs measured epoch time and utilization",
     ("pipeline_validation.csv", "pipeline_validation.png", "pipeline_validation_summary.json"),
     "about 12 minutes after the pipeline job (a contention microbenchmark of each calibration run's workload)")
def _pipeline_validation(mode: str, paths: Paths) -> None:
    from experiments import pipeline_validation

    args = ["--runs", str(paths.runs / "pipeline" / "pipeline_speed"), "--results", str(paths.results)]
    if mode == "quick":  # shorter contention windows, one repeat: about a minute in all
        args += ["--seeds", "2", "--contention-window", "0.3", "--contention-repeats", "1"]
    _check(pipeline_validation.main(args), "experiments/pipeline_validation.py")


@job("link_prediction", "link prediction on FB15k-237: DistMult (and ComplEx, GraphSAGE + DistMult in full mode), "
     "pipelined vs synchronous MRR", ("link_prediction.csv",),
     "about 20 minutes (FB15k-237 from ../shared, one thread)")
def _link_prediction(mode: str, paths: Paths) -> None:
    import torch

    from experiments import link_prediction
    from suite.config import load_spec
    from suite.grid import expand_grid, failures, run_grid

    names = ["fb15k237_distmult.yaml"] + ([] if mode == "quick" else ["fb15k237_complex.yaml",
                                                                        "fb15k237_graphsage_distmult.yaml"])
    overrides = ["training.epochs=3"] if mode == "quick" else []
    specs = [load_spec(REPO_ROOT / "experiments" / name, overrides) for name in names]
    specs += expand_grid(REPO_ROOT / "experiments" / "link_prediction_pipelined.yaml", overrides)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small link-prediction batches: one thread is much faster on a shared machine
    try:
        failed = failures(run_grid(specs, paths.runs / "lp", progress=False))
    finally:
        torch.set_num_threads(threads)
    if failed:
        raise RuntimeError(f"link prediction: {len(failed)} runs failed ({failed[0].get('error')})")
    _check(link_prediction.main(["--runs", str(paths.runs / "lp"), "--out", str(paths.results / "link_prediction.csv")]),
           "experiments/link_prediction.py")


@job("link_prediction_peers", "link prediction against its peers on FB15k-237: the suite vs PyTorch-BigGraph "
     "(p=1, p=8) vs PyKEEN, triples/s and filtered MRR by the suite's ranking",
     ("link_prediction_peers.csv", "link_prediction_peers_runs.csv", "link_prediction_peers.png"),
     "about 90 minutes (5 epochs x 3 seeds x 1 and 2 threads; PyKEEN's epochs take minutes); peers from make peers")
def _link_prediction_peers(mode: str, paths: Paths) -> None:
    from experiments import link_prediction_peers

    args = ["--out", str(paths.runs / "lp_peers"), "--results", str(paths.results), "--data-dir", str(paths.data)]
    _check(link_prediction_peers.main(args + (["--quick"] if mode == "quick" else [])),
           "experiments/link_prediction_peers.py")


@job("disk_nc", "disk-based vs in-memory node classification: epoch time, IO wait, bytes read, accuracy",
     ("disk_nc.csv", "disk_nc.png"), "about 20 minutes; papers-like-s and a partitioned copy, ~6 GiB")
def _disk_nc(mode: str, paths: Paths) -> None:
    from experiments import disk

    args = ["--out", str(paths.runs / "disk"), "--results", str(paths.results), "--data-dir", str(paths.data),
            "--quiet"]
    _check(disk.main(args + (["--quick"] if mode == "quick" else [])), "experiments/disk.py")


@job("disk_lp", "disk-based link prediction on FB15k-237: MRR, epoch time and IO of BETA, COMET, random and "
     "in-memory", ("disk_lp.csv", "disk_lp_runs.csv", "disk_lp.png"),
     "about 30 minutes at two runs at a time (24 runs: 2 models x 4 configurations x 3 seeds); FB15k-237 from "
     "../shared/datasets, under 100 MiB")
def _disk_lp(mode: str, paths: Paths) -> None:
    from experiments import disk_lp

    args = ["--out", str(paths.runs / "disk_lp"), "--results", str(paths.results), "--data-dir", str(paths.data)]
    _check(disk_lp.main(args + (["--quick"] if mode == "quick" else [])), "experiments/disk_lp.py")


@job("buffer_io", "partition-buffer IO at Hyperlink-2012 scale: BETA vs COMET vs random (simulated)",
     ("buffer_io.csv", "buffer_io.png"), "about 1 minute")
def _buffer_io(mode: str, paths: Paths) -> None:
    from experiments import buffer_io

    args = ["--csv", str(paths.results / "buffer_io.csv"), "--png", str(paths.results / "buffer_io.png")]
    _check(buffer_io.main(args + (["--quick"] if mode == "quick" else [])), "experiments/buffer_io.py")


@job("work_depth", "work and depth of GNN models: formulas, and counts on real operator DAGs",
     ("work_depth.csv", "work_depth_check.csv", "work_depth_check.png"), "about 1 minute")
def _work_depth(mode: str, paths: Paths) -> None:
    from experiments import work_depth

    args = ["--out-dir", str(paths.results), "--data-dir", str(paths.data)]
    _check(work_depth.main(args + (["--quick"] if mode == "quick" else [])), "experiments/work_depth.py")


@job("async_gnn", "asynchronous micro/macro GNN pipelines: Gantt charts, staleness vs accuracy and throughput",
     ("async_gnn_modes.csv", "async_gnn_gantt.png", "async_staleness_accuracy.csv", "async_tradeoff.png"),
     "about 15 minutes (Cora 3 seeds, arxiv-like)")
def _async_gnn(mode: str, paths: Paths) -> None:
    from experiments import async_gnn

    args = ["--out-dir", str(paths.results)]
    _check(async_gnn.main(args + (["--quick"] if mode == "quick" else [])), "experiments/async_gnn.py")


@job("cost", "cost per epoch and to a target accuracy per machine profile: measured here, projected by the "
     "simulator on cloud GPU machines", ("cost.csv", "cost.png"),
     "about 1 minute after the pipeline and disk_nc jobs (reads their runs; trains nothing)")
def _cost(mode: str, paths: Paths) -> None:
    from experiments import cost

    args = ["--runs", str(paths.runs / "pipeline" / "pipeline_accuracy"), "--runs", str(paths.runs / "disk"),
            "--csv", str(paths.results / "cost.csv"), "--png", str(paths.results / "cost.png")]
    _check(cost.main(args), "experiments/cost.py")


# ---------------------------------------------------------------------------------------------- running
def plan(only: Sequence[str] | None) -> list[Job]:
    """The jobs to run, in registration order (``only``: these names, checked)."""
    jobs = JOBS.in_order()
    unknown = [name for name in only or () if name not in JOBS]
    if unknown:
        raise ConfigError(f"--only: unknown figure {unknown[0]!r} (known: {', '.join(j.name for j in jobs)})")
    return [item for item in jobs if not only or item.name in only]


def reproduce(mode: str, only: Sequence[str] | None = None, root: Path = REPO_ROOT,
              data: Path | None = None) -> dict[str, float]:
    """Run the jobs of ``mode``, then write the report; return each job's wall time in seconds."""
    if mode not in MODES:
        raise ConfigError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    paths = Paths(results=root / "results" / ("" if mode == "quick" else "full"),
                  runs=root / "out" / f"reproduce-{mode}", data=data or root / "data")
    paths.results.mkdir(parents=True, exist_ok=True)
    jobs = plan(only)
    if mode == "full":
        print("full reproduction; expected costs:", file=sys.stderr)
        for item in jobs:
            print(f"  {item.name}: {item.full_cost}", file=sys.stderr)
    times: dict[str, float] = {}
    for item in jobs:
        print(f"[reproduce {mode}] {item.name}: {item.title}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        item.run(mode, paths)
        times[item.name] = time.perf_counter() - started
        print(f"[reproduce {mode}] {item.name}: done in {times[item.name]:.0f} s", file=sys.stderr, flush=True)
    from experiments.report import write_report

    report = write_report(paths.results, mode=mode, job_times=times)
    print(f"wrote {report}", file=sys.stderr)
    return times


def add_command(commands: argparse._SubParsersAction) -> None:
    """Add ``reproduce`` to the ``gnnsuite`` subcommands."""
    parser = commands.add_parser("reproduce", help="run every figure's experiment, redraw figures, write REPORT.md")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", dest="mode", action="store_const", const="quick",
                       help="small settings, <= 15 minutes on 2 cores; writes results/ (the default)")
    group.add_argument("--full", dest="mode", action="store_const", const="full",
                       help="paper-scale settings; writes results/full/ (lists its costs first)")
    parser.add_argument("--only", action="append", metavar="FIG", help="only this figure (repeatable)")
    parser.add_argument("--data-dir", type=Path, help="dataset cache (default data/)")
    parser.set_defaults(func=_cmd_reproduce, mode="quick")


def _cmd_reproduce(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    times = reproduce(args.mode, args.only, data=args.data_dir)
    print(f"reproduce --{args.mode}: {len(times)} figures in {time.perf_counter() - started:.0f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python experiments/reproduce.py [--quick|--full] [--only FIG]`` (same as ``gnnsuite reproduce``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command")
    add_command(commands)
    args = parser.parse_args(["reproduce", *(argv if argv is not None else sys.argv[1:])])
    return args.func(args)


__all__ = ["JOBS", "Job", "Paths", "add_command", "job", "plan", "reproduce"]

if __name__ == "__main__":
    sys.exit(main())
