"""A controller operation's outcome, and where it waits for its records to commit (Kafka's
ControllerResult and the QuorumController's purgatory, DeferredEventQueue).

An operation decides against the controller's working view and returns the records it wants
written plus the response it will give; it changes nothing itself. The store appends the
records and parks the response under the offset of the last one; each commit completes every
response at or below the committed offset, in order, and losing the leadership fails those
left with NotController (their records may never commit). An operation without records (a read,
or a heartbeat that changes nothing) still waits for whatever the controller appended before
it: it answered from a view holding those records. So every handler waits for commit in this
one place, with no timeout of its own.
"""
from __future__ import annotations

import asyncio
import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..raft.raft_node import NotLeader
from .records import Record

T = TypeVar("T")


class NotController(NotLeader):
    """The controller lost the leadership before the records committed (or was not leading)."""


@dataclass(frozen=True)
class ControllerResult(Generic[T]):
    """The records an operation wants committed, and its response once they are."""
    records: Sequence[Record]
    response: T

    @classmethod
    def of(cls, response: T, recs: Sequence[Record] = ()) -> ControllerResult[T]:
        return cls(list(recs), response)


@dataclass
class ControllerPurgatory:
    """Responses waiting for an offset to commit, completed in offset order."""
    committed: int = -1  # the last committed offset seen
    _offsets: list[int] = field(default_factory=list)
    _waiting: list[tuple[asyncio.Future[Any], Any]] = field(default_factory=list)

    def wait_for(self, offset: int, response: T) -> asyncio.Future[T]:
        """A future of `response`, done once `offset` is committed."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if offset <= self.committed:
            fut.set_result(response)
            return fut
        at = bisect.bisect_right(self._offsets, offset)
        self._offsets.insert(at, offset)
        self._waiting.insert(at, (fut, response))
        return fut

    def complete_up_to(self, offset: int) -> None:
        """Everything at or below `offset` is committed."""
        self.committed = max(self.committed, offset)
        done = bisect.bisect_right(self._offsets, offset)
        ready, self._waiting = self._waiting[:done], self._waiting[done:]
        del self._offsets[:done]
        for fut, response in ready:
            if not fut.done():
                fut.set_result(response)

    def fail_all(self, reason: str) -> None:
        """The leadership is lost: nothing waiting may count on its records."""
        waiting, self._waiting, self._offsets = self._waiting, [], []
        for fut, _ in waiting:
            if not fut.done():
                fut.set_exception(NotController(reason))

    def reset(self) -> None:
        """The log is replayed from its start: offsets count again from there."""
        self.committed = -1

    def __len__(self) -> int:
        return len(self._waiting)
