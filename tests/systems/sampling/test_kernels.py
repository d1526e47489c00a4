"""Sampler random numbers and backends: splitmix64 in torch and numba against a reference, backend selection,
and the naive one-hop sampler's two backends giving the same sample."""

from __future__ import annotations

import pytest
import numpy as np
import torch
from scipy import stats

from systems.sampling import kernels

from systems.sampling.naive import NaiveSampler
from systems.sampling.naive import sample_neighbours
from tests.support.sampling import gen, random_graph

MASK = (1 << 64) - 1
needs_numba = pytest.mark.skipif(not kernels.NUMBA_AVAILABLE, reason="numba not installed")


def splitmix64_reference(key: int, index: int) -> int:
    """Steele et al.'s splitmix64 output for state ``key + (index + 1) * gamma``, in Python integers."""
    z = (key + (index + 1) * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


KEYS = [0, 1, 12345, (1 << 62) + 7, (1 << 63) - 2]
INDICES = [0, 1, 2, 999, 123_456_789, (1 << 40) + 3]


def test_splitmix64_torch_matches_reference():
    for key in KEYS:
        got = kernels.splitmix64(key, torch.tensor(INDICES)).tolist()
        assert [value & MASK for value in got] == [splitmix64_reference(key, i) for i in INDICES]


@needs_numba
def test_uniform_below_numba_matches_torch_and_reference():
    bounds = [1, 2, 3, 7, 1000, 20_000, (1 << 31) - 1]
    for key in KEYS:
        for bound in bounds:
            expected = [(splitmix64_reference(key, i) >> 32) * bound >> 32 for i in INDICES]
            torch_values = kernels.uniform_below(key, torch.tensor(INDICES), torch.full((len(INDICES),), bound))
            assert torch_values.tolist() == expected
            assert [kernels._below(key, i, bound) for i in INDICES] == expected


def test_uniform_below_is_uniform():
    values = kernels.uniform_below(2024, torch.arange(60_000), torch.full((60_000,), 12))
    counts = torch.bincount(values, minlength=12)
    assert len(counts) == 12
    assert stats.chisquare(counts.numpy()).pvalue > 1e-3


def test_resolve_backend(monkeypatch):
    monkeypatch.delenv(kernels.BACKEND_ENV, raising=False)
    assert kernels.resolve_backend("torch") == "torch"
    assert kernels.resolve_backend("auto") == ("numba" if kernels.NUMBA_AVAILABLE else "torch")
    monkeypatch.setenv(kernels.BACKEND_ENV, "torch")
    assert kernels.resolve_backend("auto") == "torch"
    monkeypatch.setenv(kernels.BACKEND_ENV, "gpu")
    with pytest.raises(ValueError, match=kernels.BACKEND_ENV):
        kernels.resolve_backend("auto")
    with pytest.raises(ValueError, match="backend"):
        kernels.resolve_backend("fast")


def test_without_numba_auto_falls_back_to_torch(monkeypatch):
    monkeypatch.delenv(kernels.BACKEND_ENV, raising=False)
    monkeypatch.setattr(kernels, "NUMBA_AVAILABLE", False)
    assert kernels.resolve_backend("auto") == "torch"
    with pytest.raises(ValueError, match="numba"):
        kernels.resolve_backend("numba")


@needs_numba
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanout", [1, 3, 7, -1])
def test_naive_one_hop_backends_identical(replace, fanout):
    graph, _ = random_graph(num_nodes=200, max_degree=40, seed=3)
    nodes = torch.randint(0, 200, (500,), generator=gen(1))  # repeats: each occurrence sampled on its own
    a = sample_neighbours(graph, nodes, fanout, replace, gen(2), "torch")
    b = sample_neighbours(graph, nodes, fanout, replace, gen(2), "numba")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@needs_numba
def test_naive_sampler_backends_identical():
    graph, _ = random_graph(num_nodes=200, max_degree=40, seed=4)
    roots = torch.arange(0, 200, 9)
    a = NaiveSampler(graph, (6, 4, 3), backend="torch").sample(roots, gen(5))
    b = NaiveSampler(graph, (6, 4, 3), backend="numba").sample(roots, gen(5))
    for x, y in zip(a.blocks, b.blocks):
        assert torch.equal(x.src_nodes, y.src_nodes) and torch.equal(x.edge_index, y.edge_index)


def test_scratch_grows_to_what_a_batch_asked():
    scratch = kernels.Scratch()
    first = scratch.take(10)
    first[:] = 7
    big = scratch.take(1000)  # does not fit: a piece of its own; `first` stays valid
    big[:] = 1
    assert first.tolist() == [7] * 10 and len(big) == 1000
    scratch.reset()  # the next batch gets one buffer for both
    a, b = scratch.take(10), scratch.take(1000)
    assert np.shares_memory(a.numpy(), scratch._buffer) and np.shares_memory(b.numpy(), scratch._buffer)
    assert b.data_ptr() == a.data_ptr() + 10 * 8


def test_buffer_pool_recycles_memory_once_every_view_is_gone():
    pool = kernels.BufferPool(limit=1 << 30)
    first = pool.empty((2, 200_000))  # 3.2 MB (buffers are rounded up to 2 MiB; reused for requests >= 1/4)
    address = first.data_ptr()
    view = first[1, 10:]  # a view keeps the buffer in use
    del first
    other = pool.empty((2, 200_000))
    assert other.data_ptr() != address and pool.idle_bytes == 0
    del view
    assert pool.idle_bytes > 0
    again = pool.empty(400_000)  # same size, any shape: the idle buffer
    assert again.data_ptr() == address and again.shape == (400_000,) and pool.idle_bytes == 0
    as_numpy = again.numpy()  # numpy views count too
    del again
    assert pool.idle_bytes == 0
    del as_numpy
    assert pool.idle_bytes > 0


def test_buffer_pool_best_fit_and_limit():
    pool = kernels.BufferPool(limit=1 << 30)
    big, small = pool.empty(4 << 20), pool.empty(1 << 20)  # 32 MiB and 8 MiB of int64
    big_address, small_address = big.data_ptr(), small.data_ptr()
    del big, small
    assert pool.empty(1 << 20).data_ptr() == small_address  # the smallest buffer that fits
    assert pool.empty(100).data_ptr() not in (big_address, small_address)  # never 4x too large
    tight = kernels.BufferPool(limit=10 << 20)
    a, b = tight.empty(1 << 20), tight.empty(1 << 20)
    del a, b  # two idle buffers of ~9 MiB each: only one is kept under a 10 MiB limit
    assert 0 < tight.idle_bytes <= 10 << 20
    tight.clear()
    assert tight.idle_bytes == 0


def test_large_arrays_come_from_the_shared_pool():
    n = (kernels._NUMPY_ALLOC_BYTES // 8) + 1
    first = kernels.empty(n)
    address = first.data_ptr()
    del first
    assert kernels.empty(n).data_ptr() == address
    assert kernels.empty(10).data_ptr() != address


@needs_numba
@pytest.mark.skipif(not kernels.BOUNDSCHECK, reason="the kernels' debug mode is off (GNNSUITE_KERNEL_BOUNDSCHECK)")
@pytest.mark.parametrize("sampler_name", ["naive", "dense"])
def test_in_the_debug_mode_an_id_out_of_range_is_an_index_error_not_a_crash(sampler_name):
    from systems.sampling.dense import DenseSampler
    from systems.sampling.sampler import SamplingGraph

    sampler_class = {"naive": NaiveSampler, "dense": DenseSampler}[sampler_name]
    indptr = torch.tensor([0, 1, 2, 3, 3])
    good = SamplingGraph(indptr, torch.tensor([1, 2, 0]))
    sampler_class(good, (2, 2), backend="numba").sample(torch.tensor([0, 1]), gen(0))
    bad = SamplingGraph(indptr, torch.tensor([1, 2, 2_000_000_000]))  # what an unchecked store would hand over
    with pytest.raises(IndexError, match="index is out of bounds"):
        sampler_class(bad, (2, 2), backend="numba").sample(torch.tensor([0, 1, 2]), gen(0))
