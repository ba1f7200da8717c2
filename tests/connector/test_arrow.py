"""decode_to_arrow gives exactly what decode_batches gives, in Spark's Kafka source schema."""
import random
import struct
import subprocess
import sys

import pyarrow as pa
import pytest
from minilog.connector import _kernel, batch
from minilog.connector.arrow import (
    SPARK_KAFKA_SCHEMA,
    SPARK_KAFKA_SCHEMA_NO_HEADERS,
    _repeated_int32,
    _repeated_string,
    decode_to_arrow,
    spark_kafka_schema,
)
from minilog.connector.records import CorruptRecord, decode_batches, encode_batch

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
T0 = 1_700_000_000_000


def edge_records(n=60):
    rng = random.Random(3)
    recs = [
        (T0, b"key", b"value", []),
        (T0 + 5, None, b"null key", [("h", b"v")]),
        (T0 - 1000, b"null value", None, []),
        (T0 + 10, b"", b"", [("empty", b""), ("null", None)]),
        (T0 + 20, None, None, [("ünïcode-ключ", b"\x00\xff")]),
        (T0 + 30, b"k" * 300, rng.randbytes(70_000), [("big", b"x" * 200)]),
    ]
    return recs + [(T0 + i, b"%d" % i, b"v%d" % i, [("i", b"%d" % i)] * (i % 3))
                   for i in range(n)]


def control_batch(base_offset):
    payload, count, ts, _ = _kernel.python.encode_records(
        [(T0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 0), [])], T0)
    return batch.build(payload, count, 0, ts, ts, base_offset=base_offset, producer_id=9,
                       producer_epoch=0, attributes=batch.CONTROL | batch.TRANSACTIONAL)


def fetch_response(codec="none"):
    """Several batches as a fetch returns them: mixed codecs, a LogAppendTime batch (stamped
    as the broker does), a control batch, and a partial batch at the end."""
    recs = edge_records()
    parts = [encode_batch(recs[:20], compression=codec, base_offset=0),
             batch.stamp(encode_batch(recs[20:40], compression=codec), 20,
                         log_append_time=T0 + 777),
             control_batch(40),
             encode_batch(recs[40:], compression=codec, base_offset=41)]
    tail = encode_batch(recs[:5], compression=codec, base_offset=41 + len(recs) - 40)
    return b"".join(parts) + tail[:len(tail) // 2]


def as_rows(records, include_headers=True):
    """decode_batches' records as Spark's Kafka source shows them."""
    rows = []
    for r in records:
        row = {"key": r.key, "value": r.value, "topic": r.topic, "partition": r.partition,
               "offset": r.offset, "timestamp": r.timestamp * 1000,
               "timestampType": r.timestamp_type}
        if include_headers:
            row["headers"] = [{"key": k, "value": v} for k, v in r.headers] or None
        rows.append(row)
    return rows


def arrow_rows(rb):
    rows = rb.to_pylist()
    ts = rb.column("timestamp").cast(pa.int64()).to_pylist()
    for row, t in zip(rows, ts):
        row["timestamp"] = t
    return rows


def test_schema_is_the_one_pyspark_checks_python_data_sources_against():
    types = pytest.importorskip("pyspark.sql.types")
    arrow_types = pytest.importorskip("pyspark.sql.pandas.types")
    header = types.StructType([types.StructField("key", types.StringType()),
                               types.StructField("value", types.BinaryType())])
    fields = [types.StructField("key", types.BinaryType()),
              types.StructField("value", types.BinaryType()),
              types.StructField("topic", types.StringType()),
              types.StructField("partition", types.IntegerType()),
              types.StructField("offset", types.LongType()),
              types.StructField("timestamp", types.TimestampType()),
              types.StructField("timestampType", types.IntegerType())]
    with_headers = types.StructType(fields + [types.StructField(
        "headers", types.ArrayType(header))])
    spark = arrow_types.to_arrow_schema(with_headers, timezone="UTC")
    assert spark.equals(SPARK_KAFKA_SCHEMA) and str(spark) == str(SPARK_KAFKA_SCHEMA)
    assert arrow_types.to_arrow_schema(types.StructType(fields), timezone="UTC").equals(
        SPARK_KAFKA_SCHEMA_NO_HEADERS)
    assert spark_kafka_schema(False) is SPARK_KAFKA_SCHEMA_NO_HEADERS


@pytest.mark.parametrize("codec", CODECS)
def test_same_records_as_decode_batches(kernel, codec):
    data = fetch_response(codec)
    rb = decode_to_arrow(data, "topic-a", 7)
    rb.validate(full=True)
    assert rb.schema.equals(SPARK_KAFKA_SCHEMA)
    expected = as_rows(decode_batches(data, "topic-a", 7))
    assert arrow_rows(rb) == expected
    assert len(expected) == len(edge_records()) and expected[25]["timestampType"] == 1


@pytest.mark.parametrize("start, end", [(0, None), (3, None), (25, 50), (20, 21), (40, 41),
                                        (41, 42), (19, 10**9), (10**6, None), (5, 5)])
def test_offset_ranges(kernel, start, end):
    data = fetch_response()
    rb = decode_to_arrow(data, "t", 0, start_offset=start, end_offset=end)
    rb.validate(full=True)
    expected = [r for r in as_rows(decode_batches(data, "t", 0, start_offset=start))
                if end is None or r["offset"] < end]
    assert arrow_rows(rb) == expected


def test_without_headers(kernel):
    data = fetch_response("lz4")
    rb = decode_to_arrow(data, "t", 0, include_headers=False)
    assert rb.schema.equals(SPARK_KAFKA_SCHEMA_NO_HEADERS)
    assert arrow_rows(rb) == as_rows(decode_batches(data, "t", 0), include_headers=False)


def test_empty_input_gives_an_empty_batch_of_the_schema(kernel):
    for data in (b"", fetch_response()[:30], control_batch(0)):
        rb = decode_to_arrow(data, "t", 0)
        assert rb.num_rows == 0 and rb.schema.equals(SPARK_KAFKA_SCHEMA)


def test_both_kernels_build_identical_batches():
    if _kernel.c is None:
        pytest.skip("C record kernel not built")
    for codec in CODECS:
        data = fetch_response(codec)
        for args in [(0, None, True), (7, 55, True), (0, None, False), (30, 31, False)]:
            out = []
            for name in ("python", "c"):
                _kernel.use(name)
                out.append(decode_to_arrow(data, "t", 1, *args))
            assert out[0].equals(out[1])


def test_invalid_utf8_header_keys_are_replaced_as_in_decode_batches(kernel):
    payload = b"\x00\x00\x00\x02k\x02v\x02\x04\xff\xfe\x02x"
    data = batch.build(bytes([len(payload) * 2]) + payload, 1, 0, T0, T0)
    rb = decode_to_arrow(data, "t", 0)
    rb.validate(full=True)
    assert rb.column("headers").to_pylist() == [[{"key": "\ufffd\ufffd", "value": b"x"}]]
    assert arrow_rows(rb) == as_rows(decode_batches(data, "t", 0))


def test_topic_and_partition_columns_without_pandas():
    """The first batch of a process must not import pandas (pa.scalar does: ~0.4 s)."""
    code = ("import sys\n"
            "from minilog.connector import batch\n"
            "from minilog.connector.arrow import decode_to_arrow\n"
            "from minilog.connector.records import encode_batch\n"
            "rb = decode_to_arrow(encode_batch([(1, b'k', b'v', [('h', b'x')])] * 3), 't', 2)\n"
            "assert rb.num_rows == 3 and 'pandas' not in sys.modules\n"
            "bad = b'\\x00\\x00\\x00\\x02k\\x02v\\x04\\x04\\xff\\xfe\\x02x\\x04ok\\x02y'\n"
            "rb = decode_to_arrow(batch.build(bytes([len(bad) * 2]) + bad, 1, 0, 1, 1), 't', 0)\n"
            "rb.validate(full=True)\n"
            "assert rb.column('headers').to_pylist() == [[{'key': '\\ufffd\\ufffd', "
            "'value': b'x'}, {'key': 'ok', 'value': b'y'}]]\n"
            "assert 'pandas' not in sys.modules  # invalid UTF-8 header keys, repaired\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("topic", ["t", "", "ünïcode-тема", "x" * 249])
@pytest.mark.parametrize("n", [0, 1, 1000])
def test_repeated_columns_equal_pyarrow_built_ones(topic, n):
    strings = _repeated_string(topic, n)
    strings.validate(full=True)
    assert strings.equals(pa.array([topic] * n, pa.string()))
    ints = _repeated_int32(7, n)
    ints.validate(full=True)
    assert ints.equals(pa.array([7] * n, pa.int32()))
    assert _repeated_string(None, n).equals(pa.nulls(n, pa.string()))
    assert _repeated_int32(None, n).equals(pa.nulls(n, pa.int32()))


def test_bad_input_is_corrupt(kernel):
    data = bytearray(fetch_response())
    data[42] ^= 1
    with pytest.raises(CorruptRecord, match="CRC"):
        decode_to_arrow(bytes(data), "t", 0)
    assert decode_to_arrow(bytes(data), "t", 0, check_crc=False).num_rows > 0
    payload, count, _, _ = _kernel.python.encode_records(edge_records(3), T0)
    truncated = batch.build(payload[:-2], count, count - 1, T0, T0, base_offset=77)
    with pytest.raises(CorruptRecord, match="batch at offset 77"):
        decode_to_arrow(truncated, "t", 0)


def test_kernels_agree_on_random_corruption():
    if _kernel.c is None:
        pytest.skip("C record kernel not built")
    rng = random.Random(11)
    payload, count, _, _ = _kernel.python.encode_records(edge_records(30), T0)
    for _ in range(2000):
        mutated = bytearray(payload)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        data = batch.build(bytes(mutated), count, count - 1, T0, T0)
        start, end = rng.randrange(10), rng.choice([None, rng.randrange(10, 40)])
        results = []
        for name in ("python", "c"):
            _kernel.use(name)
            try:
                results.append(decode_to_arrow(data, "t", 0, start, end))
            except CorruptRecord:
                results.append("corrupt")
        _kernel.use("c")
        if results[0] == "corrupt" or results[1] == "corrupt":
            assert results[0] == results[1]
        else:
            assert results[0].equals(results[1])
