"""Records waiting for their topic's metadata: the producer queues them (the Java producer
blocks `send` in `waitOnMetadata` instead) until a metadata refresh names the topic, and fails
them once max.block.ms has passed, with the cause the metadata gave.
"""
from __future__ import annotations

from minilog.connector.protocol import ErrorCode, KafkaError

from .cluster import Cluster
from .producer_batch import Waiting


def release_waiting(waiting: dict[str, list[Waiting]], cluster: Cluster, now: float,
                    max_block_ms: int) -> tuple[list[tuple[str, list[int], list[Waiting]]],
                                                list[tuple[Waiting, KafkaError]]]:
    """Take from `waiting` what the refreshed metadata lets go: ([(topic, its partitions, its
    records)] now known, [(record, error)] past their deadline)."""
    ready: list[tuple[str, list[int], list[Waiting]]] = []
    expired: list[tuple[Waiting, KafkaError]] = []
    for topic in list(waiting):
        partitions = cluster.partitions_for(topic)
        if partitions is not None:
            ready.append((topic, partitions, waiting.pop(topic)))
            continue
        keep = [w for w in waiting[topic] if w[4] > now]
        late = [w for w in waiting[topic] if w[4] <= now]
        if late:
            cause = cluster.topic_error(topic)
            err = KafkaError(cause.code if cause else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {topic!r} not present in metadata after {max_block_ms} ms"
                             + (" (it does not exist)" if cause else ""))
            expired += [(w, err) for w in late]
        if keep:
            waiting[topic] = keep
        else:
            del waiting[topic]
    return ready, expired
