"""The fused softmax losses (chunked negatives; all entities, blocked) equal torch's composition, value and
gradients."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from systems.tasks.negatives import chunked_scores
from systems.tasks.scoring import all_entities_softmax_loss, chunked_softmax_loss


def reference(queries, negatives, positive, chunk_size):
    logits = torch.cat([positive.unsqueeze(1), chunked_scores(queries, negatives, chunk_size)], dim=1)
    return F.cross_entropy(logits, torch.zeros(len(queries), dtype=torch.int64))


@pytest.mark.parametrize(("count", "chunks", "chunk_size"), [(12, 3, 4), (10, 4, 3), (1, 1, 1), (7, 1, 7),
                                                       (200, 70, 3)])  # the last: one padded bmm (> 64 chunks)
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


def _chunked_inputs(seed: int) -> list[torch.Tensor]:
    """40 queries in 2 chunks of 20 against 30 negatives each (d = 16), and their positive scores."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(40, 16, generator=generator), torch.randn(2, 30, 16, generator=generator),
            torch.randn(40, generator=generator)]


def _loss_and_gradients(inputs: list[torch.Tensor], **precision: str) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """:func:`chunked_softmax_loss` of ``inputs`` (chunks of 20) in the given precisions, and its gradients."""
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    loss = chunked_softmax_loss(*leaves, 20, **precision)
    loss.backward()
    return loss.detach(), [leaf.grad for leaf in leaves]


def test_bfloat16_gradient_products_stay_close_and_the_loss_exact():
    inputs = _chunked_inputs(5)
    exact, exact_grads = _loss_and_gradients(inputs)
    approximate, approximate_grads = _loss_and_gradients(inputs, gradient_precision="bfloat16")
    assert torch.equal(exact, approximate)  # the forward is float32 either way
    assert torch.equal(exact_grads[2], approximate_grads[2])  # so is the positive scores' gradient
    for mine, other in zip(approximate_grads[:2], exact_grads[:2]):
        assert mine.dtype == torch.float32
        assert (mine - other).norm() / other.norm() < 0.01


def test_bfloat16_scores_are_the_float32_loss_of_rounded_scores():
    """score_precision bfloat16: the loss is that of the scores computed from bfloat16 inputs and rounded to
    bfloat16 (the positive scores untouched), and its gradients stay close to float32's."""
    inputs = _chunked_inputs(6)
    exact, exact_grads = _loss_and_gradients(inputs)
    approximate, approximate_grads = _loss_and_gradients(inputs, score_precision="bfloat16")
    queries, negatives, positive = inputs
    rounded = chunked_scores(queries.bfloat16(), negatives.bfloat16(), 20).float()
    expected = F.cross_entropy(torch.cat([positive.unsqueeze(1), rounded], dim=1), torch.zeros(40, dtype=torch.int64))
    torch.testing.assert_close(approximate, expected)
    assert not torch.equal(approximate, exact) and abs(approximate - exact) < 0.01 * exact
    for mine, other in zip(approximate_grads, exact_grads):
        assert mine.dtype == torch.float32 and (mine - other).norm() / other.norm() < 0.02


def test_fused_distmult_with_bfloat16_scores_equals_the_generic_path():
    from systems.models.decoders import DistMult
    from systems.tasks import link_prediction

    generator = torch.Generator().manual_seed(3)
    decoder = DistMult(5, 16, inverse_relations=True)
    with torch.no_grad():
        decoder.relations.normal_(generator=generator)
    z = torch.randn(40, 16, generator=generator)
    src, dst = torch.randint(40, (12,), generator=generator), torch.randint(40, (12,), generator=generator)
    rel = torch.randint(5, (12,), generator=generator)
    negatives = [torch.randint(40, (3, 7), generator=generator) for _ in range(2)]
    results = []
    for fused in (True, False):
        table = z.clone().requires_grad_(True)
        decoder.zero_grad()
        if fused:
            loss = link_prediction.link_prediction_loss(decoder, table, src, rel, dst, *negatives, 4,
                                                        score_precision="bfloat16")
        else:
            heads, tails = table[src], table[dst]
            tail_q, head_q = decoder.tail_query(heads, rel), decoder.head_query(tails, rel)
            loss = (chunked_softmax_loss(tail_q, table[negatives[0]], (tail_q * tails).sum(1), 4,
                                         score_precision="bfloat16")
                    + chunked_softmax_loss(head_q, table[negatives[1]], (head_q * heads).sum(1), 4,
                                           score_precision="bfloat16")) / 2
        loss.backward()
        results.append((loss.detach(), table.grad, decoder.relations.grad.clone()))
    for mine, generic in zip(*results):
        torch.testing.assert_close(mine, generic)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])  # float32: the compiled row accumulation
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize(("count", "chunks", "chunk_size"), [(12, 3, 4), (10, 4, 3), (200, 70, 3)])
def test_fused_distmult_equals_the_generic_path(inverse, count, chunks, chunk_size, dtype):
    from systems.models.decoders import DistMult
    from systems.tasks import link_prediction

    generator = torch.Generator().manual_seed(count + inverse)
    decoder = DistMult(5, 6, inverse_relations=inverse).to(dtype)
    with torch.no_grad():
        decoder.relations.normal_(generator=generator)
    z = torch.randn(40, 6, generator=generator, dtype=dtype)
    src, dst = torch.randint(40, (count,), generator=generator), torch.randint(40, (count,), generator=generator)
    rel = torch.randint(5, (count,), generator=generator)
    negatives = [torch.randint(40, (chunks, 7), generator=generator) for _ in range(2)]
    results = []
    for fused in (True, False):
        table = z.clone().requires_grad_(True)
        decoder.zero_grad()
        if fused:
            loss = link_prediction.link_prediction_loss(decoder, table, src, rel, dst, *negatives, chunk_size)
        else:  # the generic path: the decoder's queries and chunked_softmax_loss through autograd
            heads, tails = table[src], table[dst]
            tail_q, head_q = decoder.tail_query(heads, rel), decoder.head_query(tails, rel)
            loss = (chunked_softmax_loss(tail_q, table[negatives[0]], (tail_q * tails).sum(1), chunk_size)
                    + chunked_softmax_loss(head_q, table[negatives[1]], (head_q * heads).sum(1), chunk_size)) / 2
        loss.backward()
        results.append((loss.detach(), table.grad, decoder.relations.grad.clone()))
    for mine, generic in zip(*results):
        torch.testing.assert_close(mine, generic)
    assert link_prediction.FUSED_SOFTMAX_LOSSES[DistMult] is not None


# ------------------------------------------------------------------------------------------ all entities (1vsAll)
@pytest.mark.parametrize("block_elements", [1, 11, 25, 1 << 22])  # a row per block, ..., one block
def test_all_entities_loss_equals_cross_entropy_blocked(block_elements):
    generator = torch.Generator().manual_seed(block_elements)
    inputs = [torch.randn(7, 5, generator=generator, dtype=torch.float64),
              torch.randn(11, 5, generator=generator, dtype=torch.float64) * 2]
    targets = torch.randint(11, (7,), generator=generator)
    ours = [t.clone().requires_grad_(True) for t in inputs]
    theirs = [t.clone().requires_grad_(True) for t in inputs]
    loss = all_entities_softmax_loss(*ours, targets, block_elements=block_elements)
    expected = F.cross_entropy(theirs[0] @ theirs[1].T, targets)
    torch.testing.assert_close(loss, expected)
    (loss * 1.5).backward()
    (expected * 1.5).backward()
    for mine, other in zip(ours, theirs):
        torch.testing.assert_close(mine.grad, other.grad)


def test_all_entities_loss_by_hand():
    # one query (1, 0) against candidates (0, 0) and (2, 0): scores 0 and 2; target 0: loss log(1 + e^2)
    queries = torch.tensor([[1.0, 0.0]], requires_grad=True)
    candidates = torch.tensor([[0.0, 0.0], [2.0, 0.0]], requires_grad=True)
    loss = all_entities_softmax_loss(queries, candidates, torch.tensor([0]))
    assert loss.item() == pytest.approx(torch.log1p(torch.exp(torch.tensor(2.0))).item())
    loss.backward()
    p = torch.sigmoid(torch.tensor(2.0)).item()  # the softmax of the wrong candidate
    # d/dq = (p0 - 1) c0 + p1 c1 = (2 p, 0); d/dc0 = (p0 - 1) q = (-p, 0); d/dc1 = p q = (p, 0)
    torch.testing.assert_close(queries.grad, torch.tensor([[2 * p, 0.0]]))
    torch.testing.assert_close(candidates.grad, torch.tensor([[-p, 0.0], [p, 0.0]]))


def test_all_entities_loss_without_gradients_and_large_scores():
    queries, candidates = torch.full((3, 2), 100.0), torch.full((4, 2), 100.0)
    loss = all_entities_softmax_loss(queries, candidates, torch.tensor([0, 1, 3]))
    assert not loss.requires_grad and loss.item() == pytest.approx(torch.log(torch.tensor(4.0)).item())


def test_all_entities_bfloat16_gradient_products_stay_close_and_the_loss_exact():
    generator = torch.Generator().manual_seed(6)
    inputs = [torch.randn(40, 16, generator=generator), torch.randn(300, 16, generator=generator)]
    targets = torch.randint(300, (40,), generator=generator)
    results = {}
    for precision in ("float32", "bfloat16"):
        leaves = [t.clone().requires_grad_(True) for t in inputs]
        loss = all_entities_softmax_loss(*leaves, targets, precision, block_elements=3000)
        loss.backward()
        results[precision] = (loss.detach(), [leaf.grad for leaf in leaves])
    (exact, exact_grads), (approximate, approximate_grads) = results["float32"], results["bfloat16"]
    assert torch.equal(exact, approximate)
    for mine, other in zip(approximate_grads, exact_grads):
        assert mine.dtype == torch.float32 and (mine - other).norm() / other.norm() < 0.01


@pytest.mark.parametrize("inverse", [False, True])
def test_all_entities_training_loss_equals_the_autograd_composition(inverse):
    from systems.models.decoders import ComplEx, DistMult
    from systems.tasks.link_prediction import all_entities_loss

    generator = torch.Generator().manual_seed(int(inverse))
    for decoder in (DistMult(3, 4, inverse), ComplEx(3, 4, inverse)):
        with torch.no_grad():
            decoder.relations.normal_(generator=generator)
        z = torch.randn(9, 4, generator=generator)
        src, rel, dst = (torch.randint(9, (6,), generator=generator), torch.randint(3, (6,), generator=generator),
                         torch.randint(9, (6,), generator=generator))
        results = []
        for fused in (True, False):
            table = z.clone().requires_grad_(True)
            decoder.zero_grad()
            if fused:
                loss = all_entities_loss(decoder, table, src, rel, dst)
            else:
                loss = (F.cross_entropy(decoder.tail_query(table[src], rel) @ table.T, dst)
                        + F.cross_entropy(decoder.head_query(table[dst], rel) @ table.T, src)) / 2
            loss.backward()
            results.append((loss.detach(), table.grad, decoder.relations.grad.clone()))
        for mine, reference_value in zip(*results):
            torch.testing.assert_close(mine, reference_value)
