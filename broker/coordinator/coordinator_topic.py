"""A coordinator's compacted internal topic: `__consumer_offsets`, `__transaction_state`.

The coordinator of a key (a group id, a transactional id) is the leader of partition
`partition_for(key)`, Kafka's `Utils.abs(key.hashCode) % partitions`; on a single broker that
is this broker for every partition, but the mapping stays explicit so replication can move
partitions (and what they coordinate) between brokers. One class serves each topic with its
own name and settings (its layout, `InternalTopic`, is the metadata's, which creates it);
writing and loading its partitions is the coordinator runtime's (`runtime.py`,
`partition_writer.py`).
"""
from __future__ import annotations

from typing import Any

from ..metadata.internal_topics import InternalTopic, ensure_internal_topic


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed int32."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's `Utils.abs(key.hashCode) % partitions` (abs(Integer.MIN_VALUE) is 0): the
    partition of a group id or a transactional id."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class CoordinatorTopic:
    def __init__(self, broker: Any, layout: InternalTopic) -> None:
        self.broker = broker
        self.layout = layout
        self.topic = layout.name
        self.num_partitions: int = layout.num_partitions(broker.config)

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        return self.layout.configs(self.broker.config, replication_factor)

    def ensure(self, replication_factor: int = -1) -> Any:
        """Create the topic on first start (`ensure_internal_topic`: in a replicated cluster
        only the controller creates it, once enough brokers are up); an existing one keeps its
        partition count, which partitioning follows from then on."""
        ts = ensure_internal_topic(self.broker, self.layout, self.num_partitions,
                                   replication_factor)
        if ts is not None:
            self.num_partitions = len(ts.partitions)
        return ts

    def partition_for(self, key: str) -> int:
        """By the topic's partition count as the metadata has it, once it exists (a topic
        made with another `offsets.topic.num.partitions` keeps its count, as in Kafka)."""
        ts = self.broker.metadata.topics.get(self.topic)
        return partition_for(key, len(ts.partitions) if ts is not None else self.num_partitions)

    def coordinator(self, key: str) -> Any:
        """The broker endpoint coordinating `key`, or None when its partition has no leader."""
        ts = self.broker.metadata.topics.get(self.topic)
        if ts is None:
            return None
        state = ts.partitions.get(self.partition_for(key))
        return None if state is None else self.broker.metadata.brokers.get(state.leader)
