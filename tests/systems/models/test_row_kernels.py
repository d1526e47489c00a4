"""The compiled row kernels of link prediction equal torch's operators (Adagrad bit for bit; gathers' gradients)."""

from __future__ import annotations

import pytest
import torch

from systems.models import row_kernels
from systems.models.embeddings import EmbeddingTable
from systems.models.row_kernels import adagrad_rows, gather_rows


def torch_adagrad(weight, state, nodes, grad, lr, eps):
    rows = state.index_select(0, nodes).addcmul_(grad, grad)
    state.index_copy_(0, nodes, rows)
    weight.index_add_(0, nodes, grad / rows.sqrt_().add_(eps), alpha=-lr)


@pytest.mark.parametrize("compiled", [True, False])
def test_adagrad_rows_equal_torch(monkeypatch, compiled):
    if compiled and not row_kernels.NUMBA_AVAILABLE:
        pytest.skip("numba not installed")
    monkeypatch.setattr(row_kernels, "NUMBA_AVAILABLE", compiled)
    generator = torch.Generator().manual_seed(0)
    weight, state = torch.randn(50, 7, generator=generator), torch.rand(50, 7, generator=generator)
    expected_weight, expected_state = weight.clone(), state.clone()
    for step in range(4):
        nodes = torch.randperm(50, generator=generator)[:20]
        grad = torch.randn(20, 7, generator=generator) * 10 ** (step - 2)
        adagrad_rows(weight, state, nodes, grad, 0.1, 1e-10)
        torch_adagrad(expected_weight, expected_state, nodes, grad, 0.1, 1e-10)
    # the same float32 operations in the same order, up to torch's fused multiply-adds (one rounding less)
    torch.testing.assert_close(state, expected_state, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(weight, expected_weight, rtol=1e-6, atol=1e-7)


def test_adagrad_rows_on_views_of_one_buffer():
    # the disk system's layout: weight and state are the two halves of each buffered row
    generator = torch.Generator().manual_seed(1)
    buffer = torch.randn(30, 8, generator=generator).abs()
    reference = buffer.clone()
    nodes, grad = torch.tensor([3, 0, 29, 7]), torch.randn(4, 4, generator=generator)
    adagrad_rows(buffer[:, :4], buffer[:, 4:], nodes, grad, 0.05, 1e-10)
    torch_adagrad(reference[:, :4], reference[:, 4:], nodes, grad, 0.05, 1e-10)
    torch.testing.assert_close(buffer, reference, rtol=1e-6, atol=1e-7)
    untouched = torch.ones(30, dtype=torch.bool)
    untouched[nodes] = False
    assert torch.equal(buffer[untouched], reference[untouched])


def test_table_update_with_duplicates_and_unique_hint_agree():
    generator = torch.Generator().manual_seed(2)
    first = EmbeddingTable(10, 3, 0.1, 0.2, torch.Generator().manual_seed(0))
    second = EmbeddingTable(10, 3, 0.1, 0.2, torch.Generator().manual_seed(0))
    nodes, grad = torch.tensor([4, 1, 4, 9]), torch.randn(4, 3, generator=generator)
    first.adagrad_update(nodes, grad)  # duplicates summed first
    second.adagrad_update(torch.tensor([1, 4, 9]), torch.stack([grad[1], grad[0] + grad[2], grad[3]]), unique=True)
    torch.testing.assert_close(first.weight, second.weight)
    torch.testing.assert_close(first.state, second.state)
    assert first.version == second.version == 1


@pytest.mark.parametrize("shape", [(6,), (2, 3)])
def test_gather_rows_value_and_gradient(shape):
    generator = torch.Generator().manual_seed(3)
    table = torch.randn(5, 4, generator=generator, dtype=torch.float32, requires_grad=True)
    index = torch.randint(5, shape, generator=generator)  # repeats included
    weights = torch.randn(*shape, 4, generator=generator)
    out = gather_rows(table, index)
    assert out.shape == (*shape, 4) and torch.equal(out, table.detach()[index])
    (out * weights).sum().backward()
    expected = torch.zeros(5, 4).index_add_(0, index.reshape(-1), weights.reshape(-1, 4))
    torch.testing.assert_close(table.grad, expected)


def test_gather_rows_without_gradient_is_a_plain_select():
    table = torch.arange(12.0).view(4, 3)
    assert torch.equal(gather_rows(table, torch.tensor([[3, 0]])), table[[3, 0]].unsqueeze(0))
