"""The experiments' registration tables: the figures ``gnnsuite reproduce`` runs and ``gnnsuite report`` reads, and
the peers (outside systems) the experiments compare the suite with.

Each entry is ``name: "module:attribute"``, imported the first time it is asked for (``names()`` and ``in`` import
nothing). A new figure is one module (its ``run``, plots, claims, table specs and ``FIGURE``) plus one line of
:data:`FIGURE_TABLE`; a new peer one module (its ``PEER``) plus one line of :data:`PEER_TABLE`.
"""

from __future__ import annotations

from suite.registry import Registry

FIGURE_TABLE: dict[str, str] = {
    "sampling": "experiments.figures.sampling:FIGURE",
    "pipeline": "experiments.figures.pipeline_speed:FIGURE",
    "pipeline_validation": "experiments.figures.pipeline_validation:FIGURE",  # runs and reads its own validation grid
    "link_prediction": "experiments.figures.link_prediction_grid:FIGURE",
    "link_prediction_peers": "experiments.figures.link_prediction_peers:FIGURE",
    "disk_nc": "experiments.figures.disk_nc:FIGURE",
    "disk_lp": "experiments.figures.disk_lp:FIGURE",
    "disk_simulation": "experiments.figures.disk_simulation:FIGURE",  # reads the runs of disk_nc and disk_lp
    "buffer_io": "experiments.figures.buffer_io:FIGURE",
    "work_depth": "experiments.figures.work_depth:FIGURE",
    "async_gnn": "experiments.figures.async_gnn:FIGURE",
    "cache_vs_buffer": "experiments.figures.cache_vs_buffer:FIGURE",
    "cost": "experiments.figures.cost:FIGURE",  # last: reads the runs of the pipeline and disk_nc jobs
}
"""Figure name -> its module's :class:`~experiments.common.Figure`, in the order ``reproduce`` runs them (a job
that reads the runs of others comes after them) and the report lists their claims and tables."""

FIGURES: Registry = Registry("figure", table=FIGURE_TABLE)

PEER_TABLE: dict[str, str] = {
    "pyg": "experiments.peers.pyg:PEER",
    "pbg": "experiments.peers.pbg:PEER",
    "pykeen": "experiments.peers.pykeen:PEER",
}
"""Peer name -> its module's :class:`~experiments.peers.Peer`."""

PEERS: Registry = Registry("peer", table=PEER_TABLE)


def figure_names() -> list[str]:
    """The registered figures' names, in :data:`FIGURE_TABLE` order (imports nothing)."""
    return list(FIGURE_TABLE)


def figures() -> list:
    """The registered figures (:class:`~experiments.common.Figure`), in :data:`FIGURE_TABLE` order."""
    return [FIGURES.get(name) for name in figure_names()]


__all__ = ["FIGURES", "FIGURE_TABLE", "PEERS", "PEER_TABLE", "figure_names", "figures"]
