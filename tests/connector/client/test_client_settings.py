"""Configs written for other Kafka clients work as they are: the Java client's and librdkafka's
setting names are implemented or accepted with one warning; a typo still raises with a hint.

librdkafka, through confluent-kafka, is the reference for its own names: it refuses a name it
does not have ("No such configuration property"). No Java client runs on these machines, so
the Java names are checked by a config as Spark's Kafka options pass them, end to end, and
the bytes its serializer class names write are compared with the Java classes' formats.
"""
import logging
import struct
import time

import confluent_kafka
import pytest
from clienttools import confluent_consume, make_topic
from minilog.connector.client import ConfigError, Consumer, Producer
from minilog.connector.client.config import Config
from minilog.connector.client.foreign_settings import ALIASES, LIBRDKAFKA

pytestmark = pytest.mark.timeout(120)


def _librdkafka_knows(name):
    try:
        confluent_kafka.Producer({name: "\x01not-a-value"})
    except (confluent_kafka.KafkaException, TypeError, ValueError) as e:
        return "No such configuration property" not in str(e)
    return True


def test_every_librdkafka_name_accepted_is_one_librdkafka_has():
    assert not [n for n in sorted(LIBRDKAFKA | set(ALIASES)) if not _librdkafka_knows(n)]
    for name in LIBRDKAFKA:
        Config("producer", {"bootstrap.servers": "127.0.0.1:1", name: "x"})
        Config("consumer", {"bootstrap.servers": "127.0.0.1:1", name: "x"})


def test_a_name_no_client_has_raises_with_a_hint():
    assert not _librdkafka_knows("queue.bufering.max.ms")
    with pytest.raises(ConfigError, match="did you mean 'queue.buffering.max.ms'"):
        Config("producer", {"bootstrap.servers": "127.0.0.1:1", "queue.bufering.max.ms": 5})
    with pytest.raises(ConfigError, match="did you mean 'linger.ms'"):
        Config("consumer", {"bootstrap.servers": "127.0.0.1:1", "linger.mss": 5})


def test_settings_without_effect_are_named_in_one_warning(caplog):
    settings = {"bootstrap.servers": "127.0.0.1:1", "enable.partition.eof": True,
                "receive.buffer.bytes": 65536, "send.buffer.bytes": 65536,
                "statistics.interval.ms": 0}
    with caplog.at_level(logging.WARNING, logger="minilog.client"):
        for _ in range(3):  # as Spark opens a client per task
            Config("consumer", settings)
    warned = [r.getMessage() for r in caplog.records if "no effect" in r.getMessage()]
    assert len(warned) == 1
    assert all(n in warned[0] for n in ("enable.partition.eof", "receive.buffer.bytes",
                                        "send.buffer.bytes", "statistics.interval.ms"))


def test_the_other_roles_settings_are_validated_too():
    with pytest.raises(ConfigError, match="acks must be 0, 1 or all"):
        Config("consumer", {"bootstrap.servers": "127.0.0.1:1", "acks": "banana"})
    with pytest.raises(ConfigError, match="auto.offset.reset"):
        Config("producer", {"bootstrap.servers": "127.0.0.1:1", "auto.offset.reset": "first"})
    shared = {"bootstrap.servers": "127.0.0.1:1", "acks": "all", "group.id": "g",
              "transactional.id": "tx"}  # a producer setting, ignored by the consumer
    assert Config("consumer", shared)["group.id"] == "g"


def test_a_confluent_kafka_config_works_unchanged(broker):
    """One dict of librdkafka names drives confluent-kafka and minilog alike; librdkafka's
    names for settings minilog implements take effect."""
    topic = make_topic(broker.bootstrap, 1)
    producer = {"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 45000,
                "queue.buffering.max.ms": 2, "compression.codec": "gzip",
                "request.required.acks": "all", "message.send.max.retries": 7,
                "socket.keepalive.enable": True, "statistics.interval.ms": 0,
                "queue.buffering.max.messages": 100000, "api.version.request": True}
    theirs = confluent_kafka.Producer(producer)
    for i in range(5):
        theirs.produce(topic, b"c%d" % i)
    assert theirs.flush(30) == 0
    with Producer(producer) as ours:
        assert (ours.config["delivery.timeout.ms"], ours.config["linger.ms"],
                ours.config["compression.type"], ours.config["acks"],
                ours.config["retries"]) == (45000, 2, "gzip", -1, 7)
        for i in range(5):
            ours.send(topic, b"m%d" % i)
        assert ours.flush(30) == 0
    consumer = {"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                "enable.partition.eof": False, "fetch.wait.max.ms": 100,
                "fetch.message.max.bytes": 65536, "auto.offset.reset": "smallest",
                "enable.auto.offset.store": True, "topic.metadata.refresh.interval.ms": 2000}
    with Consumer(consumer) as c:
        assert (c.config["fetch.max.wait.ms"], c.config["max.partition.fetch.bytes"],
                c.config["metadata.max.age.ms"]) == (100, 65536, 2000)
        c.subscribe([topic])
        got, deadline = [], time.monotonic() + 60
        while len(got) < 10 and time.monotonic() < deadline:
            got += c.poll(0.5)
    assert [r.value for r in got] == [b"c%d" % i for i in range(5)] + [b"m%d" % i for i in range(5)]


def test_a_java_client_config_as_spark_passes_it_works(broker):
    """Java setting names, serializer and assignor class names: the bytes written are those of
    Kafka's IntegerSerializer (4 bytes, big-endian) and StringSerializer (UTF-8)."""
    topic = make_topic(broker.bootstrap, 1)
    java = {"bootstrap.servers": broker.bootstrap, "receive.buffer.bytes": 65536,
            "send.buffer.bytes": 131072, "client.dns.lookup": "use_all_dns_ips",
            "ssl.endpoint.identification.algorithm": "https", "interceptor.classes": "",
            "metrics.recording.level": "INFO", "connections.max.idle.ms": 540000}
    serde = "org.apache.kafka.common.serialization."
    with Producer({**java, "key.serializer": serde + "StringSerializer",
                   "value.serializer": serde + "IntegerSerializer"}) as p:
        for i in (5, -1, 70000):
            p.send(topic, i, key="clé")
        assert p.flush(30) == 0
    raw = confluent_consume(broker.bootstrap, topic, [0], 3)
    assert [(m.key(), m.value()) for m in raw] == \
        [("clé".encode(), struct.pack(">i", i)) for i in (5, -1, 70000)]
    with Consumer({**java, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                   "key.deserializer": serde + "StringDeserializer",
                   "value.deserializer": serde + "IntegerDeserializer",
                   "partition.assignment.strategy":
                       "org.apache.kafka.clients.consumer.RangeAssignor"}) as c:
        assert c.config["partition.assignment.strategy"] == ["range"]
        c.subscribe([topic])
        got, deadline = [], time.monotonic() + 60
        while len(got) < 3 and time.monotonic() < deadline:
            got += c.poll(0.5)
    assert [(r.key, r.value) for r in got] == [("clé", 5), ("clé", -1), ("clé", 70000)]


def test_an_unknown_java_serializer_class_is_refused():
    with pytest.raises(ConfigError, match="not a callable nor a Java serializer"):
        Config("producer", {"bootstrap.servers": "127.0.0.1:1",
                            "value.serializer": "io.confluent.kafka.serializers.KafkaAvroSerializer"})
