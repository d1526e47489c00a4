"""Node classification: predict the labels of training nodes from their sampled multi-hop neighbourhoods.

Per batch: ``sample`` (the registered sampler around the roots, drawing from the batch's own generator) ->
``gather`` (feature rows of the sample's input nodes and the roots' labels) -> ``transfer`` -> ``compute``
(cross-entropy, backward, one optimizer step). No ``update`` stage: all learnable state is in the model.

Features are read as float32 and normalised per row as ``dataset.feature_normalization`` says
(:mod:`suite.data.feature_normalization`), on the rows each batch gathers, so every system that runs these stages
(in memory, pipelined, from disk) sees the same inputs.

Randomness: ``torch.manual_seed(spec.seed)`` before the model is built (weights, dropout); the epoch's order and
each batch's sample come from generators seeded from ``(seed, epoch[, batch])`` (:mod:`systems.batch`), so a
batch's sample does not depend on who loads it; evaluation samples from its own generator, re-seeded at every
evaluation, so evaluating never changes the training trajectory.

A system that holds the graph, features and labels elsewhere (the disk system: a buffer of partitions) builds the
task without :meth:`~NodeClassificationTask.setup`: it calls :meth:`~NodeClassificationTask.build_model`, then, per
buffer state, :meth:`~NodeClassificationTask.bind_state` with a :class:`NodeView` of what the buffer holds, runs the
stages or :meth:`~NodeClassificationTask.predict` on buffer rows, and finally
:meth:`~NodeClassificationTask.release_state`. An evaluation over a graph the system holds elsewhere binds a view
of that graph (``evaluation=True``), whose features may be a :class:`RowSource` that reads each batch's rows on
demand, and calls :meth:`~NodeClassificationTask.predict_nodes`: the predictions the in-memory evaluation makes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn
from torch.nn import functional as F

from suite.data.feature_normalization import normalize_features
from suite.errors import ConfigError, DataError
from suite.metrics import accuracy
from suite.registry import SAMPLERS
from systems.models.encoder import attach_degrees
from systems.models.rgcn import RelationLookup, attach_lookup, attach_relations, build_encoder
from systems.batch import Batch, batch_generator, plan_epoch
from systems.sampling.sampler import RootsOnly, Sampler, SamplingGraph
from systems.tasks.task import Task, check_loss

# Offset between the training seed and the evaluation sampling seed (any constant keeps them independent).
_EVAL_SEED_OFFSET = 0x5EED


def make_optimizer(name: str, parameters, learning_rate: float, weight_decay: float) -> torch.optim.Optimizer:
    """The optimizer ``name`` (``adam``, ``sgd`` or ``adagrad``) over ``parameters``."""
    optimizers = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad}
    if name not in optimizers:
        raise ConfigError(f"training.optimizer: unknown optimizer {name!r} (known: {', '.join(sorted(optimizers))})")
    return optimizers[name](parameters, lr=learning_rate, weight_decay=weight_decay)


def labeled(nodes: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``nodes`` without the unlabeled ones (label -1)."""
    return nodes[labels[nodes] >= 0]


class RowSource(Protocol):
    """Feature rows read on demand (a table left on disk): what an evaluation view's ``features`` may be instead of
    a tensor. ``index_select(0, nodes)`` returns the rows of ``nodes`` as a tensor, as ``Tensor.index_select``."""

    shape: tuple[int, ...]

    def index_select(self, dim: int, index: torch.Tensor) -> torch.Tensor:
        """The rows ``index`` (``dim`` is 0)."""


@dataclass(frozen=True)
class NodeView:
    """What the task reads, indexed alike (row ``i`` of ``features`` and ``labels`` is node ``i`` of ``graph``):
    the in-memory store's nodes, or the rows of a disk buffer state.

    Attributes:
        graph: the CSR the samplers draw from (None when the model reads no neighbours and none was built).
        features: ``(rows, d)`` feature rows (for an evaluation view, possibly a :class:`RowSource`).
        labels: ``(rows,)`` labels (-1: unlabeled, or not to be trained on in this view).
        relation_lookup: the relation types of ``graph``'s edges, for a model that reads them (else None).
    """

    graph: SamplingGraph | None
    features: torch.Tensor | RowSource
    labels: torch.Tensor
    relation_lookup: RelationLookup | None = None


class NodeClassificationTask(Task):
    """Node classification over the whole graph, features and labels held in CPU memory.

    Needs a store with features, labels and a ``train`` node split. Attributes set by :meth:`setup`: ``graph``
    (the sampling CSR), ``features``, ``labels``, ``train_nodes``, ``model``, ``optimizer``, ``train_sampler``,
    ``eval_sampler``.
    """

    def __init__(self, spec, store, device):
        super().__init__(spec, store, device)
        self.graph: SamplingGraph | None = None
        self.features: torch.Tensor | None = None
        self.labels: torch.Tensor | None = None
        self.train_nodes: torch.Tensor | None = None
        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.train_sampler: Sampler | None = None
        self.eval_sampler: Sampler | None = None

    # ------------------------------------------------------------------ setup
    @classmethod
    def check_inputs(cls, spec, store) -> None:
        """The store has features, labels and a train split with at least one labeled node."""
        for what in ("features", "labels", "train_nodes"):
            if not store.has(what):
                raise DataError(f"{store.path}: store has no '{what}'; node classification needs it")
        train = store.tensor("train_nodes")
        if len(train) == 0 or not bool((store.tensor("labels")[train.to(torch.int64)] >= 0).any()):
            raise DataError(f"{store.file('train_nodes')}: the train split has no labeled node")

    def setup(self) -> None:
        """Load the CSR, features and labels into memory; build samplers, model and optimizer."""
        spec = self.spec
        self._load_graph()
        torch.manual_seed(spec.seed)
        self.build_model(self.features.shape[1], self.store.num_classes or int(self.labels.max()) + 1)
        attach_relations(self.model, self.store, spec.sampler.direction)
        attach_degrees(self.model, self.graph)
        self.train_sampler = self._make_sampler(spec.model.fanouts)
        self.eval_sampler = self._make_sampler(spec.evaluation.fanouts or spec.model.fanouts)

    def build_model(self, in_dim: int, out_dim: int) -> None:
        """Build the registered encoder and its optimizer on the device (seed the global RNG first)."""
        spec = self.spec
        self.optimizer_steps = 0
        self.model = build_encoder(spec.model, in_dim, out_dim, self.store).to(self.device)
        self.optimizer = make_optimizer(spec.training.optimizer, self.model.parameters(),
                                        spec.training.learning_rate, spec.training.weight_decay)

    def _load_graph(self) -> None:
        store = self.store
        for what in ("features", "labels", "train_nodes"):
            if not store.has(what):
                raise DataError(f"{store.path}: store has no '{what}'; node classification needs it")
        self.graph = SamplingGraph.from_store(store, self.spec.sampler.direction)
        self.features = store.features.to(torch.float32, copy=True)
        self.labels = store.labels.to(torch.int64, copy=True)
        self.train_nodes = labeled(store.split("train").to(torch.int64), self.labels)
        if len(self.train_nodes) == 0:
            raise DataError(f"{store.path}: the train split has no labeled node")

    # ------------------------------------------------------------------ binding (systems that hold the data)
    def bind_state(self, view: NodeView, evaluation: bool = False) -> None:
        """Read ``view`` from now on: the stages and :meth:`predict` sample ``view.graph`` and gather rows of
        ``view.features`` and ``view.labels`` (batch roots are rows of the view). Builds the training sampler
        (``model.fanouts``) or, with ``evaluation``, the evaluation sampler (``evaluation.fanouts``, default the
        model's), and gives the model's relation modules ``view.relation_lookup``. Call after :meth:`build_model`;
        consumes no randomness."""
        self.graph, self.features, self.labels = view.graph, view.features, view.labels
        attach_lookup(self.model, view.relation_lookup)
        attach_degrees(self.model, view.graph)
        if evaluation:
            self.eval_sampler = self._make_sampler(self.spec.evaluation.fanouts or self.spec.model.fanouts)
        else:
            self.train_sampler = self._make_sampler(self.spec.model.fanouts)

    def release_state(self) -> None:
        """Forget the bound view and its samplers (the model stays)."""
        self.graph = self.features = self.labels = None
        self.train_sampler = self.eval_sampler = None

    def _make_sampler(self, fanouts: tuple[int, ...], name: str | None = None) -> Sampler:
        if not getattr(self.model, "uses_neighbours", True):
            return RootsOnly()  # the model reads only the roots: no hops, no graph needed (the disk system has none)
        sampler_cls = SAMPLERS.get(name or self.spec.sampler.name)
        return sampler_cls(self.graph, fanouts, replace=self.spec.sampler.replace)

    def set_eval_sampler(self, name: str, fanouts: tuple[int, ...]) -> None:
        """Evaluate from now on with the registered sampler ``name`` drawing ``fanouts`` over the bound graph (a
        measurement that compares samplers at evaluation swaps it; the run's own comes from the spec)."""
        self.eval_sampler = self._make_sampler(tuple(fanouts), name)

    # ------------------------------------------------------------------ stages
    def plan_epoch(self, epoch: int) -> list[Batch]:
        """Shuffled training nodes in batches of ``training.batch_size`` (order from ``(seed, epoch)`` only; the
        first ``training.limit_batches`` when set)."""
        batches = plan_epoch(self.train_nodes, self.spec.training.batch_size, epoch, self.spec.seed)
        return batches[: self.spec.training.limit_batches]

    def sample(self, batch: Batch) -> None:
        """Sample the roots' neighbourhood with the batch's own generator (:func:`~systems.batch.batch_generator`)."""
        generator = batch_generator(self.spec.seed, batch.epoch, batch.index)
        batch.sample = self.train_sampler.sample(batch.roots, generator)

    def gather(self, batch: Batch, pin: bool | None = None) -> None:
        """Feature rows of the sample's input nodes and the roots' labels (page-locked when ``pin``)."""
        nodes = batch.sample.input_nodes
        if pin if pin is not None else self.device.type == "cuda":
            batch.x = torch.empty((len(nodes), self.features.shape[1]), dtype=self.features.dtype,
                                  pin_memory=True)
            torch.index_select(self.features, 0, nodes, out=batch.x)
            batch.y = self.labels[batch.roots].pin_memory()
        else:
            batch.x = self.features.index_select(0, nodes)
            batch.y = self.labels[batch.roots]
        # float32 (stores may hold float16 rows; the disk system gathers them as they are), normalised per row
        batch.x = normalize_features(batch.x, self.spec.dataset.feature_normalization)

    def compute(self, batch: Batch) -> None:
        """Forward, cross-entropy loss, backward and one optimizer step; sets ``loss`` and ``version_applied``."""
        if batch.ready is not None:
            torch.cuda.current_stream(self.device).wait_event(batch.ready)
        loss = F.cross_entropy(self.model(batch.x, batch.sample), batch.y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        batch.version_applied = self.optimizer_steps
        self.optimizer.step()
        self.optimizer_steps += 1
        batch.loss = check_loss(float(loss.detach()), batch)  # a non-finite loss stops the run (status diverged)
        batch.x = batch.y = batch.ready = None  # the device memory goes back to the allocator now

    def train(self) -> None:
        """Training mode (dropout on)."""
        self.model.train()

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        """``{"accuracy": ...}`` on the labeled nodes of ``split`` (NaN when the split is missing or empty)."""
        nodes = self.store.split(split)
        if nodes is None:
            return {"accuracy": math.nan}
        nodes = labeled(nodes.to(torch.int64), self.labels)
        return {"accuracy": accuracy(self.predict_nodes(nodes), self.labels[nodes])}

    @torch.no_grad()
    def predict_nodes(self, nodes: torch.Tensor) -> torch.Tensor:
        """What an evaluation predicts for ``nodes`` (rows of the bound view), in order: batches of
        ``evaluation.batch_size``, neighbourhoods drawn by the evaluation sampler from a generator seeded afresh
        from the run's seed (so the same model, graph and rows give the same predictions whoever binds them).
        Puts the model in eval mode."""
        self.model.eval()
        generator = torch.Generator().manual_seed(self.spec.seed + _EVAL_SEED_OFFSET)
        predictions = [self.predict(roots, generator) for roots in nodes.split(self.spec.evaluation.batch_size)]
        return torch.cat(predictions) if predictions else torch.empty(0, dtype=torch.int64)

    @torch.no_grad()
    def predict(self, roots: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The predicted class of every root (rows of the bound view), its neighbourhood drawn by the evaluation
        sampler from ``generator``; the caller has put the model in eval mode."""
        return self.node_outputs(roots, generator).argmax(dim=-1).cpu()

    @torch.no_grad()
    def node_outputs(self, roots: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The model's outputs (class logits, on the task's device) for every root, its neighbourhood drawn by the
        evaluation sampler from ``generator``; the caller has put the model in eval mode."""
        sample = self.eval_sampler.sample(roots, generator)
        x = normalize_features(self.features.index_select(0, sample.input_nodes),
                               self.spec.dataset.feature_normalization).to(self.device)
        return self.model(x, sample.to(self.device))

    def teardown(self) -> None:
        """Drop the in-memory graph, features, labels and samplers (the trained model stays)."""
        self.release_state()
        self.train_nodes = None


__all__ = ["NodeClassificationTask", "NodeView", "RowSource", "labeled", "make_optimizer"]
