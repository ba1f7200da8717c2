"""The change a run of metadata records makes to an image (Kafka's MetadataDelta).

A delta starts from an image, replays records onto copies of only the parts they touch, and
`apply()` freezes them into the next image; the image it started from is never changed. What it
changed (partitions, topics' configs, deleted topics, brokers, ACLs, SCRAM, broker configs,
features, producer ids) is what the publishers act on, so none of them rebuilds a change by
comparing images. A snapshot record (`image`) replaces every part, as a snapshot load does.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from minilog.connector.acl_types import AclBinding

from . import records
from .image import BrokerEndpoint, MetadataImage, PartitionState, TopicState, frozen
from .records import Record


@dataclass
class _Topic:
    """A topic being changed: mutable until the delta is applied."""
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str]
    internal: bool

    @classmethod
    def of(cls, ts: TopicState) -> _Topic:
        return cls(ts.name, ts.topic_id, dict(ts.partitions), dict(ts.configs), ts.internal)

    def freeze(self) -> TopicState:
        return TopicState(self.name, self.topic_id, frozen(sorted(self.partitions.items())),
                          frozen(self.configs), self.internal)


@dataclass
class _Brokers:
    registered: dict[int, BrokerEndpoint]
    live: dict[int, BrokerEndpoint]
    fenced: set[int]
    epochs: dict[int, int]
    fenced_at: dict[int, int]


@dataclass
class MetadataDelta:
    """Records replayed onto `image`; `apply()` is the image they lead to."""
    image: MetadataImage
    reset: bool = False  # the image was thrown away (a truncated log replays from its start)
    snapshot: bool = False  # a snapshot replaced the whole image
    last_offset: int = -1
    changed_partitions: set[tuple[str, int]] = field(default_factory=set)
    changed_configs: set[str] = field(default_factory=set)  # topics whose configs changed
    _topics: dict[str, _Topic | None] = field(default_factory=dict)  # None: removed
    _brokers: _Brokers | None = None
    _next_producer_id: int | None = None
    _broker_configs: dict[str, Mapping[str, Any]] | None = None
    _acls: set[AclBinding] | None = None
    _scram: dict[tuple[str, str], Mapping[str, Any] | None] | None = None
    _features: dict[str, int] | None = None

    @classmethod
    def from_empty(cls, image: MetadataImage) -> MetadataDelta:
        """The delta that throws `image` away: every part of it changed, to nothing."""
        delta = cls(MetadataImage(image.cluster_id), reset=True)
        delta.changed_partitions = image.partition_keys()
        delta._forget(image)
        return delta

    # -- what changed ----------------------------------------------------------------------------
    @property
    def topics_changed(self) -> bool:
        return bool(self._topics)

    @property
    def brokers_changed(self) -> bool:
        return self._brokers is not None

    @property
    def acls_changed(self) -> bool:
        return self._acls is not None

    @property
    def scram_changed(self) -> bool:
        return self._scram is not None

    @property
    def broker_configs_changed(self) -> bool:
        return self._broker_configs is not None

    @property
    def features_changed(self) -> bool:
        return self._features is not None

    @property
    def producer_ids_changed(self) -> bool:
        return self._next_producer_id is not None

    def deleted_topics(self) -> dict[str, TopicState]:
        """Topics of the old image gone in the new one (or replaced by one of another id)."""
        gone = {}
        for name, new in self._topics.items():
            old = self.image.topics.get(name)
            if old is not None and (new is None or new.topic_id != old.topic_id):
                gone[name] = old
        return gone

    def deleted_partitions(self) -> list[tuple[str, int]]:
        return [(ts.name, i) for ts in self.deleted_topics().values() for i in ts.partitions]

    # -- replaying -----------------------------------------------------------------------------
    def replay_all(self, recs: Iterable[tuple[int, Record]]) -> MetadataDelta:
        for offset, rec in recs:
            self.replay(rec, offset)
        return self

    def replay(self, rec: Record, offset: int) -> None:
        """Apply the record at `offset` (-1: part of a snapshot) to this delta."""
        kind = rec["type"]
        handler = _REPLAY.get(kind)
        if handler is not None:
            handler(self, rec, offset)
        self.last_offset = max(self.last_offset, offset)

    def _topic(self, name: str) -> _Topic | None:
        if name in self._topics:
            return self._topics[name]
        ts = self.image.topics.get(name)
        found = self._topics[name] = None if ts is None else _Topic.of(ts)
        if found is None:
            del self._topics[name]
        return found

    def _broker_parts(self) -> _Brokers:
        if self._brokers is None:
            im = self.image
            self._brokers = _Brokers(dict(im.registered), dict(im.brokers), set(im.fenced),
                                     dict(im.broker_epochs), dict(im.fenced_at))
        return self._brokers

    def _replay_broker(self, rec: Record, offset: int) -> None:
        b = self._broker_parts()
        node = rec["id"]
        b.registered[node] = BrokerEndpoint(
            node, rec["host"], rec["port"], rec.get("rack"),
            frozen({name: tuple(address) for name, address in rec.get("listeners", {}).items()}))
        b.epochs[node] = offset
        b.fenced.add(node)
        b.live.pop(node, None)

    def _replay_fence(self, rec: Record, offset: int) -> None:
        b = self._broker_parts()
        node = rec["id"]
        if rec["fenced"]:
            b.fenced.add(node)
            b.fenced_at[node] = offset
            b.live.pop(node, None)
        elif node in b.registered:
            b.fenced.discard(node)
            b.live[node] = b.registered[node]

    def _replay_topic(self, rec: Record, offset: int) -> None:
        before = self._topic(rec["name"])
        if before is not None:  # the same name again: what it had is gone
            self.changed_partitions |= {(before.name, i) for i in before.partitions}
        self._topics[rec["name"]] = _Topic(rec["name"], uuid.UUID(rec["id"]), {},
                                           dict(rec["configs"]), rec["internal"])

    def _replay_partition(self, rec: Record, offset: int) -> None:
        topic = self._topic(rec["topic"])
        if topic is not None:
            topic.partitions[rec["index"]] = PartitionState(
                rec["replicas"], rec["leader"], rec["leader_epoch"], rec["isr"],
                rec["partition_epoch"], rec.get("adding", ()), rec.get("removing", ()))
            self.changed_partitions.add((topic.name, rec["index"]))

    def _replay_remove_topic(self, rec: Record, offset: int) -> None:
        topic = self._topic(rec["name"])
        if topic is not None:
            self.changed_partitions |= {(topic.name, i) for i in topic.partitions}
            self._topics[rec["name"]] = None

    def _replay_configs(self, rec: Record, offset: int) -> None:
        topic = self._topic(rec["name"])
        if topic is not None:
            topic.configs = dict(rec["configs"])
            self.changed_configs.add(topic.name)
            self.changed_partitions |= {(topic.name, i) for i in topic.partitions}

    def _replay_producer_ids(self, rec: Record, offset: int) -> None:
        current = self.image.next_producer_id if self._next_producer_id is None \
            else self._next_producer_id
        self._next_producer_id = max(current, rec["next"])

    def _replay_broker_config(self, rec: Record, offset: int) -> None:
        if self._broker_configs is None:
            self._broker_configs = dict(self.image.broker_configs)
        if rec["configs"]:
            self._broker_configs[rec["resource"]] = frozen(rec["configs"])
        else:
            self._broker_configs.pop(rec["resource"], None)

    def _replay_acl(self, rec: Record, offset: int) -> None:
        if self._acls is None:
            self._acls = set(self.image.acls)
        acl = AclBinding.from_json(rec["acl"])
        if rec["removed"]:
            self._acls.discard(acl)
        else:
            self._acls.add(acl)

    def _replay_scram(self, rec: Record, offset: int) -> None:
        if self._scram is None:
            self._scram = dict(self.image.scram)
        cred = rec["credential"]
        self._scram[(rec["user"], rec["mechanism"])] = None if cred is None else frozen(cred)

    def _replay_feature(self, rec: Record, offset: int) -> None:
        if self._features is None:
            self._features = dict(self.image.features)
        self._features[rec["name"]] = rec["level"]

    def _forget(self, image: MetadataImage) -> None:
        """Every part of `image` replaced by nothing (then by what a snapshot holds)."""
        self._topics = {name: None for name in image.topics}
        self._brokers = _Brokers({}, {}, set(), {}, {})
        self._next_producer_id = MetadataImage(image.cluster_id).next_producer_id
        self._broker_configs, self._acls, self._scram, self._features = {}, set(), {}, {}

    def _replay_image(self, rec: Record, offset: int) -> None:
        """A snapshot: the image as it was at `offset`, whatever came before."""
        self.snapshot = True
        self._forget(self.image)
        for b in rec["brokers"]:
            self._replay_broker(b, -1)
        brokers = self._broker_parts()
        brokers.epochs.update({int(n): e for n, e in rec["epochs"].items()})
        for node in rec["unfenced"]:
            self._replay_fence(records.fence_record(node, False), -1)
        brokers.fenced_at.update({int(n): o for n, o in rec.get("fenced_at", {}).items()})
        for r in rec["topics"] + rec["partitions"]:
            self.replay(r, -1)
        self._next_producer_id = rec["next_producer_id"]
        self._features = dict(rec.get("features", {}))
        sections = rec.get("sections", {})
        self._acls = {AclBinding.from_json(a) for a in sections.get("acls") or []}
        self._scram = scram_from_json(sections.get("scram") or {})
        self._broker_configs = {r: frozen(c) for r, c in
                                (sections.get("broker_configs") or {}).items()}
        self.changed_configs |= {name for name, t in self._topics.items() if t is not None}
        self.changed_partitions |= {(name, i) for name, t in self._topics.items()
                                    if t is not None for i in t.partitions}

    # -- the next image ----------------------------------------------------------------------------
    def apply(self) -> MetadataImage:
        """The image these records lead to."""
        im = self.image
        topics, by_id = im.topics, im.by_id
        if self._topics:
            topics_d, by_id_d = dict(im.topics), dict(im.by_id)
            for name, t in self._topics.items():
                old = topics_d.pop(name, None)
                if old is not None:
                    by_id_d.pop(old.topic_id, None)
                if t is not None:
                    ts = topics_d[name] = t.freeze()
                    by_id_d[ts.topic_id] = ts
            topics, by_id = frozen(topics_d), frozen(by_id_d)
        registered, live, fenced = im.registered, im.brokers, im.fenced
        epochs, fenced_at = im.broker_epochs, im.fenced_at
        if self._brokers is not None:
            b = self._brokers
            registered, live = frozen(b.registered), frozen(sorted(b.live.items()))
            fenced, epochs, fenced_at = frozenset(b.fenced), frozen(b.epochs), frozen(b.fenced_at)
        return MetadataImage(
            im.cluster_id, max(im.offset, self.last_offset), topics, by_id, live, registered,
            fenced, epochs, fenced_at,
            im.next_producer_id if self._next_producer_id is None else self._next_producer_id,
            im.broker_configs if self._broker_configs is None else frozen(self._broker_configs),
            im.acls if self._acls is None else frozenset(self._acls),
            im.scram if self._scram is None else frozen(self._scram),
            im.features if self._features is None else frozen(self._features))


def scram_from_json(d: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any] | None]:
    """`records.scram_json`'s format (or the first, {user: {mechanism: credential}} alone)."""
    users = d.get("users", {}) if d.get("format") == 2 else d
    found: dict[tuple[str, str], Mapping[str, Any] | None] = {
        (u, m): frozen(c) for u, ms in users.items() for m, c in ms.items()}
    for u, m in d.get("deleted", []) if d.get("format") == 2 else []:
        found[(u, m)] = None
    return found


def replayed(image: MetadataImage, recs: Iterable[tuple[int, Record]]) -> MetadataImage:
    """`image` with `recs` ([(offset, record)]) applied."""
    return MetadataDelta(image).replay_all(recs).apply()


_REPLAY = {
    records.BROKER: MetadataDelta._replay_broker,
    records.FENCE: MetadataDelta._replay_fence,
    records.TOPIC: MetadataDelta._replay_topic,
    records.PARTITION: MetadataDelta._replay_partition,
    records.REMOVE_TOPIC: MetadataDelta._replay_remove_topic,
    records.CONFIGS: MetadataDelta._replay_configs,
    records.PRODUCER_IDS: MetadataDelta._replay_producer_ids,
    records.BROKER_CONFIG: MetadataDelta._replay_broker_config,
    records.ACL: MetadataDelta._replay_acl,
    records.SCRAM: MetadataDelta._replay_scram,
    records.FEATURE: MetadataDelta._replay_feature,
    records.IMAGE: MetadataDelta._replay_image,
}
