"""Packing by hand: each batch's distinct rows written contiguously, batch after batch, across several windows; the
file complete under its name (no partial file left), out of the page cache; batches read back from their stretch."""

from __future__ import annotations

import numpy as np
import pytest

from suite.io import IOCounters, resident_pages
from systems.feature_cache.direct_io import ExtentReader
from systems.feature_cache.packing import PackedEpoch, pack_epoch, packed_offsets
from tests.support.feature_cache import write_table


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return write_table(tmp_path_factory.mktemp("pack"), rows=300, dim=24)  # 96-byte rows


@pytest.mark.parametrize("window_bytes", [96 * 4, 1 << 20], ids=["windows-of-a-batch", "one-window"])
def test_each_batch_is_one_contiguous_stretch_of_the_packed_file(table, tmp_path, window_bytes):
    path, values = table
    batches = [np.array([3, 7, 8, 299]), np.array([0, 7]), np.array([], dtype=np.int64), np.array([5, 6, 7, 150, 151])]
    counters = IOCounters()
    source = ExtentReader(path, counters, merge_gap_bytes=0)
    packed_path = tmp_path / "packed" / "epoch-0.npy"
    try:
        stats = pack_epoch(batches, source, packed_path, window_bytes=window_bytes)
    finally:
        source.close()
    assert packed_offsets(batches).tolist() == [0, 4, 6, 6, 11]
    assert resident_pages(packed_path)[0] == 0  # before anything reads it
    packed = np.load(packed_path)
    np.testing.assert_array_equal(packed, values[np.concatenate(batches)])
    assert stats.rows == 11 and stats.write_bytes == packed_path.stat().st_size and stats.seconds > 0
    assert stats.read_bytes == counters.snapshot()["bytes_read"] > 0
    assert [p.name for p in packed_path.parent.iterdir()] == ["epoch-0.npy"]
    epoch = PackedEpoch(packed_path, batches, IOCounters(), direct=True, io_threads=2, merge_gap_bytes=0)
    try:
        last = epoch.batch(3)
        assert last.locate(np.array([6, 150])).tolist() == [7, 9]
        out = np.zeros((2, 24), dtype=np.float32)
        epoch.reader.read_rows(last.locate(np.array([6, 150])), out=out, targets=np.array([1, 0]))
        np.testing.assert_array_equal(out, values[[150, 6]])
        assert epoch.reader.stats.extents == 1
    finally:
        epoch.close()
    assert not packed_path.exists()
