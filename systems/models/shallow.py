"""The shallow encoder of link prediction: a node's representation is its own learnable embedding row.

Registered in :data:`suite.registry.MODELS` as ``shallow``. It reads no neighbours (``uses_neighbours = False``;
``model.num_layers`` must be 0 and ``model.fanouts`` empty) and returns the roots' rows of its input unchanged,
so with ``model.learnable_embeddings`` the decoder scores the embedding table's rows directly (Marius's
knowledge-graph embedding models: DistMult, ComplEx).
"""

from __future__ import annotations

import torch
from torch import nn

from suite.config import ModelSpec
from suite.errors import ConfigError
from suite.registry import MODELS
from systems.models.encoder import root_rows
from systems.sampling.sampler import SampledSubgraph


class Shallow(nn.Module):
    """Identity over the roots' rows: ``model(x, sample) = x[roots]``."""

    uses_neighbours = False

    def forward(self, x: torch.Tensor, sample: SampledSubgraph) -> torch.Tensor:
        """The rows of ``x`` that belong to ``sample``'s roots, in root order."""
        return root_rows(x, sample)


@MODELS.register("shallow")
def build_shallow(spec: ModelSpec, in_dim: int, out_dim: int) -> Shallow:
    """Build :class:`Shallow`; needs ``num_layers: 0`` and ``in_dim == out_dim``."""
    if spec.num_layers != 0:
        raise ConfigError(f"model.num_layers: the shallow encoder has no layers; set num_layers: 0 and fanouts: [] "
                          f"(got {spec.num_layers})")
    if in_dim != out_dim:
        raise ConfigError(f"model.embedding_dim: the shallow encoder passes its input rows through: input width "
                          f"{in_dim} != output width {out_dim} (learnable embeddings have width embedding_dim)")
    return Shallow()


__all__ = ["Shallow", "build_shallow"]
