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

from .config import ConfigError
from .fetcher import PartitionState
from .group import GroupMembership
from .group_consumer_protocol import ConsumerProtocolMembership
from .group_api import OffsetAndMetadata
from .transactions import GroupMetadata
from .types import TopicPartition

log = logging.getLogger("minilog.client")


class GroupConsumer:
    """Consumer-group API of AsyncConsumer (needs `group.id`)."""
    group_defer_callbacks = False  # the sync Consumer sets True on its core

    def _init_group(self):
        self.group_face = self
        self._group = self._new_membership() if self.config["group.id"] else None
        self._group_closing = None  # the membership unsubscribe() is closing

    def _new_membership(self):
        membership = ConsumerProtocolMembership if self.config["group.protocol"] == "consumer" \
            else GroupMembership
        return membership(self, self._cluster, self.config, on_commit=self.config["on_commit"])

    def _need_group(self, what):
        if self._group is None:
            raise ConfigError(f"{what} needs group.id: the consumer group to join and commit for")
        return self._group

    @property
    def subscribed(self):
        return self._group is not None and self._group.active

    def subscribe(self, topics, on_assign=None, on_revoke=None, on_lost=None):
        """Join the group for `topics` (names, or `^regex` patterns matched against the
        cluster's topics); partitions arrive through poll. Callbacks are called as
        `fn(consumer, [TopicPartition])` from poll: `on_assign` after partitions are added,
        `on_revoke` before they go (positions still readable, commits still accepted),
        `on_lost` when they were taken away already (default: on_revoke)."""
        group = self._need_group("subscribe()")
        if self._states and not group.active:
            raise ValueError("subscribe() and assign() are exclusive: unassign() first")
        group.subscribe(topics, on_assign, on_revoke, on_lost)

    async def unsubscribe(self):
        """Leave the group (committing first with enable.auto.commit) and drop its partitions."""
        if self.subscribed:
            old, self._group = self._group, self._new_membership()
            self._group_closing = old
            try:
                await old.close()
            finally:
                self._group_closing = None

    def memberid(self):
        """This member's id in the group (None before it joined), as confluent-kafka."""
        if not self.subscribed:
            return None
        return self._group.member_id or None

    def consumer_group_metadata(self):
        """What `Producer.send_offsets_to_transaction` needs to commit this consumer's offsets
        in a transaction (KIP-447: the generation fences a consumer that lost its partitions)."""
        group = self._need_group("consumer_group_metadata()")
        return GroupMetadata(group.group_id, group.generation, group.member_id,
                             group.instance_id)

    async def commit(self, offsets=None, asynchronous=False):
        """Commit `offsets` ({tp: offset | OffsetAndMetadata}), by default the positions of the
        assigned partitions. Returns {tp: OffsetAndMetadata} committed; with `asynchronous`
        returns None at once and reports to the `on_commit(error, offsets)` setting."""
        group = self._need_group("commit()")
        if offsets is None:
            offsets = self.group_positions(self._states)
            if not offsets:
                return None if asynchronous else {}
        return await group.commit(offsets, asynchronous)

    async def committed(self, partitions, timeout=None):
        """{tp: OffsetAndMetadata, or None when the group has no offset for it}."""
        return await self._need_group("committed()").committed(partitions, timeout)

    def lag(self, tp):
        """Records between the position and the end of the partition, as of the last fetch
        (the last stable offset under read_committed); None until both are known."""
        st = self._state(tp)
        end = st.last_stable_offset if self._isolation and st.last_stable_offset >= 0 \
            else st.high_watermark
        if st.position is None or end < 0:
            return None
        return max(0, end - st.position)

    async def watermarks(self, tp, cached=True, timeout=None):
        """(log start offset, high watermark) of `tp`: from the last fetch when `cached`
        (None before the first), else asked from the partition's leader."""
        tp = TopicPartition(*tp)
        if cached:
            st = self._state(tp)
            return None if st.high_watermark < 0 else (st.log_start_offset, st.high_watermark)
        low = await self.beginning_offsets([tp], timeout)
        high = await self.end_offsets([tp], timeout)
        return low[tp], high[tp]

    # ---- the GroupMembership seam ------------------------------------------------------------
    def group_assign(self, tps):
        for tp in tps:
            self._states.setdefault(TopicPartition(*tp), PartitionState())
        self._cluster.track({tp[0] for tp in tps})
        self._wakeup.set()

    def group_unassign(self, tps):
        for tp in tps:
            self._states.pop(TopicPartition(*tp), None)
        self._wakeup.set()

    def group_positions(self, tps):
        """{tp: OffsetAndMetadata(position, "", leader epoch of the record before it)}."""
        return {tp: OffsetAndMetadata(st.position, "", st.offset_epoch) for tp in tps
                if (st := self._states.get(tp)) is not None and st.position is not None}

    def group_notify(self):
        self._data.set()

    async def _group_poll(self):
        """Poll's entry: run queued rebalance steps (asyncio face) and raise group errors."""
        if self._group is None:
            return
        if self.group_defer_callbacks:
            self._group.poll()
        else:
            await self._group.serve()

    def _group_waiting(self):
        """A rebalance step waits for poll: the sync face returns so its thread can serve it."""
        return self._group is not None and self._group.ready.is_set()


# ---- the sync face ---------------------------------------------------------------------------
async def _call(fn, *args):
    return fn(*args)


def serve_callbacks(consumer):
    """Run the queued rebalance steps of a sync Consumer in the calling (poll) thread."""
    core = consumer._core
    groups = [g for g in (core._group, getattr(core, "_group_closing", None))
              if g is not None and g.ready.is_set()]
    error = None
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


def polling(consumer, make, timeout):
    """The sync face's poll: serve callbacks, poll the core, again while callbacks wait."""
    deadline = time.monotonic() + timeout
    while True:
        serve_callbacks(consumer)
        out = consumer._loop.run(make(max(0.0, deadline - time.monotonic())))
        if out or (time.monotonic() >= deadline and not consumer._core._group_waiting()):
            return out


def run_serving(consumer, coro):
    """Run `coro` (close, unsubscribe) on the loop while serving its callbacks here."""
    core = consumer._core
    if core._group is None:
        return consumer._loop.run(coro)
    fut = consumer._loop.submit(coro)
    error = None
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
