"""Train PyKEEN's DistMult (``pykeen`` 1.11, the extra ``peers``) on triples in the suite's ids; export embeddings.

Run as a subprocess of ``experiments/figures/link_prediction_peers.py`` so that its thread count (``--threads``) is its
own. Input (``--data``): ``train.npy`` (``(k, 3)`` int64 ``(head, relation, tail)``) and ``meta.json``
(``num_entities``, ``num_relations``), used as PyKEEN's mapped triples (entity and relation ids unchanged).

PyKEEN's standard training loop, as close to the suite's (and PBG's) setting as PyKEEN allows:

- model ``pykeen.models.DistMult`` of width ``--dim``, with the suite's initialization (entities normal with
  standard deviation ``--init-scale``, relations ones) and without DistMult's defaults that the others do not
  have: no unit-norm constraint of the entity embeddings and no L2 regularizer of the relations (PyKEEN's default
  weight 0.1); one relation embedding serves both directions (no inverse relations: PyKEEN would add inverse
  *triples* to the training set instead);
- ``SLCWATrainingLoop`` with ``BasicNegativeSampler(num_negs_per_pos=K)``: each positive gets its own ``K``
  uniformly corrupted triples, all on one side (PyKEEN splits a batch's negatives between heads and tails: the
  first half of the batch's positives are scored against ``K`` corrupted heads, the second half against ``K``
  corrupted tails), not shared within chunks and not on both sides as in the suite and PBG;
- loss ``CrossEntropyLoss`` (softmax cross-entropy of each positive against its ``K`` negatives, mean over the
  batch), optimizer ``torch.optim.Adagrad`` (learning rate ``--lr``) on all parameters (dense gradients of the
  whole tables);
- ``batch_size`` positives per step, shuffled every epoch, ``--threads`` torch threads.

Output (``--out``): ``embeddings.npy`` (``(num_entities, d)`` float32), ``relations.npy`` (``(R, d)``), and
``result.json``: per-epoch training seconds (from the epoch's first batch to PyKEEN's ``post_epoch`` callback;
the snapshot written after it is not counted), triples, versions; ``points/<k>/`` the embeddings and relations
after ``k`` epochs (the validation curve: one point an epoch).
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="folder with train.npy and meta.json")
    parser.add_argument("--out", type=Path, required=True, help="folder for embeddings, relations, result.json")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--negatives", type=int, default=1000, help="num_negs_per_pos")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--init-scale", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    import pykeen
    from pykeen.losses import CrossEntropyLoss
    from pykeen.models import DistMult
    from pykeen.sampling import BasicNegativeSampler
    from pykeen.training import SLCWATrainingLoop
    from pykeen.training.callbacks import TrainingCallback
    from pykeen.triples import CoreTriplesFactory

    class EpochClock(TrainingCallback):
        """``perf_counter`` at every epoch's first batch and at its end; after the end (not timed), the epoch's
        embeddings into ``out/points/<k>`` (after ``k`` epochs) for the validation curve."""

        def __init__(self, out: Path) -> None:
            super().__init__()
            self.out = out
            self.starts: list[float] = []
            self.ends: list[float] = []

        def pre_batch(self, **kwargs) -> None:
            if len(self.starts) == len(self.ends):
                self.starts.append(time.perf_counter())

        def post_epoch(self, epoch: int, epoch_loss: float, **kwargs) -> None:
            self.ends.append(time.perf_counter())
            save_embeddings(self.model, self.out / "points" / str(len(self.ends)))

    def save_embeddings(model, folder: Path) -> None:
        with torch.no_grad():
            entities = model.entity_representations[0](indices=None).detach().to(torch.float32)
            relations = model.relation_representations[0](indices=None).detach().to(torch.float32)
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "embeddings.npy", entities.numpy())
        np.save(folder / "relations.npy", relations.numpy())

    meta = json.loads((args.data / "meta.json").read_text())
    triples = torch.from_numpy(np.load(args.data / "train.npy")).to(torch.int64)
    factory = CoreTriplesFactory.create(mapped_triples=triples, num_entities=int(meta["num_entities"]),
                                        num_relations=int(meta["num_relations"]))
    model = DistMult(triples_factory=factory, embedding_dim=args.dim, loss=CrossEntropyLoss(),
                     entity_initializer=functools.partial(torch.nn.init.normal_, std=args.init_scale),
                     entity_constrainer=None, relation_initializer=torch.nn.init.ones_, regularizer=None,
                     random_seed=args.seed)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=args.lr)
    loop = SLCWATrainingLoop(model=model, triples_factory=factory, optimizer=optimizer,
                             negative_sampler=BasicNegativeSampler,
                             negative_sampler_kwargs={"num_negs_per_pos": args.negatives})
    clock = EpochClock(args.out)
    started = time.perf_counter()
    losses = loop.train(triples_factory=factory, num_epochs=args.epochs, batch_size=args.batch_size,
                        callbacks=clock, use_tqdm=False, use_tqdm_batch=False, num_workers=0, pin_memory=False)
    wall = time.perf_counter() - started
    epochs = [end - start for start, end in zip(clock.starts, clock.ends)]
    save_embeddings(model, args.out)
    result = {
        "peer": "pykeen", "epoch_time_s": epochs, "train_wall_s": wall, "triples": len(triples),
        "num_entities": int(meta["num_entities"]), "num_relations": int(meta["num_relations"]),
        "threads": args.threads, "epochs": args.epochs, "dim": args.dim, "negatives": args.negatives,
        "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed, "loss": losses,
        "versions": {"pykeen": pykeen.get_version(), "torch": torch.__version__,
                     "python": platform.python_version()},
    }
    (args.out / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({k: result[k] for k in ("peer", "epoch_time_s", "threads")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
