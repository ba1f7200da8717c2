"""Fetch v0-v3: record batches (format v2) down-converted to the message sets old consumers read.

Kafka 3.9 still serves Fetch v0-v3 (removed in 4.0, KIP-896): it converts the batches it would
send into message format v0 (Fetch v0-v1) or v1 (Fetch v2-v3), uncompressed, one message per
record, dropping headers, control batches and what is below the fetch offset. Tools built on
old clients still fetch this way (Burrow's sarama below `kafka-version` 0.11). This is the one
place the broker re-encodes records on the fetch path, and only for those old versions.

A message: offset int64, size int32, then crc32 uint32 (of what follows), magic int8,
attributes int8 (bit 3: LogAppendTime, v1), timestamp int64 (v1 only), key and value as
int32-length bytes (-1 for null).
"""
import struct
import zlib

from minilog.connector.records import decode_batches

_V0_HEAD = struct.Struct(">bb")
_V1_HEAD = struct.Struct(">bbq")
_LOG_APPEND_TIME = 0x08


def _bytes(b: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if b is None else struct.pack(">i", len(b)) + b


def message_format(fetch_version: int) -> int:
    """The message format a Fetch version reads: v0 for Fetch v0-v1, v1 for v2-v3."""
    return 0 if fetch_version < 2 else 1


def down_convert(data: bytes, magic: int, fetch_offset: int) -> bytes:
    """The message set of `magic` holding the data records of the batches in `data` at or
    after `fetch_offset`."""
    out = []
    for r in decode_batches(data, start_offset=fetch_offset):
        if magic == 0:
            head = _V0_HEAD.pack(0, 0)
        else:
            attributes = _LOG_APPEND_TIME if r.timestamp_type == 1 else 0
            head = _V1_HEAD.pack(1, attributes, r.timestamp)
        body = head + _bytes(r.key) + _bytes(r.value)
        message = struct.pack(">I", zlib.crc32(body)) + body
        out.append(struct.pack(">qi", r.offset, len(message)) + message)
    return b"".join(out)
