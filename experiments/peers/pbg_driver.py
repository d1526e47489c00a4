"""Train PyTorch-BigGraph (``torchbiggraph`` 1.0.0) on triples given in the suite's ids; export its embeddings.

Runs inside PBG's own environment (``make peers`` builds ``.venv-pbg``: ``torchbiggraph`` imports ``pkg_resources``,
so it needs setuptools < 70, which the suite's environment does not pin), as a subprocess of
``experiments/figures/link_prediction_peers.py``. Standalone on purpose: it imports only PBG, torch, h5py and numpy.

Input (``--data``): ``train.npy`` (``(k, 3)`` int64 ``(head, relation, tail)``) and ``meta.json``
(``num_entities``, ``num_relations``). The entities are split into ``--partitions`` partitions by ``id % p``
(entity ``e`` is row ``e // p`` of partition ``e % p``) and the triples into PBG's ``p x p`` edge buckets, written
through PBG's own storage classes (HDF5). PBG then trains with ``dynamic_relations`` (one diagonal operator per
relation and side, PBG's reciprocal relations), the ``dot`` comparator (so ``diagonal`` + ``dot`` is DistMult),
``num_batch_negs = 0`` and ``num_uniform_negs = K`` (chunks of ``K`` positives share ``K`` uniform negatives per
side), the softmax loss, row-wise Adagrad on the embeddings and Adagrad on the operators, ``--workers`` Hogwild
processes of one thread each, ``eval_fraction = 0`` (all training edges trained on), ``hogwild_delay`` 0 by
default (PBG's default pauses every worker but the first for 2 s per bucket in the first epoch).

With ``--edge-chunks k`` PBG passes over each bucket's edges in ``k`` chunks per epoch (``num_edge_chunks``) and
writes a checkpoint after each: the validation curve gets ``k`` points an epoch. The triples are shuffled (seeded)
before they are written, so that each chunk (a contiguous slice of its bucket) is a uniform sample of the bucket.

Output (``--out``): ``points/<n>/`` (the embeddings and relations after ``n`` passes over a chunk, n = 1 ..
epochs x k: PBG's checkpoint of each, exported when the next pass starts and at the end, for the validation curve),
``embeddings.npy`` (``(num_entities, d)`` float32 in the suite's ids), ``relations.npy``
(``(2R, d)``: rows ``0..R-1`` the tail-query diagonals (PBG's lhs operator: ``score(h, r, t) = <h * d_r, t>`` when
tails are corrupted), rows ``R..2R-1`` the head-query ones (the rhs operator)), so that the suite's DistMult with
``inverse_relations`` scores exactly as PBG does, and ``result.json``: per-pass training seconds (``point_time_s``,
from PBG's "Starting epoch" to its "Finished epoch" log line: the chunk's buckets, partition swaps included; the
checkpoint PBG writes after each and its export excluded), their per-epoch sums (``epoch_time_s``), triples,
versions.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


class EpochClock(logging.Handler):
    """Timestamps PBG's "Starting epoch" and "Finished epoch" log records (``perf_counter``), one of each per pass
    over an edge chunk; before stamping a pass's start it calls ``between(n)`` with the passes done (n >= 1), when
    the previous pass's checkpoint is written and nothing trains (its time is not stamped)."""

    def __init__(self, between: Callable[[int], None] | None = None) -> None:
        super().__init__(logging.INFO)
        self.started: list[float] = []
        self.finished: list[float] = []
        self.between = between

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Starting epoch"):
            if self.finished and self.between is not None:
                self.between(len(self.finished))
            self.started.append(time.perf_counter())
        elif message.startswith("Finished epoch"):
            self.finished.append(time.perf_counter())


def write_input(data: Path, entity_path: Path, edge_path: Path, partitions: int, seed: int = 0
                ) -> tuple[int, int, int]:
    """PBG's input files from ``train.npy`` (shuffled by ``seed``): entity counts per partition, relation count,
    edge buckets."""
    import numpy as np
    import torch
    from torchbiggraph.edgelist import EdgeList
    from torchbiggraph.entitylist import EntityList
    from torchbiggraph.graph_storages import (EDGE_STORAGES, ENTITY_STORAGES, RELATION_TYPE_STORAGES,
                                              BufferedDataset)

    meta = json.loads((data / "meta.json").read_text())
    triples = np.load(data / "train.npy")
    # seeded apart from torch's generator, which PBG's initial embeddings draw from
    triples = torch.from_numpy(triples[np.random.default_rng(seed).permutation(len(triples))]).to(torch.int64)
    num_entities, num_relations = int(meta["num_entities"]), int(meta["num_relations"])
    entities = ENTITY_STORAGES.make_instance(str(entity_path))
    entities.prepare()
    for part in range(partitions):
        entities.save_count("all", part, math.ceil((num_entities - part) / partitions))
    relation_types = RELATION_TYPE_STORAGES.make_instance(str(entity_path))
    relation_types.prepare()
    relation_types.save_count(num_relations)
    edges = EDGE_STORAGES.make_instance(str(edge_path))
    edges.prepare()
    head, rel, tail = triples.unbind(1)
    bucket = (head % partitions) * partitions + tail % partitions
    for lhs_part in range(partitions):
        for rhs_part in range(partitions):
            chosen = (bucket == lhs_part * partitions + rhs_part).nonzero().view(-1)
            # PBG's appender writes each dataset in HDF5 chunks of BufferedDataset.BUFFER_SIZE elements (50 MiB), a
            # whole chunk however few edges a bucket holds: 3 datasets x p^2 buckets, 9.6 GB written for p = 8
            # (measured: 70 s of preparation for the quick graph's 9,703 triples). Chunks the size of the bucket.
            BufferedDataset.BUFFER_SIZE = max(1, len(chosen))
            with edges.save_edges_by_appending(lhs_part, rhs_part) as appender:
                appender.append_edges(EdgeList(EntityList.from_tensor(head[chosen] // partitions),
                                               EntityList.from_tensor(tail[chosen] // partitions),
                                               rel[chosen]))
    return num_entities, num_relations, len(triples)


def config_dict(entity_path: Path, edge_path: Path, checkpoint_path: Path, args: argparse.Namespace) -> dict:
    """The PBG config of the comparison (see the module docstring)."""
    return dict(
        entity_path=str(entity_path), edge_paths=[str(edge_path)], checkpoint_path=str(checkpoint_path),
        entities={"all": {"num_partitions": args.partitions}},
        relations=[{"name": "all_edges", "lhs": "all", "rhs": "all", "operator": "diagonal"}],
        dynamic_relations=True, dimension=args.dim, global_emb=False, comparator="dot", bias=False,
        init_scale=args.init_scale, loss_fn="softmax", lr=args.lr, num_epochs=args.epochs,
        batch_size=args.batch_size, num_batch_negs=0, num_uniform_negs=args.negatives,
        eval_fraction=0.0, workers=args.workers, hogwild_delay=args.hogwild_delay,
        num_edge_chunks=args.edge_chunks,
    )


def export(checkpoint_path: Path, out: Path, num_entities: int, num_relations: int, partitions: int) -> None:
    """Embeddings in the suite's ids and the ``(2R, d)`` relation diagonals (tail queries first)."""
    import numpy as np
    import torch
    from torchbiggraph.checkpoint_manager import CheckpointManager

    manager = CheckpointManager(str(checkpoint_path))
    parts = [manager.read("all", part)[0] for part in range(partitions)]
    dim = parts[0].shape[1]
    embeddings = torch.empty(num_entities, dim, dtype=torch.float32)
    for part, rows in enumerate(parts):
        embeddings[part::partitions] = rows
    state, _ = manager.read_model()
    relations = torch.cat([state["lhs_operators.0.diagonals"], state["rhs_operators.0.diagonals"]])
    if relations.shape != (2 * num_relations, dim):
        raise RuntimeError(f"unexpected relation parameters {tuple(relations.shape)}")
    np.save(out / "embeddings.npy", embeddings.numpy())
    np.save(out / "relations.npy", relations.to(torch.float32).numpy())
    manager.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder with train.npy and meta.json")
    parser.add_argument("--out", type=Path, required=True, help="folder for embeddings, relations, result.json")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1, help="Hogwild worker processes (one thread each)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--negatives", type=int, default=1000, help="num_uniform_negs (= chunk size)")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--init-scale", type=float, default=1e-3)
    parser.add_argument("--hogwild-delay", type=float, default=0.0,
                        help="seconds the second and later workers wait per bucket in the first epoch (PBG's "
                             "default 2; 0 here: it only idles a worker, and the first epoch is not timed anyway)")
    parser.add_argument("--edge-chunks", type=int, default=1,
                        help="passes over a chunk of each bucket's edges per epoch (num_edge_chunks): validation "
                             "points per epoch")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch
    import torchbiggraph
    from torchbiggraph.config import parse_config
    from torchbiggraph.train import train

    torch.manual_seed(args.seed)  # the initial embeddings and the edge order (PBG's workers seed themselves)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pbg-", dir=args.out) as work:
        work = Path(work)
        num_entities, num_relations, num_triples = write_input(args.data, work / "entities", work / "edges",
                                                               args.partitions, args.seed)

        def snapshot(passes: int) -> None:
            folder = args.out / "points" / str(passes)
            folder.mkdir(parents=True, exist_ok=True)
            export(work / "checkpoint", folder, num_entities, num_relations, args.partitions)

        clock = EpochClock(between=snapshot)
        logger = logging.getLogger("torchbiggraph")
        logger.setLevel(logging.INFO)
        logger.addHandler(clock)
        logger.propagate = False  # PBG logs a line per bucket; keep stdout for the summary
        config = parse_config(config_dict(work / "entities", work / "edges", work / "checkpoint", args))
        started = time.perf_counter()
        train(config)
        wall = time.perf_counter() - started
        export(work / "checkpoint", args.out, num_entities, num_relations, args.partitions)
        snapshot(len(clock.finished))
    passes = [end - start for start, end in zip(clock.started, clock.finished)]
    if len(passes) != args.epochs * args.edge_chunks:
        raise RuntimeError(f"timed {len(passes)} passes of {args.epochs} epochs x {args.edge_chunks} edge chunks "
                           "(PBG's log lines changed?)")
    epochs = [sum(passes[k:k + args.edge_chunks]) for k in range(0, len(passes), args.edge_chunks)]
    result = {
        "peer": "pbg", "epoch_time_s": epochs, "point_time_s": passes, "edge_chunks": args.edge_chunks,
        "train_wall_s": wall, "triples": num_triples,
        "num_entities": num_entities, "num_relations": num_relations, "partitions": args.partitions,
        "workers": args.workers, "threads_per_worker": 1, "epochs": args.epochs, "dim": args.dim,
        "negatives": args.negatives, "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed,
        "hogwild_delay": args.hogwild_delay,
        "versions": {"torchbiggraph": torchbiggraph.__version__, "torch": torch.__version__,
                     "python": platform.python_version()},
        "config": config.to_dict(),
    }
    (args.out / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({k: result[k] for k in ("peer", "epoch_time_s", "partitions", "workers")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
