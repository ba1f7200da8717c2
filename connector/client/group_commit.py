"""The offsets half of a consumer's group membership: commit (sync, async, auto) and committed.

A mixin of `GroupMembership` (split out to keep each module readable): commits carry the
member's generation so the coordinator rejects those of members the group has moved on from;
what a failed commit means for the membership (rebalance, fenced, lost) is decided here.
"""
import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from minilog.connector.protocol import ErrorCode, KafkaError

from .config import Config
from .connection import BrokerConnection
from .group_api import (
    RETRY_LATER,
    Coordinator,
    GroupOwner,
    OffsetAndMetadata,
    as_offsets,
    commit_offsets,
    fetch_offsets,
)
from .types import TopicPartition

Offsets = dict[TopicPartition, OffsetAndMetadata]

log = logging.getLogger("minilog.client.group")
FENCED = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION})


class GroupCommits:
    # GroupMembership's, which this mixin serves
    config: Config
    owner: GroupOwner
    coordinator: Coordinator
    group_id: str
    instance_id: str | None
    generation: int
    member_id: str
    owned: set[TopicPartition]
    _runner: asyncio.Task[None] | None
    _in_join: bool
    _committed_positions: dict[TopicPartition, int]
    _on_commit: Callable[..., Any] | None
    _spawn: Callable[[Coroutine[Any, Any, Any]], Any]
    _at_poll: Callable[..., Coroutine[Any, Any, None]]
    _request_rejoin: Callable[[str], None]
    _reset_generation: Callable[[str], None]
    _fail: Callable[[KafkaError], None]

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self.config.seconds("default.api.timeout.ms")
                                   if timeout is None else timeout)

    def _positions(self, tps: Iterable[TopicPartition]) -> Offsets:
        return as_offsets({tp: o for tp, o in self.owner.group_positions(tps).items()
                           if o is not None})

    def _commit_generation(self) -> tuple[int, str]:
        if self._runner is None:
            return -1, ""  # not subscribed: a commit for a manually assigned consumer
        if self._in_join:
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS,
                             f"group {self.group_id!r} is rebalancing; commit after it completes")
        if self.generation < 0:
            raise KafkaError(ErrorCode.ILLEGAL_GENERATION,
                             f"not a member of an active generation of group {self.group_id!r}: "
                             "its partitions may already belong to other members")
        return self.generation, self.member_id

    async def commit(self, offsets: Mapping[Any, Any] | None = None, asynchronous: bool = False,
                     timeout: float | None = None) -> Offsets | None:
        """Commit `offsets` ({tp: offset | OffsetAndMetadata}; default: the positions of the
        assigned partitions). Sync returns what was committed; async returns None and reports
        to `on_commit(error, offsets)` from poll."""
        offsets = self._positions(self.owned) if offsets is None else as_offsets(offsets)
        if not offsets:
            return None if asynchronous else {}
        if asynchronous:
            self._spawn(self._commit_async(offsets))
            return None
        return await self._commit_sync(offsets, self._deadline(timeout))

    async def _commit_sync(self, offsets: Offsets, deadline: float) -> Offsets:
        generation, member_id = self._commit_generation()

        async def attempt(conn: BrokerConnection) -> Offsets:
            codes = await commit_offsets(conn, self.group_id, offsets, generation, member_id,
                                         self.instance_id if self._runner else None)
            failed = {tp: c for tp, c in codes.items() if c}
            if failed:
                tp, code = next(iter(failed.items()))
                if code not in RETRY_LATER:
                    self._commit_failed(code, generation)
                raise KafkaError(code, f"committing offsets of group {self.group_id!r} ({tp})")
            return offsets
        result = await self.coordinator.call(attempt, deadline, "OffsetCommit", "offsets")
        for tp, om in offsets.items():
            self._committed_positions[tp] = om.offset
        return result

    async def _commit_async(self, offsets: Offsets, auto: bool = False) -> None:
        if auto:  # only what moved since the last commit
            offsets = {tp: om for tp, om in offsets.items()
                       if self._committed_positions.get(tp) != om.offset}
            if not offsets:
                return
        err: KafkaError | None = None
        try:
            await self._commit_sync(offsets, self._deadline(None))
        except KafkaError as e:
            err = e
            log.log(logging.DEBUG if auto else logging.WARNING,
                    "group %s: %s commit failed: %s", self.group_id, "auto" if auto else "async", e)
        if self._on_commit is not None:
            await self._at_poll("commit", self._on_commit, (err, offsets), wait=False)

    def _commit_failed(self, code: int, generation: int) -> None:
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            self._request_rejoin("commit found the group rebalancing")
        elif code in FENCED and generation == self.generation and generation >= 0:
            self._reset_generation(f"commit: {ErrorCode(code).name}")
        elif code == ErrorCode.FENCED_INSTANCE_ID:
            self._fail(KafkaError(code, f"group.instance.id {self.instance_id!r} was fenced"))

    async def committed(self, partitions: Iterable[Any], timeout: float | None = None
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """{tp: OffsetAndMetadata or None} committed by the group."""
        tps = [TopicPartition(*tp) for tp in partitions]
        stable = self.config["isolation.level"] == "read_committed"
        return await self.coordinator.call(
            lambda conn: fetch_offsets(conn, self.group_id, tps, stable),
            self._deadline(timeout), "OffsetFetch", "offsets")
