"""CRC-32 of many byte segments at once, equal to :func:`zlib.crc32` of each (compiled with numba).

A partitioned store keeps one CRC-32 per non-empty edge bucket; at fine granularity (``p`` in the thousands) a
store has millions of buckets of a few rows each, and a call of :func:`zlib.crc32` per bucket would cost more than
the bytes. :func:`crc32_segments` computes them all in one compiled loop (table-driven, the polynomial of zlib).
Imported on first use (numba's import and compilation are paid only by the code that needs it).
"""

from __future__ import annotations

import numba
import numpy as np

_POLY = 0xEDB88320


def _table() -> np.ndarray:
    table = np.empty(256, dtype=np.uint32)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table[n] = c
    return table


_TABLE = _table()


@numba.njit(cache=True, nogil=True)
def _crc32_segments(data: np.ndarray, starts: np.ndarray, stops: np.ndarray, table: np.ndarray) -> np.ndarray:
    out = np.empty(len(starts), dtype=np.int64)
    for s in range(len(starts)):
        crc = np.uint32(0xFFFFFFFF)
        for k in range(starts[s], stops[s]):
            crc = table[(crc ^ data[k]) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
        out[s] = np.int64(crc ^ np.uint32(0xFFFFFFFF))
    return out


def crc32_segments(data: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """``(len(starts),)`` int64: the CRC-32 (:func:`zlib.crc32`) of ``data[starts[s]:stops[s]]`` for every ``s``.

    Args:
        data: a contiguous ``uint8`` array (e.g. ``rows.view(np.uint8).reshape(-1)``).
        starts, stops: byte bounds of the segments.
    """
    data = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    return _crc32_segments(data, np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64), _TABLE)


__all__ = ["crc32_segments"]
