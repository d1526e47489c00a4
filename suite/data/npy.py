"""Streaming writes of ``.npy`` files whose length is only known at the end.

:class:`NpyAppender` reserves the header, appends row chunks with plain buffered writes (so the pages written do
not count toward the process' resident memory as a writable memory map would), and writes the real header on
close. Header sizes: ``.npy`` headers are padded to a multiple of 64 bytes; the reserved size is that of the
largest possible shape, and :meth:`NpyAppender.close` checks the final header has exactly that size.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from suite.io import check_read, close_file, close_quietly, flush_to, open_write, sync_file, write_to

_MAX_ROWS = 2**62


def _header_bytes(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    buffer = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def read_npy_header(path: str | os.PathLike) -> tuple[np.dtype, tuple[int, ...], int]:
    """Return ``(dtype, shape, data_offset)`` of a ``.npy`` file without reading its data."""
    check_read(path)
    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
        if fortran:
            raise ValueError("Fortran-ordered arrays are not supported (row-major required)")
        return dtype, tuple(shape), handle.tell()


class NpyAppender:
    """Append-only writer of a row-major ``.npy`` file with a fixed dtype and row shape.

    Args:
        path: destination file (created or truncated).
        dtype: element type; appended chunks are cast to it (with a check that no value changes).
        row_shape: shape of one row (``()`` for a 1-D array).
    """

    def __init__(self, path: str | os.PathLike, dtype, row_shape: tuple[int, ...] = ()):
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.row_shape = tuple(int(s) for s in row_shape)
        self.rows = 0
        self._reserved = len(_header_bytes(self.dtype, (_MAX_ROWS, *self.row_shape)))
        self._handle = open_write(self.path, "wb")
        try:
            write_to(self._handle, b"\0" * self._reserved, self.path)
        except BaseException:
            self._handle.close()
            raise

    def append(self, chunk: np.ndarray) -> None:
        """Append rows; ``chunk`` must have shape ``(k, *row_shape)``."""
        chunk = np.asarray(chunk)
        if chunk.shape[1:] != self.row_shape:
            raise ValueError(f"{self.path.name}: chunk rows have shape {chunk.shape[1:]}, expected {self.row_shape}")
        if chunk.dtype != self.dtype:
            cast = chunk.astype(self.dtype)
            if chunk.dtype.kind in "iu" and self.dtype.kind in "iu" and not np.array_equal(cast, chunk):
                raise ValueError(f"{self.path.name}: values do not fit in {self.dtype}")
            chunk = cast
        write_to(self._handle, np.ascontiguousarray(chunk).data, self.path)
        self.rows += chunk.shape[0]

    def close(self) -> tuple[int, ...]:
        """Write the header for the final shape, flush and close; return the shape."""
        if self._handle.closed:
            return (self.rows, *self.row_shape)
        shape = (self.rows, *self.row_shape)
        header = _header_bytes(self.dtype, shape)
        if len(header) != self._reserved:
            raise AssertionError(f"npy header size changed ({len(header)} != {self._reserved})")
        try:
            flush_to(self._handle, self.path)  # seek flushes the buffered rows: a full disk must name the file
            self._handle.seek(0)
            write_to(self._handle, header, self.path)
            sync_file(self._handle, self.path)
            close_file(self._handle, self.path)
        finally:
            if not self._handle.closed:
                self._close_quietly()
        return shape

    def _close_quietly(self) -> None:
        close_quietly(self._handle)

    def __enter__(self) -> "NpyAppender":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._close_quietly()
