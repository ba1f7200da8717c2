"""Rows of an Arrow binary column as one record batch's records: how `Producer.send_arrow`
queues a topic's keyless values without a Python object per record.

The producer queues records as tuples and the batch encoder walks them, a loop turn and a tuple
per record; for a column of values bound for one topic (what a Spark sink's task or a Connect
source hands over) that per-record Python is most of the cost. A `ValueColumn` stands for rows
[start, start + count) of the column instead, keeping its buffers alive, and the record kernel
(`encode_values`) writes the same bytes `encode_records` writes for those values: no key, no
headers, one timestamp.
"""
from __future__ import annotations

from typing import Any


class ValueColumn:
    """`count` rows of an Arrow binary/string array from `start`, all stamped `timestamp` (ms)."""

    __slots__ = ("count", "data", "offsets", "start", "timestamp", "validity", "wide")

    def __init__(self, array: Any, start: int, count: int, timestamp: int) -> None:
        import pyarrow as pa
        if start < 0 or count < 0 or start + count > len(array):
            raise ValueError(f"rows {start}..{start + count} outside the array's {len(array)}")
        validity, self.offsets, data = array.buffers()
        self.validity = validity if array.null_count else None
        self.data = data if data is not None else b""
        self.wide = pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type)
        self.start, self.count, self.timestamp = array.offset + start, count, timestamp

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"<ValueColumn {self.count} rows>"

    def encode(self, kernel: Any) -> tuple[bytes, int, int, int]:
        """(payload, count, base timestamp, max timestamp), as `encode_records` returns them."""
        return kernel.encode_values(self.offsets, self.data, self.validity, self.wide,
                                    self.start, self.count, self.timestamp)
