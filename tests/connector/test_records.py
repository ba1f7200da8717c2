"""Records in v2 batches: what we encode any client reads, what any client sends we decode.

kafka-python's record code is the independent reference; the request frames captured from
librdkafka, kafka-python, aiokafka and kafkajs are the real thing. Every test runs on both
record kernels (the C extension and the pure-Python reference).
"""
import copy
import gc
import os
import pickle
import random
import struct
import subprocess
import sys
import sysconfig
import time
import types
from pathlib import Path

import cramjam
import kafka.codec
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from minilog.connector import _kernel, batch
from minilog.connector.compression import UnsupportedCodec
from minilog.connector.protocol import decode_request
from minilog.connector.records import (
    NO_HEADERS,
    ConsumerRecord,
    CorruptRecord,
    decode_batches,
    encode_batch,
    next_offset_after,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kafka-captures"
T0 = 1_700_000_000_000


@pytest.fixture(autouse=True)
def python_snappy(monkeypatch):
    """kafka-python's snappy framing on cramjam's raw snappy (python-snappy is absent)."""
    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))))
    monkeypatch.setattr(kafka.codec, "snappy", shim)


def edge_records():
    """Null and empty keys/values, headers with null values and non-ASCII keys, a timestamp
    before the base (negative delta), a 70 kB value (several lz4/snappy blocks), and enough
    records for multi-byte offset deltas."""
    return [
        (T0, b"key", b"value", []),
        (T0 + 5, None, b"null key", [("h", b"v")]),
        (T0 - 1000, b"null value", None, []),
        (T0 + 10, b"", b"", [("empty", b""), ("null", None)]),
        (T0 + 20, None, None, [("ünïcode-ключ", b"\x00\xff")]),
        (T0 + 100_000, b"k" * 300, random.Random(1).randbytes(70_000), [("big", b"x" * 200)]),
    ] + [(T0 + i, b"%d" % i, b"v%d" % i, [("i", b"%d" % i)] * (i % 3)) for i in range(200)]


def expected(recs, topic="t", partition=0, base_offset=0, start=0):
    return [ConsumerRecord(topic, partition, base_offset + i, ts, 0, k, v, list(h))
            for i, (ts, k, v, h) in enumerate(recs) if base_offset + i >= start]


def kafka_python_encode(recs, codec, base_offset=0):
    builder = DefaultRecordBatchBuilder(2, CODEC_IDS[codec], False, -1, -1, -1, 1 << 30)
    for i, (ts, k, v, h) in enumerate(recs):
        builder.append(i, timestamp=ts, key=k, value=v, headers=list(h))
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def kafka_python_decode(data):
    out, mr = [], MemoryRecords(bytes(data))
    while (b := mr.next_batch()) is not None:
        out += [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in b]
    return out


CODEC_IDS = {name: i for i, name in enumerate(CODECS)}


# -- encode ------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(kernel, codec):
    recs = edge_records()
    data = encode_batch(recs, compression=codec, base_offset=42)
    assert batch.validate(data).compression == CODEC_IDS[codec]
    assert decode_batches(data, "t", 0) == expected(recs, base_offset=42)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(kernel, codec):
    recs = edge_records()
    data = encode_batch(recs, compression=codec, base_offset=7, producer_id=1234,
                        producer_epoch=3, base_sequence=99, transactional=True)
    b = DefaultRecordBatch(data)
    assert b.validate_crc()
    assert (b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence) == (7, 1234, 3, 99)
    assert b.is_transactional and b.compression_type == CODEC_IDS[codec]
    assert b.max_timestamp == max(ts for ts, *_ in recs)
    assert kafka_python_decode(data) == [(7 + i, ts, k, v, list(h))
                                         for i, (ts, k, v, h) in enumerate(recs)]


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_kafka_python_batches(kernel, codec):
    recs = edge_records()
    data = kafka_python_encode(recs, codec, base_offset=1000)
    assert decode_batches(data, "t", 3) == expected(recs, partition=3, base_offset=1000)


def test_both_kernels_encode_identical_bytes():
    if _kernel.c is None:
        pytest.skip("C record kernel not built")
    recs = edge_records()
    assert _kernel.c.encode_records(recs, T0) == _kernel.python.encode_records(recs, T0)


@pytest.mark.parametrize("arrow_type", ["string", "binary", "large_string", "large_binary"])
def test_a_value_column_encodes_as_its_values_would(kernel, arrow_type):
    """`ValueColumn` (rows of an Arrow column, the producer's path for values alone): the
    bytes `encode_records` writes for the same keyless values, nulls, empty and multi-byte
    lengths, a sliced array, and enough rows for multi-byte offset deltas."""
    import pyarrow as pa
    from minilog.connector.value_column import ValueColumn
    raw = [None if i % 13 == 4 else b"x" * (i * 37 % 300) + b"%d" % i for i in range(400)]
    typ = getattr(pa, arrow_type)()
    column = pa.array([v if v is None or "binary" in arrow_type else v.decode() for v in raw],
                      typ).slice(9, 380)
    rows = ValueColumn(column, 5, 370, T0)
    expected = _kernel.active.encode_records([(T0, None, v, ()) for v in raw[14:384]], 0)
    assert rows.encode(_kernel.active) == expected
    assert len(rows) == 370
    [first, *_] = decode_batches(encode_batch(rows))
    assert (first.offset, first.timestamp, first.key, first.value) == (0, T0, None, raw[14])
    with pytest.raises(ValueError, match="outside"):
        ValueColumn(column, 5, 376, T0)
    with pytest.raises(ValueError, match="outside"):  # the kernel checks the buffers too
        _kernel.active.encode_values(*column.buffers()[1:], None, "large" in arrow_type, 0,
                                     len(column) + 30, T0)


def test_header_layout_matches_the_java_producer(kernel):
    # base timestamp = first record's, deltas 0..n-1, max timestamp, count, dense batch.
    h = batch.validate(encode_batch([(T0 + 5, b"a", b"1", []), (T0, b"b", b"2", [])]))
    assert (h.base_timestamp, h.max_timestamp, h.record_count, h.last_offset_delta) == (
        T0 + 5, T0 + 5, 2, 1)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.attributes) == (-1, -1, -1, 0)


def test_missing_timestamp_means_now(kernel):
    before = int(time.time() * 1000)
    [rec] = decode_batches(encode_batch([(None, b"k", b"v", [])]))
    assert before <= rec.timestamp <= int(time.time() * 1000)


def test_records_may_be_any_iterable_of_sequences(kernel):
    data = encode_batch(iter([[T0, bytearray(b"k"), memoryview(b"v"), [["h", b"x"]]]]))
    assert decode_batches(data) == [ConsumerRecord(None, None, 0, T0, 0, b"k", b"v",
                                                   [("h", b"x")])]


def test_bad_encode_arguments_raise(kernel):
    with pytest.raises(ValueError, match="at least one record"):
        encode_batch([])
    with pytest.raises(TypeError):
        encode_batch([(T0, "a str key", b"v", [])])
    with pytest.raises(TypeError):
        encode_batch([(T0, b"k", b"v", [(b"bytes header key", b"v")])])
    with pytest.raises(ValueError, match="timestamp_type"):
        encode_batch([(T0, b"k", b"v", [])], timestamp_type=2)
    with pytest.raises(UnsupportedCodec):
        encode_batch([(T0, b"k", b"v", [])], compression="brotli")


# -- decode ------------------------------------------------------------------------------

def test_log_append_time_stamps_every_record(kernel):
    data = batch.stamp(encode_batch(edge_records()[:5]), 500, log_append_time=T0 + 999)
    recs = decode_batches(data, "t", 0)
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in recs] == [
        (500 + i, T0 + 999, 1) for i in range(5)]


def control_batch(base_offset, commit=True):
    """A transaction marker as the broker writes it: one record, key = (version, type)."""
    payload, count, ts, _ = _kernel.python.encode_records(
        [(T0, struct.pack(">hh", 0, int(commit)), struct.pack(">hi", 0, 0), [])], T0)
    return batch.build(payload, count, 0, ts, ts, base_offset=base_offset, producer_id=9,
                       producer_epoch=0, attributes=batch.CONTROL | batch.TRANSACTIONAL)


def test_control_batches_are_skipped_but_advance_the_position(kernel):
    recs = edge_records()[:3]
    data = encode_batch(recs, base_offset=0) + control_batch(3) + control_batch(4)
    assert decode_batches(data, "t", 0) == expected(recs)
    assert next_offset_after(data) == 5


def test_partial_trailing_batch_is_ignored(kernel):
    recs = edge_records()[:3]
    first, second = encode_batch(recs), encode_batch(recs, base_offset=3)
    for cut in (1, 12, 61, len(second) - 1):
        data = first + second[:cut]
        assert decode_batches(data, "t", 0) == expected(recs)
        assert next_offset_after(data) == 3
    assert next_offset_after(first[:-1]) is None and decode_batches(b"") == []


def test_start_offset_in_the_middle_of_a_batch(kernel):
    recs = edge_records()
    data = encode_batch(recs[:10], base_offset=100) + encode_batch(recs[10:], base_offset=110)
    assert decode_batches(data, "t", 0, start_offset=104) == [
        r for r in expected(recs, base_offset=100) if r.offset >= 104]
    assert decode_batches(data, "t", 0, start_offset=10**6) == []


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka", "kafkajs"])
def test_records_real_clients_produced(kernel, client):
    """Every produce request of the captured sessions: librdkafka's gzip, raw snappy, lz4 and
    zstd batches, idempotent ones, kafka-python's and aiokafka's gzip. The decoded records
    must agree with kafka-python's reading of the same bytes."""
    n = 0
    for topic, partition, records in _captured_produce(client):
        ours = decode_batches(records, topic, partition)
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in ours] == \
            kafka_python_decode(records)
        assert all(r.topic == topic and r.partition == partition for r in ours)
        n += len(ours)
    assert n == {"confluent-kafka": 250, "kafka-python": 20, "aiokafka": 30, "kafkajs": 500}[
        client]


def _captured_produce(client):
    data = (CAPTURES / f"{client}.bin").read_bytes()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        frame, pos = data[pos + 4:pos + 4 + n], pos + 4 + n
        if struct.unpack_from(">h", frame, 4)[0] != 0:  # Produce only
            continue
        _, body = decode_request(frame[4:])
        for t in body.topic_data:
            for p in t.partition_data:
                yield t.name, p.index, p.records


# -- bad input ---------------------------------------------------------------------------

def test_bad_crc_is_corrupt(kernel):
    data = bytearray(encode_batch(edge_records()[:3]))
    data[42] ^= 0x01  # max_timestamp's last byte: covered by the CRC, harmless to decoding
    with pytest.raises(CorruptRecord, match="CRC"):
        decode_batches(bytes(data))
    assert len(decode_batches(bytes(data), check_crc=False)) == 3


def rebuilt(payload, count):
    """A batch around a hand-made records payload, with a valid CRC."""
    return batch.build(payload, count, count - 1, T0, T0)


def test_truncated_and_malformed_records_are_corrupt(kernel):
    payload, count, _, _ = _kernel.python.encode_records(edge_records()[:4], T0)
    cases = {  # what the error says -> the batch that shows it (all with valid CRCs)
        "fewer records than its count": rebuilt(payload, count + 1),
        "overruns the batch payload": rebuilt(payload[:-3], count),
        "bytes left after the batch's": rebuilt(payload + b"\x00\x00", count),
        "record length truncated": rebuilt(payload + b"\x80", count + 1),
    }
    for message, data in cases.items():
        with pytest.raises(CorruptRecord, match=f"batch at offset 0: .*{message}"):
            decode_batches(data)


def test_field_lengths_are_checked(kernel):
    def one(body):
        return rebuilt(bytes([len(body) * 2]) + body, 1)
    ok = b"\x00\x00\x00\x02k\x02v\x00"  # attrs, ts 0, offset 0, key "k", value "v", 0 headers
    assert decode_batches(one(ok))[0].key == b"k"
    for body in (b"\x00\x00\x00\x20k\x02v\x00",         # key longer than the record
                 b"\x00\x00\x00\x03k\x02v\x00",         # key length -2
                 b"\x00\x00\x00\x02k\x02v\x02\x01\x00",  # null header key
                 b"\x00\x00\x00\x02k\x02v\x01",          # negative header count
                 b"\x00\x00\x00\x02k\x02v\x00\x00"):     # record longer than its fields
        with pytest.raises(CorruptRecord):
            decode_batches(one(body))


def test_undecompressable_payload_is_corrupt(kernel):
    data = batch.build(b"not gzip at all", 1, 0, T0, T0, attributes=1)
    with pytest.raises(CorruptRecord, match="gzip"):
        decode_batches(data)


def test_old_message_formats_are_refused_clearly(kernel):
    data = bytearray(encode_batch(edge_records()[:1]))
    data[16] = 1  # magic
    with pytest.raises(CorruptRecord, match="message format v1"):
        decode_batches(bytes(data))


def test_kernels_agree_on_random_corruption():
    """Mutated payloads (valid CRC) must give both kernels the same records or both fail."""
    if _kernel.c is None:
        pytest.skip("C record kernel not built")
    rng = random.Random(7)
    payload, count, _, _ = _kernel.python.encode_records(edge_records()[:30], T0)
    for _ in range(3000):
        mutated = bytearray(payload)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        cut = len(mutated) if rng.random() < 0.7 else rng.randrange(len(mutated))
        data, start = rebuilt(bytes(mutated[:cut]), count), rng.randrange(5)
        results = []
        for name in ("python", "c"):
            _kernel.use(name)
            try:
                results.append(decode_batches(data, "t", 0, start_offset=start))
            except CorruptRecord:
                results.append("corrupt")
        _kernel.use("c")
        assert results[0] == results[1]


# -- records without headers ----------------------------------------------------------

def test_records_without_headers_share_one_read_only_list(kernel):
    """A new list per record only where there are headers: the others share NO_HEADERS,
    which still reads and compares as `[]`, refuses changes, pickles as itself, and (C
    kernel) keeps those records out of the cyclic GC."""
    recs = [(T0, b"k", b"v", []), (T0 + 1, None, b"w", [("h", b"x")]), (T0 + 2, None, None, [])]
    out = decode_batches(encode_batch(recs), "t", 0)
    assert out == expected(recs)
    assert out[0].headers is out[2].headers is NO_HEADERS
    assert out[1].headers == [("h", b"x")] and out[1].headers is not out[0].headers
    assert isinstance(NO_HEADERS, list) and NO_HEADERS == [] and not NO_HEADERS
    for change in (lambda h: h.append(("k", b"v")), lambda h: h.extend([1]),
                   lambda h: h.insert(0, 1), lambda h: h.__iadd__([1]), lambda h: h.clear(),
                   lambda h: h.__setitem__(slice(None), [1])):
        with pytest.raises(TypeError, match="read-only"):
            change(out[0].headers)
    assert NO_HEADERS == [] and list(out[0].headers) == []
    assert pickle.loads(pickle.dumps(out[0])).headers is NO_HEADERS
    assert copy.deepcopy(out[0]) == out[0] and copy.copy(NO_HEADERS) is NO_HEADERS
    if kernel == "c":
        assert not gc.is_tracked(out[0]) and not gc.is_tracked(out[2])
        assert gc.is_tracked(out[1])  # it holds a list


def test_untracked_only_with_atomic_topic_and_partition(kernel):
    if kernel != "c":
        pytest.skip("the Python kernel cannot untrack")
    data = encode_batch([(T0, b"k", b"v", [])])
    assert not gc.is_tracked(decode_batches(data, None, None)[0])
    assert gc.is_tracked(decode_batches(data, ["not", "atomic"], 0)[0])
    out = []  # without a shared object, the old contract: a new list per record
    _kernel.c.decode_records(data[61:], 1, 0, T0, None, 0, "t", 0, ConsumerRecord, out)
    assert out[0].headers == [] and out[0].headers is not NO_HEADERS and gc.is_tracked(out[0])


# -- kernel choice -----------------------------------------------------------------------

def test_pure_python_can_be_forced():
    code = "from minilog.connector import _kernel; print(_kernel.name_of())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "MINILOG_PURE_PYTHON": "1"}, check=True)
    assert out.stdout.strip() == "python"


@pytest.mark.skipif(not sysconfig.get_config_var("CC"), reason="no C compiler configured")
def test_c_kernel_is_built_where_a_compiler_exists():
    assert _kernel.c is not None and _kernel.name_of(_kernel.c) == "c"
