"""Offset commits are written to `__consumer_offsets` with acks=all, as Kafka's coordinator
writes them: acknowledged only once the in-sync replicas have them, refused (as
COORDINATOR_NOT_AVAILABLE) when the ISR is below min.insync.replicas or the replicas do not
answer within offsets.commit.timeout.ms, and an acknowledged commit survives kill -9 of the
coordinator right after its answer."""
import threading
import time

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as CTP
from minilog.broker.coordinator.coordinator_topic import partition_for
from minilog.connector.protocol import ApiKey, ErrorCode, request
from test_failover import _high_and_end
from wire import RawConnection
from clustertools import wait_for

pytestmark = pytest.mark.timeout(300)

OFFSETS = "__consumer_offsets"
PARTITIONS = 3  # offsets.topic.num.partitions in clustertools.FAST


def _coordinator_replicas(c, group):
    """(index, leader, follower) of the group's `__consumer_offsets` partition, at RF=2."""
    index = partition_for(group, PARTITIONS)
    leader, replicas, _ = wait_for(lambda: (c.partitions(OFFSETS) or {}).get(index),
                                   f"a leader for {OFFSETS}-{index}")
    c.wait_isr(OFFSETS, index, replicas)
    follower, = (r for r in replicas if r != leader)
    return index, leader, follower


def test_an_acknowledged_commit_survives_kill_9_of_its_coordinator(make_cluster):
    c = make_cluster(3, **{"offsets.topic.replication.factor": 2,
                           "broker.session.timeout.ms": 10000, "replica.lag.time.max.ms": 10000,
                           "offsets.commit.timeout.ms": 60000})
    c.create_topic("work", partitions=1, rf=3)
    conf = {"bootstrap.servers": c.bootstrap, "group.id": "durable", "enable.auto.commit": False}
    first = ConfluentConsumer(conf)
    try:
        first.assign([CTP("work", 0)])
        first.commit(offsets=[CTP("work", 0, 10)], asynchronous=False)
        index, leader, follower = _coordinator_replicas(c, "durable")
        resumed = threading.Event()

        def resume_soon():
            time.sleep(1.0)
            c.resume(follower)
            resumed.set()
        c.pause(follower)  # the coordinator's only follower, still in the ISR
        waker = threading.Thread(target=resume_soon, daemon=True)
        waker.start()
        first.commit(offsets=[CTP("work", 0, 20)], asynchronous=False)
        c.broker(leader).kill()  # right after the acknowledgement
        acknowledged_while_paused = not resumed.is_set()
        waker.join(30)
    finally:
        first.close()
    rest = [n for n in (1, 2, 3) if n != leader]
    wait_for(lambda: c.partitions(OFFSETS, *rest)[index][0] == follower,
             f"broker {follower} to coordinate the group")
    second = ConfluentConsumer({**conf, "bootstrap.servers": c.bootstrap_of(*rest)})
    try:
        committed = wait_for(lambda: (lambda tp: tp.offset if tp.offset >= 0 else None)(
            second.committed([CTP("work", 0)], timeout=5)[0]), "the committed offset")
    finally:
        second.close()
    assert committed == 20
    assert not acknowledged_while_paused, "the commit was acknowledged before it was replicated"


def _commit(conn, group, offset):
    req = request(ApiKey.OFFSET_COMMIT)
    body = req.cls(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                   group_instance_id=None, topics=[req.make("topics", name="work", partitions=[
                       req.make("topics", "partitions", partition_index=0, committed_offset=offset,
                                committed_leader_epoch=-1, committed_metadata="")])])
    return conn.call(ApiKey.OFFSET_COMMIT, 8, body).topics[0].partitions[0].error_code


def _committed(conn, group):
    req = request(ApiKey.OFFSET_FETCH)
    body = req.cls(group_id=group, require_stable=False,
                   topics=[req.make("topics", name="work", partition_indexes=[0])])
    resp = conn.call(ApiKey.OFFSET_FETCH, 7, body)
    assert resp.error_code == 0
    return resp.topics[0].partitions[0].committed_offset


def test_commits_are_refused_without_enough_in_sync_replicas(make_cluster):
    c = make_cluster(3, **{"offsets.topic.replication.factor": 2, "min.insync.replicas": 2,
                           "broker.session.timeout.ms": 60000, "replica.lag.time.max.ms": 3000,
                           "offsets.commit.timeout.ms": 1000})
    c.create_topic("work", partitions=1, rf=3)
    index, leader, follower = _coordinator_replicas(c, "careful")
    conn = RawConnection(c.broker(leader).bootstrap)
    try:
        # The leader may still be loading the partition the others say it leads.
        wait_for(lambda: _commit(conn, "careful", 5) == 0, "a first commit")
        c.pause(follower)
        try:
            # Appended, but the follower (in the ISR) never fetches it: no acknowledgement within
            # offsets.commit.timeout.ms, and OffsetFetch does not show it.
            assert _commit(conn, "careful", 6) == ErrorCode.COORDINATOR_NOT_AVAILABLE
            assert _committed(conn, "careful") == 5
            c.wait_isr(OFFSETS, index, [leader])
            # One in-sync replica of two required: refused before appending.
            _, end = _high_and_end(conn, OFFSETS, index)
            assert _commit(conn, "careful", 7) == ErrorCode.COORDINATOR_NOT_AVAILABLE
            assert _high_and_end(conn, OFFSETS, index)[1] == end
            assert _committed(conn, "careful") == 5
        finally:
            c.resume(follower)
        c.wait_isr(OFFSETS, index, [leader, follower])
        wait_for(lambda: _commit(conn, "careful", 8) == 0, "a commit with the follower back")
        assert _committed(conn, "careful") == 8
    finally:
        conn.close()
