"""The record browser: the newest records of a topic across its partitions (where it opens),
or a page of one partition's records from an offset or a timestamp, through minilog's consumer
(no group: nothing is committed); values shown as pretty JSON, as Avro decoded with the
client's `AvroDeserializer` when a schema is given, as text, or as hex; times in ISO 8601 UTC
beside the raw epoch milliseconds Kafka stores."""
from __future__ import annotations

import datetime
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
    partition: int
    offset: int
    timestamp: int  # epoch milliseconds, as the record carries it (-1: none)
    key: str
    value: str
    value_format: str
    headers: list

    @property
    def time(self) -> str:
        """The timestamp in ISO 8601, UTC, to the millisecond; "-" for none."""
        return iso_time(self.timestamp)


def iso_time(ms: int) -> str:
    if ms < 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


def _shown(records: list, avro: Callable[[bytes], Any] | None) -> list[ShownRecord]:
    shown = []
    for r in records:
        key, _ = show_bytes(r.key)
        value, fmt = show_bytes(r.value, avro)
        headers = [(k, show_bytes(v)[0]) for k, v in r.headers]
        shown.append(ShownRecord(r.partition, r.offset, r.timestamp, key, value, fmt, headers))
    return shown


async def _read_to(consumer: AsyncConsumer, ends: dict[TopicPartition, int],
                   limit: int) -> list:
    """The records of the assigned, positioned partitions up to their `ends` (at most `limit`
    of each); a partition is done at its end, or when a poll brings nothing more."""
    pending = dict(ends)
    records: list = []
    while pending:
        for tp in list(pending):
            if await consumer.position(tp) >= pending[tp]:
                del pending[tp]
        if not pending:
            break
        got = await consumer.poll(READ_TIMEOUT_S, limit * len(pending))
        if not got:
            break
        records.extend(r for r in got
                       if r.offset < pending.get(TopicPartition(r.topic, r.partition), -1))
    return records


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
    return _shown((await _read_to(consumer, {tp: end}, limit))[:limit], avro)


async def read_newest(consumer: AsyncConsumer, topic: str, partitions: list[int],
                      limit: int = 50, avro_schema: str | None = None) -> list[ShownRecord]:
    """The newest `limit` records of `topic` across `partitions`, oldest first (by
    timestamp, then partition and offset): at most the last `limit` of each partition are
    read, so an empty partition 0 shows what the others hold."""
    limit = max(1, min(limit, MAX_RECORDS))
    avro = avro_decoder(avro_schema) if avro_schema else None
    tps = [TopicPartition(topic, p) for p in partitions]
    begins = await consumer.beginning_offsets(tps)
    ends = await consumer.end_offsets(tps)
    held = {tp: ends[tp] for tp in tps if ends.get(tp, 0) > begins.get(tp, 0)}
    if not held:
        return []
    consumer.assign(list(held))
    for tp, end in held.items():
        consumer.seek(tp, max(begins[tp], end - limit))
    records = await _read_to(consumer, held, limit)
    records.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    return _shown(records[-limit:], avro)
