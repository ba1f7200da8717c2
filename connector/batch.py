"""Record batch format v2 (magic 2) at the batch level: header fields, CRC32C, offsets.

This is what the broker needs: it validates and stamps whole batches without touching the
records inside. Record-level encoding lives in `records.py`.

Layout (big-endian): base_offset int64 | batch_length int32 | partition_leader_epoch int32 |
magic int8 | crc uint32 | attributes int16 | last_offset_delta int32 | base_timestamp int64 |
max_timestamp int64 | producer_id int64 | producer_epoch int16 | base_sequence int32 |
record_count int32 | records... The CRC covers everything from `attributes` to the end.
"""
import struct
from collections.abc import Iterator
from typing import NamedTuple

from . import _kernel

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length: the bytes not counted by batch_length
CRC_START = 21
_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_LOG_APPEND = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
DELETE_HORIZON = 0x40  # KIP-534: base_timestamp holds the batch's delete horizon, not a record time

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class InvalidBatch(Exception):
    """A batch that fails validation; `code` is the Kafka error code to answer with."""

    def __init__(self, message, code=2):  # CORRUPT_MESSAGE
        super().__init__(message)
        self.code = code


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self):
        """Bytes the whole batch occupies, including base_offset and batch_length."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self):
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self):
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self):
        return bool(self.attributes & TIMESTAMP_TYPE_LOG_APPEND)

    @property
    def is_control(self):
        return bool(self.attributes & CONTROL)

    @property
    def is_transactional(self):
        return bool(self.attributes & TRANSACTIONAL)

    @property
    def delete_horizon_ms(self):
        """When the cleaner may drop this batch's tombstones (Kafka's `deleteHorizonMs`), None
        if no cleaning has stamped one. The horizon is stored as the base timestamp, so record
        timestamps (base + delta) stay right, but the base is then no record's time."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON else None


def read_header(buf, pos=0):
    """Parse the 61-byte header at `pos`. The caller ensures the bytes are there."""
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def compute_crc(buf, pos, size):
    return _kernel.crc32c(memoryview(buf)[pos + CRC_START:pos + size])


def validate(buf, pos=0, end=None, max_size=None, strict=True):
    """Check one batch at `pos` and return its header, or raise InvalidBatch.

    `strict` (for produce requests) also requires record_count == last_offset_delta + 1.
    """
    end = len(buf) if end is None else end
    if end - pos < HEADER_SIZE:
        raise InvalidBatch(f"batch truncated: {end - pos} bytes, header needs {HEADER_SIZE}")
    h = read_header(buf, pos)
    if h.magic != 2:
        raise InvalidBatch(f"unsupported record batch magic {h.magic}", code=43)
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + h.size > end:
        raise InvalidBatch(f"batch length {h.batch_length} does not match the {end - pos} bytes sent")
    if max_size is not None and h.size > max_size:
        raise InvalidBatch(f"batch of {h.size} bytes exceeds {max_size}", code=10)  # MESSAGE_TOO_LARGE
    if compute_crc(buf, pos, h.size) != h.crc:
        raise InvalidBatch("record batch CRC32C mismatch")
    # Producers send dense batches (count == delta + 1); compacted logs may hold fewer records.
    dense_ok = h.record_count == h.last_offset_delta + 1
    if h.record_count < 0 or h.last_offset_delta < 0 or (strict and not dense_ok) or (
            h.record_count - 1 > h.last_offset_delta):
        raise InvalidBatch(
            f"record count {h.record_count} inconsistent with last offset delta {h.last_offset_delta}",
            code=87)
    return h


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0,
                 end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch in buf[pos:end]; stop at a partial tail."""
    end = len(buf) if end is None else end
    while end - pos >= HEADER_SIZE:
        h = read_header(buf, pos)
        if h.batch_length <= 0 or pos + h.size > end:
            return
        yield pos, h
        pos += h.size


def split_batches(data, max_size=None):
    """Validate every batch in a produce payload; return their headers (offsets as sent)."""
    headers, pos, end = [], 0, len(data)
    if end == 0:
        raise InvalidBatch("empty record set", code=87)
    while pos < end:
        h = validate(data, pos, end, max_size)
        headers.append((pos, h))
        pos += h.size
    return headers


def stamp(batch, base_offset, log_append_time=None, partition_leader_epoch=None):
    """Return a copy of the batch (a bytearray) with the broker-assigned base offset (and
    LogAppendTime, epoch) set; `stamp_in_place` does the same to a writable buffer."""
    out = bytearray(batch)
    stamp_in_place(out, base_offset, log_append_time, partition_leader_epoch)
    return out


def stamp_in_place(batch, base_offset, log_append_time=None, partition_leader_epoch=None):
    """Set the broker-assigned base offset (and LogAppendTime, epoch) in a writable batch.

    The base offset and leader epoch sit outside the CRC; LogAppendTime changes attributes and
    max_timestamp, so the CRC is recomputed once for the batch. Records are never re-encoded.
    The broker stamps produce requests in the buffer they were received into: no copy at all.
    """
    _OFFSET.pack_into(batch, 0, base_offset)
    if partition_leader_epoch is not None:
        _INT32.pack_into(batch, 12, partition_leader_epoch)
    if log_append_time is not None:
        attrs = struct.unpack_from(">h", batch, 21)[0] | TIMESTAMP_TYPE_LOG_APPEND
        struct.pack_into(">h", batch, 21, attrs)
        _INT64.pack_into(batch, 35, log_append_time)
        struct.pack_into(">I", batch, 17, _kernel.crc32c(memoryview(batch)[CRC_START:]))


def build(records_payload, record_count, last_offset_delta, base_timestamp, max_timestamp,
          *, base_offset=0, attributes=0, producer_id=NO_PRODUCER_ID, producer_epoch=-1,
          base_sequence=NO_SEQUENCE, partition_leader_epoch=-1):
    """Assemble a batch around an already encoded (and possibly compressed) records payload."""
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(records_payload)
    head = bytearray(_HEADER.pack(base_offset, batch_length, partition_leader_epoch, 2, 0,
                                  attributes, last_offset_delta, base_timestamp, max_timestamp,
                                  producer_id, producer_epoch, base_sequence, record_count))
    crc = _kernel.crc32c(records_payload, _kernel.crc32c(memoryview(head)[CRC_START:]))
    struct.pack_into(">I", head, 17, crc)
    return bytes(head) + records_payload
