"""Out-of-core for real (issue 34, item 4): commands run under a cgroup v1 memory limit smaller than the data they
work on, page cache counted.

Usage (root, on a machine with cgroup v1's memory controller; :mod:`experiments.cgroups`)::

    python -m experiments.measure.memory_cap [--work /tmp/caps/memcap] [--only CASE ...] [--keep] [--csv FILE]

Each case runs one ``gnnsuite`` command in a fresh process inside a fresh memory cgroup, removed afterwards:

- ``import-edgelist``: ``datasets import`` of a tab-separated edge list (written with numpy) larger than the limit;
- ``partition-edgelist``: ``datasets partition`` of the store it made;
- ``partition-nc`` / ``disk-nc``: partition, then node classification with the disk system (``sequential``, small
  ``c``/``p``, one epoch) on a papers-like store whose feature table is larger than the limit;
- ``disk-nc-unpartitioned``: the same with a partition count whose partitioned copy does not exist: the run
  partitions the store inside the cgroup first (its estimate leaves the input store's file pages out of what must
  fit, and the partitioning sizes its chunks to the cgroup's headroom);
- ``in_memory-nc``: the same run with the in-memory system: it must refuse up front (exit 2, one line), its
  estimate seeing the cgroup's limit (:func:`suite.memory.available_memory`);
- ``partition-lp`` / ``disk-lp``: partition, then link prediction with the disk system on a livejournal-like
  store whose embedding table (with its Adagrad state, as the disk system stores it) is larger than the limit;
  training only, since the disk system's link-prediction evaluation reads the whole table into memory;
- ``disk-lp-eval``: the same with evaluation: refused up front (the estimate counts the whole table);
- ``in_memory-lp``: refused up front.

Printed per case: the limit, what the data measures (the table larger than the limit), the cgroup's peak charge
(``memory.max_usage_in_bytes``: anonymous memory and page cache; reclaim keeps it at or under the limit, so the
outcome is what shows whether the work fit), the peak of its anonymous memory (``rss`` of ``memory.stat``, sampled
at 10 Hz: what reclaim cannot drop without swap), the process's peak RSS (``ru_maxrss``, file pages it mapped
included), the outcome (completed; refused: exit 2 with the one line; OOM-killed: exit 137; failed) and the wall
time. The stores are generated outside the cgroup (once; kept with ``--keep``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from experiments.cgroups import memory_cgroup, memory_cgroup_unavailable

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]

NC_NODES, LP_NODES, LP_DIM = 2_000_000, 1_000_000, 160
EDGELIST_EDGES, EDGELIST_NODES = 40_000_000, 4_000_000
LIMITS = {"edgelist": 512 * MiB, "nc": 768 * MiB, "lp": 1024 * MiB}
"""The cap of each family of cases: below the table the family works on (the edge list file, the feature table,
the embedding table with its optimizer state), above what the process holds without the data."""


@dataclass(frozen=True)
class Case:
    """One command under one limit.

    Attributes:
        name: the case.
        family: the ``LIMITS`` key (and the data the case works on).
        argv: ``gnnsuite`` arguments, given the work folder.
        expect: ``completed`` or ``refused``.
        prepare: writes what the command needs (outside the cgroup), given the work folder.
    """

    name: str
    family: str
    argv: callable
    expect: str = "completed"
    prepare: callable = field(default=lambda work: None, compare=False)


# ---------------------------------------------------------------------------------------------- data
def write_edge_list(path: Path, edges: int, nodes: int, seed: int = 0, chunk: int = 4_000_000) -> int:
    """A tab-separated edge list of ``edges`` uniform random ``src dst`` pairs of zero-padded 7-digit ids below
    ``nodes`` (16 bytes a line), written chunk by chunk with numpy; its size in bytes."""
    rng = np.random.default_rng(seed)
    powers = 10 ** np.arange(6, -1, -1, dtype=np.int64)
    with open(path, "wb") as handle:
        for start in range(0, edges, chunk):
            pairs = rng.integers(0, nodes, size=(min(chunk, edges - start), 2), dtype=np.int64)
            line = np.empty((len(pairs), 16), dtype=np.uint8)
            line[:, 0:7] = (pairs[:, :1] // powers) % 10 + ord("0")
            line[:, 8:15] = (pairs[:, 1:] // powers) % 10 + ord("0")
            line[:, 7], line[:, 15] = ord("\t"), ord("\n")
            line.tofile(handle)
    return path.stat().st_size


def generate(work: Path, name: str, *args: str) -> Path:
    """A synthetic store ``work/name`` (generated once, outside any cgroup)."""
    out = work / name
    if not (out / "metadata.json").exists():
        gnnsuite(["datasets", "generate", *args, "--out", str(out), "--quiet", "--overwrite"], check=True)
    return out


def nc_store(work: Path) -> Path:
    return generate(work, "nc-store", "--preset", "papers-like-s", "--num-nodes", str(NC_NODES))


def lp_store(work: Path) -> Path:
    return generate(work, "lp-store", "--preset", "livejournal-like", "--num-nodes", str(LP_NODES),
                    "--avg-degree", "3")


def edge_list(work: Path) -> Path:
    path = work / "edges.tsv"
    if not path.exists() or path.stat().st_size != 16 * EDGELIST_EDGES:
        write_edge_list(path, EDGELIST_EDGES, EDGELIST_NODES)
    return path


def nc_store_partitioned(work: Path) -> Path:
    """The node-classification store and its partitioned copy for the disk system (made outside any cgroup when
    missing: the ``partition-nc`` case may not have made it)."""
    store = nc_store(work)
    out = partitioned(store, NC_P, "labeled-first")
    if not (out / "metadata.json").exists():
        gnnsuite(["datasets", "partition", str(store), "-p", str(NC_P), "--order", "labeled-first", "--seed", "0",
                  "--out", str(out), "--quiet", "--overwrite"], check=True)
    return store


def nc_store_unpartitioned(work: Path) -> Path:
    """The node-classification store without a partitioned copy at ``UNPARTITIONED_P``: the run partitions it
    inside the cgroup, before training."""
    store = nc_store(work)
    shutil.rmtree(partitioned(store, UNPARTITIONED_P, "labeled-first"), ignore_errors=True)
    return store


def partitioned(store: Path, p: int, order: str) -> Path:
    """Where the disk system finds ``store`` partitioned (``systems.disk.disk_system.partitioned_store_path``)."""
    return store.parent / f"{store.name}-p{p}-{order}-s0"


# ---------------------------------------------------------------------------------------------- specs
NC_P, NC_C, LP_P, LP_C = 32, 2, 16, 2
UNPARTITIONED_P = 64  # disk-nc-unpartitioned: a partition count no other case prepares


def nc_spec(store: Path, system: str, partitions: int = NC_P) -> dict:
    """One epoch of GraphSAGE node classification; the disk system ``sequential`` with small ``c`` / ``p``, evaluating
    inside the buffer (``evaluation.graph: buffer``: a full-graph evaluation holds the whole CSR, 1.6 GiB here)."""
    spec = {"name": f"memcap-{system}-nc", "seed": 0, "dataset": {"name": "store", "root": str(store)},
            "model": {"encoder": "graphsage", "num_layers": 2, "hidden_dim": 64, "fanouts": [10, 5]},
            "training": {"epochs": 1, "batch_size": 1000}, "evaluation": {"batch_size": 1000, "graph": "buffer"},
            "system": {"name": system, "device": "cpu"}}
    if system == "disk":
        spec["system"]["options"] = {"policy": "sequential", "num_partitions": partitions,
                                     "buffer_capacity": NC_C, "order": "labeled-first"}
    return spec


def lp_spec(store: Path, system: str, evaluate: bool, dim: int = LP_DIM) -> dict:
    """One epoch of DistMult over learnable ``dim``-dimensional embeddings (Adagrad)."""
    spec = {"name": f"memcap-{system}-lp{'-eval' if evaluate else ''}", "seed": 0,
            "dataset": {"name": "store", "root": str(store)},
            "model": {"encoder": "shallow", "num_layers": 0, "fanouts": [], "decoder": "distmult",
                      "embedding_dim": dim, "learnable_embeddings": True, "dropout": 0.0},
            "training": {"task": "link_prediction", "epochs": 1, "batch_size": 10_000, "optimizer": "adagrad",
                         "learning_rate": 0.1, "negatives": {"num_chunks": 10, "negatives_per_positive": 100}},
            "evaluation": {"batch_size": 10_000, "negatives": 1000, **({} if evaluate else {"splits": []})},
            "system": {"name": system, "device": "cpu"}}
    if system == "disk":
        spec["system"]["options"] = {"policy": "beta", "num_partitions": LP_P, "buffer_capacity": LP_C,
                                     "order": "random"}
    return spec


def write_spec(work: Path, spec: dict) -> Path:
    path = work / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def run_argv(work: Path, spec: dict) -> list[str]:
    return ["run", str(write_spec(work, spec)), "--out", str(work / "runs"), "--quiet", "--overwrite"]


CASES = [
    Case("import-edgelist", "edgelist",
         lambda w: ["datasets", "import", str(w / "edges.tsv"), "--out", str(w / "imported"), "--quiet",
                    "--overwrite"], prepare=edge_list),
    Case("partition-edgelist", "edgelist",
         lambda w: ["datasets", "partition", str(w / "imported"), "-p", "16", "--out", str(w / "imported-p16"),
                    "--quiet", "--overwrite"]),
    Case("partition-nc", "nc",
         lambda w: ["datasets", "partition", str(w / "nc-store"), "-p", str(NC_P), "--order", "labeled-first",
                    "--seed", "0", "--out", str(partitioned(w / "nc-store", NC_P, "labeled-first")), "--quiet",
                    "--overwrite"], prepare=nc_store),
    Case("disk-nc", "nc", lambda w: run_argv(w, nc_spec(w / "nc-store", "disk")), prepare=nc_store_partitioned),
    Case("disk-nc-unpartitioned", "nc",
         lambda w: run_argv(w, {**nc_spec(w / "nc-store", "disk", UNPARTITIONED_P), "name": "memcap-disk-nc-p64"}),
         prepare=nc_store_unpartitioned),
    Case("in_memory-nc", "nc", lambda w: run_argv(w, nc_spec(w / "nc-store", "in_memory")), "refused",
         prepare=nc_store),
    Case("partition-lp", "lp",
         lambda w: ["datasets", "partition", str(w / "lp-store"), "-p", str(LP_P), "--order", "random", "--seed",
                    "0", "--out", str(partitioned(w / "lp-store", LP_P, "random")), "--quiet", "--overwrite"],
         prepare=lp_store),
    Case("disk-lp", "lp", lambda w: run_argv(w, lp_spec(w / "lp-store", "disk", False)), prepare=lp_store),
    Case("disk-lp-eval", "lp", lambda w: run_argv(w, lp_spec(w / "lp-store", "disk", True)), "refused",
         prepare=lp_store),
    Case("in_memory-lp", "lp", lambda w: run_argv(w, lp_spec(w / "lp-store", "in_memory", False)), "refused",
         prepare=lp_store),
]


def data_bytes(case: Case, work: Path) -> tuple[str, int]:
    """What the case's data measures: the table larger than the limit."""
    if case.family == "edgelist":
        return "edge list file", (work / "edges.tsv").stat().st_size
    if case.family == "nc":
        return "feature table", NC_NODES * 128 * 4
    return "embeddings + Adagrad state", LP_NODES * LP_DIM * 4 * 2


# ---------------------------------------------------------------------------------------------- running
def gnnsuite(argv: list[str], prefix: list[str] | None = None, check: bool = False):
    """Run ``python -m suite ARGV`` (inside ``prefix``); ``(exit status, stderr, ru_maxrss bytes, wall s)``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    with open(os.devnull, "wb") as devnull, subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "suite", *argv], env=env, cwd=REPO, stdout=devnull,
            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL) as process:
        stderr = process.stderr.read().decode(errors="replace")
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    code = 128 - process.returncode if process.returncode < 0 else process.returncode
    if check and code != 0:
        raise RuntimeError(f"gnnsuite {' '.join(argv)}: exit {code}: {stderr.strip()[-500:]}")
    return code, stderr, usage.ru_maxrss * 1024, wall


def outcome(code: int, stderr: str) -> tuple[str, str]:
    """``(outcome, the error line)`` of an exit status and its stderr."""
    lines = [line for line in stderr.splitlines() if line.startswith("gnnsuite: error: ")]
    if code == 0:
        return "completed", ""
    if code == 2 and len(lines) == 1 and "Traceback" not in stderr:
        return "refused", lines[0]
    if code == 137:
        return "OOM-killed", ""
    return f"failed (exit {code})", (stderr.strip().splitlines() or [""])[-1]


class AnonymousPeak(threading.Thread):
    """Samples the cgroup's anonymous memory (``rss`` of ``memory.stat``: what reclaim cannot drop, there being no
    swap) every ``interval`` seconds until stopped; :attr:`peak` is the largest sample."""

    def __init__(self, cgroup, interval: float = 0.1):
        super().__init__(daemon=True)
        self.cgroup, self.interval, self.peak = cgroup, interval, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            with contextlib.suppress(OSError, ValueError):
                self.peak = max(self.peak, self.cgroup.stat()["rss"])


def run_case(case: Case, work: Path) -> dict:
    """Prepare outside the cgroup, then run ``case`` inside a fresh one under its family's limit."""
    case.prepare(work)
    limit = LIMITS[case.family]
    what, size = data_bytes(case, work)
    with memory_cgroup(limit, name=f"gnnsuite-memcap-{os.getpid()}-{case.name}") as cgroup:
        sampler = AnonymousPeak(cgroup)
        sampler.start()
        try:
            code, stderr, rss, wall = gnnsuite(case.argv(work), cgroup.prefix)
        finally:
            sampler.done.set()
            sampler.join()
        peak, hits, kills = cgroup.peak_bytes, cgroup.limit_hits, cgroup.oom_kills
    result, line = outcome(code, stderr)
    return {"case": case.name, "limit_mib": limit / MiB, "data": what, "data_mib": size / MiB,
            "cgroup_peak_mib": peak / MiB, "anon_peak_mib": sampler.peak / MiB, "peak_rss_mib": rss / MiB, "outcome": result, "expected": case.expect,
            "as_expected": result == case.expect, "limit_hits": hits, "oom_kills": kills, "wall_s": wall,
            "error": line}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/caps/memcap"))
    parser.add_argument("--only", nargs="*", help="case names (default: all, in order)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (stores, edge list, runs)")
    parser.add_argument("--csv", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    reason = memory_cgroup_unavailable()
    if reason:
        print(f"memory_cap: {reason}", file=sys.stderr)
        return 2
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        rows = []
        for case in CASES:
            if args.only and case.name not in args.only:
                continue
            rows.append(run_case(case, args.work))
            print(" | ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in rows[-1].items()),
                  flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(args.work, ignore_errors=True)
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 120,
                           "display.float_format", "{:.1f}".format):
        print(table.drop(columns=["error"]).to_string(index=False))
        for row in rows:
            if row["error"]:
                print(f"{row['case']}: {row['error']}")
    if args.csv:
        table.to_csv(args.csv, index=False)
    return 0 if all(row["as_expected"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
