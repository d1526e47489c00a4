"""Helpers shared by the loaders: raw-file checks, provenance records and edge chunking."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from suite.errors import DataError, describe_os_error
from suite.data.csr import DEFAULT_CHUNK_EDGES, EdgeChunk
from suite.data.store import GraphStore
from suite.io import file_checksum
from suite.registry import Registry

# The loaders by dataset name (the modules of this package register themselves; see the package docstring).
LOADERS = Registry[Callable[..., GraphStore]]("dataset loader")
ANY_NAME_LOADERS = ("openke", "marius", "shchur")
"""Loaders of a layout rather than of one dataset: ``--name`` (``dataset_name``) names what they read."""
SPLIT_LOADERS = ("shchur", "amazon-computers", "coauthor-cs", "coauthor-physics", "facebook-page-page")
"""Loaders of datasets without a fixed node split: they draw one and take its options (``split``)."""


def require_files(root: Path, names: Iterable[str], what: str) -> list[Path]:
    """Paths of ``names`` inside ``root``; raises :class:`DataError` naming the first missing one.

    Args:
        root: folder of the raw files.
        names: file names relative to ``root``.
        what: description of the files for the message, e.g. ``"Planetoid raw file of cora"``.
    """
    if not root.is_dir():
        raise DataError(f"{root}: raw data folder does not exist (expected the {what}s in it)")
    paths = [root / name for name in names]
    for path in paths:
        if not path.is_file():
            raise DataError(f"{path}: missing ({what})")
    return paths


def read_raw_bytes(path: Path) -> bytes:
    """The bytes of raw file ``path``; raises :class:`DataError` naming it when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as err:
        raise DataError(f"{path}: cannot read ({describe_os_error(err)})") from None


def file_records(root: Path, paths: Iterable[Path], checksum: bool = True) -> dict[str, dict[str, Any]]:
    """Provenance of raw files: ``{relative path: {"bytes": size, "checksum": "sha256:..."}}``.

    Args:
        root: folder the recorded paths are relative to.
        paths: the raw files read.
        checksum: also hash each file (skip for raw datasets of many GiB, where sizes must do).
    """
    records: dict[str, dict[str, Any]] = {}
    for path in sorted(paths):
        try:
            record: dict[str, Any] = {"bytes": path.stat().st_size}
            if checksum:
                record["checksum"] = file_checksum(path)
        except OSError as err:
            raise DataError(f"{path}: cannot read ({describe_os_error(err)})") from None
        records[str(path.relative_to(root))] = record
    return records


def raw_source(loader: str, root: Path, paths: Iterable[Path], *, checksum: bool = True,
               **described: Any) -> dict[str, Any]:
    """The provenance record ``metadata["source"]`` of a store built from the raw files ``paths`` under ``root``:
    the loader, how it read them (``described``: ``format``, ``layout``, ``reader``...), the folder and the
    files' :func:`file_records`."""
    return {"loader": loader, **described, "root": str(root), "files": file_records(root, paths, checksum=checksum)}


def edge_chunks(
    src: np.ndarray, dst: np.ndarray, rel: np.ndarray | None = None, chunk_edges: int = DEFAULT_CHUNK_EDGES
) -> Iterator[EdgeChunk]:
    """Slice aligned edge arrays into :class:`EdgeChunk` views of at most ``chunk_edges`` edges (no copies)."""
    for start in range(0, len(src), chunk_edges):
        end = start + chunk_edges
        yield EdgeChunk(src[start:end], dst[start:end], None if rel is None else rel[start:end])


def check_ids(values: np.ndarray, high: int, where: str, what: str) -> None:
    """Raise :class:`DataError` naming ``where`` if any of ``values`` is outside ``[0, high)``.

    Args:
        values: integer ids.
        high: exclusive upper bound.
        where: the file (or file and field) the values come from.
        what: what the ids are, e.g. ``"node id"``.
    """
    values = np.asarray(values)
    if values.size == 0:
        return
    bad = (values < 0) | (values >= high)
    if bad.any():
        position = int(np.flatnonzero(bad.reshape(-1))[0])
        value = int(values.reshape(-1)[position])
        raise DataError(f"{where}: {what} {value} at position {position} is out of range [0, {high})")


def npy_array(path: Path, what: str) -> np.ndarray:
    """``path`` as a read-only memory map (nothing is read yet); DataError naming it when it is not a ``.npy``.

    Args:
        path: the file.
        what: what it holds, for the message when it is missing.
    """
    if not path.is_file():
        raise DataError(f"{path}: missing ({what})")
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise DataError(f"{path}: not a readable .npy file ({' '.join(str(err).split())[:160]})") from None


def npy_blocks(path: Path, rows: int, axis: int = 0) -> Iterator[np.ndarray]:
    """Copies of consecutive blocks of at most ``rows`` entries along ``axis`` of the ``.npy`` file ``path``.

    Each block is read through a memory map opened for that block alone and closed after it, so the pages read
    leave the process with it: the resident memory stays at about one block, however large the file.
    """
    length = npy_array(path, "array").shape[axis]
    for start in range(0, length, rows):
        mapped = np.load(path, mmap_mode="r", allow_pickle=False)
        block = np.array(mapped[(slice(None),) * axis + (slice(start, start + rows),)])
        del mapped
        yield block
