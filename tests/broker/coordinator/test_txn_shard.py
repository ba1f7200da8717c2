"""The transaction coordinator's shard kind in process: `__transaction_state` records ->
transactional ids. Every change is a record replayed at once and kept only if its append
succeeds; loading replays the same records and finishes what was prepared; a coordinator whose
partition moved to a newer leader epoch cannot append."""
from __future__ import annotations

import asyncio
import itertools
from types import SimpleNamespace

from coordinator_standins import StandInBroker, run, serving
from memory_partitions import MemoryPartitions

from minilog.broker.coordinator.runtime import LoggedBatch
from minilog.broker.coordinator.transaction import txn_state as s
from minilog.broker.coordinator.transaction.txn_coordinator import (
    TRANSACTION_TOPIC,
    TransactionCoordinator,
)
from minilog.broker.coordinator.transaction.txn_state import TxnMetadata, txn_key, txn_value
from minilog.connector.protocol import ErrorCode

_ids = itertools.count(1000)


def coordinator_on(partitions: MemoryPartitions, epoch: int = 3) -> TransactionCoordinator:
    broker = StandInBroker(partitions, {"t": 2}, transaction_state_log_num_partitions=1)

    async def next_id() -> int:
        return next(_ids)
    broker.producer_ids = SimpleNamespace(next_id=next_id)
    return serving(TransactionCoordinator, broker, TRANSACTION_TOPIC, epoch)


def fields(md: TxnMetadata) -> tuple:
    return (md.producer_id, md.producer_epoch, md.last_producer_epoch, md.state, md.partitions,
            md.timeout_ms)


def test_what_a_transaction_leaves_in_memory_is_what_its_records_load_to():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        code, pid, epoch, _ = await coordinator.init_producer_id("tx", 60000, -1, -1)
        assert code == 0
        code, pid, epoch, _ = await coordinator.init_producer_id("tx", 60000, -1, -1)
        assert code == 0 and epoch == 1
        assert await coordinator.add_partitions("tx", pid, epoch, [("t", 0)]) == {("t", 0): 0}
        live = coordinator.txns["tx"]
        assert (live.state, live.last_producer_epoch) == (s.ONGOING, 0)
        await coordinator.stop()
        reloaded = coordinator_on(partitions, epoch=4)
        assert fields(reloaded.txns["tx"]) == fields(live)
        await reloaded.stop()
    run(scenario)


def test_a_write_whose_append_fails_leaves_the_transaction_as_it_was():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        _, pid, epoch, _ = await coordinator.init_producer_id("tx", 60000, -1, -1)
        before = fields(coordinator.txns["tx"])
        partitions.fail_appends = ErrorCode.COORDINATOR_NOT_AVAILABLE
        answer = await coordinator.add_partitions("tx", pid, epoch, [("t", 1)])
        assert answer == {("t", 1): ErrorCode.COORDINATOR_NOT_AVAILABLE}
        assert fields(coordinator.txns["tx"]) == before
        assert coordinator.txns["tx"].pending is None
        await coordinator.stop()
    run(scenario)


def test_a_write_in_flight_makes_other_requests_of_the_id_wait():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions)
        _, pid, epoch, _ = await coordinator.init_producer_id("tx", 60000, -1, -1)
        partitions.hold_acks = True
        adding = asyncio.ensure_future(coordinator.add_partitions("tx", pid, epoch, [("t", 0)]))
        await asyncio.sleep(0.05)
        assert coordinator.txns["tx"].state == s.ONGOING  # replayed at once
        assert await coordinator.end_txn("tx", pid, epoch, True) == \
            ErrorCode.CONCURRENT_TRANSACTIONS
        assert not adding.done()
        partitions.release()
        assert await adding == {("t", 0): 0}
        await coordinator.stop()
    run(scenario)


def test_loading_finishes_a_transaction_the_previous_coordinator_prepared():
    async def scenario():
        partitions = MemoryPartitions()
        partitions.lead(TRANSACTION_TOPIC, 0, 3)
        prepared = TxnMetadata("tx", 77, 2, 60000, s.PREPARE_COMMIT, frozenset({("t", 0)}), 1, 1)
        partitions.logs[(TRANSACTION_TOPIC, 0)].append(
            LoggedBatch([(txn_key("tx"), txn_value(prepared))], None))
        coordinator = coordinator_on(partitions)
        for _ in range(100):
            if coordinator.txns["tx"].state == s.COMPLETE_COMMIT:
                break
            await asyncio.sleep(0.02)
        assert coordinator.txns["tx"].state == s.COMPLETE_COMMIT
        await coordinator.stop()
    run(scenario)


def test_a_coordinator_whose_partition_moved_on_cannot_write():
    async def scenario():
        partitions = MemoryPartitions()
        coordinator = coordinator_on(partitions, epoch=3)
        _, pid, epoch, _ = await coordinator.init_producer_id("tx", 60000, -1, -1)
        partitions.lead(TRANSACTION_TOPIC, 0, 4)  # a newer leader epoch this shard never loaded
        answer = await coordinator.add_partitions("tx", pid, epoch, [("t", 0)])
        assert answer == {("t", 0): ErrorCode.NOT_COORDINATOR}
        assert coordinator.txns["tx"].state == s.EMPTY
        await coordinator.stop()
    run(scenario)
