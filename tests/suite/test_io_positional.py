"""Positional IO: no short reads or writes, > 2 GiB transfers, page-cache eviction, O_DIRECT, /proc/self/io."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import torch

from suite.errors import DataError
from suite.io import (
    DIRECT_ALIGNMENT,
    IOCounters,
    ProcessIO,
    direct_io_supported,
    evict_page_cache,
    pread_direct,
    pread_exact,
    pread_into,
    process_io_bytes,
    pwrite_all,
    resident_pages,
)

TWO_GIB = 1 << 31


def _pattern(nbytes: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


@pytest.fixture()
def data_file(tmp_path):
    data = _pattern(1 << 20)
    path = tmp_path / "data.bin"
    path.write_bytes(data.tobytes())
    return path, data


def test_pread_exact_and_into_numpy_and_torch(data_file):
    path, data = data_file
    fd = os.open(path, os.O_RDONLY)
    try:
        assert bytes(pread_exact(fd, 100, 12345)) == data[12345:12445].tobytes()
        out = np.empty((256, 4), dtype=np.float32)  # 4 KiB, a typed preallocated buffer slot
        assert pread_into(fd, out, 4096) == 4096
        assert out.tobytes() == data[4096:8192].tobytes()
        slot = torch.empty(1000, dtype=torch.int16)
        pread_into(fd, slot, 7)
        assert slot.numpy().tobytes() == data[7:2007].tobytes()
        assert bytes(pread_exact(fd, 0, len(data))) == b""
    finally:
        os.close(fd)


def test_short_read_past_end_names_the_file(data_file):
    path, data = data_file
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(DataError, match=r"data\.bin.*short file"):
            pread_exact(fd, 100, len(data) - 50)
        with pytest.raises(DataError, match="custom-name"):
            pread_exact(fd, 10, len(data), path="custom-name")
    finally:
        os.close(fd)


def test_reads_and_writes_loop_on_short_transfers(tmp_path, monkeypatch):
    """Every system call moves at most 7 bytes: the helpers still move everything, in order."""
    real_preadv, real_pwrite = os.preadv, os.pwrite
    calls = {"read": 0, "write": 0}

    def short_preadv(fd, buffers, offset):
        calls["read"] += 1
        return real_preadv(fd, [buffers[0][:7]], offset)

    def short_pwrite(fd, data, offset):
        calls["write"] += 1
        return real_pwrite(fd, bytes(data[:7]), offset)

    monkeypatch.setattr(os, "preadv", short_preadv)
    monkeypatch.setattr(os, "pwrite", short_pwrite)
    data = _pattern(1000, seed=1)
    path = tmp_path / "short.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert pwrite_all(fd, data, 3) == 1000
        assert calls["write"] == -(-1000 // 7)
        assert bytes(pread_exact(fd, 1000, 3)) == data.tobytes()
        assert calls["read"] == -(-1000 // 7)
    finally:
        os.close(fd)


def test_transfers_are_split_into_chunks(tmp_path, monkeypatch):
    real_preadv = os.preadv
    sizes = []

    def recording_preadv(fd, buffers, offset):
        sizes.append(len(buffers[0]))
        return real_preadv(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", recording_preadv)
    data = _pattern(10_000, seed=2)
    path = tmp_path / "chunks.bin"
    path.write_bytes(data.tobytes())
    fd = os.open(path, os.O_RDONLY)
    try:
        assert bytes(pread_exact(fd, 10_000, 0, max_transfer=4096)) == data.tobytes()
    finally:
        os.close(fd)
    assert sizes == [4096, 4096, 1808]


def test_offsets_beyond_2_gib_on_a_sparse_file(tmp_path):
    """A sparse file of 2 GiB + 1 MiB: bytes written around and after the 2 GiB mark read back exactly."""
    path = tmp_path / "sparse.bin"
    size = TWO_GIB + (1 << 20)
    marks = {0: _pattern(5000, 3), TWO_GIB - 2500: _pattern(5000, 4), size - 5000: _pattern(5000, 5)}
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, size)
        for offset, chunk in marks.items():
            pwrite_all(fd, chunk, offset)
        assert os.fstat(fd).st_size == size
        for offset, chunk in marks.items():
            assert bytes(pread_exact(fd, 5000, offset)) == chunk.tobytes()
        assert bytes(pread_exact(fd, 4096, TWO_GIB + 8192)) == bytes(4096)  # a hole reads as zeros
        with pytest.raises(DataError, match="short file"):
            pread_exact(fd, 5001, size - 5000)
    finally:
        os.close(fd)


@pytest.mark.slow  # writes and reads 2 GiB (15 s): the positional-read tests above cover the loop on small files
def test_single_transfer_larger_than_2_gib(tmp_path, monkeypatch):
    """One pread_into and one pwrite_all of 2 GiB + 12345 bytes each, on sparse files: stamped blocks around the
    1 GiB and 2 GiB marks, holes elsewhere, so the test takes seconds (the default test run holds it). Each transfer
    takes several system calls of at most MAX_TRANSFER bytes, and every byte lands where it belongs."""
    import mmap

    from suite.io import MAX_TRANSFER

    nbytes, offset, block = TWO_GIB + 12345, 777, 4096
    positions = [0, MAX_TRANSFER - 100, TWO_GIB - 2048, TWO_GIB + 3000, nbytes - block]  # none overlap
    stamps = {pos: _pattern(block, 100 + i) for i, pos in enumerate(positions)}
    calls: list[tuple[str, int]] = []
    real_preadv, real_pwrite = os.preadv, os.pwrite
    monkeypatch.setattr(os, "preadv", lambda fd, buffers, at: calls.append(("read", len(buffers[0])))
                        or real_preadv(fd, buffers, at))
    monkeypatch.setattr(os, "pwrite", lambda fd, data, at: calls.append(("write", len(data)))
                        or real_pwrite(fd, data, at))

    source = tmp_path / "sparse.bin"
    fd = os.open(source, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, offset + nbytes + block)  # sparse: only the stamps take space
        for pos, stamp in stamps.items():
            pwrite_all(fd, stamp, offset + pos)
        calls.clear()
        buffer = mmap.mmap(-1, nbytes)  # anonymous memory, faulted in by the read (2 MiB pages where allowed)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            buffer.madvise(mmap.MADV_HUGEPAGE)
        assert pread_into(fd, buffer, offset) == nbytes
    finally:
        os.close(fd)
    reads = [size for kind, size in calls if kind == "read"]
    assert len(reads) >= 3 and max(reads) <= MAX_TRANSFER and sum(reads) == nbytes
    view = np.frombuffer(buffer, dtype=np.uint8)
    for pos, stamp in stamps.items():
        assert np.array_equal(view[pos:pos + block], stamp), pos
    assert np.count_nonzero(view) == sum(np.count_nonzero(stamp) for stamp in stamps.values())  # holes read as 0

    target = tmp_path / "copy.bin"
    fd = os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        calls.clear()
        assert pwrite_all(fd, buffer, offset) == nbytes
        writes = [size for kind, size in calls if kind == "write"]
        assert len(writes) >= 3 and max(writes) <= MAX_TRANSFER and sum(writes) == nbytes
        assert os.fstat(fd).st_size == offset + nbytes
        for pos, stamp in stamps.items():
            assert bytes(pread_exact(fd, block, offset + pos)) == stamp.tobytes(), pos
        assert bytes(pread_exact(fd, offset, 0)) == bytes(offset)
    finally:
        os.close(fd)
        del view
        buffer.close()
        target.unlink()


@pytest.mark.slow
def test_single_transfer_larger_than_2_gib_from_the_disk(tmp_path):
    """One pwrite_all and one pread_into of 2 GiB + 12345 bytes of real data (several system calls each), evicted in
    between so that the read comes from the disk; bytes compared chunk by chunk (slow: 2 GiB written and read)."""
    path = tmp_path / "big.bin"
    nbytes = TWO_GIB + 12345
    offset = 777
    data = np.empty(nbytes, dtype=np.uint8)
    block = _pattern(1 << 20, 6)
    for start in range(0, nbytes, len(block)):
        piece = data[start:start + len(block)]
        piece[:] = block[:len(piece)]
        piece[:8] = np.frombuffer(np.int64(start).tobytes(), dtype=np.uint8)  # position stamps
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, nbytes + 2 * offset + (1 << 20))  # sparse beyond the data
        assert pwrite_all(fd, data, offset) == nbytes
        evict_page_cache(fd)
        out = np.zeros(nbytes, dtype=np.uint8)
        before = process_io_bytes()
        assert pread_into(fd, out, offset) == nbytes
        seen = process_io_bytes() - before
        step = 256 << 20
        for start in range(0, nbytes, step):
            assert np.array_equal(out[start:start + step], data[start:start + step]), start
        if seen.available:
            assert seen.read_bytes >= 0.9 * nbytes  # really read from the disk
        assert bytes(pread_exact(fd, offset, 0)) == bytes(offset)
    finally:
        os.close(fd)


def test_evict_page_cache_makes_reads_hit_the_disk(tmp_path):
    path = tmp_path / "evict.bin"
    nbytes = 8 << 20
    data = _pattern(nbytes, 7)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        pwrite_all(fd, data, 0)
        evict_page_cache(fd)  # fdatasync first: the just-written dirty pages can be dropped
        resident, total = resident_pages(path)
        assert total == nbytes // os.sysconf("SC_PAGE_SIZE")
        if resident > total // 4:
            pytest.skip(f"this file system keeps pages cached after POSIX_FADV_DONTNEED ({resident}/{total})")
        before = process_io_bytes()
        out = np.empty(nbytes, dtype=np.uint8)
        pread_into(fd, out, 0)
        seen = process_io_bytes() - before
        assert np.array_equal(out, data)
        assert resident_pages(path)[0] > total // 2  # the read cached them again
        if seen.available and seen.read_bytes:  # some containers do not account storage reads
            assert seen.read_bytes >= nbytes // 2
        assert seen.rchar >= nbytes
        evict_page_cache(path)  # by path too
        assert resident_pages(path)[0] <= total // 4
    finally:
        os.close(fd)


def test_pread_direct_any_alignment(tmp_path):
    path = tmp_path / "direct.bin"
    size = 3 * DIRECT_ALIGNMENT + 1000
    data = _pattern(size, 8)
    path.write_bytes(data.tobytes())
    if not direct_io_supported(path):
        pytest.skip("O_DIRECT not supported on this file system")
    for offset, nbytes in [(0, size), (1, 10), (DIRECT_ALIGNMENT - 3, DIRECT_ALIGNMENT + 7), (size - 5, 5)]:
        out = bytearray(nbytes)
        assert pread_direct(path, out, offset, chunk=DIRECT_ALIGNMENT) == nbytes
        assert bytes(out) == data[offset:offset + nbytes].tobytes(), (offset, nbytes)
    out = np.empty(size, dtype=np.uint8)
    pread_direct(path, out, 0)
    assert np.array_equal(out, data)
    with pytest.raises(DataError, match=r"direct\.bin.*short file"):
        pread_direct(path, bytearray(10), size - 5)


def test_process_io_bytes_and_counters():
    snap = process_io_bytes()
    assert isinstance(snap, ProcessIO)
    if os.path.exists("/proc/self/io"):
        assert snap.available and snap.rchar > 0
    assert set(snap.as_dict()) == {"rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes",
                                   "cancelled_write_bytes"}
    counters = IOCounters()

    def work():
        for _ in range(1000):
            counters.add_read(3)
            counters.add_write(5)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counters.snapshot() == {"bytes_read": 12_000, "bytes_written": 20_000, "reads": 4000, "writes": 4000,
                                   "read_s": 0.0, "write_s": 0.0}
    counters.reset()
    assert counters.snapshot()["bytes_read"] == 0


def test_read_only_buffer_is_rejected(data_file):
    path, _ = data_file
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(ValueError, match="read-only"):
            pread_into(fd, b"12345", 0)
    finally:
        os.close(fd)
