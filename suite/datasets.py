"""Resolve a run spec's ``dataset`` section to an opened :class:`~suite.data.GraphStore`.

Registered dataset names (``DATASETS``):

- ``synthetic``: a generator preset (``preset``) with parameter overrides (``params``), generated once into
  ``cache_dir/<preset>-<hash of the generator config>`` and reused;
- ``store``: an existing store folder given as ``root``;
- every raw-data loader of :mod:`suite.data.loaders` (``cora``, ``fb15k237``, ``ogbn-arxiv``...): prepared once
  from ``root`` into ``cache_dir/<name>-<hash of root>`` (of root and ``split`` when the spec gives a node split,
  for the loaders that draw one: Shchur's graphs, Facebook Page-Page) and reused.

Preparation waits for and holds a lock on the cache entry (removed afterwards), so concurrent runs of a grid
prepare a dataset once; a failed or killed preparation leaves neither a partial store nor a lock file behind (the
next attempt removes what a killed one left, see :func:`suite.io.staged_directory`).
Errors name the spec field (``dataset.root: ...``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from suite.config import DatasetSpec
from suite.errors import ConfigError, DataError, describe_os_error
from suite.data import GraphStore
from suite.io import exclusive_lock
from suite.registry import DATASETS


REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_datasets_dir() -> Path:
    """The project's shared raw datasets: ``$GNNSUITE_SHARED/datasets``, else ``shared/datasets`` beside the checkout.

    Experiments pass it as ``dataset.root`` instead of the specs' relative ``../shared/datasets/...`` (which only
    resolves from a checkout placed beside ``shared/``).
    """
    return Path(os.environ.get("GNNSUITE_SHARED", REPO_ROOT.parent / "shared")) / "datasets"


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:10]


@contextlib.contextmanager
def cache_lock(entry: Path) -> Iterator[None]:
    """Wait for and hold the lock of cache entry ``entry`` (``.<name>.cache.lock``, removed on release; the
    lock of a process that died is taken over)."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(entry.with_name(f".{entry.name}.cache.lock"), f"dataset cache entry {entry}", wait=True):
            yield
    except PermissionError as err:
        raise DataError(f"{entry.parent}: cannot write the cache entry {entry.name} ({describe_os_error(err)})") from None


def cached_store(entry: str | os.PathLike, build: Callable[[Path], object]) -> GraphStore:
    """Open the store at ``entry`` (a cache entry: a generated, prepared or partitioned store), building it first
    with ``build(entry)`` if it is not there.

    Concurrent callers (threads or processes) wait for each other on the entry's lock, so the store is built once
    and nobody sees it half-built; a build that failed or was killed leaves nothing behind for the next caller.
    """
    entry = Path(entry)
    with cache_lock(entry):
        if not (entry / "metadata.json").exists():
            build(entry)
    store = GraphStore.open(entry)
    # Checked now, not at its first array: a scan that must read the files (a store written before the checks were
    # cached) then happens before a disk-based system drops them from the page cache to measure its reads.
    store.check_before_use()
    return store


_cached = cached_store


@DATASETS.register("synthetic")
def synthetic_dataset(spec: DatasetSpec, progress: bool = False) -> GraphStore:
    """Generate (once) and open the synthetic graph of ``spec.preset`` with ``spec.params`` overrides."""
    from suite.data.synthetic import PRESETS, generate

    preset = spec.preset or "tiny"
    try:
        config = PRESETS.get(preset)
    except ConfigError as err:
        raise ConfigError(f"dataset.preset: {err}") from None
    unknown = sorted(set(spec.params) - {f.name for f in dataclasses.fields(config)})
    if unknown:
        raise ConfigError(f"dataset.params.{unknown[0]}: unknown generator parameter")
    try:
        config = dataclasses.replace(config, **spec.params)
    except ConfigError as err:
        raise ConfigError(f"dataset.params: {err}") from None
    entry = Path(spec.cache_dir) / f"{preset}-{_digest(dataclasses.asdict(config))}"
    return _cached(entry, lambda out: generate(config, out, progress=progress))


@DATASETS.register("store")
def existing_store(spec: DatasetSpec, progress: bool = False) -> GraphStore:
    """Open the store folder ``spec.root``."""
    if spec.root is None:
        raise ConfigError("dataset.root: required for dataset 'store' (the store folder)")
    try:
        return GraphStore.open(spec.root)
    except DataError as err:
        raise DataError(f"dataset.root: {err}") from None


def _split_options(spec: DatasetSpec):
    """``spec.split`` as the loaders' :class:`~suite.data.loaders.node_splits.NodeSplitOptions` (None when absent)."""
    from suite.data.loaders.node_splits import NodeSplitOptions

    if spec.split is None:
        return None
    return NodeSplitOptions(seed=spec.split.seed, per_class=spec.split.per_class, fractions=spec.split.fractions,
                            component=spec.split.component)


def _loader_dataset(name: str) -> Callable[[DatasetSpec, bool], GraphStore]:
    def resolve(spec: DatasetSpec, progress: bool = False) -> GraphStore:
        from suite.data.loaders import prepare

        if spec.root is None:
            raise ConfigError(f"dataset.root: required for dataset {name!r} (the folder of its raw files)")
        root = Path(spec.root).expanduser().resolve()
        if not root.is_dir():
            raise DataError(f"dataset.root: {spec.root}: folder not found")
        split = _split_options(spec)
        # A drawn split is part of the store, so of its cache entry (entries without one keep their old names).
        key = str(root) if spec.split is None else [str(root), spec.split.model_dump(
            mode="json", exclude={"component"} if spec.split.component == "all" else None)]  # as before the field
        entry = Path(spec.cache_dir) / f"{name}-{_digest(key)}"
        try:
            return _cached(entry, lambda out: prepare(name, root, out, progress=progress, split=split))
        except DataError as err:
            raise DataError(f"dataset.root: {err}") from None
        except ConfigError as err:
            raise ConfigError(f"dataset.split: {err}") from None

    resolve.__doc__ = f"Prepare (once) and open dataset {name!r} from the raw files in ``spec.root``."
    return resolve


def _register_loaders() -> None:
    from suite.data.loaders import LOADERS

    for name in LOADERS.names():
        if name not in DATASETS:
            DATASETS.register(name, _loader_dataset(name))


_register_loaders()


def open_dataset(spec: DatasetSpec, progress: bool = False) -> GraphStore:
    """The store a spec's ``dataset`` section names (generated or prepared on first use)."""
    return DATASETS.get(spec.name)(spec, progress)
