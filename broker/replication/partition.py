"""One topic-partition as the broker serves it: its log plus replica state.

The log stores batches; the partition decides what is committed (high watermark), which leader
epoch stamps new batches, and wakes long-polling fetches when data arrives. With one replica the
high watermark follows the log end; in a replicated cluster the replica manager makes the
partition a leader (a `FollowerTracker` and a high-watermark rule) or a follower (appends
fetched batches, truncates divergent tails by the leader epoch cache) and it moves the high
watermark by follower progress instead.

Who is woken by what, as Kafka's replica manager does it: an append wakes the followers'
fetches (they replicate it), and only them; a new high watermark wakes what waits for commits,
consumers' fetches and acks=all produces, and not the followers, which learn it with their next
fetch. Waking every waiter on every change made each acks=all produce cost each follower a second
fetch round trip that carried nothing but the high watermark, and woke every pending produce and
consumer fetch at every append, to find nothing. (The metadata log is no `Partition`: it is the
Raft package's `QuorumPartition`, which wakes everyone on every change.)
"""
import asyncio
import uuid
from collections.abc import Callable, Collection, Iterable

from minilog.connector.batch import BatchHeader

from ..storage.file_region import FileRegion
from ..storage.leader_epoch_cache import LeaderEpochCache
from ..storage.log import AppendResult, Log
from ..storage.log_config import LogConfig
from ..storage.replica_log import ReplicaLog
from .follower_tracker import FollowerTracker

Waiter = asyncio.Future[bool]



class Partition(ReplicaLog):
    wake_all = False  # the Fetch handler's flag: True only for the metadata log's QuorumPartition

    def __init__(self, topic: str, index: int, log: Log, topic_id: uuid.UUID | None = None,
                 leader_epoch: int = 0, replicas: Iterable[int] = (), isr: Iterable[int] = (),
                 *, high_watermark: int | None = None,
                 epoch_cache: LeaderEpochCache | None = None, is_leader: bool = True) -> None:
        """`high_watermark`: where the committed records end (default: the log end, a single
        replica's); `is_leader`: False for a replica of a cluster, which waits for the replica
        manager to make it a leader or a follower."""
        self.topic, self.index, self.log, self.topic_id = topic, index, log, topic_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.high_watermark: int = log.log_end_offset if high_watermark is None \
            else high_watermark
        self.max_message_bytes = 1048588
        self.min_insync_replicas = 1
        self._waiters: set[Waiter] = set()   # what waits for commits (or anything)
        self._fetchers: set[Waiter] = set()  # followers' fetches, which wait for data
        # Replication (None / unused with a single broker): changed only by the methods below
        # (make_leader, make_follower, the ISR and truncation ones), which the replica manager,
        # the fetcher and Raft call.
        self.is_leader = is_leader
        self.leader_id: int | None = None
        self.epoch_cache = epoch_cache
        self.followers: FollowerTracker | None = None  # while leading a replicated partition
        # partition -> the offset every required replica has
        self.hw_rule: Callable[[Partition], int] | None = None
        self.epoch_start_offset = 0  # where this leader's epoch began
        self.partition_epoch = 0
        self.joining_isr: set[int] = set()  # replicas an ISR expansion in flight adds

    def apply_config(self, config: LogConfig) -> None:
        """Adopt a topic's (new) LogConfig: limits checked here, storage settings by the log."""
        self.max_message_bytes = config.max_message_bytes
        self.min_insync_replicas = getattr(config, "min_insync_replicas", 1)
        self.log.config = config

    def append_as_leader(self, batches: list[tuple[bytes, BatchHeader]],
                         in_place: bool = False) -> AppendResult:
        """Append validated batches (list of (bytes, BatchHeader)); returns the log's AppendResult.

        `in_place`: writable batches may be stamped where they are (see `Log.append`)."""
        result = self.log.append(batches, leader_epoch=self.leader_epoch, in_place=in_place)
        if self.epoch_cache is not None and not result.duplicate:
            self.epoch_cache.assign(self.leader_epoch, result.first_offset)
        if self.hw_rule is not None:
            if self._fetchers:
                self._wake(self._fetchers)  # followers long-poll for the new data
            if self._waiters and any(h.is_control for _, h in batches):
                self._wake(self._waiters)  # a marker may move the last stable offset
        self._advance_high_watermark()
        return result

    def _advance_high_watermark(self) -> None:
        if self.hw_rule is not None:
            if self.joining_isr or len(self.isr) != 1 or self.isr[0] != self.leader_id:
                new_hw = min(self.hw_rule(self), self.log.log_end_offset)
            else:  # alone in its ISR (RF=1, a single broker): all it has is committed
                new_hw = self.log.log_end_offset
            if new_hw > self.high_watermark:
                self.high_watermark = new_hw
                self._wake(self._waiters)
            return
        # Single replica: everything appended is committed.
        if len(self.isr) <= 1:
            new_hw = self.log.log_end_offset
            if new_hw != self.high_watermark:
                self.high_watermark = new_hw
                self._wake(self._waiters)

    # ---- role ----------------------------------------------------------------------------------
    def make_leader(self, node_id: int, leader_epoch: int, replicas: Iterable[int],
                    isr: Iterable[int], partition_epoch: int,
                    hw_rule: Callable[["Partition"], int]) -> bool:
        """Lead in `leader_epoch` with this replica set and ISR (Kafka's Partition.makeLeader):
        a new leadership (or epoch) starts tracking the followers and a new epoch at the log
        end, by which `hw_rule(partition)` moves the high watermark. Whether it is new."""
        if partition_epoch != self.partition_epoch:
            self.joining_isr = set()  # the change committed (or another did): the ISR says it all
        self.replicas, self.isr, self.partition_epoch = list(replicas), list(isr), partition_epoch
        new = not self.is_leader or self.leader_epoch != leader_epoch
        if new:
            self.leader_epoch, self.leader_id, self.is_leader = leader_epoch, node_id, True
            self.followers = FollowerTracker([r for r in self.replicas if r != node_id],
                                             self.log_end_offset)
            self.hw_rule = hw_rule
            self.epoch_start_offset = self.log_end_offset
            if self.epoch_cache is not None:
                self.epoch_cache.assign(leader_epoch, self.log_end_offset)
        self._advance_high_watermark()
        self.notify()
        return new

    def make_follower(self, leader_id: int, leader_epoch: int, replicas: Iterable[int],
                      isr: Iterable[int], partition_epoch: int) -> bool:
        """Follow `leader_id` (-1: nobody leads) in `leader_epoch` (Kafka's
        Partition.makeFollower); whether the leader or epoch changed (the fetching moves)."""
        self.replicas, self.isr, self.partition_epoch = list(replicas), list(isr), partition_epoch
        if not self.is_leader and self.leader_epoch == leader_epoch and \
                self.leader_id == leader_id:
            return False
        self.is_leader, self.followers, self.hw_rule = False, None, None
        self.leader_epoch, self.leader_id = leader_epoch, leader_id
        self.notify()
        return True

    def stop_serving(self) -> None:
        """No longer a replica here (the log is kept or deleted by the caller): neither leads
        nor follows, and whoever waits on it is woken to find out."""
        self.is_leader = False
        self.notify()

    def expanding_isr(self, joining: Iterable[int]) -> None:
        """An ISR change adding `joining` was sent: the high watermark waits for them from now
        on (Kafka's maximal ISR), so none joins lacking committed records."""
        self.joining_isr = set(joining)

    def isr_change_failed(self) -> None:
        """The controller refused the change (or was not reached): the ISR is what it was."""
        self.joining_isr = set()

    # ---- replication -----------------------------------------------------------------------
    def follower_fetched(self, replica_id: int, fetch_offset: int, last_fetched_epoch: int,
                         broker_epoch: int = -1) -> tuple[int, int] | None:
        """A follower's fetch reached the leader: (diverging (epoch, end offset) or None).

        A follower whose last fetched epoch ended earlier here has a tail the leader does not:
        it is told where to truncate instead of getting records. An epoch newer than any here
        is answered with this leader's latest epoch and log end, so the follower cuts what it
        has of later epochs and at most down to this log's end, never to its start. A divergence
        before this log's start is answered as it is: the follower then fetches out of range."""
        if self.epoch_cache is not None and last_fetched_epoch >= 0:
            epoch, end = self.epoch_cache.end_offset_for(last_fetched_epoch, self.log_end_offset)
            if end < 0:
                epoch, end = self.epoch_cache.latest_epoch, self.log_end_offset
            if epoch < last_fetched_epoch or end < fetch_offset:
                # Below this log's start too: the follower cuts there, and its next fetch is out
                # of range, so it starts over at this log's start (KRaft: fetch the snapshot).
                return epoch, end
        if fetch_offset > self.log_end_offset:
            # Ahead of this log with no epoch to compare (KIP-279's out-of-range case): cut
            # to this log's end, as Kafka's follower does, never to the high watermark.
            latest = self.epoch_cache.latest_epoch if self.epoch_cache is not None else -1
            return latest, self.log_end_offset
        followers = self.followers
        if followers is not None:
            moved = followers.end_offset(replica_id) != fetch_offset
            followers.fetched(replica_id, fetch_offset, self.log_end_offset,
                              broker_epoch=broker_epoch)
            if moved:  # else the high watermark's inputs are as they were: nothing to compute
                self._advance_high_watermark()
        return None

    def truncate_for_divergence(self, leader_epoch: int, leader_end_offset: int) -> int:
        """The leader says our last epoch ended at `leader_end_offset` there: cut our tail where
        both logs last agree (the next fetch checks again, so a deeper divergence converges)."""
        target = min(leader_end_offset, self.log_end_offset)
        if leader_epoch >= 0 and self.epoch_cache is not None:
            epoch, end = self.epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)
            if end >= 0:
                target = min(target, end)
        self.truncate_to(target)
        return target

    def follower_high_watermark(self, leader_hw: int) -> None:
        new_hw = min(leader_hw, self.log_end_offset)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self.notify()

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided: the high watermark, or the first offset of
        the oldest open transaction if lower (what read_committed consumers read up to)."""
        unstable = self.log.first_unstable_offset()
        return self.high_watermark if unstable is None else min(unstable, self.high_watermark)

    def read(self, offset: int, max_bytes: int, committed_only: bool = True, min_one: bool = True,
             region_over: int | None = None, stable_only: bool = False) -> bytes | FileRegion:
        upper = self.last_stable_offset if stable_only else \
            self.high_watermark if committed_only else None
        return self.log.read(offset, max_bytes, upper_bound=upper, min_one=min_one,
                             region_over=region_over)

    def truncate_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset forward (never past the high watermark)."""
        self.log.delete_records_before(min(offset, self.high_watermark))
        return self.log.log_start_offset

    # ---- long poll -------------------------------------------------------------------------
    def add_waiter(self, fut: Waiter, follower: bool = False) -> None:
        """`follower`: a follower's fetch, woken by appends rather than by commits."""
        (self._fetchers if follower else self._waiters).add(fut)

    def remove_waiter(self, fut: Waiter) -> None:
        self._waiters.discard(fut)
        self._fetchers.discard(fut)

    def notify(self) -> None:
        """Wake every waiter: leadership, the log's tail or its high watermark changed."""
        self._wake(self._waiters)
        self._wake(self._fetchers)

    @staticmethod
    def _wake(waiters: set[Waiter]) -> None:
        for fut in waiters:
            if not fut.done():
                fut.set_result(True)
        waiters.clear()


async def wait_for_any(partitions: Collection[Partition], timeout_s: float,
                       follower: bool = False) -> None:
    """Wait until one of the partitions gets new committed data (`follower`: new data), or a
    change of leadership, or the timeout passes."""
    if timeout_s <= 0 or not partitions:
        return
    loop = asyncio.get_running_loop()
    fut: Waiter = loop.create_future()
    for p in partitions:
        p.add_waiter(fut, follower)
    # The future itself is awaited, with a timer that completes it: a cancellation reaches the
    # waiting task whether or not the future completed meanwhile (3.11's wait_for can swallow
    # one), and no wrapper task, waiter set or callbacks are made per wait, as asyncio.wait
    # makes them: every acks=all produce and every follower fetch waits here.
    timer = loop.call_later(timeout_s, _time_up, fut)
    try:
        await fut
    finally:
        timer.cancel()
        for p in partitions:
            p.remove_waiter(fut)


def _time_up(fut: Waiter) -> None:
    if not fut.done():
        fut.set_result(False)
