"""DENSE: Delta Encoding of Neighborhood Samples (MariusGNN), a multi-hop sampler without redundant one-hop work.

For roots ``T`` and ``K = len(fanouts)`` hops:

- hop 1 samples the neighbours of the roots (``delta_0 = T``); hop ``k`` samples the neighbours of ``delta_{k-1}``
  only, the nodes first discovered at hop ``k - 1``;
- ``delta_k`` = the sampled neighbours never seen before in this batch (deduplicated against every node so far
  and among themselves);
- ``delta_K``'s neighbours are never sampled.

Each unique node's one-hop neighbourhood is thus sampled at most once per batch and reused at every layer (the
naive sampler re-samples every frontier node at every hop): ``one_hop_calls`` = the number of unique nodes
outside ``delta_K``.

Layout (:class:`DenseSubgraph`), ``N`` nodes, ``n_0 = len(T)``::

    node_ids    = [delta_K | delta_{K-1} | ... | delta_1 | T]          global ids, roots last and in order
    hop_offsets = (h_0, ..., h_K)   node_ids[h_i:] = [delta_{K-i} | ... | T];  h_0 = 0, h_K = N - n_0
    nbr_offsets : node node_ids[h_1 + i] has the neighbours nbrs[nbr_offsets[i] : nbr_offsets[i + 1]]
    nbrs        : local indices into node_ids (the neighbours of delta_{K-1}'s nodes first, the roots' last)

Order within a delta: hop ``k`` visits ``delta_{k-1}`` in layout order, each node's draws in order; the first new
node it meets is laid out *last* in ``delta_k``. Equivalently, ``node_ids`` read backwards lists the nodes in
discovery order (the roots last to first, then ``delta_1``, ``delta_2``, ... in order of first appearance); a
node's local row is ``N - 1 - discovery index``, so relabelling is one subtraction.

Layer ``l = 1..K`` of a model computes the rows ``node_ids[h_l:]`` from the rows ``node_ids[h_{l-1}:]``,
aggregating over the neighbour lists of ``node_ids[h_l:]`` (a suffix of ``nbrs``): every layer drops the
outermost delta, and after ``K`` layers the rows are the roots, in order. :attr:`DenseSubgraph.blocks` exposes
these layers as :class:`~systems.sampling.sampler.LayerBlock` s (:class:`LayerBlocks`: layer 1 shares ``edges``;
a later layer is one subtraction over its edge suffix, done on first access, on the sample's device), so every
model consumes DENSE unchanged.

Truncation (``DenseSampler(truncate=True)``, the default): a node is sampled once, with the fanout of the hop
that discovered it, but is a destination at several layers; layer ``l`` (fanout ``fanouts[K - l]``, as the naive
sampler's layer ``l``) then aggregates over only the first ``min(fanouts[K - l], count)`` entries of each list.
Lists that may be cut are put in random order when sampled (a partial Fisher-Yates shuffle), so such a prefix is
itself a uniform sample of the neighbours: the layers aggregate over as many edges as the naive sampler's, while
sampling stays deduplicated. With fanouts that never decrease outwards (e.g. equal, or all -1), nothing is cut or
shuffled. ``num_sampled_edges`` counts the sampled edges either way.

The one-hop sample per node, with ``deg`` neighbours and fanout ``f``, is the naive sampler's
(:func:`~systems.sampling.naive.sample_neighbours`, same random numbers): all neighbours when ``f == -1`` or
``deg <= f``; with replacement ``f`` independent uniform draws (MariusGNN's ``randint % deg``); without
replacement ``f`` distinct neighbours, a uniform ``f``-subset (Floyd's algorithm); then, for lists that may be
cut, the shuffle (random numbers of a key derived from the hop's, :func:`~systems.sampling.kernels.shuffle_key`).

Deduplication uses a reusable ``int32`` slot array of ``num_nodes`` entries per concurrent caller
(``slot[v] = 1 + discovery index`` of the nodes seen in the batch, 0 for the others: the bitmap of the design,
widened so that the same lookup also gives the node's row); after a batch only the slots of its ``N`` nodes are
reset (or the whole array when ``N`` exceeds 1/8 of it, cheaper then and still O(N)): nothing costs
O(num_nodes) per batch. Two backends compute the same sample from the same generator state, deterministically
whatever the thread count: ``numba`` (per hop three compiled sequential passes over numpy views of a reused
scratch buffer: draw positions, gather neighbours, deduplicate, the new nodes written straight in layout order;
then one pass per hop that writes both rows of ``edges`` and ``nbr_offsets``; outputs of 32 MiB and more on
recycled memory, :class:`~systems.sampling.kernels.BufferPool`) and ``torch`` (tensor operations only; no
compiler needed, ~4x slower). ``experiments/measure/dense_speed.py`` measures both against random gathers and the naive
sampler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from suite.config import ALL_NEIGHBOURS
from systems.sampling import kernels
from systems.sampling.sampler import LayerBlock, SampledSubgraph, SampleCounts, Sampler, SamplingGraph, checked_fanouts
from systems.sampling.naive import sample_neighbours

_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, kw_only=True)
class DenseSubgraph(SampledSubgraph):
    """A DENSE sample: one node list with per-hop deltas and one neighbour list (see the module docstring).

    Inherits ``roots`` (a view of the last ``len(roots)`` entries of ``node_ids``), ``blocks`` (one per layer,
    outermost first, a :class:`LayerBlocks` derived from the fields below on first access; ``()`` without
    hops), ``num_sampled_edges`` and ``root_start`` (``len(node_ids) - len(roots)``). ``input_nodes`` is
    ``node_ids``.

    Attributes:
        node_ids: ``(N,)`` int64 global ids ``[delta_K | ... | delta_1 | roots]``.
        hop_offsets: ``K + 1`` ints: ``node_ids[hop_offsets[i]:]`` is ``[delta_{K-i} | ... | roots]``.
        nbr_offsets: ``(N - hop_offsets[1] + 1,)`` int64 (``(1,)`` without hops): the neighbours of node
            ``node_ids[hop_offsets[1] + i]`` are the edges ``nbr_offsets[i]:nbr_offsets[i + 1]``.
        edges: ``(2, E)`` int64: row 0 is :attr:`nbrs`, row 1 :attr:`edge_dst`.
        layer_edge_starts: ``K`` ints: layer ``l`` (1-based) aggregates over the edges from
            ``layer_edge_starts[l - 1]`` on (``nbr_offsets[hop_offsets[l] - hop_offsets[1]]``).
        unique_nodes_per_hop: ``K + 1`` ints: ``len(roots), len(delta_1), ..., len(delta_K)``.
        one_hop_calls: number of nodes whose one-hop neighbourhood was sampled (``len(node_ids) -
            len(delta_K)``; each at most once).
        layer_fanouts: ``K`` ints or None: when set, layer ``l`` (1-based) aggregates over the first
            ``min(layer_fanouts[l - 1], count)`` neighbours of each of its destinations (-1: all) instead of all of
            them; see :class:`DenseSampler` (``truncate``). ``num_sampled_edges`` counts the sampled edges.
    """

    node_ids: torch.Tensor
    hop_offsets: tuple[int, ...]
    nbr_offsets: torch.Tensor
    edges: torch.Tensor
    layer_edge_starts: tuple[int, ...]
    unique_nodes_per_hop: tuple[int, ...]
    one_hop_calls: int
    layer_fanouts: tuple[int, ...] | None = None

    @property
    def num_hops(self) -> int:
        """``K``, the number of hops (= layers)."""
        return len(self.hop_offsets) - 1

    @property
    def nbrs(self) -> torch.Tensor:
        """``(E,)`` the neighbour of every sampled edge, a local index into ``node_ids``."""
        return self.edges[0]

    @property
    def edge_dst(self) -> torch.Tensor:
        """``(E,)`` the node whose neighbour list holds every edge, as an index into ``node_ids[hop_offsets[1]:]``.

        Its local index into ``node_ids`` is ``edge_dst + hop_offsets[1]``; stored relative so that layer 1's
        edge index is ``edges`` itself, without a copy.
        """
        return self.edges[1]

    @classmethod
    def build(cls, node_ids: torch.Tensor, num_roots: int, hop_offsets: tuple[int, ...],
              nbr_offsets: torch.Tensor, edges: torch.Tensor, layer_edge_starts: tuple[int, ...],
              unique_nodes_per_hop: tuple[int, ...], one_hop_calls: int,
              layer_fanouts: tuple[int, ...] | None = None) -> "DenseSubgraph":
        """Assemble a sample from its DENSE fields, deriving ``roots``, ``blocks`` and ``root_start``."""
        root_start = len(node_ids) - num_roots
        return cls(roots=node_ids[root_start:],
                   blocks=LayerBlocks(node_ids, hop_offsets, edges, layer_edge_starts, nbr_offsets, layer_fanouts)
                   if len(hop_offsets) > 1 else (),
                   num_sampled_edges=edges.shape[1], root_start=root_start, node_ids=node_ids,
                   hop_offsets=hop_offsets, nbr_offsets=nbr_offsets, edges=edges,
                   layer_edge_starts=layer_edge_starts, unique_nodes_per_hop=unique_nodes_per_hop,
                   one_hop_calls=one_hop_calls, layer_fanouts=layer_fanouts)

    def to(self, device: torch.device, non_blocking: bool = False) -> "DenseSubgraph":
        """The sample on ``device`` (still a :class:`DenseSubgraph`; its blocks are derived there when used)."""
        return DenseSubgraph.build(self.node_ids.to(device, non_blocking=non_blocking), len(self.roots),
                                   self.hop_offsets, self.nbr_offsets.to(device, non_blocking=non_blocking),
                                   self.edges.to(device, non_blocking=non_blocking), self.layer_edge_starts,
                                   self.unique_nodes_per_hop, self.one_hop_calls, self.layer_fanouts)


class LayerBlocks(Sequence):
    """The ``K`` layer blocks of a DENSE sample, each built on first access and then kept (a tuple-like sequence).

    Block ``l`` (1-based; index ``l - 1``) maps the rows ``node_ids[h_{l-1}:]`` to the rows ``node_ids[h_l:]``:
    its sources are ``node_ids[h_{l-1}:]``, its destinations the ``N - h_l`` rows from
    ``dst_start = h_l - h_{l-1}``, its edges the edges from ``layer_edge_starts[l - 1]`` on, the neighbour
    shifted by ``-h_{l-1}`` and the destination by ``-(h_l - h_1)``. Block 1 is ``edges`` itself (no copy); a
    later block subtracts over its edge suffix when first asked for, on the device the sample lives on (so a
    sample moved to an accelerator builds its blocks there), and not during sampling.

    With ``layer_fanouts`` (truncation, see :class:`DenseSampler`), block ``l`` keeps of every destination only its
    first ``layer_fanouts[l - 1]`` neighbours. Only nodes discovered before ``delta_{K-l}`` (sampled with another
    fanout) can have more, and their edges are the suffix from ``layer_edge_starts[l]``: only that suffix is masked,
    by the rank of each edge in its node's list (``position - nbr_offsets[node]``).
    """

    def __init__(self, node_ids: torch.Tensor, hop_offsets: tuple[int, ...], edges: torch.Tensor,
                 layer_edge_starts: tuple[int, ...], nbr_offsets: torch.Tensor | None = None,
                 layer_fanouts: tuple[int, ...] | None = None) -> None:
        self._node_ids, self._hop_offsets, self._edges = node_ids, hop_offsets, edges
        self._layer_edge_starts = layer_edge_starts
        self._nbr_offsets, self._layer_fanouts = nbr_offsets, layer_fanouts
        self._built: list[LayerBlock | None] = [None] * (len(hop_offsets) - 1)

    def __len__(self) -> int:
        return len(self._built)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("block index out of range")
        block = self._built[index]
        if block is None:
            block = self._built[index] = self._build(index + 1)
        return block

    def _truncation(self, layer: int) -> int:
        """The fanout block ``layer`` truncates its inner destinations' lists to, or -1 (nothing to cut)."""
        fanouts = self._layer_fanouts
        num_layers = len(self._built)
        if fanouts is None or layer == num_layers or fanouts[layer - 1] == ALL_NEIGHBOURS:
            return ALL_NEIGHBOURS
        cap = fanouts[layer - 1]
        # Nodes of delta_j (j < K - l) were sampled with fanout fanouts_by_hop[j] = layer_fanouts[K - 1 - j].
        inner = fanouts[layer:]
        return cap if any(f == ALL_NEIGHBOURS or f > cap for f in inner) else ALL_NEIGHBOURS

    def _build(self, layer: int) -> LayerBlock:
        offsets, edges = self._hop_offsets, self._edges
        src_start, dst_start = offsets[layer - 1], offsets[layer]
        first = self._layer_edge_starts[layer - 1]
        cap = self._truncation(layer)
        if layer == 1 and cap == ALL_NEIGHBOURS:
            edge_index = edges
        else:
            # Inner destinations (their lists may be cut) are the nodes from h_{l+1} on, relative to h_1.
            node_first = offsets[layer + 1] - offsets[1] if cap != ALL_NEIGHBOURS else 0
            edge_index = layer_edges(edges, self._nbr_offsets, first, node_first, cap, src_start,
                                     dst_start - offsets[1])
        return LayerBlock(self._node_ids[src_start:], len(self._node_ids) - dst_start, edge_index,
                          dst_start - src_start)

    def __repr__(self) -> str:
        return f"LayerBlocks({len(self)} layers, built: {[b is not None for b in self._built]})"


def layer_edges(edges: torch.Tensor, nbr_offsets: torch.Tensor, first: int, node_first: int, cap: int,
                src_shift: int, dst_shift: int) -> torch.Tensor:
    """A layer's ``(2, e)`` edge index: the edges from ``first`` on, those of the nodes from ``node_first`` on (an
    index into ``nbr_offsets``) cut to their first ``cap`` entries (``cap = -1``: nothing cut), row 0 minus
    ``src_shift`` and row 1 minus ``dst_shift``. Compiled on CPU (one pass), tensor operations elsewhere."""
    if edges.device.type == "cpu" and kernels.NUMBA_AVAILABLE:
        return kernels.cut_block(edges, nbr_offsets, first, node_first, cap, src_shift, dst_shift)
    return _layer_edges_torch(edges, nbr_offsets, first, node_first, cap, src_shift, dst_shift)


def _layer_edges_torch(edges: torch.Tensor, nbr_offsets: torch.Tensor, first: int, node_first: int, cap: int,
                       src_shift: int, dst_shift: int) -> torch.Tensor:
    shift = torch.tensor([[src_shift], [dst_shift]], dtype=edges.dtype, device=edges.device)
    if cap == ALL_NEIGHBOURS:
        return edges[:, first:] - shift
    inner_first = int(nbr_offsets[node_first])
    inner = edges[:, inner_first:]
    rank = torch.arange(inner_first, edges.shape[1], device=edges.device) - nbr_offsets[inner[1]]
    return torch.cat([edges[:, first:inner_first], inner[:, rank < cap]], 1).sub_(shift)


class DenseSampler(Sampler):
    """DENSE multi-hop sampler (MariusGNN): each unique node's neighbours are sampled at most once per batch.

    Args:
        graph: neighbour lists (one direction, from :meth:`SamplingGraph.from_store`).
        fanouts: neighbours per node per hop; ``fanouts[0]`` is hop 1 (neighbours of the roots), ``fanouts[-1]``
            the outermost; -1 = all neighbours. Empty: the roots only, no blocks.
        replace: when a node's degree exceeds the fanout, draw ``fanout`` independent uniform neighbours (with
            replacement, as MariusGNN's ``randint % degree``) instead of ``fanout`` distinct ones.
        backend: ``"numba"`` (compiled per-hop kernels), ``"torch"`` (tensor operations only) or ``"auto"``
            (numba when installed; see :func:`systems.sampling.kernels.resolve_backend`). Both give identical
            samples from the same generator state.
        truncate: layer ``l`` aggregates over at most its own fanout of neighbours per node, as the naive
            sampler's layer does (default). A node is sampled once, with the fanout of the hop that discovered it
            (a root with ``fanouts[0]``), but it is a destination at several layers; the outermost layer's fanout is
            ``fanouts[-1]``. With ``truncate``, layer ``l`` (fanout ``fanouts[K - l]``) uses the first
            ``min(fanouts[K - l], count)`` entries of each destination's list, and the sampler orders every list
            that may be cut so that each such prefix is a uniform random subset of the list, hence of the
            neighbours (a partial Fisher-Yates shuffle, :func:`systems.sampling.kernels.shuffle_key`; with
            replacement the prefix is a set of distinct draws of the list). Nothing is cut, nor shuffled, when no
            hop's fanout exceeds a later one (e.g. equal fanouts, or all -1). ``False``: every layer uses each
            node's whole sample (MariusGNN's reuse). Sampled edges (``num_sampled_edges``) are the same.

    ``sample`` is thread-safe: every concurrent call gets its own workspace, kept for reuse: a slot array (one
    int32 per graph node) and a scratch buffer for the per-hop arrays (as large as the largest batch's, about
    24 bytes per sampled edge). Outputs of 32 MiB and more are recycled through :data:`kernels.POOL`. Roots must
    be unique (``ValueError`` otherwise).

    Example::

        sampler = DenseSampler(SamplingGraph.from_store(store, "in"), (15, 10, 5))
        sample = sampler.sample(torch.tensor([0, 5]), torch.Generator().manual_seed(0))
        logits = model(features[sample.input_nodes], sample)   # rows of sample.roots, in order
    """

    label = "DENSE"
    """How figures name it."""
    marker = "s"
    """Its marker in figures."""
    variants = {"torch": {"backend": "torch"}}
    """The sampling figure also runs its tensor-operations backend (``dense-torch``)."""

    @classmethod
    def counts(cls, output: DenseSubgraph) -> SampleCounts:
        """The counts of a DENSE sample, as it reports them."""
        return SampleCounts(int(output.num_sampled_edges), [int(n) for n in output.unique_nodes_per_hop],
                            int(output.one_hop_calls))

    @staticmethod
    def nodes_to_sample_next(counts: SampleCounts) -> int:
        """Each node is sampled once: hop K samples the nodes first reached at hop K - 1."""
        return counts.unique_nodes_per_hop[-1]

    def __init__(self, graph: SamplingGraph, fanouts: Sequence[int], *, replace: bool = False,
                 backend: str = "auto", truncate: bool = True) -> None:
        fanouts = checked_fanouts(fanouts)
        if graph.num_nodes > _INT32_MAX - 1:
            raise ValueError(f"graph too large for int32 slots: {graph.num_nodes} nodes")
        self.graph = graph
        self.fanouts = fanouts
        self.replace = replace
        self.truncate = truncate
        self.backend = kernels.resolve_backend(backend)
        self._workspaces = kernels.WorkspacePool(graph.num_nodes)
        # Contiguous views the kernels read (SamplingGraph holds int64 CSR tensors).
        self._indptr = graph.indptr.contiguous()
        self._indices = graph.indices.contiguous()
        self._indptr_np, self._indices_np = self._indptr.numpy(), self._indices.numpy()
        self._shuffles = [shuffle_plan(fanouts, hop) if truncate else (-1, 0) for hop in range(len(fanouts))]
        cut = any(above >= 0 for above, _ in self._shuffles)
        self._layer_fanouts = fanouts[::-1] if cut else None

    # ------------------------------------------------------------------ sampling
    def sample(self, roots: torch.Tensor, generator: torch.Generator) -> DenseSubgraph:
        """Sample the ``K``-hop DENSE neighbourhood of ``roots``.

        Args:
            roots: unique global ids; the last ``len(roots)`` rows of the layout, in this order.
            generator: the only source of randomness (same state, same sample).

        Raises:
            ValueError: a root appears twice or is not a node id.
        """
        roots = roots.to("cpu", torch.int64).contiguous()
        workspace = self._workspaces.acquire()
        workspace.scratch.reset()
        # On an error the slot array may be dirty: the workspace is dropped, not returned to the pool.
        if self.backend == "numba":
            sample = self._sample_numba(roots, generator, workspace)
        else:
            if len(roots) and (int(roots.min()) < 0 or int(roots.max()) >= self.graph.num_nodes):
                self._workspaces.release(workspace)
                raise ValueError(f"roots must be node ids in [0, {self.graph.num_nodes})")
            sample = self._sample_torch(roots, generator, workspace)
        self._workspaces.release(workspace)
        return sample

    def _sample_numba(self, roots: torch.Tensor, generator: torch.Generator, workspace: kernels.Workspace
                      ) -> DenseSubgraph:
        # numpy arrays throughout (a tensor's .numpy() and len() cost microseconds each); tensors at the end.
        slot, scratch = workspace.slot_np, workspace.scratch
        roots_np = roots.numpy()
        status = kernels.mark_roots(slot, roots_np)
        if status:
            self._workspaces.release(workspace)
            raise ValueError("roots must be unique" if status == 1 else
                             f"roots must be node ids in [0, {self.graph.num_nodes})")
        indptr, indices, num_nodes = self._indptr_np, self._indices_np, self.graph.num_nodes
        frontiers, hop_counts, hop_edges = [roots_np], [], []
        next_index = len(roots_np)
        for fanout, (above, length) in zip(self.fanouts, self._shuffles):
            # New nodes per hop are at most the hop's edges and the nodes not seen yet.
            counts, discovered, delta = kernels.dense_hop(indptr, indices, frontiers[-1], fanout, self.replace,
                                                          generator, slot, next_index, scratch,
                                                          num_nodes - next_index, above, length)
            next_index += len(delta)
            frontiers.append(delta)  # already in local order (reverse discovery order)
            hop_counts.append(counts)
            hop_edges.append(discovered)
        num_hops = len(self.fanouts)
        sizes = [len(f) for f in frontiers]  # n_0 (roots), n_1, ..., n_K
        total = next_index
        # hop h's nodes start at local row local[h] in node_ids = [delta_K | ... | delta_1 | roots].
        local = [total - sum(sizes[: h + 1]) for h in range(num_hops + 1)]
        node_ids = kernels.empty_np(total)
        for hop, frontier in enumerate(frontiers):
            node_ids[local[hop]:local[hop] + sizes[hop]] = frontier
        hop_offsets = tuple(local[num_hops - i] for i in range(num_hops + 1))
        edge_counts = [len(e) for e in hop_edges]
        edges = kernels.empty_np((2, sum(edge_counts)))
        base = hop_offsets[1] if num_hops else 0
        nbr_offsets = kernels.empty_np(total - base + 1 if num_hops else 1)
        nbr_offsets[0] = 0
        position = 0
        for hop in range(num_hops, 0, -1):  # hop k's edges (frontier delta_{k-1}), outermost hop first
            stop = position + edge_counts[hop - 1]
            kernels.layout_hop(hop_counts[hop - 1], hop_edges[hop - 1], total - 1, local[hop - 1] - base,
                               edges[0, position:stop], edges[1, position:stop], nbr_offsets, local[hop - 1] - base,
                               position)
            position = stop
        layer_edge_starts = tuple(sum(edge_counts[num_hops - layer + 1:]) for layer in range(1, num_hops + 1))
        if total * 8 > num_nodes:  # see _clear
            slot.fill(0)
        else:
            kernels.clear_slots(slot, node_ids)
        return DenseSubgraph.build(torch.from_numpy(node_ids), sizes[0], hop_offsets, torch.from_numpy(nbr_offsets),
                                   torch.from_numpy(edges), layer_edge_starts, tuple(sizes),
                                   total - sizes[-1] if num_hops else 0, self._layer_fanouts)

    def _sample_torch(self, roots: torch.Tensor, generator: torch.Generator, workspace: kernels.Workspace
                      ) -> DenseSubgraph:
        slot = workspace.slot
        n0 = len(roots)
        marks = torch.arange(n0, 0, -1, dtype=torch.int32)  # root i: discovery index n0 - 1 - i
        slot[roots] = marks
        if n0 and not torch.equal(slot[roots], marks):
            slot[roots] = 0
            self._workspaces.release(workspace)
            raise ValueError("roots must be unique")
        frontiers, hop_segments, hop_edges = [roots], [], []
        next_index = n0
        for fanout, (above, length) in zip(self.fanouts, self._shuffles):
            segment, neighbours = sample_neighbours(self.graph, frontiers[-1], fanout, self.replace, generator,
                                                    "torch", above, length)
            seen = torch.index_select(slot, 0, neighbours)
            new_positions = (seen == 0).nonzero().view(-1)
            candidates = torch.index_select(neighbours, 0, new_positions)
            if len(candidates):
                # First appearance among the new candidates, without a second array: write
                # min(position) - INT32_MAX (< 0) into their slots, keep the candidates that find their own
                # position there, then give those positive slots (which overwrites every candidate's slot).
                marker = (new_positions - _INT32_MAX).to(torch.int32)
                slot.scatter_reduce_(0, candidates, marker, reduce="amin", include_self=False)
                delta = candidates[torch.index_select(slot, 0, candidates) == marker]
                slot[delta] = torch.arange(next_index + 1, next_index + 1 + len(delta), dtype=torch.int32)
            else:
                delta = candidates
            discovered = torch.index_select(slot, 0, neighbours).to(torch.int64) - 1
            next_index += len(delta)
            frontiers.append(delta.flip(0))
            hop_segments.append(segment)  # per-edge frontier rows (for the destinations)
            hop_edges.append(discovered)
        return self._finish_torch(frontiers, hop_segments, hop_edges, slot)

    def _finish_torch(self, frontiers: list[torch.Tensor], hop_segments: list[torch.Tensor],
                      hop_edges: list[torch.Tensor], slot: torch.Tensor) -> DenseSubgraph:
        """Lay the deltas out outermost first, turn discovery indices into local rows, reset the slots.

        ``frontiers = [roots, delta_1, ..., delta_K]``, each in local order; discovery index ``r`` is local row
        ``N - 1 - r``. ``hop_segments[k - 1]``: hop k's per-edge frontier rows; ``hop_edges[k - 1]``: hop k's
        edges as discovery indices.
        """
        num_hops = len(self.fanouts)
        sizes = [len(f) for f in frontiers]  # n_0 (roots), n_1, ..., n_K
        total = sum(sizes)
        local = [total - sum(sizes[: h + 1]) for h in range(num_hops + 1)]
        node_ids = torch.cat(frontiers[::-1]) if num_hops else frontiers[0]
        hop_offsets = tuple(local[num_hops - i] for i in range(num_hops + 1))
        edge_counts = [len(e) for e in hop_edges]
        edges = kernels.empty((2, sum(edge_counts)))
        base = hop_offsets[1] if num_hops else 0
        position = 0
        per_node_counts = []
        for hop in range(num_hops, 0, -1):  # hop k's edges (frontier delta_{k-1}), outermost hop first
            part = slice(position, position + edge_counts[hop - 1])
            torch.sub(total - 1, hop_edges[hop - 1], out=edges[0, part])
            torch.add(hop_segments[hop - 1], local[hop - 1] - base, out=edges[1, part])
            per_node_counts.append(torch.bincount(hop_segments[hop - 1], minlength=sizes[hop - 1]))
            position = part.stop
        nbr_offsets = torch.zeros(total - base + 1 if num_hops else 1, dtype=torch.int64)
        if num_hops:
            torch.cumsum(torch.cat(per_node_counts), 0, out=nbr_offsets[1:])
        layer_edge_starts = tuple(sum(edge_counts[num_hops - layer + 1:]) for layer in range(1, num_hops + 1))
        self._clear(slot, node_ids)
        return DenseSubgraph.build(node_ids, sizes[0], hop_offsets, nbr_offsets, edges, layer_edge_starts,
                                   tuple(sizes), total - sizes[-1] if num_hops else 0, self._layer_fanouts)

    @staticmethod
    def _clear(slot: torch.Tensor, node_ids: torch.Tensor) -> None:
        """Reset the batch's slots: one by one, or all at once when the batch touched over 1/8 of them (a
        sequential fill of ``num_nodes`` int32 then costs less than ``N`` random writes; still O(N))."""
        if len(node_ids) * 8 > len(slot):
            slot.zero_()
        else:
            slot.index_fill_(0, node_ids, 0)


def shuffle_plan(fanouts: Sequence[int], hop: int) -> tuple[int, int]:
    """``(shuffle_above, shuffle_len)`` of hop ``hop + 1`` (0-based ``hop``), which samples ``delta_hop``.

    ``delta_hop``'s nodes are destinations at the layers of fanouts ``fanouts[hop:]``; with truncation, a node's
    list is cut to a layer's fanout ``f`` when it holds more than ``f`` entries. Its entries must then be in random
    order up to the longest such cut: lists longer than ``min(fanouts[hop:])`` (finite ones) are shuffled over
    their first ``max{f in fanouts[hop:], f < fanouts[hop]}`` entries (``-1`` counts as infinite). ``(-1, 0)``: no
    list of this hop can be cut.
    """
    fanout = fanouts[hop]
    finite = [f for f in fanouts[hop:] if f != ALL_NEIGHBOURS]
    if not finite or (fanout != ALL_NEIGHBOURS and fanout <= min(finite)):
        return -1, 0
    return min(finite), max(f for f in finite if fanout == ALL_NEIGHBOURS or f < fanout)


__all__ = ["DenseSampler", "DenseSubgraph", "LayerBlocks", "layer_edges", "shuffle_plan"]
