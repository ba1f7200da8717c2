"""KIP-848's online migration: a live classic group becomes a consumer group, and back.

The conversions with no clock, timers or I/O, as Kafka's ConsumerGroup.fromClassicGroup and
ClassicGroup.fromConsumerGroup do them. Upgrading keeps every classic member as a member of the
consumer group: its subscription and owned partitions come from its JoinGroup metadata and its
last SyncGroup assignment (Kafka's ConsumerProtocolSubscription / Assignment), its member epoch
is the classic generation, and the target assignment starts as what each member owns, so no
partition changes hands until the next epoch reconciles it. Downgrading makes a classic group
of the remaining (all classic) members at generation = group epoch, each given its target
assignment; the caller then starts a rebalance. Committed offsets move with the group.

`group.consumer.migration.policy` (Kafka's ConsumerGroupMigrationPolicy) says which directions
are allowed; `disabled` keeps a live group of one protocol closed to the other's members.
"""
from collections.abc import Iterable, Mapping
from uuid import UUID

from minilog.connector.protocol.consumer_protocol import (
    LATEST_VERSION,
    Assignment,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)

from . import group as g
from .consumer_group import ClassicMetadata, ConsumerGroup, ConsumerMember, Partitions
from .group import Group, Member


class MigrationPolicy:
    """Kafka's ConsumerGroupMigrationPolicy: which online conversions are allowed."""

    def __init__(self, name: str):
        self.name = name
        self.upgrade = name in ("bidirectional", "upgrade")
        self.downgrade = name in ("bidirectional", "downgrade")
        self.mixed = name != "disabled"   # classic members may join a live consumer group


def can_upgrade(group: Group) -> bool:
    """A classic group whose members all speak the consumer embedded protocol."""
    return group.protocol_type == g.CONSUMER_PROTOCOL_TYPE and all(
        m.protocol_type == g.CONSUMER_PROTOCOL_TYPE for m in group.members.values())


def to_ids(partitions: Iterable[tuple[str, int]], topic_ids: Mapping[str, UUID]) -> Partitions:
    """[(topic, partition)] as {topic id: partitions}; topics the cluster lacks are dropped."""
    out: Partitions = {}
    for topic, partition in partitions:
        if topic in topic_ids:
            out.setdefault(topic_ids[topic], set()).add(partition)
    return out


def assignment_bytes(parts: Partitions, names: Mapping[UUID, str], metadata: bytes) -> bytes:
    """{topic id: partitions} as a ConsumerProtocolAssignment, in the version of the member's
    subscription `metadata` (Kafka's prepareAssignment)."""
    try:
        version = min(decode_subscription(metadata).version, LATEST_VERSION)
    except Exception:  # noqa: BLE001 - the member's opaque bytes: fall back to version 0
        version = 0
    tps = tuple(TopicPartition(names[t], p) for t, ps in sorted(parts.items(), key=lambda kv:
                                                                 names.get(kv[0], ""))
                if t in names for p in sorted(ps))
    return encode_assignment(Assignment(tps), version)


def classic_member(member_id: str, instance_id: str | None, client_id: str, client_host: str,
                   rebalance_timeout_ms: int, session_timeout_ms: int,
                   protocols: list[tuple[str, bytes]], metadata: bytes) -> ConsumerMember:
    """A consumer-group member for a classic JoinGroup; raises if `metadata` (the
    ConsumerProtocolSubscription of its chosen protocol) does not parse."""
    sub = decode_subscription(metadata)
    return ConsumerMember(member_id, instance_id, sub.rack_id, client_id, client_host,
                          sorted(set(sub.topics)), rebalance_timeout_ms=rebalance_timeout_ms,
                          classic=ClassicMetadata(session_timeout_ms, list(protocols)))


def consumer_from_classic(group: Group, topic_ids: Mapping[str, UUID], now_ms: int) -> ConsumerGroup:
    """The consumer group a live classic group becomes; raises (CorruptMessage, ValueError)
    when a member's embedded consumer protocol does not parse."""
    converted = ConsumerGroup(group.group_id, now_ms)
    converted.group_epoch = converted.assignment_epoch = group.generation_id
    for m in group.members.values():
        metadata = m.metadata(group.protocol_name) if group.protocol_name else m.protocols[0][1]
        member = classic_member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout_ms, m.session_timeout_ms, m.protocols,
                                metadata)
        member.assigned = to_ids(decode_assignment(m.assignment).partitions, topic_ids)
        member.member_epoch = member.previous_member_epoch = group.generation_id
        converted.add_member(member)
        converted.target[m.member_id] = {t: set(ps) for t, ps in member.assigned.items()}
        converted.hold(member)
    converted.offsets, converted.offsets_written_at = group.offsets, group.offsets_written_at
    converted.persisted = group.persisted
    return converted


def classic_from_consumer(group: ConsumerGroup, names: Mapping[UUID, str], now_ms: int) -> Group:
    """The classic group an all-classic consumer group becomes: Stable at generation = group
    epoch, each member holding its target assignment, until the caller's rebalance."""
    classic = Group(group.group_id, now_ms, g.STABLE)
    classic.generation_id = group.group_epoch
    classic.protocol_type = g.CONSUMER_PROTOCOL_TYPE
    for mid, m in group.members.items():
        if m.classic is None:  # the caller checked can_become_classic
            raise ValueError(f"member {mid} of group {group.group_id} speaks the consumer protocol")
        member = Member(mid, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                        m.classic.session_timeout_ms, g.CONSUMER_PROTOCOL_TYPE,
                        list(m.classic.protocols))
        classic.members[mid] = member
        if m.instance_id is not None:
            classic.static_members[m.instance_id] = mid
    classic.leader_id = next(iter(classic.members), None)
    classic.protocol_name = classic.select_protocol()
    for mid, member in classic.members.items():
        member.assignment = assignment_bytes(group.target.get(mid, {}), names,
                                             member.metadata(classic.protocol_name))
    classic.subscribed = classic.subscribed_topics()
    classic.offsets, classic.offsets_written_at = group.offsets, group.offsets_written_at
    classic.persisted = group.persisted
    return classic
