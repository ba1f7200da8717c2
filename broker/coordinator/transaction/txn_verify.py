"""KIP-890 part 1: a partition leader checks that a transactional write belongs to an ongoing
transaction before appending it, as Kafka 3.6+ does.

A hanging transaction is one whose records reach a partition the coordinator never added
(a produce retried after its transaction was aborted, a client bug): no marker would ever end
it, and the partition's last stable offset would stay behind for good. So when a transactional
batch comes for a producer with no open transaction in the partition (its first batch there),
the leader asks the transaction's coordinator, with AddPartitionsToTxn v4 `verify_only` (in
process when it is the coordinator), whether the partition is in that producer's ongoing
transaction. Verified partitions are appended; the others are answered INVALID_TXN_STATE (the
producer's epoch errors as INVALID_PRODUCER_EPOCH; an unreachable coordinator as
NOT_ENOUGH_REPLICAS, retriable, as Kafka answers it). Later batches of the same transaction
find it open in the partition's producer state and are not checked again, when they come under
the transactional id it was verified for: a batch naming another producer's id under its own
transactional id (whose WRITE is all the produce was authorized with) is checked, and refused,
since that id's coordinator does not know the producer. A leader remembers which transactional
id verified each open transaction (in memory: a new leader verifies once more).
`transaction.partition.verification.enable=false` turns the check off, as in Kafka.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from minilog.connector import batch as batch_format
from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

from .txn_markers import TopicPartition, indexes_by_topic

if TYPE_CHECKING:
    from ..broker_view import PartitionHost
    from .txn_coordinator import TransactionCoordinator

log = logging.getLogger("minilog.broker.txn")

VERIFY_TIMEOUT_S = 10.0
_ADD = request(ApiKey.ADD_PARTITIONS_TO_TXN)
_EPOCH_ERRORS = (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
_TXN_ERRORS = (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_ID_MAPPING)


MAX_REMEMBERED = 100_000  # verified (partition, producer) pairs; beyond, verify them again


def _verified(broker: PartitionHost) -> dict[tuple[str, int, int], str]:
    """{(topic, partition, producer id): the transactional id its open transaction there was
    verified under} (kept on the broker, beside the partitions it is about)."""
    found: dict[tuple[str, int, int], str] | None = getattr(broker, "_txn_verified", None)
    if found is None or len(found) > MAX_REMEMBERED:
        found = {}
        setattr(broker, "_txn_verified", found)  # noqa: B010 - not a PartitionHost attribute
    return found


def _unopened(broker: PartitionHost, req: Any) -> tuple[int, int, list[TopicPartition]] | None:
    """(producer id, epoch, partitions) of the transactional writes of `req` to partitions led
    here where that producer has no transaction open yet, verified under this transactional
    id; None if there are none."""
    pid = epoch = -1
    wanted: list[TopicPartition] = []
    verified = _verified(broker)
    for t in req.topic_data:
        for p in t.partition_data:
            partition = broker.partition(t.name, p.index)
            if (partition is None or not partition.is_leader or not p.records
                    or len(p.records) < batch_format.HEADER_SIZE):
                continue  # the append answers these
            h = batch_format.read_header(p.records)  # the first batch's; the append checks all
            if not h.is_transactional or h.producer_id < 0:
                continue
            entry = partition.log.producer_state.entry(h.producer_id)
            key = (t.name, p.index, h.producer_id)
            if entry is not None and entry.txn_first_offset >= 0:
                if verified.get(key) == req.transactional_id:
                    continue  # the transaction is open here: verified with its first batch
            else:
                verified.pop(key, None)
            pid, epoch = h.producer_id, h.producer_epoch
            wanted.append((t.name, p.index))
    return None if not wanted else (pid, epoch, wanted)


async def refused(broker: PartitionHost, req: Any) -> dict[TopicPartition, int]:
    """{(topic, partition): error code} for the writes of `req` that must not be appended."""
    txn_id = getattr(req, "transactional_id", None)
    coordinator: TransactionCoordinator | None = getattr(broker, "txn", None)
    if not txn_id or coordinator is None \
            or not broker.config["transaction.partition.verification.enable"]:
        return {}
    found = _unopened(broker, req)
    if found is None:
        return {}
    pid, epoch, wanted = found
    results = await _ask(broker, coordinator, txn_id, pid, epoch, wanted)
    verified = _verified(broker)
    for (topic, index), code in results.items():
        if not code:
            verified[(topic, index, pid)] = txn_id
    return {tp: _for_produce(code) for tp, code in results.items() if code}


def _for_produce(code: int) -> int:
    if code in _EPOCH_ERRORS:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code in _TXN_ERRORS:
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.NOT_ENOUGH_REPLICAS  # the coordinator moving or loading: retry


async def _ask(broker: PartitionHost, coordinator: TransactionCoordinator, txn_id: str, pid: int,
               epoch: int, wanted: list[TopicPartition]) -> dict[TopicPartition, int]:
    from .txn_coordinator import TRANSACTION_TOPIC
    ts = broker.metadata.topics.get(TRANSACTION_TOPIC)
    state = ts.partitions.get(coordinator.store.partition_for(txn_id)) if ts else None
    if state is None or state.leader < 0:
        return dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if state.leader == broker.config.node_id:
        return coordinator.verify_partitions(txn_id, pid, epoch, wanted)
    endpoint = broker.metadata.brokers.get(state.leader)
    if endpoint is None:
        return dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    body = _ADD.cls(transactions=[_ADD.make(
        "transactions", transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
        verify_only=True, topics=[_ADD.make("transactions", "topics", name=t, partitions=ids)
                                  for t, ids in indexes_by_topic(wanted).items()])])
    try:
        answer = await broker.peers.send((endpoint.host, endpoint.port),
                                         ApiKey.ADD_PARTITIONS_TO_TXN, body, 4,
                                         timeout=VERIFY_TIMEOUT_S, purpose="txn-verify")
    except (KafkaError, KafkaConnectionError, OSError) as e:
        log.info("verifying %r with broker %d failed: %s", txn_id, state.leader, e)
        return dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    results: dict[TopicPartition, int] = dict.fromkeys(
        wanted, answer.error_code or ErrorCode.UNKNOWN_SERVER_ERROR)
    for txn in answer.results_by_transaction:
        for t in txn.topic_results:
            for p in t.results_by_partition:
                results[(t.name, p.partition_index)] = p.partition_error_code
    return results
