"""The fused softmax loss of chunked negatives equals torch's composition, value and gradients."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from systems.tasks.negatives import chunked_scores
from systems.tasks.scoring import chunked_softmax_loss


def reference(queries, negatives, positive, chunk_size):
    logits = torch.cat([positive.unsqueeze(1), chunked_scores(queries, negatives, chunk_size)], dim=1)
    return F.cross_entropy(logits, torch.zeros(len(queries), dtype=torch.int64))


@pytest.mark.parametrize(("count", "chunks", "chunk_size"), [(12, 3, 4), (10, 4, 3), (1, 1, 1), (7, 1, 7)])
def test_value_and_gradients_match_torch(count, chunks, chunk_size):
    generator = torch.Generator().manual_seed(count)
    inputs = [torch.randn(count, 5, generator=generator, dtype=torch.float64),
              torch.randn(chunks, 6, 5, generator=generator, dtype=torch.float64) * 3,
              torch.randn(count, generator=generator, dtype=torch.float64) * 3]
    ours = [t.clone().requires_grad_(True) for t in inputs]
    theirs = [t.clone().requires_grad_(True) for t in inputs]
    loss = chunked_softmax_loss(*ours, chunk_size)
    expected = reference(*theirs, chunk_size)
    torch.testing.assert_close(loss, expected)
    (loss * 2.5).backward()
    (expected * 2.5).backward()
    for mine, other in zip(ours, theirs):
        torch.testing.assert_close(mine.grad, other.grad)


def test_gradcheck():
    generator = torch.Generator().manual_seed(0)
    inputs = (torch.randn(5, 3, generator=generator, dtype=torch.float64, requires_grad=True),
              torch.randn(2, 4, 3, generator=generator, dtype=torch.float64, requires_grad=True),
              torch.randn(5, generator=generator, dtype=torch.float64, requires_grad=True))
    assert torch.autograd.gradcheck(lambda q, n, p: chunked_softmax_loss(q, n, p, 3), inputs)


def test_large_scores_stay_finite():
    queries = torch.full((4, 2), 100.0)
    negatives = torch.full((1, 3, 2), 100.0)
    loss = chunked_softmax_loss(queries, negatives, torch.full((4,), -5000.0), 4)
    assert torch.isfinite(loss) and loss.item() == pytest.approx(25000.0 + torch.log(torch.tensor(3.0)).item())


def test_too_few_chunks_rejected():
    with pytest.raises(ValueError, match="cannot hold"):
        chunked_softmax_loss(torch.randn(5, 2), torch.randn(2, 3, 2), torch.randn(5), 2)
