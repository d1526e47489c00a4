"""``gnnsuite reproduce``: run every figure's experiment into a fresh folder, redraw every figure, write
``REPORT.md``, and compare the outcome with the committed reference (``gnnsuite report DIR --against results/``).

Each figure is a :class:`~experiments.common.Figure` in its own module, registered by one line of
:data:`experiments.plugins.FIGURES` (whose order is the order the jobs run in): how to run its experiment in
``quick`` and ``full`` mode, the tables and figures it writes, what the full mode costs, its claims and table
specs. The report (:mod:`experiments.report`) is then generated from the tables alone, and
:mod:`experiments.compare` compares them with the reference claim by claim and table by table.

Where things go: ``--out DIR`` (default ``out/reproduce``; ``out/reproduce-full`` in full mode) receives the
tables, figures and ``REPORT.md`` under ``DIR/results`` and the runs under ``DIR/runs``, with ``DIR/reproduction.json``
(mode, git SHA, job times, status). A folder holding a previous reproduction is refused unless ``--resume`` (its
finished runs are reused) or ``--overwrite`` (it is removed first). The tracked ``results/`` (quick) and
``results/full/`` (full) are the committed reference: nothing writes there except ``--update-reference``, which
copies a completed reproduction's outputs over the reference and regenerates its ``REPORT.md``.

Modes: ``quick`` (the README's main command ``make main``; within 10 minutes on a 2-core machine; small settings,
3 seeds for the accuracy claims and repeats for the timing claims) and ``full`` (the paper-scale settings; its time
and disk needs are listed before it starts). The quick settings, chosen so that every claim is still decided from
repeated measurements:

- sampling: 20,000-node versions of both graphs, 500 / 100 roots, 60 timed repeats of naive and DENSE per
  configuration after one warm-up (10 of PyG, which no claim reads), every sampler on the same roots in each repeat
  (the naive / DENSE ratios are paired by repeat);
- pipeline: arxiv-like only (products-like is left out of quick mode): the speed grid on 50,000 nodes (both samplers
  x 6 configurations, 2 epochs of 6 batches) and the accuracy grid on 20,000 nodes (sync and async out of order; the
  in-order async check, which computes what sync computes, runs in full mode only) x 3 seeds x 4 full epochs;
- pipeline_validation: its quick grid (12 held-out configurations and 2 sync runs, seeds 0 and 1, 6 batches) on
  arxiv-like shrunk to 20,000 nodes; contention microbenchmark windows of 0.3 s, one repeat, once per sampler (the
  seeds' calibration runs share its workload), 2 simulator seeds per prediction,
  a 20,000-batch simulator speed test; the accelerator projection on p3.2xlarge over 5 simulator seeds;
- link_prediction (no claim reads it): DistMult in memory (the pipelined runs in full mode only), 2 epochs, tested
  only, on a fixed sample of 5,000 test triples;
- link_prediction_peers: FB15k-237's dense core (500 entities), 3 epochs, one seed, one thread, the suite and PBG
  (p = 1, 8; PyKEEN, x4 slower than any other, in full mode only);
- disk_nc: papers-like-s shrunk to 200,000 nodes, p = 8, c = 2 and 4, 3 epochs, seeds 0-2 (the timing repeats:
  each run's mean over its 2 warm epochs), and Amazon Computers at p = 16 (sequential) and 64, c / p = 0.25, 20
  epochs, seeds 0-2 (disk_nc_sweep_quick.yaml), each run in its own process forked from one that has the libraries
  imported;
- disk_lp: DistMult, the matched in-memory baseline (two learning rates, chosen on a fixed sample of 5,000 validation
  triples), BETA and COMET (random, which no claim reads, left out; in-memory with global negatives, the finding
  about buffer-like negatives, in full mode only), 3 seeds, 2 epochs;
- disk_simulation: the disk-system simulator on the disk runs of disk_nc and disk_lp (trains nothing);
- buffer_io, work_depth: the scripts' quick sizes (deterministic); async_gnn: Cora, 20 iterations, s in {0, 2},
  3 seeds; cache_vs_buffer: Amazon Computers, budgets 10 and 25 %, belady only, 3 seeds
  (cache_vs_buffer_quick.yaml); cost: reads the runs above.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from experiments.common import MODES, REPO_ROOT, Figure, Paths
from experiments.plugins import FIGURES, figure_names
from suite.errors import ConfigError


# ---------------------------------------------------------------------------------------------- running
MANIFEST = "reproduction.json"
"""The file that marks a reproduction folder: mode, git SHA, jobs, their times, status."""


def default_out(mode: str, root: Path = REPO_ROOT) -> Path:
    """Where a reproduction goes by default: ``out/reproduce`` (quick) or ``out/reproduce-full``."""
    return root / "out" / ("reproduce" if mode == "quick" else "reproduce-full")


def reference_dir(mode: str, root: Path = REPO_ROOT) -> Path:
    """The committed reference of ``mode``: ``results/`` (quick) or ``results/full/``."""
    return root / "results" / ("" if mode == "quick" else "full")


def reference_times(mode: str, root: Path = REPO_ROOT) -> dict[str, float]:
    """Each figure's seconds in the committed reference of ``mode`` (its ``REPORT.md``'s time per figure); empty
    when it records none."""
    try:
        text = (reference_dir(mode, root) / "REPORT.md").read_text()
    except OSError:
        return {}
    times: dict[str, float] = {}
    section = text.partition("## Time per figure")[2].split("\n## ")[0]
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("figure", "total"):
            try:
                times[cells[0]] = float(cells[1])
            except ValueError:
                continue
    return times


def expected_remaining(names: Sequence[str], done: dict[str, float], reference: dict[str, float]) -> str:
    """What is left of a reproduction whose jobs ``names`` (in order) have taken ``done`` so far: the reference's
    times of the jobs not done, scaled by this machine's pace on the jobs done (their time over the reference's),
    as ``"about N min"``, naming the jobs left that the reference has no time for (a job added since: not counted);
    ``"unknown"`` when it has a time for none of them."""
    left = [name for name in names if name not in done]
    known = [name for name in left if name in reference]
    unknown = [name for name in left if name not in reference]
    if unknown and not known:
        return f"unknown (no reference time for {', '.join(unknown)})"
    timed = [name for name in done if reference.get(name, 0) > 0]
    pace = sum(done[name] for name in timed) / sum(reference[name] for name in timed) if timed else 1.0
    estimate = f"about {pace * sum(reference[name] for name in known) / 60:.0f} min"
    return estimate + (f" and {', '.join(unknown)} (no reference time)" if unknown else "")


def plan(only: Sequence[str] | None) -> list[Figure]:
    """The jobs to run, in the order of :data:`experiments.plugins.FIGURES` (``only``: these names, checked; only
    their modules are imported)."""
    names = figure_names()
    unknown = [name for name in only or () if name not in FIGURES]
    if unknown:
        raise ConfigError(f"--only: unknown figure {unknown[0]!r} (known: {', '.join(names)})")
    return [FIGURES.get(name) for name in names if not only or name in only]


def prepare_out(out: Path, *, resume: bool, overwrite: bool, root: Path = REPO_ROOT) -> None:
    """Check (and clear, with ``overwrite``) the reproduction folder ``out``.

    Refused (``ConfigError``, one line): a folder inside the tracked ``results/`` (the reference: only
    ``--update-reference`` writes there); a folder that holds a previous reproduction or other files, unless
    ``resume`` (its finished runs are reused) or ``overwrite`` (it is removed first).
    """
    import shutil

    out = Path(out).resolve()
    reference = (Path(root) / "results").resolve()
    if out == reference or reference in out.parents:
        raise ConfigError(f"--out: {out} is inside the committed reference {reference}; reproduce elsewhere "
                          "(default out/reproduce) and use --update-reference to regenerate the reference")
    if out.exists() and any(out.iterdir()):
        if overwrite:
            if not (out / MANIFEST).exists():
                raise ConfigError(f"--out: {out} is not empty and holds no {MANIFEST} (not a reproduction "
                                  "folder); refusing to remove it")
            shutil.rmtree(out)
        elif not resume:
            raise ConfigError(f"--out: {out} already holds files (a previous reproduction?); give --resume to "
                              "reuse its finished runs, --overwrite to start it again, or another --out")


def reproduce(mode: str, only: Sequence[str] | None = None, out: Path | None = None, data: Path | None = None,
              *, resume: bool = False, overwrite: bool = False, root: Path = REPO_ROOT) -> dict[str, float]:
    """Run the jobs of ``mode`` into ``out`` (tables, figures and ``REPORT.md`` under ``out/results``, runs under
    ``out/runs``), then write the report; return each job's wall time in seconds. Never writes the reference."""
    if mode not in MODES:
        raise ConfigError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    out = Path(out) if out is not None else default_out(mode, root)
    jobs = plan(only)
    prepare_out(out, resume=resume, overwrite=overwrite, root=root)
    earlier = _earlier_times(out, mode) if resume else {}
    paths = Paths(results=out / "results", runs=out / "runs", data=data or root / "data")
    paths.results.mkdir(parents=True, exist_ok=True)
    if mode == "full":
        print("full reproduction; expected costs:", file=sys.stderr)
        for item in jobs:
            print(f"  {item.name}: {item.full_cost}", file=sys.stderr)
    from suite.provenance import git_sha

    # A resumed reproduction keeps the earlier jobs' times in the manifest from its start: interrupted again, the
    # folder still records every job that completed.
    manifest = {"mode": mode, "git_sha": git_sha(), "jobs": list(dict.fromkeys([*earlier, *(i.name for i in jobs)])),
                "times_s": earlier, "started": _now(), "status": "running"}
    _write_manifest(out, manifest)
    times: dict[str, float] = {}

    def recorded() -> dict[str, float]:
        return {**{name: seconds for name, seconds in earlier.items() if name not in times}, **times}

    reference = reference_times(mode, root)
    for number, item in enumerate(jobs, 1):
        remaining = expected_remaining([job.name for job in jobs], times, reference)
        print(f"[reproduce {mode}] {number}/{len(jobs)} {item.name}: {item.title} (expected remaining: {remaining}, "
              "from the reference's times at this machine's pace)", file=sys.stderr, flush=True)
        started = time.perf_counter()
        item.run(mode, paths)
        times[item.name] = time.perf_counter() - started
        print(f"[reproduce {mode}] {item.name}: done in {times[item.name]:.0f} s", file=sys.stderr, flush=True)
        _write_manifest(out, {**manifest, "times_s": recorded()})
    from experiments.report import write_report

    # Figures an earlier reproduction in this folder made (--resume with --only) keep their times in the report.
    times = recorded()
    report = write_report(paths.results, mode=mode, job_times=times)
    _write_manifest(out, {**manifest, "times_s": times, "finished": _now(), "status": "completed"})
    print(f"wrote {report}", file=sys.stderr)
    return times


def require_clean_tree(root: Path = REPO_ROOT) -> str:
    """The commit of the checkout at ``root`` when its tracked files have no uncommitted change; otherwise a
    one-line :class:`ConfigError`: a reference must record the clean commit it was measured at."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()

    try:
        sha, changes = git("rev-parse", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        raise ConfigError(f"--update-reference: {root} is not a git checkout; a reference records the clean commit "
                          "it was measured at") from None
    if changes:
        raise ConfigError(f"--update-reference: the tree has uncommitted changes ({len(changes.splitlines())} "
                          "files); commit them first, a reference records the clean commit it was measured at")
    return sha


def merged_times(reference: dict[str, float], updated: dict[str, float] | None) -> dict[str, float] | None:
    """The reference's time per figure after an update that ran the jobs ``updated``: their new times, the other
    jobs' recorded ones kept (a reference regenerated job by job), in the order of the reproduction's jobs."""
    if not updated:
        return updated
    times = {**reference, **updated}
    order = {name: number for number, name in enumerate(figure_names())}
    return dict(sorted(times.items(), key=lambda item: order.get(item[0], len(order))))


def update_reference(out: Path, mode: str, only: Sequence[str] | None = None, root: Path = REPO_ROOT,
                     job_times: dict[str, float] | None = None) -> Path:
    """Copy the outputs of the jobs of a completed reproduction in ``out`` into the committed reference of
    ``mode`` (each file atomically), then regenerate the reference's ``REPORT.md`` from its tables (its time per
    figure: ``job_times`` of the jobs copied, the other jobs' times in the reference kept, :func:`merged_times`; a
    resumed reproduction's times of jobs it did not run now are not the reference's). The only code
    path that writes under ``results/``; refused for a checkout with uncommitted changes
    (:func:`require_clean_tree`)."""
    from experiments.report import write_report
    from suite.io import atomic_write_bytes

    sha = require_clean_tree(root)  # the tree is dirty once the tables are copied: the report names this commit
    source, target = Path(out) / "results", reference_dir(mode, root)
    target.mkdir(parents=True, exist_ok=True)
    copied = 0
    jobs = plan(only)
    ran = {item.name for item in jobs}
    job_times = {name: seconds for name, seconds in job_times.items() if name in ran} if job_times else job_times
    for item in jobs:
        for name in item.outputs:
            if (source / name).exists():
                atomic_write_bytes(target / name, (source / name).read_bytes())
                copied += 1
    report = write_report(target, mode=mode, job_times=merged_times(reference_times(mode, root), job_times),
                          sha=sha)
    print(f"updated the reference {target}: {copied} files and {report.name}", file=sys.stderr)
    return target


def _now() -> str:
    import datetime as _dt

    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _earlier_times(out: Path, mode: str) -> dict[str, float]:
    """The job times of the reproduction of ``mode`` already in ``out`` (none if there is none, or another mode)."""
    import json

    try:
        manifest = json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(manifest, dict) or manifest.get("mode") != mode:
        return {}
    times = manifest.get("times_s") or {}
    return {str(k): float(v) for k, v in times.items() if isinstance(v, (int, float))}


def _write_manifest(out: Path, manifest: dict) -> None:
    from suite.io import atomic_write_json

    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / MANIFEST, manifest)


def add_command(commands: argparse._SubParsersAction) -> None:
    """Add ``reproduce`` and ``report`` to the ``gnnsuite`` subcommands."""
    parser = commands.add_parser("reproduce", help="run every figure's experiment, redraw figures, write REPORT.md "
                                                   "into a fresh folder, compare it with the reference")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", dest="mode", action="store_const", const="quick",
                       help="small settings, <= 10 minutes on 2 cores (the default); reference results/")
    group.add_argument("--full", dest="mode", action="store_const", const="full",
                       help="paper-scale settings (lists its costs first); reference results/full/")
    parser.add_argument("--out", type=Path, help="reproduction folder: tables, figures and REPORT.md in OUT/results, "
                                                 "runs in OUT/runs (default out/reproduce, out/reproduce-full)")
    parser.add_argument("--only", action="append", metavar="FIG", help="only this figure (repeatable)")
    parser.add_argument("--data-dir", type=Path, help="dataset cache (default data/)")
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument("--resume", action="store_true", help="reuse the finished runs of a previous "
                                                                "reproduction in OUT")
    existing.add_argument("--overwrite", action="store_true", help="remove a previous reproduction in OUT first")
    parser.add_argument("--against", type=Path, help="reference to compare with (default: results/ or results/full/)")
    parser.add_argument("--no-compare", action="store_true", help="do not compare with the reference")
    parser.add_argument("--update-reference", action="store_true",
                        help="then copy the outputs into the committed reference (results/ or results/full/) and "
                             "regenerate its REPORT.md: the only command that writes there")
    parser.set_defaults(func=_cmd_reproduce, mode="quick")

    report = commands.add_parser("report", help="claims and tables of a results folder, compared with a reference")
    report.add_argument("dir", type=Path, help="results folder, or a reproduction folder (gnnsuite reproduce --out)")
    report.add_argument("--against", type=Path, help="reference results folder to compare with (e.g. results/)")
    report.add_argument("--markdown", type=Path, help="also write the comparison to this file")
    report.add_argument("--strict", action="store_true", help="exit with status 1 when a change is flagged")
    report.set_defaults(func=_cmd_report)


def _print_verdicts(results: Path) -> None:
    from experiments.report import findings

    for name, finding in findings(results).items():
        print(f"  {name}: {finding.verdict}" + (f" ({finding.reason})" if finding.reason else ""))


def _cmd_reproduce(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if args.update_reference:  # before the jobs run: their rows must record the clean commit
        require_clean_tree()
    out = args.out or default_out(args.mode)
    times = reproduce(args.mode, args.only, out, data=args.data_dir, resume=args.resume, overwrite=args.overwrite)
    wall = time.perf_counter() - started
    results = Path(out) / "results"
    print(f"reproduce --{args.mode}: {len(times)} figures in {wall:.0f} s (wall)")
    print(f"  tables and figures: {results}/\n  report: {results / 'REPORT.md'}\n  runs: {Path(out) / 'runs'}/")
    print("verdicts:")
    _print_verdicts(results)
    if args.update_reference:
        update_reference(Path(out), args.mode, args.only, job_times=times)
    reference = args.against or reference_dir(args.mode)
    if not args.no_compare and not args.update_reference and reference.is_dir():
        from experiments.compare import compare

        print()
        print(compare(results, reference).text(), end="")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from experiments.compare import compare, results_folder
    from experiments.report import render

    results = results_folder(args.dir)
    if args.against is None:
        print(render(results, mode=str(results)), end="")
        return 0
    comparison = compare(results, args.against)
    text = comparison.text()
    print(text, end="")
    if args.markdown:
        from suite.io import atomic_write_bytes

        atomic_write_bytes(args.markdown, ("```\n" + text + "```\n").encode())
    return 1 if args.strict and comparison.flagged else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python experiments/reproduce.py [--quick|--full] [--out DIR] [--only FIG]`` (same as ``gnnsuite
    reproduce``)."""
    from suite.cli import EXIT_USER_ERROR
    from suite.errors import SuiteError

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command")
    add_command(commands)
    args = parser.parse_args(["reproduce", *(argv if argv is not None else sys.argv[1:])])
    try:
        return args.func(args)
    except SuiteError as err:
        print(f"reproduce: error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR


__all__ = ["MANIFEST", "add_command", "default_out", "plan", "prepare_out", "reference_dir", "reproduce",
           "update_reference"]

if __name__ == "__main__":
    sys.exit(main())
