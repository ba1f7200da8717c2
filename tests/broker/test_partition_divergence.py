"""A leader's answer to a follower whose log diverges, and the follower's truncation: never
below what the leader has (KIP-101, KIP-279), tested on real logs without a server."""
import pytest
from minilog.broker.replication.follower_tracker import FollowerTracker
from minilog.broker.storage.leader_epoch_cache import LeaderEpochCache
from minilog.broker.storage.log import Log, OffsetOutOfRange
from minilog.broker.replication.partition import Partition
from minilog.connector.batch import split_batches
from minilog.connector.records import encode_batch


def _replica(path, epochs):
    """A partition whose log holds `epochs`: [(leader epoch, record count)], in order."""
    log = Log(path)
    p = Partition("t", 0, log)
    p.epoch_cache = LeaderEpochCache(path)
    for epoch, n in epochs:
        data = encode_batch([(None, None, b"x", ())] * n)
        (_, header), = split_batches(data)
        p.leader_epoch = epoch
        p.append_as_leader([(data, header)])
    return p


def _leader(path, epochs):
    p = _replica(path, epochs)
    p.followers = FollowerTracker([2], p.log_end_offset)
    return p


def test_a_follower_with_an_epoch_the_leader_never_had_truncates_to_the_leaders_end(tmp_path):
    """The follower's epoch 1 is unknown to a leader whose only epoch is 0 (an uncommitted
    leadership that once reached the follower's cache): the leader names its own latest epoch
    and log end, so the follower keeps the leader's 5 records, not its log start."""
    leader = _leader(tmp_path / "leader", [(0, 5)])
    follower = _replica(tmp_path / "follower", [(0, 5), (1, 3)])
    diverging = leader.follower_fetched(2, follower.log_end_offset,
                                        follower.epoch_cache.latest_epoch)
    assert diverging == (0, 5)
    follower.truncate_for_divergence(*diverging)
    assert follower.log_end_offset == 5


def test_a_follower_whose_unknown_epoch_started_earlier_cuts_from_that_epoch(tmp_path):
    leader = _leader(tmp_path / "leader", [(0, 5), (2, 5)])
    follower = _replica(tmp_path / "follower", [(0, 3), (3, 4)])
    diverging = leader.follower_fetched(2, 7, 3)
    assert diverging == (2, 10)
    follower.truncate_for_divergence(*diverging)
    assert follower.log_end_offset == 3  # where its own epoch 3 began: epoch 2 is not its


def test_a_follower_ahead_of_the_leader_without_epochs_is_cut_to_the_leaders_end(tmp_path):
    leader = _leader(tmp_path / "leader", [(0, 4)])
    assert leader.follower_fetched(2, 9, -1) == (0, 4)
    assert leader.follower_fetched(2, 4, -1) is None  # caught up: records, not truncation


def test_an_older_epoch_still_ends_where_the_next_began(tmp_path):
    leader = _leader(tmp_path / "leader", [(0, 5), (2, 5)])
    assert leader.follower_fetched(2, 8, 0) == (0, 5)
    assert leader.follower_fetched(2, 10, 2) is None


def test_a_follower_whose_divergence_lies_before_the_leaders_log_start_starts_over(tmp_path):
    """The follower led epoch 1 alone past where the leader's epoch 1 ended (offset 5); the
    leader has since deleted its log before 12 (a snapshot, retention). The follower must cut to
    5, then start over at the leader's log start. Told "diverging at 12" (the log start) it cut
    nothing, having 12 records itself, and fetched the same answer forever."""
    leader = _leader(tmp_path / "leader", [(0, 3), (1, 2), (2, 10)])
    leader.log.delete_records_before(12)
    follower = _replica(tmp_path / "follower", [(0, 3), (1, 9)])
    diverging = leader.follower_fetched(2, follower.log_end_offset, 1)
    assert diverging == (1, 5)
    follower.truncate_for_divergence(*diverging)
    assert follower.log_end_offset <= 5  # its batch 3..11 goes whole
    assert leader.follower_fetched(2, follower.log_end_offset, 0) is None  # agrees below 3
    with pytest.raises(OffsetOutOfRange):  # below the log start: it starts over at 12
        leader.read(follower.log_end_offset, 1 << 20, committed_only=False)
