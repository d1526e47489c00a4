"""Link prediction's training kernels, each before and after its speed-up (issue 32), at FB15k-237's sizes.

Every benchmark times one forward and backward of one batch's kernel on random inputs of the sizes of the
FB15k-237 specs (14,541 entities, d = 100, batches of 1,000 positives; ``experiments/specs/fb15k237_*.yaml``):

- ``AllEntitySoftmax``: the 1vsAll softmax loss of one side of a batch: ``autograd`` (the scores ``Q @ Z^T``, then
  ``F.cross_entropy``: the speed-up's *before*), ``blocked`` (:func:`systems.tasks.scoring.all_entities_softmax_loss`)
  and ``blocked_bf16`` (its gradient products in bfloat16, ``training.gradient_precision: bfloat16``);
- ``SampledDistMultSoftmax``: one batch of DistMult's softmax loss against sampled negatives in the peers
  comparison's setting (1,000 positives sharing 1,000 negatives per side, inverse relations, about 3,000 distinct
  rows; :func:`systems.tasks.scoring.distmult_softmax_loss`): ``float32``, ``bf16_gradients``
  (``training.gradient_precision: bfloat16``) and ``bf16_all`` (also ``training.score_precision: bfloat16``);
- ``TransEDistances``: TransE's L1 distances: ``cdist`` (``torch.cdist(p=1)`` and its backward: before) against
  ``kernel`` (:func:`systems.models.distance_kernels.l1_distances`), for one side's chunked negatives (10 chunks
  of 100 queries x 500 negatives) and for a quarter of one side's all-entity scores (250 queries x all entities);
- ``RGCNLayer``: one R-GCN layer with 8 bases over a sampled block of FB15k-237's shape (10,000 destinations,
  10 typed neighbours each, 474 relation types): ``per_edge_bases`` (every source row times every basis, combined
  per edge: before) against ``relation_matrices`` (:class:`systems.models.rgcn` ``BlockRGCNConv``: the relations'
  matrices formed once, one product per relation type);
- ``FilteredRanking``: the ranks of one block of all-entity evaluation scores (488 queries x all entities, the
  block :func:`systems.tasks.link_prediction.rank_triples` scores at once), unfiltered and filtered:
  ``int64_twice`` (bool counts summed in int64, and the filtered ranks counting every score again: before) against
  ``int32_once`` (two bool matrices counted in int32, the filtered ranks reusing them) against ``compiled_once``
  (:func:`suite.metrics.target_ranks`: one compiled pass per row, :mod:`suite.rank_kernels`).

The sizes are class attributes (``tests/test_benchmarks.py`` runs every benchmark once on tiny ones). The ratio of
the variants is what the benchmarks are for: absolute times move with the machine's load.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from suite.metrics import filtered_target_ranks, target_ranks
from systems.models.distance_kernels import l1_distances
from systems.tasks.scoring import all_entities_softmax_loss, distmult_softmax_loss

NUM_ENTITIES = 14_541
DIM = 100


class AllEntitySoftmax:
    """One side of a 1vsAll batch: loss, then gradients of the queries and of every entity's row."""

    params = [["autograd", "blocked", "blocked_bf16"]]
    param_names = ["variant"]
    timeout = 300.0
    num_queries = 1000
    num_entities = NUM_ENTITIES
    dim = DIM

    def setup(self, variant: str) -> None:
        """Random queries, entity rows and targets; one call first (allocations, compilation)."""
        generator = torch.Generator().manual_seed(0)
        self.queries = torch.randn(self.num_queries, self.dim, generator=generator).requires_grad_(True)
        self.entities = torch.randn(self.num_entities, self.dim, generator=generator).requires_grad_(True)
        self.targets = torch.randint(self.num_entities, (self.num_queries,), generator=generator)
        self.time_loss_and_gradients(variant)

    def time_loss_and_gradients(self, variant: str) -> None:
        """Forward and backward of the loss."""
        if variant == "autograd":
            loss = F.cross_entropy(self.queries @ self.entities.T, self.targets)
        else:
            precision = "bfloat16" if variant == "blocked_bf16" else "float32"
            loss = all_entities_softmax_loss(self.queries, self.entities, self.targets, precision)
        torch.autograd.grad(loss, (self.queries, self.entities))


class SampledDistMultSoftmax:
    """One batch of DistMult's sampled-negative softmax loss, both sides: loss, then the gradients of the batch's
    rows and of the relation diagonals."""

    params = [["float32", "bf16_gradients", "bf16_all"]]
    param_names = ["variant"]
    timeout = 120.0
    num_rows = 3000  # distinct rows of a batch: 1,000 heads and tails and 2 x 1,000 negatives among 14,541
    num_positives = 1000
    num_negatives = 1000
    num_relations = 237
    dim = DIM
    PRECISIONS = {"float32": ("float32", "float32"), "bf16_gradients": ("bfloat16", "float32"),
                  "bf16_all": ("bfloat16", "bfloat16")}  # variant -> (gradient, score) precision

    def setup(self, variant: str) -> None:
        """Random rows, relation diagonals, positives and one chunk of negatives per side; one call first."""
        generator = torch.Generator().manual_seed(0)
        self.z = (torch.randn(self.num_rows, self.dim, generator=generator) * 0.1).requires_grad_(True)
        self.relations = torch.randn(2 * self.num_relations, self.dim, generator=generator).requires_grad_(True)
        self.src = torch.randint(self.num_rows, (self.num_positives,), generator=generator)
        self.dst = torch.randint(self.num_rows, (self.num_positives,), generator=generator)
        self.rel = torch.randint(self.num_relations, (self.num_positives,), generator=generator)
        self.tail_neg = torch.randint(self.num_rows, (1, self.num_negatives), generator=generator)
        self.head_neg = torch.randint(self.num_rows, (1, self.num_negatives), generator=generator)
        self.time_loss_and_gradients(variant)

    def loss(self, variant: str) -> torch.Tensor:
        """The batch's loss in ``variant``'s precisions."""
        gradients, scores = self.PRECISIONS[variant]
        return distmult_softmax_loss(self.z, self.relations, self.src, self.rel, self.rel + self.num_relations,
                                     self.dst, self.tail_neg, self.head_neg, self.num_positives, gradients, scores)

    def time_loss_and_gradients(self, variant: str) -> None:
        """Forward and backward of the loss."""
        self.loss(variant).backward()
        self.z.grad = self.relations.grad = None


class TransEDistances:
    """TransE's L1 distances of queries to candidates, forward and backward."""

    params = [["cdist", "kernel"], ["chunked", "all_entities"]]
    param_names = ["variant", "scoring"]
    timeout = 300.0
    shapes = {"chunked": (10, 100, 500), "all_entities": (1, 250, NUM_ENTITIES)}
    dim = DIM

    def setup(self, variant: str, scoring: str) -> None:
        """Random ``(C, B, d)`` queries, ``(C, K, d)`` candidates and upstream gradient; one call first."""
        chunks, count, num = self.shapes[scoring]
        generator = torch.Generator().manual_seed(0)
        self.queries = torch.randn(chunks, count, self.dim, generator=generator).requires_grad_(True)
        self.candidates = torch.randn(chunks, num, self.dim, generator=generator).requires_grad_(True)
        self.upstream = torch.randn(chunks, count, num, generator=generator)
        self.time_distances_and_gradients(variant, scoring)

    def time_distances_and_gradients(self, variant: str, scoring: str) -> None:
        """Distances, then the gradients of queries and candidates for a random upstream gradient."""
        if variant == "cdist":
            distances = torch.cdist(self.queries, self.candidates, p=1.0)
        else:
            distances = l1_distances(self.queries, self.candidates)
        torch.autograd.grad(distances, (self.queries, self.candidates), self.upstream)


def per_edge_bases(conv, x_src: torch.Tensor, x_dst: torch.Tensor, edge_index: torch.Tensor,
                   edge_type: torch.Tensor) -> torch.Tensor:
    """The R-GCN layer as ``BlockRGCNConv`` computed it before issue 32 (mean aggregation, bases): every source row
    transformed by every basis, the transformed rows gathered per edge and combined with the edge's relation
    coefficients (``edges x bases x out`` floats)."""
    src, dst = edge_index
    bases, in_dim, out_dim = conv.weight.shape
    transformed = (x_src @ conv.weight.permute(1, 0, 2).reshape(in_dim, bases * out_dim)).view(-1, bases, out_dim)
    messages = (conv.comp[edge_type].unsqueeze(-1) * transformed[src]).sum(dim=1)
    _, group, sizes = torch.unique(dst * conv.num_relations + edge_type, return_inverse=True, return_counts=True)
    messages = messages / sizes[group].unsqueeze(1).to(messages.dtype)
    out = x_dst.new_zeros(x_dst.shape[0], out_dim).index_add(0, dst, messages)
    return out + x_dst @ conv.root + conv.bias


class RGCNLayer:
    """One R-GCN layer (8 bases, mean aggregation) over a sampled block: forward and backward."""

    params = [["per_edge_bases", "relation_matrices"]]
    param_names = ["variant"]
    timeout = 300.0
    num_dst = 10_000
    num_src = 60_000
    fanout = 10
    num_relations = 474
    num_bases = 8
    dim = DIM

    def setup(self, variant: str) -> None:
        """The layer and a random typed block; one call first."""
        from systems.models.rgcn import _rgcn_conv_class

        torch.manual_seed(0)
        self.conv = _rgcn_conv_class()(self.dim, self.dim, self.num_relations, num_bases=self.num_bases, aggr="mean")
        generator = torch.Generator().manual_seed(0)
        edges = self.num_dst * self.fanout
        self.x = torch.randn(self.num_src, self.dim, generator=generator).requires_grad_(True)
        self.edge_index = torch.stack([torch.randint(self.num_src, (edges,), generator=generator),
                                       torch.arange(self.num_dst).repeat_interleave(self.fanout)])
        self.edge_type = torch.randint(self.num_relations, (edges,), generator=generator)
        self.time_forward_backward(variant)

    def time_forward_backward(self, variant: str) -> None:
        """The layer's output for the block's destinations (the first ``num_dst`` rows), then its gradients."""
        x_dst = self.x[: self.num_dst]
        if variant == "per_edge_bases":
            out = per_edge_bases(self.conv, self.x, x_dst, self.edge_index, self.edge_type)
        else:
            out = self.conv((self.x, x_dst), self.edge_index, self.edge_type)
        torch.autograd.grad(out.square().sum(), [self.x, *self.conv.parameters()])


def int32_target_ranks(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """:func:`suite.metrics.target_ranks` before its compiled pass: two bool matrices, counted in int32."""
    target_scores = scores.gather(1, targets.view(-1, 1))
    greater = (scores > target_scores).sum(dim=1, dtype=torch.int32)
    ties = (scores == target_scores).sum(dim=1, dtype=torch.int32) - 1
    return 1.0 + greater.to(torch.float64) + 0.5 * ties.to(torch.float64)


def int64_target_ranks(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """:func:`suite.metrics.target_ranks` as it was before its speed-up: bool counts summed in int64."""
    target_scores = scores.gather(1, targets.view(-1, 1))
    greater = (scores > target_scores).sum(dim=1)
    ties = (scores == target_scores).sum(dim=1) - 1
    return 1.0 + greater.to(torch.float64) + 0.5 * ties.to(torch.float64)


class FilteredRanking:
    """Unfiltered and filtered ranks of the targets of one block of all-entity scores (both sides' work of one
    evaluation block is twice this)."""

    params = [["int64_twice", "int32_once", "compiled_once"]]
    param_names = ["variant"]
    timeout = 300.0
    num_queries = 488  # rank_triples' rows: 2**23 scores a block / 14,541 entities
    num_entities = NUM_ENTITIES
    known_per_query = 20

    def setup(self, variant: str) -> None:
        """Random scores, targets and known true candidates (distinct per row); one call first."""
        generator = torch.Generator().manual_seed(0)
        self.scores = torch.randn(self.num_queries, self.num_entities, generator=generator)
        self.targets = torch.randint(self.num_entities, (self.num_queries,), generator=generator)
        known = min(self.known_per_query, self.num_entities)
        self.rows = torch.arange(self.num_queries).repeat_interleave(known)
        self.columns = torch.rand(self.num_queries, self.num_entities, generator=generator).argsort(dim=1)[
            :, :known].reshape(-1)
        self.time_ranks(variant)

    def ranks(self, variant: str) -> tuple[torch.Tensor, torch.Tensor]:
        """``(unfiltered, filtered)`` ranks."""
        if variant == "int64_twice":
            unfiltered = int64_target_ranks(self.scores, self.targets)
            target_scores = self.scores.gather(1, self.targets.view(-1, 1)).squeeze(1)
            known, threshold = self.scores[self.rows, self.columns], target_scores[self.rows]
            other = self.columns != self.targets[self.rows]
            weight = ((known > threshold) & other).to(torch.float64) + \
                0.5 * ((known == threshold) & other).to(torch.float64)
            filtered = int64_target_ranks(self.scores, self.targets) - torch.bincount(
                self.rows, weights=weight, minlength=len(self.targets))
            return unfiltered, filtered
        ranks = int32_target_ranks if variant == "int32_once" else target_ranks
        unfiltered = ranks(self.scores, self.targets)
        return unfiltered, filtered_target_ranks(self.scores, self.targets, self.rows, self.columns, unfiltered)

    def time_ranks(self, variant: str) -> None:
        """Both kinds of ranks."""
        self.ranks(variant)
