"""The synchronous in-memory baseline: the whole graph, features and labels in CPU memory, one batch at a time.

Per mini-batch, with every stage timed under the suite's stage names: ``sample`` (the registered sampler, on the
CPU) -> ``gather`` (feature rows of the sample's input nodes and the roots' labels) -> ``transfer`` (to the
compute device) -> ``compute`` (forward, loss, backward, optimizer step). No stage overlaps another: this is the
reference that the pipelined and disk-based systems are compared with.

Randomness: ``torch.manual_seed(spec.seed)`` before the model is built (weights, dropout) and one
``torch.Generator`` seeded with ``spec.seed`` for shuffling and sampling during training; evaluation samples
from its own generator, re-seeded at every evaluation, so evaluating never changes the training trajectory.
Two runs with the same spec give the same losses and metrics on the CPU.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from suite.config import RunSpec
from suite.errors import ConfigError, DataError
from suite.graph import GraphStore
from suite.metrics import StageTimer, accuracy
from suite.recorder import Recorder
from suite.registry import MODELS, SAMPLERS, SYSTEMS
import systems.models  # noqa: F401  (registers the built-in models)
import systems.sampling  # noqa: F401  (registers the built-in samplers)
from systems.base import EpochStats, System
from systems.sampling.base import Sampler, SamplingGraph

# Offset between the training seed and the evaluation sampling seed (any constant keeps them independent).
_EVAL_SEED_OFFSET = 0x5EED


def make_optimizer(name: str, parameters, learning_rate: float, weight_decay: float) -> torch.optim.Optimizer:
    """The optimizer ``name`` (``adam``, ``sgd`` or ``adagrad``) over ``parameters``."""
    optimizers = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad}
    if name not in optimizers:
        raise ConfigError(f"training.optimizer: unknown optimizer {name!r} (known: {', '.join(sorted(optimizers))})")
    return optimizers[name](parameters, lr=learning_rate, weight_decay=weight_decay)


def _labeled(nodes: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``nodes`` without the unlabeled ones (label -1)."""
    return nodes[labels[nodes] >= 0]


@SYSTEMS.register("in_memory")
class InMemorySystem(System):
    """Synchronous mini-batch training with graph, features and labels held in CPU memory.

    Supports ``training.task: node_classification``. Options: none (``system.options`` is ignored).

    Args:
        spec: the run spec.
        store: the opened graph store (needs features, labels and a ``train`` node split).
        device: where the model runs (sampling and gathering stay on the CPU).
        recorder: where epoch and evaluation records go.
    """

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder):
        super().__init__(spec, store, device, recorder)
        self.graph: SamplingGraph | None = None
        self.features: torch.Tensor | None = None
        self.labels: torch.Tensor | None = None
        self.train_nodes: torch.Tensor | None = None
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.train_sampler: Sampler | None = None
        self.eval_sampler: Sampler | None = None
        self.generator: torch.Generator | None = None

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """Load the CSR, features and labels into memory; build samplers, model and optimizer."""
        spec = self.spec
        if spec.training.task != "node_classification":
            raise ConfigError(f"training.task: {spec.training.task} is not supported by in_memory yet")
        self._load_graph()
        torch.manual_seed(spec.seed)
        self.generator = torch.Generator().manual_seed(spec.seed)
        out_dim = self.store.num_classes or int(self.labels.max()) + 1
        self.model = MODELS.get(spec.model.encoder)(spec.model, self.features.shape[1], out_dim).to(self.device)
        self.optimizer = make_optimizer(spec.training.optimizer, self.model.parameters(),
                                        spec.training.learning_rate, spec.training.weight_decay)
        self.train_sampler = self._make_sampler(spec.model.fanouts)
        self.eval_sampler = self._make_sampler(spec.evaluation.fanouts or spec.model.fanouts)

    def _load_graph(self) -> None:
        store = self.store
        for what, present in (("features", store.has("features")), ("labels", store.has("labels")),
                              ("train_nodes", store.has("train_nodes"))):
            if not present:
                raise DataError(f"{store.path}: store has no '{what}'; in_memory node classification needs it")
        self.graph = SamplingGraph.from_store(store, self.spec.sampler.direction)
        self.features = store.features.to(torch.float32, copy=True)
        self.labels = store.labels.to(torch.int64, copy=True)
        self.train_nodes = _labeled(store.split("train").to(torch.int64), self.labels)
        if len(self.train_nodes) == 0:
            raise DataError(f"{store.path}: the train split has no labeled node")

    def _make_sampler(self, fanouts: tuple[int, ...]) -> Sampler:
        if not getattr(self.model, "uses_neighbours", True):
            fanouts = ()  # the model reads only the roots: sample no hops
        sampler_cls = SAMPLERS.get(self.spec.sampler.name)
        return sampler_cls(self.graph, fanouts, replace=self.spec.sampler.replace)

    # ------------------------------------------------------------------ training
    def train_epoch(self, epoch: int, progress: bool = False) -> EpochStats:
        """One pass over the shuffled training nodes in batches of ``training.batch_size``."""
        from tqdm import tqdm

        timer = StageTimer(self.device)
        order = torch.randperm(len(self.train_nodes), generator=self.generator)
        batches = self.train_nodes[order].split(self.spec.training.batch_size)
        self.model.train()
        total_loss, examples, sampled_edges = 0.0, 0, 0
        for roots in tqdm(batches, desc=f"epoch {epoch}", unit="batch", disable=not progress, leave=False):
            with timer.stage("sample"):
                sample = self.train_sampler.sample(roots, self.generator)
            with timer.stage("gather"):
                x = self.features[sample.input_nodes]
                y = self.labels[roots]
            with timer.stage("transfer"):
                x, y, sample = x.to(self.device), y.to(self.device), sample.to(self.device)
            with timer.stage("compute"):
                loss = F.cross_entropy(self.model(x, sample), y)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                total_loss += float(loss.detach()) * len(roots)
            examples += len(roots)
            sampled_edges += sample.num_sampled_edges
        return EpochStats(examples=examples, sampled_edges=sampled_edges, loss=total_loss / max(examples, 1),
                          stage_busy_s=timer.snapshot())

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        """``{"accuracy": ...}`` on the labeled nodes of ``split`` (NaN when the split is missing or empty)."""
        nodes = self.store.split(split)
        if nodes is None:
            return {"accuracy": math.nan}
        nodes = _labeled(nodes.to(torch.int64), self.labels)
        self.model.eval()
        generator = torch.Generator().manual_seed(self.spec.seed + _EVAL_SEED_OFFSET)
        predictions = [
            self._predict(roots, generator) for roots in nodes.split(self.spec.evaluation.batch_size)
        ]
        predicted = torch.cat(predictions) if predictions else torch.empty(0, dtype=torch.int64)
        return {"accuracy": accuracy(predicted, self.labels[nodes])}

    def _predict(self, roots: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        sample = self.eval_sampler.sample(roots, generator)
        x = self.features[sample.input_nodes].to(self.device)
        return self.model(x, sample.to(self.device)).argmax(dim=-1).cpu()

    def teardown(self) -> None:
        """Drop the in-memory graph, features, labels and samplers (the trained model stays)."""
        self.graph = self.features = self.labels = self.train_nodes = None
        self.train_sampler = self.eval_sampler = None


__all__ = ["InMemorySystem", "make_optimizer"]
