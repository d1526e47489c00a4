"""Helpers for encoder tests: a DENSE-like layout built by hand from a layer-wise sample."""

from __future__ import annotations

import torch

from systems.sampling.base import LayerBlock, SampledSubgraph


def destinations_last(sample: SampledSubgraph, generator: torch.Generator | None = None) -> SampledSubgraph:
    """The same blocks relabelled into DENSE's layout: every block's destinations are its last input rows.

    Input rows of the outermost block become ``[new_K | ... | new_1 | roots]`` (``new_k``: the rows a naive block
    adds to its destinations), so every block's destinations are the input rows of the next block, last, in
    the next block's row order, and the roots come last, in order. With ``generator``, the new rows of every
    block and the columns of every ``edge_index`` are shuffled too (the layout must not depend on either order).

    Args:
        sample: a layer-wise sample (``dst_start == 0`` in every block, as the naive sampler's).
        generator: optional source of the shuffles.

    Returns:
        A sample with the same node set and edges, ``dst_start = len(src_nodes) - num_dst`` per block and
        ``root_start = len(input_nodes) - len(roots)``.
    """
    assert all(block.dst_start == 0 for block in sample.blocks)
    dst_order = torch.arange(len(sample.roots))  # new destination position -> old destination row
    blocks: list[LayerBlock] = []
    for block in reversed(sample.blocks):
        num_src, num_dst = len(block.src_nodes), block.num_dst
        new_rows = torch.arange(num_dst, num_src)
        if generator is not None:
            new_rows = new_rows[torch.randperm(len(new_rows), generator=generator)]
        order = torch.cat([new_rows, dst_order])  # new input row -> old input row
        position = torch.empty_like(order)
        position[order] = torch.arange(num_src)
        src, dst = block.edge_index
        edge_index = torch.stack([position[src], position[dst] - (num_src - num_dst)])
        if generator is not None:
            edge_index = edge_index[:, torch.randperm(edge_index.shape[1], generator=generator)]
        blocks.append(LayerBlock(block.src_nodes[order], num_dst, edge_index, num_src - num_dst))
        dst_order = order
    blocks.reverse()
    return SampledSubgraph(sample.roots, tuple(blocks), sample.num_sampled_edges,
                           len(blocks[0].src_nodes) - len(sample.roots) if blocks else 0)
