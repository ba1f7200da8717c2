"""Old request versions that Kafka 3.9 still answers and deployed tools still send (Burrow's
ListOffsets v0), sent with the codec on a bare connection and each answer checked field by
field against Kafka's own message definitions (`../shared/kafka-protocol`)."""
import json
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from wire import RawConnection

from minilog.connector.protocol import ApiKey, request, response

KAFKA_PROTOCOL = Path(__file__).resolve().parents[3] / "shared" / "kafka-protocol"
# Kafka's JSON definitions sit beside the repository only in the CI layout: a user's clone
# skips the field-by-field comparison with its reason instead of failing it.
needs_kafka_protocol = pytest.mark.skipif(
    not KAFKA_PROTOCOL.is_dir(),
    reason=f"Kafka's message definitions are not at {KAFKA_PROTOCOL} (only the CI layout has them)")
LATEST, EARLIEST = -1, -2


def kafka_fields(message, version):
    """Names (snake case, as the codec's) of the top-level and nested fields Kafka's JSON
    definition gives `message` at `version`: {path: {field names}}."""
    import re
    text = "\n".join(line for line in (KAFKA_PROTOCOL / f"{message}.json").read_text()
                     .splitlines() if not line.strip().startswith("//"))

    def valid(spec):
        if spec == "none":
            return False
        if spec.endswith("+"):
            return version >= int(spec[:-1])
        lo, _, hi = spec.partition("-")
        return int(lo) <= version <= int(hi or lo)

    out = {}

    def walk(fields, path):
        names = out.setdefault(path, set())
        for f in fields:
            if valid(f["versions"]) and "taggedVersions" not in f:
                name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", f["name"]).lower()
                names.add(name)
                if f.get("fields"):
                    walk(f["fields"], f"{path}.{name}" if path else name)
    walk(json.loads(text)["fields"], "")
    return out


def codec_fields(schema, version):
    """The same for the codec's declaration: what goes on the wire at `version`."""
    out = {}

    def walk(struct, path):
        names = out.setdefault(path, set())
        for f in struct.fields:
            if f.versions[0] <= version <= f.versions[1] and not f.tagged:
                names.add(f.name)
                if f.struct is not None:
                    walk(f.struct, f"{path}.{f.name}" if path else f.name)
    walk(schema, "")
    return out


@pytest.fixture(scope="module")
def ten(broker):
    """A topic whose one partition holds ten records."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("old-ten", 1, 1)])["old-ten"].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce("old-ten", value=b"v%d" % i)
    assert p.flush(10) == 0
    return "old-ten"


def list_offsets_v0(broker, topic, timestamp, max_num_offsets):
    Req = request(ApiKey.LIST_OFFSETS)
    conn = RawConnection(broker.bootstrap)
    try:
        return conn.call(ApiKey.LIST_OFFSETS, 0, Req.cls(replica_id=-1, topics=[
            Req.make("topics", name=topic, partitions=[Req.make(
                "topics", "partitions", partition_index=0, timestamp=timestamp,
                max_num_offsets=max_num_offsets)])]))
    finally:
        conn.close()


@pytest.mark.parametrize("timestamp, max_num, expected", [
    (LATEST, 1, [10]), (EARLIEST, 1, [0]), (LATEST, 10, [10, 0])])
def test_list_offsets_v0_answers_old_style_offsets(broker, ten, timestamp, max_num, expected):
    """Kafka 3.9's legacyFetchOffsetsBefore: segment base offsets and the log end, largest
    first; Burrow (sarama with kafka-version below 0.10.1) asks latest, one offset."""
    resp = list_offsets_v0(broker, ten, timestamp, max_num)
    [topic] = resp.topics
    [part] = topic.partitions
    assert (topic.name, part.partition_index, part.error_code) == (ten, 0, 0)
    assert part.old_style_offsets == expected



# The versions below minilog's former minimum, now answered as Kafka 3.9 answers them.
OLD = [(ApiKey.LIST_OFFSETS, 0), (ApiKey.CREATE_TOPICS, 0), (ApiKey.CREATE_TOPICS, 1),
       (ApiKey.DELETE_TOPICS, 0), (ApiKey.DESCRIBE_CONFIGS, 0),
       *((ApiKey.FETCH, v) for v in range(4)),
       *((ApiKey.DESCRIBE_LOG_DIRS, v) for v in range(5)),
       *((ApiKey.PRODUCE, v) for v in range(3)),
       (ApiKey.OFFSET_FOR_LEADER_EPOCH, 0), (ApiKey.OFFSET_FOR_LEADER_EPOCH, 1),
       (ApiKey.CREATE_ACLS, 0), (ApiKey.DESCRIBE_ACLS, 0), (ApiKey.DELETE_ACLS, 0)]


@needs_kafka_protocol
@pytest.mark.parametrize("api, version", OLD)
@pytest.mark.parametrize("kind", ["Request", "Response"])
def test_the_codec_declares_each_old_version_as_kafka_does(api, version, kind):
    schema = (request if kind == "Request" else response)(api)
    assert codec_fields(schema, version) == kafka_fields(schema.name, version)


# Kafka 3.9's validVersions (clients/src/main/resources/common/message/*Request.json at the 3.9
# branch) for every API minilog serves; docs/PROTOCOL_VERSIONS.md is the same table with notes.
KAFKA_39 = {
    "PRODUCE": (0, 11), "FETCH": (0, 17), "LIST_OFFSETS": (0, 9), "METADATA": (0, 12),
    "OFFSET_COMMIT": (0, 9), "OFFSET_FETCH": (0, 9), "FIND_COORDINATOR": (0, 6),
    "JOIN_GROUP": (0, 9), "HEARTBEAT": (0, 4), "LEAVE_GROUP": (0, 5), "SYNC_GROUP": (0, 5),
    "DESCRIBE_GROUPS": (0, 5), "LIST_GROUPS": (0, 5), "SASL_HANDSHAKE": (0, 1),
    "API_VERSIONS": (0, 4), "CREATE_TOPICS": (0, 7), "DELETE_TOPICS": (0, 6),
    "DELETE_RECORDS": (0, 2), "INIT_PRODUCER_ID": (0, 5), "OFFSET_FOR_LEADER_EPOCH": (0, 4),
    "ADD_PARTITIONS_TO_TXN": (0, 5), "ADD_OFFSETS_TO_TXN": (0, 4), "END_TXN": (0, 4),
    "WRITE_TXN_MARKERS": (0, 1), "TXN_OFFSET_COMMIT": (0, 4), "DESCRIBE_ACLS": (0, 3),
    "CREATE_ACLS": (0, 3), "DELETE_ACLS": (0, 3), "DESCRIBE_CONFIGS": (0, 4),
    "ALTER_CONFIGS": (0, 2), "DESCRIBE_LOG_DIRS": (0, 4), "SASL_AUTHENTICATE": (0, 2),
    "CREATE_PARTITIONS": (0, 3), "DELETE_GROUPS": (0, 2), "ELECT_LEADERS": (0, 2),
    "INCREMENTAL_ALTER_CONFIGS": (0, 1), "ALTER_PARTITION_REASSIGNMENTS": (0, 0),
    "LIST_PARTITION_REASSIGNMENTS": (0, 0),
    "OFFSET_DELETE": (0, 0), "DESCRIBE_USER_SCRAM_CREDENTIALS": (0, 0),
    "ALTER_USER_SCRAM_CREDENTIALS": (0, 0), "VOTE": (0, 1), "BEGIN_QUORUM_EPOCH": (0, 1),
    "END_QUORUM_EPOCH": (0, 1), "ALTER_PARTITION": (0, 3), "DESCRIBE_CLUSTER": (0, 1),
    "DESCRIBE_PRODUCERS": (0, 0), "BROKER_REGISTRATION": (0, 4), "BROKER_HEARTBEAT": (0, 1),
    "DESCRIBE_TRANSACTIONS": (0, 0), "LIST_TRANSACTIONS": (0, 1), "ALLOCATE_PRODUCER_IDS": (0, 0),
    "CONSUMER_GROUP_HEARTBEAT": (0, 0), "CONSUMER_GROUP_DESCRIBE": (0, 0), "ENVELOPE": (0, 0),
}
# Newest versions Kafka 3.9 has and minilog does not (none of them sent by clients to old
# brokers): the maximum minilog advertises instead, each explained in docs/PROTOCOL_VERSIONS.md.
BELOW_KAFKA_39 = {
    "FETCH": 16, "ADD_PARTITIONS_TO_TXN": 4, "BEGIN_QUORUM_EPOCH": 0,
    "END_QUORUM_EPOCH": 0, "BROKER_REGISTRATION": 0, "BROKER_HEARTBEAT": 0,
}


def test_api_versions_covers_kafka_39s_range_for_every_api_minilog_serves(broker):
    """The audit: each API's lowest version is Kafka 3.9's (old tools are answered), and its
    highest is at least Kafka 3.9's except where BELOW_KAFKA_39 says otherwise."""
    conn = RawConnection(broker.bootstrap)
    try:
        resp = conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS).cls(
            client_software_name="audit", client_software_version="1"))
    finally:
        conn.close()
    served = {ApiKey(k.api_key).name: (k.min_version, k.max_version) for k in resp.api_keys}
    assert set(served) <= set(KAFKA_39), "an API Kafka 3.9 does not have"
    for name, (lo, hi) in served.items():
        k_lo, k_hi = KAFKA_39[name]
        assert (name, lo) == (name, k_lo)
        assert (name, hi) == (name, BELOW_KAFKA_39[name]) if name in BELOW_KAFKA_39 else \
            hi >= k_hi, name


def call(broker, api, version, **body):
    conn = RawConnection(broker.bootstrap)
    try:
        return conn.call(api, version, request(api).cls(**body))
    finally:
        conn.close()


def test_create_and_delete_topics_v0(broker):
    """CreateTopics v0 (no validate_only, no error message) and DeleteTopics v0 (names)."""
    req = request(ApiKey.CREATE_TOPICS)
    created = call(broker, ApiKey.CREATE_TOPICS, 0, timeout_ms=10000, topics=[
        req.make("topics", name="v0-topic", num_partitions=2, replication_factor=1,
                 assignments=[], configs=[req.make("topics", "configs", name="retention.ms",
                                                   value="60000")])])
    assert [(t.name, t.error_code) for t in created.topics] == [("v0-topic", 0)]
    again = call(broker, ApiKey.CREATE_TOPICS, 0, timeout_ms=10000, topics=[
        req.make("topics", name="v0-topic", num_partitions=2, replication_factor=1,
                 assignments=[], configs=[])])
    assert [t.error_code for t in again.topics] == [36]  # TOPIC_ALREADY_EXISTS
    deleted = call(broker, ApiKey.DELETE_TOPICS, 0, topic_names=["v0-topic"], timeout_ms=10000)
    assert [(r.name, r.error_code) for r in deleted.responses] == [("v0-topic", 0)]


def test_describe_configs_v0_says_is_default(broker, ten):
    """v0 has `is_default` where later versions have `config_source`."""
    req = request(ApiKey.DESCRIBE_CONFIGS)
    resp = call(broker, ApiKey.DESCRIBE_CONFIGS, 0, resources=[req.make(
        "resources", resource_type=2, resource_name=ten, configuration_keys=None)])
    [result] = resp.results
    configs = {c.name: c for c in result.configs}
    assert result.error_code == 0
    assert configs["retention.ms"].is_default and configs["retention.ms"].value == "604800000"


def test_list_offsets_v0_for_an_unknown_topic_names_the_error(broker):
    [topic] = list_offsets_v0(broker, "no-such-topic-v0", LATEST, 1).topics
    assert topic.partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert topic.partitions[0].old_style_offsets == []


def _message_set(data):
    """[(offset, magic, crc ok, timestamp or None, key, value)] of a v0/v1 message set."""
    import struct
    import zlib
    out, pos = [], 0
    while pos + 12 <= len(data):
        offset, size = struct.unpack_from(">qi", data, pos)
        body = data[pos + 12:pos + 12 + size]
        crc, magic, _attributes = struct.unpack_from(">Ibb", body)
        at = 6
        timestamp = None
        if magic == 1:
            (timestamp,) = struct.unpack_from(">q", body, at)
            at += 8
        fields = []
        for _ in range(2):
            (n,) = struct.unpack_from(">i", body, at)
            at += 4
            fields.append(None if n < 0 else body[at:at + n])
            at += max(n, 0)
        out.append((offset, magic, crc == zlib.crc32(body[4:]), timestamp, *fields))
        pos += 12 + size
    return out


@pytest.mark.parametrize("version, magic", [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_fetch_v0_to_v3_down_converts_to_message_formats_v0_and_v1(broker, ten, version,
                                                                     magic):
    """Kafka 3.9 down-converts for Fetch v0-v3 (v0/v1: message format v0; v2/v3: v1), one
    uncompressed message per record from the fetch offset on, CRC32 over the message."""
    req = request(ApiKey.FETCH)
    resp = call(broker, ApiKey.FETCH, version, replica_id=-1, max_wait_ms=0, min_bytes=1,
                topics=[req.make("topics", topic=ten, partitions=[req.make(
                    "topics", "partitions", partition=0, fetch_offset=3,
                    partition_max_bytes=1 << 20)])])
    [topic] = resp.responses
    [part] = topic.partitions
    assert (part.error_code, part.high_watermark) == (0, 10)
    messages = _message_set(bytes(part.records))
    assert [(m[0], m[1], m[2], m[4], m[5]) for m in messages] == [
        (i, magic, True, None, b"v%d" % i) for i in range(3, 10)]
    assert all((m[3] is None) == (magic == 0) for m in messages)


def message_set(magic, records, codec=0, log_append_time=False):
    """A v0/v1 message set as kafka-python's legacy encoder writes it: (timestamp, key, value)
    records, compressed into one wrapper message when `codec` is set."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, (ts, key, value) in enumerate(records):
        builder.append(i, ts, key, value)
    data = bytearray(builder.build())
    if log_append_time:  # the producer claims LogAppendTime (attributes bit 3), CRC redone
        import struct
        import zlib
        data[17] |= 0x08
        struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    return bytes(data)


def produce_old(broker, version, topic, records, acks=1):
    req = request(ApiKey.PRODUCE)
    return call(broker, ApiKey.PRODUCE, version, acks=acks, timeout_ms=10000, topic_data=[
        req.make("topic_data", name=topic, partition_data=[req.make(
            "topic_data", "partition_data", index=0, records=records)])])


def stored(broker, topic):
    """[(batch codec, offset, timestamp, key, value)] of what the partition holds, read with
    Fetch v11 (batches as stored, format v2)."""
    from minilog.connector.batch import iter_batches
    from minilog.connector.records import decode_batches
    req = request(ApiKey.FETCH)
    resp = call(broker, ApiKey.FETCH, 11, replica_id=-1, max_wait_ms=0, min_bytes=1,
                isolation_level=0, topics=[req.make("topics", topic=topic, partitions=[req.make(
                    "topics", "partitions", partition=0, fetch_offset=0, log_start_offset=-1,
                    partition_max_bytes=1 << 20, current_leader_epoch=-1)])])
    data = bytes(resp.responses[0].partitions[0].records or b"")
    codecs = {h.base_offset + i: h.compression for _, h in iter_batches(data)
              for i in range(h.record_count)}
    return [(codecs[r.offset], r.offset, r.timestamp, r.key, r.value)
            for r in decode_batches(data)]


@pytest.fixture(scope="module")
def topics(broker):
    """Fresh one-partition topics by name, created on first use."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    made = set()

    def make(name, **configs):
        if name not in made:
            admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(10)
            made.add(name)
        return name
    return make


@pytest.mark.parametrize("version, magic, codec", [
    (0, 0, 0), (0, 0, 1), (1, 0, 2), (1, 1, 0), (2, 1, 0), (2, 1, 1), (2, 1, 2), (2, 1, 3),
    (2, 0, 3)])
def test_produce_v0_to_v2_converts_message_formats_v0_and_v1_to_one_v2_batch(
        broker, topics, version, magic, codec):
    """Kafka 3.9's LogValidator: the messages (or a wrapper's inner messages) become the
    records of one v2 batch with the producer's codec, at consecutive offsets; v0 messages
    have no timestamp (-1). The answer has Produce v0's fields, v1's throttle time, v2's
    log append time (-1 under CreateTime). magic 0 with LZ4 has Kafka 0.8's wrong header
    checksum, which Kafka 3.9 tolerates."""
    topic = topics(f"old-produce-v{version}-m{magic}-c{codec}")
    records = [(1_700_000_000_000 + i, b"k%d" % i, None if i == 2 else b"v%d" % i)
               for i in range(5)]
    if codec == 2 or (codec == 3 and magic == 0):
        data = _wrapped(magic, records, codec)
    else:
        data = message_set(magic, records, codec)
    for round_ in range(2):
        resp = produce_old(broker, version, topic, data)
        [t] = resp.responses
        [part] = t.partition_responses
        assert (t.name, part.index, part.error_code, part.base_offset) == (topic, 0, 0, 5 * round_)
        assert part.log_append_time_ms == -1
        assert resp.throttle_time_ms == 0
    ts = (lambda i: -1) if magic == 0 else (lambda i: 1_700_000_000_000 + i)
    expected = [(codec, n, ts(n % 5), b"k%d" % (n % 5), None if n % 5 == 2 else b"v%d" % (n % 5))
                for n in range(10)]
    assert stored(broker, topic) == expected


def _wrapped(magic, records, codec):
    """One compressed wrapper message around kafka-python's uncompressed message set, for the
    codecs kafka-python cannot write here (snappy: no library; LZ4 in format v0: Kafka
    0.8-0.9's header checksum over the magic number too, which Kafka 3.9 tolerates)."""
    import struct
    import zlib

    from minilog.broker.storage.up_convert import _xxh32_short
    from minilog.connector.compression import compress
    payload = bytearray(compress(codec, message_set(magic, records)))
    if codec == 3 and magic == 0:
        payload[6] = (_xxh32_short(bytes(payload[0:6])) >> 8) & 0xFF
    head = struct.pack(">bb", magic, codec)
    if magic == 1:
        head += struct.pack(">q", max(ts for ts, _, _ in records))
    body = head + struct.pack(">i", -1) + struct.pack(">i", len(payload)) + payload
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", len(records) - 1, len(message)) + message


def test_produce_v2_under_log_append_time_stamps_the_broker_time(broker, topics):
    import time
    topic = topics("old-produce-lat", **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    resp = produce_old(broker, 2, topic, message_set(1, [(5, b"k", b"v")]))
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == 0 and part.log_append_time_ms >= before
    [(_, _, timestamp, _, _)] = stored(broker, topic)
    assert timestamp == part.log_append_time_ms


def _two_wrappers():
    return message_set(1, [(1, b"a", b"1")], 1) + message_set(1, [(2, b"b", b"2")], 1)


def _bad_crc():
    data = bytearray(message_set(1, [(1, b"a", b"1")]))
    data[-1] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize("name, make, code", [
    ("crc", _bad_crc, 2),  # CORRUPT_MESSAGE
    ("mixed-magic", lambda: message_set(0, [(1, b"a", b"1")]) + message_set(1, [(1, b"b", b"2")]),
     87),  # INVALID_RECORD
    ("two-wrappers", _two_wrappers, 87),
    ("producer-log-append-time", lambda: message_set(1, [(-1, b"a", b"1")],
                                                     log_append_time=True), 32),
])
def test_produce_v2_refuses_what_kafka_39_refuses_and_appends_nothing(broker, topics, name,
                                                                       make, code):
    """A corrupt message, magics mixed in one message set, two compressed wrappers, a
    producer that sets LogAppendTime on a message without a time: the partition's error, the
    log unchanged."""
    topic = topics(f"old-produce-refused-{name}")
    resp = produce_old(broker, 2, topic, make())
    part = resp.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (code, -1)
    assert stored(broker, topic) == []


@pytest.mark.parametrize("version", [0, 1])
def test_offset_for_leader_epoch_v0_and_v1(broker, ten, version):
    """v0 answers only the end offset of the epoch asked; v1 adds the epoch it ended in."""
    req = request(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    resp = call(broker, ApiKey.OFFSET_FOR_LEADER_EPOCH, version, topics=[req.make(
        "topics", topic=ten, partitions=[req.make("topics", "partitions", partition=0,
                                                  leader_epoch=0)])])
    [topic] = resp.topics
    [part] = topic.partitions
    assert (topic.topic, part.partition, part.error_code, part.end_offset) == (ten, 0, 0, 10)
    assert part.leader_epoch == (-1 if version == 0 else 0)  # -1: absent from v0's answer


def test_acl_apis_v0_are_framed_as_kafka_39_frames_them(broker):
    """CreateAcls/DescribeAcls/DeleteAcls v0 (no pattern type: LITERAL) were advertised but
    not declared, so the broker closed the connection; without an authorizer each answers
    SECURITY_DISABLED in v0's fields."""
    create, delete = request(ApiKey.CREATE_ACLS), request(ApiKey.DELETE_ACLS)
    created = call(broker, ApiKey.CREATE_ACLS, 0, creations=[create.make(
        "creations", resource_type=2, resource_name="t", principal="User:a", host="*",
        operation=3, permission_type=3)])
    described = call(broker, ApiKey.DESCRIBE_ACLS, 0, resource_type_filter=1,
                     resource_name_filter=None, principal_filter=None, host_filter=None,
                     operation=1, permission_type=1)
    deleted = call(broker, ApiKey.DELETE_ACLS, 0, filters=[delete.make(
        "filters", resource_type_filter=1, resource_name_filter=None, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)])
    assert [r.error_code for r in created.results] == [54]  # SECURITY_DISABLED
    assert (described.error_code, described.resources) == (54, [])
    assert [r.error_code for r in deleted.filter_results] == [54]
