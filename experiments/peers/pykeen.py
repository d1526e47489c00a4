"""The peer PyKEEN 1.11 (the extra ``peers``): DistMult in its sLCWA training loop, driven through
:mod:`experiments.peers.pykeen_driver` as a subprocess."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from experiments.peers import Peer
from experiments.peers.lp_configurations import Configuration, Context, peer_result, run_measured


def _missing() -> str | None:
    import importlib.util

    if importlib.util.find_spec("pykeen") is None:
        return "pykeen not installed (pip install 'gnnsuite[peers]', or make peers)"
    return None


def _train(context: Context, threads: int, seed: int, run_dir: Path) -> dict[str, Any]:
    s = context.setting
    # As a module: run as a file, its folder would come first on sys.path and `import pykeen` find this module.
    command = [sys.executable, "-m", "experiments.peers.pykeen_driver", "--data", str(context.data), "--out",
               str(run_dir), "--threads", str(threads), "--epochs", str(s.epochs_of("pykeen")), "--dim", str(s.dim),
               "--negatives", str(s.negatives), "--batch-size", str(s.batch_size), "--lr", str(s.learning_rate),
               "--init-scale", str(s.init_scale), "--seed", str(seed)]
    wall, foreign = run_measured(command, threads, run_dir / "log.txt")
    return peer_result(context, run_dir, wall, foreign, inverse=False)


LINK_PREDICTION = (
    Configuration("pykeen", "pykeen", "PyKEEN",
                  "1000 negatives per positive, its own, on one side (half the batch heads, half tails); softmax "
                  "(CrossEntropyLoss); one relation embedding for both directions; dense Adagrad",
                  lambda context: _missing(), _train),
)

PEER = Peer("pykeen", "PyKEEN 1.11 (the extra peers): DistMult in its sLCWA training loop", lambda spec: False,
            _missing, link_prediction=LINK_PREDICTION)
"""PyKEEN, registered in :data:`experiments.plugins.PEERS` (no run spec needs it)."""
