"""Committed metadata records in, a new image and its delta out to the publishers, in order
(Kafka's MetadataLoader and MetadataPublisher).

The loader is the one place the metadata image changes: for each run of committed records it
builds a `MetadataDelta` on the current image, makes the next image, and hands `(delta, image)`
to each publisher in the order they were installed, where the broker is wired (the metadata
cache first, then the replica manager, the coordinators, the authorizer, SCRAM, dynamic configs,
the log cleaner...). A publisher installed late first gets the whole current image as one
delta from an empty one, as Kafka's loader catches a new publisher up. A publisher that fails
is logged and the others still hear of the change (Kafka's fault handler does the same).
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

from . import records
from .delta import MetadataDelta
from .image import MetadataImage
from .records import Record

log = logging.getLogger("minilog.broker.metadata.loader")


class MetadataPublisher(Protocol):
    """Something the broker runs that follows the committed metadata."""

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """`image` is the new committed image, `delta` what changed since the previous one."""


class MetadataCache:
    """The image request handlers read (Kafka's KRaftMetadataCache): the newest published."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image


class MetadataLoader:
    def __init__(self, image: MetadataImage) -> None:
        self._image = image
        self._publishers: list[MetadataPublisher] = []

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def publishers(self) -> list[MetadataPublisher]:
        return list(self._publishers)

    def install(self, publishers: Iterable[MetadataPublisher]) -> None:
        """Add publishers, in order, after those installed before; each first hears of the
        whole current image."""
        for publisher in publishers:
            catch_up = MetadataDelta(MetadataImage(self._image.cluster_id))
            catch_up.replay(records.image_record(self._image), self._image.offset)
            self._publish_to(publisher, catch_up, self._image)
            self._publishers.append(publisher)

    def handle_commit(self, batch: Sequence[tuple[int, Record]]) -> MetadataImage:
        """Committed records, [(offset, record)] in log order: the next image, published
        (Raft hands them here: the loader is a Raft listener)."""
        if not batch:
            return self._image
        delta = MetadataDelta(self._image).replay_all(batch)
        return self._publish(delta)

    # -- the rest of a Raft listener (raft_node.RaftListener), registered before the store ---
    def handle_reset(self) -> None:
        self.reset()

    def handle_leader_change(self, leading: bool) -> None:
        """Whoever leads, every node's image is what the quorum committed."""

    def reset(self) -> MetadataImage:
        """Forget everything (the log is replayed from its start or from a snapshot)."""
        return self._publish(MetadataDelta.from_empty(self._image))

    def _publish(self, delta: MetadataDelta) -> MetadataImage:
        image = delta.apply()
        self._image = image
        for publisher in self._publishers:
            self._publish_to(publisher, delta, image)
        return image

    @staticmethod
    def _publish_to(publisher: MetadataPublisher, delta: MetadataDelta,
                    image: MetadataImage) -> None:
        try:
            publisher.on_metadata_update(delta, image)
        except Exception:  # noqa: BLE001 - one publisher's bug must not starve the others
            log.exception("metadata publisher %s failed at offset %d",
                          type(publisher).__name__, image.offset)
