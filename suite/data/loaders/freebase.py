"""Freebase86m as DGL-KE distributes it and Marius's ``marius_preprocess --dataset freebase86m`` downloads it.

Layout (``Freebase.zip``, unpacked; ``root`` is the folder holding the files, or the folder holding
``Freebase/``):

- ``train.txt``, ``valid.txt``, ``test.txt``: one triple per line, tab-separated integer ids in the order
  ``head tail relation`` (Marius reads them with ``src_column=0, dst_column=1, edge_type_column=2``). A first
  line holding a single integer (the number of triples, as in OpenKE's ``*2id.txt``) is accepted and checked
  against the number of lines.
- optional ``entity2id.txt`` / ``relation2id.txt`` (``name<TAB>id`` lines, possibly after a count line): when
  present they fix the number of entities / relations (entities without a training edge stay isolated);
  otherwise the counts are the largest id plus one.

The triples are read in chunks through :func:`suite.data.loaders.edgelist.import_edge_list` (pyarrow's
streaming CSV reader, no id remapping, ids checked against the counts), so memory is bounded by the id range
and a chunk, not by the 338M triples. The store holds ``train_edges`` / ``valid_edges`` / ``test_edges``
``(k, 3)`` ``(src, rel, dst)`` and the CSRs of the training triples (directed, typed). PyTorch-BigGraph's
Freebase files (string MIDs, ``head relation tail``) go through ``gnnsuite datasets import`` instead
(``--relation 1 --destination 2 --id-type string``). A folder that ``marius_preprocess --dataset freebase86m``
already converted (``dataset.yaml``, ``edges/*.bin``) is read by :mod:`.marius_layout`.
"""

from __future__ import annotations

from pathlib import Path

from suite.errors import DataError
from suite.data.loaders.raw_files import LOADERS, require_files
from suite.data.loaders.edgelist import EdgeListFormat, import_edge_list
from suite.data.loaders.marius_layout import is_marius_folder, load_marius
from suite.data.store import GraphStore

SPLIT_FILES = {"train": "train.txt", "valid": "valid.txt", "test": "test.txt"}
COUNT_FILES = {"entities": "entity2id.txt", "relations": "relation2id.txt"}
_BLOCK = 1 << 24


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.readline().strip()


def count_lines(path: Path) -> int:
    """Number of non-empty lines of ``path``, read in blocks (bounded memory)."""
    lines, last = 0, b"\n"
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def count_header(path: Path) -> int | None:
    """The count on line 1 of ``path`` when that line is a single non-negative integer, else None."""
    first = _first_line(path)
    return int(first) if first.isdigit() else None


def _declared_count(path: Path, what: str) -> int:
    """Entries of an ``entity2id.txt`` / ``relation2id.txt``: its count line, checked against its lines."""
    header = count_header(path)
    lines = count_lines(path)
    if header is None:
        return lines
    if header != lines - 1:
        raise DataError(f"{path}: line 1: header says {header} {what} but {lines - 1} lines follow")
    return header


def _check_triple_count(path: Path) -> bool:
    """Whether ``path`` starts with a count line (checked against the lines that follow)."""
    header = count_header(path)
    if header is None:
        return False
    lines = count_lines(path) - 1
    if header != lines:
        raise DataError(f"{path}: line 1: header says {header} triples but {lines} lines follow")
    return True


def locate_freebase(root: Path) -> Path:
    """The folder holding Freebase's split files: ``root`` or ``root/Freebase``; DataError naming the missing file."""
    nested = root / "Freebase"
    folder = nested if not (root / SPLIT_FILES["train"]).is_file() and nested.is_dir() else root
    require_files(folder, SPLIT_FILES.values(), "Freebase86m split file (DGL-KE's Freebase.zip)")
    return folder


def load_freebase86m(root: Path, out: Path, *, overwrite: bool, progress: bool,
                     name: str = "freebase86m") -> GraphStore:
    """Build the store of Freebase86m from DGL-KE's files (see the module docstring).

    Args:
        root: folder with ``train.txt``, ``valid.txt``, ``test.txt`` (or the folder holding ``Freebase/``), or
            Marius's preprocessed folder of Freebase86m.
        out: store folder to create.
        overwrite: replace an existing store.
        progress: unused.
        name: dataset name recorded in the store.

    Returns:
        The opened store: directed, typed, CSRs over the training triples, edge splits ``(src, rel, dst)``.

    Raises:
        DataError: a file is missing or malformed (one line naming the file and line); no store is left.
    """
    if is_marius_folder(root):  # already through marius_preprocess: dataset.yaml and edges/*.bin
        return load_marius(root, out, overwrite=overwrite, progress=progress, name=name)
    del progress
    folder = locate_freebase(root)
    paths = {split: folder / file for split, file in SPLIT_FILES.items()}
    headed = {split: _check_triple_count(path) for split, path in paths.items()}
    if len(set(headed.values())) != 1:
        odd = next(split for split, has in headed.items() if has != headed["train"])
        raise DataError(f"{paths[odd]}: line 1: {'has' if headed[odd] else 'lacks'} a count line, unlike "
                        f"{paths['train']}")
    counts = {what: _declared_count(folder / file, what) if (folder / file).is_file() else None
              for what, file in COUNT_FILES.items()}
    fmt = EdgeListFormat(source=0, destination=1, relation=2, delimiter="\t", id_type="int",
                         file_format="csv", comment="", skip_lines=int(headed["train"]))
    source = {"loader": "freebase86m", "layout": "DGL-KE Freebase.zip: 'head<TAB>tail<TAB>relation' ids",
              "root": str(folder),
              "count_files": sorted(file for file in COUNT_FILES.values() if (folder / file).is_file())}
    return import_edge_list(paths["train"], out, fmt=fmt, valid=paths["valid"], test=paths["test"], remap=False,
                            name=name, overwrite=overwrite, num_nodes=counts["entities"],
                            num_relations=counts["relations"], source_fields=source)


LOADERS.register("freebase86m", load_freebase86m)
