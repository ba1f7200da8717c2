"""What a coordinator reads of its broker, in process: the broker's real configuration, a
cluster of named topics, and the coordinator partitions in memory (`MemoryPartitions`)."""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any, TypeVar

from memory_partitions import MemoryPartitions

from minilog.broker.coordinator.runtime import CoordinatorRuntime
from minilog.broker.server.config import BrokerConfig

C = TypeVar("C")


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


def serving(kind: Callable[[Any, CoordinatorRuntime], C], broker: StandInBroker, topic: str,
            epoch: int) -> C:
    """A coordinator of `kind` elected leader of `topic`-0 at leader `epoch` and serving it, on
    a runtime over the broker's in-memory partitions (needs a running loop)."""
    broker.coordinator_partitions.lead(topic, 0, epoch)
    coordinator = kind(broker, CoordinatorRuntime(broker.coordinator_partitions))
    coordinator.serve([0])  # type: ignore[attr-defined]
    return coordinator


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    """Run an in-process scenario on a fresh event loop, bounded in time."""
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), 30)
    asyncio.run(bounded())
