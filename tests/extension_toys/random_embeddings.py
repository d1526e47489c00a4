"""A toy peer: "random embeddings", a link-prediction baseline that trains nothing. It draws every entity's and
relation's DistMult embedding from N(0, 1) (seeded), exports them as the real peers do, and the suite ranks them,
so its filtered MRR is the chance level the other configurations must beat."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments.peers import Peer
from experiments.peers.lp_configurations import Configuration, Context, peer_result, store_of


def _train(context: Context, threads: int, seed: int, run_dir: Path) -> dict[str, Any]:
    store, dim = store_of(context), context.setting.dim
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    np.save(run_dir / "embeddings.npy", rng.standard_normal((store.num_nodes, dim), dtype=np.float32))
    np.save(run_dir / "relations.npy", rng.standard_normal((store.num_relations, dim), dtype=np.float32))
    drawn = time.perf_counter() - started
    epochs = context.setting.epochs_of("random")
    (run_dir / "result.json").write_text(json.dumps({"epoch_time_s": [drawn] * epochs, "versions": {}}))
    return peer_result(context, run_dir, drawn, 0.0, inverse=False)


LINK_PREDICTION = (
    Configuration("random-embeddings", "random", "random embeddings (toy)",
                  "no training: N(0, 1) embeddings and relation diagonals", lambda context: None, _train),
)

PEER = Peer("random_embeddings", "random DistMult embeddings, a chance-level baseline (toy)", lambda spec: False,
            lambda: None, link_prediction=LINK_PREDICTION)
