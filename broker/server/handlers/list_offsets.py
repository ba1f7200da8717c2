"""ListOffsets: earliest, latest, by timestamp, and the record with the largest timestamp.

The log answers at batch granularity without decoding; the one batch it points at is then
decoded here so the answer names the exact record, as Kafka's does.
"""
import time

from minilog.connector.batch import read_header
from minilog.connector.protocol import ApiKey, ErrorCode, response
from minilog.connector.records import decode_batches

from ...security.access import DESCRIBE, topic_refusal
from . import handles, leader_partition

_RESP = response(ApiKey.LIST_OFFSETS)
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def lookup(partition, timestamp, committed_only=True, stable_only=False):
    """(timestamp, offset, leader epoch) Kafka answers for a ListOffsets query on one partition.

    The leader epoch is that of the batch found, as Kafka's (-1 when none is known). With
    `stable_only` (isolation_level read_committed) the end is the last stable offset.
    """
    end = partition.last_stable_offset if stable_only else \
        partition.high_watermark if committed_only else partition.log_end_offset
    if timestamp == LATEST:
        return -1, end, partition.leader_epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        start = partition.log_start_offset
        return -1, start, _epoch_of_batch_at(partition, start, partition.leader_epoch)
    if timestamp == LATEST_TIERED:  # no tiered storage: nothing was ever tiered
        return -1, -1, -1
    if timestamp == MAX_TIMESTAMP:
        entry = partition.log.max_timestamp_entry()
        if not entry or entry[1] >= end:
            return -1, -1, -1
        epoch, records = _batch_at(partition, entry[1])
        best = max(records, key=lambda r: r.timestamp, default=None)  # first of equal maxima
        return (best.timestamp, best.offset, epoch) if best else (*entry, epoch)
    found = partition.log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= end:
        return -1, -1, -1
    epoch, records = _batch_at(partition, found[0])
    for r in records:
        if r.timestamp >= timestamp and r.offset < end:
            return r.timestamp, r.offset, epoch
    return found[1], found[0], epoch


def legacy_offsets(partition, timestamp, max_num_offsets, from_consumer=True):
    """ListOffsets v0's `old_style_offsets`, as Kafka 3.9's `legacyFetchOffsetsBefore`: the
    base offset of each segment (and the log end, after a non-empty last segment), each with
    the segment's last-modified time; from the one `timestamp` names (the last for latest,
    the first for earliest, else the last modified at or before it) back to the first, at most
    `max_num_offsets`, largest first. A consumer's answer stops at the high watermark."""
    log = partition.log
    start = log.log_start_offset
    points = [(max(seg.base_offset, start), seg.last_modified_ms) for seg in log.segments]
    if log.active_segment.size > 0:
        points.append((log.log_end_offset, int(time.time() * 1000)))
    if timestamp == LATEST:
        index = len(points) - 1
    elif timestamp == EARLIEST:
        index = 0
    else:
        index = max((i for i, (_, ts) in enumerate(points) if ts <= timestamp), default=-1)
    offsets = sorted((o for o, _ in points[max(0, index + 1 - max_num_offsets):index + 1]),
                     reverse=True)
    hw = partition.high_watermark
    if from_consumer and any(o > hw for o in offsets):
        offsets = [hw] + [o for o in offsets if o <= hw]
    return offsets


def _batch_at(partition, offset):
    """(leader epoch, records at or above the log start) of the batch holding `offset`."""
    data = partition.log.read(offset, 1, min_one=True)
    epoch = read_header(data).partition_leader_epoch if data else -1
    return max(epoch, -1), decode_batches(data, start_offset=partition.log_start_offset)


def _epoch_of_batch_at(partition, offset, default):
    if offset >= partition.log_end_offset:
        return default
    epoch, _ = _batch_at(partition, offset)
    return epoch


@handles(ApiKey.LIST_OFFSETS, 0, 9)
async def list_offsets(broker, header, req):
    topics = []
    for t in req.topics:
        parts = []
        refused = topic_refusal(broker, header, DESCRIBE, t.name)
        for p in t.partitions:
            partition, code = (None, refused) if refused else leader_partition(
                broker, t.name, p.partition_index, followers_too=req.replica_id >= 0)
            if partition is None:
                parts.append(_RESP.make("topics", "partitions", partition_index=p.partition_index,
                                        error_code=code))
                continue
            if p.current_leader_epoch >= 0 and p.current_leader_epoch != partition.leader_epoch:
                code = (ErrorCode.FENCED_LEADER_EPOCH if p.current_leader_epoch < partition.leader_epoch
                        else ErrorCode.UNKNOWN_LEADER_EPOCH)
                parts.append(_RESP.make("topics", "partitions", partition_index=p.partition_index,
                                        error_code=code))
                continue
            if header.api_version == 0:
                parts.append(_RESP.make("topics", "partitions", partition_index=p.partition_index,
                                        error_code=0, old_style_offsets=legacy_offsets(
                                            partition, p.timestamp, p.max_num_offsets,
                                            from_consumer=req.replica_id < 0)))
                continue
            ts, offset, epoch = lookup(partition, p.timestamp, committed_only=req.replica_id < 0,
                                       stable_only=req.replica_id < 0 and req.isolation_level == 1)
            parts.append(_RESP.make("topics", "partitions", partition_index=p.partition_index,
                                    error_code=0, timestamp=ts, offset=offset, leader_epoch=epoch))
        topics.append(_RESP.make("topics", name=t.name, partitions=parts))
    return _RESP.cls(throttle_time_ms=0, topics=topics)
