"""Loaders that turn raw datasets into :class:`~suite.data.store.GraphStore` folders.

Every loader is registered in :data:`LOADERS` under the dataset names it understands and has the signature::

    loader(root: Path, out: Path, *, overwrite: bool, progress: bool, name: str) -> GraphStore

The loaders of :data:`SPLIT_LOADERS` (datasets without a fixed node split) also take ``split``
(:class:`~suite.data.loaders.node_splits.NodeSplitOptions` or None for their default protocol).

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
- ``amazon-computers``, ``coauthor-cs``, ``coauthor-physics``, ``shchur`` (any such file): Shchur et al.'s
  ``.npz`` graphs with real features, and a seeded node split (:mod:`.shchur`, :mod:`.node_splits`).
- ``facebook-page-page``: MUSAE's csv / JSON files, with a seeded node split (:mod:`.musae`).
- ``wikikg90m-v2``, ``mag240m``: OGB-LSC's published ``processed/`` arrays, without the ``ogb`` package
  (:mod:`.ogb_lsc`; MAG240M: the paper citation graph with features, labels and splits).

Example::

    from suite.data.loaders import prepare
    store = prepare("cora", "../shared/datasets/planetoid", "stores/cora")
"""

from __future__ import annotations

import os
from pathlib import Path

from suite.errors import ConfigError, DataError, describe_os_error
from suite.data.loaders.node_splits import NodeSplitOptions
from suite.data.loaders.raw_files import ANY_NAME_LOADERS, LOADERS, SPLIT_LOADERS
from suite.data.store import GraphStore


def prepare(
    name: str,
    root: str | os.PathLike,
    out: str | os.PathLike,
    *,
    overwrite: bool = False,
    progress: bool = False,
    dataset_name: str | None = None,
    split: NodeSplitOptions | None = None,
) -> GraphStore:
    """Build the store of dataset ``name`` from its raw files.

    Args:
        name: a registered dataset name (see :data:`LOADERS`).
        root: folder holding the raw files in the dataset's own layout.
        out: folder of the store to create.
        overwrite: replace an existing store at ``out`` (otherwise an existing ``out`` is an error).
        progress: show the progress output of the underlying readers.
        dataset_name: the name recorded in the store (default ``name``).
        split: the node split of a loader in :data:`SPLIT_LOADERS` (None: its default protocol, seed 0).

    Returns:
        The new store, opened.

    Raises:
        ConfigError: ``name`` is not a registered dataset, or takes no ``dataset_name`` or ``split`` options.
        DataError: a raw file is missing or malformed, or ``out`` exists without ``overwrite``.
    """
    loader = LOADERS.get(name)
    if dataset_name not in (None, name) and name not in ANY_NAME_LOADERS:
        raise ConfigError(f"--name: only the loaders {', '.join(ANY_NAME_LOADERS)} take another dataset name "
                          f"({name!r} reads the files of {name!r})")
    if split is not None and name not in SPLIT_LOADERS:
        raise ConfigError(f"node split options: only the loaders {', '.join(SPLIT_LOADERS)} draw a node split "
                          f"({name!r} has its own)")
    options = {} if split is None else {"split": split}
    try:
        return loader(Path(root), Path(out), overwrite=overwrite, progress=progress, name=dataset_name or name,
                      **options)
    except OSError as err:  # a raw file (or the output folder) that cannot be read or written
        if err.filename is None:
            raise
        raise DataError(f"{err.filename}: {describe_os_error(err)}") from None


# Registration happens on import; the modules import their heavy dependencies (PyG, ogb) lazily.
from suite.data.loaders import (  # noqa: E402,F401
    freebase, marius_layout, musae, ogb, ogb_lsc, openke, planetoid, shchur,
)

__all__ = ["ANY_NAME_LOADERS", "LOADERS", "NodeSplitOptions", "SPLIT_LOADERS", "prepare"]
