"""The steps of a partition reassignment (KIP-455) as the controller takes them, in process:
the example of KRaft's own description (move the replica on broker 3 to broker 4), a growth, a
shrink that completes at once, one that would leave no in-sync copy, and a cancel."""
from minilog.broker.metadata.image import PartitionState
from minilog.broker.metadata.reassignment import completed, invalid_target, reverted, started

LIVE = {1, 2, 3, 4}


def test_a_move_grows_then_completes_when_the_new_replica_is_in_sync():
    p = PartitionState((1, 2, 3), leader=1, leader_epoch=1, isr=(1, 2), partition_epoch=2)
    grown = started(p, [1, 2, 4], LIVE)
    assert (grown.replicas, grown.isr, grown.adding, grown.removing, grown.leader,
            grown.leader_epoch) == ((1, 2, 4, 3), (1, 2), (4,), (3,), 1, 1)
    assert completed(grown, LIVE) is None  # 4 has not caught up
    done = completed(PartitionState(grown.replicas, 1, 1, (1, 2, 4), 3, grown.adding,
                                    grown.removing), LIVE)
    assert (done.replicas, done.isr, done.adding, done.removing, done.leader,
            done.leader_epoch) == ((1, 2, 4), (1, 2, 4), (), (), 1, 2)


def test_removing_the_leader_elects_one_of_the_target_and_bumps_the_epoch():
    p = PartitionState((1, 2), leader=1, leader_epoch=5, isr=(1, 2))
    done = started(p, [2], LIVE)  # only removes: at once
    assert (done.replicas, done.isr, done.leader, done.leader_epoch, done.reassigning) == \
        ((2,), (2,), 2, 6, False)


def test_a_shrink_that_keeps_no_in_sync_copy_is_refused():
    p = PartitionState((1, 2), leader=1, isr=(1,))
    assert started(p, [2], LIVE) is None


def test_a_cancel_goes_back_to_the_replicas_before_the_added_ones():
    p = PartitionState((1, 2), leader=1, leader_epoch=3, isr=(1, 2))
    grown = started(p, [3, 2, 1], LIVE)
    assert (grown.replicas, grown.adding, grown.removing) == ((3, 2, 1), (3,), ())
    back = reverted(grown, LIVE)
    assert (back.replicas, back.isr, back.leader, back.leader_epoch, back.reassigning) == \
        ((2, 1), (1, 2), 1, 4, False)
    only_new_in_sync = PartitionState((1, 3), 3, 2, (3,), 0, adding=(3,))
    assert reverted(only_new_in_sync, LIVE) is None


def test_targets_kafka_refuses():
    assert invalid_target([], LIVE) == \
        "The manual partition assignment includes an empty replica list."
    assert "broker 2 more than once" in invalid_target([2, 2], LIVE)
    assert "broker 9, but no such broker is registered" in invalid_target([1, 9], LIVE)
    assert invalid_target([4, 1], LIVE) is None
