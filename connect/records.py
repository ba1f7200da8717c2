"""A micro-batch of Connect records as the transforms see it: Arrow columns (topic, partition,
offset, timestamp, headers, key, value) with the key and value decoded into Connect data by the
connector's converters only when a field transform asks for them, once per batch, and encoded
back once at the end.

Record-level transforms and predicates (RegexRouter, Filter, TopicNameMatches, HasHeaderKey,
RecordIsTombstone) work on the Arrow columns and never decode a record.
"""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .converters import ConnectData, Converter

SIDES = ("key", "value")


class Records:
    """One batch; `sink` says whether these are SinkRecords (they have Kafka offsets)."""

    def __init__(self, batch: pa.RecordBatch, converters: dict[str, Converter],
                 sink: bool) -> None:
        self.columns: dict[str, pa.Array] = {n: batch.column(n) for n in batch.schema.names}
        self.schema = batch.schema
        self.converters = converters
        self.sink = sink
        self._data: dict[str, list[ConnectData]] = {}
        self._meta: dict[str, list[Any]] = {}

    def __len__(self) -> int:
        return len(self.columns["value"])

    def column(self, name: str) -> pa.Array | None:
        return self.columns.get(name)

    def connect_data(self, side: str) -> list[ConnectData]:
        if side not in self._data:
            raw = self.columns.get(side)
            values = raw.to_pylist() if raw is not None else [None] * len(self)
            self._data[side] = self.converters[side].decode(values)
        return self._data[side]

    def set_connect_data(self, side: str, data: list[ConnectData]) -> None:
        self._data[side] = data

    def meta(self, name: str) -> list[Any]:
        """topic, partition, offset or timestamp (epoch milliseconds) of each record, as Python
        values (None where a source record has none)."""
        if name not in self._meta:
            col = self.columns.get(name)
            if col is None:
                self._meta[name] = [None] * len(self)
            elif name == "timestamp":
                millis = col.cast(pa.timestamp("ms", col.type.tz), safe=False).cast(pa.int64())
                self._meta[name] = millis.to_pylist()
            else:
                self._meta[name] = col.to_pylist()
        return self._meta[name]

    def set_topics(self, topics: pa.Array) -> None:
        self.columns["topic"] = topics
        self._meta.pop("topic", None)

    def keep(self, mask: pa.BooleanArray) -> None:
        """Only the records where `mask` is true go on (Filter)."""
        self.columns = {n: pc.filter(c, mask) for n, c in self.columns.items()}
        flags = mask.to_pylist()
        self._data = {s: [d for d, f in zip(data, flags) if f] for s, data in self._data.items()}
        self._meta = {n: [v for v, f in zip(vals, flags) if f] for n, vals in self._meta.items()}

    def to_batch(self) -> pa.RecordBatch:
        """The batch with the same schema, the decoded sides encoded again."""
        for side, data in self._data.items():
            if side in self.columns:
                encoded = self.converters[side].encode(data)
                kind = self.schema.field(side).type
                if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
                    encoded = [e.encode() if isinstance(e, str) else e for e in encoded]
                self.columns[side] = pa.array(encoded, kind)
        return pa.RecordBatch.from_arrays([self.columns[n] for n in self.schema.names],
                                          schema=self.schema)
