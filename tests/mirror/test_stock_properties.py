"""`minilog mirror` on the properties file Kafka ships (`config/connect-mirror-maker.properties`),
only its hosts changed, as a MirrorMaker 2 user tries it first: two flows, A->B and B->A, every
topic, MM2's default intervals, Connect's storage settings that mean nothing here. Each side's
topics reach the other under the source's prefix, nothing comes back round, and heartbeats
travel both ways."""
from minilog.mirror.formats import Heartbeat
from mirrortools import MirrorProcess, create, produce, read_all, read_internal, topic_exists
from mirrortools import clusters  # noqa: F401 - a fixture
from waiting import wait_until

DEADLINE = 180.0
# Kafka's file, without its comments; the user's hosts in place of A_host1:9092, ...
STOCK = """\
clusters = A, B
A.bootstrap.servers = {a}
B.bootstrap.servers = {b}
A->B.enabled = true
A->B.topics = .*
B->A.enabled = true
B->A.topics = .*
replication.factor=1
checkpoints.topic.replication.factor=1
heartbeats.topic.replication.factor=1
offset-syncs.topic.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
config.storage.replication.factor=1
"""


def test_kafkas_own_properties_file_mirrors_both_ways(clusters, tmp_path):
    a, b = clusters
    create(a, "orders", 2)
    produce(a, "orders", 2, 40)
    create(b, "returns", 1)
    produce(b, "returns", 1, 10)
    mirror = MirrorProcess(tmp_path, a, b)
    mirror.properties.write_text(STOCK.format(a=a, b=b))
    # no spark.* key in the file: the checkpoints go under $TMPDIR, this test's own
    mirror.start(env={"TMPDIR": str(tmp_path)})
    try:
        assert "mirroring A->B, B->A" in mirror.log
        assert ("settings with no effect in minilog mirror: config.storage.replication.factor, "
                "offset.storage.replication.factor, status.storage.replication.factor"
                in mirror.log)
        for source, target, topic, partitions in ((a, b, "orders", 2), (b, a, "returns", 1)):
            remote = f"{'A' if source == a else 'B'}.{topic}"
            want = read_all(source, topic, partitions)
            wait_until(lambda: topic_exists(target, remote) and read_all(
                target, remote, partitions) == want, DEADLINE, f"{remote} copied")
        for cluster, alias in ((a, "A"), (b, "B")):
            other = "B" if alias == "A" else "A"
            wait_until(lambda: topic_exists(cluster, f"{other}.heartbeats") and read_internal(
                cluster, f"{other}.heartbeats", Heartbeat.parse), DEADLINE,
                f"{other}'s heartbeats copied to {alias}")
            assert {(h.source, h.target) for h in read_internal(
                cluster, "heartbeats", Heartbeat.parse)} == {(other, alias)}
        # the copies are never copied back
        assert not topic_exists(a, "B.A.orders") and not topic_exists(b, "A.B.returns")
        assert not topic_exists(a, "B.A.heartbeats") and not topic_exists(b, "A.B.heartbeats")
    finally:
        mirror.stop()
