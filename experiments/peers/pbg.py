"""The peer PyTorch-BigGraph 1.0.0 (in its own environment ``.venv-pbg``, ``make peers``): link prediction with 1
and 8 entity partitions, driven through :mod:`experiments.peers.pbg_driver` as a subprocess."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.peers import Peer
from experiments.peers.lp_configurations import (DEFAULT_PBG_PYTHON, DRIVERS, Configuration, Context, peer_result,
                                               run_measured)


def _environment_missing(python: Path) -> str | None:
    if not python.exists():
        return f"PyTorch-BigGraph environment missing ({python}; make peers builds it)"
    return None


def _missing(context: Context) -> str | None:
    return _environment_missing(context.pbg_python)


def _trainer(partitions: int) -> Callable[[Context, int, int, Path], dict[str, Any]]:
    """A PBG configuration's ``train``; with one partition it validates ``validations_per_epoch`` times an epoch
    (as many edge chunks, which cost it nothing measurable: 7.5-8.5 s against 8.1-8.6 s an epoch at one thread);
    with more, after every epoch: each chunk passes over all p x p buckets, so chunks multiply its partition swaps
    (p = 8: epochs x1.6 at one thread and x2 at two with 4 chunks, measured at 836fca6)."""
    def train(context: Context, threads: int, seed: int, run_dir: Path) -> dict[str, Any]:
        s = context.setting
        chunks = s.validations_per_epoch if partitions == 1 else 1
        command = [str(context.pbg_python), str(DRIVERS / "pbg_driver.py"), "--data", str(context.data),
                   "--out", str(run_dir), "--partitions", str(partitions), "--workers", str(threads),
                   "--epochs", str(s.epochs), "--dim", str(s.dim), "--negatives", str(s.negatives),
                   "--batch-size", str(s.batch_size), "--lr", str(s.learning_rate), "--init-scale",
                   str(s.init_scale), "--edge-chunks", str(chunks), "--seed", str(seed)]
        # PBG's workers use one thread each; glibc's allocator settings (ALLOCATOR_ENV) make its two-worker Hogwild
        # runs diverge (4 of 12 runs with them, none of 18 without: docs/peers.md), so PBG runs without them
        wall, foreign = run_measured(command, 1, run_dir / "log.txt", allocator=False)
        return peer_result(context, run_dir, wall, foreign, inverse=True)

    return train


LINK_PREDICTION = (
    Configuration("pbg-p1", "pbg", "PBG p=1",
                  "chunks of 1000 positives share 1000 uniform negatives per side (num_batch_negs 0); softmax; "
                  "per-side relation operators; row-wise Adagrad; Hogwild workers", _missing, _trainer(1)),
    Configuration("pbg-p8", "pbg", "PBG p=8",
                  "as PBG p=1, over 8 x 8 edge buckets with two partitions in memory; negatives from the bucket's "
                  "partitions", _missing, _trainer(8)),
)

PEER = Peer("pbg", "PyTorch-BigGraph 1.0.0 in its own environment (.venv-pbg): link prediction, p = 1 and p = 8",
            lambda spec: False, lambda: _environment_missing(DEFAULT_PBG_PYTHON),
            link_prediction=LINK_PREDICTION)
"""PyTorch-BigGraph, registered in :data:`experiments.plugins.PEERS` (no run spec needs it)."""
