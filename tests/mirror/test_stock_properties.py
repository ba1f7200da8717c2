"""`minilog mirror` on the properties file Kafka ships (`config/connect-mirror-maker.properties`),
only its hosts changed, as a MirrorMaker 2 user tries it first: two flows, A->B and B->A, every
topic, MM2's default intervals, Connect's storage settings that mean nothing here; run as one
process, and as MM2's dedicated mode runs it, one process per target cluster (`--clusters`).
Each side's topics reach the other under the source's prefix, nothing comes back round, and
heartbeats travel both ways."""
import pytest
from brokers import MinilogBroker
from minilog.mirror.formats import Heartbeat
from mirrortools import MirrorProcess, create, produce, read_all, read_internal, topic_exists
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
NO_EFFECT = ("settings with no effect in minilog mirror: config.storage.replication.factor, "
             "offset.storage.replication.factor, status.storage.replication.factor")


@pytest.fixture
def pair():
    """Two minilog brokers of this test's own, A and B."""
    a, b = MinilogBroker().start(), MinilogBroker().start()
    yield a.bootstrap, b.bootstrap
    a.cleanup()
    b.cleanup()


def assert_mirrored_both_ways(a, b):
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


@pytest.mark.parametrize("processes", [{"": ()}, {"to-B": ("--clusters", "B"),
                                                  "to-A": ("--clusters", "A")}],
                         ids=["one-process", "one-per-target"])
def test_kafkas_own_properties_file_mirrors_both_ways(pair, processes, tmp_path):
    a, b = pair
    create(a, "orders", 2)
    produce(a, "orders", 2, 40)
    create(b, "returns", 1)
    produce(b, "returns", 1, 10)
    mirrors = []
    try:
        for name, args in processes.items():
            directory = tmp_path / (name or "mirror")
            directory.mkdir()
            mirror = MirrorProcess(directory, a, b)
            mirror.properties.write_text(STOCK.format(a=a, b=b))
            mirrors.append(mirror)
            # no spark.* key in the file: the checkpoints go under $TMPDIR, this test's own
            mirror.start(env={"TMPDIR": str(directory)}, args=args)
            assert NO_EFFECT in mirror.log
        flows = sorted(line for m in mirrors for line in m.log.splitlines()
                       if line.startswith("mirroring "))
        assert [line.split(" (")[0] for line in flows] == (
            ["mirroring A->B, B->A"] if len(mirrors) == 1
            else ["mirroring A->B", "mirroring B->A"])
        assert_mirrored_both_ways(a, b)
    finally:
        for mirror in mirrors:
            mirror.stop()
