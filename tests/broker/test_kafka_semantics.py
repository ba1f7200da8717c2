"""Kafka's semantics where minilog once lost, skipped or refused acknowledged data (issue 17).

Each test drives a real broker with confluent-kafka exactly as a user would hit the defect.
"""
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec
from minilog.connector.protocol import ApiKey, RequestHeader, encode_request, request
from minilog.connector.records import encode_batch
from wire import RawConnection

DAY_MS = 24 * 3600 * 1000


def _admin(b):
    return AdminClient({"bootstrap.servers": b.bootstrap})


def _create(b, name, config=None):
    admin = _admin(b)  # referenced until the result: librdkafka stops with its handle
    admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name].result(15)


def _delete(b, name):
    admin = _admin(b)
    admin.delete_topics([name])[name].result(15)


def _produce(b, topic, records, **config):
    """Produce (key, value, timestamp) tuples; return the delivery errors, one per record."""
    p = Producer({"bootstrap.servers": b.bootstrap, **config})
    results = []
    for key, value, ts in records:
        p.produce(topic, key=key, value=value, timestamp=ts or 0,
                  on_delivery=lambda err, msg: results.append(err))
        if config.get("batch.size") == 1:
            p.flush(15)  # one record per request: each is its own batch
    assert p.flush(30) == 0
    return results


def _consume(b, topic, group, expected, timeout=30):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))
    finally:
        c.close()
    return got


def _wait_for_log(b, text, timeout=30):
    deadline = time.monotonic() + timeout
    while text not in b.log():
        assert time.monotonic() < deadline, f"{text!r} not in the broker log"
        time.sleep(0.1)


# -- 1: deleting a topic deletes its consumer groups' offsets ---------------------------------

def test_recreated_topic_is_consumed_from_its_start_by_a_group_that_committed_before(broker):
    _create(broker, "orders")
    _produce(broker, "orders", [(None, b"old-%d" % i, None) for i in range(12)])
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "billing"})
    c.commit(offsets=[TopicPartition("orders", 0, 10)], asynchronous=False)
    c.close()
    _delete(broker, "orders")
    _create(broker, "orders")
    _produce(broker, "orders", [(None, b"new-%d" % i, None) for i in range(15)])

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "billing"})
    committed = c.committed([TopicPartition("orders", 0)], timeout=15)
    c.close()
    assert committed[0].offset < 0  # no committed offset left from the deleted topic
    got = _consume(broker, "orders", "billing", 15)
    assert got == [(i, b"new-%d" % i) for i in range(15)]


def test_deleting_a_compacted_topic_removes_it_from_the_cleaner_checkpoint(make_broker):
    b = make_broker(extra=["-o", "log.cleaner.backoff.ms=100"])
    _create(b, "prices", {"cleanup.policy": "compact", "segment.bytes": "1024",
                          "min.cleanable.dirty.ratio": "0.01"})
    _produce(b, "prices", [(b"k%d" % (i % 5), b"v" * 100, None) for i in range(60)],
             **{"batch.size": 1})
    checkpoint = b.log_dir / "cleaner-offset-checkpoint"
    deadline = time.monotonic() + 30
    while not (checkpoint.exists() and "prices 0 " in checkpoint.read_text()):
        assert time.monotonic() < deadline, "the cleaner never cleaned prices-0"
        time.sleep(0.1)
    _delete(b, "prices")
    assert "prices 0 " not in checkpoint.read_text()


# -- 2: keyless records on a compacted topic are refused, never acknowledged ---------------------

@pytest.mark.parametrize("one_batch", [True, False], ids=["one-batch", "batch-per-record"])
def test_keyless_records_to_a_compacted_topic_fail_with_invalid_record(broker, one_batch):
    topic = f"compacted-{one_batch}"
    _create(broker, topic, {"cleanup.policy": "compact"})
    records = [(None if i % 10 == 0 else b"k%d" % i, b"v%d" % i, None) for i in range(100)]
    # one batch: librdkafka closes it at linger.ms, so generous for a starved machine
    config = {"linger.ms": 10000, "batch.num.messages": 1000} if one_batch else {"batch.size": 1}
    errors = _produce(broker, topic, records, **config)
    codes = [e.code() if e else None for e in errors]
    if one_batch:
        assert codes.count(KafkaError.INVALID_RECORD) == 10
        assert codes.count(KafkaError._INVALID_DIFFERENT_RECORD) == 90
    else:
        assert codes.count(KafkaError.INVALID_RECORD) == 10
        assert codes.count(None) == 90
        got = _consume(broker, topic, "compacted-reader", 90)
        assert [v for _, v in got] == [b"v%d" % i for i in range(100) if i % 10]


# -- 3: an idempotent producer whose state expired goes on writing (KIP-360) --------------------

def test_idempotent_backfill_producer_survives_the_expiry_of_its_state(make_broker):
    b = make_broker(extra=["-o", "log.retention.check.interval.ms=200"])
    _create(b, "backfill")
    two_days_ago = int(time.time() * 1000) - 2 * DAY_MS
    p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True})
    errors = []

    def send(i):
        p.produce("backfill", value=b"r%d" % i, timestamp=two_days_ago + i,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
        assert p.flush(30) == 0

    for i in range(5):
        send(i)
    _wait_for_log(b, "expired 1 idle producer id(s)")
    for i in range(5, 10):
        send(i)
    assert errors == []
    assert [v for _, v in _consume(b, "backfill", "reader", 10)] == [b"r%d" % i for i in range(10)]


# -- 4: ListOffsets MAX_TIMESTAMP after DeleteRecords ------------------------------------------

def test_max_timestamp_after_delete_records_is_the_largest_still_in_the_log(broker):
    _create(broker, "stamped")
    base = 1_700_000_000_000
    # Newest timestamps first, one batch each: the largest ones are deleted below.
    _produce(broker, "stamped", [(None, b"r%d" % i, base + 10 - i) for i in range(10)],
             **{"batch.size": 1})
    admin = _admin(broker)
    tp = TopicPartition("stamped", 0, 5)
    assert admin.delete_records([tp])[tp].result(15).low_watermark == 5
    tp = TopicPartition("stamped", 0)
    found = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(15)
    assert (found.offset, found.timestamp) == (5, base + 5)
    found = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(15)  # still connected
    assert found.offset == 10


# -- 7-12: read in Kafka's code, checked here ------------------------------------------------

def _raw_produce(conn, topic, index, acks, records):
    req = request(ApiKey.PRODUCE)
    body = req.cls(acks=acks, timeout_ms=5000, topic_data=[req.make(
        "topic_data", name=topic, partition_data=[req.make(
            "topic_data", "partition_data", index=index, records=records)])])
    if acks:
        return conn.call(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0]
    conn.corr += 1
    conn.send_raw(b"".join(encode_request(RequestHeader(ApiKey.PRODUCE, 9, conn.corr, "raw"), body)))


def _api_versions(conn):
    return conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS).cls(
        client_software_name="t", client_software_version="1")).error_code


def test_a_failed_acks0_produce_closes_the_connection_and_a_good_one_does_not(broker):
    _create(broker, "fire-and-forget")
    conn = RawConnection(broker.bootstrap)
    try:
        _raw_produce(conn, "fire-and-forget", 0, 0, encode_batch([(1000, None, b"v", [])]))
        assert _api_versions(conn) == 0  # still open: nothing failed
        _raw_produce(conn, "fire-and-forget", 7, 0, encode_batch([(1000, None, b"v", [])]))
        assert conn.closed_by_peer_within(15), "an acks=0 produce failed and nobody noticed"
    finally:
        conn.close()


def _init_pid(conn, producer_id=-1, epoch=-1):
    resp = conn.call(ApiKey.INIT_PRODUCER_ID, 4, request(ApiKey.INIT_PRODUCER_ID).cls(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=producer_id,
        producer_epoch=epoch))
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


def test_init_producer_id_with_another_producers_id_cannot_fence_it(broker):
    _create(broker, "fenced")
    conn = RawConnection(broker.bootstrap)
    try:
        pid, epoch = _init_pid(conn)
        batch = encode_batch([(1000, None, b"a", [])], producer_id=pid, producer_epoch=epoch,
                             base_sequence=0)
        assert _raw_produce(conn, "fenced", 0, -1, batch).error_code == 0
        other = _init_pid(conn, pid, epoch)  # any client may send any id
        assert other[0] != pid and other[1] == 0
        batch = encode_batch([(1000, None, b"b", [])], producer_id=pid, producer_epoch=epoch,
                             base_sequence=1)
        assert _raw_produce(conn, "fenced", 0, -1, batch).error_code == 0
    finally:
        conn.close()


def _list_offset(conn, topic, timestamp):
    req = request(ApiKey.LIST_OFFSETS)
    resp = conn.call(ApiKey.LIST_OFFSETS, 9, req.cls(replica_id=-1, topics=[req.make(
        "topics", name=topic, partitions=[req.make("topics", "partitions", partition_index=0,
                                                   timestamp=timestamp)])]))
    p = resp.topics[0].partitions[0]
    return p.error_code, p.offset, p.leader_epoch


def test_list_offsets_latest_tiered_is_minus_one_without_tiered_storage(broker):
    _create(broker, "untiered")
    _produce(broker, "untiered", [(None, b"v%d" % i, None) for i in range(3)])
    conn = RawConnection(broker.bootstrap)
    try:
        assert _list_offset(conn, "untiered", -5) == (0, -1, -1)
        assert _list_offset(conn, "untiered", -2) == (0, 0, 0)  # the epoch of the batch there
    finally:
        conn.close()


def test_offset_commit_without_generation_on_an_empty_group_is_accepted(broker):
    """Kafka's ClassicGroup.validateOffsetCommit accepts generation -1 on an empty group
    whatever member id it carries (admin tools, assign() consumers): so does minilog."""
    _create(broker, "standalone")
    conn = RawConnection(broker.bootstrap)
    req = request(ApiKey.OFFSET_COMMIT)
    try:
        resp = conn.call(ApiKey.OFFSET_COMMIT, 8, req.cls(
            group_id="standalone-group", generation_id_or_member_epoch=-1, member_id="someone",
            topics=[req.make("topics", name="standalone", partitions=[req.make(
                "topics", "partitions", partition_index=0, committed_offset=1)])]))
        assert resp.topics[0].partitions[0].error_code == 0
    finally:
        conn.close()


def test_create_topic_with_a_manual_replica_assignment(broker):
    admin = _admin(broker)
    fs = admin.create_topics([NewTopic("assigned", 2, replica_assignment=[[1], [1]])])
    fs["assigned"].result(15)
    assert len(admin.list_topics("assigned", timeout=15).topics["assigned"].partitions) == 2
    for name, assignment in [("on-nobody", [[2]]), ("twice", [[1, 1]])]:
        with pytest.raises(KafkaException) as e:
            admin.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment)])[
                name].result(15)
        assert e.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, name


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_legacy_alter_configs_replaces_the_topics_settings(broker):
    _create(broker, "altered", {"segment.ms": "3600000"})
    admin = _admin(broker)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "altered",
                              set_config={"retention.ms": "1000"})
    admin.alter_configs([resource])[resource].result(15)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "altered")])
    configs = next(iter(described.values())).result(15)
    assert configs["retention.ms"].value == "1000"
    assert configs["segment.ms"].value != "3600000"  # left out: back to the default
