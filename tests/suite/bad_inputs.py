"""The sweep of 100 bad inputs (issue 20): commands a new user would type, each with one thing wrong.

Every case is a ``gnnsuite`` command line over inputs built for it in its own folder: a store with an id out of
range, NaN features or a corrupted bucket, raw files of a loader with a bad line, a spec with a bad field, an output
that exists or that another process is writing. Each is run in a process of its own and classified:

``clean``      exit status 2, one line on stderr (``gnnsuite: error: ...``, naming the file or field the case
               expects), and nothing half-written: no new file or folder in the case's folder (no staging folder,
               lock file, store or run folder), except a run folder with a complete ``summary.json`` where the fault
               can only show while training (a bucket whose checksum fails when the disk system reads it; a loss
               that becomes NaN: status ``diverged``);
``traceback``  an exception escaped (a Python traceback on stderr);
``crash``      the process was killed by a signal (a segmentation fault in a compiled kernel);
``accepted``   exit status 0: the bad input was taken as good;
``dirty``      the one-line error, but something half-written was left behind;
``other``      anything else (another exit status, several lines, the expected file or field not named, a
               timeout).

Usage::

    python tests/suite/bad_inputs.py [--subprocess] [--json FILE] [--only NAME ...]

By default the cases run in processes forked from a fork server that imported the suite once (a second or less per
case); ``--subprocess`` starts ``python -m suite`` for each, exactly as a user would (several seconds per case).
The compiled kernels are left unchecked (``GNNSUITE_KERNEL_BOUNDSCHECK=0``, as users run them), so an id that
reached one would crash. ``tests/suite/test_bad_input_sweep.py`` runs this script and requires 100 clean cases.
The exit status is 0 when every case is clean, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]

NOBODY = 65534
CASE_TIMEOUT_S = 300
CATEGORIES = ("clean", "traceback", "crash", "accepted", "dirty", "other")


@dataclasses.dataclass
class Case:
    """One bad input.

    Attributes:
        name: a short unique name.
        argv: the ``gnnsuite`` arguments.
        names: what the one-line error must contain (the file or field at fault).
        env: extra environment variables.
        as_nobody: run as an unprivileged user when the sweep runs as root (permission cases; root reads
            everything).
        run_status: a run folder may remain, with a ``summary.json`` of this status (faults only training shows).
        cwd: where the command runs (default: the case's folder).
    """

    name: str
    argv: list[str]
    names: str
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    as_nobody: bool = False
    run_status: str | None = None
    cwd: Path | None = None


# ---------------------------------------------------------------------------------------------- inputs
class Inputs:
    """Builds each case's inputs under ``base`` from a few templates made once."""

    def __init__(self, base: Path):
        from suite.data.synthetic import PRESETS, generate

        self.base = base
        self.templates = base / "_templates"
        self.templates.mkdir(parents=True)
        config = dataclasses.replace(PRESETS.get("tiny"), num_nodes=200)
        self.tiny = generate(config, self.templates / "tiny").path
        self.openke = self.templates / "openke"
        self._write_openke(self.openke)
        planetoid = Path(os.environ.get("GNNSUITE_SHARED", REPO_ROOT.parent / "shared")) / "datasets" / "planetoid"
        self.planetoid = planetoid if planetoid.is_dir() else None

    # -------------------------------------------------------------- folders and stores
    def folder(self, name: str) -> Path:
        path = self.base / name
        path.mkdir()
        return path

    def store(self, case: Path, name: str = "store") -> Path:
        """A fresh copy of the tiny store in ``case``."""
        return Path(shutil.copytree(self.tiny, case / name))

    @staticmethod
    def rewrite(store: Path, key: str, change: Callable[[np.ndarray], np.ndarray]) -> None:
        """Replace array ``key`` by ``change(array)``, with metadata (bytes, checksum, shape) kept consistent: the
        store a buggy writer makes, which only the checks of the values can refuse."""
        from suite.io import file_checksum

        meta_path = store / "metadata.json"
        meta = json.loads(meta_path.read_text())
        path = store / meta["files"][key]["path"]
        array = change(np.load(path))
        np.save(path, array)
        entry = meta["files"][key]
        entry.update(bytes=path.stat().st_size, checksum=file_checksum(path), dtype=str(array.dtype),
                     shape=list(array.shape))
        meta_path.write_text(json.dumps(meta))

    @staticmethod
    def flip(path: Path, offset_from_end: int = 8, count: int = 8) -> None:
        """Flip ``count`` bytes near the end of ``path`` (a corruption nothing recorded)."""
        data = bytearray(path.read_bytes())
        for i in range(count):
            data[len(data) - offset_from_end + i] ^= 0xA5
        path.write_bytes(bytes(data))

    @staticmethod
    def edit_metadata(store: Path, change: Callable[[dict], Any]) -> None:
        """Apply ``change`` to the parsed ``metadata.json`` in place (a list it returns replaces the whole)."""
        path = store / "metadata.json"
        meta = json.loads(path.read_text())
        result = change(meta)
        path.write_text(json.dumps(result if isinstance(result, list) else meta))

    # -------------------------------------------------------------- specs
    def spec(self, case: Path, store: Path | None = None, text: str | None = None, **sections: Any) -> Path:
        """A run spec (YAML) in ``case``: in-memory GraphSAGE, one short epoch on ``store`` (default: a fresh copy)
        with ``sections`` merged in; or ``text`` as it is."""
        import yaml

        path = case / "spec.yaml"
        if text is not None:
            path.write_text(text)
            return path
        spec: dict[str, Any] = {
            "dataset": {"name": "store", "root": str(store or self.store(case))},
            "model": {"num_layers": 2, "fanouts": [4, 4], "hidden_dim": 8},
            "system": {"name": "in_memory", "device": "cpu"},
            "training": {"epochs": 1, "batch_size": 32, "limit_batches": 2},
            "evaluation": {"batch_size": 64},
        }
        for section, values in sections.items():
            if isinstance(values, dict) and isinstance(spec.get(section), dict):
                spec[section] = {**spec[section], **values}
            else:
                spec[section] = values
        path.write_text(yaml.safe_dump(spec))
        return path

    @staticmethod
    def run(case: Path, spec: Path, *extra: str) -> list[str]:
        return ["run", str(spec), "--out", str(case / "runs"), "--quiet", *extra]

    # -------------------------------------------------------------- raw files
    @staticmethod
    def _write_openke(folder: Path) -> None:
        folder.mkdir()
        rng = np.random.default_rng(0)
        entities, relations = 40, 3
        (folder / "entity2id.txt").write_text(f"{entities}\n" + "".join(f"/m/e{i}\t{i}\n" for i in range(entities)))
        (folder / "relation2id.txt").write_text(f"{relations}\n" + "".join(f"/r/{i}\t{i}\n" for i in range(relations)))
        for split, count in (("train", 200), ("valid", 20), ("test", 20)):
            rows = np.column_stack([rng.integers(0, entities, count), rng.integers(0, entities, count),
                                    rng.integers(0, relations, count)])
            (folder / f"{split}2id.txt").write_text(f"{count}\n" + "".join(f"{h} {t} {r}\n" for h, t, r in rows))

    def openke_copy(self, case: Path) -> Path:
        return Path(shutil.copytree(self.openke, case / "raw"))

    def planetoid_copy(self, case: Path) -> Path:
        raw = case / "raw"
        raw.mkdir()
        if self.planetoid is None:
            raise FileNotFoundError("shared/datasets/planetoid is missing (set GNNSUITE_SHARED)")
        for path in self.planetoid.glob("ind.cora.*"):
            shutil.copy(path, raw / path.name)
        return raw


def _replace_line(path: Path, number: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n")


def build_cases(inputs: Inputs) -> list[Case]:  # noqa: C901, PLR0915 - one flat list of cases reads best
    """The 100 cases, their inputs written under ``inputs.base``."""
    cases: list[Case] = []
    I = inputs  # noqa: E741

    def add(name: str, argv: list[str], names: str, **kwargs: Any) -> None:
        cases.append(Case(name, argv, names, **kwargs))

    def store_case(name: str, change: Callable[[Path], Any], names: str, spec_sections: dict | None = None,
                   **kwargs: Any) -> None:
        case = I.folder(name)
        store = I.store(case)
        change(store)
        add(name, I.run(case, I.spec(case, store, **(spec_sections or {}))), names, **kwargs)

    def values(key: str, index: Any, value: Any) -> Callable[[Path], None]:
        def change(store: Path) -> None:
            def put(array: np.ndarray) -> np.ndarray:
                array = array.copy()
                array[index] = value
                return array
            I.rewrite(store, key, put)
        return change

    # ---- 1. ids out of range reach no compiled kernel (issue item 1), every sampler and backend
    for sampler, env in (("naive", {}), ("dense", {}), ("naive", {"GNNSUITE_SAMPLER_BACKEND": "torch"}),
                         ("dense", {"GNNSUITE_SAMPLER_BACKEND": "torch"})):
        label = sampler + ("-torch" if env else "")
        store_case(f"in-indices-2e9-{label}", values("in_indices", 5, 2_000_000_000), "in_indices.npy: row 5",
                   {"sampler": {"name": sampler}}, env=env)
    store_case("in-indices-negative", values("in_indices", 0, -3), "in_indices.npy: row 0: node id -3")
    store_case("out-indices-out-of-range", values("out_indices", 7, 200), "out_indices.npy: row 7",
               {"sampler": {"name": "dense", "direction": "out"}})
    store_case("in-indptr-decreasing", values("in_indptr", 10, 0), "in_indptr.npy: offsets decrease")
    store_case("in-indptr-short-end", values("in_indptr", -1, 3), "in_indptr.npy: must start at 0 and end at")
    store_case("out-indptr-bad-start", values("out_indptr", 0, 5), "out_indptr.npy: must start at 0")
    store_case("in-relations-out-of-range", values("in_relations", 2, 9), "in_relations.npy: row 2: relation id 9")
    store_case("train-nodes-out-of-range", values("train_nodes", 0, 10**9), "train_nodes.npy: row 0: node id")
    store_case("valid-nodes-negative", values("valid_nodes", 1, -1), "valid_nodes.npy: row 1: node id -1")
    store_case("test-nodes-out-of-range", values("test_nodes", 0, 200), "test_nodes.npy: row 0: node id 200")
    lp = {"model": {"num_layers": 1, "fanouts": [4], "hidden_dim": 8, "decoder": "distmult", "embedding_dim": 8},
          "training": {"task": "link_prediction", "epochs": 1, "batch_size": 32, "limit_batches": 2,
                       "negatives": {"num_chunks": 2, "negatives_per_positive": 10}},
          "evaluation": {"batch_size": 64, "negatives": 20}}
    store_case("train-edges-relation-out-of-range", values("train_edges", (3, 1), 7),
               "train_edges.npy: row 3: relation id 7", lp)
    store_case("valid-edges-node-out-of-range", values("valid_edges", (0, 2), 5000),
               "valid_edges.npy: row 0: destination node id 5000", lp)
    store_case("test-edges-negative-source", values("test_edges", (1, 0), -1),
               "test_edges.npy: row 1: source node id -1", lp)

    # ---- 2. NaN and labels (issue items 2 and 4)
    store_case("features-nan", values("features", (17, 3), np.nan), "features.npy: 1 non-finite values")
    store_case("features-inf", values("features", (0, 0), np.inf), "features.npy: 1 non-finite values")
    store_case("features-all-nan", lambda s: I.rewrite(s, "features", lambda a: np.full_like(a, np.nan)),
               "features.npy: 3200 non-finite values")
    store_case("labels-99", values("labels", 3, 99), "labels.npy: row 3: label 99 is out of range")
    store_case("labels-minus-5", values("labels", 4, -5), "labels.npy: row 4: label -5")
    store_case("labels-float", lambda s: I.rewrite(s, "labels", lambda a: a.astype(np.float64)),
               "labels.npy: dtype float64 is not allowed for labels")

    # ---- 3. corrupted or inconsistent files (checksums, sizes, headers)
    store_case("features-8-bytes-flipped", lambda s: I.flip(s / "features.npy"), "features.npy: checksum mismatch")
    store_case("in-indices-8-bytes-flipped", lambda s: I.flip(s / "in_indices.npy", 40),
               "in_indices.npy:")
    store_case("labels-truncated", lambda s: os.truncate(s / "labels.npy", (s / "labels.npy").stat().st_size - 16),
               "labels.npy: file is short")
    store_case("features-extended", lambda s: (s / "features.npy").open("ab").write(b"\0" * 64),
               "features.npy: file is too long")
    store_case("labels-deleted", lambda s: (s / "labels.npy").unlink(), "labels.npy: missing")
    store_case("labels-not-npy", lambda s: (s / "labels.npy").write_bytes(
        b"garbage!" * ((s / "labels.npy").stat().st_size // 8)), "labels.npy: not a valid .npy file")
    store_case("features-fortran-header", lambda s: (s / "features.npy").write_bytes(
        (s / "features.npy").read_bytes().replace(b"'fortran_order': False", b"'fortran_order': True ")),
        "features.npy: not a valid .npy file")

    # ---- 4. metadata.json
    def meta_case(name: str, change: Callable[[dict], Any], names: str) -> None:
        store_case(name, lambda s: I.edit_metadata(s, change), names)

    meta_case("meta-num-nodes-missing", lambda m: m.pop("num_nodes"), "field 'num_nodes' is missing")
    meta_case("meta-num-nodes-negative", lambda m: m.update(num_nodes=-1), "field 'num_nodes' must be >= 0")
    meta_case("meta-num-nodes-string", lambda m: m.update(num_nodes="200"), "field 'num_nodes' must be int")
    meta_case("meta-num-nodes-smaller", lambda m: m.update(num_nodes=150), "does not match metadata counts")
    meta_case("meta-num-classes-smaller", lambda m: m.update(num_classes=1), "labels.npy: row")
    meta_case("meta-num-relations-1", lambda m: m.update(num_relations=1), "relation id")
    meta_case("meta-format", lambda m: m.update(format="other"), "field 'format' must be")
    meta_case("meta-format-version", lambda m: m.update(format_version=99), "field 'format_version' is 99")
    meta_case("meta-checksum-missing", lambda m: m["files"]["labels"].pop("checksum"),
              "field 'files.labels' must hold path, dtype, shape, bytes and checksum")
    case = I.folder("meta-checksum-algorithm")
    store = I.store(case)
    I.edit_metadata(store, lambda m: m["files"]["labels"].update(checksum="shake_128:00"))
    add("meta-checksum-algorithm", ["datasets", "info", str(store), "--verify", "--quiet"],
        "labels.npy: checksum mismatch")
    meta_case("meta-path-escapes", lambda m: m["files"]["labels"].update(path="../../etc/passwd"),
              "files.labels.path' must be a relative path inside the store")
    meta_case("meta-shape-string", lambda m: m["files"]["labels"].update(shape="four"),
              "files.labels.shape' has the wrong type")
    meta_case("meta-bytes-null", lambda m: m["files"]["features"].update(bytes=None),
              "files.features.bytes' has the wrong type")
    meta_case("meta-feature-dim", lambda m: m.update(feature_dim=17), "features.npy: shape (200, 16) does not match")
    meta_case("meta-a-list", lambda m: [m], "metadata.json: expected a JSON object")
    meta_case("meta-files-not-dict", lambda m: m.update(files=[]), "field 'files' must be dict")
    for name, content, names in (
            ("meta-invalid-json", b'{"format": "gnnsuite-graphstore", ', "metadata.json: invalid JSON"),
            ("meta-empty", b"", "metadata.json: invalid JSON"),
            ("meta-binary", bytes(range(256)) * 4, "metadata.json: invalid JSON"),
            ("meta-deeply-nested", b"[" * 200_000 + b"]" * 200_000, "metadata.json: invalid JSON")):
        store_case(name, lambda s, content=content: (s / "metadata.json").write_bytes(content), names)
    store_case("meta-a-directory", lambda s: ((s / "metadata.json").unlink(), (s / "metadata.json").mkdir()),
               "metadata.json: missing")
    case = I.folder("meta-unreadable")
    store = I.store(case)
    (store / "metadata.json").chmod(0)
    add("meta-unreadable", ["datasets", "info", str(store)],
        "metadata.json: cannot read (permission denied (EACCES))",
        as_nobody=True)
    case = I.folder("store-missing")
    add("store-missing", I.run(case, I.spec(case, case / "nowhere")), "nowhere: not a graph store folder")
    case = I.folder("store-is-a-file")
    (case / "file").write_text("x")
    add("store-is-a-file", I.run(case, I.spec(case, case / "file")), "file: not a graph store folder")
    case = I.folder("store-empty-folder")
    (case / "empty").mkdir()
    add("store-empty-folder", I.run(case, I.spec(case, case / "empty")), "metadata.json: missing")

    # ---- 5. datasets info / partition
    case = I.folder("verify-labels-99")
    store = I.store(case)
    values("labels", 3, 99)(store)
    add("verify-labels-99", ["datasets", "info", str(store), "--verify", "--quiet"], "labels.npy: value 99")
    case = I.folder("partition-ids-out-of-range")
    store = I.store(case)
    values("out_indices", 2, 10**6)(store)
    add("partition-ids-out-of-range", ["datasets", "partition", str(store), "-p", "4", "--quiet"],
        "out_indices.npy: row 2")
    case = I.folder("partition-zero")
    add("partition-zero", ["datasets", "partition", str(I.store(case)), "-p", "0", "--quiet"],
        "num_partitions must be in [1, 200], got 0")
    case = I.folder("partition-too-many")
    add("partition-too-many", ["datasets", "partition", str(I.store(case)), "-p", "201", "--quiet"],
        "num_partitions must be in [1, 200], got 201")
    case = I.folder("partition-order-not-permutation")
    np.save(case / "order.npy", np.zeros(200, dtype=np.int64))
    add("partition-order-not-permutation", ["datasets", "partition", str(I.store(case)), "-p", "4", "--order",
                                            str(case / "order.npy"), "--quiet"], "order.npy: order is not a permutation")
    case = I.folder("partition-out-exists")
    store = I.store(case)
    (case / "taken").mkdir()
    add("partition-out-exists", ["datasets", "partition", str(store), "-p", "4", "--out", str(case / "taken"),
                                 "--quiet"], "taken: output already exists")

    # ---- 6. the disk system (issue items 4 and 5)
    from suite.data import GraphStore
    from systems.disk.disk_system import partitioned_store

    # random order: training nodes in every partition, so every state is entered and every bucket read
    disk = {"system": {"name": "disk", "device": "cpu",
                       "options": {"policy": "beta", "num_partitions": 4, "buffer_capacity": 2, "order": "random"}}}
    case = I.folder("bucket-8-bytes-flipped")
    store = I.store(case)
    pstore = partitioned_store(GraphStore.open(store), 4, "random", 0)
    edges = pstore.file("bucket_edges")
    data = bytearray(edges.read_bytes())
    from suite.data.partition import PartitionLayout

    layout = PartitionLayout.from_store(pstore)
    bucket_start = int(layout.bucket_edge_offsets[layout.bucket_entry(1, 2)])
    end = len(data) - 24 * (int(layout.bucket_edge_offsets[-1]) - bucket_start)
    first = int(pstore.array("partition_offsets")[2])  # bucket (1, 2)'s first row gets another node of partition 2
    other = first if int.from_bytes(data[end + 16:end + 24], "little") != first else first + 1
    data[end + 16:end + 24] = other.to_bytes(8, "little")  # 8 bytes changed, the id still in range
    edges.write_bytes(bytes(data))
    whole = {"system": {"name": "disk", "device": "cpu",  # one state holding every partition: every bucket read
                        "options": {"policy": "in_memory", "num_partitions": 4, "buffer_capacity": 4,
                                    "order": "random"}}}
    add("bucket-8-bytes-flipped", I.run(case, I.spec(case, store, **whole)), "bucket_edges.npy: bucket (1, 2)",
        run_status="failed")
    case = I.folder("bucket-id-out-of-range")
    store = I.store(case)
    pstore = partitioned_store(GraphStore.open(store), 4, "random", 0)
    I.flip(pstore.file("bucket_edges"), 24)  # the last row's source id: far out of range
    add("bucket-id-out-of-range", I.run(case, I.spec(case, store, **disk)), "bucket_edges.npy: row",
        run_status="failed")
    case = I.folder("disk-feature-partition-flipped")
    store = I.store(case)
    pstore = partitioned_store(GraphStore.open(store), 4, "random", 0)
    I.flip(pstore.file("features"), 6, 1)
    add("disk-feature-partition-flipped", I.run(case, I.spec(case, store, **disk)),
        "features.npy: partition 3 (rows", run_status="failed")
    for name, options, names in (
            ("disk-buffer-larger-than-partitions", {"num_partitions": 2, "buffer_capacity": 4},
             "system.options.buffer_capacity: 4 exceeds num_partitions 2"),
            ("disk-unknown-policy", {"policy": "lru"}, "system.options.policy: Value error, unknown policy 'lru'"),
            ("disk-zero-partitions", {"num_partitions": 0}, "system.options.num_partitions"),
            ("disk-unknown-option", {"buffer_size": 3}, "system.options.buffer_size: unknown field")):
        case = I.folder(name)
        add(name, I.run(case, I.spec(case, system={"name": "disk", "device": "cpu", "options": options})),
            names.replace("Value error, ", ""))
    case = I.folder("disk-lp-without-learnable-embeddings")
    add("disk-lp-without-learnable-embeddings", I.run(case, I.spec(case, **{**lp, **disk})),
        "model.learnable_embeddings: the disk system's link prediction moves learnable embedding partitions")

    # ---- 7. raw files: OpenKE (fb15k237) and Planetoid (cora)
    def openke_case(name: str, change: Callable[[Path], Any], names: str, **kwargs: Any) -> None:
        case = I.folder(name)
        raw = I.openke_copy(case)
        change(raw)
        add(name, ["datasets", "prepare", "fb15k237", "--root", str(raw), "--out", str(case / "out"), "--quiet"],
            names, **kwargs)

    openke_case("openke-missing-file", lambda r: (r / "valid2id.txt").unlink(), "valid2id.txt: missing")
    openke_case("openke-bad-count-line", lambda r: _replace_line(r / "entity2id.txt", 1, "forty"),
                "entity2id.txt: line 1: expected the number of entities")
    openke_case("openke-count-mismatch", lambda r: _replace_line(r / "train2id.txt", 1, "201"),
                "train2id.txt: line 1: header says 201 triples but 200 lines follow")
    openke_case("openke-two-fields", lambda r: _replace_line(r / "train2id.txt", 5, "3 4"),
                "train2id.txt: line 5: expected three integers")
    openke_case("openke-entity-out-of-range", lambda r: _replace_line(r / "test2id.txt", 3, "3 40 1"),
                "test2id.txt: line 3: tail entity id 40 is out of range [0, 40)")
    openke_case("openke-relation-negative", lambda r: _replace_line(r / "valid2id.txt", 2, "3 4 -1"),
                "valid2id.txt: line 2: relation id -1 is out of range")
    openke_case("openke-empty-split", lambda r: (r / "test2id.txt").write_text("0\n"),
                "test2id.txt: line 1: the split is empty")
    openke_case("openke-word-token", lambda r: _replace_line(r / "train2id.txt", 9, "3 four 1"),
                "train2id.txt: line 9: expected three integers")
    openke_case("openke-huge-integer", lambda r: _replace_line(r / "train2id.txt", 2, "3 99999999999999999999999 1"),
                "train2id.txt: line 2: expected three integers")
    openke_case("openke-binary-file", lambda r: (r / "train2id.txt").write_bytes(bytes(range(256)) * 8),
                "train2id.txt: line 1: expected the number of triples")
    openke_case("openke-zero-entities", lambda r: (r / "entity2id.txt").write_text("0\n"),
                "entity2id.txt: line 1: count is 0")
    openke_case("openke-split-is-a-directory", lambda r: ((r / "train2id.txt").unlink(),
                                                          (r / "train2id.txt").mkdir()),
                "train2id.txt: missing")
    openke_case("openke-unreadable", lambda r: (r / "train2id.txt").chmod(0),
                "train2id.txt: cannot read (permission denied (EACCES))", as_nobody=True)
    if I.planetoid is not None:
        def planetoid_case(name: str, change: Callable[[Path], Any], names: str) -> None:
            case = I.folder(name)
            raw = I.planetoid_copy(case)
            change(raw)
            add(name, ["datasets", "prepare", "cora", "--root", str(raw), "--out", str(case / "out"), "--quiet"],
                names)

        planetoid_case("planetoid-empty-test-index", lambda r: (r / "ind.cora.test.index").write_text(""),
                       "ind.cora.test.index: gives no test node ids")
        planetoid_case("planetoid-missing-graph", lambda r: (r / "ind.cora.graph").unlink(), "ind.cora.graph: missing")
        planetoid_case("planetoid-garbage-x", lambda r: (r / "ind.cora.x").write_bytes(b"not a pickle" * 100),
                       "cannot read Planetoid files ind.cora.*")
        planetoid_case("planetoid-truncated-graph", lambda r: os.truncate(r / "ind.cora.graph", 1000),
                       "cannot read Planetoid files ind.cora.*")
        planetoid_case("planetoid-test-index-out-of-range",
                       lambda r: (r / "ind.cora.test.index").write_text("999999\n" * 1000),
                       "cannot read Planetoid files ind.cora.*")

    # ---- 8. outputs: existing, or being written by another process (issue items 3 and 5)
    case = I.folder("prepare-unknown-dataset")
    add("prepare-unknown-dataset", ["datasets", "prepare", "imagenet", "--root", str(case), "--out",
                                    str(case / "out")], "unknown dataset loader 'imagenet'")
    case = I.folder("prepare-root-missing")
    add("prepare-root-missing", ["datasets", "prepare", "fb15k237", "--root", str(case / "raw"), "--out",
                                 str(case / "out"), "--quiet"], "raw data folder does not exist")
    case = I.folder("prepare-out-exists")
    raw = I.openke_copy(case)
    (case / "out").mkdir()
    add("prepare-out-exists", ["datasets", "prepare", "fb15k237", "--root", str(raw), "--out", str(case / "out"),
                               "--quiet"], "out: output already exists (pass --overwrite to replace it)")
    case = I.folder("prepare-out-being-written")
    raw = I.openke_copy(case)
    add("prepare-out-being-written", ["datasets", "prepare", "fb15k237", "--root", str(raw), "--out",
                                      str(case / "out"), "--quiet"], "out: output folder: in use by process")
    case = I.folder("generate-out-exists")
    shutil.copytree(I.tiny, case / "out")
    add("generate-out-exists", ["datasets", "generate", "--out", str(case / "out"), "--quiet"],
        "out: output already exists (pass --overwrite to replace it)")
    case = I.folder("generate-out-being-written")
    add("generate-out-being-written", ["datasets", "generate", "--out", str(case / "out"), "--quiet"],
        "out: output folder: in use by process")
    case = I.folder("generate-out-under-a-file")
    (case / "file").write_text("x")
    add("generate-out-under-a-file", ["datasets", "generate", "--out", str(case / "file" / "out"), "--quiet"],
        "file")
    case = I.folder("run-folder-being-written")
    spec = I.spec(case)
    add("run-folder-being-written", I.run(case, spec), "in use by process")
    case = I.folder("run-out-is-a-file")
    spec = I.spec(case)
    (case / "runs").write_text("x")
    add("run-out-is-a-file", ["run", str(spec), "--out", str(case / "runs"), "--quiet"], "runs")
    for name, args, names in (
            ("generate-unknown-preset", ["--preset", "nope"], "unknown preset 'nope'"),
            ("generate-negative-nodes", ["--num-nodes", "-5"], "num_nodes"),
            ("generate-nodes-not-integer", ["--num-nodes", "many"], "num_nodes"),
            ("generate-homophily-2", ["--homophily", "2.0"], "homophily")):
        case = I.folder(name)
        add(name, ["datasets", "generate", *args, "--out", str(case / "out"), "--quiet"], names)

    case = I.folder("cli-missing-out")
    add("cli-missing-out", ["datasets", "generate", "--preset", "tiny"],
        "the following arguments are required: --out")
    case = I.folder("cli-unknown-command")
    add("cli-unknown-command", ["datasets", "shuffle", str(case)], "invalid choice: 'shuffle'")

    # ---- 9. specs
    def spec_case(name: str, names: str, text: str | None = None, extra: tuple[str, ...] = (),
                  **sections: Any) -> None:
        case = I.folder(name)
        spec = I.spec(case, text=text, **sections) if text is not None else I.spec(case, **sections)
        add(name, I.run(case, spec, *extra), names)

    spec_case("spec-yaml-syntax", "invalid YAML at line", text="dataset: {name: store\nmodel: [\n")
    spec_case("spec-top-level-list", "expected a mapping at the top level", text="- dataset\n")
    spec_case("spec-unknown-section", "optimiser: unknown field", optimiser={"name": "adam"})
    spec_case("spec-unknown-system", "system.name: unknown system 'warp'", system={"name": "warp"})
    spec_case("spec-unknown-model", "model.encoder: unknown model 'transformer'",
              model={"encoder": "transformer", "num_layers": 2, "fanouts": [4, 4]})
    spec_case("spec-fanouts-mismatch", "model.fanouts: expected 2 entries",
              model={"num_layers": 2, "fanouts": [4, 4, 4]})
    spec_case("spec-fanout-zero", "model.fanouts: each must be > 0 or -1", model={"num_layers": 2, "fanouts": [0, 4]})
    spec_case("spec-learning-rate-negative", "training.learning_rate: Input should be greater than 0",
              training={"learning_rate": -0.1})
    spec_case("spec-learning-rate-nan", "training.learning_rate: Input should be a finite number",
              training={"learning_rate": float("nan")})
    spec_case("spec-learning-rate-1e300", "training.learning_rate: Input should be less than or equal to",
              training={"learning_rate": 1e300})
    spec_case("spec-epochs-string", "training.epochs: Input should be a valid integer", training={"epochs": "five"})
    spec_case("spec-batch-size-zero", "training.batch_size: Input should be greater than 0",
              training={"batch_size": 0})
    spec_case("spec-dropout-1.5", "model.dropout: Input should be less than 1",
              model={"num_layers": 2, "fanouts": [4, 4], "dropout": 1.5})
    spec_case("spec-seed-huge", "seed: Input should be less than 4294967296", seed=2**70)
    spec_case("spec-seed-negative", "seed: Input should be greater than or equal to 0", seed=-1)
    spec_case("spec-device-cuda", "system.device: 'cuda' requested but CUDA is not available",
              system={"name": "in_memory", "device": "cuda"})
    spec_case("spec-unknown-option", "system.options.stalness_bound: unknown field",
              system={"name": "pipelined", "device": "cpu", "options": {"stalness_bound": 4}})
    spec_case("spec-option-infinite", "system.options.dist_timeout_s: must be a finite number",
              system={"name": "in_memory", "device": "cpu", "options": {"dist_timeout_s": float("inf")}})
    spec_case("spec-evaluation-fanouts-mismatch", "evaluation.fanouts: expected 2 entries",
              evaluation={"fanouts": [3]})
    spec_case("spec-unknown-machine", "machine.profile: unknown machine profile 'cray'", machine={"profile": "cray"})
    spec_case("spec-set-without-equals", "--set 'training.epochs': expected key.path=value",
              extra=("--set", "training.epochs"))
    spec_case("spec-set-bad-yaml", "--set training.epochs: value", extra=("--set", "training.epochs=[1, 2"))
    case = I.folder("spec-file-missing")
    add("spec-file-missing", I.run(case, case / "absent.yaml"), "absent.yaml: file not found")
    case = I.folder("spec-cora-root-missing")
    spec = I.spec(case, dataset={"name": "cora", "root": str(case / "absent"), "cache_dir": str(case / "data")})
    add("spec-cora-root-missing", I.run(case, spec), "dataset.root: ")
    case = I.folder("spec-unknown-preset")
    spec = I.spec(case, dataset={"name": "synthetic", "preset": "huge", "cache_dir": str(case / "data")})
    add("spec-unknown-preset", I.run(case, spec), "dataset.preset: unknown preset 'huge'")
    case = I.folder("spec-nc-store-without-labels")
    store = I.store(case)
    I.edit_metadata(store, lambda m: m["files"].pop("labels"))
    add("spec-nc-store-without-labels", I.run(case, I.spec(case, store)), "store has no 'labels'")
    case = I.folder("spec-lp-without-decoder")
    add("spec-lp-without-decoder", I.run(case, I.spec(case, training={"task": "link_prediction"})),
        "model.decoder: link prediction needs a decoder")
    case = I.folder("grid-bad-axis")
    (case / "grid.yaml").write_text(f"base:\n  dataset: {{name: store, root: {I.store(case)}}}\n"
                                    "axes:\n  model.fanouts: [[4, 4], [0, 4]]\n")
    add("grid-bad-axis", ["grid", str(case / "grid.yaml"), "--out", str(case / "runs"), "--quiet"],
        "model.fanouts: each must be > 0 or -1")

    # ---- 10. a loss that becomes non-finite (issue item 2): stopped, status diverged
    case = I.folder("training-diverges")
    spec = I.spec(case, training={"epochs": 3, "batch_size": 16, "optimizer": "sgd", "learning_rate": 1e38})
    add("training-diverges", I.run(case, spec), "training diverged: the loss became", run_status="diverged")
    return cases


# ---------------------------------------------------------------------------------------------- running
def _child(argv: list[str], env: dict[str, str], as_nobody: bool, cwd: str, out: str, err: str) -> None:
    """A case in a process forked from the fork server: stdout and stderr to files, the exit status of main()."""
    for fd, path in ((1, out), (2, err)):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        os.dup2(handle, fd)
        os.close(handle)
    os.environ.update(env)
    os.chdir(cwd)
    code = 99
    try:
        if as_nobody and os.geteuid() == 0:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        from suite.cli import main

        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - what escapes main() is the finding
        traceback.print_exc()
        code = 99
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` -> (size, kind) (metadata.json files are left out: the checks' cache)."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            if name == "metadata.json":
                continue
            try:
                info = path.lstat()
            except OSError:
                continue
            found[str(path.relative_to(folder))] = (0 if path.is_dir() else info.st_size, int(path.is_dir()))
    return found


def _leftovers(before: dict, after: dict, case: Case, folder: Path) -> list[str]:
    """What the case left that it should not have: new paths, except a complete run folder where allowed."""
    from suite.recorder import read_summary

    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    bad = [f"removed {path}" for path in removed]
    for path in added:
        parts = Path(path).parts
        if case.run_status and parts[0] == "runs":
            if len(parts) >= 2:
                summary = read_summary(folder / "runs" / parts[1])
                if summary is not None and summary.get("status") == case.run_status and ".lock" not in parts:
                    continue
            elif len(parts) == 1:
                continue
        if case.run_status and "-p4-" in parts[0]:  # the disk system's partitioned store, a complete cache entry
            continue
        bad.append(f"added {path}")
    return bad


def classify(code: int | None, stderr: str, case: Case, leftovers: list[str]) -> tuple[str, str]:
    """``(category, detail)`` of one case's outcome (see the module docstring)."""
    lines = stderr.strip().splitlines()
    if code is None:
        return "other", "timed out"
    if code < 0:
        return "crash", f"killed by {signal.Signals(-code).name}"
    if "Traceback (most recent call last)" in stderr:
        return "traceback", lines[-1] if lines else ""
    if code == 0:
        return "accepted", "exit status 0"
    if code != 2 or len(lines) != 1 or not lines[0].startswith("gnnsuite: error: "):
        return "other", f"exit status {code}: {' | '.join(lines)[:300]}"
    if case.names not in lines[0]:
        return "other", f"does not name {case.names!r}: {lines[0][:300]}"
    if leftovers:
        return "dirty", "; ".join(leftovers)[:300]
    return "clean", lines[0]


@contextlib.contextmanager
def _held(path: Path):
    """Hold the lock file ``path`` in a helper process (the 'other writer')."""
    holder = subprocess.Popen(  # flock(2) and the pid, as suite.io.exclusive_lock writes them
        [sys.executable, "-c", "import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nos.write(fd, f'{os.getpid()}\\n'.encode())\nprint('held', flush=True)\n"
         "time.sleep(600)", str(path)], stdout=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline().strip() != "held":
            raise RuntimeError(f"could not hold {path}")
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def _lock_for(case: Case, folder: Path) -> Path | None:
    """The lock a case expects another live writer to hold."""
    if case.name in ("prepare-out-being-written", "generate-out-being-written"):
        return folder / ".out.lock"
    if case.name == "run-folder-being-written":
        from suite.config import load_spec

        run_dir = folder / "runs" / load_spec(folder / "spec.yaml").run_id
        run_dir.mkdir(parents=True)
        return run_dir / ".lock"
    return None


def run_case(case: Case, folder: Path, context: Any, subprocess_mode: bool) -> dict[str, Any]:
    """Run one case; return its record (name, category, detail, exit status, seconds)."""
    lock = _lock_for(case, folder)
    holder = _held(lock) if lock is not None else contextlib.nullcontext()
    with holder:  # the other writer's lock file is there before and after: an input, not an output
        before = _snapshot(folder)
        out, err = folder.with_name(folder.name + ".stdout"), folder.with_name(folder.name + ".stderr")
        started = time.perf_counter()
        env = {**case.env}
        if subprocess_mode:
            full_env = {**os.environ, **env, "PYTHONPATH": str(REPO_ROOT)}
            preexec = None
            if case.as_nobody and os.geteuid() == 0:
                def preexec() -> None:
                    os.setgroups([])
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
            try:
                result = subprocess.run([sys.executable, "-m", "suite", *case.argv], cwd=case.cwd or folder,
                                        env=full_env, capture_output=True, text=True, timeout=CASE_TIMEOUT_S,
                                        preexec_fn=preexec)
                code, stderr = result.returncode, result.stderr
            except subprocess.TimeoutExpired as timeout:
                code, stderr = None, str(timeout.stderr or "")
        else:
            process = context.Process(target=_child, args=(case.argv, env, case.as_nobody, str(case.cwd or folder),
                                                           str(out), str(err)))
            process.start()
            process.join(CASE_TIMEOUT_S)
            if process.is_alive():
                process.kill()
                process.join()
                code = None
            else:
                code = process.exitcode
            stderr = err.read_text(errors="replace") if err.exists() else ""
        seconds = time.perf_counter() - started
        after = _snapshot(folder)
    category, detail = classify(code, stderr, case, _leftovers(before, after, case, folder))
    return {"name": case.name, "category": category, "detail": detail, "exit_status": code,
            "seconds": round(seconds, 2), "command": "gnnsuite " + " ".join(case.argv)}


def sweep(base: Path, subprocess_mode: bool = False, only: list[str] | None = None,
          progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Build the cases under ``base`` and run them; return ``{"counts": {...}, "cases": [...], ...}``."""
    os.environ["GNNSUITE_KERNEL_BOUNDSCHECK"] = "0"  # as users run the kernels (set before the fork server starts)
    started = time.perf_counter()
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o755)  # the permission cases run as an unprivileged user: it must reach their files
    inputs = Inputs(base)
    cases = build_cases(inputs)
    names = [case.name for case in cases]
    if len(set(names)) != len(names):
        raise AssertionError(f"case names repeat: {[n for n, c in Counter(names).items() if c > 1]}")
    if only:
        cases = [case for case in cases if case.name in only]
    for case in cases:
        if case.as_nobody:
            for path in [base, base / case.name, *(base / case.name).rglob("*")]:
                if path.is_dir():
                    path.chmod(0o777)
    context = None
    if not subprocess_mode:
        context = multiprocessing.get_context("forkserver")
        # The cases run as "nobody" cannot read the interpreter's own library under /root: every module they need
        # (pandas pulls in zoneinfo) is imported in the server before it forks them.
        context.set_forkserver_preload(["suite.cli", "suite.runner", "systems.in_memory", "systems.sampling.kernels",
                                        "pandas"])
    records = []
    for case in cases:
        record = run_case(case, base / case.name, context, subprocess_mode)
        records.append(record)
        if progress is not None:
            progress(record)
    counts = Counter(record["category"] for record in records)
    return {"cases": records, "counts": {category: counts.get(category, 0) for category in CATEGORIES},
            "total": len(records), "mode": "subprocess" if subprocess_mode else "forkserver",
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    """Run the sweep and print one line per case and the counts; exit 0 when every case is clean."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subprocess", action="store_true", help="one `python -m suite` per case (slow)")
    parser.add_argument("--json", help="write the records and counts to this file")
    parser.add_argument("--only", nargs="*", help="run only these cases")
    parser.add_argument("--keep", action="store_true", help="keep the cases' folders (printed)")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="gnnsuite-sweep-"))
    base.chmod(0o755)  # the permission cases run as an unprivileged user, who must reach their files
    try:
        result = sweep(base / "cases", args.subprocess, args.only,
                       progress=lambda r: print(f"{r['category']:9s} {r['seconds']:6.2f}s {r['name']}: {r['detail']}",
                                                flush=True))
    finally:
        if args.keep:
            print(f"cases kept in {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps({"total": result["total"], "counts": result["counts"], "mode": result["mode"],
                      "seconds": result["seconds"]}))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["counts"]["clean"] == result["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
