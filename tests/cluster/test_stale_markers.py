"""A deposed transaction coordinator's late markers are refused (Kafka's ProducerAppendInfo).

The test plays the deposed coordinator: it sends WriteTxnMarkers frames with the coordinator
epoch of a coordinator that was killed, after its successor ended the transaction and the
producer began its next one. Accepted, such a marker would end that next transaction in the
data partitions and in `__consumer_offsets`: a stale ABORT would hide a committed transaction
from read_committed (and drop its offsets), a stale COMMIT would expose an aborted one.
"""
import pytest
from clustertools import coordinator_of, wait_for
from minilog.connector.protocol import ErrorCode
from txntools import (
    partition_leader_epoch,
    raw_add_offsets,
    raw_add_partition,
    raw_committed,
    raw_end_txn,
    raw_init,
    raw_txn_offset_commit,
    raw_txn_produce,
    raw_write_marker,
    read_all,
)
from wire import RawConnection

pytestmark = pytest.mark.timeout(300)

TXN_ID, GROUP, TOPIC, OFFSETS = "stale-1", "stale-group", "stale", "__consumer_offsets"
FENCED = ErrorCode.TRANSACTION_COORDINATOR_FENCED


def _values(*seqs):
    return sorted(b"v%d" % (s + i) for s in seqs for i in range(3) for _ in range(2))


class Producer:
    """One transactional producer spoken to in raw frames: coordinator, leaders, group."""

    def __init__(self, cluster, coordinator, leaders, group_coordinator):
        self.cluster = cluster
        self.coord = RawConnection(cluster.bootstrap_of(coordinator))
        self.leaders = {p: RawConnection(cluster.bootstrap_of(n)) for p, n in leaders.items()}
        self.group = RawConnection(cluster.bootstrap_of(group_coordinator))
        self.pid, self.epoch = raw_init(self.coord, TXN_ID)

    def transaction(self, seq, offset):
        """Begin (once the previous transaction is complete), write 3 records to each
        partition from sequence `seq`, and commit `offset` of the group in it."""
        for p in self.leaders:
            wait_for(lambda: raw_add_partition(self.coord, TXN_ID, self.pid, self.epoch, TOPIC,
                                               p) == 0, "the previous transaction to complete")
        assert raw_add_offsets(self.coord, TXN_ID, self.pid, self.epoch, GROUP) == 0
        for p, conn in self.leaders.items():
            assert raw_txn_produce(conn, TXN_ID, self.pid, self.epoch, TOPIC, p, seq) == 0
        assert raw_txn_offset_commit(self.group, TXN_ID, self.pid, self.epoch, GROUP, TOPIC, 0,
                                     offset) == 0

    def end(self, commit):
        assert raw_end_txn(self.coord, TXN_ID, self.pid, self.epoch, commit) == 0

    def late_marker(self, coordinator_epoch, commit, epoch=None):
        """The marker a deposed coordinator delivers late: {partition: error} for the data
        partitions, and the error of the group's `__consumer_offsets` partition."""
        epoch = self.epoch if epoch is None else epoch
        data = {p: raw_write_marker(conn, self.pid, epoch, coordinator_epoch, commit, TOPIC,
                                    [p])[p] for p, conn in self.leaders.items()}
        return data, raw_write_marker(self.group, self.pid, epoch, coordinator_epoch, commit,
                                      OFFSETS, [0])[0]

    def committed(self):
        return raw_committed(self.group, GROUP, TOPIC, 0)

    def close(self):
        for conn in (self.coord, self.group, *self.leaders.values()):
            conn.close()


def _led_without(cluster, topic, dead):
    """{partition: leader} once every live broker names the same leaders, none of them `dead`."""
    def agreed():
        placement = cluster._agreed(topic)
        return placement and all(leader != dead for leader, _, _ in placement.values()) and \
            {p: leader for p, (leader, _, _) in placement.items()}
    return wait_for(agreed, f"leaders of {topic} other than broker {dead}")


def test_a_deposed_coordinators_late_markers_are_refused(make_cluster):
    c = make_cluster(3, **{"transaction.state.log.num.partitions": 1,
                           "offsets.topic.num.partitions": 1})
    c.create_topic(TOPIC, partitions=2, rf=3)
    coordinator_of(c, GROUP, key_type=0)  # both internal topics exist before the kill
    deposed = coordinator_of(c, TXN_ID)
    c.broker(deposed).kill()
    coordinator = wait_for(lambda: (lambda n: n != deposed and n)(coordinator_of(c, TXN_ID)),
                           "a new transaction coordinator")
    _, coordinator_epoch = partition_leader_epoch(c.bootstrap_of(coordinator),
                                                  "__transaction_state")
    assert coordinator_epoch >= 1
    stale = coordinator_epoch - 1  # the killed coordinator's epoch, or an older one
    group_leader = _led_without(c, OFFSETS, deposed)[0]
    p = Producer(c, coordinator, _led_without(c, TOPIC, deposed), group_leader)
    try:
        # T1 aborted by the new coordinator; T2 running when the late ABORT of T1 arrives
        p.transaction(0, 10)
        p.end(commit=False)
        p.transaction(3, 20)
        assert p.late_marker(stale, commit=False) == ({0: FENCED, 1: FENCED}, FENCED)
        p.end(commit=True)
        # T3 to be aborted, while a late COMMIT arrives: T4 begins once T3 is complete
        p.transaction(6, 30)
        assert p.late_marker(stale, commit=True) == ({0: FENCED, 1: FENCED}, FENCED)
        p.end(commit=False)
        p.transaction(9, 40)
        assert p.committed() == 20, "T2's offset committed, T3's aborted"
        survivors = c.bootstrap_of(*c.alive())
        assert sorted(read_all(survivors, TOPIC, "read_committed", 6, partitions=2)) == \
            _values(3), "T2 visible, T1 and T3 not (T4 is open)"
        # a new producer instance aborts T4 under a bumped epoch: a marker of the old
        # producer epoch is refused even from the current coordinator
        old_epoch = p.epoch
        p.pid, p.epoch = raw_init(p.coord, TXN_ID)
        assert p.epoch > old_epoch
        wait_for(lambda: p.committed() == 20, "T4's offset dropped")
        assert p.late_marker(coordinator_epoch, commit=True, epoch=old_epoch) == (
            {0: ErrorCode.INVALID_PRODUCER_EPOCH, 1: ErrorCode.INVALID_PRODUCER_EPOCH},
            ErrorCode.INVALID_PRODUCER_EPOCH)
        p.transaction(0, 50)
        p.end(commit=True)
        wait_for(lambda: p.committed() == 50, "T5's offset")
        assert sorted(read_all(survivors, TOPIC, "read_committed", 12, partitions=2)) == \
            _values(3, 0)
    finally:
        p.close()
