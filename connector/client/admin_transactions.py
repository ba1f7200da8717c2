"""Transaction administration: list and describe transactions (what `kafka-transactions.sh`
does), and complete a transaction another process prepared (KIP-939's second phase). A mixin
of `AsyncAdminClient`, like `admin_groups.py`: ListTransactions goes to every broker (each
lists the transactional ids it coordinates), DescribeTransactions and EndTxn to each id's
transaction coordinator (FindCoordinator key type 1)."""
import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import NamedTuple

from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError

from .admin_core import AdminCore
from .connection import BrokerConnection
from .group_api import TXN_KEY_TYPE, Coordinator, _m
from .transactions import PreparedTxnState
from .types import TopicPartition


# Transaction coordinators remembered per admin client (by transactional id), most recent last
_KNOWN_COORDINATORS = 1024
# The transaction timeout a terminating InitProducerId asks for (Kafka's fenceProducers: the
# producer it makes is never used)
TERMINATE_TIMEOUT_MS = 60000


class TransactionListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


class TransactionDescription(NamedTuple):
    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int         # -1 when no transaction is open
    partitions: tuple[TopicPartition, ...]


class ProducerState(NamedTuple):
    """One active producer of a partition, as its leader's DescribeProducers tells it."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int       # -1 when unknown
    current_txn_start_offset: int  # -1 when no transaction is open


class TransactionAdmin(AdminCore):
    def _txn_coordinator(self, transactional_id: str) -> Coordinator:
        """The coordinator of `transactional_id`, found once and reached over the admin's
        shared connection to it: a driver completing the same transactional ids every
        micro-batch asks FindCoordinator once and opens no connection per call (it moves:
        `Coordinator.call` finds it again)."""
        known: OrderedDict[str, Coordinator] = self.__dict__.setdefault(
            "_txn_coordinators", OrderedDict())
        coordinator = known.pop(transactional_id, None) or Coordinator(
            self._cluster, transactional_id, TXN_KEY_TYPE, shared=True)
        known[transactional_id] = coordinator
        while len(known) > _KNOWN_COORDINATORS:
            known.popitem(last=False)
        return coordinator

    async def list_transactions(self, states: Iterable[str] | None = None,
                                producer_ids: Iterable[int] | None = None,
                                timeout: float | None = None,
                                duration_filter_ms: int = -1) -> list[TransactionListing]:
        """Every transactional id of the cluster (optionally in `states`, of `producer_ids`,
        open longer than `duration_filter_ms`: KIP-994's DurationFilter), sorted by id."""
        # once, not per broker: an iterator would filter only the first broker's answer
        wanted_states, wanted_ids = list(states or ()), list(producer_ids or ())
        await self._cluster.ensure_bootstrapped()
        await self._cluster.refresh()
        Req = _m(ApiKey.LIST_TRANSACTIONS)

        async def one(node: int) -> list[TransactionListing]:
            async def attempt() -> list[TransactionListing]:
                conn = await self._cluster.connection(node)
                resp = await conn.send(ApiKey.LIST_TRANSACTIONS, Req(
                    state_filters=wanted_states, producer_id_filters=wanted_ids,
                    duration_filter=duration_filter_ms))
                if resp.error_code:
                    raise KafkaError(resp.error_code, f"ListTransactions on broker {node}")
                return [TransactionListing(t.transactional_id, t.producer_id,
                                           t.transaction_state, node)
                        for t in resp.transaction_states]
            return await self._retry(attempt, timeout, "ListTransactions")
        found = await asyncio.gather(*(one(n) for n in self._cluster.brokers))
        return sorted((t for listing in found for t in listing), key=lambda t: t.transactional_id)

    async def describe_transactions(self, transactional_ids: str | Iterable[str],
                                    timeout: float | None = None
                                    ) -> dict[str, TransactionDescription]:
        """{transactional id: TransactionDescription}; an unknown id raises
        KafkaError(TRANSACTIONAL_ID_NOT_FOUND)."""
        ids = [transactional_ids] if isinstance(transactional_ids, str) else list(transactional_ids)
        await self._cluster.ensure_bootstrapped()
        out = {}
        for txn_id in ids:
            coordinator = self._txn_coordinator(txn_id)

            async def attempt(conn: BrokerConnection, txn_id: str = txn_id,
                              coordinator: Coordinator = coordinator) -> TransactionDescription:
                node = coordinator.node  # before the request: a concurrent call may lose it
                resp = await conn.send(ApiKey.DESCRIBE_TRANSACTIONS, _m(
                    ApiKey.DESCRIBE_TRANSACTIONS)(transactional_ids=[txn_id]))
                t = resp.transaction_states[0]
                if t.error_code:
                    raise KafkaError(t.error_code, f"describing transactional id {txn_id!r}")
                return TransactionDescription(
                    txn_id, node.node_id if node else -1, t.transaction_state, t.producer_id,
                    t.producer_epoch, t.transaction_timeout_ms, t.transaction_start_time_ms,
                    tuple(TopicPartition(p.topic, i) for p in t.topics for i in p.partitions))
            out[txn_id] = await coordinator.call(attempt, self._deadline(timeout),
                                                 "DescribeTransactions", "admin")
        return out

    async def complete_transaction(self, transactional_id: str, prepared: PreparedTxnState,
                                   commit: bool = True, timeout: float | None = None) -> None:
        """Commit (or abort) the transaction that a producer of `transactional_id` prepared
        (`Producer.prepare_transaction`), from any process: EndTxn under the prepared producer
        id and epoch. Completing it again is answered as done. PRODUCER_FENCED means it is
        gone: a newer producer of the id, or the coordinator's timeout, aborted it."""
        async def attempt(conn: BrokerConnection) -> None:
            resp = await conn.send(ApiKey.END_TXN, _m(ApiKey.END_TXN)(
                transactional_id=transactional_id, producer_id=prepared.producer_id,
                producer_epoch=prepared.epoch, committed=commit),
                min(conn.version_for(ApiKey.END_TXN), 4))
            if resp.error_code:
                raise KafkaError(resp.error_code, f"{'committing' if commit else 'aborting'} "
                                 f"the prepared transaction {prepared} of {transactional_id!r}")
        await self._at_txn_coordinator(transactional_id, attempt, "EndTxn", timeout)

    async def force_terminate_transaction(self, transactional_id: str,
                                          timeout: float | None = None) -> None:
        """Abort whatever transaction `transactional_id` has open, prepared (KIP-939) or not,
        and fence its producer: Kafka's `Admin.forceTerminateTransaction`, an InitProducerId
        without KeepPreparedTxn, repeated while the coordinator answers CONCURRENT_TRANSACTIONS
        (the abort's markers going out)."""
        async def attempt(conn: BrokerConnection) -> None:
            resp = await conn.send(ApiKey.INIT_PRODUCER_ID, _m(ApiKey.INIT_PRODUCER_ID)(
                transactional_id=transactional_id, transaction_timeout_ms=TERMINATE_TIMEOUT_MS,
                producer_id=-1, producer_epoch=-1))
            if resp.error_code:
                raise KafkaError(resp.error_code, f"terminating the transaction of "
                                 f"{transactional_id!r}")
        await self._at_txn_coordinator(transactional_id, attempt, "InitProducerId", timeout)

    async def _at_txn_coordinator(self, transactional_id: str,
                                  attempt: Callable[[BrokerConnection], Awaitable[None]],
                                  what: str, timeout: float | None) -> None:
        """`attempt(conn)` at the id's transaction coordinator, again while it answers
        CONCURRENT_TRANSACTIONS (the markers of the id's previous transaction going out)."""
        await self._cluster.ensure_bootstrapped()
        coordinator = self._txn_coordinator(transactional_id)
        deadline = self._deadline(timeout)
        backoff = self.config.seconds("retry.backoff.ms")
        while True:
            try:
                return await coordinator.call(attempt, deadline, what, "admin")
            except KafkaError as e:
                if e.code != ErrorCode.CONCURRENT_TRANSACTIONS or \
                        time.monotonic() + backoff >= deadline:
                    raise
                await asyncio.sleep(backoff)

    async def complete_transactions(
            self, prepared: Mapping[str, tuple[PreparedTxnState, bool]],
            timeout: float | None = None) -> dict[str, KafkaError | None]:
        """Complete several prepared transactions at once: {transactional id: (PreparedTxnState,
        commit)} -> {transactional id: None, or the KafkaError that one raised}."""
        ids = list(prepared)
        results = await asyncio.gather(*(
            self.complete_transaction(i, *prepared[i], timeout=timeout) for i in ids),
            return_exceptions=True)
        out: dict[str, KafkaError | None] = {}
        for i, r in zip(ids, results):
            if isinstance(r, BaseException) and not isinstance(r, KafkaError):
                raise r
            out[i] = r
        return out

    async def describe_producers(self, partitions: Iterable[tuple[str, int]],
                                 timeout: float | None = None
                                 ) -> dict[TopicPartition, list[ProducerState]]:
        """{TopicPartition: [ProducerState]}: each partition's active producers, from its
        leader (KIP-664's DescribeProducers), open transactions with their first offset."""
        from .admin import by_leader
        Req, T = _m(ApiKey.DESCRIBE_PRODUCERS), _m(ApiKey.DESCRIBE_PRODUCERS, "topics")
        wanted = [TopicPartition(*tp) for tp in partitions]

        async def send(conn: BrokerConnection, tps: list[TopicPartition]
                       ) -> dict[TopicPartition, tuple[int, list[ProducerState]]]:
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            resp = await conn.send(ApiKey.DESCRIBE_PRODUCERS, Req(topics=[
                T(name=t, partition_indexes=ps) for t, ps in topics.items()]))
            return {TopicPartition(t.name, p.partition_index): (p.error_code, [
                ProducerState(a.producer_id, a.producer_epoch, a.last_sequence,
                              a.last_timestamp, a.coordinator_epoch, a.current_txn_start_offset)
                for a in p.active_producers]) for t in resp.topics for p in t.partitions}
        await self._cluster.ensure_bootstrapped()
        return await by_leader(self._cluster, wanted, send, self._deadline(timeout),
                               "DescribeProducers")

    async def abort_transaction(self, partition: tuple[str, int], producer_id: int,
                                producer_epoch: int, coordinator_epoch: int,
                                timeout: float | None = None) -> None:
        """Write an abort marker for a producer's open transaction in one partition, at its
        leader (Kafka's `Admin.abortTransaction`, KIP-664's WriteTxnMarkers): what ends a
        hanging transaction no coordinator will. Needs CLUSTER_ACTION on the cluster."""
        from .admin import by_leader
        Req, M, T = (_m(ApiKey.WRITE_TXN_MARKERS), _m(ApiKey.WRITE_TXN_MARKERS, "markers"),
                     _m(ApiKey.WRITE_TXN_MARKERS, "markers", "topics"))
        tp = TopicPartition(*partition)

        async def send(conn: BrokerConnection, tps: list[TopicPartition]
                       ) -> dict[TopicPartition, tuple[int, None]]:
            resp = await conn.send(ApiKey.WRITE_TXN_MARKERS, Req(markers=[M(
                producer_id=producer_id, producer_epoch=producer_epoch,
                transaction_result=False, coordinator_epoch=max(0, coordinator_epoch),
                topics=[T(name=tp.topic, partition_indexes=[tp.partition])])]))
            return {TopicPartition(t.name, p.partition_index): (p.error_code, None)
                    for m in resp.markers for t in m.topics for p in t.partitions}
        await self._cluster.ensure_bootstrapped()
        await by_leader(self._cluster, [tp], send, self._deadline(timeout), "WriteTxnMarkers")
