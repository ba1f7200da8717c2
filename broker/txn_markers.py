"""Transaction markers: writing them into partitions, and getting them to every partition leader.

A marker is a control batch (commit or abort) of the transaction's producer, appended by the
partition's leader and acknowledged once the in-sync replicas have it (Kafka writes markers with
acks=all). `write_local` does that here, for the WriteTxnMarkers handler and for partitions this
broker leads; `deliver` is the coordinator's side: it sends WriteTxnMarkers to each leader,
retrying through leader changes until every partition has its marker, as Kafka's
TransactionMarkerChannelManager does. A partition that answers INVALID_PRODUCER_EPOCH or
TRANSACTION_COORDINATOR_FENCED has seen a newer producer or coordinator: this coordinator was
deposed, and it stops delivering (the next one finishes the transaction).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from minilog.connector.batch import split_batches
from minilog.connector.client.types import KafkaConnectionError
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request
from minilog.connector.records import CONTROL_ABORT, CONTROL_COMMIT, encode_control_batch

from .group_store import OFFSETS_TOPIC
from .producer_errors import append_error_code

log = logging.getLogger("minilog.broker.txn")

MARKER_ACK_TIMEOUT_MS = 30000
RETRY_BACKOFF_S = 0.2
# answers that mean a newer coordinator or producer epoch took over: stop, as Kafka does
DEPOSED = (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED)
_WRITE = request(ApiKey.WRITE_TXN_MARKERS)


async def write_local(broker, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool,
                      partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Append the marker to each partition led here; {(topic, partition): error code}."""
    data = encode_control_batch(CONTROL_COMMIT if commit else CONTROL_ABORT, producer_id, epoch,
                                coordinator_epoch)
    (_, header), = split_batches(data)
    appended, results = [], {}
    for tp in partitions:
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
        appended.append((tp, partition, result.last_offset))
    for tp, partition, offset in appended:
        code = 0
        if broker.replicas is not None:
            code = await broker.replicas.wait_for_acks(partition, offset, MARKER_ACK_TIMEOUT_MS)
        if code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
            code = 0  # written and replicated to the ISR there is: as Kafka, done
        if not code and tp[0] == OFFSETS_TOPIC and broker.groups is not None:
            broker.groups.txn_marker_written(tp[1], producer_id, commit)
        results[tp] = code
    return results


async def deliver(broker, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool,
                  partitions: Iterable[tuple[str, int]], still_coordinator) -> bool:
    """Write the marker to every partition, wherever it is led; True once all have it (or
    their topic is gone), False if `still_coordinator()` turns false, a partition answers
    that this coordinator or producer epoch is stale (DEPOSED), or the broker stops."""
    todo = set(partitions)
    while todo:
        if broker.stopping or not still_coordinator():
            return False
        by_leader: dict[int, list] = {}
        for tp in list(todo):
            ts = broker.metadata.topics.get(tp[0])
            state = ts.partitions.get(tp[1]) if ts else None
            if state is None:
                todo.discard(tp)  # deleted: nothing to mark
                continue
            by_leader.setdefault(state.leader, []).append(tp)
        for leader, tps in by_leader.items():
            results = await _write_at(broker, leader, producer_id, epoch, coordinator_epoch,
                                      commit, tps)
            for tp, code in results.items():
                if code == 0:
                    todo.discard(tp)
                elif code in DEPOSED:
                    log.info("marker for producer %d in %s-%d refused (error %d): coordinator "
                             "epoch %d is stale, not delivering", producer_id, *tp, code,
                             coordinator_epoch)
                    return False
                else:
                    log.debug("marker for producer %d in %s-%d: error %d, retrying", producer_id,
                              *tp, code)
        if todo:
            await asyncio.sleep(RETRY_BACKOFF_S)
    return True


def indexes_by_topic(tps: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """{topic: [partition index]} of (topic, partition) pairs, as requests list them."""
    by_topic: dict[str, list[int]] = {}
    for topic, index in tps:
        by_topic.setdefault(topic, []).append(index)
    return by_topic


async def _write_at(broker, leader: int, producer_id, epoch, coordinator_epoch, commit, tps):
    if leader == broker.config.node_id:
        return await write_local(broker, producer_id, epoch, coordinator_epoch, commit, tps)
    endpoint = broker.metadata.brokers.get(leader)
    if leader < 0 or endpoint is None:
        return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    by_topic = indexes_by_topic(tps)
    body = _WRITE.cls(markers=[_WRITE.make(
        "markers", producer_id=producer_id, producer_epoch=epoch, transaction_result=commit,
        coordinator_epoch=coordinator_epoch, topics=[
            _WRITE.make("markers", "topics", name=t, partition_indexes=ids)
            for t, ids in by_topic.items()])])
    address = endpoint.address_on(broker.config.inter_broker_listener.name)
    try:
        answer = await broker.peers.send(address, ApiKey.WRITE_TXN_MARKERS, body, 1,
                                         timeout=MARKER_ACK_TIMEOUT_MS / 1000 + 5,
                                         purpose="txn-markers")
    except (KafkaError, KafkaConnectionError, OSError) as e:
        log.info("WriteTxnMarkers to broker %d failed: %s", leader, e)
        return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    results = dict.fromkeys(tps, ErrorCode.UNKNOWN_SERVER_ERROR)
    for m in answer.markers:
        for t in m.topics:
            for p in t.partitions:
                results[(t.name, p.partition_index)] = p.error_code
    return results
