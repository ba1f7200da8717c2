"""`__cluster_metadata` as the Fetch handler and the metadata store see it: a Raft log, not a
replicated partition (Kafka's `KafkaMetadataLog` over the storage layer's log).

It holds the storage log and its leader epoch cache, and the role, leader epoch and high
watermark the Raft core decided, which the driver hands it after every step (`adopt`, from
`RaftNode._sync`; its appends name their epoch); it decides nothing itself and nobody sets
them from outside. A voter's or observer's fetch is judged by the
core (`raft`, asked through `follower_fetched`), and every change wakes every waiter: KRaft
answers a voter's fetch when the high watermark moves, so voters apply commits at once. The
Fetch handler serves it through the same calls as a topic's `Partition` (read, waiters,
epochs), to the quorum's voters and observers only.
"""
from __future__ import annotations

import asyncio
from typing import Any, Optional, Protocol

from minilog.connector.batch import BatchHeader

from ..storage.file_region import FileRegion
from ..storage.leader_epoch_cache import LeaderEpochCache
from ..storage.log import AppendResult, Log
from ..storage.replica_log import ReplicaLog

Waiter = asyncio.Future[bool]


class FetchJudge(Protocol):
    """What judges a fetch of the metadata log: the Raft node (`raft_node.py`)."""

    def follower_fetched(self, replica_id: int, fetch_offset: int,
                         last_fetched_epoch: int) -> Optional[tuple[int, int]]: ...


class QuorumPartition(ReplicaLog):
    epoch_cache: LeaderEpochCache  # the metadata log always keeps one
    wake_all = True  # the Fetch handler answers a voter at once when the high watermark moved

    def __init__(self, topic: str, log: Log, epoch_cache: LeaderEpochCache) -> None:
        self.topic, self.index, self.log, self.epoch_cache = topic, 0, log, epoch_cache
        # What the Raft core decided, copied in by the driver.
        self.leader_epoch = 0
        self.leader_id: Optional[int] = None
        self.is_leader = False
        self.high_watermark: int = log.log_start_offset
        self.raft: Optional[FetchJudge] = None  # set by the Raft node that keeps this log
        self._waiters: set[Waiter] = set()

    @property
    def last_stable_offset(self) -> int:
        """The metadata log holds no transactions: its high watermark."""
        return self.high_watermark

    def adopt(self, epoch: int, leader_id: Optional[int], leading: bool,
              high_watermark: int) -> bool:
        """What the Raft core decided now; whether the high watermark moved forward, which
        wakes every waiter (what waits for commits, and voters' fetches: they apply at once).
        It moves back only with a truncation the core made."""
        self.leader_epoch, self.leader_id, self.is_leader = epoch, leader_id, leading
        advanced = high_watermark > self.high_watermark
        self.high_watermark = high_watermark
        if advanced:
            self.notify()
        return advanced

    # -- the log, as the Raft core writes it (`partition_log.py`) ---------------------------------
    def append_as_leader(self, batches: list[tuple[bytes, BatchHeader]],
                         epoch: int) -> AppendResult:
        """Batches of the leader's `epoch`; every waiter is woken (voters fetch them)."""
        self.leader_epoch = epoch
        result = self.log.append(batches, leader_epoch=self.leader_epoch)
        if not result.duplicate:
            self.epoch_cache.assign(self.leader_epoch, result.first_offset)
        self.notify()
        return result

    # -- what the Fetch handler calls ---------------------------------------------------------------
    def follower_fetched(self, replica_id: int, fetch_offset: int, last_fetched_epoch: int,
                         broker_epoch: int = -1) -> Optional[tuple[int, int]]:
        """A voter's or observer's fetch: (diverging epoch, end offset) or None, the core's
        answer (a broker epoch means nothing to Raft)."""
        if self.raft is None:
            raise RuntimeError("the metadata log is served before its Raft node keeps it")
        return self.raft.follower_fetched(replica_id, fetch_offset, last_fetched_epoch)

    def read(self, offset: int, max_bytes: int, committed_only: bool = True, min_one: bool = True,
             region_over: int | None = None, stable_only: bool = False) -> bytes | FileRegion:
        upper = self.high_watermark if committed_only or stable_only else None
        data: bytes | FileRegion = self.log.read(offset, max_bytes, upper_bound=upper,
                                                 min_one=min_one, region_over=region_over)
        return data

    def add_waiter(self, fut: Waiter, follower: bool = False) -> None:
        self._waiters.add(fut)

    def remove_waiter(self, fut: Waiter) -> None:
        self._waiters.discard(fut)

    def notify(self) -> None:
        """Wake every waiter: the role, the log's tail or the high watermark changed."""
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(True)
        self._waiters.clear()
