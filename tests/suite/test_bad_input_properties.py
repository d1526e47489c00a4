"""Property-based tests (hypothesis) of bad input through the command line: corrupted stores, raw files and specs.

Whatever hypothesis makes of them, ``gnnsuite`` exits with status 0 or 2, never lets an exception escape (no
traceback; a segmentation fault would kill the test run), prints one line on stderr when it refuses, and leaves
nothing half-written: no staging folder or lock file, no store under ``--out`` unless it is complete and passes its
checks, no run folder without a complete ``summary.json``. Commands run in this process (``suite.cli.main``), so an
example costs milliseconds (a run that trains: a tenth of a second or so).

Settings (profile ``default``): 100 corrupted stores, 150 raw-file sets, 150 specs, derandomized (the same examples
every run, so the default test run is reproducible), no example database, no deadline. ``GNNSUITE_HYPOTHESIS=
thorough`` runs ten times as many random examples.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from suite.cli import main
from suite.config import spec_from_dict
from suite.errors import SuiteError
from suite.data import GraphStore
from suite.recorder import read_summary

EXAMPLES = {"stores": 100, "raw": 150, "specs": 150}
_COMMON = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))
settings.register_profile("default", derandomize=True, **_COMMON)
settings.register_profile("thorough", derandomize=False, **_COMMON)
_PROFILE = os.environ.get("GNNSUITE_HYPOTHESIS", "default")
_SCALE = 10 if _PROFILE == "thorough" else 1


def examples(kind: str) -> settings:
    """The settings of one property: the profile, with its number of examples."""
    return settings(settings.get_profile(_PROFILE), max_examples=EXAMPLES[kind] * _SCALE)


# ---------------------------------------------------------------------------------------------- templates
@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> dict[str, Path]:
    """A small valid store (every kind of file: CSRs, relations, features, labels, node and edge splits) and a
    valid OpenKE folder."""
    from suite.data.synthetic import PRESETS, generate

    root = tmp_path_factory.mktemp("templates")
    store = generate(dataclasses.replace(PRESETS.get("tiny"), num_nodes=60), root / "store").path
    raw = root / "openke"
    raw.mkdir()
    (raw / "entity2id.txt").write_text("12\n" + "".join(f"e{i}\t{i}\n" for i in range(12)))
    (raw / "relation2id.txt").write_text("2\nr0\t0\nr1\t1\n")
    rng = np.random.default_rng(0)
    for split, count in (("train", 30), ("valid", 5), ("test", 5)):
        rows = zip(rng.integers(0, 12, count), rng.integers(0, 12, count), rng.integers(0, 2, count))
        (raw / f"{split}2id.txt").write_text(f"{count}\n" + "".join(f"{h} {t} {r}\n" for h, t, r in rows))
    return {"store": store, "openke": raw}


@contextlib.contextmanager
def workdir() -> Iterator[Path]:
    """A fresh folder for one example, also the working directory (relative paths a spec names land there)."""
    previous = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="gnnsuite-prop-") as folder:
        os.chdir(folder)
        try:
            yield Path(folder)
        finally:
            os.chdir(previous)


def gnnsuite(*argv: str) -> tuple[int, str]:
    """Run the command line in this process: ``(exit status, stderr)``. An exception escaping it fails the test."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main([str(arg) for arg in argv])
    return code, err.getvalue()


def assert_clean_exit(code: int, stderr: str) -> None:
    assert code in (0, 2), (code, stderr)
    if code == 2:
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gnnsuite: error: "), stderr


def assert_nothing_half_written(folder: Path) -> None:
    """No staging folder, replaced copy or lock file anywhere; every run folder has a complete summary."""
    for path in folder.rglob("*"):
        assert ".partial-" not in path.name and ".old-" not in path.name, path
        assert not path.name.endswith(".lock"), path
    for runs in folder.rglob("runs"):
        if runs.is_dir():
            for run_dir in runs.iterdir():
                summary = read_summary(run_dir)
                assert summary is not None and summary["status"] in ("completed", "failed", "diverged"), run_dir


# ---------------------------------------------------------------------------------------------- stores
NPY_KEYS = ("in_indptr", "in_indices", "in_relations", "out_indptr", "out_indices", "out_relations", "features",
            "labels", "train_nodes", "valid_nodes", "test_nodes", "train_edges", "valid_edges", "test_edges")
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
special_numbers = st.sampled_from([-1, 0, 60, 61, 2**31 - 1, 2**31, -(2**31), 2**62, math.nan, math.inf, -math.inf,
                                   1e30])


@st.composite
def store_corruptions(draw) -> dict[str, Any]:
    kind = draw(st.sampled_from(["flip", "values", "truncate", "extend", "metadata", "delete", "metadata_bytes"]))
    corruption: dict[str, Any] = {"kind": kind, "key": draw(st.sampled_from(NPY_KEYS))}
    if kind in ("flip", "metadata_bytes"):
        corruption.update(at=draw(st.floats(0, 1, exclude_max=True)), count=draw(st.integers(1, 8)),
                          xor=draw(st.integers(1, 255)))
    elif kind == "values":
        corruption.update(at=draw(st.floats(0, 1, exclude_max=True)),
                          value=draw(special_numbers | st.integers(-(2**40), 2**40)))
    elif kind in ("truncate", "extend"):
        corruption.update(amount=draw(st.integers(1, 4096)))
    elif kind == "metadata":
        field = draw(st.sampled_from(["num_nodes", "num_edges", "num_relations", "num_classes", "feature_dim",
                                      "directed", "format", "format_version", "files", "name", "checks",
                                      "partitioning", "path", "dtype", "shape", "bytes", "checksum"]))
        corruption.update(field=field, value=draw(json_values | special_numbers), delete=draw(st.booleans()))
    return corruption


def corrupt(store: Path, corruption: dict[str, Any]) -> None:
    """Apply one corruption to the store folder (see :func:`store_corruptions`)."""
    from suite.io import file_checksum

    meta_path = store / "metadata.json"
    meta = json.loads(meta_path.read_text())
    key = corruption["key"]
    path = store / f"{key}.npy"
    kind = corruption["kind"]
    if kind in ("flip", "metadata_bytes"):  # bytes changed behind the metadata's back
        target = meta_path if kind == "metadata_bytes" else path
        data = bytearray(target.read_bytes())
        start = int(corruption["at"] * len(data))
        for i in range(start, min(len(data), start + corruption["count"])):
            data[i] ^= corruption["xor"]
        target.write_bytes(bytes(data))
    elif kind == "values":  # a buggy writer: new values, metadata kept consistent with the file
        array = np.load(path)
        flat = array.reshape(-1)
        if flat.size:
            value = corruption["value"]
            if array.dtype.kind in "iu":  # the nearest value the array's type can hold
                limits = np.iinfo(array.dtype)
                value = 0 if not math.isfinite(value) else min(max(int(value), limits.min), limits.max)
            with np.errstate(all="ignore"):
                flat[int(corruption["at"] * flat.size)] = np.array(value).astype(array.dtype)
        np.save(path, array)
        meta["files"][key].update(bytes=path.stat().st_size, checksum=file_checksum(path))
        meta_path.write_text(json.dumps(meta))
    elif kind == "truncate":
        os.truncate(path, max(0, path.stat().st_size - corruption["amount"]))
    elif kind == "extend":
        with open(path, "ab") as handle:
            handle.write(b"\x7f" * corruption["amount"])
    elif kind == "delete":
        path.unlink()
    elif kind == "metadata":
        field, value = corruption["field"], corruption["value"]
        target = meta["files"][key] if field in ("path", "dtype", "shape", "bytes", "checksum") else meta
        if corruption["delete"]:
            target.pop(field, None)
        else:
            target[field] = value
        meta_path.write_text(json.dumps(meta))  # json writes NaN/Infinity bare here: another way to be wrong


RUN_SPEC = {"model": {"num_layers": 1, "fanouts": [3], "hidden_dim": 8},
            "system": {"name": "in_memory", "device": "cpu"},
            "training": {"epochs": 1, "batch_size": 16, "limit_batches": 2}, "evaluation": {"batch_size": 64}}


@examples("stores")
@given(corruption=store_corruptions())
def test_a_corrupted_store_is_refused_in_one_line_or_runs(templates, corruption):
    with workdir() as folder:
        store = Path(shutil.copytree(templates["store"], folder / "store"))
        corrupt(store, corruption)
        spec = folder / "spec.yaml"
        spec.write_text(yaml.safe_dump({"dataset": {"name": "store", "root": str(store)}, **RUN_SPEC}))
        verify_code, stderr = gnnsuite("datasets", "info", store, "--verify", "--quiet")
        assert_clean_exit(verify_code, stderr)
        code, stderr = gnnsuite("run", spec, "--out", folder / "runs", "--quiet")
        assert_clean_exit(code, stderr)
        event(f"{corruption['kind']}: verify exit {verify_code}, run exit {code}")
        if corruption["kind"] in ("flip", "truncate", "extend", "delete"):  # the array is not what was written
            assert code == 2 and verify_code == 2, (corruption, stderr)
        if code == 2:
            assert not (folder / "runs").exists(), stderr  # refused before the run folder existed
        assert_nothing_half_written(folder)


# ---------------------------------------------------------------------------------------------- raw files
OPENKE_FILES = ("entity2id.txt", "relation2id.txt", "train2id.txt", "valid2id.txt", "test2id.txt")
tokens = st.one_of(st.integers(-3, 15).map(str), st.sampled_from(["", "x", "1.5", "+2", "-0", "99999999999999999999",
                                                                  "\t", "0x1"]))
lines = st.lists(tokens, max_size=4).map(" ".join)


@st.composite
def raw_changes(draw) -> list[dict[str, Any]]:
    changes = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["line", "insert", "drop", "bytes", "empty", "delete"]))
        changes.append({"kind": kind, "file": draw(st.sampled_from(OPENKE_FILES)), "at": draw(st.integers(0, 40)),
                        "line": draw(lines), "bytes": draw(st.binary(max_size=64))})
    return changes


def change_raw(raw: Path, change: dict[str, Any]) -> None:
    path = raw / change["file"]
    if not path.exists():
        return
    text = path.read_text(errors="replace").split("\n")
    at = change["at"] % max(1, len(text))
    kind = change["kind"]
    if kind == "line":
        text[at] = change["line"]
    elif kind == "insert":
        text.insert(at, change["line"])
    elif kind == "drop":
        del text[at]
    if kind in ("line", "insert", "drop"):
        path.write_text("\n".join(text))
    elif kind == "bytes":
        path.write_bytes(change["bytes"])
    elif kind == "empty":
        path.write_text("")
    elif kind == "delete":
        path.unlink()


@examples("raw")
@given(changes=raw_changes())
def test_bad_raw_files_are_refused_in_one_line_or_give_a_checked_store(templates, changes):
    with workdir() as folder:
        raw = Path(shutil.copytree(templates["openke"], folder / "raw"))
        for change in changes:
            change_raw(raw, change)
        out = folder / "out"
        code, stderr = gnnsuite("datasets", "prepare", "fb15k237", "--root", raw, "--out", out, "--quiet")
        assert_clean_exit(code, stderr)
        event(f"prepare exit {code}")
        if code == 0:  # whatever was accepted holds no id out of range
            store = GraphStore.open(out)
            store.check_for_run()
            store.verify()
        else:
            assert not out.exists()
        assert sorted(p.name for p in folder.iterdir()) == sorted(["raw"] + (["out"] if code == 0 else []))
        assert_nothing_half_written(folder)


# ---------------------------------------------------------------------------------------------- specs
SPEC_FIELDS = (
    "name", "seed", "dataset", "dataset.name", "dataset.preset", "dataset.params", "dataset.params.num_nodes",
    "dataset.params.homophily", "dataset.root", "dataset.cache_dir", "model", "model.encoder", "model.num_layers",
    "model.hidden_dim", "model.fanouts", "model.aggregation", "model.dropout", "model.decoder",
    "model.embedding_dim", "model.learnable_embeddings", "sampler.name", "sampler.replace", "sampler.direction",
    "system.name", "system.device", "system.options", "system.options.staleness_bound",
    "system.options.num_partitions", "system.options.buffer_capacity", "system.options.policy",
    "training.task", "training.batch_size", "training.epochs", "training.optimizer", "training.learning_rate",
    "training.weight_decay", "training.limit_batches", "training.loss", "training.negatives.num_chunks",
    "training.negatives.negatives_per_positive", "evaluation.every", "evaluation.splits", "evaluation.batch_size",
    "evaluation.fanouts", "evaluation.negatives", "machine.profile", "machine.hourly_usd", "unknown", "model.unknown",
)
spec_values = st.one_of(
    st.integers(-2, 12), st.sampled_from([2**31, 2**63, -(2**63), 10**30]),
    st.floats(allow_nan=True, allow_infinity=True, width=64), st.booleans(), st.none(),
    st.sampled_from(["store", "synthetic", "cora", "tiny", "graphsage", "gcn", "mlp", "dense", "naive", "disk",
                     "pipelined", "in_memory", "cpu", "cuda", "link_prediction", "distmult", "beta", "comet",
                     "sgd", "in", "both", "", "..", "/"]),
    st.text(max_size=8), st.lists(st.integers(-2, 6), max_size=4), st.dictionaries(st.text(max_size=4),
                                                                                  st.integers(-2, 6), max_size=2))


def _within_budget(spec) -> bool:
    """Specs that validate but would train for long are left out (they are not bad input, only expensive)."""
    negatives = spec.training.negatives
    link_prediction = spec.training.task == "link_prediction"
    return (spec.training.epochs <= 2 and spec.model.hidden_dim <= 64 and spec.model.num_layers <= 3
            and all(f <= 10 for f in spec.model.fanouts) and spec.dataset.preset in (None, "tiny")
            and not spec.dataset.params and spec.system.options.get("world_size", 1) in (1, None)
            and (not link_prediction or (spec.model.embedding_dim <= 128 and negatives.num_chunks <= 16
                                         and negatives.negatives_per_positive <= 100)))


@examples("specs")
@given(edits=st.lists(st.tuples(st.sampled_from(SPEC_FIELDS), spec_values), min_size=1, max_size=3))
def test_any_spec_is_refused_in_one_line_or_runs(templates, edits):
    from suite.config import apply_overrides

    with workdir() as folder:
        data = {"dataset": {"name": "store", "root": str(templates["store"]), "cache_dir": str(folder / "data")},
                **copy.deepcopy(RUN_SPEC)}
        for path, value in edits:
            parent = data
            parts = path.split(".")
            for part in parts[:-1]:
                child = parent.get(part)
                if not isinstance(child, dict):
                    child = parent[part] = {}
                parent = child
            parent[parts[-1]] = value
        try:
            spec = spec_from_dict(apply_overrides(data, []))
        except SuiteError:
            spec = None
        assume(spec is None or _within_budget(spec))
        spec_path = folder / "spec.yaml"
        spec_path.write_text(yaml.safe_dump(data))
        code, stderr = gnnsuite("run", spec_path, "--out", folder / "runs", "--quiet")
        assert_clean_exit(code, stderr)
        event(f"spec {'invalid' if spec is None else 'valid'}: run exit {code}")
        if spec is None:
            assert code == 2 and not (folder / "runs").exists()
        assert_nothing_half_written(folder)
