"""Keys land where the Java client (and librdkafka's murmur2_random) put them."""
import confluent_kafka
import pytest
from clienttools import make_topic
from minilog.connector.client import Producer, murmur2
from minilog.connector.client.partitioner import Partitioner

pytestmark = pytest.mark.timeout(120)


def test_murmur2_matches_the_java_client():
    # Values from Apache Kafka's UtilsTest.testMurmur2
    cases = {b"21": -973932308, b"foobar": -790332482,
             b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
             b"abc": 479470107}
    assert {k: murmur2(k) for k in cases} == cases


def test_same_partition_as_confluent_kafka_murmur2_random(cluster):
    topic = make_topic(cluster.bootstrap, 7)
    keys = [f"key-{i}".encode() for i in range(150)] + [bytes([i]) * (i % 9) for i in range(50)]
    theirs = {}
    cp = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap,
                                   "partitioner": "murmur2_random"})
    for k in keys:
        cp.produce(topic, b"v", k, on_delivery=lambda err, m: theirs.__setitem__(m.key(), m.partition()))
    assert cp.flush(30) == 0
    with Producer({"bootstrap.servers": cluster.bootstrap}) as p:
        futs = {k: p.send(topic, b"v", key=k) for k in keys}
        p.flush(30)
        ours = {k: f.result(0).partition for k, f in futs.items()}
    assert ours == theirs
    assert len(set(ours.values())) == 7


def test_null_keys_stick_to_a_partition_until_its_batch_is_sent():
    part = Partitioner()
    first = part.partition("t", None, list(range(4)), list(range(4)))
    assert all(part.partition("t", None, list(range(4)), list(range(4))) == first
               for _ in range(50))
    part.batch_sent("t", first, list(range(4)))
    assert part.partition("t", None, list(range(4)), list(range(4))) != first


def test_custom_partitioner_callable():
    part = Partitioner(lambda topic, key, partitions, available: partitions[-1])
    assert part.partition("t", b"k", [0, 1, 2], [0, 1, 2]) == 2


def test_batch_sent_moves_keyless_records_uniformly_to_another_available_partition():
    part = Partitioner()
    moved = []
    for _ in range(600):
        first = part.partition("t", None, list(range(4)), [0, 1, 2, 3])
        part.batch_sent("t", first, [0, 1, 2, 3])
        moved.append((first, part.partition("t", None, list(range(4)), [0, 1, 2, 3])))
    assert all(a != b for a, b in moved)
    assert all(50 < sum(1 for _, b in moved if b == p) < 250 for p in range(4))
    part.batch_sent("t", 9, [0, 1])  # not the sticky partition: nothing moves
    assert part.partition("t", None, [0, 1, 2, 3], [0, 1, 2, 3]) == moved[-1][1]
    only = moved[-1][1]
    part.batch_sent("t", only, [only])  # no other partition: choose afresh next time
    assert part.sticky_partitions() == {}
    part.partition("t", None, [0, 1], [])
    assert set(part.sticky_partitions()) == {"t"}
    assert Partitioner("random").sticky_partitions() is None
