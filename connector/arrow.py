"""Fetched record batches decoded straight into Arrow, in the schema of Spark's Kafka source.

The Spark connector's readers yield `pyarrow.RecordBatch`es; building them from Python objects
(one `ConsumerRecord` per row, then `pa.array`) would cost more than the fetch. Instead the
record kernel (`_kernel.py`) walks each decompressed batch payload once and fills flat buffers:
offsets, validity bytes and one joined data buffer per binary column. Everything after that is
a handful of numpy/pyarrow calls per fetch, whatever the number of records.

The schema is `to_arrow_schema(<Spark's Kafka source schema>, timezone="UTC")`: pyspark checks
a Python data source's batches against exactly that, so `timestamp` is `timestamp[us, tz=UTC]`
(Spark's TimestampType) and the headers list item is named `element`. As in Spark, a record
without headers has a null `headers` value, and `include_headers=False` drops the column.
"""
import numpy as np
import pyarrow as pa

from . import _kernel
from .records import INT64_MAX, CorruptRecord, iter_payloads

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

SPARK_KAFKA_SCHEMA_NO_HEADERS = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
])
SPARK_KAFKA_SCHEMA = SPARK_KAFKA_SCHEMA_NO_HEADERS.append(pa.field("headers", HEADERS_TYPE))


def spark_kafka_schema(include_headers=True):
    """The schema of Spark's Kafka source, with or without its `headers` column."""
    return SPARK_KAFKA_SCHEMA if include_headers else SPARK_KAFKA_SCHEMA_NO_HEADERS


def decode_to_arrow(data, topic, partition, start_offset=0, end_offset=None,
                    include_headers=True, check_crc=True, skip=frozenset()):
    """Decode the whole data batches in `data` (a fetch response's records) into one
    RecordBatch of `spark_kafka_schema(include_headers)`.

    Keeps offsets in [start_offset, end_offset) (end None: no limit); skips control batches,
    the batches based at `skip` and a partial trailing batch. Raises CorruptRecord as
    `records.decode_batches` does.
    """
    max_offset = INT64_MAX if end_offset is None else end_offset
    segments = []
    for h, payload in iter_payloads(data, start_offset, max_offset, check_crc, skip):
        lat = h.max_timestamp if h.log_append_time else None
        segments.append((payload, h.record_count, h.base_offset, h.base_timestamp, lat))
    try:
        cols = _kernel.active.decode_columns(segments, start_offset, max_offset, include_headers)
    except ValueError as e:
        raise CorruptRecord(str(e)) from e
    return columns_to_arrow(cols, topic, partition, include_headers)


def columns_to_arrow(cols, topic, partition, include_headers=True):
    """Assemble the kernel's flat buffers (see `_records_py.decode_columns`) into a batch."""
    n = cols["n"]
    timestamps = np.frombuffer(cols["timestamp"], np.int64, n) * 1000  # Spark: microseconds
    arrays = [
        _binary(cols, "key", pa.binary(), n),
        _binary(cols, "value", pa.binary(), n),
        _repeated_string(topic, n),
        _repeated_int32(partition, n),
        _fixed(pa.int64(), n, cols["offset"]),
        _fixed(TIMESTAMP_TYPE, n, timestamps),
        _fixed(pa.int32(), n, cols["timestamp_type"]),
    ]
    if include_headers:
        arrays.append(_headers(cols, n))
    return pa.RecordBatch.from_arrays(arrays, schema=spark_kafka_schema(include_headers))


def _repeated_string(text, n):
    """A string array of `n` times `text` (None: all null), from its buffers:
    `pa.repeat(pa.scalar(...))` would import pandas (~0.4 s) at the first batch of every
    process, each Spark worker's included."""
    if text is None:
        return _all_null(pa.string(), n)
    data = text.encode("utf-8")
    if len(data) * n > np.iinfo(np.int32).max:
        raise OverflowError("more than 2 GiB of data in one Arrow string column")
    offsets = np.arange(n + 1, dtype=np.int32)
    offsets *= len(data)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(data * n)], null_count=0)


def _repeated_int32(value, n):
    """An int32 array of `n` times `value` (None: all null); see `_repeated_string`."""
    if value is None:
        return _all_null(pa.int32(), n)
    return _fixed(pa.int32(), n, np.full(n, value, np.int32))


def _all_null(type_, n):
    return pa.nulls(n, type_)


def _fixed(type_, n, buf):
    return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(buf)], null_count=0)


def _bitmap(mask):
    """An Arrow validity bitmap from a numpy bool/uint8 array (LSB-first bit order)."""
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


def _binary(cols, name, type_, n):
    nulls = cols[name + "_nulls"]
    validity = _bitmap(np.frombuffer(cols[name + "_valid"], np.uint8, n)) if nulls else None
    return pa.Array.from_buffers(
        type_, n, [validity, pa.py_buffer(cols[name + "_offsets"]),
                   pa.py_buffer(cols[name + "_data"])], null_count=nulls)


def _headers(cols, n):
    """list<struct<key: string, value: binary>>; null where a record has no headers."""
    list_offsets = np.frombuffer(cols["header_offsets"], np.int32, n + 1)
    n_headers = int(list_offsets[-1])
    keys = _binary(cols, "header_key", pa.string(), n_headers)
    try:
        keys.validate(full=True)  # header keys are UTF-8 by contract, not by construction
    except pa.ArrowInvalid:
        raw = _binary(cols, "header_key", pa.binary(), n_headers).to_pylist()  # never null
        fixed = [k.decode("utf-8", "replace").encode("utf-8") for k in raw]
        offsets = np.zeros(n_headers + 1, np.int32)
        np.cumsum([len(k) for k in fixed], out=offsets[1:])
        keys = pa.Array.from_buffers(pa.string(), n_headers, [  # not pa.array: pandas, see above
            None, pa.py_buffer(offsets), pa.py_buffer(b"".join(fixed))], null_count=0)
    values = _binary(cols, "header_value", pa.binary(), n_headers)
    structs = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    has_headers = np.diff(list_offsets) > 0
    nulls = n - int(np.count_nonzero(has_headers))
    validity = _bitmap(has_headers) if nulls else None
    return pa.Array.from_buffers(HEADERS_TYPE, n, [validity, pa.py_buffer(list_offsets)],
                                 null_count=nulls, children=[structs])
