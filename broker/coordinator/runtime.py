"""The coordinator runtime: one shard per coordinator partition this broker leads.

Kafka's CoordinatorRuntime, shrunk to the broker's event loop. A coordinator partition (of
`__consumer_offsets`, `__transaction_state`, or any topic a shard kind is registered for) is
loaded when this broker becomes its leader (`on_election`, from the metadata publisher in
`coordinator_elections.py`, with the partition's leader epoch): a shard of the topic's kind is
made and every record of the partition is replayed into it through `replay`, the same method
that applies a write. The shard is fenced by the coordinator epoch, the partition's leader epoch when it was
loaded; unloading it (or loading it again at a newer epoch) fails the operations still waiting
with NOT_COORDINATOR. An election or resignation carrying an epoch no newer than the shard's
is a stale view of who leads, and is ignored.

A write is an operation on the shard returning `(records, response)`. The runtime replays the
records into the shard at once, so the next operation sees them; appends them with acks=all,
carrying the epoch they were decided under (the writer refuses the append once the partition's
leader epoch moved); and answers `response` only once the in-sync replicas have the batch. If
the append fails the shard's state is reverted: the runtime keeps the partition's compacted
view (the latest value of every key), so the state at the operation's start is restored by
replaying, newest first, the values its records replaced (Kafka's SnapshotRegistry keeps the
same undo information in its timeline collections). Operations appended after a failed one
are reverted with it: their records came later in the log than a batch that was refused.

The runtime knows no record format: a shard parses its own keys and values; markers of
transactional batches (written to the partition by the transaction coordinator) are replayed
through `replay_marker`.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar

from minilog.connector.protocol import ErrorCode

log = logging.getLogger("minilog.broker.coordinator")

Record = tuple[bytes, "bytes | None"]  # (key, value); a None value is a tombstone
R = TypeVar("R")


class Producer(NamedTuple):
    """The transactional producer a batch is written for."""
    producer_id: int
    producer_epoch: int


class Marker(NamedTuple):
    """A transaction marker met while loading a partition."""
    producer_id: int
    commit: bool


class LoggedBatch(NamedTuple):
    """One batch of a coordinator partition as the loader reads it."""
    records: list[Record]
    producer: Producer | None


class CoordinatorError(Exception):
    """An operation that cannot be answered: `code` is the Kafka error for its caller."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or ErrorCode(code).name)
        self.code: int = code


class PartitionWriter(Protocol):
    """Where the runtime's records go: the coordinator partitions' logs."""

    def append(self, topic: str, index: int, epoch: int, records: list[Record],
               producer: Producer | None) -> tuple[int, int]:
        """Append one batch now if the partition is led at `epoch`: (0 or the error code to
        answer, the batch's last offset)."""

    def wait_for_acks(self, topic: str, index: int, offset: int) -> Awaitable[int]:
        """0 once the in-sync replicas have `offset`, else the error code to answer."""

    def read(self, topic: str, index: int) -> Iterator[LoggedBatch | Marker]:
        """The partition's batches and transaction markers in log order."""


class CoordinatorShard(Protocol):
    """The state of one coordinator partition; changed only by `replay`."""

    def replay(self, key: bytes, value: bytes | None, producer: Producer | None) -> None:
        """Apply one record (a write's or one read back from the log)."""

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """A transaction marker for `producer_id` landed in the partition."""

    def loaded(self) -> None:
        """Every record of the partition has been replayed: start timers and the like."""

    def unloaded(self) -> None:
        """The partition is no longer coordinated here: stop timers, answer parked requests."""


ShardFactory = Callable[[int], CoordinatorShard]


@dataclass
class _Write:
    """A write waiting for its acknowledgement, with what it replaced."""
    undo: list[tuple[bytes, bytes | None, Producer | None]]
    applied: bool = True
    failed: int = 0


@dataclass
class ShardContext:
    """A loaded shard, its coordinator epoch and the bookkeeping of its writes."""
    topic: str
    index: int
    epoch: int
    shard: CoordinatorShard
    values: dict[bytes, bytes] = field(default_factory=dict)  # the compacted view
    txn_values: dict[tuple[int, bytes], bytes] = field(default_factory=dict)
    pending: list[_Write] = field(default_factory=list)
    loading: bool = True
    closed: bool = False

    def replay(self, records: Iterable[Record], producer: Producer | None,
               apply: bool = True) -> _Write:
        """Replay a batch into the shard (unless `apply` is False: the caller already changed
        the state) and remember what each record replaced."""
        undo: list[tuple[bytes, bytes | None, Producer | None]] = []
        for key, value in records:
            if producer is None:
                undo.append((key, self.values.get(key), None))
                if value is None:
                    self.values.pop(key, None)
                else:
                    self.values[key] = value
            else:
                slot = (producer.producer_id, key)
                undo.append((key, self.txn_values.get(slot), producer))
                if value is None:
                    self.txn_values.pop(slot, None)
                else:
                    self.txn_values[slot] = value
            if apply:
                self.shard.replay(key, value, producer)
        return _Write(undo, apply)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        for slot in [s for s in self.txn_values if s[0] == producer_id]:
            value = self.txn_values.pop(slot)
            if commit:
                self.values[slot[1]] = value
        self.shard.replay_marker(producer_id, commit)

    def revert(self, write: _Write, code: int) -> None:
        """Undo `write` and every write appended after it, newest first."""
        if write not in self.pending:
            return
        at = self.pending.index(write)
        for later in reversed(self.pending[at:]):
            later.failed = code
            for key, previous, producer in reversed(later.undo):
                if producer is None:
                    if previous is None:
                        self.values.pop(key, None)
                    else:
                        self.values[key] = previous
                elif previous is None:
                    self.txn_values.pop((producer.producer_id, key), None)
                else:
                    self.txn_values[(producer.producer_id, key)] = previous
                if later.applied:
                    self.shard.replay(key, previous, producer)
        del self.pending[at:]

    def done(self, write: _Write) -> None:
        if write in self.pending:
            self.pending.remove(write)


class CoordinatorRuntime:
    """The shards of the coordinator partitions this broker leads, by (topic, partition)."""

    def __init__(self, writer: PartitionWriter) -> None:
        self.writer = writer
        self._kinds: dict[str, ShardFactory] = {}
        self._shards: dict[tuple[str, int], ShardContext] = {}

    def register(self, topic: str, factory: ShardFactory) -> None:
        """Make `topic`'s partitions coordinator partitions whose shards `factory` makes."""
        self._kinds[topic] = factory

    def kinds(self) -> list[str]:
        return list(self._kinds)

    # -- loading --------------------------------------------------------------------------------
    def load(self, topic: str, index: int, epoch: int) -> CoordinatorShard:
        """Become the coordinator of `topic`-`index` at coordinator `epoch`: a new shard with
        every record of the partition replayed. Loading again at the same epoch keeps the
        shard; at another epoch the old one is unloaded first."""
        current = self._shards.get((topic, index))
        if current is not None and current.epoch == epoch and not current.closed:
            return current.shard
        if current is not None:
            self.unload(topic, index)
        ctx = ShardContext(topic, index, epoch, self._kinds[topic](index))
        self._shards[(topic, index)] = ctx
        batches = 0
        for item in self.writer.read(topic, index):
            if isinstance(item, Marker):
                ctx.replay_marker(item.producer_id, item.commit)
                continue
            batches += 1
            for record in item.records:
                try:
                    ctx.replay([record], item.producer)
                except Exception as e:  # noqa: BLE001 - one bad record must not lose the rest
                    log.warning("skipping unreadable record of %s-%d: %s", topic, index, e)
        ctx.loading = False
        ctx.shard.loaded()
        log.debug("loaded %s-%d at coordinator epoch %d (%d batches)", topic, index, epoch, batches)
        return ctx.shard

    def on_election(self, topic: str, index: int, epoch: int) -> bool:
        """This broker became the leader of `topic`-`index` at leader `epoch` (Kafka's
        scheduleLoadOperation): the shard is loaded, unless it is held at this epoch or a
        newer one already (a late election of a leadership since replaced). Whether it was."""
        ctx = self._shards.get((topic, index))
        if ctx is not None and not ctx.closed and ctx.epoch >= epoch:
            log.debug("ignored the election of %s-%d at epoch %d: held at epoch %d",
                      topic, index, epoch, ctx.epoch)
            return False
        self.load(topic, index, epoch)
        return True

    def on_resignation(self, topic: str, index: int, epoch: int | None) -> bool:
        """This broker no longer leads `topic`-`index`, whose leader epoch is now `epoch`
        (None: the partition is gone). Kafka's scheduleUnloadOperation: the shard is unloaded
        only if it was loaded at an older epoch; a resignation no newer than the shard's
        leadership is a stale view and is ignored. Whether it was unloaded."""
        ctx = self._shards.get((topic, index))
        if ctx is None:
            return False
        if epoch is not None and epoch <= ctx.epoch:
            log.debug("ignored the resignation of %s-%d at epoch %d: held at epoch %d",
                      topic, index, epoch, ctx.epoch)
            return False
        self.unload(topic, index)
        return True

    def unload(self, topic: str, index: int) -> None:
        """Stop coordinating `topic`-`index`: writes still waiting answer NOT_COORDINATOR."""
        ctx = self._shards.pop((topic, index), None)
        if ctx is None:
            return
        ctx.closed = True
        for write in ctx.pending:
            write.failed = ErrorCode.NOT_COORDINATOR
        ctx.pending.clear()
        ctx.shard.unloaded()

    def unload_all(self) -> None:
        for topic, index in list(self._shards):
            self.unload(topic, index)

    # -- looking up -----------------------------------------------------------------------------
    def status(self, topic: str, index: int) -> int:
        """0 if this broker coordinates the partition, else NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS."""
        ctx = self._shards.get((topic, index))
        if ctx is None:
            return int(ErrorCode.NOT_COORDINATOR)
        return int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) if ctx.loading else 0

    def context(self, topic: str, index: int) -> ShardContext | None:
        return self._shards.get((topic, index))

    def shard(self, topic: str, index: int) -> CoordinatorShard | None:
        ctx = self._shards.get((topic, index))
        return None if ctx is None else ctx.shard

    def epoch(self, topic: str, index: int) -> int | None:
        """The coordinator epoch of a loaded partition, None if it is not coordinated here."""
        ctx = self._shards.get((topic, index))
        return None if ctx is None else ctx.epoch

    def committed_values(self, topic: str, index: int) -> dict[bytes, bytes | None]:
        """For each key a write still waiting for its acknowledgement changed, its value
        before that write: what a read at the last committed offset sees (Kafka's timeline
        reads), so a read never answers with what may yet be reverted."""
        ctx = self._shards.get((topic, index))
        before: dict[bytes, bytes | None] = {}
        for write in ctx.pending if ctx is not None else ():
            for key, previous, producer in write.undo:
                if producer is None and key not in before:
                    before[key] = previous
        return before

    def shards(self, topic: str) -> list[tuple[int, CoordinatorShard]]:
        return [(i, ctx.shard) for (t, i), ctx in sorted(self._shards.items()) if t == topic]

    # -- writing --------------------------------------------------------------------------------
    def submit(self, topic: str, index: int, op: Callable[[Any], tuple[list[Record], R]],
               producer: Producer | None = None, replay: bool = True) -> Awaitable[R]:
        """Run `op` on the shard and make its records durable: replayed now, appended with
        acks=all at the shard's epoch (both before this returns, so writes reach the log in
        call order), reverted if the append fails. Returns an awaitable of the operation's
        response, completed once the in-sync replicas have the records. Raises (now or from
        the awaitable) CoordinatorError with the code to answer.

        `replay=False` is for records whose state the operation changed itself (a classic
        group's rebalance, which Kafka's runtime does not replay either); they are still kept
        in the compacted view, so a later failed write reverts to them."""
        ctx = self._shards.get((topic, index))
        error = self.status(topic, index)
        if ctx is None or error:
            raise CoordinatorError(error or ErrorCode.NOT_COORDINATOR)
        records, response = op(ctx.shard)
        if not records:
            return _resolved(response)
        write = ctx.replay(records, producer, replay)
        ctx.pending.append(write)
        code, offset = self.writer.append(topic, index, ctx.epoch, records, producer)
        if code:
            ctx.revert(write, code)
            raise CoordinatorError(code)
        return self._acknowledged(ctx, write, offset, response)

    async def _acknowledged(self, ctx: ShardContext, write: _Write, offset: int, response: R) -> R:
        code = await self.writer.wait_for_acks(ctx.topic, ctx.index, offset)
        if ctx.closed or write.failed:
            raise CoordinatorError(write.failed or ErrorCode.NOT_COORDINATOR)
        if code:
            ctx.revert(write, code)
            raise CoordinatorError(code)
        ctx.done(write)
        return response

    async def write(self, topic: str, index: int, op: Callable[[Any], tuple[list[Record], R]],
                    producer: Producer | None = None, replay: bool = True) -> R:
        """`submit`, awaited."""
        return await self.submit(topic, index, op, producer, replay)

    def append(self, topic: str, index: int, records: list[Record],
               producer: Producer | None = None,
               replay: bool = True) -> tuple[int, Awaitable[int]]:
        """`submit` of records already decided, answered with codes: (0 or the error code of
        an append refused now, an awaitable of 0 once acknowledged or the error code)."""
        try:
            acked = self.submit(topic, index, lambda _: (records, None), producer, replay)
        except CoordinatorError as e:
            return e.code, _resolved(e.code)
        return 0, _code_of(acked)

    def replay_marker(self, topic: str, index: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was appended to a coordinator partition led here."""
        ctx = self._shards.get((topic, index))
        if ctx is not None:
            ctx.replay_marker(producer_id, commit)



async def _resolved(response: R) -> R:
    return response


async def _code_of(acked: Awaitable[Any]) -> int:
    try:
        await acked
    except CoordinatorError as e:
        return e.code
    return 0
