"""The oldest versions of the group, coordinator and metadata APIs, as Kafka 3.9 answers them:
a classic group's whole life at v0 (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
DescribeGroups, ListGroups, LeaveGroup), OffsetCommit v0-v1 (v1's commit timestamp is what
retention counts from), OffsetFetch v0, Metadata v0, ApiVersions v0; then kafka-python pinned
to old broker versions producing (message formats v0/v1, Produce v0-v2) and consuming in a
group. Requests are sent with the codec on a bare connection, answers checked field by field
against what each version carries."""
import time

import pytest
from brokers import MinilogBroker
from waiting import kafka_python_to_end, wait_until
from wire import RawConnection

from minilog.connector.protocol import ApiKey, request

RETENTION_MINUTES = 5


@pytest.fixture(scope="module")
def old_broker():
    """No initial rebalance delay (a v0 join answers at once); offsets expire after five
    minutes, checked every 200 ms."""
    b = MinilogBroker(extra=["-o", "group.initial.rebalance.delay.ms=0",
                             "-o", f"offsets.retention.minutes={RETENTION_MINUTES}",
                             "-o", "offsets.retention.check.interval.ms=200"]).start()
    yield b
    b.cleanup()


@pytest.fixture
def conn(old_broker):
    c = RawConnection(old_broker.bootstrap)
    c.sock.settimeout(30)
    yield c
    c.close()


def call(conn, api, version, **body):
    return conn.call(api, version, request(api).cls(**body))


def make(api, *path, **fields):
    return request(api).make(*path, **fields)


@pytest.fixture(scope="module")
def topic(old_broker):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": old_broker.bootstrap})
    admin.create_topics([NewTopic("old-groups", 2, 1)])["old-groups"].result(10)
    return "old-groups"


def test_a_classic_group_lives_its_whole_life_at_v0(old_broker, conn, topic):
    port = old_broker.port
    found = call(conn, ApiKey.FIND_COORDINATOR, 0, key="g-v0")
    assert (found.error_code, found.node_id, found.host, found.port) == (0, 1, "127.0.0.1", port)

    joined = call(conn, ApiKey.JOIN_GROUP, 0, group_id="g-v0", session_timeout_ms=30000,
                  member_id="", protocol_type="consumer", protocols=[
                      make(ApiKey.JOIN_GROUP, "protocols", name="range", metadata=b"sub")])
    me = joined.member_id
    assert (joined.error_code, joined.generation_id, joined.protocol_name, joined.leader) == (
        0, 1, "range", me)
    assert [(m.member_id, m.metadata) for m in joined.members] == [(me, b"sub")]

    synced = call(conn, ApiKey.SYNC_GROUP, 0, group_id="g-v0", generation_id=1, member_id=me,
                  assignments=[make(ApiKey.SYNC_GROUP, "assignments", member_id=me,
                                    assignment=b"mine")])
    assert (synced.error_code, synced.assignment) == (0, b"mine")
    assert call(conn, ApiKey.HEARTBEAT, 0, group_id="g-v0", generation_id=1,
                member_id=me).error_code == 0

    committed = call(conn, ApiKey.OFFSET_COMMIT, 1, group_id="g-v0",
                     generation_id_or_member_epoch=1, member_id=me, topics=[
                         make(ApiKey.OFFSET_COMMIT, "topics", name=topic, partitions=[
                             make(ApiKey.OFFSET_COMMIT, "topics", "partitions", partition_index=0,
                                  committed_offset=7, commit_timestamp=-1,
                                  committed_metadata="seven")])])
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in committed.topics] == [(topic, [(0, 0)])]
    assert offsets_v0(conn, "g-v0", topic, [0, 1]) == [(0, 7, "seven", 0), (1, -1, "", 0)]

    [group] = call(conn, ApiKey.DESCRIBE_GROUPS, 0, groups=["g-v0"]).groups
    assert (group.error_code, group.group_id, group.group_state, group.protocol_type,
            group.protocol_data) == (0, "g-v0", "Stable", "consumer", "range")
    [member] = group.members
    assert (member.member_id, member.client_id, member.client_host, member.member_metadata,
            member.member_assignment) == (me, "raw", "/127.0.0.1", b"sub", b"mine")
    listed = call(conn, ApiKey.LIST_GROUPS, 0)
    assert listed.error_code == 0
    assert ("g-v0", "consumer") in [(g.group_id, g.protocol_type) for g in listed.groups]

    assert call(conn, ApiKey.LEAVE_GROUP, 0, group_id="g-v0", member_id=me).error_code == 0
    [group] = call(conn, ApiKey.DESCRIBE_GROUPS, 0, groups=["g-v0"]).groups
    assert (group.group_state, group.members) == ("Empty", [])


def offsets_v0(conn, group, topic, partitions):
    """[(partition, offset, metadata, error)] from OffsetFetch v0 (no top-level error)."""
    fetched = call(conn, ApiKey.OFFSET_FETCH, 0, group_id=group, topics=[
        make(ApiKey.OFFSET_FETCH, "topics", name=topic, partition_indexes=partitions)])
    [t] = fetched.topics
    assert t.name == topic
    return [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for p in t.partitions]


def commit_standalone(conn, version, group, topic, partition, offset, timestamp=-1):
    """OffsetCommit v0 or v1 outside any generation (offset storage only)."""
    part = make(ApiKey.OFFSET_COMMIT, "topics", "partitions", partition_index=partition,
                committed_offset=offset, commit_timestamp=timestamp, committed_metadata="")
    resp = call(conn, ApiKey.OFFSET_COMMIT, version, group_id=group,
                generation_id_or_member_epoch=-1, member_id="", topics=[
                    make(ApiKey.OFFSET_COMMIT, "topics", name=topic, partitions=[part])])
    return resp.topics[0].partitions[0].error_code


def test_offset_commit_v1s_timestamp_is_what_retention_counts_from(conn, topic):
    """Kafka 3.9 stores v1's explicit commit timestamp as the commit's time (-1: now): a
    commit stamped twice the retention ago expires at the next check, one stamped now and a
    v0 commit (no timestamp) stay."""
    long_ago = int(time.time() * 1000) - 2 * RETENTION_MINUTES * 60_000
    assert commit_standalone(conn, 1, "g-v1-ts", topic, 0, 11, timestamp=long_ago) == 0
    assert commit_standalone(conn, 1, "g-v1-ts", topic, 1, 12) == 0
    assert commit_standalone(conn, 0, "g-v0-commit", topic, 0, 13) == 0
    wait_until(lambda: offsets_v0(conn, "g-v1-ts", topic, [0, 1]) == [(0, -1, "", 0),
                                                                       (1, 12, "", 0)],
               what="the commit stamped long ago to expire")
    assert offsets_v0(conn, "g-v0-commit", topic, [0]) == [(0, 13, "", 0)]


def test_metadata_v0_and_api_versions_v0(old_broker, conn, topic):
    """Metadata v0: brokers without rack, no controller or cluster id, an empty topic list
    asks for every topic. ApiVersions v0: no throttle time."""
    meta = call(conn, ApiKey.METADATA, 0, topics=[])
    assert [(b.node_id, b.host, b.port) for b in meta.brokers] == [(1, "127.0.0.1",
                                                                     old_broker.port)]
    by_name = {t.name: t for t in meta.topics}
    mine = by_name[topic]
    assert mine.error_code == 0
    assert sorted((p.partition_index, p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes)
                  for p in mine.partitions) == [(0, 0, 1, [1], [1]), (1, 0, 1, [1], [1])]
    versions = call(conn, ApiKey.API_VERSIONS, 0)
    assert versions.error_code == 0
    assert {k.api_key: k.min_version for k in versions.api_keys}[int(ApiKey.PRODUCE)] == 0


@pytest.mark.parametrize("api_version, compression", [
    ((0, 9), None), ((0, 9), "gzip"), ((0, 10, 0), "lz4"), ((0, 10, 1), None),
    ((0, 10, 1), "gzip"), ((0, 11), None)])
def test_kafka_python_pinned_to_an_old_broker_version_produces_and_consumes_in_a_group(
        old_broker, api_version, compression):
    """kafka-python at (0, 9) writes message format v0 with Produce v1 and reads Fetch v1;
    (0, 10, x) format v1 with Produce v2, Fetch v2-v3; (0, 11) format v2 with Produce v3.
    Every record comes back with its key and value at consecutive offsets, and the group's
    commit is read back."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    name = f"kp-{'-'.join(map(str, api_version))}-{compression}"
    producer = KafkaProducer(bootstrap_servers=old_broker.bootstrap, api_version=api_version,
                             compression_type=compression, linger_ms=5,
                             request_timeout_ms=20000, delivery_timeout_ms=30000)
    futures = [producer.send(name, key=b"k%d" % i, value=b"v%d" % i, partition=0)
               for i in range(30)]
    producer.flush(30)
    assert [f.get(30).offset for f in futures] == list(range(30))
    producer.close(10)
    consumer = KafkaConsumer(name, bootstrap_servers=old_broker.bootstrap,
                             api_version=api_version, group_id=f"g-{name}",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             # kafka-python's default of 10 s lapses on a busy machine: the
                             # group rebalances, the assignment goes, and a commit of the
                             # consumed offsets commits nothing
                             session_timeout_ms=30000)
    try:
        def assigned():
            consumer.poll(100)  # joins the group; what it reads is read again from the start
            return consumer.assignment()
        wait_until(assigned, what="kafka-python's group assignment", interval=0)
        consumer.seek_to_beginning()
        records = kafka_python_to_end(consumer)
        assert [(r.offset, r.key, r.value) for r in records] == [
            (i, b"k%d" % i, b"v%d" % i) for i in range(30)]
        tp = TopicPartition(name, 0)
        assert consumer.position(tp) == 30
        consumer.commit({tp: OffsetAndMetadata(30, "", -1)})  # raises if the group moved on
        assert consumer.committed(tp) == 30
    finally:
        consumer.close()


@pytest.mark.parametrize("fallback, codec", [
    ("0.9.0", "none"), ("0.9.0", "gzip"), ("0.9.0", "snappy"), ("0.9.0", "lz4"),
    ("0.8.2", "none")])
def test_librdkafka_without_api_versions_produces_and_consumes_as_to_an_old_broker(
        old_broker, fallback, codec):
    """confluent-kafka with `api.version.request=false` speaks what `broker.version.fallback`
    had (librdkafka takes only 0.8.x and 0.9.0 there: from 0.10 on it asks ApiVersions
    anyway): message format v0 with Produce v0/v1 (LZ4 with Kafka 0.8's frame checksum),
    Fetch v0/v1, ListOffsets v0; 0.9.0 consumes in a group with the v0 group APIs, 0.8.2 by
    assignment."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    name = f"rdk-{fallback}-{codec}"
    old = {"bootstrap.servers": old_broker.bootstrap, "api.version.request": False,
           "broker.version.fallback": fallback}
    producer = Producer({**old, "compression.codec": codec, "linger.ms": 5,
                         "enable.idempotence": False})
    for i in range(30):
        producer.produce(name, key=b"k%d" % i, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    group = fallback != "0.8.2"
    consumer = Consumer({**old, "group.id": f"g-{name}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        if group:
            consumer.subscribe([name])
        else:
            consumer.assign([TopicPartition(name, 0, 0)])
        records = []

        def read():
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                records.append((m.offset(), m.key(), m.value()))
            return len(records) >= 30
        wait_until(read, what=f"30 records through librdkafka at {fallback}", interval=0)
        assert records == [(i, b"k%d" % i, b"v%d" % i) for i in range(30)]
        if group:
            consumer.commit(asynchronous=False)
            [tp] = consumer.committed([TopicPartition(name, 0)], timeout=30)
            assert tp.offset == 30
    finally:
        consumer.close()
