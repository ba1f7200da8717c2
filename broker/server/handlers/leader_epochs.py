"""OffsetForLeaderEpoch: where a leader epoch ended in this partition's log.

Followers and consumers (KIP-320) ask it after a leader change: a log that holds offsets past
the returned end offset for its last epoch has a divergent tail to truncate (or, for a consumer,
a position the new leader never had). The answer comes from the partition's leader epoch cache;
a single broker has one epoch, which ends at the log end.
"""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...security.access import CLUSTER, CLUSTER_ACTION, DESCRIBE, allowed, topic_refusal
from . import handles
from .fetch import _epoch_error as epoch_error

_RESP = response(ApiKey.OFFSET_FOR_LEADER_EPOCH)
UNDEFINED = (-1, -1)


def _answer(broker, topic, p):
    """(error, epoch, end offset) for one requested partition."""
    partition = broker.partition(topic, p.partition)
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, *UNDEFINED
    code = epoch_error(partition, p.current_leader_epoch)
    if code:
        return code, *UNDEFINED
    if not partition.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, *UNDEFINED
    if partition.epoch_cache is not None:
        return 0, *partition.epoch_cache.end_offset_for(p.leader_epoch, partition.log_end_offset)
    if 0 <= p.leader_epoch <= partition.leader_epoch:
        return 0, partition.leader_epoch, partition.log_end_offset
    return 0, *UNDEFINED


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4)
async def offset_for_leader_epoch(broker, header, req):
    topics = []
    replica = getattr(req, "replica_id", -1) >= 0
    for t in req.topics:
        parts = []
        refused = (0 if allowed(broker, header, CLUSTER_ACTION, CLUSTER)
                   else ErrorCode.CLUSTER_AUTHORIZATION_FAILED) if replica else \
            topic_refusal(broker, header, DESCRIBE, t.topic)
        for p in t.partitions:
            code, epoch, end = (refused, *UNDEFINED) if refused else _answer(broker, t.topic, p)
            parts.append(_RESP.make("topics", "partitions", error_code=code,
                                    partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(_RESP.make("topics", topic=t.topic, partitions=parts))
    return _RESP.cls(throttle_time_ms=0, topics=topics)
