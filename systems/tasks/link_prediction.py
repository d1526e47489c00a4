"""Link prediction: score training edges ``(src, rel, dst)`` above corrupted ones; rank held-out edges (MRR).

Model: an *encoder* (``model.encoder``: ``shallow`` -- a node is its own embedding row -- or a GNN such as
``graphsage`` over the registered sampler, e.g. DENSE) produces node representations from either the store's
features or a learnable node embedding table (``model.learnable_embeddings``); a *decoder* (``model.decoder``:
``distmult``, ``complex``, ``dot``; :mod:`systems.models.decoders`) with its relation embeddings scores triples.

Per batch of training edges (``batch.roots`` are positions into the ``train_edges`` split):

- ``sample``: chunked negatives (:mod:`systems.tasks.negatives`: ``training.negatives``; with ``subset_fraction``
  from the batch's block's random node subset, :meth:`LinkPredictionTask.negative_subset`), then the unique nodes of
  positives and negatives become the roots of the encoder's sample (no hops for ``shallow``); the positives and
  negatives are kept as local row ids in ``batch.extra`` (``src``, ``rel``, ``dst``, ``tail_neg``, ``head_neg``).
  With ``training.negatives: all`` (1vsAll) every entity is a root and a candidate of every positive (empty
  ``tail_neg``/``head_neg``, ``chunk_size`` 0; :func:`all_entities_loss`). With ``training.negatives: kvsall``
  the examples are the distinct ``(h, r, ?)`` / ``(?, r, t)`` queries of the training split instead of its triples,
  every entity is a root, and each query's true answers are kept as ``(row, entity)`` pairs
  (:mod:`systems.tasks.kvsall`);
- ``gather``: the rows of the sample's input nodes, from the embedding table (read *now*: the table's version is
  kept in ``batch.extra["embedding_version"]``) or from the features;
- ``transfer``: ``x``, the sample and the local ids to the device;
- ``compute``: encoder, decoder, loss (``training.loss``: ``softmax`` -- cross-entropy of every positive against
  its chunk's negatives, per side -- or ``margin``), backward; one optimizer step of the model's dense parameters
  (relation embeddings, encoder weights; ``training.optimizer``). The gradient of the gathered embedding rows is
  kept for ``update``, with ``batch.extra["embedding_staleness"]``: optimizer steps whose embedding updates the
  rows missed (0 when training synchronously);
- ``update`` (with learnable embeddings): sparse Adagrad on the gathered rows, written back to the table
  (:class:`~systems.models.embeddings.EmbeddingTable`, learning rate ``training.embedding_learning_rate``).

Evaluation ranks the true tail of every ``(h, r, ?)`` and the true head of every ``(?, r, t)`` of the split among
all entities (``evaluation.negatives: null``) or among that many uniformly sampled ones per query (large graphs;
through OGB's link Evaluator). Both *unfiltered* and *filtered* (other known true triples of train+valid+test
removed from the candidates) metrics are recorded as ``unfiltered_*`` / ``filtered_*``: MRR and Hits@1/3/10, ties
at their mean rank (:func:`suite.metrics.target_ranks`); ``mrr`` and ``hits@k`` repeat the filtered ones (or the
unfiltered ones with ``evaluation.filtered: false``).

Randomness: ``torch.manual_seed(spec.seed)`` before the model is built; the embedding table from a generator
seeded with ``spec.seed``; an epoch's order and each batch's negatives and sample from generators seeded from
``(seed, epoch[, batch])`` (:mod:`systems.batch`); evaluation from its own generator, re-seeded every time.

A system that holds the embeddings and edges elsewhere (the disk system: a buffer of embedding partitions) builds
the task without :meth:`~LinkPredictionTask.setup`: :meth:`~LinkPredictionTask.build_model`, then
:meth:`~LinkPredictionTask.bind_embeddings` (the table its rows live in); per buffer state
:meth:`~LinkPredictionTask.bind_state` with an :class:`EdgeView` (the state's edges as rows of that table, the rows
negatives come from, the graph to sample), the stages, and :meth:`~LinkPredictionTask.release_state`; to evaluate,
the whole table bound with :meth:`~LinkPredictionTask.bind_embeddings` and the whole graph with
:meth:`~LinkPredictionTask.bind_evaluation_graph`, then :meth:`~LinkPredictionTask.evaluate`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from suite.errors import ConfigError, DataError
from suite.metrics import (RANK_KS, TripleFilter, filtered_target_ranks, ogb_ranking_metrics, ranking_metrics,
                           target_ranks)
from suite.registry import DECODERS, SAMPLERS
from systems.batch import Batch, batch_generator, plan_epoch
from systems.models.decoders import Decoder, DistMult, build_decoder
from systems.models.embeddings import EmbeddingTable
from systems.models.encoder import attach_degrees
from systems.models.rgcn import RelationLookup, attach_lookup, attach_relations, build_encoder
from systems.models.row_kernels import gather_rows
from systems.sampling.sampler import SampledSubgraph, Sampler, SamplingGraph
from systems.tasks.task import Task, check_loss
from systems.tasks.kvsall import QueryAnswers, build_query_answers, kvsall_loss
from systems.tasks.negatives import NegativeSampler, node_subset
from systems.tasks.scoring import all_entities_softmax_loss, chunked_softmax_loss, distmult_softmax_loss
from systems.tasks.node_classification import make_optimizer

_EVAL_SEED_OFFSET = 0x5EED
_EMBEDDING_SEED_OFFSET = 0xE3B
_SUBSET_SEED_OFFSET = 0x5B5E7
_EDGE_COLUMNS = ("source node", "relation", "destination node")
_DEVICE_KEYS = ("src", "rel", "dst", "tail_neg", "head_neg")
_KVSALL_KEYS = ("side", "answer_rows", "answer_entities")  # KvsAll batches: queries' sides and true answers
# Scores materialized at once during evaluation (rows x candidates); bounds its memory to 128 MiB of float32.
_EVAL_SCORE_ELEMENTS = 1 << 25


def check_edge_split(store, split: str, required: bool) -> torch.Tensor | None:
    """The ``(k, 3)`` int64 ``(src, rel, dst)`` edges of ``split``, checked.

    Raises:
        DataError: naming the store file (and the first bad row): the split is missing while ``required``, is
            empty, or holds a node id outside ``[0, num_nodes)`` or a relation id outside ``[0, num_relations)``.
    """
    key = f"{split}_edges"
    edges = store.edges(split)
    if edges is None:
        if required:
            raise DataError(f"{store.path}: store has no '{key}'; link prediction needs it")
        return None
    path = store.file(key)
    if edges.dim() != 2 or edges.shape[1] != 3:
        raise DataError(f"{path}: expected (k, 3) rows 'src, rel, dst', got shape {tuple(edges.shape)}")
    if len(edges) == 0:
        raise DataError(f"{path}: the {split} split is empty (0 edges)")
    edges = edges.to(torch.int64)
    for column, (what, high) in enumerate(zip(_EDGE_COLUMNS,
                                              (store.num_nodes, store.num_relations, store.num_nodes))):
        bad = (edges[:, column] < 0) | (edges[:, column] >= high)
        if bool(bad.any()):
            row = int(torch.nonzero(bad)[0])
            count = "num_relations" if column == 1 else "num_nodes"
            raise DataError(f"{path}: row {row}: {what} id {int(edges[row, column])} is out of range "
                            f"[0, {high}) ({count} in metadata.json)")
    return edges


def _batch_keys(batch: Batch) -> list[str]:
    """The ``batch.extra`` tensors that go to the device: the positives' and negatives' ids (and KvsAll's)."""
    return [key for key in _DEVICE_KEYS + _KVSALL_KEYS if key in batch.extra]


def rows(z: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``z[index]`` for an index of any shape, through ``index_select`` with a one-pass backward
    (:func:`systems.models.row_kernels.gather_rows`; advanced indexing's backward is an accumulating
    ``index_put_``, several times slower)."""
    return gather_rows(z, index)


def _distmult_softmax(decoder: DistMult, z, src, rel, dst, tail_neg, head_neg, chunk_size, precision,
                      score_precision="float32"):
    return distmult_softmax_loss(z, decoder.relation_table(), src, rel, decoder.inverse(rel), dst, tail_neg,
                                 head_neg, chunk_size, precision, score_precision)


FUSED_SOFTMAX_LOSSES = {DistMult: _distmult_softmax}
"""Decoder class -> its softmax loss with a hand-written backward (the same value and gradients as the generic
path through ``tail_query`` / ``head_query``, fewer operators); decoders without one take the generic path."""


def link_prediction_loss(decoder: Decoder, z: torch.Tensor, src: torch.Tensor, rel: torch.Tensor,
                         dst: torch.Tensor, tail_neg: torch.Tensor | None, head_neg: torch.Tensor | None,
                         chunk_size: int,
                         loss: str = "softmax", margin: float = 1.0,
                         gradient_precision: str = "float32", score_precision: str = "float32") -> torch.Tensor:
    """Mean loss of the positives ``(src, rel, dst)`` against their chunks' negatives, both sides averaged.

    Args:
        decoder: the triple scorer.
        z: ``(U, d)`` representations of the batch's unique nodes.
        src, rel, dst: ``(B,)`` the positives (rows of ``z``, relation ids).
        tail_neg, head_neg: ``(C, K)`` rows of ``z`` replacing each chunk's destinations / sources; None: every
            row of ``z`` is a candidate (``training.negatives: all``, :func:`all_entities_loss`; row = entity id).
        chunk_size: positives per chunk.
        loss: ``softmax``: cross-entropy of each positive's score against its K negative scores (the positive is
            class 0 of K + 1); ``margin``: mean of ``relu(margin - positive + negative)`` over all pairs.
        margin: the margin of the margin loss.
        gradient_precision: the softmax loss's backward products (:func:`~systems.tasks.scoring.chunked_softmax_loss`).
        score_precision: its forward's score products (sampled negatives, dot-product decoders; as there).
    """
    if loss not in ("softmax", "margin"):
        raise ConfigError(f"training.loss: unknown loss {loss!r} (known: margin, softmax)")
    if tail_neg is None:
        return all_entities_loss(decoder, z, src, rel, dst, loss, margin, gradient_precision)
    fused = FUSED_SOFTMAX_LOSSES.get(type(decoder)) if loss == "softmax" else None
    if fused is not None:
        return fused(decoder, z, src, rel, dst, tail_neg, head_neg, chunk_size, gradient_precision, score_precision)
    heads, tails = rows(z, src), rows(z, dst)
    tail_queries, head_queries = decoder.tail_query(heads, rel), decoder.head_query(tails, rel)
    # per side, the positive is scored by that side's queries (they differ with inverse relations)
    sides = ((tail_queries, decoder.pair_scores(tail_queries, tails), tail_neg),
             (head_queries, decoder.pair_scores(head_queries, heads), head_neg))
    total = heads.new_zeros(())
    for queries, positive, negatives in sides:
        if loss == "softmax" and decoder.dot_product:  # scores, loss and gradients in one function (scoring.py)
            total = total + chunked_softmax_loss(queries, rows(z, negatives), positive, chunk_size,
                                                 gradient_precision, score_precision)
            continue
        negative = decoder.chunk_scores(queries, rows(z, negatives), chunk_size)
        if loss == "softmax":
            total = total + (torch.logaddexp(torch.logsumexp(negative, dim=1), positive) - positive).mean()
        else:
            total = total + F.relu(margin - positive.unsqueeze(1) + negative).mean()
    return total / len(sides)


def all_entities_loss(decoder: Decoder, z: torch.Tensor, src: torch.Tensor, rel: torch.Tensor, dst: torch.Tensor,
                      loss: str = "softmax", margin: float = 1.0,
                      gradient_precision: str = "float32") -> torch.Tensor:
    """1vsAll (``training.negatives: all``): every row of ``z`` (all entities, row = entity id) is a candidate.

    Softmax: the cross-entropy of the true tail among all entities for ``(h, r, ?)`` and of the true head for
    ``(?, r, t)``, averaged (LibKGE's 1vsAll; the query entity itself is a candidate, so a symmetric decoder
    cannot score ``(h, r, h)`` highest for free); margin: ``relu(margin - positive + score)`` over all other
    entities. True answers other than the target are not removed (as in LibKGE's 1vsAll).

    A dot-product decoder's softmax goes through :func:`~systems.tasks.scoring.all_entities_softmax_loss` (blocked
    over the queries, gradients computed with the loss; ``gradient_precision``: its gradient products); the
    others (TransE, the margin loss) score all entities at once and differentiate through autograd.
    """
    heads, tails = rows(z, src), rows(z, dst)
    total = heads.new_zeros(())
    for queries, targets in ((decoder.tail_query(heads, rel), dst), (decoder.head_query(tails, rel), src)):
        if loss == "softmax" and decoder.dot_product:
            total = total + all_entities_softmax_loss(queries, z, targets, gradient_precision)
            continue
        scores = decoder.all_scores(queries, z)
        if loss == "softmax":
            total = total + F.cross_entropy(scores, targets)
        else:
            positive = scores.gather(1, targets.unsqueeze(1))
            hinge = F.relu(margin - positive + scores).scatter(1, targets.unsqueeze(1), 0.0)
            total = total + hinge.sum(dim=1).mean() / max(1, scores.shape[1] - 1)
    return total / 2


def embedding_penalty(decoder: Decoder, z: torch.Tensor, src: torch.Tensor, rel: torch.Tensor, dst: torch.Tensor,
                      kind: str = "l2") -> torch.Tensor:
    """The regularization term of a batch (``training.regularizer``).

    ``l2``: mean over the positives of ``||h||^2 + ||t||^2``; ``n3`` (Lacroix et al., 2018): mean of
    ``sum |h|^3 + |r|^3 + |t|^3`` (elementwise on the stored coordinates, ComplEx's halves included; ``r`` for
    decoders with relation embeddings).
    """
    heads, tails = rows(z, src), rows(z, dst)
    if kind == "l2":
        return (heads.pow(2).sum(-1) + tails.pow(2).sum(-1)).mean()
    if kind != "n3":
        raise ConfigError(f"training.regularizer: unknown regularizer {kind!r} (known: l2, n3)")
    penalty = heads.abs().pow(3).sum(-1) + tails.abs().pow(3).sum(-1)
    if hasattr(decoder, "relations"):
        penalty = penalty + rows(decoder.relations, rel).abs().pow(3).sum(-1)  # the stored rows, not dropped out
    return penalty.mean()


VALID_SAMPLE_SEED = 0
"""Seed of :func:`validation_sample`: one sample for every run, seed and system, so their curves compare."""


def validation_sample(edges: torch.Tensor, size: int | None, seed: int = VALID_SAMPLE_SEED) -> torch.Tensor:
    """``size`` rows of ``edges`` drawn without replacement by a generator seeded with ``seed``, in their original
    order (all of them when ``size`` is None or at least their count): ``evaluation.valid_sample``'s triples,
    which the peers' exported embeddings are ranked on too, and ``evaluation.test_sample``'s."""
    if size is None or size >= len(edges):
        return edges
    chosen = torch.randperm(len(edges), generator=torch.Generator().manual_seed(seed))[:size]
    return edges[chosen.sort().values]


def known_triples(store) -> TripleFilter:
    """The filter of every known true triple of ``store`` (its train, valid and test edges)."""
    splits = [store.edges(split) for split in ("train", "valid", "test")]
    known = torch.cat([edges.to(torch.int64) for edges in splits if edges is not None])
    return TripleFilter(known, store.num_nodes, store.num_relations)


def _queries(decoder: Decoder, part: torch.Tensor, z: torch.Tensor, known: TripleFilter):
    """Per side (tails, then heads) of the triples ``part``: ``(queries, targets, known, is_known, own)``: the
    decoder's queries, the true entities' ids, a function giving the ``(row, entity)`` pairs of all known
    true answers, one telling which of ``(B, K)`` candidates are known true answers, and the query entities
    (the heads of tail queries, the tails of head queries)."""
    heads, rels, tails = (column.to(z.device) for column in part.unbind(1))
    src, rel, dst = part.unbind(1)
    yield (decoder.tail_query(z[heads], rels), tails, lambda: known.true_tails(src, rel),
           lambda candidates: known.is_true_tail(src, rel, candidates), heads)
    yield (decoder.head_query(z[tails], rels), heads, lambda: known.true_heads(dst, rel),
           lambda candidates: known.is_true_head(dst, rel, candidates), tails)


def _rank_all(decoder: Decoder, edges: torch.Tensor, z: torch.Tensor, known: TripleFilter,
              batch_size: int) -> dict[str, float]:
    rows = max(1, min(batch_size, _EVAL_SCORE_ELEMENTS // max(len(z), 1)))
    ranks: dict[str, list[torch.Tensor]] = {"filtered": [], "unfiltered": []}
    self_top = 0
    for part in edges.split(rows):
        for queries, targets, true_candidates, _, own in _queries(decoder, part, z, known):
            scores = decoder.all_scores(queries, z)
            self_top += int((scores.argmax(dim=1) == own).sum())
            unfiltered = target_ranks(scores, targets)
            ranks["unfiltered"].append(unfiltered.cpu())
            rows_known, columns = (t.to(z.device) for t in true_candidates())
            ranks["filtered"].append(filtered_target_ranks(scores, targets, rows_known, columns, unfiltered).cpu())
            del scores  # before the next side's scores exist: one score matrix at a time (measured: the peak
            # above the table was 4.7-8.8 matrices of scores without this, 3.2-3.8 with it)
    metrics: dict[str, float] = {}
    for kind, values in ranks.items():
        metrics.update(ranking_metrics(torch.cat(values), RANK_KS, prefix=f"{kind}_"))
    metrics["self_rank_fraction"] = self_top / (2 * len(edges))
    return metrics


def _rank_sampled(decoder: Decoder, edges: torch.Tensor, z: torch.Tensor, known: TripleFilter, batch_size: int,
                  negatives: int, seed: int) -> dict[str, float]:
    generator = torch.Generator().manual_seed(seed)
    rows = max(1, min(batch_size, _EVAL_SCORE_ELEMENTS // (negatives * z.shape[1])))
    sums: dict[str, float] = {}
    count = self_top = 0
    for part in edges.split(rows):
        for queries, targets, _, is_true, own in _queries(decoder, part, z, known):
            candidates = torch.randint(len(z), (len(part), negatives), generator=generator)
            negative = decoder.batched_scores(queries, z[candidates.to(z.device)])
            positive = decoder.pair_scores(queries, z[targets])
            self_score = decoder.pair_scores(queries, z[own])
            self_top += int((self_score >= torch.maximum(negative.amax(dim=1), positive)).sum())
            filtered = negative.masked_fill(is_true(candidates).to(z.device), float("-inf"))
            for kind, scores in (("unfiltered", negative), ("filtered", filtered)):
                for key, value in ogb_ranking_metrics(positive, scores, prefix=f"{kind}_").items():
                    sums[key] = sums.get(key, 0.0) + value * len(part)
            count += len(part)
            del negative, filtered, scores  # one batch of candidate scores at a time
    return {**{key: value / count for key, value in sums.items()}, "self_rank_fraction": self_top / count}


@torch.no_grad()
def rank_triples(decoder: Decoder, z: torch.Tensor, edges: torch.Tensor, known: TripleFilter | None, *,
                 batch_size: int = 1000, negatives: int | None = None, seed: int = 0,
                 filtered: bool = True) -> dict[str, float]:
    """The suite's ranking evaluation of embeddings: MRR and Hits@1/3/10 of the triples ``edges``, heads and
    tails, filtered and unfiltered.

    Every true tail of ``(h, r, ?)`` and true head of ``(?, r, t)`` is ranked among all entities (``negatives``
    None) or among that many uniformly sampled ones per query (drawn from a generator seeded with ``seed``; OGB's
    link Evaluator), ties at their mean rank (:func:`suite.metrics.target_ranks`). The task's evaluation and the
    peers' (``experiments/figures/link_prediction_peers.py``: PyTorch-BigGraph's and PyKEEN's exported embeddings) go
    through this one function, so their numbers compare.

    Args:
        decoder: the triple scorer (its ``tail_query`` / ``head_query``).
        z: ``(num_entities, d)`` entity representations (on the device the scores are computed on).
        edges: ``(k, 3)`` ``(src, rel, dst)`` triples to rank.
        known: every known true triple (:func:`known_triples`), removed from the candidates of the filtered
            metrics; may be None only when ``edges`` is empty.
        batch_size: triples scored at once (also bounded by 128 MiB of scores).
        negatives: None (rank among all entities) or candidates sampled per query.
        seed: seed of the sampled candidates.
        filtered: which kind the unprefixed ``mrr`` / ``hits@k`` repeat.

    Returns:
        ``filtered_*``, ``unfiltered_*`` and the unprefixed copies of the main kind (NaN without triples), and
        ``self_rank_fraction``: the fraction of queries (both sides) whose top-scored candidate is the query
        entity itself (with sampled candidates: whose own score is at least every sampled one's and the true
        answer's).
    """
    main = "filtered" if filtered else "unfiltered"
    if edges is None or len(edges) == 0:
        nan = {**ranking_metrics(torch.empty(0), prefix="filtered_"),
               **ranking_metrics(torch.empty(0), prefix="unfiltered_")}
        return {**ranking_metrics(torch.empty(0)), **nan, "self_rank_fraction": float("nan")}
    edges = edges.to(torch.int64)
    if negatives is None:
        metrics = _rank_all(decoder, edges, z, known, batch_size)
    else:
        metrics = _rank_sampled(decoder, edges, z, known, batch_size, negatives, seed)
    metrics.update({key.removeprefix(f"{main}_"): value for key, value in list(metrics.items())
                    if key.startswith(f"{main}_")})
    return metrics


class LinkPredictionModel(nn.Module):
    """An encoder (node representations from input rows and a sample) and a decoder (triple scores); in training,
    dropout of rate ``embedding_dropout`` on the representations (every row the decoder scores: positives and
    negatives)."""

    def __init__(self, encoder: nn.Module, decoder: Decoder, embedding_dropout: float = 0.0):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.embedding_dropout = nn.Dropout(embedding_dropout)

    def forward(self, x: torch.Tensor, sample: SampledSubgraph) -> torch.Tensor:
        """Representations ``(len(sample.roots), d)`` of the sample's roots."""
        return self.embedding_dropout(self.encoder(x, sample))


@dataclass(frozen=True)
class EdgeView:
    """What the task trains on in one state of a system that holds only part of the graph (a disk buffer state),
    in rows of the bound embedding table.

    Attributes:
        edges: ``(m, 3)`` training edges ``(src row, rel, dst row)``; batch roots are positions into it.
        nodes: the rows negatives are drawn from (uniformly; and by degree from ``edges``).
        graph: the CSR over those rows that the encoder's sampler draws from (None: an encoder without neighbours).
        relation_lookup: the relation types of ``graph``'s edges, for an encoder that reads them (else None).
    """

    edges: torch.Tensor
    nodes: torch.Tensor
    graph: SamplingGraph | None = None
    relation_lookup: RelationLookup | None = None


class LinkPredictionTask(Task):
    """Link prediction over the whole graph in CPU memory, with learnable embeddings or features.

    Needs a store with a ``train_edges`` split (``valid_edges`` / ``test_edges`` for evaluation) and, without
    ``model.learnable_embeddings``, node features. ``has_update`` is true with learnable embeddings.
    Attributes set by :meth:`setup`: ``train_edges``, ``embeddings`` (or None), ``features`` (or None),
    ``model``, ``optimizer`` (None when the model has no dense parameter), ``negative_sampler``,
    ``train_sampler`` / ``eval_sampler`` (None for encoders without neighbours).
    """

    has_update = True
    concurrent_compute = True

    def __init__(self, spec, store, device):
        super().__init__(spec, store, device)
        self._step_lock = threading.Lock()
        self._dense_parameters: list[torch.nn.Parameter] = []
        self.has_update = spec.model.learnable_embeddings
        self.train_edges: torch.Tensor | None = None
        self.embeddings: EmbeddingTable | None = None
        self.features: torch.Tensor | None = None
        self.model: LinkPredictionModel | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.negative_sampler: NegativeSampler | None = None
        self.graph: SamplingGraph | None = None
        self.train_sampler: Sampler | None = None
        self.eval_sampler: Sampler | None = None
        self._filter: TripleFilter | None = None
        self.query_answers: QueryAnswers | None = None
        self.subset_negatives = False  # set by setup (training.negatives.subset_fraction); never by bind_state
        self._subset_sampler: tuple[tuple[int, int], NegativeSampler] | None = None  # the last block's, reused

    # ------------------------------------------------------------------ setup
    @classmethod
    def check_inputs(cls, spec, store) -> None:
        """A decoder; the store's edge splits (train required); features unless the embeddings are learned."""
        if spec.model.decoder is None:
            raise ConfigError(f"model.decoder: link prediction needs a decoder (known: {', '.join(DECODERS.names())})")
        if spec.dataset.feature_normalization != "none":
            raise ConfigError(f"dataset.feature_normalization: applied by node classification only; link prediction "
                              f"reads the features as stored (got {spec.dataset.feature_normalization!r})")
        training = spec.training
        if training.score_precision != "float32" and (
                training.loss != "softmax" or training.negatives.mode != "chunked"
                or not DECODERS.get(spec.model.decoder).dot_product):
            raise ConfigError(f"training.score_precision: {training.score_precision} applies to the softmax loss of "
                              f"sampled (chunked) negatives with a dot-product decoder (got loss "
                              f"{training.loss!r}, negatives.mode {training.negatives.mode!r}, decoder "
                              f"{spec.model.decoder!r})")
        check_edge_split(store, "train", required=True)
        for split in ("valid", "test"):
            check_edge_split(store, split, required=False)
        if not spec.model.learnable_embeddings and not store.has("features"):
            raise DataError(f"{store.path}: store has no 'features'; set model.learnable_embeddings: true to "
                            f"learn node embeddings instead")

    def setup(self) -> None:
        """Check and load the edge splits; build embeddings or load features, model, optimizer and samplers."""
        spec, store = self.spec, self.store
        if spec.model.decoder is None:
            raise ConfigError(f"model.decoder: link prediction needs a decoder (known: {', '.join(DECODERS.names())})")
        self.train_edges = check_edge_split(store, "train", required=True)
        for split in ("valid", "test"):
            check_edge_split(store, split, required=False)
        self.optimizer_steps = 0
        dim = spec.model.embedding_dim
        if spec.model.learnable_embeddings:
            generator = torch.Generator().manual_seed(spec.seed + _EMBEDDING_SEED_OFFSET)
            shared = spec.system.options.get("loader_workers") == "process"
            self.embeddings = EmbeddingTable(store.num_nodes, dim, spec.model.embedding_init_scale,
                                             spec.training.embedding_learning_rate or spec.training.learning_rate,
                                             generator, shared=shared)
            in_dim = dim
        else:
            if not store.has("features"):
                raise DataError(f"{store.path}: store has no 'features'; set model.learnable_embeddings: true to "
                                f"learn node embeddings instead")
            self.features = store.features.to(torch.float32, copy=True)
            in_dim = self.features.shape[1]
        encoder = self.build_model(in_dim)
        negatives = spec.training.negatives
        if negatives.mode == "kvsall":
            if spec.training.loss != "softmax":
                raise ConfigError(f"training.loss: {spec.training.loss!r} does not apply to "
                                  "training.negatives: kvsall (its loss is binary cross-entropy; leave the default)")
            self.query_answers = build_query_answers(self.train_edges, store.num_relations)
        self.negative_sampler = None if negatives.mode != "chunked" else NegativeSampler(
            store.num_nodes, self.train_edges[:, 0], self.train_edges[:, 2], negatives.num_chunks,
            negatives.negatives_per_positive, negatives.degree_fraction)
        if negatives.subset_fraction is not None and negatives.mode != "chunked":
            raise ConfigError(f"training.negatives.subset_fraction: restricts sampled negatives; mode "
                              f"{negatives.mode!r} samples none (use mode: chunked or leave it null)")
        self.subset_negatives = negatives.subset_fraction is not None
        if getattr(encoder, "uses_neighbours", True):
            attach_relations(encoder, store, spec.sampler.direction)
            self.graph = SamplingGraph.from_store(store, spec.sampler.direction)
            attach_degrees(encoder, self.graph)
            sampler_cls = SAMPLERS.get(spec.sampler.name)
            self.train_sampler = sampler_cls(self.graph, spec.model.fanouts, replace=spec.sampler.replace)
            self.eval_sampler = sampler_cls(self.graph, spec.evaluation.fanouts or spec.model.fanouts,
                                            replace=spec.sampler.replace)

    def build_model(self, in_dim: int) -> nn.Module:
        """Build the encoder and decoder (after ``torch.manual_seed(spec.seed)``) and the optimizer of their dense
        parameters; return the encoder. Used by :meth:`setup` and by systems that hold the embeddings
        elsewhere (the disk system)."""
        spec = self.spec
        dim = spec.model.embedding_dim
        torch.manual_seed(spec.seed)
        encoder = build_encoder(spec.model, in_dim, dim, self.store)
        if not getattr(encoder, "uses_neighbours", True) and not spec.model.learnable_embeddings:
            raise ConfigError(f"model.learnable_embeddings: encoder {spec.model.encoder!r} reads only the nodes' "
                              f"own rows; without learnable embeddings it has nothing to learn")
        decoder = build_decoder(spec.model.decoder, self.store.num_relations, dim, spec.model.inverse_relations,
                                spec.model.relation_dropout)
        self.model = LinkPredictionModel(encoder, decoder, spec.model.embedding_dropout)
        self.model.to(self.device)
        parameters = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(spec.training.optimizer, parameters, spec.training.learning_rate,
                                        spec.training.weight_decay) if parameters else None
        self._dense_parameters = parameters
        return encoder

    # ------------------------------------------------------------------ binding (systems that hold the data)
    def bind_embeddings(self, table: EmbeddingTable | None) -> EmbeddingTable | None:
        """Gather from, and update, ``table`` from now on (node ids in batches and views are its rows); return
        the table bound before."""
        previous, self.embeddings = self.embeddings, table
        return previous

    def bind_state(self, view: EdgeView) -> None:
        """Train on ``view`` from now on: batch roots are positions into ``view.edges``; negatives come from
        ``view.nodes`` (``training.negatives``, chunked); the encoder samples ``view.graph`` (``model.fanouts``)
        and its relation modules get ``view.relation_lookup``. Consumes no randomness."""
        spec, negatives = self.spec, self.spec.training.negatives
        self.train_edges = view.edges
        self.negative_sampler = NegativeSampler(len(view.nodes), view.edges[:, 0], view.edges[:, 2],
                                                negatives.num_chunks, negatives.negatives_per_positive,
                                                negatives.degree_fraction, nodes=view.nodes)
        attach_lookup(self.model, view.relation_lookup)
        attach_degrees(self.model, view.graph)
        self.train_sampler = (SAMPLERS.get(spec.sampler.name)(view.graph, spec.model.fanouts,
                                                              replace=spec.sampler.replace)
                              if view.graph is not None else None)

    def release_state(self) -> None:
        """Forget the bound state's edges, negatives and sampler (the model and the embedding table stay)."""
        self.train_edges = self.negative_sampler = self.train_sampler = None

    def bind_evaluation_graph(self, graph: SamplingGraph | None) -> None:
        """Evaluate over ``graph`` (the whole graph, in the store's node ids): the encoder gets the store's
        relation types and the evaluation sampler draws from ``graph`` (``evaluation.fanouts``, default the
        model's); None drops the evaluation sampler."""
        spec = self.spec
        if graph is None:
            self.eval_sampler = None
            return
        attach_relations(self.model.encoder, self.store, spec.sampler.direction)
        attach_degrees(self.model.encoder, graph)
        self.eval_sampler = SAMPLERS.get(spec.sampler.name)(graph, spec.evaluation.fanouts or spec.model.fanouts,
                                                            replace=spec.sampler.replace)

    # ------------------------------------------------------------------ stages
    def plan_epoch(self, epoch: int) -> list[Batch]:
        """Shuffled training edge positions (KvsAll: query positions) in batches of ``training.batch_size`` (the
        first ``training.limit_batches`` when set)."""
        examples = torch.arange(len(self.query_answers or self.train_edges))
        batches = plan_epoch(examples, self.spec.training.batch_size, epoch, self.spec.seed)
        return batches[: self.spec.training.limit_batches]

    def sample(self, batch: Batch) -> None:
        """Negatives, then the encoder's sample around the unique nodes of positives and negatives."""
        generator = batch_generator(self.spec.seed, batch.epoch, batch.index)
        if self.query_answers is not None:
            self._sample_queries(batch, generator)
            return
        edges = self.train_edges[batch.roots]
        if self.spec.training.negatives.mode == "all":
            self._sample_all_entities(batch, edges, generator)
            return
        sampler = self._subset_negative_sampler(batch) if self.subset_negatives else self.negative_sampler
        negatives = sampler.sample(len(edges), generator)
        ids = torch.cat([edges[:, 0], edges[:, 2], negatives.tails.reshape(-1), negatives.heads.reshape(-1)])
        nodes, local = torch.unique(ids, return_inverse=True)
        count, chunks = len(edges), negatives.tails.shape
        src, dst, tail_neg, head_neg = local.split([count, count, chunks.numel(), chunks.numel()])
        if self.train_sampler is not None:
            batch.sample = self.train_sampler.sample(nodes, generator)
        else:
            batch.sample = SampledSubgraph(roots=nodes, blocks=(), num_sampled_edges=0)
        batch.extra.update(src=src, rel=edges[:, 1].clone(), dst=dst, tail_neg=tail_neg.view(chunks),
                           head_neg=head_neg.view(chunks), chunk_size=negatives.chunk_size)

    def _subset_negative_sampler(self, batch: Batch) -> NegativeSampler:
        """The negative sampler restricted to the subset of ``batch``'s block, built once per block (the subset
        and its edges cost O(nodes + edges), the same for every batch of the block)."""
        key = (batch.epoch, batch.index // self.spec.training.negatives.subset_batches)
        cached = self._subset_sampler  # one read: loader threads may replace it meanwhile (then rebuilt, equal)
        if cached is not None and cached[0] == key:
            return cached[1]
        sampler = self.negative_sampler.within(self.negative_subset(batch.epoch, batch.index))
        self._subset_sampler = (key, sampler)
        return sampler

    def negative_subset(self, epoch: int, index: int) -> torch.Tensor:
        """The node subset batch ``index`` of ``epoch`` draws its negatives from
        (``training.negatives.subset_fraction``): one per block of ``subset_batches`` consecutive batches, from a
        generator seeded from ``(seed, epoch, block)``, so that it does not depend on which batches ran before."""
        negatives = self.spec.training.negatives
        block = index // negatives.subset_batches
        generator = batch_generator(self.spec.seed + _SUBSET_SEED_OFFSET, epoch, block)
        return node_subset(self.store.num_nodes, negatives.subset_fraction, generator)

    def _sample_all_entities(self, batch: Batch, edges: torch.Tensor, generator: torch.Generator) -> None:
        """1vsAll: every entity is a root (its row is its id); no sampled negatives."""
        nodes = torch.arange(self.store.num_nodes)
        if self.train_sampler is not None:
            batch.sample = self.train_sampler.sample(nodes, generator)
        else:
            batch.sample = SampledSubgraph(roots=nodes, blocks=(), num_sampled_edges=0)
        empty = torch.empty(0, 0, dtype=torch.int64)
        batch.extra.update(src=edges[:, 0].clone(), rel=edges[:, 1].clone(), dst=edges[:, 2].clone(),
                           tail_neg=empty, head_neg=empty, chunk_size=0)

    def _sample_queries(self, batch: Batch, generator: torch.Generator) -> None:
        """KvsAll: every entity is a root; the batch's queries and their true answers as ``(row, entity)``."""
        queries = self.query_answers.queries[batch.roots]
        self._sample_all_entities(batch, torch.empty(0, 3, dtype=torch.int64), generator)
        answer_rows, answer_entities = self.query_answers.answer_pairs(batch.roots)
        entity, rel, side = queries.unbind(1)
        batch.extra.update(src=entity.clone(), rel=rel.clone(), dst=entity.clone(), side=side.clone(),
                           answer_rows=answer_rows, answer_entities=answer_entities)

    def shard_sampled(self, batch: Batch, rank: int, world_size: int) -> None:
        """Cut a sampled global batch to rank ``rank``'s share, in place (data-parallel training,
        :mod:`systems.distributed`): whole chunks of positives with the negatives the global batch drew for them,
        so that the ranks' losses are exactly the global batch's terms; the share's nodes are re-indexed and, for
        encoders with neighbours, sampled again for the share alone. ``extra["global_examples"]`` is the global
        batch's size (the share's gradient weight); an empty share keeps no sample."""
        extra = batch.extra
        if self.spec.training.negatives.mode != "chunked":
            self._shard_all_entities(batch, rank, world_size)
            return
        chunk_size, chunks = extra["chunk_size"], len(extra["tail_neg"])
        mine = torch.arange(chunks).tensor_split(world_size)[rank]
        first, last = (int(mine[0]), int(mine[-1]) + 1) if len(mine) else (chunks, chunks)
        low, high = min(first * chunk_size, batch.num_examples), min(last * chunk_size, batch.num_examples)
        extra["global_examples"] = batch.num_examples
        batch.roots = batch.roots[low:high]
        if high == low:
            batch.sample = None
            for key in _DEVICE_KEYS:
                extra.pop(key, None)
            return
        parts = [extra["src"][low:high], extra["dst"][low:high], extra["tail_neg"][first:last],
                 extra["head_neg"][first:last]]
        used, local = torch.unique(torch.cat([part.reshape(-1) for part in parts]), return_inverse=True)
        nodes = batch.sample.roots[used]
        src, dst, tail_neg, head_neg = (piece.view(part.shape) for piece, part in
                                        zip(local.split([part.numel() for part in parts]), parts))
        if self.train_sampler is not None:
            generator = batch_generator(self.spec.seed, batch.epoch, batch.index)
            batch.sample = self.train_sampler.sample(nodes, generator)
        else:
            batch.sample = SampledSubgraph(roots=nodes, blocks=(), num_sampled_edges=0)
        extra.update(src=src, rel=extra["rel"][low:high], dst=dst, tail_neg=tail_neg, head_neg=head_neg)

    def _shard_all_entities(self, batch: Batch, rank: int, world_size: int) -> None:
        """1vsAll / KvsAll: every entity is a candidate of every example, so each rank keeps the whole sample (all
        entities) and a contiguous share of the examples (KvsAll: of the queries, with their true answers); the
        ranks' mean losses weighted by their shares are the global batch's mean loss."""
        extra, count = batch.extra, batch.num_examples
        mine = torch.arange(count).tensor_split(world_size)[rank]
        low, high = (int(mine[0]), int(mine[-1]) + 1) if len(mine) else (count, count)
        extra["global_examples"] = count
        batch.roots = batch.roots[low:high]
        if high == low:
            batch.sample = None
            for key in _DEVICE_KEYS + _KVSALL_KEYS:
                extra.pop(key, None)
            return
        for key in ("src", "rel", "dst", "side"):
            if key in extra:
                extra[key] = extra[key][low:high]
        if "answer_rows" in extra:
            keep = (extra["answer_rows"] >= low) & (extra["answer_rows"] < high)
            extra["answer_rows"] = extra["answer_rows"][keep] - low
            extra["answer_entities"] = extra["answer_entities"][keep]

    def gather(self, batch: Batch, pin: bool | None = None) -> None:
        """Rows of the sample's input nodes: a copy of the embedding rows as they are now, or the features."""
        pin = pin if pin is not None else self.device.type == "cuda"
        nodes = batch.sample.input_nodes
        if self.embeddings is not None:
            batch.extra["embedding_version"] = self.embeddings.version  # read before the rows: a lower bound
            batch.extra["input_nodes"] = nodes
            batch.x = self.embeddings.gather(nodes, pin=pin)
        elif pin:
            batch.x = torch.empty((len(nodes), self.features.shape[1]), pin_memory=True)
            torch.index_select(self.features, 0, nodes, out=batch.x)
        else:
            batch.x = self.features.index_select(0, nodes)

    def transfer(self, batch: Batch, stream: "torch.cuda.Stream | None" = None) -> None:
        """Move ``x``, the sample and the positives' and negatives' local ids to the device."""
        if self.device.type == "cuda" and stream is not None:
            with torch.cuda.stream(stream):  # queued before the base class records ``batch.ready`` on this stream
                for key in _batch_keys(batch):
                    batch.extra[key] = batch.extra[key].to(self.device, non_blocking=True)
        else:
            for key in _batch_keys(batch):
                batch.extra[key] = batch.extra[key].to(self.device)
        super().transfer(batch, stream)

    def compute(self, batch: Batch) -> None:
        """Encoder, decoder, loss, backward, one optimizer step; keeps the embedding rows' gradient for
        ``update``."""
        if batch.ready is not None:
            torch.cuda.current_stream(self.device).wait_event(batch.ready)
        training, extra = self.spec.training, batch.extra
        x = batch.x
        if self.embeddings is not None:
            x.requires_grad_(True)
        z = self.model(x, batch.sample)
        all_entities = extra["chunk_size"] == 0
        if "side" in extra:  # KvsAll (the penalty below then weighs the queries' entities)
            loss = kvsall_loss(self.model.decoder, z, extra["src"], extra["rel"], extra["side"], extra["answer_rows"],
                               extra["answer_entities"], training.negatives.label_smoothing)
        else:
            loss = link_prediction_loss(self.model.decoder, z, extra["src"], extra["rel"], extra["dst"],
                                        None if all_entities else extra["tail_neg"],
                                        None if all_entities else extra["head_neg"], extra["chunk_size"],
                                        training.loss, training.margin, training.gradient_precision,
                                        training.score_precision)
        if training.regularization > 0:
            loss = loss + training.regularization * embedding_penalty(self.model.decoder, z, extra["src"],
                                                                      extra["rel"], extra["dst"],
                                                                      training.regularizer)
        if self.compute_workers > 1:
            x_grad = self._step_concurrently(batch, loss, x)
        else:  # backward(): data-parallel wrappers (DDP) all-reduce the dense gradients in its hooks
            if self.optimizer is not None:
                self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            batch.version_applied = self.optimizer_steps
            if self.optimizer is not None:
                self.optimizer.step()
            self.optimizer_steps += 1
            x_grad = x.grad if self.embeddings is not None else None
        batch.loss = check_loss(float(loss.detach()), batch)  # a non-finite loss stops the run (status diverged)
        if self.embeddings is not None:
            extra["grad"] = x_grad.detach() if x_grad is not None else torch.zeros_like(x)
            extra["embedding_staleness"] = batch.version_applied - extra["embedding_version"]
        for key in _DEVICE_KEYS + _KVSALL_KEYS:
            extra.pop(key, None)
        batch.x = batch.y = batch.ready = None

    def _step_concurrently(self, batch: Batch, loss: torch.Tensor, x: torch.Tensor) -> torch.Tensor | None:
        """Backward and step for one of several compute workers: gradients returned rather than accumulated into
        ``.grad``, so that workers never mix theirs; the dense step is taken under a lock. Returns the input rows'
        gradient (None without learnable embeddings)."""
        parameters = self._dense_parameters
        inputs = ([x] if self.embeddings is not None else []) + parameters
        grads = list(torch.autograd.grad(loss, inputs, allow_unused=True)) if inputs else []
        x_grad = grads.pop(0) if self.embeddings is not None else None
        with self._step_lock:
            batch.version_applied = self.optimizer_steps
            if self.optimizer is not None:
                for parameter, grad in zip(parameters, grads):
                    parameter.grad = grad
                self.optimizer.step()
                for parameter in parameters:
                    parameter.grad = None
            self.optimizer_steps += 1
        return x_grad

    def update(self, batch: Batch) -> None:
        """Sparse Adagrad on the batch's embedding rows, written back to the table."""
        if self.embeddings is None:
            return
        grad = batch.extra.pop("grad")
        # a sample's input nodes are distinct (every sampler's contract; the roots come from torch.unique), unless
        # the rows were gathered from several ranks (data-parallel training: ``input_nodes_unique`` False)
        self.embeddings.adagrad_update(batch.extra.pop("input_nodes"), grad.cpu(),
                                       unique=batch.extra.pop("input_nodes_unique", True))

    def train(self) -> None:
        """Training mode (dropout on)."""
        self.model.train()

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def representations(self) -> torch.Tensor:
        """``(num_nodes, d)`` representations of all nodes (eval mode) on the device."""
        return torch.cat(list(self.representation_batches()))

    @torch.no_grad()
    def representation_batches(self):
        """The representations of all nodes (eval mode, on the device) in node order, one batch of
        ``evaluation.batch_size`` nodes at a time (an encoder without neighbours: one batch); evaluation
        sampling draws from its own generator, re-seeded at every call."""
        self.model.eval()
        table = self.embeddings.weight if self.embeddings is not None else self.features
        if self.eval_sampler is None:
            yield self.model.encoder(table.to(self.device), SampledSubgraph(
                roots=torch.arange(len(table), device=self.device), blocks=(), num_sampled_edges=0))
            return
        generator = torch.Generator().manual_seed(self.spec.seed + _EVAL_SEED_OFFSET)
        for roots in torch.arange(self.store.num_nodes).split(self.spec.evaluation.batch_size):
            sample = self.eval_sampler.sample(roots, generator)
            x = table.index_select(0, sample.input_nodes).to(self.device)
            yield self.model.encoder(x, sample.to(self.device))

    def triple_filter(self) -> TripleFilter:
        """The known true triples of train+valid+test (the filter of filtered ranks), built once."""
        if self._filter is None:
            self._filter = known_triples(self.store)
        return self._filter

    @torch.no_grad()
    def evaluate(self, split: str) -> dict[str, float]:
        """Filtered and unfiltered MRR and Hits@1/3/10 of the split's edges, heads and tails (NaN without the
        split)."""
        edges = self.store.edges(split)
        evaluation = self.spec.evaluation
        if edges is not None:
            edges = validation_sample(edges, {"valid": evaluation.valid_sample,
                                              "test": evaluation.test_sample}.get(split))
        if edges is None or len(edges) == 0:
            return rank_triples(self.model.decoder, torch.empty(0, self.spec.model.embedding_dim),
                                torch.empty(0, 3, dtype=torch.int64), None, filtered=evaluation.filtered)
        return rank_triples(self.model.decoder, self.representations(), edges, self.triple_filter(),
                            batch_size=evaluation.batch_size, negatives=evaluation.negatives,
                            seed=self.spec.seed + _EVAL_SEED_OFFSET + 1, filtered=evaluation.filtered)

    def teardown(self) -> None:
        """Drop the graph, features, edges and filter (the trained model and embeddings stay)."""
        self.release_state()
        self.graph = self.features = None
        self.eval_sampler = self._filter = None


__all__ = ["EdgeView", "LinkPredictionModel", "LinkPredictionTask", "check_edge_split", "known_triples", "link_prediction_loss",
           "rank_triples", "validation_sample", "VALID_SAMPLE_SEED"]
