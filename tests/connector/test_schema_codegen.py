"""The generated protocol codec (schema.py, codegen.py): round trips of every message and version, bounds
and format errors as CorruptMessage, tagged fields, zero-copy records, generated constructors."""
import random
import struct
import uuid

import pytest
from minilog.connector.protocol import ApiKey, CorruptMessage, request, response
from minilog.connector.protocol.messages import SCHEMAS
from minilog.connector.protocol.primitives import ZERO_UUID, Reader

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


def _value(rnd, t, nullable):
    if nullable and rnd.random() < 0.2:
        return None
    if t in _INTS:
        bits = _INTS[t]
        return rnd.choice([-(1 << bits - 1), (1 << bits - 1) - 1, 0, -1, rnd.getrandbits(bits - 1)])
    if t == "uint16":
        return rnd.choice([0, 65535, rnd.getrandbits(16)])
    if t == "bool":
        return rnd.random() < 0.5
    if t == "float64":
        return rnd.choice([0.0, -1.5, 1e300])
    if t == "uuid":
        return rnd.choice([ZERO_UUID, uuid.UUID(int=rnd.getrandbits(128))])
    if t == "string":
        return "".join(rnd.choice("ab-é€😀") for _ in range(rnd.choice([0, 1, 7, 150])))
    return rnd.randbytes(rnd.choice([0, 5, 127, 300]))  # bytes, records


def _populated(rnd, schema, version, depth=0):
    """An instance with a random value in every field of `version` (some left at default)."""
    fields = {}
    for f in schema.fields:
        if not _in(f.versions, version) or rnd.random() < 0.1:
            continue
        nullable = _in(f.nullable, version)
        if f.type == "{}":
            fields[f.name] = None if nullable and rnd.random() < 0.3 else \
                _populated(rnd, f.struct, version, depth + 1)
        elif f.type.startswith("[]"):
            if nullable and rnd.random() < 0.2:
                fields[f.name] = None
                continue
            n = rnd.choice([0, 1, 2, 3] if depth < 2 else [0, 1])
            elem = f.type[2:]
            fields[f.name] = [_value(rnd, elem, False) if elem else
                              _populated(rnd, f.struct, version, depth + 1) for _ in range(n)]
        else:
            fields[f.name] = _value(rnd, f.type, nullable)
    return schema.cls(**fields)


def _all_versions():
    for name, schema in sorted(SCHEMAS.items()):
        for version in range(schema.versions[0], schema.versions[1] + 1):
            yield pytest.param(schema, version, id=f"{name}-v{version}")


def _decodable(schema, version, data):
    try:
        schema.decode(data, version)
    except CorruptMessage:
        return False
    return True


@pytest.mark.parametrize(("schema", "version"), list(_all_versions()))
def test_every_message_round_trips_from_every_kind_of_buffer(schema, version):
    rnd = random.Random(f"{schema.name}-{version}")
    for _ in range(3):
        obj = _populated(rnd, schema, version)
        data = schema.encode(obj, version)
        if not _decodable(schema, version, data):
            continue  # a default of None in a field not nullable in this version: not sendable
        back = schema.decode(data, version)
        assert schema.encode(back, version) == data
        for buf in (memoryview(data), bytearray(data)):
            assert schema.decode(buf, version) == back
        # Inside a larger buffer, through a Reader: it is left right after the message.
        r = Reader(b"\x07\x07" + data + b"\x09", 2, 2 + len(data) + 1)
        assert schema.decode(r, version) == back
        assert r.pos == 2 + len(data)


def _examples():
    produce, fetch_resp, meta_resp = (request(ApiKey.PRODUCE), response(ApiKey.FETCH),
                                      response(ApiKey.METADATA))
    for version in (3, 9, 11):
        yield produce, version, produce.cls(
            transactional_id="tx", acks=-1, timeout_ms=1000, topic_data=[produce.make(
                "topic_data", name="tópico", partition_data=[produce.make(
                    "topic_data", "partition_data", index=2, records=b"r" * 200)])])
    for version in (4, 12, 16):
        part = fetch_resp.make("responses", "partitions", partition_index=1, high_watermark=9,
                               records=b"x" * 150, aborted_transactions=[fetch_resp.make(
                                   "responses", "partitions", "aborted_transactions",
                                   producer_id=5, first_offset=3)])
        part.diverging_epoch = fetch_resp.make("responses", "partitions", "diverging_epoch",
                                               epoch=4, end_offset=10)
        yield fetch_resp, version, fetch_resp.cls(session_id=3, responses=[fetch_resp.make(
            "responses", topic="t", topic_id=uuid.UUID(int=7), partitions=[part])])
    produce_resp = response(ApiKey.PRODUCE)  # ends with a fixed-width field before v9
    for version in (3, 9):
        yield produce_resp, version, produce_resp.cls(throttle_time_ms=5, responses=[
            produce_resp.make("responses", name="t", partition_responses=[
                produce_resp.make("responses", "partition_responses", base_offset=1)])])
    for version in (1, 9, 12):
        yield meta_resp, version, meta_resp.cls(
            brokers=[meta_resp.make("brokers", node_id=1, host="h", port=9092, rack=None)],
            cluster_id="c", topics=[meta_resp.make("topics", name="t", partitions=[
                meta_resp.make("topics", "partitions", replica_nodes=[1, 2], isr_nodes=[1])])])


@pytest.mark.parametrize(("schema", "version", "obj"), list(_examples()))
def test_truncated_messages_are_corrupt_at_every_cut(schema, version, obj):
    data = schema.encode(obj, version)
    assert schema.decode(data, version) is not None
    for cut in range(len(data)):
        for buf in (data[:cut], memoryview(data)[:cut]):
            with pytest.raises(CorruptMessage):
                schema.decode(buf, version)
        # Bytes after `end` must not be read either.
        with pytest.raises(CorruptMessage):
            schema.decode(data, version, 0, cut)


@pytest.mark.parametrize(("schema", "version", "obj"), list(_examples()))
def test_damaged_bytes_are_corrupt_or_decode(schema, version, obj):
    """Whatever the bytes, decoding gives an object or CorruptMessage, never another error."""
    data = schema.encode(obj, version)
    rnd = random.Random(len(data))
    for _ in range(300):
        damaged = bytearray(data)
        for _ in range(rnd.choice([1, 2, 4])):
            damaged[rnd.randrange(len(damaged))] = rnd.choice([0, 0x7F, 0x80, 0xFF, 1])
        try:
            schema.decode(bytes(damaged), version)
        except CorruptMessage:
            pass


def _metadata_v1(topic_name_bytes):
    # MetadataResponse v1: brokers [], controller_id, topics [error_code, name, is_internal, ...]
    return (b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x01"
            + b"\x00\x00" + topic_name_bytes + b"\x00" + b"\x00\x00\x00\x00")


@pytest.mark.parametrize(("data", "match"), ids=[
    "not-utf8", "null-string", "string-overrun", "negative-string", "array-overrun", "null-array"], argvalues=[
    (_metadata_v1(b"\x00\x02\xff\xfe"), "not UTF-8"),
    (_metadata_v1(b"\xff\xff"), "null in a non-nullable string"),
    (_metadata_v1(b"\x7f\xff"), "overruns"),
    (_metadata_v1(b"\xff\xf0"), "null in a non-nullable"),  # any negative length is null
    (b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" + b"\x7f\xff\xff\xff", "array topics of"),
    (b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff" + b"\xff\xff\xff\xff", "null array topics"),
])
def test_format_errors_are_corrupt_message(data, match):
    with pytest.raises(CorruptMessage, match=match):
        response(ApiKey.METADATA).decode(data, 1)


def test_varint_errors_are_corrupt_message():
    fetch = request(ApiKey.FETCH)  # v12: flexible, starts with max_wait_ms etc., then varints
    obj = fetch.cls(max_wait_ms=1, min_bytes=1, topics=[])
    data = fetch.encode(obj, 12)
    fixed = 4 * 3 + 4 + 1 + 4 + 4  # replica_id .. session_epoch
    too_long = data[:fixed] + b"\x80" * 11 + b"\x00"
    with pytest.raises(CorruptMessage, match="varint too long"):
        fetch.decode(too_long, 12)
    with pytest.raises(CorruptMessage, match="varint truncated"):
        fetch.decode(data[:fixed] + b"\x80", 12)


def test_tagged_fields_round_trip_sorted_and_left_out_at_defaults():
    resp = response(ApiKey.PRODUCE)
    part = resp.make("responses", "partition_responses", index=0, base_offset=5)
    obj = resp.cls(responses=[resp.make("responses", name="t", partition_responses=[part])])
    plain = resp.encode(obj, 10)
    # Tagged fields at their default (None, empty list) are not written.
    part.current_leader = None
    obj.node_endpoints = []
    assert resp.encode(obj, 10) == plain
    part.current_leader = resp.make("responses", "partition_responses", "current_leader",
                                    leader_id=3, leader_epoch=7)
    obj.node_endpoints = [resp.make("node_endpoints", node_id=3, host="h", port=1, rack="r")]
    tagged = resp.encode(obj, 10)
    assert len(tagged) > len(plain)
    back = resp.decode(tagged, 10)
    assert back == obj
    assert back.responses[0].partition_responses[0].current_leader.leader_epoch == 7
    assert resp.encode(back, 10) == tagged

    # FetchRequest v15: cluster_id is tag 0 and replica_state tag 1, written in tag order.
    fetch = request(ApiKey.FETCH)
    req = fetch.cls(cluster_id="c", replica_state=fetch.make("replica_state", replica_id=1))
    data = fetch.encode(req, 15)
    assert data.endswith(b"\x02" + b"\x00\x02\x02c"  # 2 tags; 0: 2 bytes, compact string "c"
                         + b"\x01\x0d" + struct.pack(">iq", 1, -1) + b"\x00")  # 1: 13 bytes
    assert fetch.decode(data, 15) == req


def test_unknown_tagged_fields_are_skipped_and_overruns_are_corrupt():
    hb = request(ApiKey.HEARTBEAT)
    obj = hb.cls(group_id="g", generation_id=1, member_id="m")
    data = hb.encode(obj, 4)
    assert data.endswith(b"\x00")
    with_unknown = data[:-1] + b"\x02" + b"\x09\x02ab" + b"\x0a\x00"
    assert hb.decode(with_unknown, 4) == obj
    with pytest.raises(CorruptMessage, match="tagged field"):
        hb.decode(data[:-1] + b"\x01\x09\x05ab", 4)


def test_records_are_views_of_the_buffer_and_written_without_copies():
    produce = request(ApiKey.PRODUCE)
    records = b"r" * 1000

    class Region:  # like broker.file_region.FileRegion: a length, no bytes
        def __len__(self):
            return 123

    for version, payload in ((9, records), (9, Region()), (3, records)):
        obj = produce.cls(acks=1, topic_data=[produce.make("topic_data", name="t", partition_data=[
            produce.make("topic_data", "partition_data", records=payload)])])
        chunks = []
        produce.encode_into(obj, version, chunks)
        assert any(c is payload for c in chunks)
    frame = produce.encode(obj, 3)
    for buf in (frame, memoryview(frame)):
        got = produce.decode(buf, 3).topic_data[0].partition_data[0].records
        assert isinstance(got, memoryview) and got.obj is frame and got == records


def test_constructors_fresh_defaults_and_unknown_names():
    resp = response(ApiKey.PRODUCE)
    a, b = resp.cls(), resp.cls()
    assert a.responses == [] and a.responses is not b.responses
    a.responses.append(1)
    assert resp.cls().responses == []
    part = resp.make("responses", "partition_responses")
    assert (part.log_append_time_ms, part.error_message, part.current_leader) == (-1, None, None)
    with pytest.raises(TypeError, match="no fields"):
        resp.cls(responses=[], bogus=1)
    with pytest.raises(TypeError):
        resp.cls([])
    with pytest.raises(TypeError):
        resp.make("responses", nmae="typo")
    # Decoded objects get defaults for fields their version lacks, and fresh lists too.
    v3 = resp.decode(resp.encode(resp.cls(), 3), 3)
    assert v3.node_endpoints == [] and v3.node_endpoints is not resp.cls().node_endpoints


def test_generated_source_is_inspectable():
    schema = request(ApiKey.PRODUCE)
    source = schema.decoder(9, True).__source__
    assert source.startswith("def read(buf, pos, end):") and "records" in source
    assert "def write(obj, out):" in schema.writer(9, True).__source__
    assert "def __init__(self, *," in type(schema.cls()).__init__.__source__
