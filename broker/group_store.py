"""`__consumer_offsets`: the compacted internal topic where groups and their offsets are kept.

The coordinator of a group is the leader of partition `partition_for(group id)`; on a single
broker that is this broker for every partition, but the mapping stays explicit so replication
can move partitions (and the groups in them) between brokers. Each coordinator write is one
record batch appended to that partition; loading replays a partition from its start.

Offset commits and group metadata are written as Kafka's coordinator writes them, with acks=all
(`write`): refused while the ISR is smaller than the topic's `min.insync.replicas`, answered once
every in-sync replica has the batch or after `offsets.commit.timeout.ms`, so an acknowledged
commit survives the loss of its coordinator. Tombstones (`append`) are only appended here.
"""
import logging
import time

from minilog.connector.batch import split_batches
from minilog.connector.protocol import ErrorCode
from minilog.connector.records import decode_batches, encode_batch, next_offset_after

from .group_records import parse_key, partition_for
from .producer_errors import append_error_code

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


class OffsetsTopic:
    def __init__(self, broker):
        self.broker = broker
        self.num_partitions = broker.config["offsets.topic.num.partitions"]
        self.commit_timeout_ms = broker.config["offsets.commit.timeout.ms"]

    def ensure(self, replication_factor=-1):
        """Create the topic on first start; an existing one keeps its partition count (as in
        Kafka, changing offsets.topic.num.partitions later would move every group). In a
        replicated cluster only the controller creates it, once enough brokers are up."""
        ts = self.broker.metadata.topics.get(OFFSETS_TOPIC)
        if ts is None and self.broker.quorum is not None and not self.broker.quorum.is_controller:
            return None
        if ts is None:
            code, message, ts = self.broker.topics.create(
                OFFSETS_TOPIC, self.num_partitions, replication_factor,
                {"cleanup.policy": "compact", "segment.bytes": str(OFFSETS_SEGMENT_BYTES)},
                internal=True)
            if code:
                raise RuntimeError(f"cannot create {OFFSETS_TOPIC}: {message}")
            log.info("created %s with %d partitions", OFFSETS_TOPIC, self.num_partitions)
        self.num_partitions = len(ts.partitions)
        return ts

    def partition_for(self, group_id):
        return partition_for(group_id, self.num_partitions)

    def led_partitions(self):
        """Partitions led by this broker: it coordinates the groups that hash to them."""
        ts = self.broker.metadata.topics.get(OFFSETS_TOPIC)
        node = self.broker.config.node_id
        return [] if ts is None else [i for i, st in sorted(ts.partitions.items())
                                      if st.leader == node]

    def coordinator(self, group_id):
        """The broker endpoint coordinating `group_id`, or None when its partition has no leader."""
        ts = self.broker.metadata.topics.get(OFFSETS_TOPIC)
        if ts is None:
            return None
        state = ts.partitions.get(self.partition_for(group_id))
        return None if state is None else self.broker.metadata.brokers.get(state.leader)

    def append(self, index, entries, for_commit=False):
        """Write [(key, value or None)] as one batch; returns 0 or the error code to answer."""
        partition = self.broker.partition(OFFSETS_TOPIC, index)
        if partition is None:
            return ErrorCode.NOT_COORDINATOR
        return self._append(partition, index, entries, for_commit)[0]

    def write(self, index, entries, for_commit=False):
        """Append now, with acks=all; returns an awaitable of (0 or the error code to answer,
        the batch's offset). Appending before the first await keeps writes in call order."""
        partition = self.broker.partition(OFFSETS_TOPIC, index)
        if partition is None:
            return _done(ErrorCode.NOT_COORDINATOR)
        replicas = self.broker.replicas
        if replicas is not None and len(partition.isr) < partition.min_insync_replicas:
            return _done(_AS_COORDINATOR_ERROR[ErrorCode.NOT_ENOUGH_REPLICAS])
        code, offset = self._append(partition, index, entries, for_commit)
        if code or replicas is None:
            return _done(code, offset)
        return self._acknowledged(replicas, partition, offset)

    async def _acknowledged(self, replicas, partition, offset):
        code = await replicas.wait_for_acks(partition, offset, self.commit_timeout_ms)
        return _AS_COORDINATOR_ERROR.get(code, code), offset

    def _append(self, partition, index, entries, for_commit):
        """(0 or the error code to answer, the batch's last offset or -1)."""
        ts = now_ms()
        try:
            data = encode_batch([(ts, key, value, ()) for key, value in entries])
            (_, header), = split_batches(data)
            result = partition.append_as_leader([(data, header)])
        except Exception as e:  # noqa: BLE001 - every failure becomes a Kafka error code
            code, message = append_error_code(e)
            log.warning("write to %s-%d failed: %s", OFFSETS_TOPIC, index, message)
            if code in _TOO_LARGE:
                code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE if for_commit else \
                    ErrorCode.UNKNOWN_SERVER_ERROR
            return _AS_COORDINATOR_ERROR.get(code, code), -1
        return 0, result.last_offset

    def replay(self, index):
        """Yield (OffsetKey | GroupKey, value bytes or None) for the partition's records in order.

        To the log end, not the high watermark, as Kafka's coordinator loads: a new leader's
        high watermark lags the old one's, and what its log holds is what its epoch will commit
        (an acknowledged commit may sit above the high watermark it has heard of so far)."""
        partition = self.broker.partition(OFFSETS_TOPIC, index)
        if partition is None:
            return
        offset, end = partition.log_start_offset, partition.log_end_offset
        while offset < end:
            data = partition.read(offset, _LOAD_CHUNK, committed_only=False)
            if not data:
                break
            for record in decode_batches(data, start_offset=offset):
                if record.key is None:
                    continue
                key = parse_key(record.key)
                if key is not None:
                    yield key, record.value
            offset = next_offset_after(data)


async def _done(code, offset=-1):
    return code, offset
