"""A KIP-848 consumer group survives kill -9 of its coordinator's broker: the new coordinator
loads the group's records from its replica of `__consumer_offsets` and the members carry on
with their member ids, epochs and partitions, without rejoining."""
import pytest
from consumer_protocol import PollingMember, owned, settled
from minilog.broker.coordinator.coordinator_topic import partition_for
from test_cluster_basics import produce_all
from wire import RawConnection
from clustertools import wait_for

pytestmark = pytest.mark.timeout(300)

GROUP, TOPIC, PARTITIONS = "survivor", "events", 6


def _coordinator(c, *via):
    return c.partitions("__consumer_offsets", *via)[partition_for(GROUP, 3)][0]


def _settled_at(c, node, members):
    conn = RawConnection(c.broker(node).bootstrap)
    conn.sock.settimeout(30)
    try:
        return wait_for(lambda: settled(conn, GROUP, members, PARTITIONS),
                        f"{members} members settled at broker {node}")
    finally:
        conn.sock.close()


def test_a_consumer_group_resumes_on_a_new_coordinator_after_kill_9(make_cluster):
    c = make_cluster(3, **{"group.consumer.heartbeat.interval.ms": 250,
                           "group.consumer.session.timeout.ms": 20000})
    c.create_topic(TOPIC, partitions=PARTITIONS, rf=3)
    produce_all(c.bootstrap, TOPIC, [b"a%d" % i for i in range(60)])
    conf = {"bootstrap.servers": c.bootstrap, "group.id": GROUP, "group.protocol": "consumer",
            "auto.offset.reset": "earliest"}
    members = [PollingMember(conf, [TOPIC]) for _ in range(3)]
    try:
        coordinator = wait_for(lambda: _coordinator(c), "a coordinator")
        churn = PollingMember(conf, [TOPIC])  # raises the group epoch past a fresh group's
        _settled_at(c, coordinator, 4)
        churn.close()
        before = _settled_at(c, coordinator, 3)
        c.broker(coordinator).kill()
        rest = [n for n in (1, 2, 3) if n != coordinator]
        successor = wait_for(lambda: (lambda n: n if n in rest else None)(_coordinator(c, *rest)),
                             "a new coordinator")
        after = _settled_at(c, successor, 3)
        assert after.group_epoch == before.group_epoch  # loaded, not rebuilt by rejoins
        assert owned(after) == owned(before)
        assert {m.member_id: m.member_epoch for m in after.members} == \
            {m.member_id: m.member_epoch for m in before.members}
        later = [b"b%d" % i for i in range(60)]
        produce_all(c.bootstrap_of(*rest), TOPIC, later)
        wait_for(lambda: set(later) <= set().union(*(m.values for m in members)),
                 "the group to read what was produced after the failover")
    finally:
        for m in members:
            m.close()
