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
       *((ApiKey.DESCRIBE_LOG_DIRS, v) for v in range(5))]


@pytest.mark.parametrize("api, version", OLD)
@pytest.mark.parametrize("kind", ["Request", "Response"])
def test_the_codec_declares_each_old_version_as_kafka_does(api, version, kind):
    schema = (request if kind == "Request" else response)(api)
    assert codec_fields(schema, version) == kafka_fields(schema.name, version)


def test_api_versions_advertises_kafka_39s_minimum_for_each_old_version(broker):
    conn = RawConnection(broker.bootstrap)
    try:
        resp = conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS).cls(
            client_software_name="old", client_software_version="1"))
    finally:
        conn.close()
    versions = {k.api_key: k.min_version for k in resp.api_keys}
    assert {api: versions[api] for api, _ in OLD} == {api: 0 for api, _ in OLD}


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
