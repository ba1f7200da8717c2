"""MirrorMaker 2 run as Connect users run it in a Connect cluster: two minilog brokers as the
clusters A and B, a `minilog connect` worker on B, and MM2's connectors created by their JSON
over the REST API (`MirrorSourceConnector`, `MirrorCheckpointConnector`,
`MirrorHeartbeatConnector`), read back with confluent-kafka. One worker for the module."""
import uuid

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import TopicPartition as CKTopicPartition
from connecttools import ConnectWorker
from minilog.mirror.formats import Checkpoint, Heartbeat
from mirrortools import FAST, create, partitions_of, produce, read_all, read_internal
from mirrortools import clusters  # noqa: F401 - a fixture
from waiting import wait_until

pytestmark = pytest.mark.timeout(600)

MIRROR = "org.apache.kafka.connect.mirror."
DEADLINE = 240.0
PARTITIONS = 3


@pytest.fixture(scope="module")
def worker(clusters, tmp_path_factory):
    w = ConnectWorker(tmp_path_factory.mktemp("connect"), clusters[1]).start()
    yield w
    w.stop()


def mm2_config(cls, a, **more):
    """A connector's JSON as KIP-382 shows it for a Connect cluster (the target's servers are
    the worker's own cluster), intervals short enough for a test."""
    return {"connector.class": MIRROR + cls, "source.cluster.alias": "A",
            "target.cluster.alias": "B", "source.cluster.bootstrap.servers": a,
            "source.cluster.security.protocol": "PLAINTEXT", "topics": "orders", **FAST,
            **more}


def commit_on(bootstrap, group, offsets):
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                    "enable.auto.commit": False})
    try:
        c.commit(offsets=[CKTopicPartition("orders", p, o) for p, o in offsets.items()],
                 asynchronous=False)
    finally:
        c.close()


CONNECTORS = ("MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector")


def test_mirror_connectors_copy_orders_checkpoint_a_group_and_beat(clusters, worker):
    a, b = clusters
    create(a, "orders", PARTITIONS)
    produce(a, "orders", PARTITIONS, 300)
    group = f"billing-{uuid.uuid4().hex[:6]}"
    committed = {0: 37, 1: 50, 2: 99}
    commit_on(a, group, committed)

    for cls in CONNECTORS:
        status, info = worker.call("POST", "/connectors", {"name": f"mm2-{cls}",
                                                           "config": mm2_config(cls, a)})
        assert status == 201, info
        assert info["type"] == "source"

    want = read_all(a, "orders", PARTITIONS)
    wait_until(lambda: read_all(b, "A.orders", PARTITIONS) == want, DEADLINE,
               "A.orders on B to equal orders on A record for record (keys, values, headers, "
               "timestamps, partitions)")
    assert partitions_of(b, "A.orders") == PARTITIONS
    assert want[1][0] == (b"key-1", b"value-1", [("n", b"1"), ("empty", b"")],
                          1_700_000_000_001)

    def checkpoints():
        if not partitions_of(b, "A.checkpoints.internal"):
            return None
        latest = {c.partition: c for c in read_internal(b, "A.checkpoints.internal",
                                                        Checkpoint.parse) if c.group == group}
        return latest if {p: c.upstream_offset for p, c in latest.items()} == committed \
            else None
    latest = wait_until(checkpoints, DEADLINE, f"checkpoints of {group} at {committed}")
    # each translated offset is where the group's next record on A is found on B
    on_a = read_all(a, "orders", PARTITIONS, offsets=True)
    on_b = read_all(b, "A.orders", PARTITIONS, offsets=True)
    for p, c in latest.items():
        assert c.topic == "A.orders"
        next_on_b = min(o for o in on_b[p] if o >= c.downstream_offset)
        assert on_b[p][next_on_b] == on_a[p][committed[p]]
    beats = wait_until(lambda: partitions_of(b, "heartbeats") and read_internal(
        b, "heartbeats", Heartbeat.parse), DEADLINE, "heartbeats on B")
    assert {(h.source, h.target) for h in beats} == {("A", "B")}
    for name in (f"mm2-{cls}" for cls in CONNECTORS):
        status, body = worker.call("GET", f"/connectors/{name}/status")
        assert status == 200 and body["tasks"][0]["state"] == "RUNNING", body


def test_validation_lists_mm2_settings_with_per_field_errors(clusters, worker):
    a, _ = clusters
    config = mm2_config("MirrorSourceConnector", a, **{"name": "mm2", "topics": "orders(",
                                                       "sync.topic.configs.enabled": "maybe"})
    del config["source.cluster.alias"]
    status, body = worker.call(
        "PUT", f"/connector-plugins/{MIRROR}MirrorSourceConnector/config/validate", config)
    assert status == 200, body
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert {"source.cluster.alias", "target.cluster.alias", "topics", "topics.exclude",
            "replication.policy.class", "sync.topic.configs.enabled"} <= set(errors)
    assert errors["source.cluster.alias"] == [
        'Missing required configuration "source.cluster.alias" which has no default value.']
    assert errors["sync.topic.configs.enabled"] == [
        "Invalid value maybe for configuration sync.topic.configs.enabled: Expected value to "
        "be either true or false"]
    assert body["error_count"] == 2
    config["source.cluster.alias"] = "A"  # the regex, once the fields have their types
    del config["sync.topic.configs.enabled"]
    status, body = worker.call(
        "PUT", f"/connector-plugins/{MIRROR}MirrorSourceConnector/config/validate", config)
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert body["error_count"] == 1 and errors["topics"][0].startswith(
        "Invalid value orders( for configuration topics: ")

    status, body = worker.call("POST", "/connectors", {"name": "no-alias", "config": {
        "connector.class": MIRROR + "MirrorCheckpointConnector",
        "source.cluster.bootstrap.servers": a}})
    assert status == 400 and body["error_code"] == 400
    assert body["message"].startswith("Connector configuration is invalid and contains the "
                                      "following 1 error(s):\nMissing required configuration "
                                      '"source.cluster.alias" which has no default value.')
    assert worker.call("GET", "/connectors/no-alias")[0] == 404


def test_two_source_connectors_for_the_same_clusters_each_copy_and_keep_offsets(clusters,
                                                                                worker):
    """Two MirrorSourceConnectors A->B on one worker (other topics each), as a Connect cluster
    runs them: each copies its topics, and keeps its position in Connect's offsets topic as
    MM2's task does ({cluster, partition, topic} -> {offset}: the last one copied)."""
    a, b = clusters
    topics = {"payments": 120, "refunds": 45}
    for topic, count in topics.items():
        create(a, topic, PARTITIONS)
        produce(a, topic, PARTITIONS, count)
        status, body = worker.call("PUT", f"/connectors/mirror-{topic}/config", mm2_config(
            "MirrorSourceConnector", a, topics=topic))
        assert status == 201, body
    for topic in topics:
        want = read_all(a, topic, PARTITIONS)
        wait_until(lambda: read_all(b, f"A.{topic}", PARTITIONS) == want, DEADLINE,
                   f"A.{topic} on B to equal {topic} on A")
        last = {p: len(records) - 1 for p, records in want.items() if records}
        expected = sorted(
            ({"partition": {"cluster": "A", "partition": p, "topic": topic},
              "offset": {"offset": o}} for p, o in last.items()),
            key=lambda e: e["partition"]["partition"])
        wait_until(lambda: sorted(worker.call("GET", f"/connectors/mirror-{topic}/offsets")[1]
                                  ["offsets"], key=lambda e: e["partition"]["partition"])
                   == expected, DEADLINE, f"mirror-{topic}'s offsets at {last}")
        status, body = worker.call("GET", f"/connectors/mirror-{topic}/status")
        assert body["tasks"][0]["state"] == "RUNNING", body
    # altering a mirror's offsets is refused in words (its position is its checkpoint's)
    assert worker.call("PUT", "/connectors/mirror-refunds/stop")[0] == 204
    wait_until(lambda: worker.call("GET", "/connectors/mirror-refunds/status")[1]["connector"]
               ["state"] == "STOPPED", DEADLINE, "mirror-refunds STOPPED")
    status, body = worker.call("PATCH", "/connectors/mirror-refunds/offsets", {"offsets": [
        {"partition": {"cluster": "A", "partition": 0, "topic": "refunds"},
         "offset": {"offset": 0}}]})
    assert status == 400 and "does not support altering" in body["message"], body
    for topic in topics:
        assert worker.call("DELETE", f"/connectors/mirror-{topic}")[0] == 204
