"""What a coordinator reads of its broker, in process: the broker's real configuration, a
cluster of named topics, and the coordinator partitions in memory (`MemoryPartitions`)."""
from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from memory_partitions import MemoryPartitions

from minilog.broker.server.config import BrokerConfig


def topic(name: str, partitions: int, internal: bool = False) -> Any:
    return SimpleNamespace(name=name, topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
                           partitions=dict.fromkeys(range(partitions)), internal=internal)


class StandInBroker:
    """The broker fields a coordinator reads: config, metadata, metrics, its partitions'
    leader epochs (the coordinator epochs), and nothing replicated (no replica manager)."""

    def __init__(self, partitions: MemoryPartitions, topics: dict[str, int],
                 **config: Any) -> None:
        self.config = BrokerConfig.from_props({k.replace("_", "."): v for k, v in config.items()})
        self.coordinator_partitions = partitions
        made = [topic(name, count) for name, count in topics.items()]
        self.metadata = SimpleNamespace(topics={t.name: t for t in made},
                                        by_id={t.topic_id: t for t in made}, brokers={})
        self.metrics = SimpleNamespace(register=lambda *_: None)
        self.replicas = self.quorum = self.groups = None
        self.stopping = False

    def partition(self, name: str, index: int) -> Any:
        epoch = self.coordinator_partitions.leader_epochs.get((name, index))
        return None if epoch is None else SimpleNamespace(leader_epoch=epoch)
