"""The transactional producer (KIP-98, KIP-447), with confluent-kafka's method names.

`Transactions` belongs to one `AsyncProducer` with a `transactional.id`. It finds the
transaction coordinator (FindCoordinator key type 1), gets the producer id and epoch
(`init_transactions`), adds each partition to the transaction before the sender's first batch
to it (AddPartitionsToTxn; the sender asks `ready(tp)` and waits), sends consumer offsets with
the transaction (AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator) and ends it
(EndTxn, after every record of the transaction is acknowledged).

Two-phase commit (KIP-939's client calls): `prepare_transaction` flushes every record of the
open transaction and leaves it open, returning its `PreparedTxnState`; another process that
holds that state completes it (`AdminClient.complete_transaction`: EndTxn under the prepared
producer id and epoch). A newer `init_transactions` with the same transactional.id fences the
preparing producer and aborts what it prepared, unless that was completed first.

Errors are classified as librdkafka does: *fatal* (fenced by a newer instance, an invalid
timeout, no authorization: the producer cannot go on, make a new one), *abortable* (a record
or a partition failed: `abort_transaction()` and begin again), or retried here within the
call's timeout (the coordinator moving or loading, CONCURRENT_TRANSACTIONS).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError

from .cluster import Cluster
from .config import Config
from .connection import BrokerConnection
from .group_api import TXN_KEY_TYPE, Coordinator, OffsetAndMetadata, _m, as_offsets
from .types import KafkaTimeoutError, TopicPartition

T = TypeVar("T")

log = logging.getLogger("minilog.client")

READY, IN_TRANSACTION, COMMITTING, ABORTING = "ready", "in transaction", "committing", "aborting"
PREPARED = "prepared"
UNINITIALIZED, ABORTABLE, FATAL = "uninitialized", "abortable error", "fatal error"
_SENDING = (IN_TRANSACTION, COMMITTING, ABORTING)  # records of the transaction may leave

FATAL_CODES = frozenset({
    ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT})
RETRIED = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.OPERATION_NOT_ATTEMPTED})


@dataclass(frozen=True)
class PreparedTxnState:
    """A prepared transaction's identity (KIP-939's PreparedTxnState): what another process
    needs to commit or abort it. `str()` is Java's form, "producerId:epoch"."""
    producer_id: int
    epoch: int

    def __str__(self) -> str:
        return f"{self.producer_id}:{self.epoch}"

    @classmethod
    def parse(cls, text: str) -> PreparedTxnState:
        pid, epoch = str(text).split(":")
        return cls(int(pid), int(epoch))


class TransactionError(KafkaError):
    """A transaction call failed: `fatal` (make a new producer) or `txn_requires_abort`
    (call abort_transaction, then begin again), as confluent-kafka's KafkaError says."""

    def __init__(self, code: int, message: str | None = None, *, fatal: bool = False,
                 abortable: bool = False) -> None:
        super().__init__(code, message)
        self.fatal, self.txn_requires_abort = fatal, abortable


def classify(e: KafkaError, what: str) -> TransactionError:
    if isinstance(e, TransactionError):
        return e
    fatal = e.code in FATAL_CODES
    return TransactionError(e.code, f"{what}: {e}", fatal=fatal, abortable=not fatal)


class TxnProducer(Protocol):
    """What a transaction uses of its producer (`AsyncProducer`; sender.py's ProducerCore
    holds the rest): its ids, cluster, config, flush and wake-up."""
    config: Config
    _cluster: Cluster
    _pid: int
    _epoch: int
    _wakeup: asyncio.Event

    def _set_producer_id(self, pid: int, epoch: int) -> None: ...
    async def flush(self, timeout: float | None = None) -> int: ...


class Transactions:
    def __init__(self, core: TxnProducer, transactional_id: str, timeout_ms: int,
                 two_phase: bool = False) -> None:
        self.core, self.transactional_id, self.timeout_ms = core, transactional_id, timeout_ms
        self.two_phase = two_phase  # KIP-939: transactions that never time out
        self.kept: PreparedTxnState | None = None  # the open transaction init kept
        self.coordinator = Coordinator(core._cluster, transactional_id, TXN_KEY_TYPE)
        self.state = UNINITIALIZED
        self.error: TransactionError | None = None
        self.added: set[TopicPartition] = set()
        self._adding: set[TopicPartition] = set()
        self._add_task: asyncio.Future[None] | None = None
        self._offsets_sent = False  # the coordinator knows of the transaction without partitions

    # -- the sender's side ----------------------------------------------------------------------
    def check_send(self) -> None:
        """Raise unless records may be sent now (inside a transaction, no error)."""
        if self.state == FATAL or self.state == ABORTABLE:
            raise self._failure()
        if self.state != IN_TRANSACTION:
            raise TransactionError(ErrorCode.INVALID_TXN_STATE,
                                   f"send outside a transaction (state: {self.state}); "
                                   "call begin_transaction() first")

    def ready(self, tp: TopicPartition) -> bool:
        """Whether the sender may send a batch to `tp`: added to the transaction (if not,
        the AddPartitionsToTxn that adds it is started, and the sender is woken after)."""
        if tp in self.added:
            return True
        if self.state not in _SENDING:
            return False
        self._adding.add(tp)
        if self._add_task is None:
            self._add_task = asyncio.ensure_future(self._add_partitions())
        return False

    def failed(self, exc: KafkaError) -> None:
        """A record of the transaction failed: only aborting can end it now."""
        if self.state == IN_TRANSACTION or self.state == COMMITTING:
            self._set_error(classify(exc, "a record of the transaction failed"))

    def _failure(self) -> TransactionError:
        """The error that put the transaction in the ABORTABLE or FATAL state."""
        if self.error is None:  # those states are entered only through `_set_error`
            return TransactionError(ErrorCode.INVALID_TXN_STATE, f"state {self.state}")
        return self.error

    def _set_error(self, err: TransactionError) -> None:
        self.error = err
        self.state = FATAL if err.fatal else ABORTABLE
        log.warning("transactional id %r: %s", self.transactional_id, err)

    async def _add_partitions(self) -> None:
        try:
            while self._adding and self.state in _SENDING:
                batch = sorted(self._adding)
                deadline = time.monotonic() + self.core.config.seconds("request.timeout.ms")
                try:
                    await self._call(lambda conn: self._add_partitions_once(conn, batch),
                                     deadline, "AddPartitionsToTxn")
                except KafkaError as e:
                    self._set_error(classify(e, "adding partitions to the transaction"))
                    return
                self.added.update(batch)
                self._adding.difference_update(batch)
        finally:
            self._add_task = None
            self.core._wakeup.set()

    async def _add_partitions_once(self, conn: BrokerConnection,
                                   tps: Iterable[TopicPartition]) -> None:
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        T = _m(ApiKey.ADD_PARTITIONS_TO_TXN, "v3_and_below_topics")
        resp = await conn.send(ApiKey.ADD_PARTITIONS_TO_TXN, _m(ApiKey.ADD_PARTITIONS_TO_TXN)(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.core._pid, v3_and_below_producer_epoch=self.core._epoch,
            v3_and_below_topics=[T(name=t, partitions=p) for t, p in topics.items()]),
            min(conn.version_for(ApiKey.ADD_PARTITIONS_TO_TXN), 3))
        codes = [p.partition_error_code for t in resp.results_by_topic_v3_and_below
                 for p in t.results_by_partition]
        code = next((c for c in codes if c and c != ErrorCode.OPERATION_NOT_ATTEMPTED),
                    next((c for c in codes if c), 0))
        if code:
            raise KafkaError(code, "AddPartitionsToTxn")

    # -- calls to the coordinators --------------------------------------------------------------
    async def _call(self, fn: Callable[[BrokerConnection], Awaitable[T]], deadline: float,
                    what: str, coordinator: Coordinator | None = None) -> T:
        """`fn(conn)` against the coordinator, retried (RETRIED codes too) until `deadline`."""
        coordinator = coordinator or self.coordinator
        backoff = self.core.config.seconds("retry.backoff.ms")
        while True:
            try:
                return await coordinator.call(fn, deadline, what)
            except KafkaError as e:
                if e.code not in RETRIED or time.monotonic() + backoff >= deadline:
                    raise
                log.debug("transactional id %r: %s: %s, retrying", self.transactional_id,
                          what, e)
                await asyncio.sleep(backoff)

    async def _init_once(self, conn: BrokerConnection,
                         keep_prepared: bool) -> tuple[int, int, PreparedTxnState | None]:
        Req = _m(ApiKey.INIT_PRODUCER_ID)
        version = conn.version_for(ApiKey.INIT_PRODUCER_ID)
        if (self.two_phase or keep_prepared) and version < 6:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "two-phase commit (KIP-939) needs "
                             "InitProducerId v6, which the coordinator does not support")
        resp = await conn.send(ApiKey.INIT_PRODUCER_ID, Req(
            transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms,
            producer_id=-1, producer_epoch=-1, enable2_pc=self.two_phase or keep_prepared,
            keep_prepared_txn=keep_prepared), version)
        if resp.error_code:
            raise KafkaError(resp.error_code, "InitProducerId")
        kept = None
        if keep_prepared and resp.ongoing_txn_producer_id >= 0:
            kept = PreparedTxnState(resp.ongoing_txn_producer_id, resp.ongoing_txn_producer_epoch)
        pid: int = resp.producer_id
        epoch: int = resp.producer_epoch
        return pid, epoch, kept

    async def _end_once(self, conn: BrokerConnection, commit: bool) -> None:
        resp = await conn.send(ApiKey.END_TXN, _m(ApiKey.END_TXN)(
            transactional_id=self.transactional_id, producer_id=self.core._pid,
            producer_epoch=self.core._epoch, committed=commit),
            min(conn.version_for(ApiKey.END_TXN), 4))
        if resp.error_code:
            raise KafkaError(resp.error_code, "EndTxn")

    async def _add_offsets_once(self, conn: BrokerConnection, group_id: str) -> None:
        resp = await conn.send(ApiKey.ADD_OFFSETS_TO_TXN, _m(ApiKey.ADD_OFFSETS_TO_TXN)(
            transactional_id=self.transactional_id, producer_id=self.core._pid,
            producer_epoch=self.core._epoch, group_id=group_id))
        if resp.error_code:
            raise KafkaError(resp.error_code, "AddOffsetsToTxn")

    async def _txn_offset_commit_once(
            self, conn: BrokerConnection, group: GroupMetadata,
            offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        Topic = _m(ApiKey.TXN_OFFSET_COMMIT, "topics")
        P = _m(ApiKey.TXN_OFFSET_COMMIT, "topics", "partitions")
        topics: dict[str, list[Any]] = {}
        for tp, om in offsets.items():
            topics.setdefault(tp.topic, []).append(P(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata))
        resp = await conn.send(ApiKey.TXN_OFFSET_COMMIT, _m(ApiKey.TXN_OFFSET_COMMIT)(
            transactional_id=self.transactional_id, group_id=group.group_id,
            producer_id=self.core._pid, producer_epoch=self.core._epoch,
            generation_id=group.generation_id, member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[Topic(name=t, partitions=ps) for t, ps in topics.items()]))
        code = next((p.error_code for t in resp.topics for p in t.partitions if p.error_code), 0)
        if code:
            raise KafkaError(code, "TxnOffsetCommit")

    # -- the public calls (confluent-kafka's names) ---------------------------------------------
    async def init_transactions(self, timeout: float, keep_prepared_txn: bool = False) -> None:
        """Get the producer id and epoch, fencing older instances. An open transaction of the
        id is aborted, unless `keep_prepared_txn` (KIP-939): then it is kept, this producer is
        in the prepared state, and `complete_transaction` (or commit/abort) ends it."""
        if self.state not in (UNINITIALIZED, READY, PREPARED):
            raise TransactionError(ErrorCode.INVALID_TXN_STATE,
                                   f"init_transactions in state {self.state}")
        deadline = time.monotonic() + timeout
        try:
            pid, epoch, kept = await self._call(
                lambda conn: self._init_once(conn, keep_prepared_txn), deadline, "InitProducerId")
        except KafkaTimeoutError:
            raise
        except KafkaError as e:
            err = classify(e, "init_transactions")
            err.fatal, err.txn_requires_abort = True, False
            self._set_error(err)
            raise err from None
        self.core._set_producer_id(pid, epoch)
        self._finish()
        if kept is not None:
            self.kept, self.state = kept, PREPARED
            self._offsets_sent = True  # the coordinator has the transaction: EndTxn ends it

    async def complete_transaction(self, prepared: PreparedTxnState, timeout: float) -> None:
        """KIP-939's second phase, after `init_transactions(keep_prepared_txn=True)`: commit
        the kept transaction if it is the one `prepared` names, else abort it (a newer attempt
        prepared it, or `prepared` was already completed). Nothing kept: nothing to do."""
        if self.kept is None:
            return
        deadline = time.monotonic() + timeout
        await self._end(self.kept == prepared, deadline)
        # the kept transaction's epoch has sent records: a new epoch for this producer's own
        await self.init_transactions(max(0.0, deadline - time.monotonic()))
    def begin_transaction(self) -> None:
        if self.state != READY:
            raise self._failure() if self.state == FATAL else TransactionError(
                ErrorCode.INVALID_TXN_STATE, f"begin_transaction in state {self.state}")
        self.added.clear()
        self.state = IN_TRANSACTION

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_metadata: Any,
                                          timeout: float) -> None:
        """Commit the consumer's `offsets` ({tp: offset}) with this transaction."""
        self.check_send()
        group = as_group_metadata(group_metadata)
        deadline = time.monotonic() + timeout
        try:
            await self._call(lambda conn: self._add_offsets_once(conn, group.group_id),
                             deadline, "AddOffsetsToTxn")
            self._offsets_sent = True
            await self._call(lambda conn: self._txn_offset_commit_once(
                conn, group, as_offsets(offsets)), deadline, "TxnOffsetCommit",
                Coordinator(self.core._cluster, group.group_id))
        except KafkaTimeoutError:
            raise
        except KafkaError as e:
            self._set_error(classify(e, "send_offsets_to_transaction"))
            raise self._failure() from None

    async def prepare_transaction(self, timeout: float) -> PreparedTxnState:
        """The first phase of a two-phase commit: every record of the transaction is
        acknowledged, the transaction stays open; its identity is returned for whoever
        completes it (this producer's commit/abort_transaction, or another process's
        `AdminClient.complete_transaction`)."""
        if self.state == ABORTABLE or self.state == FATAL:
            raise self._failure()
        if self.state != IN_TRANSACTION:
            raise TransactionError(ErrorCode.INVALID_TXN_STATE,
                                   f"prepare_transaction in state {self.state}")
        await self._flush_all(time.monotonic() + timeout)
        self.state = PREPARED
        return PreparedTxnState(self.core._pid, self.core._epoch)

    async def _flush_all(self, deadline: float) -> None:
        """Deliver every record of the transaction (no new ones are taken meanwhile), or
        raise: a timeout leaves the transaction open, a failed record makes it abortable."""
        self.state = COMMITTING
        left = await self.core.flush(max(0.0, deadline - time.monotonic()))
        if left:
            self.state = IN_TRANSACTION
            raise KafkaTimeoutError(f"{left} record(s) of the transaction not yet delivered")
        if self.error is not None:
            raise self.error  # a record failed during the flush: abort

    async def commit_transaction(self, timeout: float) -> None:
        if self.state == ABORTABLE or self.state == FATAL:
            raise self._failure()
        if self.state == PREPARED:
            await self._end(True, time.monotonic() + timeout)
            return
        if self.state != IN_TRANSACTION:
            raise TransactionError(ErrorCode.INVALID_TXN_STATE,
                                   f"commit_transaction in state {self.state}")
        deadline = time.monotonic() + timeout
        await self._flush_all(deadline)
        await self._end(True, deadline)

    async def abort_transaction(self, timeout: float) -> None:
        if self.state == FATAL:
            raise self._failure()
        if self.state not in (IN_TRANSACTION, ABORTABLE, ABORTING, PREPARED):
            raise TransactionError(ErrorCode.INVALID_TXN_STATE,
                                   f"abort_transaction in state {self.state}")
        deadline = time.monotonic() + timeout
        self.state = ABORTING
        await self.core.flush(max(0.0, deadline - time.monotonic()))  # failures are expected
        await self._end(False, deadline)

    async def _end(self, commit: bool, deadline: float) -> None:
        if not self.added and self._add_task is None and not self._offsets_sent:
            self._finish()
            return
        try:
            await self._call(lambda conn: self._end_once(conn, commit), deadline, "EndTxn")
        except KafkaTimeoutError:
            raise
        except KafkaError as e:
            err = classify(e, "commit_transaction" if commit else "abort_transaction")
            self._set_error(err)
            raise err from None
        self._finish()

    def _finish(self) -> None:
        self.kept = None
        self.added.clear()
        self.error = None
        self.state = READY
        self._offsets_sent = False


class GroupMetadata:
    """What TxnOffsetCommit needs of the consumer (KIP-447's fencing by generation)."""

    def __init__(self, group_id: str, generation_id: int = -1, member_id: str = "",
                 group_instance_id: str | None = None) -> None:
        self.group_id, self.generation_id = group_id, generation_id
        self.member_id, self.group_instance_id = member_id, group_instance_id


def as_group_metadata(m: Any) -> GroupMetadata:
    """A group id, a GroupMetadata, or anything with the same attributes."""
    if isinstance(m, str):
        return GroupMetadata(m)
    return GroupMetadata(m.group_id, getattr(m, "generation_id", -1),
                         getattr(m, "member_id", "") or "", getattr(m, "group_instance_id", None))
