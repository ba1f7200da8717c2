"""The coordinator runtime's records in the broker's own partitions (Kafka's
CoordinatorPartitionWriter and CoordinatorLoaderImpl).

Each write is one record batch appended to the coordinator partition as its leader, with
acks=all: refused while the ISR is smaller than the topic's `min.insync.replicas`, answered once
every in-sync replica has the batch or after `offsets.commit.timeout.ms`, so an acknowledged
write survives the loss of its coordinator. The append carries the coordinator epoch the
operation was decided under and is refused (NOT_COORDINATOR) unless this broker still leads the
partition at that leader epoch: a coordinator deposed between deciding and appending cannot
write into its successor's epoch. A transactional batch (TxnOffsetCommit) is the producer's,
flagged transactional, decided later by the marker the transaction coordinator writes.

Loading reads to the log end, not the high watermark, as Kafka's coordinator loads: a new
leader's high watermark lags the old one's, and what its log holds is what its epoch will
commit (an acknowledged write may sit above the high watermark it has heard of so far).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Iterator
from typing import Any

from minilog.connector.batch import iter_batches, split_batches
from minilog.connector.protocol import ErrorCode
from minilog.connector.records import (
    CONTROL_COMMIT,
    control_batch_type,
    decode_batches,
    encode_batch,
    next_offset_after,
)

from ..storage.producer_errors import append_error_code
from .runtime import LoggedBatch, Marker, Producer, Record

log = logging.getLogger("minilog.broker.coordinator")
_LOAD_CHUNK = 1 << 20

# How a failed append is reported, as Kafka's coordinators convert it.
AS_COORDINATOR_ERROR = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
# A batch too large for the partition: answered INVALID_COMMIT_OFFSET_SIZE to an offset commit
# and UNKNOWN_SERVER_ERROR otherwise (`sized`).
TOO_LARGE = {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
             ErrorCode.INVALID_FETCH_SIZE}


async def sized(acked: Awaitable[int], too_large: int) -> int:
    """The code to answer for a write: `too_large` for a batch the partition refused as too
    large (INVALID_COMMIT_OFFSET_SIZE to an offset commit, as Kafka answers)."""
    code = await acked
    return too_large if code in TOO_LARGE else code


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogPartitionWriter:
    """Appends to and reads the coordinator partitions of `broker` (its partitions and its
    replica manager, which waits for the in-sync replicas)."""

    def __init__(self, broker: Any, commit_timeout_ms: int) -> None:
        self.broker = broker
        self.commit_timeout_ms = commit_timeout_ms

    def append(self, topic: str, index: int, epoch: int, records: list[Record],
               producer: Producer | None) -> tuple[int, int]:
        partition = self.broker.partition(topic, index)
        if partition is None or not partition.is_leader or \
                (epoch >= 0 and partition.leader_epoch != epoch):
            return ErrorCode.NOT_COORDINATOR, -1
        if self.broker.replicas is not None and \
                len(partition.isr) < partition.min_insync_replicas:
            return AS_COORDINATOR_ERROR[ErrorCode.NOT_ENOUGH_REPLICAS], -1
        txn = {} if producer is None else dict(
            producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
            transactional=True)
        try:
            ts = now_ms()
            data = encode_batch([(ts, key, value, ()) for key, value in records], **txn)
            (_, header), = split_batches(data)
            result = partition.append_as_leader([(data, header)])
        except Exception as e:  # noqa: BLE001 - every failure becomes a Kafka error code
            code, message = append_error_code(e)  # type: ignore[no-untyped-call]
            log.warning("write to %s-%d failed: %s", topic, index, message)
            if code in TOO_LARGE:
                return ErrorCode.MESSAGE_TOO_LARGE, -1
            return AS_COORDINATOR_ERROR.get(code, code), -1
        return 0, result.last_offset

    async def wait_for_acks(self, topic: str, index: int, offset: int) -> int:
        replicas = self.broker.replicas
        if replicas is None:
            return 0
        partition = self.broker.partition(topic, index)
        if partition is None:
            return int(ErrorCode.NOT_COORDINATOR)
        code = await replicas.wait_for_acks(partition, offset, self.commit_timeout_ms)
        return int(AS_COORDINATOR_ERROR.get(code, code))

    def read(self, topic: str, index: int) -> Iterator[LoggedBatch | Marker]:
        partition = self.broker.partition(topic, index)
        if partition is None:
            return
        offset, end = partition.log_start_offset, partition.log_end_offset
        while offset < end:
            data = partition.read(offset, _LOAD_CHUNK, committed_only=False)
            if not data:
                break
            view = memoryview(data)
            for pos, h in iter_batches(view):
                one = view[pos:pos + h.size]
                if h.is_control:
                    if h.producer_id >= 0:
                        yield Marker(h.producer_id, control_batch_type(one) == CONTROL_COMMIT)
                    continue
                producer = Producer(h.producer_id, h.producer_epoch) \
                    if h.is_transactional else None
                yield LoggedBatch([(bytes(r.key), None if r.value is None else bytes(r.value))
                                   for r in decode_batches(one, start_offset=offset)
                                   if r.key is not None], producer)
            offset = next_offset_after(data)
