"""What changes the metadata, as records: the writes `TopicManager` makes.

Each write is decided against the store's working view (`working`: on the active controller,
the committed image plus its own records not yet committed; elsewhere the image) and becomes
records handed to `append`, which the store commits through the Raft quorum (a single broker's
one-voter quorum commits them as it appends them). Nothing here changes an image: only replaying the records
does (`delta.py`).
"""
from __future__ import annotations

import abc
import uuid
from collections.abc import Mapping, Sequence

from . import records
from .image import MetadataImage, PartitionState, TopicState
from .placement import assign_replicas
from .records import Record


class MetadataStore(abc.ABC):
    """The writes; a subclass provides `image`, `working` and `append`."""

    node_id: int

    @property
    @abc.abstractmethod
    def image(self) -> MetadataImage: ...

    @property
    @abc.abstractmethod
    def working(self) -> MetadataImage:
        """What a change is validated against."""

    @abc.abstractmethod
    def append(self, recs: Sequence[Record]) -> int:
        """Commit `recs` (or start to); the offset of the last one."""

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str], internal: bool = False,
                     assignment: Mapping[int, Sequence[int]] | None = None) -> TopicState:
        """`assignment` ({partition: [replica ids]}, preferred leader first) as the client
        asked for it, else replicas placed across the live brokers."""
        view = self.working
        ts = TopicState(name, uuid.uuid4(), configs=dict(configs), internal=internal)
        if not assignment:
            assignment = assign_replicas(list(view.brokers), 0, num_partitions,
                                         replication_factor, len(view.topics))
        recs = [records.topic_record(ts)]
        for i, replicas in sorted(assignment.items()):
            isr = [r for r in replicas if r in view.brokers]  # a manual one may name fenced ones
            recs.append(records.partition_record(name, i, PartitionState(
                tuple(replicas), isr[0] if isr else -1, isr=tuple(isr or replicas))))
        self.append(recs)
        return self.working.topics[name]

    def delete_topic(self, name: str) -> TopicState:
        ts = self.working.topics[name]
        self.append([records.remove_topic_record(name)])
        return ts

    def add_partitions(self, name: str, new_total: int,
                       assignment: Sequence[Sequence[int]] | None = None) -> TopicState:
        """`assignment`: [replica ids] of each new partition, else placed across live brokers."""
        view = self.working
        ts = view.topics[name]
        rf = len(ts.partitions[0].replicas) if ts.partitions else 1
        current = len(ts.partitions)
        if assignment:
            placed = {current + i: list(r) for i, r in enumerate(assignment)}
        else:
            placed = assign_replicas(list(view.brokers), current, new_total - current, rf,
                                     len(view.topics))
        self.append([records.partition_record(name, i, PartitionState(tuple(r), r[0]))
                     for i, r in placed.items()])
        return self.working.topics[name]

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        self.append([records.configs_record(name, dict(configs))])
