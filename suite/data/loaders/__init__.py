"""Loaders that turn raw datasets into :class:`~suite.data.store.GraphStore` folders.

Every loader is registered in :data:`LOADERS` under the dataset names it understands and has the signature::

    loader(root: Path, out: Path, *, overwrite: bool, progress: bool, name: str) -> GraphStore

``root`` holds the raw files (in the dataset's own layout), ``out`` is the store to create. A loader checks the
raw files first, writes through :func:`~suite.data.store.create_store` (a staging folder renamed into place
only on success, so an error or interrupt never leaves a partial store) and records where the data came from
under ``metadata["source"]`` (loader, raw files and their sizes or checksums).

Registered datasets:

- ``cora``, ``citeseer``, ``pubmed``: Planetoid raw files ``ind.<name>.*`` (:mod:`.planetoid`).
- ``openke`` (any benchmark folder), ``fb15k``, ``fb15k237``, ``wn18``, ``wn18rr``, ``yago3-10``: OpenKE id files
  ``train2id.txt`` ... (:mod:`.openke`).
- ``ogbn-arxiv``, ``ogbn-products``, ``ogbn-papers100M``, ``ogbl-collab``, ``ogbl-ppa``, ``ogbl-ddi``,
  ``ogbl-citation2``, ``ogbl-wikikg2``: OGB datasets already on disk, read through the ``ogb`` package
  (:mod:`.ogb`).
- ``freebase86m``: DGL-KE's ``Freebase.zip`` (``train.txt`` ... ``head<TAB>tail<TAB>relation``), as Marius
  downloads it (:mod:`.freebase`), or Marius's preprocessed folder of it.
- ``marius``: any ``marius_preprocess`` link-prediction output (``dataset.yaml``, ``edges/*.bin``;
  :mod:`.marius_layout`).
- ``wikikg90m-v2``, ``mag240m``: OGB-LSC's published ``processed/`` arrays, without the ``ogb`` package
  (:mod:`.ogb_lsc`; MAG240M: the paper citation graph with features, labels and splits).

Example::

    from suite.data.loaders import prepare
    store = prepare("cora", "../shared/datasets/planetoid", "stores/cora")
"""

from __future__ import annotations

import os
from pathlib import Path

from suite.data.loaders.raw_files import ANY_NAME_LOADERS, LOADERS
from suite.data.store import GraphStore


def prepare(
    name: str,
    root: str | os.PathLike,
    out: str | os.PathLike,
    *,
    overwrite: bool = False,
    progress: bool = False,
    dataset_name: str | None = None,
) -> GraphStore:
    """Build the store of dataset ``name`` from its raw files.

    Args:
        name: a registered dataset name (see :data:`LOADERS`).
        root: folder holding the raw files in the dataset's own layout.
        out: folder of the store to create.
        overwrite: replace an existing store at ``out`` (otherwise an existing ``out`` is an error).
        progress: show the progress output of the underlying readers.
        dataset_name: the name recorded in the store (default ``name``).

    Returns:
        The new store, opened.

    Raises:
        ConfigError: ``name`` is not a registered dataset.
        DataError: a raw file is missing or malformed, or ``out`` exists without ``overwrite``.
    """
    loader = LOADERS.get(name)
    if dataset_name not in (None, name) and name not in ANY_NAME_LOADERS:
        from suite.errors import ConfigError

        raise ConfigError(f"--name: only the 'openke' loader and the 'marius' loader take another dataset name "
                          f"({name!r} reads the files of {name!r})")
    try:
        return loader(Path(root), Path(out), overwrite=overwrite, progress=progress, name=dataset_name or name)
    except OSError as err:  # a raw file (or the output folder) that cannot be read or written
        if err.filename is None:
            raise
        from suite.errors import DataError

        raise DataError(f"{err.filename}: {err.strerror or err}") from None


# Registration happens on import; the modules import their heavy dependencies (PyG, ogb) lazily.
from suite.data.loaders import freebase, marius_layout, ogb, ogb_lsc, openke, planetoid  # noqa: E402,F401

__all__ = ["ANY_NAME_LOADERS", "LOADERS", "prepare"]
