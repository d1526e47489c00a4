"""What a link-prediction peer plugs into the peers experiment (:mod:`experiments.figures.link_prediction_peers`)
with: the setting every system shares (:class:`Setting`), where one invocation reads and writes (:class:`Context`),
one system configuration (:class:`Configuration`, listed in its peer's ``Peer.link_prediction``), and the helpers a
configuration trains with (a measured subprocess, the suite's filtered ranking of exported embeddings).
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.common import REPO_ROOT, SPECS

SPEC = SPECS / "fb15k237_peers.yaml"
"""The suite's run spec of the comparison; its dataset is the one every system trains on."""
DRIVERS = REPO_ROOT / "experiments" / "peers"
"""Folder of the peers' driver scripts (run as subprocesses)."""
DEFAULT_PBG_PYTHON = Path(os.environ.get("GNNSUITE_PBG_PYTHON", REPO_ROOT / ".venv-pbg" / "bin" / "python"))
"""PyTorch-BigGraph's interpreter: ``$GNNSUITE_PBG_PYTHON``, else the environment ``make peers`` builds."""
ALLOCATOR_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 36)}
"""glibc's allocator keeps freed memory for reuse (the suite and PyKEEN get it; PBG does not: with it, PBG's
two-worker Hogwild runs diverged in 4 of 12 runs, without it in none of 18 (p=1, 10 epochs, docs/peers.md)):
PyKEEN's per-batch temporaries of
``batch x negatives x dim`` floats (400 MB) otherwise go back to the kernel at every free and fault in again at
every allocation, which made its epochs 3x slower (system time over user time)."""


@dataclass(frozen=True)
class Setting:
    """What every system of one invocation shares."""

    epochs: int
    pykeen_epochs: int | None = None  # PyKEEN's own (its epochs take minutes here); None = ``epochs``
    dim: int = 100
    negatives: int = 1000
    batch_size: int = 1000
    learning_rate: float = 0.1
    init_scale: float = 1e-3
    valid_sample: int = 2000  # validation triples of the time-to-MRR curve (the same seeded sample for all)
    validations_per_epoch: int = 1  # points of the curve per epoch, where a system can validate within an epoch
    target: float = 0.24  # the validation filtered MRR whose first crossing is the time to target

    def epochs_of(self, system: str) -> int:
        """The epochs a run of ``system`` trains."""
        return self.pykeen_epochs if system == "pykeen" and self.pykeen_epochs else self.epochs


@dataclass(frozen=True)
class Context:
    """Where one invocation reads and writes: the run folders, the triples for the peers, the dataset spec."""

    out: Path
    data: Path  # train.npy + meta.json for the peers' drivers
    dataset_overrides: tuple[str, ...]  # --set overrides of the suite's spec (its dataset)
    pbg_python: Path
    setting: Setting


@dataclass(frozen=True)
class Configuration:
    """One system configuration of the comparison.

    Attributes:
        name: short name (``suite``, ``pbg-p1``, ...).
        system: the library (``suite``, ``pbg``, ``pykeen``).
        label: how the table and figure name it.
        differs: what its negatives, loss and optimizer do differently from the suite's.
        missing: ``missing(context) -> reason or None`` (not installed here).
        train: ``train(context, threads, seed, run_dir) -> result`` (trains, exports, writes nothing itself).
        min_threads: the fewest threads it runs with (a configuration whose helper threads would compute on cores
            beyond a smaller count is not run there).
    """

    name: str
    system: str
    label: str
    differs: str
    missing: Callable[[Context], str | None]
    train: Callable[[Context, int, int, Path], dict[str, Any]]
    min_threads: int = 1


# ---------------------------------------------------------------------------------------------- load
def _cpu_busy_s() -> float:
    """Busy CPU seconds of the whole machine so far (``/proc/stat``: all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(v) for v in fields]
    busy = sum(ticks) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
    return busy / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU seconds of this process and its reaped children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measured_env(threads: int, allocator: bool = True) -> dict[str, str]:
    """The environment of a measured run: this one's, ``threads`` OMP/MKL threads, and glibc's allocator settings
    :data:`ALLOCATOR_ENV` (``allocator``; without it, none of them, even where this process has them)."""
    inherited = {key: value for key, value in os.environ.items() if allocator or key not in ALLOCATOR_ENV}
    return {**inherited, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            **(ALLOCATOR_ENV if allocator else {})}


def run_measured(command: list[str], threads: int, log: Path, allocator: bool = True) -> tuple[float, float]:
    """Run ``command`` with ``threads`` (OMP/MKL) threads, its output into ``log``; return ``(wall seconds,
    foreign cores)``: other processes' CPU seconds during the run per wall second. ``allocator``: with
    :data:`ALLOCATOR_ENV` (:func:`measured_env`).

    The suite's thread budgets respect ``OMP_NUM_THREADS`` (:func:`suite.threads.usable_cores`), so a "1-thread"
    suite run computes on one thread.

    Raises:
        RuntimeError: the command failed (naming the log).
    """
    env = measured_env(threads, allocator)
    busy, own, started = _cpu_busy_s(), _own_cpu_s(), time.perf_counter()
    with open(log, "w") as handle:
        status = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT).returncode
    wall = time.perf_counter() - started
    foreign = max(0.0, (_cpu_busy_s() - busy) - (_own_cpu_s() - own)) / wall if wall > 0 else 0.0
    if status:
        tail = log.read_text().strip().splitlines()[-1:] or [""]
        raise RuntimeError(f"{command[1] if len(command) > 1 else command[0]} exited with status {status} "
                           f"(see {log}): {tail[0]}")
    return wall, foreign


# ---------------------------------------------------------------------------------------------- data
_STORES: dict[tuple[str, ...], Any] = {}


def store_of(context: Context):
    """The FB15k-237 store of the suite's spec (with this invocation's dataset overrides), opened once."""
    if context.dataset_overrides not in _STORES:
        from suite.config import load_spec
        from suite.datasets import open_dataset

        _STORES[context.dataset_overrides] = open_dataset(load_spec(SPEC, list(context.dataset_overrides)).dataset)
    return _STORES[context.dataset_overrides]


def exported(context: Context, run_dir: Path, inverse: bool, split: str = "test") -> dict[str, float]:
    """The suite's filtered ranking of the embeddings a peer exported into ``run_dir`` (``embeddings.npy``,
    ``relations.npy``) on ``split``: all its triples, or for ``valid`` the sample the suite's runs validate on
    (:func:`systems.tasks.link_prediction.validation_sample` of ``Setting.valid_sample`` triples)."""
    import numpy as np
    import torch

    from systems.models.decoders import DistMult
    from systems.tasks.link_prediction import known_triples, rank_triples, validation_sample

    store = store_of(context)
    z = torch.from_numpy(np.load(run_dir / "embeddings.npy"))
    relations = torch.from_numpy(np.load(run_dir / "relations.npy"))
    decoder = DistMult(store.num_relations, z.shape[1], inverse_relations=inverse)
    with torch.no_grad():
        decoder.relations.copy_(relations)
    edges = store.edges(split)
    if split == "valid":
        edges = validation_sample(edges, context.setting.valid_sample)
    if context.dataset_overrides not in _FILTERS:  # built once per store (every epoch's snapshot is ranked)
        _FILTERS[context.dataset_overrides] = known_triples(store)
    return rank_triples(decoder, z, edges, _FILTERS[context.dataset_overrides], batch_size=1000)


_FILTERS: dict[tuple[str, ...], Any] = {}


def validation_curve(context: Context, run_dir: Path, inverse: bool) -> tuple[list[float], list[float]]:
    """The validation filtered MRR of every snapshot a driver exported (``run_dir/points/<n>``: the embeddings
    after its ``n``-th timed pass, an epoch or a part of one, n = 1, 2, ...), ranked by the suite's evaluation, and
    the seconds each ranking took; the snapshots are removed once ranked (the final embeddings stay in
    ``run_dir``). A peer that exports no snapshots gives an empty curve (:func:`peer_result` then ranks its final
    embeddings alone)."""
    import shutil

    if not (run_dir / "points").is_dir():
        return [], []
    folders = sorted((run_dir / "points").iterdir(), key=lambda path: int(path.name))
    mrr, seconds = [], []
    for folder in folders:
        started = time.perf_counter()
        mrr.append(exported(context, folder, inverse, "valid")["filtered_mrr"])
        seconds.append(time.perf_counter() - started)
    shutil.rmtree(run_dir / "points")
    return mrr, seconds


def peer_result(context: Context, run_dir: Path, wall: float, foreign: float, inverse: bool) -> dict[str, Any]:
    """A driver's run as a configuration's result: its ``result.json`` (epoch times, the times of its timed passes
    ``point_time_s`` where it validates within epochs, versions), the suite's ranking of its exported embeddings
    on test, and of every pass's snapshot on the validation sample (:func:`validation_curve`; ``inverse``: its
    relations have separate head-query operators)."""
    driver = json.loads((run_dir / "result.json").read_text())
    point_time_s = driver.get("point_time_s", driver["epoch_time_s"])
    metrics = exported(context, run_dir, inverse)
    valid_mrr, eval_s = validation_curve(context, run_dir, inverse)
    if not valid_mrr:  # no snapshot per pass: the final embeddings' point only, the earlier ones unknown
        started = time.perf_counter()
        final = exported(context, run_dir, inverse, "valid")["filtered_mrr"]
        valid_mrr = [math.nan] * (len(point_time_s) - 1) + [final]
        eval_s = [0.0] * (len(point_time_s) - 1) + [time.perf_counter() - started]
    if len(valid_mrr) != len(point_time_s):
        raise RuntimeError(f"{run_dir}: {len(valid_mrr)} snapshots for {len(point_time_s)} timed passes")
    return {"epoch_time_s": driver["epoch_time_s"], "point_time_s": point_time_s, "wall_s": wall,
            "foreign_cores": foreign,
            "filtered_mrr": metrics["filtered_mrr"], "filtered_hits@10": metrics["filtered_hits@10"],
            "unfiltered_mrr": metrics["unfiltered_mrr"], "versions": driver.get("versions", {}),
            "valid_mrr": valid_mrr, "eval_time_s": eval_s}


__all__ = ["ALLOCATOR_ENV", "Configuration", "Context", "DEFAULT_PBG_PYTHON", "DRIVERS", "SPEC", "Setting",
           "exported", "peer_result", "run_measured", "store_of", "validation_curve"]
