"""MirrorMaker 2 run as Connect users run it in a Connect cluster: two minilog brokers as the
clusters A and B, a `minilog connect` worker on B, and MM2's connectors created by their JSON
over the REST API (`MirrorSourceConnector`, `MirrorCheckpointConnector`,
`MirrorHeartbeatConnector`), read back with confluent-kafka. One worker for the module."""
import uuid

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import TopicPartition as CKTopicPartition
from connecttools import ConnectWorker, curl
from minilog.mirror.formats import Checkpoint, Heartbeat, OffsetSync
from mirrortools import (FAST, create, partitions_of, produce, read_all, read_internal,
                         topic_exists)
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

    on_target = {"offset-syncs.topic.location": "target"}  # KIP-716, both connectors agree
    for cls in CONNECTORS:
        more = on_target if cls != "MirrorHeartbeatConnector" else {}
        status, info = worker.call("POST", "/connectors", {"name": f"mm2-{cls}",
                                                           "config": mm2_config(cls, a, **more)})
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
    syncs = wait_until(lambda: partitions_of(b, "mm2-offset-syncs.A.internal") and read_internal(
        b, "mm2-offset-syncs.A.internal", OffsetSync.parse), DEADLINE, "offset syncs on B")
    assert {(s.topic, s.partition) for s in syncs} == {("orders", p) for p in range(PARTITIONS)}
    assert not topic_exists(a, "mm2-offset-syncs.B.internal")
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
    for topic in topics:
        assert worker.call("DELETE", f"/connectors/mirror-{topic}")[0] == 204


def offsets_of(worker, name):
    """{partition: offset} of a MirrorSourceConnector's offsets, over curl."""
    status, body = curl(worker.url, "GET", f"/connectors/{name}/offsets")
    assert status == 200, body
    return {e["partition"]["partition"]: e["offset"]["offset"] for e in body["offsets"]}


def state_of(worker, name):
    return worker.call("GET", f"/connectors/{name}/status")[1]["connector"]["state"]


def test_a_stopped_mirrors_offsets_altered_then_reset_and_the_copy_goes_on_from_them(clusters,
                                                                                      worker):
    """KIP-875 on a MirrorSourceConnector, over curl, as MM2 takes it: its partitions are
    {cluster, partition, topic} and its offsets {offset: the last copied}; an altered copy
    starts a new checkpoint from one past each offset (the partitions not named where they
    stood), exactly once from there: the records asked for again are copied again, the ones
    skipped never are. A reset starts from the beginning, as MM2's task does without offsets.
    Bodies MM2 refuses are answered as Kafka answers them (its messages; 500, since Connect's
    REST layer answers a connector's ConnectException so), and change nothing."""
    a, b = clusters
    name, topic = "mirror-alter", "ledger"
    create(a, topic, PARTITIONS)
    produce(a, topic, PARTITIONS, 90)  # offsets 0..29 of each partition
    status, body = curl(worker.url, "PUT", f"/connectors/{name}/config", mm2_config(
        "MirrorSourceConnector", a, topics=topic))
    assert status == 201, body
    first = read_all(a, topic, PARTITIONS)
    wait_until(lambda: read_all(b, f"A.{topic}", PARTITIONS) == first, DEADLINE,
               f"A.{topic} on B to equal {topic} on A")
    wait_until(lambda: offsets_of(worker, name) == {p: 29 for p in range(PARTITIONS)}, DEADLINE,
               f"{name}'s offsets at 29")

    def at(p, offset, **partition):
        return {"partition": {"cluster": "A", "partition": p, "topic": topic, **partition},
                "offset": offset if offset is None or isinstance(offset, dict)
                else {"offset": offset}}
    status, body = curl(worker.url, "PATCH", f"/connectors/{name}/offsets",
                        {"offsets": [at(0, 5)]})
    assert status == 400 and body["message"].startswith(
        "Connectors must be in the STOPPED state before their offsets can be modified"), body
    assert curl(worker.url, "PUT", f"/connectors/{name}/stop")[0] == 204
    wait_until(lambda: state_of(worker, name) == "STOPPED", DEADLINE, f"{name} STOPPED")
    produce(a, topic, PARTITIONS, 60, start=90)  # offsets 30..49, while it is stopped

    no_topic = {"offsets": [at(1, 3), {"partition": {"cluster": "A", "partition": 0},
                                       "offset": {"offset": 5}}]}
    source = f"source partition {{cluster=A, partition=0, topic={topic}}}"
    for sent, code, message in (
            (no_topic, 500, "Source partition {cluster=A, partition=0} is missing the 'topic' "
             "key, which is required"),
            ({"offsets": [at(-1, 5)]}, 500, f"Source partition {{cluster=A, partition=-1, "
             f"topic={topic}}} has an invalid value -1 for the 'partition' key, which cannot be "
             "negative"),
            ({"offsets": [at(0, "10")]}, 500, f"Source offset {{offset=10}} for {source} has an "
             "invalid value 10 for the 'offset' key, which must be an integer"),
            ({"offsets": [at(0, -5)]}, 500, f"Source offset {{offset=-5}} for {source} has an "
             "invalid value -5 for the 'offset' key, which cannot be negative"),
            ({"offsets": [at(0, {"position": 5})]}, 500, f"Source offset {{position=5}} for "
             f"{source} is missing the 'offset' key, which is required"),
            ({"offsets": []}, 400, "Partitions / offsets need to be provided for an alter "
             "offsets request")):
        assert curl(worker.url, "PATCH", f"/connectors/{name}/offsets", sent) == (
            code, {"error_code": code, "message": message})
    assert offsets_of(worker, name) == {p: 29 for p in range(PARTITIONS)}  # nothing written

    # partition 0 again from 10; partition 1 skips 30..39; partition 2 where it stood
    status, body = curl(worker.url, "PATCH", f"/connectors/{name}/offsets",
                        {"offsets": [at(0, 9), at(1, 39)]})
    assert (status, body) == (200, {"message": "The offsets for this connector have been "
                                               "altered successfully"})
    assert offsets_of(worker, name) == {0: 9, 1: 39, 2: 29}
    assert curl(worker.url, "PUT", f"/connectors/{name}/resume")[0] == 202
    every = read_all(a, topic, PARTITIONS)
    expected = {0: first[0] + every[0][10:], 1: first[1] + every[1][40:], 2: every[2]}
    wait_until(lambda: read_all(b, f"A.{topic}", PARTITIONS) == expected, DEADLINE,
               f"A.{topic} on B to go on from the altered offsets")
    wait_until(lambda: offsets_of(worker, name) == {p: 49 for p in range(PARTITIONS)},
               DEADLINE, f"{name}'s offsets at 49")
    assert read_all(b, f"A.{topic}", PARTITIONS) == expected  # and nothing more

    assert curl(worker.url, "PUT", f"/connectors/{name}/stop")[0] == 204
    wait_until(lambda: state_of(worker, name) == "STOPPED", DEADLINE, f"{name} STOPPED again")
    assert curl(worker.url, "DELETE", f"/connectors/{name}/offsets") == (
        200, {"message": "The offsets for this connector have been reset successfully"})
    assert offsets_of(worker, name) == {}
    assert curl(worker.url, "PUT", f"/connectors/{name}/resume")[0] == 202
    again = {p: expected[p] + every[p] for p in range(PARTITIONS)}
    wait_until(lambda: read_all(b, f"A.{topic}", PARTITIONS) == again, DEADLINE,
               f"A.{topic} on B to have {topic} copied again from the beginning")
    assert worker.call("DELETE", f"/connectors/{name}")[0] == 204
