"""Topic-level limits a producer meets at the wire: a per-topic `max.message.bytes`, set when
the topic is created or altered later, and a broker that does not create unknown topics.

Checked through confluent-kafka and kafka-python, which report the broker's error codes.
"""
import kafka
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from minilog.connector.protocol import ApiKey, ErrorCode, request
from wire import RawConnection

pytestmark = pytest.mark.timeout(120)
SMALL, LARGE = b"s" * 1000, b"L" * 4000  # around a limit of 2048 bytes per batch


def _admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def _create(bootstrap, topic, config=None):
    admin = _admin(bootstrap)  # must outlive the future
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(15)


def _alter(bootstrap, topic, op, value=None):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", value, incremental_operation=op)])
    admin = _admin(bootstrap)
    admin.incremental_alter_configs([res])[res].result(15)


def _confluent_outcomes(bootstrap, topic, values, **extra):
    """The delivery error code (None when written) of each value, sent one per batch."""
    outcomes = {}
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.size": 8192, **extra})
    for i, v in enumerate(values):
        p.produce(topic, v, on_delivery=lambda err, _, i=i: outcomes.__setitem__(
            i, err and err.code()))
        p.flush(30)
    assert p.flush(30) == 0
    return [outcomes[i] for i in range(len(values))]


def _kafka_python_outcome(bootstrap, topic, value):
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, retries=0)
    try:
        p.send(topic, value).get(30)
        return None
    except kafka.errors.KafkaError as e:
        return type(e)
    finally:
        p.close(10)


def _stored_values(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "limits",
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        values = []
        while True:
            m = c.poll(30)
            assert m is not None, "no end of partition reached"
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return values
            values.append(m.value())
    finally:
        c.close()


TOO_LARGE = KafkaError.MSG_SIZE_TOO_LARGE  # the broker's MESSAGE_TOO_LARGE, as librdkafka names it


def test_max_message_bytes_given_at_creation_is_enforced(broker):
    _create(broker.bootstrap, "limited", {"max.message.bytes": "2048"})
    _create(broker.bootstrap, "unlimited")
    assert _confluent_outcomes(broker.bootstrap, "limited", [SMALL, LARGE, SMALL]) == \
        [None, TOO_LARGE, None]
    assert _kafka_python_outcome(broker.bootstrap, "limited", LARGE) is \
        kafka.errors.MessageSizeTooLargeError
    assert _confluent_outcomes(broker.bootstrap, "unlimited", [LARGE]) == [None]
    assert _stored_values(broker.bootstrap, "limited") == [SMALL, SMALL]


def test_max_message_bytes_altered_later_is_enforced_then_lifted(broker):
    _create(broker.bootstrap, "altered")
    assert _confluent_outcomes(broker.bootstrap, "altered", [LARGE]) == [None]
    _alter(broker.bootstrap, "altered", AlterConfigOpType.SET, "2048")
    assert _confluent_outcomes(broker.bootstrap, "altered", [LARGE, SMALL]) == [TOO_LARGE, None]
    assert _kafka_python_outcome(broker.bootstrap, "altered", LARGE) is \
        kafka.errors.MessageSizeTooLargeError
    _alter(broker.bootstrap, "altered", AlterConfigOpType.DELETE)
    assert _confluent_outcomes(broker.bootstrap, "altered", [LARGE]) == [None]
    assert _stored_values(broker.bootstrap, "altered") == [LARGE, SMALL, LARGE]


def test_auto_create_disabled_refuses_unknown_topics(make_broker):
    b = make_broker(extra=["-o", "auto.create.topics.enable=false"])
    req = request(ApiKey.METADATA)
    conn = RawConnection(b.bootstrap)
    try:
        asked = conn.call(ApiKey.METADATA, 9, req.cls(
            topics=[req.make("topics", name="nowhere")], allow_auto_topic_creation=True))
        assert [(t.name, t.error_code) for t in asked.topics] == \
            [("nowhere", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    finally:
        conn.close()
    # confluent-kafka's producer asks for auto-creation; the record fails instead of landing
    assert _confluent_outcomes(b.bootstrap, "nowhere", [SMALL], **{
        "topic.metadata.propagation.max.ms": 1000}) == [KafkaError.UNKNOWN_TOPIC_OR_PART]
    # kafka-python's producer waits for the topic's metadata, which never comes
    p = kafka.KafkaProducer(bootstrap_servers=b.bootstrap, max_block_ms=2000)
    try:
        with pytest.raises(kafka.errors.KafkaTimeoutError):
            p.send("nowhere", SMALL).get(30)
    finally:
        p.close(10)
    assert "nowhere" not in _admin(b.bootstrap).list_topics(timeout=15).topics
    assert not list(b.log_dir.glob("nowhere-*"))
    _create(b.bootstrap, "somewhere")  # explicit creation still works
    assert _confluent_outcomes(b.bootstrap, "somewhere", [SMALL]) == [None]
