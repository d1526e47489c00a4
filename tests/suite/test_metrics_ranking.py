"""Ranking metrics of link prediction: mean-rank ties, filtering against known triples, OGB agreement."""

from __future__ import annotations

import math

import pytest
import torch

from suite.metrics import (TripleFilter, filtered_scores, filtered_target_ranks, ogb_ranking_metrics,
                           ranking_metrics, sampled_target_ranks, target_ranks)


def test_target_ranks_ties_at_mean_rank() -> None:
    scores = torch.tensor([[0.5, 0.9, 0.5, 0.1],
                           [1.0, 1.0, 1.0, 1.0],
                           [0.0, 3.0, 2.0, 1.0]])
    targets = torch.tensor([0, 3, 1])
    # row 0: one better (0.9), one tie (col 2) -> 1 + 1 + 0.5; row 1: three ties -> 2.5; row 2: best -> 1
    assert target_ranks(scores, targets).tolist() == [2.5, 2.5, 1.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_target_ranks_compiled_counts_equal_torch_comparisons(dtype) -> None:
    """The compiled pass (float32/64 on the CPU) counts what torch's two comparisons count, ties and filtered
    (-inf) candidates included; bfloat16 takes torch's path."""
    from suite import rank_kernels

    generator = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 6, (40, 300), generator=generator).to(dtype)  # few distinct values: many ties
    scores[torch.rand(40, 300, generator=generator) < 0.1] = float("-inf")
    targets = torch.randint(0, 300, (40,), generator=generator)
    scores[0, targets[0]] = float("-inf")  # a filtered-out target ties every other -inf
    wanted = scores.gather(1, targets.view(-1, 1))
    expected = 1.0 + (scores > wanted).sum(1).double() + 0.5 * ((scores == wanted).sum(1) - 1).double()
    assert rank_kernels.compiled(scores) == (rank_kernels.NUMBA_AVAILABLE and dtype != torch.bfloat16)
    assert torch.equal(target_ranks(scores, targets), expected)
    assert torch.equal(target_ranks(scores.t().contiguous().t(), targets), expected)  # a strided view too


def test_ranking_metrics_by_hand() -> None:
    metrics = ranking_metrics(torch.tensor([2.5, 2.5, 1.0, 12.0]))
    assert math.isclose(metrics["mrr"], (0.4 + 0.4 + 1.0 + 1 / 12) / 4)
    assert metrics["hits@1"] == 0.25 and metrics["hits@3"] == 0.75 and metrics["hits@10"] == 0.75
    empty = ranking_metrics(torch.empty(0), prefix="x_")
    assert set(empty) == {"x_mrr", "x_hits@1", "x_hits@3", "x_hits@10"} and all(map(math.isnan, empty.values()))


def test_filtered_vs_unfiltered() -> None:
    scores = torch.tensor([[0.5, 0.9, 0.5, 0.1],
                           [0.2, 0.8, 0.7, 0.9]])
    targets = torch.tensor([0, 2])
    # known true candidates: (row 0, col 1), (row 0, col 0) = the target itself, (row 1, col 3)
    rows, cols = torch.tensor([0, 0, 1]), torch.tensor([1, 0, 3])
    filtered = filtered_scores(scores, targets, rows, cols)
    assert filtered[0, 0] == 0.5 and filtered[0, 1] == -math.inf and filtered[1, 3] == -math.inf
    assert target_ranks(scores, targets).tolist() == [2.5, 3.0]
    assert target_ranks(filtered, targets).tolist() == [1.5, 2.0]
    assert filtered_target_ranks(scores, targets, rows, cols).tolist() == [1.5, 2.0]
    assert scores[0, 1] == 0.9  # the input is not modified


def test_triple_filter_lookups() -> None:
    # (src, rel, dst)
    triples = torch.tensor([[0, 0, 1], [0, 0, 2], [0, 1, 3], [4, 0, 1], [0, 0, 2]])
    known = TripleFilter(triples, num_nodes=5, num_relations=2)
    rows, tails = known.true_tails(torch.tensor([0, 0, 3]), torch.tensor([0, 1, 0]))
    assert sorted(zip(rows.tolist(), tails.tolist())) == [(0, 1), (0, 2), (1, 3)]  # repeated triples once
    rows, heads = known.true_heads(torch.tensor([1, 3]), torch.tensor([0, 0]))
    assert sorted(zip(rows.tolist(), heads.tolist())) == [(0, 0), (0, 4)]
    candidates = torch.tensor([[1, 3, 2], [0, 4, 3]])
    assert known.is_true_tail(torch.tensor([0, 0]), torch.tensor([0, 1]), candidates).tolist() == [
        [True, False, True], [False, False, True]]
    assert known.is_true_head(torch.tensor([1, 2]), torch.tensor([0, 0]), candidates).tolist() == [
        [False, False, False], [True, False, False]]
    empty = TripleFilter(torch.empty(0, 3, dtype=torch.int64), 5, 2)
    assert not empty.is_true_tail(torch.tensor([0]), torch.tensor([0]), torch.tensor([[1]])).any()
    assert len(empty.true_tails(torch.tensor([0]), torch.tensor([0]))[0]) == 0


@pytest.mark.parametrize("seed", [0, 1])
def test_full_ranking_agrees_with_ogb_evaluator(seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 5, (50, 20), generator=generator).float()  # many ties
    targets = torch.randint(0, 20, (50,), generator=generator)
    ours = ranking_metrics(target_ranks(scores, targets))
    keep = torch.ones_like(scores, dtype=torch.bool)
    keep[torch.arange(50), targets] = False
    positive = scores[torch.arange(50), targets]
    negative = scores[keep].view(50, 19)
    ogb = ogb_ranking_metrics(positive, negative)
    assert ogb.keys() == ours.keys()
    for key in ours:
        assert math.isclose(ours[key], ogb[key], rel_tol=1e-6), key
    sampled = ranking_metrics(sampled_target_ranks(positive, negative))
    for key in ours:
        assert math.isclose(ours[key], sampled[key], rel_tol=1e-9), key


def test_filtered_ranks_without_copy_match_masking() -> None:
    generator = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 4, (30, 12), generator=generator).float()
    targets = torch.randint(0, 12, (30,), generator=generator)
    pairs = torch.unique(torch.randint(0, 30 * 12, (80,), generator=generator))
    rows, cols = pairs // 12, pairs % 12
    expected = target_ranks(filtered_scores(scores, targets, rows, cols), targets)
    torch.testing.assert_close(filtered_target_ranks(scores, targets, rows, cols), expected)


def test_filtered_out_negatives_never_outrank() -> None:
    positive = torch.tensor([0.0])
    negative = torch.tensor([[1.0, -math.inf, 0.0]])
    assert sampled_target_ranks(positive, negative).tolist() == [2.5]
    assert math.isclose(ogb_ranking_metrics(positive, negative)["mrr"], 1 / 2.5, rel_tol=1e-6)  # float32 in OGB


# ---------------------------------------------------------------------------------------------- OGB's evaluators
# The suite computes OGB's metrics itself (importing the evaluators costs seconds a process); they must agree.
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampled_ranking_metrics_equal_ogbs_link_evaluator(seed: int) -> None:
    from suite.data.loaders.ogb import import_ogb

    generator = torch.Generator().manual_seed(seed)
    positive = torch.randint(0, 6, (200,), generator=generator).double() / 3  # ties, and not exact in float32
    negative = torch.randint(0, 6, (200, 37), generator=generator).double() / 3
    negative[torch.rand(negative.shape, generator=generator) < 0.1] = -math.inf  # filtered-out candidates
    lists = import_ogb().linkproppred.Evaluator(name="ogbl-wikikg2").eval(
        {"y_pred_pos": positive.float(), "y_pred_neg": negative.float()})
    expected = {key.removesuffix("_list"): float(value.to(torch.float64).mean()) for key, value in lists.items()}
    assert ogb_ranking_metrics(positive, negative, prefix="v_") == {f"v_{k}": v for k, v in expected.items()}


@pytest.mark.parametrize("classes", [2, 7])
def test_accuracy_equals_ogbs_node_evaluator(classes: int) -> None:
    from suite.data.loaders.ogb import import_ogb
    from suite.metrics import accuracy

    generator = torch.Generator().manual_seed(classes)
    logits = torch.randn(301, classes, generator=generator)
    labels = torch.randint(0, classes, (301,), generator=generator)
    expected = import_ogb().nodeproppred.Evaluator(name="ogbn-arxiv").eval(
        {"y_true": labels.view(-1, 1), "y_pred": logits.argmax(-1).view(-1, 1)})["acc"]
    assert accuracy(logits, labels) == expected  # exactly: the same count over the same total
    assert accuracy(logits.argmax(-1), labels) == expected
    assert math.isnan(accuracy(torch.empty(0, classes), torch.empty(0, dtype=torch.long)))
    assert accuracy(torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1])) == 2 / 3  # by hand
