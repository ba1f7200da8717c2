"""A coordinator's compacted internal topic: `__consumer_offsets`, `__transaction_state`.

The coordinator of a key (a group id, a transactional id) is the leader of partition
`partition_for(key)`, Kafka's `Utils.abs(key.hashCode) % partitions`; on a single broker that
is this broker for every partition, but the mapping stays explicit so replication can move
partitions (and what they coordinate) between brokers. One class serves each topic with its
own name and settings; writing and loading its partitions is the coordinator runtime's
(`runtime.py`, `partition_writer.py`).
"""
from __future__ import annotations

import logging
from typing import Any

from .group.group_records import partition_for

SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes

log = logging.getLogger("minilog.broker.coordinator")


class CoordinatorTopic:
    def __init__(self, broker: Any, topic: str, num_partitions_key: str,
                 min_isr_key: str | None = None) -> None:
        self.broker = broker
        self.topic = topic
        self.num_partitions: int = broker.config[num_partitions_key]
        self._min_isr_key = min_isr_key

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        configs = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES)}
        if self._min_isr_key is not None:
            min_isr = self.broker.config[self._min_isr_key]
            if replication_factor > 0:
                min_isr = min(min_isr, replication_factor)
            configs["min.insync.replicas"] = str(min_isr)
        return configs

    def ensure(self, replication_factor: int = -1) -> Any:
        """Create the topic on first start; an existing one keeps its partition count (as in
        Kafka, changing offsets.topic.num.partitions later would move every group). In a
        replicated cluster only the controller creates it, once enough brokers are up."""
        ts = self.broker.metadata.topics.get(self.topic)
        if ts is None and not self.broker.quorum.is_controller:
            return None
        if ts is None:
            code, message, ts = self.broker.topics.create(
                self.topic, self.num_partitions, replication_factor,
                self.topic_configs(replication_factor), internal=True)
            if code:
                raise RuntimeError(f"cannot create {self.topic}: {message}")
            log.info("created %s with %d partitions", self.topic, self.num_partitions)
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
