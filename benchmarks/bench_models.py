"""GraphSAGE's mean aggregation: PyG's edge-list path against the suite's sparse-dense product.

``GraphSAGELayer`` times one ``SAGEConv`` layer (mean aggregation) over a random bipartite block of
:data:`NUM_DST` destinations with :data:`FANOUT` in-edges each from :data:`NUM_SRC` input rows, at a feature width
of 128 (a hidden layer, the synthetic presets) and 8,415 (Coauthor Physics' first layer):

- ``edge_list``: ``SAGEConv(...)((x, x_dst), edge_index)``, PyG's message passing, which gathers one input row per
  edge before it averages them (the path before the change);
- ``sparse_product``: :class:`systems.models.graphsage.GraphSAGE`'s path, the block's adjacency
  (:func:`~systems.models.graphsage.block_adjacency`) times the input rows.

``time_evaluate`` is a forward without gradients (an evaluation batch), ``time_train`` a forward and the backward
of the layer's weights (the first layer: features need no gradient). Both variants compute the same layer
(``tests/test_benchmarks.py`` checks it); the ratio of their times is what the benchmark is for.
"""

from __future__ import annotations

import torch

from systems.models.graphsage import BlockSAGEConv, block_adjacency
from systems.sampling.sampler import LayerBlock

NUM_SRC = 20_000
NUM_DST = 2_000
FANOUT = 10
OUT_DIM = 64


class GraphSAGELayer:
    """One mean-aggregation ``SAGEConv`` layer over a random block, ``variant`` x feature ``width``."""

    params = [["edge_list", "sparse_product"], [128, 8415]]
    param_names = ["variant", "width"]
    timeout = 300.0
    num_src = NUM_SRC
    num_dst = NUM_DST
    fanout = FANOUT
    out_dim = OUT_DIM

    def setup(self, variant: str, width: int) -> None:
        """Random input rows and block (destinations first among the input rows); one call first."""
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(self.num_src, width, generator=generator)
        dst = torch.arange(self.num_dst).repeat_interleave(self.fanout)
        src = torch.randint(self.num_src, (len(dst),), generator=generator)
        self.block = LayerBlock(torch.arange(self.num_src), self.num_dst, torch.stack([src, dst]))
        torch.manual_seed(0)
        self.conv = BlockSAGEConv(width, self.out_dim, aggr="mean")
        self.time_train(variant, width)

    def forward(self, variant: str) -> torch.Tensor:
        """The layer's output for the destinations, by ``variant``."""
        x_dst = self.block.dst_rows(self.x)
        if variant == "edge_list":
            return self.conv((self.x, x_dst), self.block.edge_index, size=(self.num_src, self.num_dst))
        return self.conv((self.x, x_dst), block_adjacency(self.block, self.num_src, self.x.dtype))

    def time_evaluate(self, variant: str, width: int) -> None:
        """Forward without gradients."""
        with torch.no_grad():
            self.forward(variant)

    def time_train(self, variant: str, width: int) -> None:
        """Forward and the backward of the layer's weights."""
        torch.autograd.grad(self.forward(variant).square().sum(), list(self.conv.parameters()))
