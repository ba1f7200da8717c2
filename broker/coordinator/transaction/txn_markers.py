"""Transaction markers: writing them into partitions, and getting them to every partition leader.

A marker is a control batch (commit or abort) of the transaction's producer, appended by the
partition's leader and acknowledged once the in-sync replicas have it (Kafka writes markers with
acks=all). `append_local` and `acknowledged` do that here, for the WriteTxnMarkers handler and
for partitions this broker leads: every marker of a request is appended first, then their
replication is awaited together, so a request's markers cost one replication round, not one
each. `deliver` is the coordinator's side: the markers go to every leader at once (through the
`MarkerChannel`, one WriteTxnMarkers per broker for all the transactions ending together),
retried through leader changes until every partition has its marker, as Kafka's
TransactionMarkerChannelManager does. The transaction stays in PrepareCommit / PrepareAbort
until then, and its producer's next transaction waits (CONCURRENT_TRANSACTIONS), so this is
on the producer's path. A partition that answers INVALID_PRODUCER_EPOCH or
TRANSACTION_COORDINATOR_FENCED has seen a newer producer or coordinator: this coordinator was
deposed, and it stops delivering (the next one finishes the transaction).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple, Protocol

from minilog.connector.batch import split_batches
from minilog.connector.protocol import ErrorCode
from minilog.connector.records import CONTROL_ABORT, CONTROL_COMMIT, encode_control_batch

from ...storage.producer_errors import append_error_code
from ..group.group_store import OFFSETS_TOPIC

if TYPE_CHECKING:
    from ...replication.partition import Partition
    from ..broker_view import MarkerBroker

log = logging.getLogger("minilog.broker.txn")

MARKER_ACK_TIMEOUT_MS = 30000
RETRY_BACKOFF_S = 0.2
# answers that mean a newer coordinator or producer epoch took over: stop, as Kafka does
DEPOSED = (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED)

TopicPartition = tuple[str, int]


class TxnMarker(NamedTuple):
    """One transaction's marker for some partitions (an entry of WriteTxnMarkers)."""
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


class MarkerWriter(Protocol):
    """Where `deliver` sends a marker for the partitions one broker leads (MarkerChannel)."""

    def write(self, leader: int, marker: TxnMarker) -> Awaitable[dict[TopicPartition, int]]: ...


class Appended(NamedTuple):
    """A marker appended here, its replication still to wait for."""
    marker: TxnMarker
    results: dict[TopicPartition, int]  # {tp: error code}: the partitions that failed already
    written: list[tuple[TopicPartition, Partition, int]]  # [(tp, partition, last offset)]


def append_local(broker: MarkerBroker, marker: TxnMarker) -> Appended:
    """Append `marker` to each of its partitions led here (nothing awaited)."""
    data = encode_control_batch(CONTROL_COMMIT if marker.commit else CONTROL_ABORT,
                                marker.producer_id, marker.producer_epoch,
                                marker.coordinator_epoch)
    (_, header), = split_batches(data)
    results: dict[TopicPartition, int] = {}
    written: list[tuple[TopicPartition, Partition, int]] = []
    for tp in marker.partitions:
        partition = broker.partition(*tp)
        if partition is None or not partition.is_leader:
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if partition is None else \
                ErrorCode.NOT_LEADER_OR_FOLLOWER
            continue
        try:
            result = partition.append_as_leader([(data, header)])
        except Exception as e:  # noqa: BLE001 - every failure becomes a Kafka error code
            results[tp] = append_error_code(e)[0]
            continue
        written.append((tp, partition, result.last_offset))
    return Appended(marker, results, written)


async def acknowledged(broker: MarkerBroker, appended: Appended) -> dict[TopicPartition, int]:
    """{tp: error code} of an appended marker once the in-sync replicas have it everywhere."""
    marker, results = appended.marker, dict(appended.results)

    async def one(tp: TopicPartition, partition: Partition, offset: int) -> None:
        code = 0
        if broker.replicas is not None:
            code = await broker.replicas.wait_for_acks(partition, offset, MARKER_ACK_TIMEOUT_MS)
        if code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
            code = 0  # written and replicated to the ISR there is: as Kafka, done
        if not code and tp[0] == OFFSETS_TOPIC and broker.groups is not None:
            broker.groups.txn_marker_written(tp[1], marker.producer_id, marker.commit)
        results[tp] = code
    await asyncio.gather(*(one(*w) for w in appended.written))
    return results


async def write_local(broker: MarkerBroker, marker: TxnMarker) -> dict[TopicPartition, int]:
    """Append `marker` to the partitions led here and wait for their replicas."""
    return await acknowledged(broker, append_local(broker, marker))


async def deliver(broker: MarkerBroker, channel: MarkerWriter, marker: TxnMarker,
                  still_coordinator: Callable[[], object]) -> bool:
    """Write the marker to every partition, wherever it is led (all leaders at once); True
    once all have it (or their topic is gone), False if `still_coordinator()` turns false, a
    partition answers that this coordinator or producer epoch is stale (DEPOSED), or the
    broker stops."""
    todo = set(marker.partitions)
    while todo:
        if broker.stopping or not still_coordinator():
            return False
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in list(todo):
            ts = broker.metadata.topics.get(tp[0])
            state = ts.partitions.get(tp[1]) if ts else None
            if state is None:
                todo.discard(tp)  # deleted: nothing to mark
                continue
            by_leader.setdefault(state.leader, []).append(tp)
        answers = await asyncio.gather(*(
            channel.write(leader, marker._replace(partitions=tuple(tps)))
            for leader, tps in by_leader.items()))
        for tp, code in (item for results in answers for item in results.items()):
            if code == 0:
                todo.discard(tp)
            elif code in DEPOSED:
                log.info("marker for producer %d in %s-%d refused (error %d): coordinator "
                         "epoch %d is stale, not delivering", marker.producer_id, *tp, code,
                         marker.coordinator_epoch)
                return False
            else:
                log.debug("marker for producer %d in %s-%d: error %d, retrying",
                          marker.producer_id, *tp, code)
        if todo:
            await asyncio.sleep(RETRY_BACKOFF_S)
    return True


def indexes_by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """{topic: [partition index]} of (topic, partition) pairs, as requests list them."""
    by_topic: dict[str, list[int]] = {}
    for topic, index in tps:
        by_topic.setdefault(topic, []).append(index)
    return by_topic
