"""Dedicated controllers (KRaft's `process.roles=controller`) beside brokers that are only
brokers: the brokers observe the quorum and register with the active controller, clients see
only brokers, and both a controller's and a broker's loss are survived."""
import json
import os
import signal

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as CTP
from minilog.connector.protocol import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    request,
)
from test_cluster_basics import _cli, produce_all
from wire import RawConnection
from clustertools import active_controller, wait_for
from clitools import nodes_stopped

pytestmark = pytest.mark.timeout(300)

BROKERS, CONTROLLERS = {1, 2}, {3, 4, 5}


def _only_brokers_named(c):
    """Metadata, asked of every live broker, names brokers only (as its controller too)."""
    for node in c.alive():
        md = c.metadata(node)
        assert set(md.brokers) <= BROKERS, f"broker {node} named {sorted(md.brokers)}"
        assert md.controller_id in BROKERS
    return True


def _read(bootstrap, topic, partitions, count):
    c = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([CTP(topic, p, 0) for p in range(partitions)])
        got = []
        wait_for(lambda: got.extend(m.value() for m in c.consume(100, 0.5) if not m.error())
                 or len(got) >= count, f"{count} records of {topic}")
        return got
    finally:
        c.close()


def test_dedicated_controllers_elect_a_successor_and_brokers_fail_over(make_cluster):
    c = make_cluster(2, controllers=3)
    assert {n.node_id for n in c.controllers} == CONTROLLERS
    _only_brokers_named(c)
    layout = c.create_topic("ded", partitions=2, rf=2)
    assert all(sorted(replicas) == [1, 2] for _, replicas, _ in layout.values())
    produce_all(c.bootstrap, "ded", [b"a%d" % i for i in range(20)])
    assert sorted(_read(c.bootstrap, "ded", 2, 20)) == sorted(b"a%d" % i for i in range(20))

    # A controller-only node answers the controller's requests only.
    conn = RawConnection(c.controllers[0].bootstrap)
    try:
        apis = {k.api_key for k in conn.call(ApiKey.API_VERSIONS, 3, request(
            ApiKey.API_VERSIONS).cls(client_software_name="t", client_software_version="1")).api_keys}
    finally:
        conn.close()
    assert {ApiKey.VOTE, ApiKey.BROKER_REGISTRATION, ApiKey.FETCH} <= apis
    assert not apis & {ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FIND_COORDINATOR}

    active = active_controller(c.bootstrap)
    assert active in CONTROLLERS
    c.broker(active).kill()
    successor = wait_for(lambda: (lambda n: n if n in CONTROLLERS - {active} else None)(
        active_controller(c.bootstrap)), "a new active controller")
    c.create_topic("after", partitions=1, rf=2)
    _only_brokers_named(c)

    leader = layout[0][0]
    c.broker(leader).kill()
    other, = BROKERS - {leader}
    wait_for(lambda: c.partitions("ded", other)[0][0] == other, f"broker {other} to lead ded-0")
    produce_all(c.bootstrap_of(other), "ded", [b"b%d" % i for i in range(10)])
    got = _read(c.bootstrap_of(other), "ded", 2, 30)
    assert sorted(got) == sorted([b"a%d" % i for i in range(20)] + [b"b%d" % i for i in range(10)])
    _only_brokers_named(c)
    assert active_controller(c.bootstrap_of(other)) == successor


def test_cli_cluster_up_with_dedicated_controllers(tmp_path):
    data = tmp_path / "d"
    up = _cli("cluster", "up", "--brokers", "2", "--controllers", "3", "--data-dir", str(data),
              "-o", "broker.session.timeout.ms=3000", "-o", "broker.heartbeat.interval.ms=300")
    try:
        assert up.returncode == 0, up.stderr
        assert "warning" not in up.stdout
        assert [line.split()[:2] for line in up.stdout.splitlines()[:5]] == [
            ["controller", "3"], ["controller", "4"], ["controller", "5"],
            ["broker", "1"], ["broker", "2"]]
        state = json.loads((data / "cluster.json").read_text())
        assert [b["node_id"] for b in state["controllers"]] == [3, 4, 5]
        status = _cli("cluster", "status", "--data-dir", str(data))
        assert status.returncode == 0, status.stderr
        assert "live brokers: 1,2\n" in status.stdout
        assert "controller quorum: 3,4,5 (dedicated controllers)" in status.stdout
        roles = {line.split()[1]: line.split("\t")[2] for line in status.stdout.splitlines()
                 if "\t" in line}
        assert roles == {"1": "broker", "2": "broker", "3": "controller", "4": "controller",
                         "5": "controller"}
        active = next(line for line in status.stdout.splitlines() if line.startswith("controller:"))
        assert int(active.split()[1]) in CONTROLLERS
    finally:
        down = _cli("cluster", "down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    assert nodes_stopped(down.stdout) == 5


def test_admin_requests_while_every_broker_is_fenced_are_refused_not_failed(make_cluster):
    """With its only broker fenced, the controller cannot place a replica anywhere: Kafka
    answers CreateTopics and CreatePartitions with INVALID_REPLICATION_FACTOR, not an
    unknown server error. The requests wait in the paused broker's socket, so they reach the
    controller the moment the broker resumes, before its heartbeat can unfence it (it must
    first catch up to the record that fenced it)."""
    c = make_cluster(1, controllers=1)
    c.create_topic("fenced-grow", partitions=1, rf=1)
    conn = RawConnection(c.brokers[0].bootstrap)
    try:
        c.pause(1)
        try:
            wait_for(lambda: "broker 1 " in c.controllers[0].log() and "fencing it"
                     in c.controllers[0].log(), "the controller to fence the paused broker")
            create, grow = request(ApiKey.CREATE_TOPICS), request(ApiKey.CREATE_PARTITIONS)
            conn.send_raw(_frame(ApiKey.CREATE_TOPICS, 5, 1, create.cls(
                topics=[create.make("topics", name="while-fenced", num_partitions=1,
                                    replication_factor=1)], timeout_ms=20000)))
            conn.send_raw(_frame(ApiKey.CREATE_PARTITIONS, 3, 2, grow.cls(
                topics=[grow.make("topics", name="fenced-grow", count=2)], timeout_ms=20000)))
        finally:
            c.resume(1)
        conn.sock.settimeout(60)
        created = decode_response(ApiKey.CREATE_TOPICS, 5, conn.recv_frame())
        grown = decode_response(ApiKey.CREATE_PARTITIONS, 3, conn.recv_frame())
    finally:
        conn.close()
    assert created.topics[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR, created
    assert "only 0 broker(s)" in created.topics[0].error_message
    assert grown.results[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR, grown


def _frame(api_key, version, correlation_id, body):
    return b"".join(encode_request(RequestHeader(api_key, version, correlation_id, "raw"), body))


def test_a_heartbeat_that_unfences_is_answered_only_once_the_unfencing_commits(make_cluster):
    """Kafka's controller answers a BrokerHeartbeat that changes a broker's fencing only after
    that record commits: a broker told "unfenced" by a controller whose record a failover then
    forgets would serve as unfenced while the quorum says fenced. A broker (played here by the
    test, as broker 9) registers; the active controller's two followers are paused; its
    unfencing heartbeat must not be answered "unfenced"; once they resume, it is."""
    import uuid

    c = make_cluster(1, controllers=3)
    active = active_controller(c.bootstrap)
    followers = [n for n in c.controllers if n.node_id != active]
    reg, beat = request(ApiKey.BROKER_REGISTRATION), request(ApiKey.BROKER_HEARTBEAT)
    conn = RawConnection(c.broker(active).bootstrap)
    try:
        registered = conn.call(ApiKey.BROKER_REGISTRATION, 0, reg.cls(
            broker_id=9, cluster_id=c.metadata().cluster_id, incarnation_id=uuid.uuid4(),
            listeners=[reg.make("listeners", name="PLAINTEXT", host="127.0.0.1", port=9,
                                security_protocol=0)], features=[], rack=None))
        assert registered.error_code == 0, registered

        def heartbeat(via):
            return via.call(ApiKey.BROKER_HEARTBEAT, 0, beat.cls(
                broker_id=9, broker_epoch=registered.broker_epoch,
                current_metadata_offset=1 << 40, want_fence=False, want_shut_down=False))
        for node in followers:
            os.killpg(node.proc.pid, signal.SIGSTOP)
        try:
            conn.sock.settimeout(60)
            alone = heartbeat(conn)
        finally:
            for node in followers:
                os.killpg(node.proc.pid, signal.SIGCONT)
        assert alone.error_code in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER), alone
        assert not (alone.error_code == 0 and not alone.is_fenced)

        def unfenced_by_the_active_controller():
            # Alone, the controller may resign (it cannot reach a majority): as a broker does,
            # heartbeat whichever controller is active now.
            with RawConnection(c.broker(active_controller(c.bootstrap)).bootstrap) as now:
                answer = heartbeat(now)
            return answer.error_code == 0 and not answer.is_fenced
        wait_for(unfenced_by_the_active_controller,
                 "broker 9 to be unfenced once the quorum is back")
    finally:
        conn.close()
