"""Atomic writes, strict JSON, locks, staged folders and streaming .npy writes."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from suite.errors import DataError, LockedError
from suite.data.npy import NpyAppender, read_npy_header
from suite.io import (
    atomic_write_json,
    exclusive_lock,
    file_checksum,
    json_safe,
    lock_path,
    staged_directory,
    strict_json_dumps,
)
from tests.support.paths import REPO_ROOT


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


def test_strict_json_writes_null_for_non_finite_numbers_and_names_them(tmp_path):
    value = {"loss": [0.5, math.nan], "metrics": {"test": {"accuracy": float("inf")}}, "n": np.int64(3),
             "x": np.float32(1.5), "t": torch.tensor(-math.inf), "ok": True}
    clean, non_finite = json_safe(value)
    assert clean == {"loss": [0.5, None], "metrics": {"test": {"accuracy": None}}, "n": 3, "x": 1.5, "t": None,
                     "ok": True}
    assert non_finite == {"loss[1]": "nan", "metrics.test.accuracy": "inf", "t": "-inf"}
    text = strict_json_dumps(value)
    assert "NaN" not in text and "Infinity" not in text and json.loads(text)["loss"] == [0.5, None]
    atomic_write_json(tmp_path / "x.json", value)
    json.loads((tmp_path / "x.json").read_text(), parse_constant=lambda name: pytest.fail(f"bare {name}"))


def test_a_held_lock_names_its_holder_and_is_removed_on_release(tmp_path):
    path = tmp_path / "thing.lock"
    with exclusive_lock(path, "the thing"):
        assert path.read_text().strip() == str(os.getpid())
        with pytest.raises(LockedError, match=rf"the thing: in use by process {os.getpid()} \(lock file"):
            with exclusive_lock(path, "the thing"):
                pass
    assert not path.exists()
    with exclusive_lock(path, "the thing"):  # free again
        pass


def test_the_lock_of_a_killed_holder_is_taken_over(tmp_path):
    path = tmp_path / "run.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom suite.io import exclusive_lock\n"
         "with exclusive_lock(sys.argv[1], 'x'):\n    print('held', flush=True)\n    time.sleep(60)", str(path)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(LockedError, match=f"in use by process {holder.pid}"):
            with exclusive_lock(path, "x"):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert path.read_text().strip() == str(holder.pid)  # the dead writer's lock file is still there...
    with exclusive_lock(path, "x"):  # ...and is taken over
        assert path.read_text().strip() == str(os.getpid())
    assert not path.exists()


def test_a_waiting_lock_gets_it_when_the_holder_releases(tmp_path):
    import threading

    path = tmp_path / "cache.lock"
    order = []

    def wait_for_it() -> None:
        with exclusive_lock(path, "entry", wait=True):
            order.append("waiter")

    with exclusive_lock(path, "entry"):
        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        time.sleep(0.2)
        order.append("holder")
    waiter.join(10)
    assert order == ["holder", "waiter"] and not path.exists()


def test_staged_directory_refuses_a_second_writer_and_removes_dead_writers_leftovers(tmp_path):
    final = tmp_path / "store"
    stale = tmp_path / ".store.partial-deadbeef"  # what a killed writer leaves
    stale.mkdir()
    (stale / "big.npy").write_bytes(b"x" * 1000)
    (tmp_path / ".store.old-cafe0000").mkdir()
    (tmp_path / ".other.partial-00000000").mkdir()  # another output's: not ours to remove
    with staged_directory(final) as tmp:
        assert not stale.exists() and not (tmp_path / ".store.old-cafe0000").exists()
        with pytest.raises(LockedError, match=f"{final}: output folder: in use by process {os.getpid()}"):
            with staged_directory(final):
                pass
        (tmp / "part").write_text("whole")
    assert sorted(os.listdir(tmp_path)) == [".other.partial-00000000", "store"]
    assert not lock_path(final).exists()


def test_staged_directory_checks_the_output_again_at_the_rename(tmp_path):
    final = tmp_path / "out"
    with pytest.raises(DataError, match="already exists"):
        with staged_directory(final) as tmp:
            (tmp / "a").write_text("mine")
            final.mkdir()  # appeared meanwhile (a writer that ignores the lock)
            (final / "b").write_text("theirs")
    assert os.listdir(final) == ["b"] and sorted(os.listdir(tmp_path)) == ["out"]
