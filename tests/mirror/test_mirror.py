"""`minilog mirror` between two minilog brokers, as a user runs it: MM2's properties file, a
mirror process (a Spark query per flow), confluent-kafka on both sides. One mirror for the
module, A->B with the default policy (`orders` on A is `A.orders` on B)."""
import time

import pytest
from confluent_kafka.admin import AdminClient as CKAdmin
from confluent_kafka.admin import ConfigResource, NewPartitions
from minilog.mirror.formats import Checkpoint, Heartbeat, OffsetSync
from mirrortools import MirrorProcess, create, partitions_of, produce, read_all, read_internal
from mirrortools import clusters  # noqa: F401 - a fixture
from waiting import wait_until

DEADLINE = 120.0


@pytest.fixture(scope="module")
def mirror(clusters, tmp_path_factory):
    a, b = clusters
    create(a, "orders", 3, {"retention.ms": "86400000", "min.insync.replicas": "1"})
    produce(a, "orders", 3, 300)
    m = MirrorProcess(tmp_path_factory.mktemp("mirror"), a, b).start()
    yield m
    m.stop()


def wait_copied(a, b, topic, remote, partitions):
    want = read_all(a, topic, partitions)
    wait_until(lambda: read_all(b, remote, partitions) == want, DEADLINE,
               f"{remote} on B to equal {topic} on A record for record")
    return want


def test_records_are_copied_with_key_value_headers_timestamp_and_partition(clusters, mirror):
    a, b = clusters
    copied = wait_copied(a, b, "orders", "A.orders", 3)
    assert sum(map(len, copied.values())) == 300
    assert copied[1][0] == (b"key-1", b"value-1", [("n", b"1"), ("empty", b"")],
                            1_700_000_000_001)
    assert partitions_of(b, "A.orders") == 3


def test_topic_configs_are_synced_but_not_those_mm2_excludes(clusters, mirror):
    _, b = clusters
    resource = ConfigResource("topic", "A.orders")
    admin = CKAdmin({"bootstrap.servers": b})
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "86400000"
    assert configs["min.insync.replicas"].is_default


def test_new_topics_and_new_partitions_are_mirrored_as_they_appear(clusters, mirror):
    a, b = clusters
    create(a, "payments", 2)
    produce(a, "payments", 2, 40)
    wait_copied(a, b, "payments", "A.payments", 2)
    admin = CKAdmin({"bootstrap.servers": a})
    for f in admin.create_partitions([NewPartitions("payments", 4)]).values():
        f.result(60)
    wait_until(lambda: partitions_of(a, "payments") == 4, 60, "payments grown on A")
    produce(a, "payments", 4, 40, start=40)
    wait_until(lambda: partitions_of(b, "A.payments") == 4, DEADLINE, "A.payments grown on B")
    wait_copied(a, b, "payments", "A.payments", 4)


def test_internal_topics_are_not_mirrored_nor_copies_from_the_target(clusters, mirror):
    a, b = clusters
    create(a, "B.returns", 1)  # looks like B's own topic copied to A: never copied back
    produce(a, "B.returns", 1, 5)
    create(a, "audit", 1)
    produce(a, "audit", 1, 5)
    wait_copied(a, b, "audit", "A.audit", 1)  # created after: the copy has seen both
    names = CKAdmin({"bootstrap.servers": b}).list_topics(timeout=30).topics
    assert "A.B.returns" not in names
    assert not [n for n in names if n.startswith("A.") and n.endswith(".internal")]


def test_heartbeats_are_emitted_and_copied_as_mm2_does(clusters, mirror):
    a, b = clusters
    wait_until(lambda: partitions_of(b, "A.heartbeats") == 1, DEADLINE, "A.heartbeats on B")
    beats = wait_until(lambda: read_internal(b, "A.heartbeats", Heartbeat.parse), DEADLINE,
                       "a heartbeat copied from A")
    assert {(h.source, h.target) for h in beats} == {("B", "A")}
    own = read_internal(b, "heartbeats", Heartbeat.parse)
    assert own and {(h.source, h.target) for h in own} == {("A", "B")}
    assert abs(own[-1].timestamp - time.time() * 1000) < 60_000
