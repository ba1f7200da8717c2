"""The coordinators' internal topics as the metadata creates them: `__consumer_offsets` and
`__transaction_state`, each a name, the setting of its partition count and its configs.

Kafka keeps these names below everything that uses them (`Topic.GROUP_METADATA_TOPIC_NAME`,
`Topic.TRANSACTION_STATE_TOPIC_NAME`) and the layout with the settings, so whoever creates the
topic (here the active controller, or the coordinator asking for it) and the coordinator that
lives in it read the same constant, and the controller needs nothing of the coordinators.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes

log = logging.getLogger("minilog.broker.metadata")


@dataclass(frozen=True)
class InternalTopic:
    name: str
    num_partitions_key: str  # the broker setting of its partition count, read at creation
    min_isr_key: str | None = None  # the setting of its min.insync.replicas, if it has one

    def num_partitions(self, config: Any) -> int:
        return int(config[self.num_partitions_key])

    def configs(self, config: Any, replication_factor: int) -> dict[str, str]:
        """Its topic configs: compacted, Kafka's segment size, and its own min ISR (at most
        its replication factor)."""
        configs = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES)}
        if self.min_isr_key is not None:
            min_isr = config[self.min_isr_key]
            if replication_factor > 0:
                min_isr = min(min_isr, replication_factor)
            configs["min.insync.replicas"] = str(min_isr)
        return configs


OFFSETS = InternalTopic("__consumer_offsets", "offsets.topic.num.partitions")
TRANSACTION_STATE = InternalTopic("__transaction_state", "transaction.state.log.num.partitions",
                                  "transaction.state.log.min.isr")


def ensure_internal_topic(broker: Any, topic: InternalTopic, num_partitions: int,
                          replication_factor: int = -1) -> Any:
    """The topic's state, created with `num_partitions` if the metadata has none yet; None
    off the active controller, which alone creates it. An existing one keeps its partition
    count (as in Kafka, changing offsets.topic.num.partitions later would move every group)."""
    ts = broker.metadata.topics.get(topic.name)
    if ts is None and not broker.quorum.is_controller:
        return None
    if ts is None:
        code, message, ts = broker.topics.create(
            topic.name, num_partitions, replication_factor,
            topic.configs(broker.config, replication_factor), internal=True)
        if code:
            raise RuntimeError(f"cannot create {topic.name}: {message}")
        log.info("created %s with %d partitions", topic.name, num_partitions)
    return ts
