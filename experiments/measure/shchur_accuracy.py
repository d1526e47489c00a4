"""Test accuracy of in-memory GraphSAGE and GCN on Shchur et al.'s graphs, next to their published values.

Usage::

    python experiments/measure/shchur_accuracy.py [--graphs amazon-computers coauthor-cs coauthor-physics]
        [--encoders graphsage gcn] [--split-seed 0] [--seed 0] [--epochs 200] [--out out/shchur]

One run per graph and encoder through the suite's own harness (``suite.run``: the in-memory system, the store the
loader prepares with Shchur's split, 20 training and 30 validation nodes per class, the rest test), on one split
and one seed; it prints the test accuracy after the last epoch beside the published one. This is a single
measurement, not the mean over splits and seeds the published numbers are (Shchur et al.: 100 splits x 20
initialisations, early stopping on validation); the run settings follow theirs where the suite has them: two
layers, 64 hidden units, all neighbours, full-batch training (200 or fewer training nodes), Adam.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PUBLISHED = {  # Shchur et al. 2018, table 2 (test accuracy, mean over random splits and initialisations)
    ("amazon-computers", "graphsage"): 0.82, ("amazon-computers", "gcn"): 0.83,
    ("coauthor-cs", "graphsage"): 0.91, ("coauthor-cs", "gcn"): 0.91,
    ("coauthor-physics", "graphsage"): 0.93, ("coauthor-physics", "gcn"): 0.93,
}


def run_spec(graph: str, encoder: str, root: Path, cache_dir: Path, *, split_seed: int, seed: int,
             epochs: int, dropout: float, learning_rate: float, weight_decay: float) -> dict:
    """The run spec of one graph and encoder (in memory, all neighbours, full-batch)."""
    return {
        "name": f"shchur-{graph}-{encoder}",
        "dataset": {"name": graph, "root": str(root / graph), "cache_dir": str(cache_dir),
                    "split": {"seed": split_seed}},
        "model": {"encoder": encoder, "num_layers": 2, "hidden_dim": 64, "fanouts": [-1, -1], "dropout": dropout},
        "system": {"name": "in_memory"},
        "training": {"task": "node_classification", "batch_size": 1024, "epochs": epochs, "optimizer": "adam",
                     "learning_rate": learning_rate, "weight_decay": weight_decay},
        "evaluation": {"every": epochs, "batch_size": 2048},
        "seed": seed,
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    import suite
    from suite.datasets import shared_datasets_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+", default=["amazon-computers", "coauthor-cs", "coauthor-physics"])
    parser.add_argument("--encoders", nargs="+", default=["graphsage", "gcn"])
    parser.add_argument("--root", type=Path, default=shared_datasets_dir(), help="the shared datasets folder")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--out", type=Path, default=Path("out/shchur"))
    args = parser.parse_args(argv)
    print("graph,encoder,split_seed,seed,epochs,test_accuracy,published,difference")
    for graph in args.graphs:
        for encoder in args.encoders:
            spec = run_spec(graph, encoder, args.root, args.out / "data", split_seed=args.split_seed,
                            seed=args.seed, epochs=args.epochs, dropout=args.dropout,
                            learning_rate=args.learning_rate, weight_decay=args.weight_decay)
            run = suite.run(spec, out=str(args.out / "runs"))
            accuracy = run.metrics["test"]["accuracy"]
            published = PUBLISHED.get((graph, encoder))
            difference = "" if published is None else f"{accuracy - published:+.3f}"
            print(f"{graph},{encoder},{args.split_seed},{args.seed},{args.epochs},{accuracy:.4f},{published},"
                  f"{difference}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
