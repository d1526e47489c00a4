"""What every encoder shares: the forward contract and the builder signature.

A model is built by a registered builder ``build(spec: ModelSpec, in_dim: int, out_dim: int) -> nn.Module`` and
called as ``model(x, sample) -> logits``, where ``x`` holds the features of ``sample.input_nodes`` (in that order)
and the logits have one row per root of ``sample``, in order. Models that read no neighbours set
``uses_neighbours = False``; systems may then sample without hops (``sample.blocks == ()``).

Each :class:`~systems.sampling.base.LayerBlock` says where its destinations lie among its input rows
(``dst_start``: first in the layer-wise layout, last in DENSE's), and the sample says where its roots lie
(``root_start``), so every encoder consumes both layouts through the same loop.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from suite.config import ModelSpec
from suite.errors import ConfigError
from systems.sampling.base import SampledSubgraph

ModelBuilder = Callable[[ModelSpec, int, int], nn.Module]


def root_rows(x: torch.Tensor, sample: SampledSubgraph) -> torch.Tensor:
    """The rows of ``x`` (indexed like ``sample.input_nodes``) that belong to the roots, in root order."""
    return x[sample.root_start : sample.root_start + len(sample.roots)]


def check_layers(spec: ModelSpec, minimum: int = 1) -> None:
    """Raise :class:`ConfigError` when ``spec.num_layers < minimum`` (naming the encoder)."""
    if spec.num_layers < minimum:
        raise ConfigError(f"model.num_layers: {spec.encoder} needs at least {minimum} layer(s), got {spec.num_layers}")


def layer_dims(in_dim: int, hidden_dim: int, out_dim: int, num_layers: int) -> list[tuple[int, int]]:
    """``(input, output)`` widths of ``num_layers`` stacked layers: ``in -> hidden -> ... -> hidden -> out``."""
    widths = [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]
    return list(zip(widths[:-1], widths[1:]))


__all__ = ["ModelBuilder", "check_layers", "layer_dims", "root_rows"]
