"""A partition changes role only through its own methods (Kafka's Partition.makeLeader and
makeFollower): a new leadership starts its epoch at the log end and tracks the followers, the
same leadership again changes nothing but the ISR, following drops what leading kept, and a
replica behind the leader's log start starts over there. On real logs, without a server."""
from minilog.broker.replication.partition import Partition
from minilog.broker.storage.leader_epoch_cache import LeaderEpochCache
from minilog.broker.storage.log import Log
from minilog.connector.records import encode_batch


def _replica(path, records=3):
    log = Log(path)
    p = Partition("t", 0, log, is_leader=False, high_watermark=0,
                  epoch_cache=LeaderEpochCache(path))
    data = encode_batch([(None, None, b"x", ())] * records)
    p.append_as_follower(data)
    return p


def _smallest_follower(p):
    return min([p.log_end_offset] + [p.followers.end_offset(r) for r in p.isr if r != 1])


def test_a_new_leadership_starts_its_epoch_at_the_log_end(tmp_path):
    p = _replica(tmp_path)
    assert not p.is_leader and p.high_watermark == 0
    assert p.make_leader(1, 4, [1, 2], [1, 2], 7, _smallest_follower)
    assert (p.is_leader, p.leader_id, p.leader_epoch, p.partition_epoch) == (True, 1, 4, 7)
    assert p.epoch_start_offset == 3 and p.epoch_cache.latest_epoch == 4
    assert p.high_watermark == 0  # follower 2 has fetched nothing yet
    assert p.follower_fetched(2, 3, 4) is None and p.high_watermark == 3
    # The same leadership with a shrunk ISR: not a new one, the followers are kept.
    followers = p.followers
    assert not p.make_leader(1, 4, [1, 2], [1], 8, _smallest_follower)
    assert p.followers is followers and p.isr == [1] and p.partition_epoch == 8


def test_following_drops_what_leading_kept(tmp_path):
    p = _replica(tmp_path)
    p.make_leader(1, 4, [1, 2], [1, 2], 0, _smallest_follower)
    assert p.make_follower(2, 5, [1, 2], [2], 1)
    assert (p.is_leader, p.leader_id, p.leader_epoch) == (False, 2, 5)
    assert p.followers is None and p.hw_rule is None and p.isr == [2]
    assert not p.make_follower(2, 5, [1, 2], [1, 2], 2)  # same leader and epoch: ISR only
    assert p.isr == [1, 2] and p.partition_epoch == 2


def test_an_isr_expansion_in_flight_is_forgotten_when_the_partition_epoch_moves(tmp_path):
    p = _replica(tmp_path)
    p.make_leader(1, 4, [1, 2, 3], [1, 2], 0, _smallest_follower)
    p.expanding_isr([3])
    assert p.joining_isr == {3}
    p.make_leader(1, 4, [1, 2, 3], [1, 2, 3], 1, _smallest_follower)
    assert p.joining_isr == set()
    p.expanding_isr([3])
    p.isr_change_failed()
    assert p.joining_isr == set()


def test_a_replica_behind_the_leaders_log_start_starts_over_there(tmp_path):
    p = _replica(tmp_path)
    p.truncate_fully_and_start_at(10)
    assert (p.log_start_offset, p.log_end_offset, p.high_watermark) == (10, 10, 10)
    assert p.epoch_cache.latest_epoch == -1
