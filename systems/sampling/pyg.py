"""PyG's neighbour sampler as the suite's sampler ``pyg``: its C++ sampling, the suite's layer-wise blocks.

:class:`PygSampler` calls :class:`torch_geometric.sampler.NeighborSampler` (``pyg-lib`` when installed, else
``torch-sparse``'s ``neighbor_sample``) on the same neighbour lists the other samplers read: the
:class:`~systems.sampling.sampler.SamplingGraph` is handed to PyG as the transposed adjacency ``adj_t`` (a
``torch_sparse.SparseTensor`` over the CSR's own tensors, nothing copied) or, without torch-sparse, as an edge list
already sorted by destination (``is_sorted=True``), so PyG's CSC is exactly the graph's CSR.

PyG's semantics (``torch-sparse`` 0.6.18, ``csrc/cpu/neighbor_sample_cpu.cpp``): hop ``k`` samples the neighbours
of the nodes first reached at hop ``k - 1`` only (the roots at hop 1), each node once per batch, as DENSE does; new
nodes are appended to one node list (roots first, in order), and each sampled edge ``(neighbour -> node)`` is
recorded once. Per node with ``deg`` neighbours and fanout ``f``: all neighbours when ``f == -1`` or (without
replacement) ``deg <= f``; with replacement ``f`` uniform draws; without replacement ``f`` distinct positions
(Floyd's algorithm, drawing in ``[0, j)`` where Floyd draws in ``[0, j]``, so PyG's subsets are not exactly
uniform; recorded as PyG does it).

Blocks: with ``c_k`` the number of nodes reached within ``k`` hops (``c_0`` = the roots), layer ``l`` (1-based,
outermost first) of a ``K``-layer model computes the first ``c_{K-l}`` nodes from the first ``c_{K-l+1}`` over
the edges whose destination is among the first ``c_{K-l}`` (a prefix of PyG's edge list, which is grouped by
destination in node order). This is PyG's own trimming (``trim_to_layer``): a node reached at hop ``k`` is computed
up to layer ``K - k`` from the one neighbour list it was sampled with. Without trimming, PyG computes every layer
over all sampled nodes (DESIGN.md); the rows the roots read are the same.

Randomness: PyG's samplers draw from torch's *global* CPU generator. :meth:`PygSampler.sample` draws a seed from
the ``torch.Generator`` it is given, and samples under a module lock with the global generator set to that seed and
restored afterwards (``torch.random.fork_rng``): the same generator state gives the same sample, and sampling does
not move the global generator. Another thread drawing from the global generator at the same moment (dropout in a
pipelined compute stage) interleaves with it; then neither is reproducible. Synchronous systems are exact.

Needs ``pyg-lib`` or ``torch-sparse`` (``pip install gnnsuite[peers]`` or ``make peers``); without them the
sampler is still registered and constructing it raises a :class:`~suite.errors.ConfigError` naming
``sampler.name``.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from suite.errors import ConfigError
from systems.sampling.sampler import LayerBlock, SampledSubgraph, SampleCounts, Sampler, SamplingGraph, checked_fanouts

_GLOBAL_GENERATOR = threading.Lock()
_SEED_BOUND = 1 << 62


def pyg_backend() -> str | None:
    """``pyg-lib`` or ``torch-sparse``, whichever PyG's NeighborSampler uses here; None when neither imports."""
    import torch_geometric.typing as pyg_typing

    if pyg_typing.WITH_PYG_LIB:
        return "pyg-lib"
    if pyg_typing.WITH_TORCH_SPARSE:
        return "torch-sparse"
    return None


def missing_reason() -> str | None:
    """Why PyG cannot sample here (None when it can)."""
    return None if pyg_backend() is not None else "pyg-lib/torch-sparse not installed"


def neighbor_sampler(graph: SamplingGraph, fanouts: Sequence[int], replace: bool) -> Any:
    """A :class:`torch_geometric.sampler.NeighborSampler` whose CSC is ``graph``'s CSR (its tensors, not copies
    where torch-sparse is installed).

    Raises:
        ConfigError: neither pyg-lib nor torch-sparse is installed.
    """
    reason = missing_reason()
    if reason is not None:
        raise ConfigError(f"sampler.name: 'pyg' needs PyG's sampling backend: {reason} (pip install "
                          f"'gnnsuite[peers]', or make peers)")
    import torch_geometric.typing as pyg_typing
    from torch_geometric.data import Data
    from torch_geometric.sampler import NeighborSampler

    if pyg_typing.WITH_TORCH_SPARSE:
        from torch_sparse import SparseTensor

        adj_t = SparseTensor(rowptr=graph.indptr, col=graph.indices, sparse_sizes=(graph.num_nodes, graph.num_nodes),
                             is_sorted=True, trust_data=True)
        data, sorted_edges = Data(adj_t=adj_t, num_nodes=graph.num_nodes), False
    else:
        owner = torch.repeat_interleave(torch.arange(graph.num_nodes), graph.indptr.diff())
        data, sorted_edges = Data(edge_index=torch.stack([graph.indices, owner]), num_nodes=graph.num_nodes), True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "without pyg-lib ... deprecated": we use what is installed
        sampler = NeighborSampler(data, list(fanouts) or [0], replace=replace, is_sorted=sorted_edges)
    if not torch.equal(sampler.colptr, graph.indptr) or len(sampler.row) != len(graph.indices):
        raise RuntimeError("PyG's CSC differs from the sampling graph's CSR")
    return sampler


def hop_edge_ends(col: torch.Tensor, nodes_within: Sequence[int]) -> list[int]:
    """For PyG's edges grouped by destination (``col`` non-decreasing): the number of edges whose destination is
    among the first ``n`` nodes, for every ``n`` of ``nodes_within``."""
    bounds = torch.tensor(list(nodes_within), dtype=col.dtype)
    return [int(v) for v in torch.searchsorted(col, bounds)]


def nodes_per_hop(row: torch.Tensor, col: torch.Tensor, num_roots: int, hops: int) -> list[int]:
    """``c_0, ..., c_K``: the nodes reached within each number of hops, from PyG's edge list (new nodes get
    consecutive local ids in the order they are reached, hop by hop)."""
    within = [num_roots]
    begin, end = 0, num_roots
    for _ in range(hops):
        low, high = hop_edge_ends(col, (begin, end))
        new_end = max(end, int(row[low:high].max()) + 1) if high > low else end
        within.append(new_end)
        begin, end = end, new_end
    return within


def blocks_from_pyg(node: torch.Tensor, row: torch.Tensor, col: torch.Tensor, num_roots: int, hops: int,
                    num_sampled_nodes: Sequence[int] | None = None,
                    num_sampled_edges: Sequence[int] | None = None) -> tuple[LayerBlock, ...]:
    """The layer-wise blocks (outermost first) of PyG's sample: global ids ``node`` (roots first), edges
    ``row -> col`` (local ids; ``col`` grouped by destination), per hop counts when the backend gives them."""
    if num_sampled_nodes is not None and num_sampled_edges is not None:
        within = [int(v) for v in torch.tensor(list(num_sampled_nodes)).cumsum(0)][: hops + 1]
        edge_ends = [0] + [int(v) for v in torch.tensor(list(num_sampled_edges)).cumsum(0)][:hops]
        within += [within[-1]] * (hops + 1 - len(within))
        edge_ends += [edge_ends[-1]] * (hops + 1 - len(edge_ends))
    else:
        within = nodes_per_hop(row, col, num_roots, hops)
        edge_ends = [0] + hop_edge_ends(col, within[:hops])
    edge_index = torch.stack([row, col])
    blocks = []
    for layer in range(1, hops + 1):
        inner = hops - layer  # destinations: nodes within `inner` hops; sources: within `inner + 1`
        blocks.append(LayerBlock(node[: within[inner + 1]], within[inner], edge_index[:, : edge_ends[inner + 1]]))
    return tuple(blocks)


class PygSampler(Sampler):
    """PyG's NeighborSampler behind the suite's sampler contract (layer-wise blocks, explicit generator).

    Args:
        graph: neighbour lists (one direction, from :meth:`SamplingGraph.from_store`).
        fanouts: neighbours per node per hop, first hop from the roots first (PyG's ``num_neighbors``); -1 = all.
        replace: sample with replacement (PyG's ``replace``).

    Raises:
        ConfigError: PyG has no sampling backend here (pyg-lib or torch-sparse).
    """

    label = "PyG NeighborSampler"
    """How figures name it."""
    marker = "^"
    """Its marker in figures."""

    @classmethod
    def missing_reason(cls) -> str | None:
        """Why PyG cannot sample here (None when it can)."""
        return missing_reason()

    @classmethod
    def implementation(cls) -> str:
        """PyG's sampler (the instance's ``backend``, pyg-lib or torch-sparse, is added)."""
        return "torch_geometric.sampler.NeighborSampler"

    def timed_sample(self, roots: torch.Tensor, seed: int) -> tuple[torch.Tensor, Any, int]:
        """PyG's own call only, seeded through torch's global generator (the assembly of blocks by :meth:`sample`
        is not timed, which favours PyG): ``(roots, PyG's output, layers)``."""
        from torch_geometric.sampler import NodeSamplerInput

        torch.manual_seed(seed)  # PyG's sampler draws from torch's global generator
        return roots, self._sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=roots)), len(self.fanouts)

    @classmethod
    def counts(cls, output: tuple[torch.Tensor, Any, int]) -> SampleCounts:
        """The counts of PyG's output (:meth:`timed_sample`); the per-hop node counts are recovered from the edge
        order when the backend does not return them (torch-sparse: targets visited hop by hop, new nodes appended
        in order; :func:`nodes_per_hop`)."""
        roots, out, layers = output
        if out.num_sampled_nodes is not None:
            per_hop = [int(n) for n in out.num_sampled_nodes]
        else:
            within = nodes_per_hop(out.row, out.col, len(roots), layers)
            per_hop = [within[0]] + [b - a for a, b in zip(within, within[1:])]
        per_hop += [0] * (layers + 1 - len(per_hop))
        return SampleCounts(int(out.row.numel()), per_hop, sum(per_hop[:-1]))

    @staticmethod
    def nodes_to_sample_next(counts: SampleCounts) -> int:
        """Each node is sampled once: hop K samples the nodes first reached at hop K - 1."""
        return counts.unique_nodes_per_hop[-1]

    def __init__(self, graph: SamplingGraph, fanouts: Sequence[int], *, replace: bool = False) -> None:
        fanouts = checked_fanouts(fanouts)
        self.graph = graph
        self.fanouts = fanouts
        self.replace = replace
        self.backend = pyg_backend()
        self._sampler = neighbor_sampler(graph, fanouts, replace) if fanouts else None

    def sample_pyg(self, roots: torch.Tensor, generator: torch.Generator):
        """PyG's own output (``SamplerOutput``: ``node``, ``row``, ``col``, ...) for ``roots``, seeded from
        ``generator`` (see the module docstring)."""
        from torch_geometric.sampler import NodeSamplerInput

        seed = int(torch.randint(_SEED_BOUND, (1,), generator=generator))
        with _GLOBAL_GENERATOR, torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self._sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=roots))

    def sample(self, roots: torch.Tensor, generator: torch.Generator) -> SampledSubgraph:
        """Sample the multi-hop neighbourhood of ``roots`` (unique global ids): blocks outermost first, the last
        block's destinations the roots in order."""
        roots = roots.to(torch.int64)
        if not self.fanouts:
            return SampledSubgraph(roots, (), 0)
        out = self.sample_pyg(roots.cpu(), generator)
        blocks = blocks_from_pyg(out.node, out.row, out.col, len(roots), len(self.fanouts),
                                 out.num_sampled_nodes, out.num_sampled_edges)
        return SampledSubgraph(roots, blocks, int(out.row.numel()))


__all__ = ["PygSampler", "blocks_from_pyg", "missing_reason", "neighbor_sampler", "nodes_per_hop", "pyg_backend"]
