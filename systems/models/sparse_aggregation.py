"""When and how a block's linear aggregation runs as a sparse-dense product instead of over the edge list.

A mean or sum aggregation is linear, so it can be computed as one product of the block's adjacency (destinations x
input rows, a repeated edge counted as often as it occurs) with the input rows, without the edge-list path's
gathered row per edge (``edges x width`` floats: 8 GiB for a 4,096-node evaluation batch of Coauthor Physics, 8,415
features, fanouts 10, 5). Building and coalescing the adjacency costs about what the gather saves at narrow rows,
so the product is used from :data:`SPARSE_MIN_WIDTH` features on (``benchmarks/bench_models.py``'s block, 2 busy
cores, medians of 5: at 128 features the product was as fast as the edge list or up to 3.5 times slower, at 256 and
512 faster to train and slower to evaluate, at 1,024 and 2,048 faster at both, 1.7-3.4 times; at 8,415 about twice as
fast on that block and 18 times on an evaluation-sized one).
No PyG import here: the memory estimate asks :func:`uses_sparse_product` too.
"""

from __future__ import annotations

import torch

from systems.sampling.sampler import LayerBlock

LINEAR_AGGREGATIONS = ("mean", "sum")
SPARSE_MIN_WIDTH = 1024
"""Input rows at least this wide are aggregated by the sparse-dense product (the first layer of the real-feature
graphs: Amazon Computers 767 stays on the edge list, Cora 1,433, Coauthor CS 6,805 and Physics 8,415 do not)."""
SPARSE_PRODUCT_TYPES = (torch.float32, torch.float64)


def uses_sparse_product(aggregation: str, width: int, dtype: torch.dtype = torch.float32) -> bool:
    """Whether an ``aggregation`` over input rows of ``width`` features of ``dtype`` runs as a sparse product."""
    return aggregation in LINEAR_AGGREGATIONS and width >= SPARSE_MIN_WIDTH and dtype in SPARSE_PRODUCT_TYPES


def block_adjacency(block: LayerBlock, num_inputs: int, dtype: torch.dtype) -> torch.Tensor:
    """The block's adjacency as a coalesced sparse COO matrix ``[num_dst, num_inputs]``: entry ``(v, u)`` is how
    many sampled edges ``u -> v`` the block has (indices checked against the shape as it is built)."""
    src, dst = block.edge_index
    counts = torch.ones(src.numel(), dtype=dtype, device=src.device)
    return torch.sparse_coo_tensor(torch.stack([dst, src]), counts, (block.num_dst, num_inputs),
                                   check_invariants=True).coalesce()


__all__ = ["LINEAR_AGGREGATIONS", "SPARSE_MIN_WIDTH", "SPARSE_PRODUCT_TYPES", "block_adjacency", "uses_sparse_product"]
