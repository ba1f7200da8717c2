"""The records of `__consumer_offsets`, in Kafka's binary formats, so Kafka's tools read ours.

Key: int16 version, then fields. Versions 0 and 1 are an offset commit key (group, topic,
partition), version 2 a group metadata key (group); versions 3-8 are KIP-848's consumer
group records (`consumer_group_records.py`); others are skipped on load. Values:
OffsetCommitValue v0-4 and GroupMetadataValue v0-4 are read; v3 of both is written (v1 for offsets with an explicit expire timestamp),
as Kafka does. A null value is a tombstone: the offset or the group is gone.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from minilog.connector.protocol.primitives import (
    Reader,
    pack_int16,
    pack_int32,
    pack_int64,
    pack_string,
)

from .consumer_group_records import (
    KEY_VERSIONS as CONSUMER_KEY_VERSIONS,
    ConsumerKey,
    parse_consumer_key,
)

OFFSET_KEY_VERSIONS = (0, 1)
GROUP_KEY_VERSION = 2
_OFFSET_KEY_WRITE = 1
_NULL_BYTES = pack_int32(-1)


class OffsetKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupKey(NamedTuple):
    group: str


class OffsetAndMetadata(NamedTuple):
    """A committed offset. `expire_timestamp` is set only by OffsetCommit v2-4 retention_time_ms."""
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None


class MemberRecord(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


class GroupRecord(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberRecord]


# -- keys -------------------------------------------------------------------------------------

def offset_key(group: str, topic: str, partition: int) -> bytes:
    return (pack_int16(_OFFSET_KEY_WRITE) + pack_string(group) + pack_string(topic)
            + pack_int32(partition))


def group_key(group: str) -> bytes:
    return pack_int16(GROUP_KEY_VERSION) + pack_string(group)


def parse_key(data: bytes) -> OffsetKey | GroupKey | ConsumerKey | None:
    """OffsetKey, GroupKey, ConsumerKey, or None for record types this coordinator does not
    keep."""
    r = Reader(data)
    version = r.int16()
    if version in OFFSET_KEY_VERSIONS:
        return OffsetKey(r.string(), r.string(), r.int32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.string())
    if version in CONSUMER_KEY_VERSIONS:
        return parse_consumer_key(version, r)
    return None


# -- values -----------------------------------------------------------------------------------

def offset_value(om: OffsetAndMetadata) -> bytes:
    if om.expire_timestamp is not None:  # v1 carries the explicit expiry
        return b"".join((pack_int16(1), pack_int64(om.offset), pack_string(om.metadata or ""),
                         pack_int64(om.commit_timestamp), pack_int64(om.expire_timestamp)))
    return b"".join((pack_int16(3), pack_int64(om.offset), pack_int32(om.leader_epoch),
                     pack_string(om.metadata or ""), pack_int64(om.commit_timestamp)))


def parse_offset_value(data: bytes) -> OffsetAndMetadata:
    r = Reader(data)
    version = r.int16()
    flex = version >= 4
    offset = r.int64()
    epoch = r.int32() if version >= 3 else -1
    metadata = r.string(flex)
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else None
    return OffsetAndMetadata(offset, epoch, metadata, commit_ts,
                             None if expire_ts is None or expire_ts < 0 else expire_ts)


def _bytes(b: bytes | None) -> bytes:
    return _NULL_BYTES if b is None else pack_int32(len(b)) + bytes(b)


def group_value(rec: GroupRecord) -> bytes:
    out = [pack_int16(3), pack_string(rec.protocol_type), pack_int32(rec.generation),
           pack_string(rec.protocol), pack_string(rec.leader),
           pack_int64(rec.current_state_timestamp), pack_int32(len(rec.members))]
    for m in rec.members:
        out += [pack_string(m.member_id), pack_string(m.group_instance_id),
                pack_string(m.client_id), pack_string(m.client_host),
                pack_int32(m.rebalance_timeout_ms), pack_int32(m.session_timeout_ms),
                _bytes(m.subscription), _bytes(m.assignment)]
    return b"".join(out)


def _skip_tags(r: Reader) -> None:
    for _ in range(r.uvarint()):
        r.uvarint()
        r.raw(r.uvarint())


def parse_group_value(data: bytes) -> GroupRecord:
    r = Reader(data)
    version = r.int16()
    flex = version >= 4
    protocol_type = r.string(flex)
    generation = r.int32()
    protocol = r.string(flex, nullable=True)
    leader = r.string(flex, nullable=True)
    state_ts = r.int64() if version >= 2 else -1
    count = r.uvarint() - 1 if flex else r.int32()
    members = []
    for _ in range(max(count, 0)):
        member_id = r.string(flex)
        instance_id = r.string(flex, nullable=True) if version >= 3 else None
        client_id, client_host = r.string(flex), r.string(flex)
        rebalance = r.int32() if version >= 1 else None
        session = r.int32()
        if rebalance is None:  # v0 had no rebalance timeout: Kafka used the session timeout
            rebalance = session
        subscription = r.bytes(flex, nullable=True) or b""
        assignment = r.bytes(flex, nullable=True) or b""
        if flex:
            _skip_tags(r)
        members.append(MemberRecord(member_id, instance_id, client_id, client_host, rebalance,
                                    session, subscription, assignment))
    return GroupRecord(protocol_type, generation, protocol, leader, state_ts, members)


def group_record(group: Any, assignment: dict[str, bytes] | None = None) -> tuple[bytes, bytes]:
    """A classic group's metadata record (key, value), with `assignment` {member id: bytes}
    or the members' own."""
    if assignment is None:
        assignment = {mid: m.assignment for mid, m in group.members.items()}
    members = [MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout_ms, m.session_timeout_ms,
                            m.metadata(group.protocol_name), assignment.get(mid, b""))
               for mid, m in group.members.items()]
    record = GroupRecord(group.protocol_type or "", group.generation_id, group.protocol_name,
                         group.leader_id, group.state_timestamp, members)
    return group_key(group.group_id), group_value(record)


# -- what a consumer's subscription says ------------------------------------------------------

def subscription_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version), or None if it does not parse."""
    try:
        r = Reader(metadata)
        r.int16()
        return {r.string() for _ in range(r.int32())}
    except Exception:  # noqa: BLE001 - a client's opaque bytes: unparseable means unknown
        return None
