"""The broker's metadata publishers, in the order each committed change reaches them.

As Kafka's BrokerServer installs its publishers with the MetadataLoader, the broker names
here, explicitly and in order, everything that follows the committed metadata: the metadata
cache handlers read (installed first, when the store is made), then the replica manager
(replicas lead, follow or go), the coordinators (which of their partitions they lead, at which
leader epoch; offsets of deleted partitions go), the
authorizer's ACLs, SCRAM credentials, dynamic broker configs, and the log cleaner (a deleted
partition's checkpoint goes). Nothing subscribes itself by being imported.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..coordinator.coordinator_elections import CoordinatorElections
from ..coordinator.group.group_store import OFFSETS_TOPIC
from ..coordinator.transaction.txn_coordinator import TRANSACTION_TOPIC
from ..metadata.delta import MetadataDelta
from ..metadata.image import MetadataImage
from ..metadata.loader import MetadataPublisher


class ForgetDeleted:
    """A component keeping state by partition name forgets the partitions of deleted topics at
    once, so a topic created again under the same name starts afresh: the group coordinator
    its committed offsets (Kafka's onPartitionsDeleted), the log cleaner its checkpoint (a new
    topic is dirty from its first offset)."""

    def __init__(self, forget: Callable[[list[tuple[str, int]]], object]) -> None:
        self.forget = forget

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        deleted = delta.deleted_partitions()
        if deleted:
            self.forget(deleted)


def coordinator_elections(broker: Any) -> CoordinatorElections:
    """The publisher telling the group and transaction coordinators (made before it) of the
    partitions they lead here, asking the replica manager whether its replica leads yet."""
    return CoordinatorElections(broker.config.node_id,
                                {OFFSETS_TOPIC: broker.groups, TRANSACTION_TOPIC: broker.txn},
                                broker.replicas)


def broker_publishers(broker: Any) -> list[MetadataPublisher]:
    """The publishers after the metadata cache, in order: the coordinators hear of their
    elections after the replica manager has heard of the same delta."""
    found: list[MetadataPublisher] = []
    if broker.replicas is not None:
        found.append(broker.replicas)
    if broker.elections is not None:
        found.append(broker.elections)
    if broker.groups is not None:
        found.append(ForgetDeleted(broker.groups.on_partitions_deleted))
    found += [broker.acls, broker.scram, broker.dynamic_configs.store]
    if broker.cleaner is not None:
        found.append(ForgetDeleted(broker.cleaner.forget))
    return found
