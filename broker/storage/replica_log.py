"""A log as one replica of it holds it: the storage log, its leader epoch cache and the high
watermark, with what every replica does to them alike (Kafka's `UnifiedLog` duties a follower
calls: append the leader's batches at its offsets and epochs, truncate a divergent tail, start
over behind the leader's log start).

A topic's `Partition` (replication) and the metadata log's `QuorumPartition` (Raft) are both
replicas of a log and differ in who decides their role and high watermark (the replica manager,
the Raft core): they share this, not each other.
"""
from minilog.connector.batch import iter_batches

from .leader_epoch_cache import LeaderEpochCache
from .log import AppendResult, Log


class ReplicaLog:
    """The base of both replicas: `topic`, `index`, `log`, `epoch_cache` (None for a single
    broker's partition, which keeps none) and `high_watermark`, set by the subclass."""

    topic: str
    index: int
    log: Log
    epoch_cache: LeaderEpochCache | None
    high_watermark: int

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.topic}-{self.index})"

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def append_as_follower(self, data: bytes) -> AppendResult | None:
        """Batches fetched from the leader, at the leader's offsets and epochs."""
        result = self.log.append_as_follower(data)
        if result is not None and self.epoch_cache is not None:
            self.epoch_cache.assign_batches(h for _, h in iter_batches(data))
        return result

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Behind the leader's log start: drop everything and continue from `offset`."""
        self.log.truncate_fully_and_start_at(offset)
        if self.epoch_cache is not None:
            self.epoch_cache.clear()
        self.high_watermark = offset

    def truncate_to(self, offset: int) -> None:
        """Cut a divergent tail (after a leader change); the high watermark never exceeds it."""
        self.log.truncate_to(offset)
        if self.epoch_cache is not None:
            self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
