"""What every encoder shares: the forward contract and the builder signature.

A model is built by a registered builder ``build(spec: ModelSpec, in_dim: int, out_dim: int) -> nn.Module`` and
called as ``model(x, sample) -> logits``, where ``x`` holds the features of ``sample.input_nodes`` (in that order)
and the logits have one row per root of ``sample``, in order. Models that read no neighbours set
``uses_neighbours = False``; systems may then sample without hops (``sample.blocks == ()``).

Each :class:`~systems.sampling.sampler.LayerBlock` says where its destinations lie among its input rows
(``dst_start``: first in the layer-wise layout, last in DENSE's), and the sample says where its roots lie
(``root_start``), so every encoder consumes both layouts through the same loop.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from suite.config import ModelSpec
from suite.errors import ConfigError
from suite.registry import MODELS
from systems.sampling.sampler import LayerBlock, SampledSubgraph

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




class BlockStack(nn.Module):
    """A stack of message-passing layers, one per sampled block; activation and dropout between layers.

    Subclasses fill ``self.convs`` and implement :meth:`apply_layer`; the loop over blocks, the check that the
    sample has one block per layer, and the activation/dropout between layers (none after the last) live here.

    Args:
        dropout: dropout probability between layers.
        activation: the non-linearity between layers.
    """

    uses_neighbours = True
    input_dropout = 0.0
    """Dropout probability on the input rows of the first layer (``model.input_dropout``; set by
    :func:`set_input_dropout`)."""

    def __init__(self, dropout: float, activation: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__()
        self.convs = nn.ModuleList()
        self.dropout = dropout
        self.activation = activation

    def apply_layer(self, conv: nn.Module, x: torch.Tensor, block: LayerBlock) -> torch.Tensor:
        """One layer: the destination rows of ``block`` computed from all its input rows ``x``."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, sample: SampledSubgraph) -> torch.Tensor:
        """Logits ``[len(sample.roots), out_dim]`` from the features ``x`` of ``sample.input_nodes``."""
        if len(sample.blocks) != len(self.convs):
            raise ValueError(
                f"{type(self).__name__} has {len(self.convs)} layers but the sample has {len(sample.blocks)} blocks"
            )
        last = len(self.convs) - 1
        x = F.dropout(x, p=self.input_dropout, training=self.training)
        for layer, (conv, block) in enumerate(zip(self.convs, sample.blocks)):
            x = self.apply_layer(conv, x, block)
            if layer < last:
                x = F.dropout(self.activation(x), p=self.dropout, training=self.training)
        return x

    def reset_parameters(self) -> None:
        """Re-initialize every layer."""
        for conv in self.convs:
            conv.reset_parameters()


def set_input_dropout(model: nn.Module, spec: ModelSpec) -> nn.Module:
    """Give ``model`` the input dropout ``spec.input_dropout`` (encoders that apply one declare an
    ``input_dropout`` attribute); ConfigError naming the field when a non-zero one would be ignored."""
    if hasattr(model, "input_dropout"):
        model.input_dropout = spec.input_dropout
    elif spec.input_dropout > 0:
        raise ConfigError(f"model.input_dropout: the encoder {spec.encoder!r} applies no input dropout; "
                          f"got {spec.input_dropout}")
    return model


def check_normalization(model: nn.Module, spec: ModelSpec) -> nn.Module:
    """``model``, or ConfigError naming ``model.gcn_normalization`` when it asks for a normalization by degree that
    no module of ``model`` applies (only GCN layers normalize by degree)."""
    if spec.gcn_normalization != "row" and not any(getattr(m, "uses_degrees", False) for m in model.modules()):
        raise ConfigError(f"model.gcn_normalization: only the gcn encoder normalizes by degree; the encoder "
                          f"{spec.encoder!r} would ignore {spec.gcn_normalization!r}")
    return model


def attach_degrees(model: nn.Module | None, graph) -> None:
    """Give every module of ``model`` that normalizes by degree (``uses_degrees``) the degrees of ``graph`` (a
    :class:`~systems.sampling.sampler.SamplingGraph`: its rows' neighbour counts, on the model's device; None
    detaches them)."""
    if model is None:
        return
    users = [module for module in model.modules() if getattr(module, "uses_degrees", False)]
    if not users:
        return
    degree = None
    if graph is not None:
        device = next(model.parameters()).device
        degree = (graph.indptr[1:] - graph.indptr[:-1]).to(device)
    for module in users:
        module.node_degree = degree


def build_model(spec: ModelSpec, in_dim: int, out_dim: int) -> nn.Module:
    """Build the registered model ``spec.encoder`` (raises ConfigError naming the known ones if unknown), with
    its input dropout (:func:`set_input_dropout`) and its normalization checked (:func:`check_normalization`)."""
    return set_input_dropout(check_normalization(MODELS.get(spec.encoder)(spec, in_dim, out_dim), spec), spec)


__all__ = ["BlockStack", "ModelBuilder", "attach_degrees", "build_model", "check_layers", "check_normalization",
           "layer_dims", "root_rows", "set_input_dropout"]
