"""The consumer's group-facing half: subscribe, commit, committed, lag, and the sync face's
serving of rebalance callbacks.

`GroupConsumer` is a mixin of `AsyncConsumer` (split out to keep `consumer.py` about fetching
and positions): it creates the `GroupMembership` when `group.id` is set and implements the
owner side of its seam (see `group.py`). Rebalance callbacks get the consumer the application
holds (`Consumer` or `AsyncConsumer`) and run only inside `poll` (or `close`/`unsubscribe`):
the asyncio consumer runs them in the task that polls; the sync `Consumer` in the thread that
calls poll, through `serve_callbacks`, never on its event-loop thread, so a callback may call
any consumer method (commit, seek, position) as it would anywhere else.
"""
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .cluster import Cluster
from .config import Config
from .connection import LoopThread
from .fetcher import PartitionState
from .group import GroupMembership, RebalanceCallback
from .group_api import OffsetAndMetadata
from .group_consumer_protocol import ConsumerProtocolMembership
from .group_commit import Offsets
from .transactions import GroupMetadata
from .types import ConfigError, TopicPartition

if TYPE_CHECKING:
    import asyncio

    from .consumer import AsyncConsumer

T = TypeVar("T")

log = logging.getLogger("minilog.client")


class GroupConsumer:
    """Consumer-group API of AsyncConsumer (needs `group.id`)."""
    group_defer_callbacks = False  # the sync Consumer sets True on its core
    # AsyncConsumer's, used here
    config: Config
    _cluster: Cluster
    _states: dict[TopicPartition, PartitionState]
    _isolation: int
    _wakeup: "asyncio.Event"
    _data: "asyncio.Event"
    if TYPE_CHECKING:
        def _state(self, tp: tuple[str, int]) -> PartitionState: ...

        async def beginning_offsets(self, partitions: Iterable[tuple[str, int]],
                                    timeout: float | None = None
                                    ) -> dict[TopicPartition, int]: ...

        async def end_offsets(self, partitions: Iterable[tuple[str, int]],
                              timeout: float | None = None) -> dict[TopicPartition, int]: ...

    def _init_group(self) -> None:
        # what rebalance callbacks get: this core, or the sync Consumer around it
        self.group_face: object = self
        self._group = self._new_membership() if self.config["group.id"] else None
        # the membership unsubscribe() is closing
        self._group_closing: GroupMembership | None = None

    def _new_membership(self) -> GroupMembership:
        membership = ConsumerProtocolMembership if self.config["group.protocol"] == "consumer" \
            else GroupMembership
        return membership(self, self._cluster, self.config, on_commit=self.config["on_commit"])

    def _need_group(self, what: str) -> GroupMembership:
        if self._group is None:
            raise ConfigError(f"{what} needs group.id: the consumer group to join and commit for")
        return self._group

    @property
    def subscribed(self) -> bool:
        return self._group is not None and self._group.active

    def subscribe(self, topics: str | Iterable[str], on_assign: RebalanceCallback | None = None,
                  on_revoke: RebalanceCallback | None = None,
                  on_lost: RebalanceCallback | None = None) -> None:
        """Join the group for `topics` (names, or `^regex` patterns matched against the
        cluster's topics); partitions arrive through poll. Callbacks are called as
        `fn(consumer, [TopicPartition])` from poll: `on_assign` after partitions are added,
        `on_revoke` before they go (positions still readable, commits still accepted),
        `on_lost` when they were taken away already (default: on_revoke)."""
        group = self._need_group("subscribe()")
        if self._states and not group.active:
            raise ValueError("subscribe() and assign() are exclusive: unassign() first")
        group.subscribe(topics, on_assign, on_revoke, on_lost)

    async def unsubscribe(self) -> None:
        """Leave the group (committing first with enable.auto.commit) and drop its partitions."""
        old = self._group
        if old is not None and old.active:
            self._group = self._new_membership()
            self._group_closing = old
            try:
                await old.close()
            finally:
                self._group_closing = None

    def memberid(self) -> str | None:
        """This member's id in the group (None before it joined), as confluent-kafka."""
        if self._group is None or not self._group.active:
            return None
        return self._group.member_id or None

    def consumer_group_metadata(self) -> GroupMetadata:
        """What `Producer.send_offsets_to_transaction` needs to commit this consumer's offsets
        in a transaction (KIP-447: the generation fences a consumer that lost its partitions)."""
        group = self._need_group("consumer_group_metadata()")
        return GroupMetadata(group.group_id, group.generation, group.member_id,
                             group.instance_id)

    async def commit(self, offsets: Mapping[Any, Any] | None = None,
                     asynchronous: bool = False) -> Offsets | None:
        """Commit `offsets` ({tp: offset | OffsetAndMetadata}), by default the positions of the
        assigned partitions. Returns {tp: OffsetAndMetadata} committed; with `asynchronous`
        returns None at once and reports to the `on_commit(error, offsets)` setting."""
        group = self._need_group("commit()")
        if offsets is None:
            offsets = self.group_positions(self._states)
            if not offsets:
                return None if asynchronous else {}
        return await group.commit(offsets, asynchronous)

    async def committed(self, partitions: Iterable[Any], timeout: float | None = None
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """{tp: OffsetAndMetadata, or None when the group has no offset for it}."""
        return await self._need_group("committed()").committed(partitions, timeout)

    def lag(self, tp: tuple[str, int]) -> int | None:
        """Records between the position and the end of the partition, as of the last fetch
        (the last stable offset under read_committed); None until both are known."""
        st = self._state(tp)
        end = st.last_stable_offset if self._isolation and st.last_stable_offset >= 0 \
            else st.high_watermark
        if st.position is None or end < 0:
            return None
        return max(0, end - st.position)

    async def watermarks(self, tp: tuple[str, int], cached: bool = True,
                         timeout: float | None = None) -> tuple[int, int] | None:
        """(log start offset, high watermark) of `tp`: from the last fetch when `cached`
        (None before the first), else asked from the partition's leader."""
        part = TopicPartition(*tp)
        if cached:
            st = self._state(part)
            return None if st.high_watermark < 0 else (st.log_start_offset, st.high_watermark)
        low = await self.beginning_offsets([part], timeout)
        high = await self.end_offsets([part], timeout)
        return low[part], high[part]

    # ---- the GroupMembership seam ------------------------------------------------------------
    def group_assign(self, tps: Iterable[tuple[str, int]]) -> None:
        for tp in tps:
            self._states.setdefault(TopicPartition(*tp), PartitionState())
        self._cluster.track({tp[0] for tp in tps})
        self._wakeup.set()

    def group_unassign(self, tps: Iterable[tuple[str, int]]) -> None:
        for tp in tps:
            self._states.pop(TopicPartition(*tp), None)
        self._wakeup.set()

    def group_positions(self, tps: Iterable[TopicPartition]
                        ) -> dict[TopicPartition, OffsetAndMetadata]:
        """{tp: OffsetAndMetadata(position, "", leader epoch of the record before it)}."""
        return {tp: OffsetAndMetadata(st.position, "", st.offset_epoch) for tp in tps
                if (st := self._states.get(tp)) is not None and st.position is not None}

    def group_notify(self) -> None:
        self._data.set()

    async def _group_poll(self) -> None:
        """Poll's entry: run queued rebalance steps (asyncio face) and raise group errors."""
        if self._group is None:
            return
        if self.group_defer_callbacks:
            self._group.poll()
        else:
            await self._group.serve()

    def _group_waiting(self) -> bool:
        """A rebalance step waits for poll: the sync face returns so its thread can serve it."""
        return self._group is not None and self._group.ready.is_set()


# ---- the sync face ---------------------------------------------------------------------------
class SyncFace(Protocol):
    """The sync Consumer, as the functions below use it."""
    @property
    def _core(self) -> "AsyncConsumer": ...
    @property
    def _loop(self) -> LoopThread: ...


async def _call(fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)


def serve_callbacks(consumer: SyncFace) -> None:
    """Run the queued rebalance steps of a sync Consumer in the calling (poll) thread."""
    core = consumer._core
    groups = [g for g in (core._group, getattr(core, "_group_closing", None))
              if g is not None and g.ready.is_set()]
    error: Exception | None = None
    for group in groups:
        items = consumer._loop.run(_call(group.take_callbacks))
        try:
            for item in items:
                try:
                    if item.pre is not None:
                        consumer._loop.run(item.pre())
                    if item.fn is not None:
                        item.fn(*item.args)
                except Exception as e:  # noqa: BLE001 - raised below, after the rebalance goes on
                    log.warning("%s callback raised %r", item.kind, e)
                    error = error or e
        finally:
            consumer._loop.run(_call(group.finish_callbacks, items))
    if error is not None:
        raise error


def polling(consumer: SyncFace, make: Callable[[float], Coroutine[Any, Any, list[T]]],
            timeout: float, prepare: Callable[[], None] | None = None) -> list[T]:
    """The sync face's poll: serve callbacks, `prepare` (decode what was fetched), poll the
    core, again while callbacks wait or new data came in (the core returns for it)."""
    deadline = time.monotonic() + timeout
    while True:
        serve_callbacks(consumer)
        if prepare is not None:
            prepare()
        out = consumer._loop.run(make(max(0.0, deadline - time.monotonic())))
        if out or (time.monotonic() >= deadline and not consumer._core._group_waiting()):
            return out


def run_serving(consumer: SyncFace, coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` (close, unsubscribe) on the loop while serving its callbacks here."""
    core = consumer._core
    if core._group is None:
        return consumer._loop.run(coro)
    fut = consumer._loop.submit(coro)
    error: Exception | None = None
    while not fut.done():
        closing = getattr(core, "_group_closing", None)
        if core._group.ready.is_set() or (closing is not None and closing.ready.is_set()):
            try:
                serve_callbacks(consumer)
            except Exception as e:  # noqa: BLE001 - finish closing first
                error = error or e
        else:
            time.sleep(0.01)
    result = fut.result()
    if error is not None:
        raise error
    return result
