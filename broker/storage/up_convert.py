"""Produce v0-v2: message sets of formats v0/v1 converted to one v2 record batch on the way in.

Kafka 3.9 still takes Produce v0-v2 (removed in 4.0, KIP-896) and stores every partition in
format v2, so its LogValidator rebuilds what old producers send: each message, or each inner
message of one compressed wrapper, becomes a record of a single v2 batch with the producer's
codec (`convertAndAssignOffsetsNonCompressed`, `buildRecordsAndAssignOffsets`). v0 messages
carry no timestamp (-1 in the batch). Produce v0-v2 may also carry v2 batches, which pass as
they are. This and `down_convert.py` are the only places the broker re-encodes records, and
only for those old versions.

A message: offset int64, size int32, then crc32 uint32 (of what follows), magic int8,
attributes int8 (bits 0-2: codec, bit 3: LogAppendTime, v1), timestamp int64 (v1 only), key
and value as int32-length bytes (-1 for null). A compressed wrapper's value is the compressed
message set of its inner messages.
"""
import struct
import zlib
from typing import NamedTuple

from minilog.connector import compression as codecs
from minilog.connector.batch import InvalidBatch
from minilog.connector.protocol import ErrorCode
from minilog.connector.records import encode_batch

_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_MAGIC_AT = 16  # the magic byte's position in a message and in a v2 batch alike
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08
NO_TIMESTAMP = -1


class Message(NamedTuple):
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _field(body: bytes, at: int) -> tuple[bytes | None, int]:
    if at + 4 > len(body):
        raise InvalidBatch("message truncated inside its key or value")
    (n,) = _INT32.unpack_from(body, at)
    at += 4
    if n < 0:
        return None, at
    if at + n > len(body):
        raise InvalidBatch("message truncated inside its key or value")
    return body[at:at + n], at + n


def read_messages(data: bytes) -> list[Message]:
    """The messages of a v0/v1 message set, each CRC-checked (CORRUPT_MESSAGE otherwise)."""
    out, pos, end = [], 0, len(data)
    while pos < end:
        if end - pos < _HEAD.size:
            raise InvalidBatch(f"message set truncated: {end - pos} bytes left")
        _offset, size, crc, magic, attributes = _HEAD.unpack_from(data, pos)
        body = data[pos + 16:pos + 12 + size]
        if size < 14 or pos + 12 + size > end:
            raise InvalidBatch(f"message size {size} does not match the {end - pos} bytes sent")
        if zlib.crc32(body) != crc:
            raise InvalidBatch("message CRC32 mismatch")
        if magic > 1:
            raise InvalidBatch(f"message magic {magic} in a message set", ErrorCode.INVALID_RECORD)
        at = 2
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(body, at)
            at += 8
        key, at = _field(body, at)
        value, _ = _field(body, at)
        out.append(Message(magic, attributes, timestamp, key, value))
        pos += 12 + size
    return out


def _inner_messages(wrapper: Message) -> list[Message]:
    codec = wrapper.attributes & _CODEC_MASK
    if codec not in (codecs.GZIP, codecs.SNAPPY, codecs.LZ4):
        raise InvalidBatch(f"compression codec {codec} in a v{wrapper.magic} message",
                           ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
    payload = wrapper.value or b""
    if codec == codecs.LZ4 and wrapper.magic == 0:
        payload = _fix_lz4_header_checksum(payload)
    try:
        inner = read_messages(codecs.decompress(codec, payload))
    except InvalidBatch:
        raise
    except Exception as e:  # noqa: BLE001 - any undecompressable payload is a corrupt message
        raise InvalidBatch(f"compressed message unreadable: {e}") from None
    for i, m in enumerate(inner):
        if m.magic != wrapper.magic:
            raise InvalidBatch(f"inner message {i} has magic {m.magic}, its wrapper "
                               f"{wrapper.magic}", ErrorCode.INVALID_RECORD)
        if m.attributes & _CODEC_MASK:
            raise InvalidBatch(f"inner message {i} of a compressed message is compressed",
                               ErrorCode.INVALID_RECORD)
    if wrapper.attributes & _LOG_APPEND_TIME:  # the wrapper's time is every inner message's
        inner = [m._replace(timestamp=wrapper.timestamp) for m in inner]
    return inner


def to_v2_batch(data: bytes, log_append_time: bool) -> bytes:
    """One v2 batch holding the records of the v0/v1 message set `data` (which passes as it is
    when it already holds v2 batches). Raises InvalidBatch with Kafka's error code, as Kafka's
    LogValidator refuses: mixed magics, more than one compressed wrapper, a producer that sets
    LogAppendTime itself where the topic keeps its own time (or without a time)."""
    if len(data) > _MAGIC_AT and data[_MAGIC_AT] == 2:
        return data
    messages = read_messages(data)
    if not messages:
        raise InvalidBatch("empty message set", ErrorCode.INVALID_RECORD)
    if len({m.magic for m in messages}) > 1:
        raise InvalidBatch("messages of different magics in one message set",
                           ErrorCode.INVALID_RECORD)
    codec = 0
    if any(m.attributes & _CODEC_MASK for m in messages):
        if len(messages) > 1:
            raise InvalidBatch("Compressed outer record has more than one batch",
                               ErrorCode.INVALID_RECORD)
        codec = messages[0].attributes & _CODEC_MASK
        producer_lat = bool(messages[0].attributes & _LOG_APPEND_TIME)
        messages = _inner_messages(messages[0])
    else:
        producer_lat = any(m.attributes & _LOG_APPEND_TIME for m in messages)
    if producer_lat and (log_append_time or any(m.timestamp == NO_TIMESTAMP for m in messages)):
        raise InvalidBatch("Producer should not set timestamp type to LogAppendTime",
                           ErrorCode.INVALID_TIMESTAMP)
    if not messages:
        raise InvalidBatch("compressed message holds no messages", ErrorCode.INVALID_RECORD)
    return bytearray(encode_batch([(m.timestamp, m.key, m.value, ()) for m in messages],
                                  compression=codec))


# -- LZ4 in message format v0 ------------------------------------------------------------------
# Kafka 0.8-0.9 wrote the LZ4 frame's header checksum over the magic number too; Kafka reads
# magic-v0 LZ4 ignoring that byte (KafkaLZ4BlockInputStream). Here it is recomputed instead,
# so the frame decoder can check the rest. xxh32 of the 2-10 descriptor bytes is all it takes.

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_short(data: bytes) -> int:
    """xxh32 with seed 0 of fewer than 16 bytes."""
    h = (_P5 + len(data)) & _M32
    i = 0
    while i + 4 <= len(data):
        h = _rotl((h + int.from_bytes(data[i:i + 4], "little") * _P3) & _M32, 17) * _P4 & _M32
        i += 4
    for b in data[i:]:
        h = _rotl((h + b * _P5) & _M32, 11) * _P1 & _M32
    h = ((h ^ (h >> 15)) * _P2) & _M32
    h = ((h ^ (h >> 13)) * _P3) & _M32
    return h ^ (h >> 16)


def _fix_lz4_header_checksum(frame: bytes) -> bytes:
    if len(frame) < 7:
        return frame
    end = 15 if frame[4] & 0x08 else 7  # the content size field, when flagged, is 8 bytes
    if len(frame) < end:
        return frame
    hc = (_xxh32_short(bytes(frame[4:end - 1])) >> 8) & 0xFF
    return bytes(frame[:end - 1]) + bytes([hc]) + bytes(frame[end:])
