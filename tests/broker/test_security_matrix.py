"""Every security protocol and SASL mechanism, with three clients we did not all write.

One broker listens with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512 on both SASL listeners); each client produces a record over each combination
and reads it back over the same connection settings.
"""
import uuid

import kafka
import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from security_tools import (
    COMBINATIONS,
    IDS,
    kafka_python_settings,
    librdkafka_settings,
)
from waiting import wait_until

from minilog.connector.client import Consumer, Producer, TopicPartition



def _topic():
    return f"sec-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("protocol,mechanism", COMBINATIONS, ids=IDS)
def test_confluent_kafka_produces_and_consumes(secure_broker, protocol, mechanism):
    conf, topic = librdkafka_settings(secure_broker, protocol, mechanism), _topic()
    producer = CKProducer(conf)
    producer.produce(topic, b"over " + protocol.encode())
    assert producer.flush(60) == 0
    consumer = CKConsumer({**conf, "group.id": "g-" + topic, "enable.auto.commit": False})
    try:
        consumer.assign([CKTopicPartition(topic, 0, 0)])
        msg = wait_until(lambda: _good(consumer.poll(1.0)), 60, "the record back")
        assert msg.value() == b"over " + protocol.encode()
    finally:
        consumer.close()


def _good(msg):
    return msg if msg is not None and msg.error() is None else None


@pytest.mark.parametrize("protocol,mechanism", COMBINATIONS, ids=IDS)
def test_kafka_python_produces_and_consumes(secure_broker, protocol, mechanism):
    conf, topic = kafka_python_settings(secure_broker, protocol, mechanism), _topic()
    producer = kafka.KafkaProducer(**conf)
    try:
        assert producer.send(topic, b"kp").get(60).offset == 0
    finally:
        producer.close()
    consumer = kafka.KafkaConsumer(**conf, consumer_timeout_ms=60000)
    try:
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        assert next(iter(consumer)).value == b"kp"
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol,mechanism", COMBINATIONS, ids=IDS)
def test_minilog_client_produces_and_consumes(secure_broker, protocol, mechanism):
    conf, topic = librdkafka_settings(secure_broker, protocol, mechanism), _topic()
    with Producer(conf) as producer:
        assert producer.send(topic, b"ml").result(60).offset == 0
    with Consumer({**conf, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        records = wait_until(lambda: consumer.poll(1.0), 60, "the record back")
        assert [r.value for r in records] == [b"ml"]


def test_metadata_names_the_listener_the_client_came_through(secure_broker):
    """A client on the SASL_SSL port must be sent back there, not to the PLAINTEXT port."""
    conf = librdkafka_settings(secure_broker, "SASL_SSL", "SCRAM-SHA-512")
    producer = CKProducer(conf)
    brokers = producer.list_topics(timeout=60).brokers
    assert [str(b) for b in brokers.values()] == [f"{secure_broker.bootstrap_for('SASL_SSL')}/1"]


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_a_consumer_group_over_tls_reads_megabytes(secure_broker, protocol):
    """Large fetches leave a plain socket by sendfile, a TLS one by copy; and the group
    coordinator is named at the address of the listener the client came through."""
    conf, topic = librdkafka_settings(secure_broker, protocol, "SCRAM-SHA-512"), _topic()
    producer = CKProducer({**conf, "linger.ms": 50})
    value = bytes(range(256)) * 4
    for _ in range(4000):
        producer.produce(topic, value)
    assert producer.flush(60) == 0
    consumer = CKConsumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    got = []
    try:
        consumer.subscribe([topic])
        wait_until(lambda: got.extend(m for m in consumer.consume(1000, 1.0)
                                      if m.error() is None) or len(got) >= 4000,
                   120, "4000 records of 1 KiB")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert len(got) == 4000 and all(m.value() == value for m in got)
