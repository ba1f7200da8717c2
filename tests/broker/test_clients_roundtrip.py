"""Unmodified Kafka clients against a real minilog broker: create, produce, consume, list offsets."""
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import kafka_python_to_end

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N_PER_CODEC = 60


def _create(bootstrap, name, partitions=3, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    futures[name].result(15)


def _consume_all(bootstrap, topic, partitions, expected, timeout=30):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert m.error() is None, m.error()
        got.append(m)
    c.close()
    return got


@pytest.fixture(scope="module")
def produced(broker):
    """Records written with every codec by an idempotent acks=all confluent-kafka producer."""
    _create(broker.bootstrap, "orders")
    sent = []
    for codec in CODECS:
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                      "enable.idempotence": True, "compression.type": codec, "linger.ms": 5})
        errors = []
        for i in range(N_PER_CODEC):
            key = f"{codec}-key-{i % 7}".encode()
            value = f"{codec}-value-{i}".encode() * (1 + i % 5)
            headers = [("codec", codec.encode()), ("n", str(i).encode()), ("empty", None)]
            ts = 1_700_000_000_000 + len(sent)
            p.produce("orders", key=key, value=value, headers=headers, timestamp=ts,
                      on_delivery=lambda err, msg, errors=errors: errors.append(err) if err else None)
            sent.append((key, value, headers, ts))
        assert p.flush(20) == 0
        assert errors == []
    return sent


def test_confluent_consumer_reads_back_every_record_in_order(broker, produced):
    got = _consume_all(broker.bootstrap, "orders", 3, len(produced))
    assert len(got) == len(produced)
    by_key = {}
    for m in got:
        by_key.setdefault(m.key(), []).append(m)
    sent_by_key = {}
    for key, value, headers, ts in produced:
        sent_by_key.setdefault(key, []).append((value, headers, ts))
    for key, msgs in by_key.items():
        assert len({m.partition() for m in msgs}) == 1  # one key, one partition
        assert [m.value() for m in msgs] == [v for v, _, _ in sent_by_key[key]]
        assert [m.timestamp()[1] for m in msgs] == [ts for _, _, ts in sent_by_key[key]]
        assert [list(m.headers()) for m in msgs] == [h for _, h, _ in sent_by_key[key]]
    for p in range(3):
        offsets = [m.offset() for m in got if m.partition() == p]
        assert offsets == list(range(len(offsets)))


def test_offsets_for_times_finds_first_record_at_or_after_timestamp(broker, produced):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    target = produced[100][3]
    found = c.offsets_for_times([TopicPartition("orders", p, target) for p in range(3)], 10)
    got = _consume_all(broker.bootstrap, "orders", 3, len(produced))
    for tp in found:
        in_partition = [m for m in got if m.partition() == tp.partition]
        later = [m for m in in_partition if m.timestamp()[1] >= target]
        assert tp.offset == (later[0].offset() if later else -1)
    low, high = c.get_watermark_offsets(TopicPartition("orders", 0), 10)
    assert low == 0 and high == len([m for m in got if m.partition() == 0])
    c.close()


def _kafka_python_codecs():
    from kafka import codec
    return [name for name, ok in [("gzip", codec.has_gzip()), ("snappy", codec.has_snappy()),
                                  ("lz4", codec.has_lz4()), ("zstd", codec.has_zstd())] if ok]


@pytest.mark.parametrize("compression", [None, *_kafka_python_codecs()])
def test_kafka_python_producer_and_consumer_round_trip(broker, compression):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    topic = f"kp-{compression or 'none'}"
    _create(broker.bootstrap, topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all",
                             compression_type=compression, enable_idempotence=True)
    futures = [producer.send(topic, key=b"k%d" % (i % 3), value=b"v%d" % i,
                             headers=[("h", b"%d" % i)], timestamp_ms=1_600_000_000_000 + i)
               for i in range(100)]
    metas = [f.get(timeout=15) for f in futures]
    producer.close(5)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    consumer.assign([KTP(topic, 0), KTP(topic, 1)])
    records = kafka_python_to_end(consumer)
    consumer.close()
    assert len(records) == 100
    assert {(r.partition, r.offset) for r in records} == {(m.partition, m.offset) for m in metas}
    by_value = {r.value: r for r in records}
    for i in range(100):
        r = by_value[b"v%d" % i]
        assert r.key == b"k%d" % (i % 3)
        assert r.headers == [("h", b"%d" % i)]
        assert r.timestamp == 1_600_000_000_000 + i
    # offsets_for_times through kafka-python's ListOffsets, on the partition holding record 50
    tp = KTP(topic, by_value[b"v50"].partition)
    c2 = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    found = c2.offsets_for_times({tp: 1_600_000_000_050})
    c2.close()
    assert found[tp].offset == by_value[b"v50"].offset
    assert found[tp].timestamp == 1_600_000_000_050
