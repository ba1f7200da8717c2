"""Bad input on the wire: each case gets Kafka's error code or a closed connection, while the
broker keeps serving other clients and stored data stays intact."""
import struct

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from minilog.connector import batch
from minilog.connector.protocol import ApiKey, ErrorCode, decode_response, request
from wire import RawConnection


def _produce_body(topic, partition, records):
    req = request(ApiKey.PRODUCE)
    return req.cls(acks=-1, timeout_ms=5000, topic_data=[req.make(
        "topic_data", name=topic, partition_data=[req.make("topic_data", "partition_data",
                                                           index=partition, records=records)])])


def _produce_error(conn, topic, records, version=9):
    resp = conn.call(ApiKey.PRODUCE, version, _produce_body(topic, 0, records))
    return resp.responses[0].partition_responses[0].error_code


@pytest.fixture(scope="module")
def topic(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("guarded", 1, 1)])["guarded"].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("guarded", value=b"ok-%d" % i)
    assert p.flush(10) == 0
    return "guarded"


def _still_serving(broker):
    conn = RawConnection(broker.bootstrap)
    resp = conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS).cls(
        client_software_name="t", client_software_version="1"))
    conn.close()
    return resp.error_code == 0


def _end_offset(broker, topic):
    conn = RawConnection(broker.bootstrap)
    req = request(ApiKey.LIST_OFFSETS)
    body = req.cls(replica_id=-1, topics=[req.make("topics", name=topic, partitions=[
        req.make("topics", "partitions", partition_index=0, timestamp=-1)])])
    resp = conn.call(ApiKey.LIST_OFFSETS, 5, body)
    conn.close()
    return resp.topics[0].partitions[0].offset


def _good_batch(n=3):
    return batch.build(b"\x00" * 10 * n, n, n - 1, 1000, 1000)


def test_bad_crc_is_corrupt_message(broker, topic):
    data = bytearray(_good_batch())
    data[-1] ^= 0xFF
    conn = RawConnection(broker.bootstrap)
    assert _produce_error(conn, topic, bytes(data)) == ErrorCode.CORRUPT_MESSAGE
    assert _end_offset(broker, topic) == 10


def test_record_count_not_matching_last_offset_delta_is_invalid_record(broker, topic):
    bad = batch.build(b"\x00" * 30, 3, 5, 1000, 1000)
    conn = RawConnection(broker.bootstrap)
    assert _produce_error(conn, topic, bad) == ErrorCode.INVALID_RECORD
    assert _end_offset(broker, topic) == 10


def test_control_batch_from_a_client_is_invalid_record(broker, topic):
    control = batch.build(b"\x00" * 10, 1, 0, 1000, 1000, attributes=batch.CONTROL,
                          producer_id=7, producer_epoch=0)
    conn = RawConnection(broker.bootstrap)
    assert _produce_error(conn, topic, control) == ErrorCode.INVALID_RECORD
    assert _end_offset(broker, topic) == 10


def test_truncated_batch_is_corrupt_message(broker, topic):
    conn = RawConnection(broker.bootstrap)
    assert _produce_error(conn, topic, _good_batch()[:-5]) == ErrorCode.CORRUPT_MESSAGE


def test_batch_larger_than_message_max_bytes_is_rejected(broker, topic):
    big = batch.build(b"x" * (1100 * 1024), 1, 0, 1000, 1000)
    conn = RawConnection(broker.bootstrap)
    assert _produce_error(conn, topic, big) == ErrorCode.MESSAGE_TOO_LARGE
    assert _end_offset(broker, topic) == 10


def test_invalid_acks_is_invalid_required_acks(broker, topic):
    conn = RawConnection(broker.bootstrap)
    body = _produce_body(topic, 0, _good_batch())
    body.acks = 2
    resp = conn.call(ApiKey.PRODUCE, 9, body)
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS


def test_produce_to_missing_partition_is_unknown_topic_or_partition(broker, topic):
    conn = RawConnection(broker.bootstrap)
    resp = conn.call(ApiKey.PRODUCE, 9, _produce_body(topic, 7, _good_batch()))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_unknown_api_key_closes_only_that_connection(broker, topic):
    conn = RawConnection(broker.bootstrap)
    conn.send_raw(struct.pack(">ihhi", 10, 999, 0, 1) + struct.pack(">h", -1))
    assert conn.is_closed_by_peer()
    assert _still_serving(broker)


def test_unsupported_version_closes_connection(broker, topic):
    conn = RawConnection(broker.bootstrap)
    conn.send_raw(struct.pack(">ihhi", 10, int(ApiKey.PRODUCE), 99, 1) + struct.pack(">h", -1))
    assert conn.is_closed_by_peer()
    assert _still_serving(broker)


def test_unsupported_api_versions_version_gets_v0_answer_listing_versions(broker):
    conn = RawConnection(broker.bootstrap)
    conn.send_raw(struct.pack(">ihhi", 10, int(ApiKey.API_VERSIONS), 99, 7) + struct.pack(">h", -1))
    frame = conn.recv_frame()
    resp = decode_response(ApiKey.API_VERSIONS, 0, frame)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert any(k.api_key == ApiKey.API_VERSIONS and k.max_version >= 3 for k in resp.api_keys)


def test_oversized_frame_closes_connection(broker):
    conn = RawConnection(broker.bootstrap)
    conn.send_raw(struct.pack(">i", 500 * 1024 * 1024) + b"\x00" * 100)
    assert conn.is_closed_by_peer()
    assert _still_serving(broker)


def test_garbage_request_body_closes_connection(broker, topic):
    conn = RawConnection(broker.bootstrap)
    body = struct.pack(">hhi", int(ApiKey.PRODUCE), 9, 1) + b"\x00\x03raw" + b"\xff" * 5
    conn.send_raw(struct.pack(">i", len(body)) + body)
    assert conn.is_closed_by_peer()
    assert _still_serving(broker)
    assert _end_offset(broker, topic) == 10


def test_truncated_frame_then_disconnect_leaves_broker_serving(broker, topic):
    conn = RawConnection(broker.bootstrap)
    conn.send_raw(struct.pack(">i", 100) + b"\x00" * 20)
    conn.close()
    assert _still_serving(broker)


@pytest.mark.parametrize("name,why", [
    ("bad/name", "characters"), ("x" * 250, "249"), ("__internal", "reserved"), ("..", "reserved")])
def test_invalid_topic_names_are_rejected(broker, name, why):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(10)
    assert e.value.args[0].code() == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert why in e.value.args[0].str()


def test_non_positive_partition_count_is_invalid_partitions(broker):
    conn = RawConnection(broker.bootstrap)
    req = request(ApiKey.CREATE_TOPICS)
    body = req.cls(topics=[req.make("topics", name="neg", num_partitions=-5, replication_factor=1)],
                   timeout_ms=5000)
    resp = conn.call(ApiKey.CREATE_TOPICS, 5, body)
    assert resp.topics[0].error_code == ErrorCode.INVALID_PARTITIONS


def test_duplicate_topic_and_shrinking_partitions_are_errors(broker, topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    assert e.value.args[0].code() == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as e:
        admin.create_partitions([NewPartitions(topic, 1)])[topic].result(10)
    assert e.value.args[0].code() == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic("rf3", 1, 3)])["rf3"].result(10)
    assert e.value.args[0].code() == ErrorCode.INVALID_REPLICATION_FACTOR
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic("badcfg", 1, 1, config={"retention.ms": "soon"})])["badcfg"].result(10)
    assert e.value.args[0].code() == ErrorCode.INVALID_CONFIG
