"""Records inside v2 record batches: what producers encode and consumers decode.

`batch.py` handles a batch as the broker sees it (header, CRC, offsets); this module opens the
records payload: it compresses or decompresses it once per batch (`compression.py`) and hands
the varint walk to the active record kernel (`_kernel.py`: a C extension, or the pure-Python
reference in `_records_py.py`), so the per-record loop is never Python code when the
extension is built. `arrow.py` decodes the same payloads straight into Arrow columns.
"""
import gc
import struct
import time
from typing import NamedTuple

from . import _kernel, batch
from . import compression as codecs
from .value_column import ValueColumn

CREATE_TIME, LOG_APPEND_TIME = 0, 1
INT64_MAX = (1 << 63) - 1


class CorruptRecord(ValueError):
    """Fetched data that is not a valid record batch: bad CRC, truncated or malformed records,
    undecompressable payload, or a message format other than v2.

    `at`: the base offset of the bad batch (None when unknown); `before`: the records that
    `decode_batches` decoded from the batches before it, so a consumer hands those out and
    stops at the bad batch, as Kafka's does, instead of losing them with it."""

    def __init__(self, message: str, at: int | None = None) -> None:
        super().__init__(message)
        self.at = at
        self.before: list = []


class _NoHeaders(list):
    """The `headers` of every record that has none: one shared, read-only empty list.

    A list, so it equals `[]` and reads like any other record's headers; read-only because it
    is shared (copy it, `list(record.headers)`, to build on it). Sharing it saves a list per
    record, and lets the C kernel leave such records out of the cyclic GC altogether.
    """
    __slots__ = ()

    def _read_only(self, *args, **kwargs):
        raise TypeError("a record without headers shares this read-only empty list: "
                        "copy it first (list(record.headers))")

    append = extend = insert = remove = pop = clear = sort = reverse = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only

    def __reduce__(self):
        return "NO_HEADERS"  # pickles and copies as the module's one instance

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


NO_HEADERS = _NoHeaders()


class ConsumerRecord(NamedTuple):
    """One record as a consumer sees it. `timestamp` is in ms; `timestamp_type` is 0 for
    CreateTime and 1 for LogAppendTime; `headers` is a list of (str, bytes|None) pairs: a new
    list per record that has headers, the shared read-only empty list `NO_HEADERS` for every
    record that has none (it equals `[]`; copy it with `list(...)` to add to it)."""
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes
    value: bytes
    headers: list


def encode_batch(records, *, compression=0, base_offset=0, producer_id=-1, producer_epoch=-1,
                 base_sequence=-1, timestamp_type=CREATE_TIME, transactional=False,
                 compression_level=None):
    """Encode `(timestamp_ms, key, value, headers)` records as one v2 record batch.

    `headers` is a sequence of (str, bytes|None); key and value are bytes-like or None; a None
    timestamp means now. `records` may also be a `ValueColumn` (rows of an Arrow column). `compression` is a codec id or name (`compression.type`). The offset
    deltas are 0..n-1 and the first record's timestamp is the base timestamp, as the Java
    producer writes them; the broker assigns the real base offset.
    """
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), "
                         f"not {timestamp_type!r}")
    codec = codecs.codec_id(compression)
    if records.__class__ is ValueColumn:
        payload, count, base_ts, max_ts = records.encode(_kernel.active)
    else:
        payload, count, base_ts, max_ts = _kernel.active.encode_records(
            records, int(time.time() * 1000))
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    attributes = codec
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= batch.TIMESTAMP_TYPE_LOG_APPEND
    if transactional:
        attributes |= batch.TRANSACTIONAL
    if codec:
        payload = codecs.compress(codec, payload, compression_level)
    return batch.build(payload, count, count - 1, base_ts, max_ts, base_offset=base_offset,
                       attributes=attributes, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence)


def iter_payloads(data, min_offset=0, max_offset=INT64_MAX, check_crc=True, skip=frozenset()):
    """Yield (header, records payload) for each whole data batch in `data` that can hold an
    offset in [min_offset, max_offset), payload decompressed.

    Control batches (transaction markers), the batches whose base offsets are in `skip` (a
    read_committed reader's aborted ones) and a partial trailing batch (a fetch response cut
    at its size limit) are skipped; batches outside the range are skipped without being
    checked or decompressed.
    """
    view = memoryview(data)
    for pos, h in batch.iter_batches(view):
        if h.magic != 2:
            raise CorruptRecord(f"batch at offset {h.base_offset} uses message format v{h.magic};"
                                " only record batch v2 (Kafka >= 0.11) is supported",
                                h.base_offset)
        if h.is_control or h.last_offset < min_offset or h.base_offset >= max_offset \
                or h.base_offset in skip:
            continue
        if h.record_count < 0:
            raise CorruptRecord(f"batch at offset {h.base_offset}: negative record count",
                                h.base_offset)
        if check_crc and batch.compute_crc(view, pos, h.size) != h.crc:
            raise CorruptRecord(f"batch at offset {h.base_offset}: CRC32C mismatch", h.base_offset)
        payload = view[pos + batch.HEADER_SIZE:pos + h.size]
        if h.compression:
            try:
                payload = codecs.decompress(h.compression, payload)
            except codecs.CompressionError as e:
                raise CorruptRecord(f"batch at offset {h.base_offset}: {e}", h.base_offset) from e
        yield h, payload


def decode_batches(data, topic=None, partition=None, start_offset=0, check_crc=True,
                   skip=frozenset()):
    """Every record of every whole data batch in `data` (a fetch response's records), in
    offset order, skipping control batches, the batches based at `skip` and offsets below
    `start_offset`.

    A fetch returns the whole batch holding the fetch offset, so records before it come back
    too: `start_offset` drops them. Raises CorruptRecord on a bad CRC or malformed records.
    """
    out: list = []
    kernel = _kernel.active
    paused = _pause_gc()
    whole = 0  # records of the batches decoded whole so far
    try:
        for h, payload in iter_payloads(data, start_offset, INT64_MAX, check_crc, skip):
            lat = h.max_timestamp if h.log_append_time else None
            try:
                kernel.decode_records(payload, h.record_count, h.base_offset, h.base_timestamp,
                                      lat, start_offset, topic, partition, ConsumerRecord, out,
                                      NO_HEADERS)
            except ValueError as e:
                raise CorruptRecord(f"batch at offset {h.base_offset}: {e}", h.base_offset) from e
            whole = len(out)
    except CorruptRecord as e:
        del out[whole:]  # a bad batch's records decoded before its fault are not handed out
        e.before = out
        raise
    finally:
        if paused:
            gc.enable()
    return out


def _pause_gc():
    """Hold off the cyclic GC while records are built; True if the caller must re-enable it.

    A record with headers allocates two GC-tracked containers (the tuple, its headers list),
    so a fetch of thousands would trigger many collections that can free nothing: measured,
    that halved decode_batches (1.2 vs 2.5 M records/s with the C kernel). The objects stay
    tracked and are examined at the next collection after this block. Records without headers
    (the usual case) cost the collector nothing with the C kernel: it leaves them untracked,
    as they hold only strings, numbers, bytes and the shared `NO_HEADERS`. (A plain function,
    not a context manager: this runs for every poll.)
    """
    if not gc.isenabled():
        return False
    gc.disable()
    return True


def next_offset_after(data):
    """The offset after the last whole batch in `data`, or None if there is none.

    A consumer advances its position here rather than past its last returned record, so that
    batches of only control records or compacted-away offsets do not stall it.
    """
    last = None
    for _, h in batch.iter_batches(data):
        last = h
    return None if last is None else last.last_offset + 1


def record_spans(payload, count):
    """Yield (start, end, timestamp delta, offset delta, key, is tombstone) for each record of a
    decompressed batch payload: what log compaction needs to keep records by key and copy the
    survivors' bytes as they are, without decoding values or re-encoding records."""
    from ._records_py import _uvarint

    def varint(pos):
        v, pos = _uvarint(payload, pos)
        return (v >> 1) ^ -(v & 1), pos

    pos = 0
    for _ in range(count):
        length, body = varint(pos)
        end = body + length
        ts_delta, p = varint(body + 1)  # after the attributes byte
        offset_delta, p = varint(p)
        key_len, p = varint(p)
        key = bytes(payload[p:p + key_len]) if key_len >= 0 else None
        value_len, _ = varint(p + max(key_len, 0))
        yield pos, end, ts_delta, offset_delta, key, value_len < 0
        pos = end



def with_timestamp_delta(record, ts_delta):
    """One encoded record (as `record_spans` delimits it, length prefix included) with its
    timestamp delta replaced: what the cleaner needs to re-base the records of a batch whose
    base timestamp becomes a delete horizon. Everything after the delta is copied as is."""
    from ._records_py import _uvarint, _zigzag

    _, body = _uvarint(record, 0)
    _, rest = _uvarint(record, body + 1)  # the old delta, after the attributes byte
    out = bytearray(record[body:body + 1])
    _zigzag(out, ts_delta)
    out += record[rest:]
    head = bytearray()
    _zigzag(head, len(out))
    return bytes(head + out)


# -- transaction markers ---------------------------------------------------------------------
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")    # version 0, type (abort 0, commit 1)
_CONTROL_VALUE = struct.Struct(">hi")  # version 0, coordinator epoch


def encode_control_batch(kind, producer_id, producer_epoch, coordinator_epoch, timestamp=None):
    """A transaction marker as Kafka writes it: one record, key (version, type), value
    (version, coordinator epoch), in a batch flagged control and transactional."""
    records = [(timestamp, _CONTROL_KEY.pack(0, kind), _CONTROL_VALUE.pack(0, coordinator_epoch),
                ())]
    payload, count, base_ts, max_ts = _kernel.active.encode_records(
        records, int(time.time() * 1000))
    return batch.build(payload, count, count - 1, base_ts, max_ts,
                       attributes=batch.TRANSACTIONAL | batch.CONTROL, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=-1)


def control_batch_type(data):
    """CONTROL_ABORT or CONTROL_COMMIT: the type in the key of a control batch's first record."""
    return control_marker(data)[0]


def control_marker(data):
    """(CONTROL_ABORT or CONTROL_COMMIT, coordinator epoch) of a transaction marker: the
    partition refuses a marker of a coordinator older than the last it saw for the producer,
    as Kafka's ProducerAppendInfo does, so both are read before it is written."""
    from ._records_py import _uvarint
    payload = memoryview(data)[batch.HEADER_SIZE:]
    start, _, _, _, key, _ = next(record_spans(payload, 1))
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecord("control batch without a marker key")
    kind = _CONTROL_KEY.unpack_from(key, 0)[1]
    # the record: length, attributes, timestamp delta, offset delta, key length, key, value
    pos = _uvarint(payload, start)[1] + 1
    for _ in range(2):
        pos = _uvarint(payload, pos)[1]
    pos = _uvarint(payload, pos)[1] + len(key)
    raw_len, pos = _uvarint(payload, pos)
    value_len = (raw_len >> 1) ^ -(raw_len & 1)
    if value_len < _CONTROL_VALUE.size:
        return kind, -1  # a marker without a coordinator epoch: nothing to fence with
    return kind, _CONTROL_VALUE.unpack_from(payload, pos)[1]
