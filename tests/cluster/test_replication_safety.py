"""Replication safety (issue 25): brokers act only on committed metadata, as KRaft's do.

Each test is one reproduction: a controller cut off from its quorum while it still believes it
leads, a restarted broker before it re-registered, a follower told to truncate. They run
against real broker processes with the cluster's fast timings and wait on conditions; each
checks what Kafka guarantees (nothing acknowledged is lost, no replica in the ISR lacks
committed records, ids handed out once, offsets never read back older than acknowledged).
"""
import time

import pytest
from confluent_kafka import Producer
from minilog.connector.protocol import ApiKey, request
from test_failover import read_everything
from wire import RawConnection
from clustertools import active_controller, wait_for

pytestmark = pytest.mark.timeout(300)


def controller_seen_by(c, node):
    """The active controller as broker `node` itself names it (DescribeCluster asked of it)."""
    req = request(ApiKey.DESCRIBE_CLUSTER)
    conn = RawConnection(c.broker(node).bootstrap)
    try:
        return conn.call(ApiKey.DESCRIBE_CLUSTER, 0, req.cls(
            include_cluster_authorized_operations=False)).controller_id
    finally:
        conn.close()


def produce_to(bootstrap, topic, partition, values, **conf):
    """acks=all idempotent writes of `values` to one partition; {value: offset} acknowledged."""
    acked, errors = {}, []

    def done(err, msg):
        (errors.append(err) if err else acked.__setitem__(msg.value(), msg.offset()))
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, **conf})
    for v in values:
        while True:
            try:
                p.produce(topic, v, partition=partition, on_delivery=done)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(120) == 0 and not errors, errors[:3]
    return acked


def isolate(c, controller):
    """SIGSTOP every broker but the controller, until the controller no longer names itself
    (it has lost the quorum and knows it); returns the paused ones."""
    others = [n for n in c.alive() if n != controller]
    for n in others:
        c.pause(n)
    wait_for(lambda: controller_seen_by(c, controller) != controller,
             f"controller {controller}, cut off from the quorum, to step down")
    return others


def test_1_a_replica_whose_stale_leadership_never_committed_keeps_its_records(make_cluster):
    """Kafka: a leadership the quorum never committed is never acted on, and an unknown last
    fetched epoch makes a follower truncate at most to the leader's log end."""
    # One batch per replica fetch: a replica that lost its copy takes a while to fetch it again.
    c = make_cluster(3, **{"replica.fetch.max.bytes": 1})
    placement = c.create_topic("cut", partitions=3, rf=3, config={"min.insync.replicas": "2"})
    controller = active_controller(c.bootstrap)
    # the partition led by another broker with the controller next in line: the one it takes
    # over when it fences the others, and the one it is elected for when that leader dies
    p, (leader, replicas, _) = next((p, s) for p, s in placement.items()
                                    if s[0] != controller and s[1][1] == controller)
    acked = {}
    for q in placement:  # in every partition: whichever the controller's broker cuts loses
        acked.update({(q, o): v for v, o in produce_to(
            c.bootstrap, "cut", q, [b"cut-%d-%05d" % (q, i) for i in range(2000)],
            **{"batch.num.messages": 1}).items()})
    assert len(acked) == 6000
    paused = isolate(c, controller)
    for n in paused:
        c.resume(n)
    # The leader answers again (what reached it while paused is answered first); a moment
    # later the controller's broker is paused, before it could fetch its partitions again, and
    # the leader dies: the controller's broker is next in line for partition p.
    wait_for(lambda: controller_seen_by(c, leader) is not None, f"broker {leader} to answer")
    time.sleep(0.5)
    c.pause(controller)
    c.broker(leader).kill()
    c.resume(controller)
    rest = [n for n in (1, 2, 3) if n != leader]
    wait_for(lambda: (c.partitions("cut", *rest) or {p: (leader,)})[p][0] not in (leader, -1),
             f"a new leader for cut-{p}")
    stored, ends = read_everything(c.bootstrap_of(*c.alive()), "cut", 3)
    lost = [v for k, v in acked.items() if stored.get(k) != v]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost (end offsets {ends})"
