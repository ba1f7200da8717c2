"""A value column cut into pieces of about `batch.size` bytes: the batches `Producer.send_arrow`
queues for a topic's keyless values (see `minilog.connector.value_column`).

A piece holds whole rows and at most `limit` bytes as `send` counts a record (24 + its value),
except a row larger than that, which is a piece alone: the same batches the per-record path
fills, cut with numpy over the column's offsets instead of a loop turn per record.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

# (first row, rows, bytes as `send` counts them)
Piece = tuple[int, int, int]


def value_pieces(column: Any, limit: int) -> Iterator[tuple[Any, list[Piece]]]:
    """(array, its pieces) for each chunk of a pyarrow binary or string column."""
    import numpy as np
    import pyarrow as pa
    t = column.type
    wide = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
    if not (wide or pa.types.is_binary(t) or pa.types.is_string(t)):
        raise TypeError(f"key and value columns must be binary or string, not {t}")
    for array in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        n = len(array)
        if not n:
            continue
        ends = np.frombuffer(array.buffers()[1], dtype=np.int64 if wide else np.int32)
        sizes = np.diff(ends[array.offset:array.offset + n + 1]).astype(np.int64)
        if array.null_count:  # a null's slot may span bytes: it is sent as no value
            sizes[array.is_null().to_numpy(zero_copy_only=False)] = 0
        sizes += 24
        total = np.cumsum(sizes)
        pieces: list[Piece] = []
        start, base = 0, 0
        while start < n:
            end = max(int(np.searchsorted(total, base + limit, side="right")), start + 1)
            last = int(total[end - 1])
            pieces.append((start, end - start, last - base))
            start, base = end, last
        yield array, pieces
