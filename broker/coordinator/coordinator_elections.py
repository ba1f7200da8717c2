"""The coordinators learn which of their partitions this broker leads from the committed
metadata, with the leader epoch (Kafka's BrokerMetadataPublisher calling the coordinators'
onElection / onResignation).

A metadata publisher installed after the replica manager: for each delta it notes the
changed partitions of the coordinator topics (`__consumer_offsets`, `__transaction_state`) and
then, per partition, tells the topic's coordinator `on_election(index, leader_epoch)` when the
image makes this broker its leader, `on_resignation(index, leader_epoch)` when it names another
leader (`None` when the partition is gone). The runtime keeps each shard's epoch and ignores a
call whose epoch is no newer than the one it holds, so a late or repeated view of who leads
never loads or unloads the wrong shard.

An election waits until this broker's replica leads the partition at that epoch: the shard is
loaded from the replica's log and writes to it at that epoch, and the replica manager acts on
committed metadata only once the broker is unfenced, a moment after the delta (it runs on the
next turn of the event loop, as this pass does, queued after it). Until then the partition
stays pending, and `broker_ready` tries again once the broker has been unfenced.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..metadata.delta import MetadataDelta
    from ..metadata.image import MetadataImage

log = logging.getLogger("minilog.broker.coordinator")


class ElectedCoordinator(Protocol):
    """A coordinator of one topic's partitions (the group or the transaction coordinator)."""

    def on_election(self, index: int, epoch: int) -> None: ...

    def on_resignation(self, index: int, epoch: int | None) -> None: ...


class LeadingReplicas(Protocol):
    """The replica manager, asked at which leader epoch a replica here leads."""

    def leading_epoch(self, topic: str, index: int) -> int | None:
        """The leader epoch this broker's replica leads the partition at; None if it does not
        lead it (yet)."""


class CoordinatorElections:
    """The metadata publisher telling the coordinators of their elections and resignations."""

    def __init__(self, node_id: int, coordinators: Mapping[str, ElectedCoordinator],
                 replicas: LeadingReplicas) -> None:
        self.node_id = node_id
        self.coordinators = dict(coordinators)  # by topic
        self.replicas = replicas
        self.image: MetadataImage | None = None  # the newest published (installing publishes it)
        self._pending: set[tuple[str, int]] = set()
        self._scheduled = False

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image
        self._pending |= {key for key in delta.changed_partitions if key[0] in self.coordinators}
        self._schedule()

    def broker_ready(self) -> None:
        """The broker was unfenced: its replicas now lead what the image says they lead."""
        self._schedule()

    def _schedule(self) -> None:
        """After the replica manager's pass over the same delta, queued before this one."""
        if self._pending and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.publish)

    def publish(self) -> None:
        """Tell the coordinators of each pending partition's leadership in the image."""
        self._scheduled = False
        if self.image is None:
            return
        for key in sorted(self._pending):
            topic, index = key
            coordinator = self.coordinators[topic]
            ts = self.image.topics.get(topic)
            state = ts.partitions.get(index) if ts is not None else None
            if state is None:
                coordinator.on_resignation(index, None)
            elif state.leader != self.node_id:
                coordinator.on_resignation(index, state.leader_epoch)
            elif self.replicas.leading_epoch(topic, index) == state.leader_epoch:
                coordinator.on_election(index, state.leader_epoch)
            else:
                continue  # led here once the replica manager makes its replica leader
            self._pending.discard(key)
