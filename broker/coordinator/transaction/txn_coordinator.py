"""The transaction coordinator (KIP-98): transactional ids, their producers and transactions.

The coordinator of a transactional id is the leader of partition `partition_for(id)` of
`__transaction_state`, as a group's is for `__consumer_offsets`, and it loads and unloads those
partitions as leadership moves (the metadata publisher in `coordinator_elections.py` tells it,
with the leader epoch): each is a `TransactionShard` of the coordinator runtime (`runtime.py`),
whose state changes only by replaying its records. Every
state change is one record written there with acks=all, replayed at once, reverted if the
append fails, and answered once acknowledged (`txn_state.py` has the record and the rules). EndTxn writes PREPARE_COMMIT / PREPARE_ABORT and answers; the markers then go to
every partition of the transaction (`txn_markers.py`), and COMPLETE_* is written once all have
them. A coordinator that loads a partition finishes the transactions it finds prepared, and
aborts those left open past their timeout (`transaction.abort.timed.out.transaction.cleanup.
interval.ms`). Everything runs on the broker's event loop: a transactional id with a write in
flight (`pending`) answers CONCURRENT_TRANSACTIONS, which clients retry.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from typing import Any

from minilog.connector.protocol import ErrorCode

from ...metadata.internal_topics import TRANSACTION_STATE
from ...metadata.producer_ids import ProducerIdsUnavailable
from ..broker_view import TxnBroker
from ..coordinator_topic import CoordinatorTopic, partition_for
from ..group.group_store import OFFSETS_TOPIC
from ..partition_writer import LogPartitionWriter
from ..runtime import CoordinatorRuntime
from ..shard_view import ShardStateView
from . import txn_markers
from .txn_markers import TopicPartition
from . import txn_state as s
from .txn_marker_channel import MarkerChannel
from .txn_shard import TransactionShard
from .txn_state import TxnMetadata, txn_key, txn_value
from .txn_waiters import StateWaiters

TRANSACTION_TOPIC = TRANSACTION_STATE.name
log = logging.getLogger("minilog.broker.txn")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def transaction_topic(broker: Any) -> CoordinatorTopic:
    """`__transaction_state`: the coordinator's log, with its own partition count and
    `transaction.state.log.min.isr`."""
    return CoordinatorTopic(broker, TRANSACTION_STATE)


def create_transaction_topic(broker: TxnBroker) -> tuple[int, str | None, object]:
    """Create `__transaction_state` with its own settings (on the controller, or the single
    broker): transaction.state.log.replication.factor replicas, at most one per voter in
    combined mode, and not before that many brokers are registered."""
    wanted = broker.config["transaction.state.log.replication.factor"]
    if broker.is_broker:
        wanted = min(wanted, len(broker.quorum.raft.voters))
    if len(broker.metadata.brokers) < wanted:
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                f"{TRANSACTION_TOPIC} needs {wanted} brokers", None)
    code, message, ts = broker.topics.create(
        TRANSACTION_TOPIC, broker.config["transaction.state.log.num.partitions"], wanted,
        transaction_topic(broker).topic_configs(wanted), internal=True)
    if code == 0 and ts is not None:  # (a TopicState comes with every success)
        log.info("created %s with %d partitions", TRANSACTION_TOPIC, len(ts.partitions))
    return code, message, ts


# A two-phase (KIP-939) transaction's timeout: it waits for its external coordinator forever.
TWO_PHASE_TIMEOUT_MS = 2**31 - 1


class TransactionCoordinator:
    def __init__(self, broker: TxnBroker, runtime: CoordinatorRuntime | None = None) -> None:
        cfg = broker.config
        self.broker = broker
        self.store = transaction_topic(broker)
        self.runtime = runtime or CoordinatorRuntime(
            LogPartitionWriter(broker, cfg["offsets.commit.timeout.ms"]))
        self.runtime.register(TRANSACTION_TOPIC, lambda index: TransactionShard(self, index))
        self.txns = ShardStateView(self.runtime, TRANSACTION_TOPIC, self.store.partition_for,
                                   "txns")
        self.max_timeout_ms = cfg["transaction.max.timeout.ms"]
        self.two_phase_enabled = cfg["transaction.two.phase.commit.enable"]
        self.expiration_ms = cfg["transactional.id.expiration.ms"]
        self.abort_interval_ms = cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self._tasks: set[asyncio.Task[None]] = set()
        self.markers = MarkerChannel(broker)
        self.waiters = StateWaiters()  # AddPartitionsToTxn waiting for a completion
        self._timer: asyncio.Task[None] | None = None
        self._active = False

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> TransactionCoordinator:
        """Serve; partitions are loaded as the metadata elects this broker (`on_election`)."""
        return self.serve([])

    def serve(self, partitions: list[int]) -> TransactionCoordinator:
        """Load `partitions` (led here) and start serving and aborting timed-out transactions."""
        for index in partitions:
            self.load_partition(index)
        self._active = True
        self._timer = asyncio.create_task(self._abort_timed_out_periodically())
        return self

    async def stop(self) -> None:
        self._active = False
        for task in [self._timer, *self._tasks]:
            if task:
                task.cancel()
        await asyncio.gather(*[t for t in [self._timer, *self._tasks] if t],
                             return_exceptions=True)
        await self.markers.close()
        self.runtime.unload_all()
        self.waiters.changed_all()

    @property
    def active(self) -> bool:
        return self._active

    def ensure_topic(self) -> bool:
        """Whether `__transaction_state` exists; if not, have it created (as Kafka does on
        the first FindCoordinator for a transactional id) and answer when it is there."""
        if TRANSACTION_TOPIC in self.broker.metadata.topics:
            return True
        if self.broker.quorum.is_controller:
            create_transaction_topic(self.broker)
        else:
            self.broker.router.auto_create(TRANSACTION_TOPIC)
        return False

    def load_partition(self, index: int) -> None:
        """Coordinate the transactional ids of partition `index`, now led here: its records
        replayed into a new shard, fenced by the partition's leader epoch (the coordinator
        epoch its markers carry)."""
        partition = self.broker.partition(TRANSACTION_TOPIC, index)
        self.runtime.load(TRANSACTION_TOPIC, index, partition.leader_epoch if partition else 0)

    def resume(self, loaded: list[TxnMetadata]) -> None:
        """A partition was loaded: finish the transactions the previous coordinator prepared."""
        for md in loaded:
            if md.state in (s.PREPARE_COMMIT, s.PREPARE_ABORT):
                log.info("finishing %s of %r left by the previous coordinator", md.state,
                         md.transactional_id)
                self._spawn(self._complete(md))

    def on_election(self, index: int, epoch: int) -> None:
        """This broker leads `__transaction_state` partition `index` at leader `epoch` (Kafka's
        onElection, from the metadata publisher): loaded unless already at that epoch or a
        newer one; the epoch is the coordinator epoch its markers carry."""
        self.runtime.on_election(TRANSACTION_TOPIC, index, epoch)

    def on_resignation(self, index: int, epoch: int | None) -> None:
        """...and no longer leads it (Kafka's onResignation): unloaded unless it was loaded at
        `epoch` or a newer one."""
        self.runtime.on_resignation(TRANSACTION_TOPIC, index, epoch)

    def unload_partition(self, index: int) -> None:
        self.runtime.unload(TRANSACTION_TOPIC, index)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def validate(self, txn_id: str | None) -> int:
        if not txn_id:
            return ErrorCode.INVALID_REQUEST
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self.runtime.status(TRANSACTION_TOPIC, self.store.partition_for(txn_id))

    def _epoch(self, txn_id: str) -> int | None:
        """The coordinator epoch of `txn_id`'s partition, None once it is not led here."""
        return self.runtime.epoch(TRANSACTION_TOPIC, self.store.partition_for(txn_id))

    def _still_owns(self, txn_id: str, epoch: int | None) -> Any:
        return lambda: self._epoch(txn_id) == epoch

    async def _write(self, md: TxnMetadata) -> int:
        """Store `md` (acks=all): replayed at once, so it is the state while the write is in
        flight (`pending`: other requests of the id wait); 0 once acknowledged, or the error
        (the state reverted)."""
        return await self._store(md.transactional_id, txn_value(md), md.state)

    async def _store(self, txn_id: str, value: bytes | None, pending: str) -> int:
        code, acked = self.runtime.append(TRANSACTION_TOPIC, self.store.partition_for(txn_id),
                                          [(txn_key(txn_id), value)])
        live = None if code else self.txns.get(txn_id)
        if live is not None:
            live.pending = pending
        code = await acked
        if live is not None:
            live.pending = None
        self.waiters.changed(txn_id)
        return code

    # -- DescribeTransactions, ListTransactions -------------------------------------------------
    def describe(self, txn_id: str) -> tuple[int, TxnMetadata | None]:
        error = self.validate(txn_id)
        if error:
            return error, None
        md = self.txns.get(txn_id)
        if md is None or md.producer_epoch < 0:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return 0, md

    def list(self, states: set[str], producer_ids: set[int], min_duration_ms: int) -> list[TxnMetadata]:
        """The transactional ids loaded here, filtered as ListTransactions asks (a duration
        keeps those open for longer than it)."""
        now = now_ms()
        return [md for md in self.txns.values() if md.producer_epoch >= 0
                and (not states or md.state in states)
                and (not producer_ids or md.producer_id in producer_ids)
                and (min_duration_ms < 0 or (md.state == s.ONGOING
                                             and now - md.start_ms > min_duration_ms))]

    # -- InitProducerId -------------------------------------------------------------------------
    async def init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int,
                               epoch: int, two_phase: bool = False,
                               keep_prepared: bool = False) -> tuple[int, int, int, tuple[int, int]]:
        """(error, producer id, epoch, the kept transaction's (producer id, epoch) or (-1, -1))
        for a transactional producer starting (or bumping its epoch after an abortable error,
        KIP-360: `producer_id` >= 0).

        KIP-939: `two_phase` (Enable2Pc, refused unless transaction.two.phase.commit.enable)
        makes this producer's transactions never time out; `keep_prepared` (KeepPreparedTxn)
        keeps an open transaction instead of aborting it, and answers its producer id and
        epoch, under which the new instance may commit or abort it. Kept, it is not fenced by
        an epoch bump: the two-phase coordinator decides its fate."""
        if not self.validate(txn_id) and not self._settled(txn_id):
            # The id's previous transaction is completing (its markers going out, as right
            # after another process's EndTxn of the transaction this producer prepared):
            # answered once it is complete (txn_waiters.py) rather than with
            # CONCURRENT_TRANSACTIONS, which costs the producer its retry backoff.
            await self.waiters.until(txn_id, lambda: self._settled(txn_id))
        code, pid, epoch_ = await self._init_producer_id(txn_id, timeout_ms, producer_id, epoch,
                                                         two_phase, keep_prepared)
        kept = (pid, epoch_) if code == 0 and keep_prepared and \
            self.txns[txn_id].state == s.ONGOING else (-1, -1)
        return code, pid, epoch_, kept

    async def _init_producer_id(self, txn_id: str, timeout_ms: int, producer_id: int,
                                epoch: int, two_phase: bool,
                                keep_prepared: bool) -> tuple[int, int, int]:
        error = self.validate(txn_id)
        if error:
            return error, -1, -1
        if (two_phase or keep_prepared) and not self.two_phase_enabled:
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1
        if keep_prepared and not two_phase:
            return ErrorCode.INVALID_REQUEST, -1, -1
        if two_phase:
            timeout_ms = TWO_PHASE_TIMEOUT_MS
        elif not 0 < timeout_ms <= self.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        md = self.txns.get(txn_id)
        now = now_ms()
        if md is None:
            try:
                pid = await self.broker.producer_ids.next_id()
            except ProducerIdsUnavailable:
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, -1
            md = self.txns.get(txn_id) or TxnMetadata(txn_id, pid, -1, timeout_ms, s.EMPTY,
                                                      update_ms=now)
            self.txns.setdefault(txn_id, md)
        if md.pending is not None or md.state in (s.PREPARE_COMMIT, s.PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if producer_id >= 0:
            if producer_id == md.producer_id and epoch == md.last_producer_epoch and \
                    md.state == s.EMPTY:
                return 0, md.producer_id, md.producer_epoch  # a retried bump: already done
            if producer_id != md.producer_id or epoch != md.producer_epoch:
                return ErrorCode.PRODUCER_FENCED, -1, -1
        if md.state == s.ONGOING and keep_prepared:
            return 0, md.producer_id, md.producer_epoch
        if md.state == s.ONGOING:
            # A new producer instance fences the old one: its transaction is aborted under a
            # new epoch, and the new instance retries until that is done.
            fenced = md.to(s.PREPARE_ABORT, now, producer_epoch=md.producer_epoch + 1,
                           last_producer_epoch=md.producer_epoch)
            code = await self._write(fenced)
            if code == 0:
                self._spawn(self._complete(fenced))
            return code or ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        new_pid = None
        if md.producer_epoch >= s.MAX_EPOCH:
            try:
                new_pid = await self.broker.producer_ids.next_id()
            except ProducerIdsUnavailable:
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, -1
        new = replace(s.bumped(md, new_pid, now), timeout_ms=timeout_ms)
        code = await self._write(new)
        if code:
            return code, -1, -1
        return 0, new.producer_id, new.producer_epoch

    # -- AddPartitionsToTxn, AddOffsetsToTxn ----------------------------------------------------
    def _producer_txn(self, txn_id: str, producer_id: int,
                      epoch: int) -> tuple[int, TxnMetadata | None]:
        """(error, metadata) of `txn_id` for a request of this producer id and epoch: the
        error if this broker is not its coordinator, it is unknown, or the producer is not its
        current one."""
        error = self.validate(txn_id)
        if error:
            return error, None
        md: TxnMetadata | None = self.txns.get(txn_id)
        if md is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        return s.producer_error(md, producer_id, epoch), md

    async def add_partitions(self, txn_id: str, producer_id: int, epoch: int,
                             partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        error, md = self._producer_txn(txn_id, producer_id, epoch)
        if md is not None and not error and s.add_error(md) == ErrorCode.CONCURRENT_TRANSACTIONS:
            await self.waiters.until(txn_id, lambda: self._settled(txn_id))  # txn_waiters.py
            error, md = self._producer_txn(txn_id, producer_id, epoch)
        error = error or (ErrorCode.UNKNOWN_SERVER_ERROR if md is None else s.add_error(md))
        if error or md is None:  # (md is None with an error only)
            return dict.fromkeys(partitions, error)
        topics = self.broker.metadata.topics
        unknown = [tp for tp in partitions
                   if tp[0] not in topics or tp[1] not in topics[tp[0]].partitions]
        if unknown:
            return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                    else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in partitions}
        wanted = md.partitions | set(partitions)
        if md.state == s.ONGOING and wanted == md.partitions:
            return dict.fromkeys(partitions, 0)
        now = now_ms()
        start = md.start_ms if md.state == s.ONGOING else now
        code = await self._write(md.to(s.ONGOING, now, partitions=frozenset(wanted),
                                       start_ms=start))
        return dict.fromkeys(partitions, code)

    def _settled(self, txn_id: str) -> bool:
        """Whether `txn_id` has no transaction completing nor a write in flight."""
        md = self.txns.get(txn_id)
        return md is None or (md.pending is None and
                              md.state not in (s.PREPARE_COMMIT, s.PREPARE_ABORT))

    def verify_partitions(self, txn_id: str, producer_id: int, epoch: int,
                          partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """KIP-890 part 1, AddPartitionsToTxn v4 with VerifyOnly (a partition leader asking):
        0 for each partition the producer's ongoing transaction has added, INVALID_TXN_STATE
        for the others; the producer's own error (fenced, unknown) for all."""
        error, md = self._producer_txn(txn_id, producer_id, epoch)
        if error or md is None:  # (md is None with an error only)
            return dict.fromkeys(partitions, error)
        ongoing = md.partitions if md.state == s.ONGOING else frozenset()
        return {tp: 0 if tp in ongoing else ErrorCode.INVALID_TXN_STATE for tp in partitions}

    async def add_offsets(self, txn_id: str, producer_id: int, epoch: int, group_id: str) -> int:
        index = partition_for(group_id, self.broker.config["offsets.topic.num.partitions"]) \
            if self.broker.groups is None else self.broker.groups.store.partition_for(group_id)
        results = await self.add_partitions(txn_id, producer_id, epoch, [(OFFSETS_TOPIC, index)])
        return next(iter(results.values()))

    # -- EndTxn ---------------------------------------------------------------------------------
    async def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool) -> int:
        error, md = self._producer_txn(txn_id, producer_id, epoch)
        if error or md is None:  # (md is None with an error only)
            return error
        error, prepare = s.end_decision(md, commit)
        if error or prepare is None:
            return error
        prepared = md.to(prepare, now_ms())
        code = await self._write(prepared)
        if code == 0:
            self._spawn(self._complete(prepared))
        return code

    async def _complete(self, prepared: TxnMetadata) -> None:
        """Markers to every partition of a prepared transaction, then COMPLETE_*."""
        commit = prepared.state == s.PREPARE_COMMIT
        txn_id = prepared.transactional_id
        coordinator_epoch = self._epoch(txn_id)
        if coordinator_epoch is None:
            return  # no longer coordinated here: the next coordinator finishes it
        marker = txn_markers.TxnMarker(prepared.producer_id, prepared.producer_epoch,
                                       coordinator_epoch, commit, tuple(prepared.partitions))
        delivered = await txn_markers.deliver(self.broker, self.markers, marker,
                                              self._still_owns(txn_id, coordinator_epoch))
        if not delivered:
            return  # the next coordinator finishes it
        while self._epoch(txn_id) == coordinator_epoch and not self.broker.stopping:
            current = self.txns.get(txn_id)
            if current is None or current.state != prepared.state:
                return
            code = await self._write(current.to(
                s.COMPLETE_COMMIT if commit else s.COMPLETE_ABORT, now_ms(),
                partitions=frozenset()))
            if code == 0:
                log.debug("%s of %r complete", "commit" if commit else "abort", txn_id)
                return
            await asyncio.sleep(txn_markers.RETRY_BACKOFF_S)

    # -- timeouts -------------------------------------------------------------------------------
    async def _abort_timed_out_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.abort_interval_ms / 1000)
            await self.abort_timed_out(now_ms())
            await self.expire_transactional_ids(now_ms())

    async def expire_transactional_ids(self, now: int) -> None:
        """Forget the transactional ids with no open transaction and no request for longer than
        `transactional.id.expiration.ms` (Kafka's default: 7 days): a tombstone in
        `__transaction_state`, so no coordinator loads them again. The next InitProducerId of
        such an id starts it afresh, under a new producer id."""
        for md in list(self.txns.values()):
            txn_id = md.transactional_id
            if md.state not in (s.EMPTY, s.COMPLETE_COMMIT, s.COMPLETE_ABORT) or \
                    md.pending is not None or now - md.update_ms <= self.expiration_ms or \
                    self.validate(txn_id):
                continue
            if await self._store(txn_id, None, s.DEAD) == 0:
                log.info("transactional id %r expired", txn_id)

    async def abort_timed_out(self, now: int) -> None:
        """Abort every open transaction past its timeout, under a bumped epoch so that its
        producer is fenced (as Kafka's coordinator does)."""
        for md in list(self.txns.values()):
            if md.state != s.ONGOING or md.pending is not None or \
                    now - md.start_ms <= md.timeout_ms or self.validate(md.transactional_id):
                continue
            log.info("aborting transaction of %r: open for more than %d ms",
                     md.transactional_id, md.timeout_ms)
            fenced = md.to(s.PREPARE_ABORT, now, producer_epoch=md.producer_epoch + 1,
                           last_producer_epoch=md.producer_epoch)
            if await self._write(fenced) == 0:
                self._spawn(self._complete(fenced))
