"""`__consumer_offsets`: the compacted internal topic where groups and their offsets are kept.

The coordinator of a group is the leader of partition `partition_for(group id)`; on a single
broker that is this broker for every partition, but the mapping stays explicit so replication
can move partitions (and the groups in them) between brokers. Each coordinator write is one
record batch appended to that partition; loading replays a partition from its start.

Offset commits and group metadata are written as Kafka's coordinator writes them, with acks=all
(`write`): refused while the ISR is smaller than the topic's `min.insync.replicas`, answered once
every in-sync replica has the batch or after `offsets.commit.timeout.ms`, so an acknowledged
commit survives the loss of its coordinator. Tombstones (`append`) are only appended here.
A transactional offset commit is a batch of the producer's (its id and epoch, flagged
transactional), decided later by the marker the transaction coordinator writes here.

`TransactionStateTopic` is the same store for `__transaction_state`, the transaction
coordinator's log, with its own name and settings.
"""
import logging
import time

from typing import NamedTuple

from minilog.connector.batch import iter_batches, split_batches
from minilog.connector.protocol import ErrorCode
from minilog.connector.records import (
    control_batch_type,
    decode_batches,
    encode_batch,
    next_offset_after,
)

from ...storage.producer_errors import append_error_code
from .group_records import parse_key, partition_for

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes
_LOAD_CHUNK = 1 << 20

log = logging.getLogger("minilog.broker.groups")

# How a failed append is reported, as Kafka's GroupMetadataManager converts it.
_AS_COORDINATOR_ERROR = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}
_TOO_LARGE = {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
              ErrorCode.INVALID_FETCH_SIZE}


def now_ms():
    return time.time_ns() // 1_000_000


class Producer(NamedTuple):
    """The transactional producer a batch is written for."""
    producer_id: int
    producer_epoch: int


class Marker(NamedTuple):
    """A transaction marker met during a replay."""
    producer_id: int
    kind: int  # CONTROL_ABORT or CONTROL_COMMIT


class OffsetsTopic:
    topic = OFFSETS_TOPIC
    num_partitions_key = "offsets.topic.num.partitions"
    timeout_key = "offsets.commit.timeout.ms"

    def __init__(self, broker):
        self.broker = broker
        self.num_partitions = broker.config[self.num_partitions_key]
        self.commit_timeout_ms = broker.config[self.timeout_key]

    def topic_configs(self, replication_factor: int) -> dict:
        return {"cleanup.policy": "compact", "segment.bytes": str(OFFSETS_SEGMENT_BYTES)}

    def ensure(self, replication_factor=-1):
        """Create the topic on first start; an existing one keeps its partition count (as in
        Kafka, changing offsets.topic.num.partitions later would move every group). In a
        replicated cluster only the controller creates it, once enough brokers are up."""
        ts = self.broker.metadata.topics.get(self.topic)
        if ts is None and self.broker.quorum is not None and not self.broker.quorum.is_controller:
            return None
        if ts is None:
            code, message, ts = self.broker.topics.create(
                self.topic, self.num_partitions, replication_factor,
                self.topic_configs(replication_factor),
                internal=True)
            if code:
                raise RuntimeError(f"cannot create {self.topic}: {message}")
            log.info("created %s with %d partitions", self.topic, self.num_partitions)
        self.num_partitions = len(ts.partitions)
        return ts

    def partition_for(self, group_id):
        return partition_for(group_id, self.num_partitions)

    def led_partitions(self):
        """Partitions led by this broker: it coordinates the groups that hash to them."""
        ts = self.broker.metadata.topics.get(self.topic)
        node = self.broker.config.node_id
        return [] if ts is None else [i for i, st in sorted(ts.partitions.items())
                                      if st.leader == node]

    def coordinator(self, group_id):
        """The broker endpoint coordinating `group_id`, or None when its partition has no leader."""
        ts = self.broker.metadata.topics.get(self.topic)
        if ts is None:
            return None
        state = ts.partitions.get(self.partition_for(group_id))
        return None if state is None else self.broker.metadata.brokers.get(state.leader)

    def append(self, index, entries, for_commit=False):
        """Write [(key, value or None)] as one batch; returns 0 or the error code to answer."""
        partition = self.broker.partition(self.topic, index)
        if partition is None:
            return ErrorCode.NOT_COORDINATOR
        return self._append(partition, index, entries, for_commit)[0]

    def write(self, index, entries, for_commit=False, producer: Producer | None = None):
        """Append now, with acks=all; returns an awaitable of (0 or the error code to answer,
        the batch's offset). Appending before the first await keeps writes in call order.
        With `producer`, the batch is that producer's transactional batch."""
        partition = self.broker.partition(self.topic, index)
        if partition is None:
            return _done(ErrorCode.NOT_COORDINATOR)
        replicas = self.broker.replicas
        if replicas is not None and len(partition.isr) < partition.min_insync_replicas:
            return _done(_AS_COORDINATOR_ERROR[ErrorCode.NOT_ENOUGH_REPLICAS])
        code, offset = self._append(partition, index, entries, for_commit, producer)
        if code or replicas is None:
            return _done(code, offset)
        return self._acknowledged(replicas, partition, offset)

    async def _acknowledged(self, replicas, partition, offset):
        code = await replicas.wait_for_acks(partition, offset, self.commit_timeout_ms)
        return _AS_COORDINATOR_ERROR.get(code, code), offset

    def _append(self, partition, index, entries, for_commit, producer=None):
        """(0 or the error code to answer, the batch's last offset or -1)."""
        ts = now_ms()
        txn = {} if producer is None else dict(
            producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
            transactional=True)
        try:
            data = encode_batch([(ts, key, value, ()) for key, value in entries], **txn)
            (_, header), = split_batches(data)
            result = partition.append_as_leader([(data, header)])
        except Exception as e:  # noqa: BLE001 - every failure becomes a Kafka error code
            code, message = append_error_code(e)
            log.warning("write to %s-%d failed: %s", self.topic, index, message)
            if code in _TOO_LARGE:
                code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE if for_commit else \
                    ErrorCode.UNKNOWN_SERVER_ERROR
            return _AS_COORDINATOR_ERROR.get(code, code), -1
        return 0, result.last_offset

    def parse_key(self, key: bytes):
        return parse_key(key)

    def replay(self, index):
        """Yield (OffsetKey | GroupKey, value bytes or None, Producer or None) for the
        partition's records in order, and a Marker for each transaction marker.

        To the log end, not the high watermark, as Kafka's coordinator loads: a new leader's
        high watermark lags the old one's, and what its log holds is what its epoch will commit
        (an acknowledged commit may sit above the high watermark it has heard of so far)."""
        partition = self.broker.partition(self.topic, index)
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
                        yield Marker(h.producer_id, control_batch_type(one))
                    continue
                producer = Producer(h.producer_id, h.producer_epoch) \
                    if h.is_transactional else None
                for record in decode_batches(one, start_offset=offset):
                    if record.key is None:
                        continue
                    key = self.parse_key(record.key)
                    if key is not None:
                        yield key, record.value, producer
            offset = next_offset_after(data)


async def _done(code, offset=-1):
    return code, offset
