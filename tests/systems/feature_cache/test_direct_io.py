"""Extent planning by hand; reads that return the table's rows with and without O_DIRECT, leave nothing in the page
cache, and count what they read; a tmpfs file (O_DIRECT refused) falls back with a note."""

from __future__ import annotations

import numpy as np
import pytest

from suite.errors import DataError
from suite.io import IOCounters, direct_io_supported, evict_page_cache, resident_pages
from systems.feature_cache.direct_io import ExtentReader, cut_pieces, plan_extents
from tests.support.feature_cache import write_table


def test_rows_become_block_aligned_extents_merged_when_they_touch_or_lie_within_the_gap():
    # row r at bytes 128 + 1000 r ... + 1000: rows 0, 1, 3 lie in blocks [0, 8192) (row 3 ends at 4128); row 20 at
    # 20128..21128 in blocks [16384, 24576).
    extents = plan_extents(np.array([0, 1, 3, 20]), data_offset=128, row_bytes=1000, file_size=30_000)
    assert extents.file_offsets.tolist() == [0, 16384] and extents.lengths.tolist() == [8192, 8192]
    assert extents.needed.tolist() == [8192, 8192]
    assert extents.row_positions.tolist() == [128, 1128, 3128, 8192 + 20128 - 16384]
    apart = plan_extents(np.array([0, 1, 3, 20]), 128, 1000, 30_000, merge_gap_bytes=8191)
    assert apart.file_offsets.tolist() == [0, 16384]
    merged = plan_extents(np.array([0, 1, 3, 20]), 128, 1000, 30_000, merge_gap_bytes=8192)  # the gap: 8192 bytes
    assert merged.file_offsets.tolist() == [0] and merged.lengths.tolist() == [24576]
    assert merged.row_positions.tolist() == [128, 1128, 3128, 20128]
    end = plan_extents(np.array([29]), 128, 1000, file_size=128 + 30 * 1000)  # the last row: the file ends first
    assert end.file_offsets.tolist() == [28672] and end.needed.tolist() == [30128 - 28672]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return write_table(tmp_path_factory.mktemp("io"), rows=5000, dim=40)  # 160-byte rows, ~800 KB


@pytest.mark.parametrize("direct", [True, False], ids=["o_direct", "buffered"])
def test_reads_return_the_tables_rows_and_count_the_blocks_read(table, direct):
    path, values = table
    counters = IOCounters()
    reader = ExtentReader(path, counters, direct=direct, io_threads=3)
    try:
        assert reader.direct == (direct and direct_io_supported(path))
        rows = np.unique(np.random.default_rng(0).integers(0, 5000, size=700))
        np.testing.assert_array_equal(reader.read_rows(rows), values[rows])
        np.testing.assert_array_equal(reader.read_rows(np.array([4999])), values[[4999]])  # runs past the end
        extents = plan_extents(rows, reader.data_offset, reader.row_bytes, reader.file_size, reader.merge_gap_bytes)
        assert reader.plan(rows).total_bytes == extents.total_bytes
        last = reader.plan(np.array([4999]))
        expected = int(extents.needed.sum() + last.needed.sum())
        assert counters.snapshot()["bytes_read"] == expected == reader.stats.bytes
        assert reader.stats.extents == len(extents.lengths) + 1 and reader.stats.rows == len(rows) + 1
        assert reader.read_rows(np.empty(0, dtype=np.int64)).shape == (0, 40)
    finally:
        reader.close()


def test_direct_reads_leave_the_file_out_of_the_page_cache(table):
    path, values = table
    assert direct_io_supported(path), "the test folder's file system refuses O_DIRECT"
    evict_page_cache(path)
    reader = ExtentReader(path, IOCounters(), direct=True)
    try:
        reader.read_rows(np.arange(0, 5000, 3))
    finally:
        reader.close()
    assert resident_pages(path)[0] == 0


def test_where_o_direct_is_refused_reads_fall_back_to_buffered_ones_that_drop_their_pages(table, monkeypatch):
    # the probe is what a file system that refuses O_DIRECT answers (tmpfs before Linux 6.6; this kernel's allows it)
    import systems.feature_cache.direct_io as direct_io

    path, values = table
    monkeypatch.setattr(direct_io, "direct_io_supported", lambda path: False)
    reader = ExtentReader(path, IOCounters(), direct=True)
    try:
        assert not reader.direct and "O_DIRECT refused" in reader.note
        rows = np.array([3, 50, 99, 4000])
        np.testing.assert_array_equal(reader.read_rows(rows), values[rows])
    finally:
        reader.close()
    assert resident_pages(path)[0] == 0


def test_a_truncated_table_is_a_data_error_naming_the_file(tmp_path):
    path, _ = write_table(tmp_path, rows=2000, dim=16)
    reader = ExtentReader(path, IOCounters(), direct=False)
    try:
        with open(path, "r+b") as handle:
            handle.truncate(50_000)
        with pytest.raises(DataError, match="features.npy: file ends at byte"):
            reader.read_rows(np.array([1990]))
    finally:
        reader.close()


def test_extents_are_cut_into_aligned_pieces_of_one_threads_share_at_most():
    # one extent of 5 blocks and one of 1 block (file ends 100 bytes into the last block); 2 threads, pieces of at
    # least 1 block: the share is ceil(6 blocks / 2) = 3 blocks
    extents = plan_extents(np.array([0, 9, 40]), data_offset=0, row_bytes=2048, file_size=40 * 2048 + 100,
                           merge_gap_bytes=0, alignment=4096)
    assert extents.lengths.tolist() == [4096, 4096, 4096]
    merged = plan_extents(np.array([0, 9, 40]), 0, 2048, 40 * 2048 + 100, merge_gap_bytes=4096 * 3)
    assert merged.lengths.tolist() == [20480, 4096]
    offsets, lengths, needed, buffer_offsets = cut_pieces(merged, threads=2, min_piece=4096, alignment=4096)
    assert offsets.tolist() == [0, 12288, 81920] and lengths.tolist() == [12288, 8192, 4096]
    assert needed.tolist() == [12288, 8192, 100] and buffer_offsets.tolist() == [0, 12288, 20480]
    same = cut_pieces(merged, threads=1, min_piece=4096, alignment=4096)
    assert same[1].tolist() == [20480, 4096]


@pytest.mark.parametrize("threads", [1, 5])
def test_rows_land_in_the_callers_array_at_the_given_places_and_a_run_of_rows_is_a_view_of_the_read(table, threads):
    path, values = table
    reader = ExtentReader(path, IOCounters(), io_threads=threads, merge_gap_bytes=0)
    try:
        run = reader.read_rows(np.arange(1000, 3500))  # one extent: returned without a copy, aligned or not
        np.testing.assert_array_equal(run, values[1000:3500])
        assert run.base is not None and reader.stats.extents == 1
        rows = np.array([3, 4, 700, 4998])
        out = np.zeros((6, 40), dtype=np.float32)
        assert reader.read_rows(rows, out=out, targets=np.array([5, 0, 2, 3])) is out
        np.testing.assert_array_equal(out[[5, 0, 2, 3]], values[rows])
        assert not out[[1, 4]].any()
    finally:
        reader.close()
