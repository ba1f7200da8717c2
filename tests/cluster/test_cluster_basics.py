"""A three-broker cluster: placement, leaders in Metadata, replication to every replica, the CLI."""
import json
import subprocess
import sys
from collections import Counter

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import ConfigResource, NewTopic
from kafka import KafkaConsumer
from minilog.broker.storage.log import Log
from minilog.connector.client import Consumer, TopicPartition
from minilog.connector.protocol import ApiKey, ErrorCode, request
from minilog.connector.records import encode_batch
from wire import RawConnection
from clustertools import active_controller, wait_for
from clitools import nodes_stopped

pytestmark = pytest.mark.timeout(180)


def produce_all(bootstrap, topic, values, **conf):
    """Produce with acks=all and idempotence, each value its own key (so partitions share the
    values); return {value: (partition, offset)} acknowledged."""
    acked, errors = {}, []

    def done(err, msg):
        (errors.append(err) if err else acked.__setitem__(msg.value(), (msg.partition(), msg.offset())))
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, **conf})
    for v in values:
        p.produce(topic, v, key=v, on_delivery=done)
        p.poll(0)
    assert p.flush(60) == 0 and not errors, errors[:3]
    return acked


def test_replicas_spread_evenly_and_every_broker_names_the_same_leaders(make_cluster):
    c = make_cluster(3)
    parts = c.create_topic("spread", partitions=6, rf=3)
    assert all(len(set(replicas)) == 3 and leader == replicas[0] and isr == [1, 2, 3]
               for leader, replicas, isr in parts.values())
    assert Counter(leader for leader, _, _ in parts.values()) == {1: 2, 2: 2, 3: 2}
    for node in (1, 2, 3):  # Metadata from each broker tells the same story (once it applied it)
        wait_for(lambda: c.partitions("spread", node) == parts, f"broker {node} to agree")
    rf2 = c.create_topic("pairs", partitions=3, rf=2)
    assert all(len(set(r)) == 2 for _, r, _ in rf2.values())
    admin = c.admin()
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic("too-many", 1, 4)])["too-many"].result(30)
    assert e.value.args[0].name() == "INVALID_REPLICATION_FACTOR"


def test_acks_all_records_reach_every_replica_identically(make_cluster):
    c = make_cluster(3)
    c.create_topic("copied", partitions=3, rf=3)
    values = [b"v%05d" % i for i in range(3000)]
    acked = produce_all(c.bootstrap, "copied", values)
    assert set(acked) == set(values)
    with Consumer({"bootstrap.servers": c.bootstrap, "auto.offset.reset": "earliest"}) as ours:
        ours.assign([TopicPartition("copied", p) for p in range(3)])
        got = []
        while len(got) < len(values):
            got += ours.poll(1.0)
    assert sorted(r.value for r in got) == values
    theirs = KafkaConsumer("copied", bootstrap_servers=c.bootstrap, auto_offset_reset="earliest",
                           consumer_timeout_ms=10000)
    assert sorted(m.value for m in theirs) == values
    theirs.close()
    c.stop()
    for p in range(3):  # the same batches at the same offsets with the same epochs everywhere
        copies = []
        for b in c.brokers:
            with Log(b.log_dir / f"copied-{p}") as log:
                copies.append([(h.base_offset, h.crc, h.partition_leader_epoch)
                               for h in log.iter_batch_headers(0)])
        assert copies[0] and copies[0] == copies[1] == copies[2]


def _produce(conn, topic, partition, acks=-1):
    req = request(ApiKey.PRODUCE)
    body = req.cls(acks=acks, timeout_ms=5000, topic_data=[req.make(
        "topic_data", name=topic, partition_data=[req.make(
            "topic_data", "partition_data", index=partition,
            records=encode_batch([(None, None, b"raw", ())]))])])
    return conn.call(ApiKey.PRODUCE, 9, body).responses[0].partition_responses[0].error_code


def _fetch(conn, topic, partition, replica_id=-1):
    req = request(ApiKey.FETCH)
    body = req.cls(replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                   isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                   forgotten_topics_data=[], topics=[req.make("topics", topic=topic, partitions=[
                       req.make("topics", "partitions", partition=partition, fetch_offset=0,
                                partition_max_bytes=1 << 20)])])
    return conn.call(ApiKey.FETCH, 12, body).responses[0].partitions[0]


def _delete_records(conn, topic, partition, offset):
    req = request(ApiKey.DELETE_RECORDS)
    body = req.cls(timeout_ms=5000, topics=[req.make("topics", name=topic, partitions=[
        req.make("topics", "partitions", partition_index=partition, offset=offset)])])
    return conn.call(ApiKey.DELETE_RECORDS, 2, body).topics[0].partitions[0].error_code


def _log_start(conn, topic, partition, replica_id):
    """The log start offset a replica holds (ListOffsets "earliest" as a broker asks it)."""
    req = request(ApiKey.LIST_OFFSETS)
    body = req.cls(replica_id=replica_id, isolation_level=0, topics=[req.make(
        "topics", name=topic, partitions=[req.make("topics", "partitions",
                                                   partition_index=partition, timestamp=-2)])])
    return conn.call(ApiKey.LIST_OFFSETS, 7, body).topics[0].partitions[0].offset


def test_only_the_leader_takes_produce_and_consumer_fetches(make_cluster):
    c = make_cluster(3)
    (leader, replicas, _), = c.create_topic("led", partitions=1, rf=3).values()
    follower = next(r for r in replicas if r != leader)
    at_leader, at_follower = RawConnection(c.broker(leader).bootstrap), \
        RawConnection(c.broker(follower).bootstrap)
    try:
        assert _produce(at_leader, "led", 0) == 0
        for acks in (-1, 1):  # refused before anything is written, whatever the acks
            assert _produce(at_follower, "led", 0, acks) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert _fetch(at_leader, "led", 0).error_code == 0
        answer = _fetch(at_follower, "led", 0)
        assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (leader, 0)
        meta = _fetch(at_leader, "__cluster_metadata", 0)  # the quorum log is not a topic
        assert meta.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert _delete_records(at_follower, "led", 0, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert _log_start(at_follower, "led", 0, leader) == 0  # the refusal deleted nothing
    finally:
        at_leader.close()
        at_follower.close()


def test_delete_records_through_the_leader_moves_every_replicas_log_start(make_cluster):
    c = make_cluster(3)
    (leader, replicas, _), = c.create_topic("trim", partitions=1, rf=3).values()
    produce_all(c.bootstrap, "trim", [b"%d" % i for i in range(20)])
    admin = c.admin()  # confluent-kafka finds the leader itself
    done, = admin.delete_records([CKTopicPartition("trim", 0, 12)]).values()
    assert done.result(30).low_watermark == 12
    for node in replicas:  # followers take the leader's log start from their fetches
        conn = RawConnection(c.broker(node).bootstrap)
        try:
            wait_for(lambda: _log_start(conn, "trim", 0, leader) == 12,
                     f"broker {node}'s log of trim-0 to start at 12")
        finally:
            conn.close()


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "minilog.connector.cli", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_cluster_up_status_down(tmp_path):
    data = tmp_path / "c"
    up = _cli("cluster", "up", "--brokers", "3", "--data-dir", str(data),
              "-o", "broker.session.timeout.ms=2000", "-o", "broker.heartbeat.interval.ms=250")
    try:
        assert up.returncode == 0, up.stderr
        lines = up.stdout.splitlines()
        assert [line.split()[:3] for line in lines[:3]] == [
            ["broker", str(n), "listening"] for n in (1, 2, 3)]
        state = json.loads((data / "cluster.json").read_text())
        bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"])
        created = _cli("-b", bootstrap, "topics", "create", "cli-t", "--partitions", "2",
                       "--replication-factor", "3")
        assert created.returncode == 0, created.stderr
        described = _cli("-b", bootstrap, "topics", "describe", "cli-t")
        assert "ReplicationFactor: 3" in described.stdout and "Isr: " in described.stdout
        status = _cli("cluster", "status", "--data-dir", str(data))
        assert status.returncode == 0, status.stderr
        assert "live brokers: 1,2,3" in status.stdout
        assert "offline partitions: 0" in status.stdout
        again = _cli("cluster", "up", "--data-dir", str(data))
        assert again.returncode == 2 and "already running" in again.stderr
        assert "Traceback" not in again.stderr
    finally:
        down = _cli("cluster", "down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    assert nodes_stopped(down.stdout) == 3
    missing = _cli("cluster", "status", "--data-dir", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (["broker", "start", "--node-id", "4", "-o", "controller.quorum.voters=1@127.0.0.1:1,2@127.0.0.1:2"],
     "node.id 4 is not one of controller.quorum.voters"),
    (["broker", "start", "--node-id", "1", "-o", "controller.quorum.voters=1@nohost"],
     "expected id@host:port, got '1@nohost'"),
    (["cluster", "up", "--brokers", "0"], "--brokers must be at least 1"),
    (["cluster", "up", "--controllers", "-1"], "--controllers must be 0 (combined mode) or more"),
    (["broker", "start", "--node-id", "1", "-o", "process.roles=broker",
      "-o", "controller.quorum.voters=1@127.0.0.1:1"], "process.roles must include controller"),
    (["broker", "start", "-o", "process.roles=bogus", "-o", "controller.quorum.voters=1@127.0.0.1:1"],
     "process.roles must be broker, controller or broker,controller"),
    (["broker", "start", "-o", "process.roles=controller"],
     "process.roles needs controller.quorum.voters"),
])
def test_bad_cluster_settings_are_one_line_and_exit_2(args, message, tmp_path):
    done = _cli(*args, "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 2 and message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_config_changes_through_any_broker_reach_every_broker(make_cluster):
    c = make_cluster(3)
    c.create_topic("tuned", partitions=1, rf=3)
    controller = active_controller(c.bootstrap)
    other = next(n for n in (1, 2, 3) if n != controller)
    req = request(ApiKey.ALTER_CONFIGS)  # raw: clients would send it to the controller
    body = req.cls(validate_only=False, resources=[req.make(
        "resources", resource_type=2, resource_name="tuned", configs=[req.make(
            "resources", "configs", name="retention.ms", value="123456")])])
    conn = RawConnection(c.broker(other).bootstrap)
    try:
        assert conn.call(ApiKey.ALTER_CONFIGS, 1, body).responses[0].error_code == 0
    finally:
        conn.close()

    def retention(node):
        via = c.admin(node)  # kept alive until the answer arrives
        got = via.describe_configs([ConfigResource("topic", "tuned")])
        return next(iter(got.values())).result(10)["retention.ms"].value
    for node in (1, 2, 3):
        wait_for(lambda: retention(node) == "123456", f"broker {node} to apply the config")
