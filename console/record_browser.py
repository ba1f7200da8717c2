"""The record browser: a page of one partition's records from an offset or a timestamp, through
minilog's consumer (no group: nothing is committed), values shown as pretty JSON, as Avro
decoded with the client's `AvroDeserializer` when a schema is given, as text, or as hex."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minilog.connector.client import AsyncConsumer, TopicPartition
from minilog.connector.client.serialization import AvroDeserializer, SerializationError

MAX_RECORDS = 200
READ_TIMEOUT_S = 5.0


@dataclass
class ShownRecord:
    offset: int
    timestamp: int
    key: str
    value: str
    value_format: str
    headers: list


def avro_decoder(schema_json: str) -> Callable[[bytes], Any]:
    """Avro values of `schema_json`: framed as Confluent's serializers frame them (magic byte
    0 and a schema id) or bare, whichever decodes."""
    schema = json.loads(schema_json)
    framed, bare = AvroDeserializer(schema, framed=True), AvroDeserializer(schema)

    def decode(data: bytes) -> Any:
        if data[:1] == b"\x00" and len(data) > 5:
            try:
                return framed(data)
            except (SerializationError, ValueError, EOFError, IndexError):
                pass
        return bare(data)
    return decode


def show_bytes(data: bytes | None, avro: Callable[[bytes], Any] | None = None) -> tuple[str, str]:
    """(text, format) of a key or value: "null", "avro", "json" (pretty), "text" or "hex"."""
    if data is None:
        return "null", "null"
    if avro is not None:
        try:
            return json.dumps(avro(data), indent=2, default=str), "avro"
        except (SerializationError, ValueError, EOFError, IndexError):
            pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data.hex(" "), "hex"
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False), "json"
    except ValueError:
        return text, "text"


async def read(consumer: AsyncConsumer, topic: str, partition: int,
               offset: int | None = None, timestamp: int | None = None, limit: int = 50,
               avro_schema: str | None = None) -> list[ShownRecord]:
    """Up to `limit` records of `topic`-`partition` from `offset` (or from the first at or
    after `timestamp` ms; else the beginning), as far as the high watermark allows, read by
    `consumer` (started, without a group: nothing is committed)."""
    limit = max(1, min(limit, MAX_RECORDS))
    avro = avro_decoder(avro_schema) if avro_schema else None
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    if timestamp is not None:
        found = (await consumer.offsets_for_times({tp: timestamp})).get(tp)
        if found is None:
            return []
        consumer.seek(tp, found.offset)
    elif offset is not None:
        consumer.seek(tp, offset)
    else:
        consumer.seek(tp, -2)
    end = (await consumer.end_offsets([tp]))[tp]
    records: list = []
    while len(records) < limit:
        if records and records[-1].offset + 1 >= end:
            break
        if not records and await consumer.position(tp) >= end:
            break
        got = await consumer.poll(READ_TIMEOUT_S, limit - len(records))
        if not got:
            break
        records.extend(got)
    shown = []
    for r in records[:limit]:
        key, _ = show_bytes(r.key)
        value, fmt = show_bytes(r.value, avro)
        headers = [(k, show_bytes(v)[0]) for k, v in r.headers]
        shown.append(ShownRecord(r.offset, r.timestamp, key, value, fmt, headers))
    return shown
