"""Atomic writes, staged folders and streaming .npy writes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from suite.errors import DataError
from suite.graph.npy import NpyAppender, read_npy_header
from suite.io import atomic_write_json, file_checksum, staged_directory


def test_atomic_write_json_replaces_whole_file(tmp_path):
    path = tmp_path / "summary.json"
    atomic_write_json(path, {"a": 1})
    atomic_write_json(path, {"b": [1, 2]})
    assert json.loads(path.read_text()) == {"b": [1, 2]}
    assert os.listdir(tmp_path) == ["summary.json"]


def test_checksum_is_sha256_of_bytes(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"abc")
    assert file_checksum(path) == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_staged_directory_appears_only_on_success(tmp_path):
    with pytest.raises(RuntimeError):
        with staged_directory(tmp_path / "out") as tmp:
            (tmp / "part").write_text("half")
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []
    with staged_directory(tmp_path / "out") as tmp:
        (tmp / "part").write_text("whole")
    assert (tmp_path / "out" / "part").read_text() == "whole"
    with pytest.raises(DataError, match="already exists"):
        with staged_directory(tmp_path / "out"):
            pass
    with staged_directory(tmp_path / "out", overwrite=True) as tmp:
        (tmp / "new").write_text("new")
    assert os.listdir(tmp_path / "out") == ["new"]
    assert os.listdir(tmp_path) == ["out"]


@pytest.mark.parametrize(("dtype", "row_shape"), [(np.int32, ()), (np.float16, (3,)), (np.int64, (2, 2))])
def test_npy_appender_round_trip(tmp_path, dtype, row_shape):
    path = tmp_path / "a.npy"
    rng = np.random.default_rng(0)
    chunks = [rng.integers(-5, 5, size=(k, *row_shape)).astype(dtype) for k in (3, 0, 5)]
    with NpyAppender(path, dtype, row_shape) as out:
        for chunk in chunks:
            out.append(chunk)
    expected = np.concatenate(chunks)
    assert np.array_equal(np.load(path), expected)
    header_dtype, shape, offset = read_npy_header(path)
    assert (header_dtype, shape, offset) == (np.dtype(dtype), expected.shape, 128)


def test_npy_appender_rejects_bad_chunks(tmp_path):
    with pytest.raises(ValueError, match="do not fit in int32"):
        with NpyAppender(tmp_path / "a.npy", np.int32) as out:
            out.append(np.array([2**40]))
    with pytest.raises(ValueError, match="chunk rows have shape"):
        with NpyAppender(tmp_path / "b.npy", np.float32, (3,)) as out:
            out.append(np.zeros((2, 4)))
