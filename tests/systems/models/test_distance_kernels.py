"""The compiled L1 distances (TransE) equal ``torch.cdist(p=1)``: values and gradients, by hand and at random."""

from __future__ import annotations

import pytest
import torch

from systems.models import distance_kernels
from systems.models.decoders import TransE
from systems.models.distance_kernels import l1_distances


def test_four_by_three_by_hand():
    # 4 queries, 3 candidates, d = 2; one difference is exactly 0 (sign 0, as torch's)
    queries = torch.tensor([[[0.0, 0.0], [1.0, 2.0], [-1.0, 1.0], [3.0, -2.0]]], requires_grad=True)
    candidates = torch.tensor([[[0.0, 1.0], [2.0, 2.0], [-1.0, -1.0]]], requires_grad=True)
    distances = l1_distances(queries, candidates)
    expected = torch.tensor([[[1.0, 4.0, 2.0], [2.0, 1.0, 5.0], [1.0, 4.0, 2.0], [6.0, 5.0, 5.0]]])
    assert torch.equal(distances, expected)
    reference = torch.cdist(queries.detach(), candidates.detach(), p=1.0)
    assert torch.equal(distances, reference)
    distances.sum().backward()
    # d/dq_bj = sum_k sign(q_bj - c_kj); d/dc_kj = -sum_b sign(q_bj - c_kj)
    assert torch.equal(queries.grad, torch.tensor([[[0.0, -1.0], [1.0, 2.0], [-2.0, 0.0], [3.0, -3.0]]]))
    assert torch.equal(candidates.grad, torch.tensor([[[-1.0, 1.0], [2.0, 3.0], [-3.0, -2.0]]]))
    leaves = [queries.detach().clone().requires_grad_(True), candidates.detach().clone().requires_grad_(True)]
    torch.cdist(*leaves, p=1.0).sum().backward()
    assert torch.equal(leaves[0].grad, queries.grad) and torch.equal(leaves[1].grad, candidates.grad)


@pytest.mark.parametrize(("chunks", "count", "num", "dim"), [(1, 4, 3, 2), (3, 5, 7, 4), (2, 3, 2500, 6)])
def test_values_and_gradients_equal_cdist(chunks, count, num, dim):  # the last: several candidate blocks
    generator = torch.Generator().manual_seed(num)
    inputs = [torch.randn(chunks, count, dim, generator=generator), torch.randn(chunks, num, dim, generator=generator)]
    upstream = torch.randn(chunks, count, num, generator=generator)
    ours = [t.clone().requires_grad_(True) for t in inputs]
    theirs = [t.clone().requires_grad_(True) for t in inputs]
    mine, reference = l1_distances(*ours), torch.cdist(*theirs, p=1.0)
    torch.testing.assert_close(mine, reference)
    mine.backward(upstream)
    reference.backward(upstream)
    for leaf, other in zip(ours, theirs):  # sums of up to 2,500 terms in another order: float32 rounding
        torch.testing.assert_close(leaf.grad, other.grad, rtol=1e-5, atol=1e-6 * max(count, num))


def test_other_dtypes_fall_back_to_cdist():
    queries, candidates = torch.randn(1, 3, 2, dtype=torch.float64), torch.randn(1, 4, 2, dtype=torch.float64)
    assert not distance_kernels._compiled(queries, candidates)
    assert torch.equal(l1_distances(queries, candidates), torch.cdist(queries, candidates, p=1.0))


def test_transe_scores_through_the_kernel():
    decoder = TransE(2, 3)
    queries, candidates = torch.randn(5, 3), torch.randn(8, 3)
    torch.testing.assert_close(decoder.all_scores(queries, candidates), -torch.cdist(queries, candidates, p=1.0))
