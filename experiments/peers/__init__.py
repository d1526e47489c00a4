"""Outside systems the experiments compare the suite with (issue 17), and what each needs to run here.

- PyG (``torch_geometric`` with ``pyg-lib`` or ``torch-sparse``): the sampler ``pyg``
  (:mod:`systems.sampling.pyg`) and the system ``pyg`` (:mod:`systems.pyg_baseline`), rows of the sampling,
  pipeline and disk experiments;
- PyTorch-BigGraph (``torchbiggraph`` 1.0.0, in its own environment ``.venv-pbg``: :mod:`experiments.peers.pbg`,
  driven through :mod:`experiments.peers.pbg_driver`) and PyKEEN (``pykeen`` 1.11, the extra ``peers``:
  :mod:`experiments.peers.pykeen_driver`): link prediction, ``experiments/link_prediction_peers.py``.

``make peers`` installs them (the prebuilt torch-sparse/torch-scatter wheels of ``../shared/wheels`` when that
folder is there). A peer that is not installed is never an error of an experiment: its rows are recorded as
``skipped`` with the reason (:func:`spec_skip_reason`, :func:`split_runnable`).
"""

from __future__ import annotations

from collections.abc import Iterable


def spec_skip_reason(spec) -> str | None:
    """Why a run spec needs a peer that is missing here (None when it can run): the ``pyg`` system or sampler
    without PyG's sampling backend."""
    from systems.sampling.pyg import missing_reason

    if spec.system.name == "pyg" or spec.sampler.name == "pyg":
        return missing_reason()
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


__all__ = ["spec_skip_reason", "split_runnable"]
