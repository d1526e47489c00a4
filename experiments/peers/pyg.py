"""The peer PyG: its sampler ``pyg`` and its system ``pyg`` (NeighborLoader + GraphSAGE), which need
``torch_geometric`` with ``pyg-lib`` or ``torch-sparse`` (``make peers``)."""

from __future__ import annotations

from experiments.peers import Peer


def _needed_by(spec) -> bool:
    return spec.system.name == "pyg" or spec.sampler.name == "pyg"


def _missing() -> str | None:
    from systems.sampling.pyg import missing_reason

    return missing_reason()


PEER = Peer("pyg", "PyG's NeighborSampler (pyg-lib or torch-sparse) and its NeighborLoader + GraphSAGE baseline",
            _needed_by, _missing)
"""PyG, registered in :data:`experiments.plugins.PEERS`."""
