"""The pure-Python record kernel: the reference the C kernel (`_records_c.c`) must match.

A record kernel walks the varint-encoded records of one (decompressed) v2 batch payload and
encodes them back. `records.py` and `arrow.py` call whichever kernel `_kernel.py` picked;
both kernels expose the same three functions with the same arguments and results, and raise
ValueError on malformed records (the callers turn that into CorruptRecord with batch context).

Record layout: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint | key | valueLength varint | value | headerCount varint |
(headerKeyLength varint | headerKey | headerValueLength varint | headerValue)*.
Varints are zigzag-encoded; a length of -1 is null.
"""
from array import array
from itertools import accumulate

INT64_MAX = (1 << 63) - 1


def _uvarint(buf, pos):
    """Decode the unsigned varint at `pos`; IndexError when `buf` ends inside it."""
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _records(buf, count, min_offset_delta, max_offset_delta, with_headers):
    """Yield (offset_delta, timestamp_delta, key, value, headers) of the records in range.

    `headers` is a list of (key bytes, value bytes|None), or None when not wanted. Records
    outside [min, max) offset deltas are skipped by their length prefix.

    Each record is sliced out by its length prefix, so reading past its end raises IndexError
    (reported as truncation). Zigzag varints of one or two bytes (most fields) are decoded
    inline: a function call per field would double the cost of the walk.
    """
    pos, end = 0, len(buf)
    rec = None
    try:
        for _ in range(count):
            if pos >= end:
                raise ValueError(f"batch holds fewer records than its count of {count}")
            rec = None
            v = buf[pos]
            if v < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                v, pos = (v & 0x7F) | (buf[pos + 1] << 7), pos + 2
            else:
                v, pos = _uvarint(buf, pos)
            length = (v >> 1) ^ -(v & 1)
            stop = pos + length
            if length < 0 or stop > end:
                raise ValueError(f"record of {length} bytes overruns the batch payload")
            rec, pos = buf[pos:stop], stop
            # rec[0] is the attributes byte, unused in v2.
            v = rec[1]
            if v < 0x80:
                p = 2
            elif rec[2] < 0x80:
                v, p = (v & 0x7F) | (rec[2] << 7), 3
            else:
                v, p = _uvarint(rec, 1)
            ts_delta = (v >> 1) ^ -(v & 1)
            v = rec[p]
            if v < 0x80:
                p += 1
            elif rec[p + 1] < 0x80:
                v, p = (v & 0x7F) | (rec[p + 1] << 7), p + 2
            else:
                v, p = _uvarint(rec, p)
            off_delta = (v >> 1) ^ -(v & 1)
            if off_delta < min_offset_delta or off_delta >= max_offset_delta:
                continue
            v = rec[p]  # key length, then key: _bytes_field inlined
            if v < 0x80:
                p += 1
            elif rec[p + 1] < 0x80:
                v, p = (v & 0x7F) | (rec[p + 1] << 7), p + 2
            else:
                v, p = _uvarint(rec, p)
            n = (v >> 1) ^ -(v & 1)
            if n >= 0:
                if p + n > length:
                    raise ValueError(f"key of {n} bytes overruns its record")
                key, p = rec[p:p + n], p + n
            elif n == -1:
                key = None
            else:
                raise ValueError(f"invalid key length {n}")
            v = rec[p]  # value length, then value: _bytes_field inlined
            if v < 0x80:
                p += 1
            elif rec[p + 1] < 0x80:
                v, p = (v & 0x7F) | (rec[p + 1] << 7), p + 2
            else:
                v, p = _uvarint(rec, p)
            n = (v >> 1) ^ -(v & 1)
            if n >= 0:
                if p + n > length:
                    raise ValueError(f"value of {n} bytes overruns its record")
                value, p = rec[p:p + n], p + n
            elif n == -1:
                value = None
            else:
                raise ValueError(f"invalid value length {n}")
            v = rec[p]
            if v < 0x80:
                p += 1
            else:
                v, p = _uvarint(rec, p)
            n_headers = (v >> 1) ^ -(v & 1)
            if n_headers < 0:
                raise ValueError(f"negative header count {n_headers}")
            headers = [] if with_headers else None
            for _ in range(n_headers):
                hkey, p = _bytes_field(rec, p)
                if hkey is None:
                    raise ValueError("header key is null")
                hvalue, p = _bytes_field(rec, p)
                if with_headers:
                    headers.append((hkey, hvalue))
            if p != length:
                raise ValueError(f"record declares {length} bytes but its fields take {p}")
            yield off_delta, ts_delta, key, value, headers
    except IndexError:
        if rec is None:
            raise ValueError("record length truncated at the end of the payload") from None
        raise ValueError(f"record truncated: its fields overrun its {len(rec)} bytes") from None
    if pos != end:
        raise ValueError(f"{end - pos} bytes left after the batch's {count} records")


def _bytes_field(rec, p):
    """The length-prefixed byte string (None for length -1) at `p` of one record."""
    v = rec[p]
    if v < 0x80:
        p += 1
    elif rec[p + 1] < 0x80:
        v, p = (v & 0x7F) | (rec[p + 1] << 7), p + 2
    else:
        v, p = _uvarint(rec, p)
    n = (v >> 1) ^ -(v & 1)
    if n < 0:
        if n != -1:
            raise ValueError(f"invalid field length {n}")
        return None, p
    if p + n > len(rec):
        raise ValueError(f"field of {n} bytes overruns its record")
    return rec[p:p + n], p + n


def decode_records(payload, count, base_offset, base_timestamp, log_append_time,
                   min_offset, topic, partition, cls, out, no_headers=None):
    """Append `cls(topic, partition, offset, timestamp, timestamp_type, key, value, headers)`
    to `out` for each record of the batch with offset >= min_offset.

    `log_append_time` is None for CreateTime batches, else the timestamp of every record.
    `headers` is a new list of (str, bytes|None); for a record without headers it is
    `no_headers` when given (one shared object), else a new empty list. The C kernel also
    leaves such records untracked by the cyclic GC (when topic and partition are atomic):
    nothing observable from Python code but `gc.is_tracked`.
    """
    buf = bytes(payload)
    new = tuple.__new__
    ts_type = 0 if log_append_time is None else 1
    for off_delta, ts_delta, key, value, headers in _records(
            buf, count, min_offset - base_offset, INT64_MAX, True):
        ts = base_timestamp + ts_delta if log_append_time is None else log_append_time
        if headers:
            headers = [(k.decode("utf-8", "replace"), v) for k, v in headers]
        elif no_headers is not None:
            headers = no_headers
        out.append(new(cls, (topic, partition, base_offset + off_delta, ts, ts_type,
                             key, value, headers)))


def decode_columns(segments, min_offset, max_offset, with_headers):
    """Decode the records of several batches into the flat buffers of Arrow columns.

    `segments` is a list of (payload, count, base_offset, base_timestamp, log_append_time);
    only offsets in [min_offset, max_offset) are kept. Returns a dict of buffers (see
    `arrow.py` for how they become arrays): int64 `offset` and `timestamp` (ms), int32
    `timestamp_type`, and for `key`, `value` (and with headers `header_key`, `header_value`)
    int32 `*_offsets` (n + 1), uint8 `*_valid`, `*_data`, `*_nulls`; `header_offsets` int32
    (n + 1) of the list column.
    """
    offsets, timestamps, ts_types = array("q"), array("q"), array("i")
    keys, values, hkeys, hvalues, header_counts = [], [], [], [], []
    for payload, count, base_offset, base_ts, lat in segments:
        n_before = len(offsets)
        walk = _records(bytes(payload), count, min_offset - base_offset,
                        max_offset - base_offset, with_headers)
        try:
            for off_delta, ts_delta, key, value, headers in walk:
                offsets.append(base_offset + off_delta)
                timestamps.append(base_ts + ts_delta if lat is None else lat)
                keys.append(key)
                values.append(value)
                if with_headers:
                    header_counts.append(len(headers))
                    for k, v in headers:
                        hkeys.append(k)
                        hvalues.append(v)
        except ValueError as e:
            raise ValueError(f"batch at offset {base_offset}: {e}") from None
        ts_types.extend([0 if lat is None else 1] * (len(offsets) - n_before))
    cols = {"n": len(offsets), "offset": offsets.tobytes(), "timestamp": timestamps.tobytes(),
            "timestamp_type": ts_types.tobytes()}
    _binary_column(cols, "key", keys)
    _binary_column(cols, "value", values)
    if with_headers:
        cols["header_offsets"] = array("i", [0, *accumulate(header_counts)]).tobytes()
        _binary_column(cols, "header_key", hkeys)
        _binary_column(cols, "header_value", hvalues)
    return cols


def _binary_column(cols, name, items):
    """Offsets, validity bytes and one joined data buffer for a list of bytes|None."""
    lengths = [0 if x is None else len(x) for x in items]
    valid = bytes([x is not None for x in items])
    cols[name + "_offsets"] = array("i", [0, *accumulate(lengths)]).tobytes()
    cols[name + "_valid"] = valid
    cols[name + "_nulls"] = len(valid) - sum(valid)
    cols[name + "_data"] = b"".join([x for x in items if x])


def _zigzag(buf, v):
    """Append the zigzag varint of `v` to bytearray `buf`."""
    v = (v << 1) ^ (v >> 63)
    while v >= 0x80:
        buf.append((v & 0x7F) | 0x80)
        v >>= 7
    buf.append(v)


def encode_records(records, now_ms):
    """Encode (timestamp_ms|None, key, value, headers) records as a batch's records payload.

    Returns (payload, count, base_timestamp, max_timestamp). The first record's timestamp is
    the batch's base timestamp, as the Java producer does; None timestamps become `now_ms`.
    """
    out, body = bytearray(), bytearray()
    base_ts = max_ts = None
    count = 0
    for ts, key, value, headers in records:
        if ts is None:
            ts = now_ms
        if base_ts is None:
            base_ts = max_ts = ts
        elif ts > max_ts:
            max_ts = ts
        body.clear()
        body.append(0)
        _zigzag(body, ts - base_ts)
        _zigzag(body, count)
        for field in (key, value):
            if field is None:
                body.append(1)  # zigzag(-1)
            else:
                _zigzag(body, len(field))
                body += field
        _zigzag(body, len(headers))
        for hkey, hvalue in headers:
            if not isinstance(hkey, str):
                raise TypeError("header keys must be str")
            hkey = hkey.encode("utf-8")
            _zigzag(body, len(hkey))
            body += hkey
            if hvalue is None:
                body.append(1)
            else:
                _zigzag(body, len(hvalue))
                body += hvalue
        _zigzag(out, len(body))
        out += body
        count += 1
    return bytes(out), count, base_ts, max_ts


def encode_values(offsets, data, validity, wide, start, count, timestamp):
    """The records payload of `count` keyless, headerless records whose values are rows
    [start, start + count) of an Arrow binary column's buffers (`offsets` int32, or int64 when
    `wide`; `validity` the null bitmap or None), all stamped `timestamp`: encode_records of
    the same values. Returns (payload, count, timestamp, timestamp)."""
    ends = memoryview(offsets).cast("B").cast("q" if wide else "i")
    if start < 0 or count < 0 or start + count + 1 > len(ends) or \
            (validity is not None and (start + count + 7) // 8 > len(validity)):
        raise ValueError("rows outside the column's buffers")
    data = memoryview(data).cast("B")
    bits = memoryview(validity).cast("B") if validity is not None else None
    values = []
    for row in range(start, start + count):
        if bits is not None and not (bits[row >> 3] >> (row & 7)) & 1:
            values.append(None)
            continue
        a, b = ends[row], ends[row + 1]
        if a < 0 or b < a or b > len(data):
            raise ValueError("a value outside the column's data buffer")
        values.append(bytes(data[a:b]))
    return encode_records([(timestamp, None, v, ()) for v in values], timestamp)
