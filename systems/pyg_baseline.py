"""The PyG baseline system ``pyg``: the training loop a PyG user writes, measured by the suite's harness.

What it runs is plain PyTorch Geometric, nothing of the suite's own sampling, models or stages:

- the graph as a PyG ``Data`` (``x``, ``y``, ``edge_index``): the store's features and labels, and the neighbour
  lists the suite's samplers read (``sampler.direction``; the edge list comes grouped by destination, so it is
  passed with ``is_sorted=True`` and PyG does not sort it again);
- ``torch_geometric.loader.NeighborLoader`` over the labeled training nodes (``num_neighbors = model.fanouts``,
  ``batch_size = training.batch_size``, ``shuffle=True``, ``replace = sampler.replace``, ``num_workers`` from the
  options), which samples with PyG's C++ sampler (pyg-lib or torch-sparse) and slices features and labels;
- PyG's ``GraphSAGE`` (``torch_geometric.nn.models.GraphSAGE``: ``num_layers`` SAGEConv layers, ReLU and dropout
  between them, ``model.aggregation``), run over every sampled node at every layer, as a PyG user's model is
  (no trimming), its output sliced to the batch's ``batch_size`` seed nodes;
- the loop: ``optimizer.zero_grad()``, cross-entropy on the seeds, ``backward()``, ``optimizer.step()``
  (``training.optimizer``; the suite's optimizer factory, i.e. torch's class).

Evaluation runs the same model over a ``NeighborLoader`` of the split's labeled nodes (``evaluation.fanouts`` or
``model.fanouts``, ``evaluation.batch_size``), accuracy by the suite's metric (OGB's evaluator). Its sampling draws
from torch's global generator (PyG's samplers do) inside ``torch.random.fork_rng`` seeded from the run's seed, so
evaluating does not change the training trajectory and is the same at every call.

Recorded through the same :class:`~systems.system.System` template as every system (epoch and evaluation records,
``summary.json`` by the runner), with stage names of the suite: ``load`` (waiting for the loader's next batch:
sampling and feature slicing, done by PyG inside its iterator), ``transfer`` (``batch.to(device)``) and
``compute`` (forward, loss, backward, step). ``sampled_edges`` counts the edges of each batch's sampled subgraph.
Randomness: the runner seeds torch's global generator with ``spec.seed`` before the model is built; the loader's
shuffling and PyG's sampling draw from it, so a run is reproducible on the CPU with ``num_workers: 0``.

Needs PyG's sampling backend (pyg-lib or torch-sparse: ``make peers``); node classification only.
"""

from __future__ import annotations

import math

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch.nn import functional as F

from suite.config import RunSpec
from suite.errors import ConfigError, DataError
from suite.data import GraphStore
from suite.data.feature_normalization import normalize_features
from suite.metrics import StageTimer, accuracy
from suite.recorder import Recorder
from systems.system import EpochStats, System
from systems.sampling.sampler import SamplingGraph
from systems.sampling.pyg import missing_reason, pyg_backend
from systems.tasks.node_classification import labeled, make_optimizer

_EVAL_SEED_OFFSET = 0x5EED
_PYG_MODELS = {"graphsage": "GraphSAGE"}  # the suite's encoder name -> PyG's model class of the same layers


class PygOptions(BaseModel):
    """``system.options`` of ``pyg`` (any other key is an error naming it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    num_workers: int = Field(0, ge=0, description="NeighborLoader worker processes (PyG's default: 0)")


def pyg_data(store: GraphStore, direction: str, feature_normalization: str = "none"):
    """The PyG ``Data`` a PyG user trains on: ``x`` (float32, normalised per row by ``feature_normalization``),
    ``y`` (int64, -1 = unlabeled) and ``edge_index`` ``(neighbour, node)`` of the ``direction`` neighbour lists,
    grouped by ``node`` (PyG's CSC order)."""
    from torch_geometric.data import Data

    graph = SamplingGraph.from_store(store, direction)
    owner = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.indptr.diff())
    return Data(x=normalize_features(store.features.to(torch.float32, copy=True), feature_normalization), y=store.labels.to(torch.int64, copy=True),
                edge_index=torch.stack([graph.indices, owner]), num_nodes=graph.num_nodes)


class PygSystem(System):
    """Node classification with PyG's ``NeighborLoader`` and ``GraphSAGE`` in PyG's usual loop (module docstring).

    Options: :class:`PygOptions`.
    """

    label = "PyG (NeighborLoader + GraphSAGE, in memory)"
    """How figures name it."""

    options_model = PygOptions

    def __init__(self, spec: RunSpec, store: GraphStore, device: torch.device, recorder: Recorder):
        super().__init__(spec, store, device, recorder)
        if spec.training.task != "node_classification":
            raise ConfigError(f"training.task: the pyg system trains node classification, got "
                              f"{spec.training.task!r}")
        if spec.model.encoder not in _PYG_MODELS:
            raise ConfigError(f"model.encoder: the pyg system runs PyG's {', '.join(_PYG_MODELS.values())} "
                              f"(encoder {', '.join(_PYG_MODELS)}), got {spec.model.encoder!r}")
        if spec.model.input_dropout > 0:
            raise ConfigError(f"model.input_dropout: PyG's {_PYG_MODELS[spec.model.encoder]} applies no input "
                              f"dropout; got {spec.model.input_dropout}")
        reason = missing_reason()
        if reason is not None:
            raise ConfigError(f"system.name: 'pyg' needs PyG's sampling backend: {reason} (pip install "
                              f"'gnnsuite[peers]', or make peers)")
        self.options = PygOptions.model_validate(spec.system.options)
        self.data = None
        self.train_nodes: torch.Tensor | None = None
        self.model: torch.nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.loader = None

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        """The ``Data``, the training ``NeighborLoader``, PyG's model and the optimizer."""
        from torch_geometric import nn as pyg_nn

        spec, store = self.spec, self.store
        for what in ("features", "labels", "train_nodes"):
            if not store.has(what):
                raise DataError(f"{store.path}: store has no '{what}'; node classification needs it")
        self.data = pyg_data(store, spec.sampler.direction, spec.dataset.feature_normalization)
        self.train_nodes = labeled(store.split("train").to(torch.int64), self.data.y)
        if len(self.train_nodes) == 0:
            raise DataError(f"{store.path}: the train split has no labeled node")
        num_classes = store.num_classes or int(self.data.y.max()) + 1
        torch.manual_seed(spec.seed)
        model_class = getattr(pyg_nn.models, _PYG_MODELS[spec.model.encoder])
        self.model = model_class(self.data.num_features, spec.model.hidden_dim, spec.model.num_layers, num_classes,
                                 dropout=spec.model.dropout, aggr=spec.model.aggregation).to(self.device)
        self.optimizer = make_optimizer(spec.training.optimizer, self.model.parameters(),
                                        spec.training.learning_rate, spec.training.weight_decay)
        self.loader = self._loader(self.train_nodes, spec.model.fanouts, spec.training.batch_size, shuffle=True,
                                   workers=self.options.num_workers)

    def _loader(self, nodes: torch.Tensor, fanouts, batch_size: int, shuffle: bool, workers: int = 0):
        import warnings

        from torch_geometric.loader import NeighborLoader

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "without pyg-lib ... deprecated": we use what is installed
            return NeighborLoader(self.data, num_neighbors=list(fanouts), input_nodes=nodes, batch_size=batch_size,
                                  shuffle=shuffle, replace=self.spec.sampler.replace, is_sorted=True,
                                  num_workers=workers, persistent_workers=workers > 0)

    def parameter_state(self) -> dict:
        """A copy of the model's and the optimizer's state (``evaluation.restore_best``)."""
        import copy

        return copy.deepcopy({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()})

    def load_parameter_state(self, state: dict) -> None:
        """Put back a state :meth:`parameter_state` returned."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    # ------------------------------------------------------------------ training
    def train_epoch(self, epoch: int, progress: bool = False) -> EpochStats:
        """PyG's loop over the loader's batches (the first ``training.limit_batches`` when set)."""
        from tqdm import tqdm

        timer = StageTimer(self.device)
        model, optimizer = self.model, self.optimizer
        model.train()
        limit = self.spec.training.limit_batches
        total = len(self.loader) if limit is None else min(limit, len(self.loader))
        examples = sampled_edges = 0
        loss_sum = 0.0
        batches = iter(self.loader)
        for _ in tqdm(range(total), desc=f"epoch {epoch}", unit="batch", disable=not progress, leave=False):
            with timer.stage("load"):
                batch = next(batches)
            with timer.stage("transfer"):
                batch = batch.to(self.device)
            with timer.stage("compute"):
                optimizer.zero_grad()
                out = model(batch.x, batch.edge_index)[: batch.batch_size]
                loss = F.cross_entropy(out, batch.y[: batch.batch_size])
                loss.backward()
                optimizer.step()
                loss_value = float(loss.detach())
            examples += batch.batch_size
            sampled_edges += batch.edge_index.shape[1]
            loss_sum += loss_value * batch.batch_size
        del batches  # stops the workers' prefetching of the batches not taken
        return EpochStats(examples=examples, sampled_edges=sampled_edges, loss=loss_sum / max(examples, 1),
                          stage_busy_s=timer.snapshot(),
                          extra={"loader": f"NeighborLoader ({pyg_backend()})",
                                 "loader_workers": self.options.num_workers})

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        """``{"accuracy": ...}`` on the labeled nodes of ``split`` (NaN when missing or empty)."""
        nodes = self.store.split(split)
        if nodes is None:
            return {"accuracy": math.nan}
        nodes = labeled(nodes.to(torch.int64), self.data.y)
        if len(nodes) == 0:
            return {"accuracy": math.nan}
        evaluation = self.spec.evaluation
        self.model.eval()
        predictions = []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.spec.seed + _EVAL_SEED_OFFSET)
            loader = self._loader(nodes, evaluation.fanouts or self.spec.model.fanouts, evaluation.batch_size,
                                  shuffle=False)
            for batch in loader:
                batch = batch.to(self.device)
                out = self.model(batch.x, batch.edge_index)[: batch.batch_size]
                predictions.append(out.argmax(dim=-1).cpu())
        return {"accuracy": accuracy(torch.cat(predictions), self.data.y[nodes])}

    def teardown(self) -> None:
        """Drop the loader (its workers) and the data (the trained model stays)."""
        self.loader = None
        self.data = None


__all__ = ["PygOptions", "PygSystem", "pyg_data"]
