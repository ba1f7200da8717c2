"""Fetch: serve stored batches as they are, with Kafka's long poll (max_wait_ms, min_bytes).

Consumers read up to the high watermark (read_committed ones up to the last stable offset, told
which transactions in that range were aborted) and long-poll for commits; followers (replica id
>= 0) read up to the log end and long-poll for appends (a new high watermark reaches them with
their next fetch, as in Kafka; voters of the metadata quorum hear of it at once, as in KRaft),
and their fetch offset tells the leader how far they are (see `Partition.follower_fetched`); a
follower whose last fetched epoch diverges from the leader's log gets `diverging_epoch` instead
of records, and so does a consumer that sends its last fetched epoch (Kafka's
`Partition.readRecords`; one that names an epoch unknown here gets OFFSET_OUT_OF_RANGE).
Only the leader of a partition answers (NOT_LEADER_OR_FOLLOWER elsewhere).
Fetch sessions are not kept: session id 0 tells clients to send full fetch requests.
Records longer than `ZERO_COPY_OVER` bytes are answered as `FileRegion`s, which the server
sends with sendfile: the page cache goes to the socket without passing through Python.
"""
import asyncio

from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...replication.partition import wait_for_any
from ...security.access import CLUSTER, CLUSTER_ACTION, READ, TOPIC, allowed
from ...storage.down_convert import down_convert, message_format
from ...storage.file_region import FileRegion
from ...storage.log import OffsetOutOfRange
from . import handles

_RESP = response(ApiKey.FETCH)
ZERO_COPY_OVER = 64 * 1024  # shorter reads are one pread: cheaper than a sendfile round


def _epoch_error(partition, requested):
    if requested < 0 or requested == partition.leader_epoch:
        return 0
    return (ErrorCode.FENCED_LEADER_EPOCH if requested < partition.leader_epoch
            else ErrorCode.UNKNOWN_LEADER_EPOCH)


def _consumer_divergence(partition, p):
    """(error, diverging (epoch, end offset) or None) for a consumer's last fetched epoch."""
    last = getattr(p, "last_fetched_epoch", -1)
    if last < 0 or partition.epoch_cache is None:
        return 0, None
    epoch, end = partition.epoch_cache.end_offset_for(last, partition.log_end_offset)
    if end < 0 or p.fetch_offset < partition.log_start_offset:
        return ErrorCode.OFFSET_OUT_OF_RANGE, None
    return 0, ((epoch, end) if epoch < last or end < p.fetch_offset else None)


_PARTITION = _RESP.child("responses", "partitions").cls  # built for every partition fetched
_ABORTED = _RESP.child("responses", "partitions", "aborted_transactions").cls


def _partition_response(index, code, partition=None, records=b"", diverging=None,
                        aborted=()):
    if partition is None:
        hw = lso = log_start = -1
    else:
        hw, lso, log_start = (partition.high_watermark, partition.last_stable_offset,
                              partition.log_start_offset)
    out = _PARTITION(partition_index=index, error_code=code, high_watermark=hw,
                     last_stable_offset=lso, log_start_offset=log_start,
                     aborted_transactions=None if code else [
                         _ABORTED(producer_id=a.producer_id, first_offset=a.first_offset)
                         for a in aborted], records=records)
    if code and partition is not None and partition.leader_id is not None:
        out.current_leader = _RESP.make("responses", "partitions", "current_leader",
                                        leader_id=partition.leader_id,
                                        leader_epoch=partition.leader_epoch)
    if diverging is not None:
        out.diverging_epoch = _RESP.make("responses", "partitions", "diverging_epoch",
                                         epoch=diverging[0], end_offset=diverging[1])
    return out


def _lookup(broker, name, index, follower):
    """The partition a fetch reads: a topic's, or for a replica the Raft layer's own log
    when the name is the quorum's (the Raft node decides which name that is)."""
    if name is None:
        return None
    partition = broker.partition(name, index)
    if partition is None and follower:
        partition = broker.quorum.raft.fetched_log(name, index)
    return partition


def _read_all(broker, wanted, max_bytes, follower, replica_id=-1, read_committed=False,
              replica_epoch=-1):
    """One pass over the requested partitions: (topic responses, bytes, partitions, errors,
    file regions to close if this pass is not answered)."""
    topics, total, waiting_on, errors, regions = [], 0, [], 0, []
    for key, name, topic_id, parts in wanted:
        out = []
        for p in parts:
            partition = _lookup(broker, name, p.partition, follower)
            if partition is None:
                code = (ErrorCode.UNKNOWN_TOPIC_ID if name is None
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                out.append(_partition_response(p.partition, code))
                errors += 1
                continue
            code = _epoch_error(partition, p.current_leader_epoch)
            if not code and not partition.is_leader:
                code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            if code:
                out.append(_partition_response(p.partition, code, partition))
                errors += 1
                continue
            if follower:
                hw = partition.high_watermark
                diverging = partition.follower_fetched(replica_id, p.fetch_offset,
                                                       p.last_fetched_epoch, replica_epoch)
                if diverging is not None:
                    out.append(_partition_response(p.partition, 0, partition, diverging=diverging))
                    errors += 1
                    continue
                if partition.high_watermark != hw and partition.wake_all:
                    errors += 1  # not an error: answer now, the voter commits on it
            else:
                code, diverging = _consumer_divergence(partition, p)
                if code or diverging is not None:
                    out.append(_partition_response(p.partition, code, partition,
                                                   diverging=diverging))
                    errors += 1
                    continue
            limit = max(0, min(p.partition_max_bytes, max_bytes - total))
            try:
                # At the log end there is nothing to read (what `read` answers there too): a
                # caught-up follower's fetch names every partition it follows, mostly idle.
                data = partition.read(p.fetch_offset, limit, committed_only=not follower,
                                      min_one=total == 0, region_over=ZERO_COPY_OVER,
                                      stable_only=read_committed) \
                    if (limit or total == 0) and p.fetch_offset != partition.log_end_offset \
                    else b""
            except OffsetOutOfRange:
                out.append(_partition_response(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE,
                                               partition))
                errors += 1
                continue
            total += len(data)
            if data and not follower:
                broker.metrics.fetched(name, len(data))
            if isinstance(data, FileRegion):
                regions.append(data)
            waiting_on.append(partition)
            # Kafka bounds the list by the batches returned, not the last stable offset.
            aborted = partition.log.aborted_transactions(p.fetch_offset, min(
                partition.last_stable_offset,
                partition.log.offset_after_read(p.fetch_offset, len(data)))) \
                if read_committed and data else ()
            out.append(_partition_response(p.partition, 0, partition, data, aborted=aborted))
        topics.append(_RESP.make("responses", topic=name, topic_id=topic_id, partitions=out))
    return topics, total, waiting_on, errors, regions


def _down_convert(topics, version, wanted):
    """Fetch v0-v3 read message formats v0/v1 (broker/storage/down_convert.py)."""
    offsets = {(key, p.partition): p.fetch_offset for key, _, _, parts in wanted for p in parts}
    magic = message_format(version)
    for t in topics:
        for p in t.partitions:
            data = p.records
            if isinstance(data, FileRegion):
                try:
                    data = data.read()
                finally:
                    p.records.close()
            p.records = down_convert(data, magic, offsets[(t.topic, p.partition_index)]) \
                if data else b""


@handles(ApiKey.FETCH, 0, 16)
async def fetch(broker, header, req):
    version = header.api_version
    if version >= 7 and req.session_id != 0:
        return _RESP.cls(throttle_time_ms=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                         session_id=0, responses=[])
    state = req.replica_state if version >= 15 else None
    replica_id = state.replica_id if state else req.replica_id
    replica_epoch = state.replica_epoch if state else -1  # KIP-903: who sent it
    follower = replica_id is not None and replica_id >= 0
    if follower:
        broker.peer_connections.seen(replica_id, header.closed)
    wanted = []
    for t in req.topics:
        if version >= 13:
            ts = broker.metadata.by_id.get(t.topic_id)
            wanted.append((t.topic_id, ts.name if ts else None, t.topic_id, t.partitions))
        else:
            ts = broker.metadata.topics.get(t.topic)
            wanted.append((t.topic, t.topic, ts.topic_id if ts else None, t.partitions))
    refused = []
    if broker.authorizer is not None:
        wanted, refused = _split_refused(broker, header, wanted, follower)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, req.max_wait_ms) / 1000.0
    high_watermarks, topics = None, []
    while wanted or not refused:  # all refused: answer at once
        topics, total, partitions, errors, regions = _read_all(
            broker, wanted, req.max_bytes, follower, replica_id,
            read_committed=not follower and req.isolation_level == 1,
            replica_epoch=replica_epoch)
        remaining = deadline - loop.time()
        if total >= max(req.min_bytes, 1) or errors or remaining <= 0 or broker.stopping:
            break
        # A follower woken by a new high watermark (a voter of the metadata quorum, or any
        # follower at a change of leadership) learns it at once.
        marks = [p.high_watermark for p in partitions]
        if follower and high_watermarks is not None and marks != high_watermarks:
            break
        high_watermarks = marks
        for region in regions:
            region.close()
        await wait_for_any(partitions, remaining, follower)
    if version < 4:
        _down_convert(topics, version, wanted)
    return _RESP.cls(throttle_time_ms=0, error_code=0, session_id=0,
                     responses=refused + topics)


def _split_refused(broker, header, wanted, follower):
    """(the wanted topics this principal may fetch, responses refusing the others): a
    follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic."""
    if follower:
        ok = allowed(broker, header, CLUSTER_ACTION, CLUSTER)
        keep = wanted if ok else []
    else:
        keep = [w for w in wanted if w[1] is None or allowed(broker, header, READ, TOPIC, w[1])]
    if len(keep) == len(wanted):
        return wanted, []
    kept = {id(w) for w in keep}
    refused = [_RESP.make("responses", topic=name, topic_id=topic_id, partitions=[
        _partition_response(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in parts])
        for w in wanted if id(w) not in kept for _, name, topic_id, parts in (w,)]
    return keep, refused
