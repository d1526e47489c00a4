"""Outside systems the experiments compare the suite with (issue 17), and what each needs to run here.

A peer is one module holding a :class:`Peer` (``PEER``) and one line of :data:`experiments.plugins.PEERS`: what it
is, which run specs need it (:meth:`Peer.needs`) and why it may be missing here (:meth:`Peer.missing_reason`).

- PyG (``torch_geometric`` with ``pyg-lib`` or ``torch-sparse``; :mod:`experiments.peers.pyg`): the sampler ``pyg``
  (:mod:`systems.sampling.pyg`) and the system ``pyg`` (:mod:`systems.pyg_baseline`), rows of the sampling,
  pipeline and disk experiments;
- PyTorch-BigGraph (``torchbiggraph`` 1.0.0, in its own environment ``.venv-pbg``; :mod:`experiments.peers.pbg`,
  driving :mod:`experiments.peers.pbg_driver`) and PyKEEN (``pykeen`` 1.11, the extra ``peers``;
  :mod:`experiments.peers.pykeen`, driving :mod:`experiments.peers.pykeen_driver`): link prediction, their
  configurations (``Peer.link_prediction``, :mod:`experiments.peers.lp_configurations`) run by
  :mod:`experiments.figures.link_prediction_peers`, which checks them per configuration.

``make peers`` installs them (the prebuilt torch-sparse/torch-scatter wheels of ``../shared/wheels`` when that
folder is there). A peer that is not installed is never an error of an experiment: its rows are recorded as
``skipped`` with the reason (:func:`spec_skip_reason`, :func:`split_runnable`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Peer:
    """An outside system the experiments run beside the suite's.

    Attributes:
        name: its name (its line of :data:`experiments.plugins.PEERS`).
        what: what it is and what it needs installed.
        needed_by: ``needed_by(spec) -> bool``: whether a run spec needs it.
        missing: ``missing() -> str | None``: why it cannot run here (None when it can).
        link_prediction: its configurations in the link-prediction comparison
            (:class:`experiments.peers.lp_configurations.Configuration`; the peers experiment runs those of every
            registered peer).
    """

    name: str
    what: str
    needed_by: Callable[[object], bool]
    missing: Callable[[], str | None]
    link_prediction: tuple[Any, ...] = ()

    def needs(self, spec) -> bool:
        """Whether the run spec ``spec`` needs this peer."""
        return self.needed_by(spec)

    def missing_reason(self) -> str | None:
        """Why this peer cannot run here (None when it can)."""
        return self.missing()


def spec_skip_reason(spec) -> str | None:
    """Why a run spec needs a peer that is missing here (None when it can run): the first registered peer it needs
    whose :meth:`Peer.missing_reason` is not None."""
    from experiments.plugins import PEERS, PEER_TABLE

    for name in PEER_TABLE:
        peer = PEERS.get(name)
        if peer.needs(spec):
            reason = peer.missing_reason()
            if reason is not None:
                return reason
    return None


def split_runnable(specs: Iterable) -> tuple[list, list[tuple[object, str]]]:
    """``(runnable specs, [(spec, reason), ...] of those whose peer is missing)``, in order."""
    runnable, skipped = [], []
    for spec in specs:
        reason = spec_skip_reason(spec)
        if reason is None:
            runnable.append(spec)
        else:
            skipped.append((spec, reason))
    return runnable, skipped


__all__ = ["Peer", "spec_skip_reason", "split_runnable"]
