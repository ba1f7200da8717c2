"""Log truncation detection (KIP-320): is a consumer's position still on its partition's log?

After an unclean leader election the new leader's log can lack records a consumer already
read, and then receive different records at those offsets. A position remembers the leader
epoch of the record before it; when the partition's leader changes (or a position comes from a
committed offset that names an epoch) the consumer asks the leader with OffsetForLeaderEpoch
where that epoch ends in its log. An end before the position means the log diverged there.
What to do then is Kafka's rule (Java's `SubscriptionState.maybeCompleteValidation`): with an
`auto.offset.reset` policy, continue from the divergence point (or reset by the policy when the
leader does not know the epoch at all); with `none`, raise `LogTruncationError`.

This module is the request and the decision; `consumer.py` owns the partition states.
"""
import logging
from collections.abc import Mapping
from typing import Any

from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

from .admin import by_leader
from .cluster import Cluster
from .connection import BrokerConnection, message_class
from .group_api import OffsetAndMetadata
from .types import TopicPartition

log = logging.getLogger("minilog.client")
UNDEFINED = -2  # a broker that cannot validate: the position is taken as valid

_OFFSET_FOR_LEADER_EPOCH = request(ApiKey.OFFSET_FOR_LEADER_EPOCH)
_Req = _OFFSET_FOR_LEADER_EPOCH.cls
_Topic = message_class(_OFFSET_FOR_LEADER_EPOCH, "topics")
_Part = message_class(_OFFSET_FOR_LEADER_EPOCH, "topics", "partitions")


class LogTruncationError(KafkaError):
    """The log of `partition` diverged before the consumer's position `offset` (Java's
    LogTruncationException, an OFFSET_OUT_OF_RANGE). `divergent_offset`: an OffsetAndMetadata
    of the first offset known to diverge and its epoch, or None when the leader does not know
    the position's epoch at all. Seek to continue."""

    def __init__(self, partition: TopicPartition, offset: int,
                 divergent_offset: OffsetAndMetadata | None) -> None:
        where = (f"the log diverged at offset {divergent_offset.offset} (leader epoch "
                 f"{divergent_offset.leader_epoch})" if divergent_offset is not None
                 else "the leader does not know the position's leader epoch")
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE,
                         f"log truncation detected for {partition} at offset {offset}: {where} "
                         "(auto.offset.reset=none: seek to continue)")
        self.partition, self.offset, self.divergent_offset = partition, offset, divergent_offset


# (end epoch, end offset, current leader epoch asked under)
EpochEnd = tuple[int, int, int]


async def end_offsets_for_epochs(cluster: Cluster, epochs: Mapping[TopicPartition, int],
                                 deadline: float) -> dict[TopicPartition, EpochEnd]:
    """{tp: leader epoch} -> {tp: (end epoch, end offset, current leader epoch asked under)}:
    where each epoch ends in the leader's log, stale leaders retried until `deadline`.
    A leader too old to validate (no OffsetForLeaderEpoch v2) answers (-2, -2, -2)."""
    async def send(conn: BrokerConnection, tps: list[TopicPartition]
                   ) -> dict[TopicPartition, tuple[int, EpochEnd]]:
        if not conn.supports(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2):  # before Kafka 2.3: skip
            return {tp: (0, (UNDEFINED, UNDEFINED, UNDEFINED)) for tp in tps}
        topics: dict[str, list[Any]] = {}
        asked: dict[TopicPartition, int] = {}
        for tp in tps:
            asked[tp] = cluster.leader_epoch(*tp)
            topics.setdefault(tp.topic, []).append(_Part(
                partition=tp.partition, current_leader_epoch=asked[tp], leader_epoch=epochs[tp]))
        resp = await conn.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, _Req(
            replica_id=-1, topics=[_Topic(topic=t, partitions=p) for t, p in topics.items()]),
            conn.version_for(ApiKey.OFFSET_FOR_LEADER_EPOCH))
        out: dict[TopicPartition, tuple[int, EpochEnd]] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                if tp in asked:
                    out[tp] = p.error_code, (p.leader_epoch, p.end_offset, asked[tp])
        return out
    return await by_leader(cluster, list(epochs), send, deadline, "OffsetForLeaderEpoch")


# What a position's check found: None (valid), ("reset", None), ("seek", (offset, epoch)) or
# ("raise", LogTruncationError).
Verdict = tuple[str, Any] | None


def judge(tp: TopicPartition, position: int, end_epoch: int, end_offset: int,
          policy: str) -> Verdict:
    """What the answer for a position means, as Java decides it:
    None (valid), ("reset", None) (reset by `policy`), ("seek", (offset, epoch)) (continue at
    the divergence point), or ("raise", LogTruncationError) when `policy` is none."""
    if end_offset == UNDEFINED:
        return None
    if end_offset < 0 or end_epoch < 0:
        if policy != "none":
            log.warning("log truncation detected for %s at offset %d: the leader does not know "
                        "its epoch, resetting by auto.offset.reset=%s", tp, position, policy)
            return "reset", None
        return "raise", LogTruncationError(tp, position, None)
    if end_offset < position:
        if policy != "none":
            log.warning("log truncation detected for %s at offset %d: continuing at %d, the "
                        "first offset known to diverge (leader epoch %d)", tp, position,
                        end_offset, end_epoch)
            return "seek", (end_offset, end_epoch)
        return "raise", LogTruncationError(tp, position,
                                           OffsetAndMetadata(end_offset, "", end_epoch))
    return None
