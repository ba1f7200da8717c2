"""The cluster metadata a broker serves, as Kafka's MetadataImage: topics and their partitions,
brokers, dynamic configs, ACLs, SCRAM credentials, features and producer ids.

Every type here is immutable: an image is never changed, the next one is built by replaying
records onto a `MetadataDelta` (`delta.py`) and handed to the publishers (`loader.py`). So a
handler holding an image reads one consistent state, and no part of the broker can change
what another sees except by a record.
"""
from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from minilog.connector.acl_types import AclBinding

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249
INTERNAL_PREFIX = "__"

# Topic-level settings minilog understands (Kafka's names).
TOPIC_CONFIG_KEYS = frozenset({
    "cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "segment.ms",
    "flush.messages", "flush.ms", "index.interval.bytes", "max.message.bytes",
    "message.timestamp.type", "min.insync.replicas", "delete.retention.ms",
    "min.compaction.lag.ms", "min.cleanable.dirty.ratio", "compression.type",
    "unclean.leader.election.enable",
})
# Kafka 3.9 still accepts these, ignores them and warns; Kafka 4.0 removed them (KIP-724,
# KIP-937). librdkafka's test 0092 sets message.format.version. {name: why it is ignored}
DEPRECATED_TOPIC_CONFIGS = {
    "message.format.version": "Kafka 3.0 and later always write message format v2",
    "message.timestamp.difference.max.ms":
        "replaced by message.timestamp.before.max.ms and message.timestamp.after.max.ms",
}
TOPIC_CONFIG_KEYS |= frozenset(DEPRECATED_TOPIC_CONFIGS)


def topic_name_error(name: str, allow_internal: bool = False) -> str | None:
    """Why a topic name is illegal, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is reserved"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"topic name is {len(name)} characters long, the limit is {MAX_TOPIC_LENGTH}"
    if not LEGAL_TOPIC.match(name):
        return f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'"
    if name.startswith(INTERNAL_PREFIX) and not allow_internal:
        return f"topic names starting with {INTERNAL_PREFIX!r} are reserved for internal topics"
    return None


EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _empty() -> Any:
    """A dataclass field defaulting to the empty read-only mapping."""
    return field(default_factory=lambda: EMPTY)


def frozen(d: Mapping[Any, Any] | Iterable[tuple[Any, Any]] | None = None) -> Mapping[Any, Any]:
    """A read-only copy of `d` (a mapping or its items)."""
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class PartitionState:
    """One partition as the controller decided it (Kafka's PartitionRegistration)."""
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    isr: tuple[int, ...] = None  # type: ignore[assignment]  # None: every replica
    partition_epoch: int = 0  # bumped by every leader or ISR change (AlterPartition checks it)
    # A reassignment under way (KIP-455): `replicas` is then the old set and the target's new
    # members, `adding` those new members, `removing` the old ones the target leaves out.
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "replicas", tuple(self.replicas))
        object.__setattr__(self, "isr", tuple(self.replicas if self.isr is None else self.isr))
        object.__setattr__(self, "adding", tuple(self.adding))
        object.__setattr__(self, "removing", tuple(self.removing))

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)


@dataclass(frozen=True)
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionState] = _empty()  # index -> PartitionState
    configs: Mapping[str, str] = _empty()                # overrides only, Kafka names -> str
    internal: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "id": str(self.topic_id), "internal": self.internal,
                "configs": dict(self.configs),
                "partitions": {str(i): {"replicas": list(p.replicas), "leader": p.leader,
                                        "leader_epoch": p.leader_epoch, "isr": list(p.isr)}
                               for i, p in self.partitions.items()}}


@dataclass(frozen=True)
class BrokerEndpoint:
    """A broker's primary address, and every listener's ({name: (host, port)}, advertised):
    Metadata answers each client with the addresses of the listener it came through."""
    node_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: Mapping[str, tuple[str, int]] = _empty()

    def address_on(self, listener: str) -> tuple[str, int]:
        """(host, port) of this broker on `listener` (the inter-broker one, for its peers),
        its primary address when it registered no listener of that name."""
        return self.listeners.get(listener) or (self.host, self.port)


@dataclass(frozen=True)
class MetadataImage:
    """What the committed records say, as of `offset` (-1: nothing applied). Read side only:
    handlers, the replica manager and the controller read it; a delta makes the next one."""
    cluster_id: str
    offset: int = -1
    topics: Mapping[str, TopicState] = _empty()         # name -> TopicState
    by_id: Mapping[uuid.UUID, TopicState] = _empty()    # topic id -> TopicState
    brokers: Mapping[int, BrokerEndpoint] = _empty()    # live (unfenced) brokers, by node id
    registered: Mapping[int, BrokerEndpoint] = _empty()  # every broker the cluster knows
    fenced: frozenset[int] = frozenset()              # registered ids not serving
    broker_epochs: Mapping[int, int] = _empty()         # node id -> its registration's offset
    fenced_at: Mapping[int, int] = _empty()             # node id -> offset of its last fencing
    next_producer_id: int = 1000
    broker_configs: Mapping[str, Mapping[str, Any]] = _empty()  # resource ("" default) -> configs
    acls: frozenset[AclBinding] = frozenset()
    # (user, mechanism) -> the credential's JSON, or None once deleted (so seeds stay away)
    scram: Mapping[tuple[str, str], Mapping[str, Any] | None] = _empty()
    features: Mapping[str, int] = _empty()              # feature name -> finalized level

    def topic(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def partition_keys(self) -> set[tuple[str, int]]:
        """(topic, index) of every partition."""
        return {(ts.name, i) for ts in self.topics.values() for i in ts.partitions}
