"""KIP-848's records in `__consumer_offsets`, in Kafka 4's binary formats.

A consumer group is kept as Kafka keeps it: its epoch (key version 3), each member's metadata
(5), the target assignment's epoch (6) and each member's target (7), and each member's current
assignment with its epoch and state (8). Keys are non-flexible (int16 version, then strings);
values are an int16 version 0 then a flexible struct, declared below in the codec's notation.
A classic member of a consumer group (KIP-848's migration) carries its session timeout and
JoinGroup protocols in the member record's tagged `classic_member_metadata`, as Kafka writes it.
A null value is a tombstone. Kafka's partition metadata record (4) is neither written nor
needed: the coordinator re-reads topic metadata from the cluster.
"""
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

from minilog.connector.protocol.primitives import Reader, pack_int16, pack_string
from minilog.connector.protocol.schema import parse_definitions

if TYPE_CHECKING:
    from .consumer_group import ClassicMetadata

GROUP_EPOCH, MEMBER, TARGET_EPOCH, TARGET_MEMBER, CURRENT_ASSIGNMENT = 3, 5, 6, 7, 8
KEY_VERSIONS = (GROUP_EPOCH, MEMBER, TARGET_EPOCH, TARGET_MEMBER, CURRENT_ASSIGNMENT)
_MEMBER_KEYED = (MEMBER, TARGET_MEMBER, CURRENT_ASSIGNMENT)

_VALUES = parse_definitions(r'''
ConsumerGroupMetadataValue -1 0-0 flex0
  epoch int32
ConsumerGroupMemberMetadataValue -1 0-0 flex0
  instance_id string null0+
  rack_id string null0+
  client_id string
  client_host string
  subscribed_topic_names []string
  subscribed_topic_regex string null0+
  rebalance_timeout_ms int32 =-1
  server_assignor string null0+
  classic_member_metadata {} null0+ tag0@0+
    session_timeout_ms int32
    supported_protocols []
      name string
      metadata bytes
ConsumerGroupTargetAssignmentMetadataValue -1 0-0 flex0
  assignment_epoch int32
ConsumerGroupTargetAssignmentMemberValue -1 0-0 flex0
  topic_partitions []
    topic_id uuid
    partitions []int32
ConsumerGroupCurrentMemberAssignmentValue -1 0-0 flex0
  member_epoch int32
  previous_member_epoch int32
  state int8
  assigned_partitions []
    topic_id uuid
    partitions []int32
  partitions_pending_revocation []
    topic_id uuid
    partitions []int32
''')
_SCHEMA_BY_KEY = {
    GROUP_EPOCH: _VALUES["ConsumerGroupMetadataValue"],
    MEMBER: _VALUES["ConsumerGroupMemberMetadataValue"],
    TARGET_EPOCH: _VALUES["ConsumerGroupTargetAssignmentMetadataValue"],
    TARGET_MEMBER: _VALUES["ConsumerGroupTargetAssignmentMemberValue"],
    CURRENT_ASSIGNMENT: _VALUES["ConsumerGroupCurrentMemberAssignmentValue"],
}


class ConsumerKey(NamedTuple):
    kind: int          # one of KEY_VERSIONS
    group: str
    member_id: str | None


def consumer_key(kind: int, group: str, member_id: str | None = None) -> bytes:
    out = pack_int16(kind) + pack_string(group)
    return out + pack_string(member_id) if kind in _MEMBER_KEYED else out


def parse_consumer_key(version: int, r: Reader) -> ConsumerKey:
    group = r.string()
    return ConsumerKey(version, group, r.string() if version in _MEMBER_KEYED else None)


def encode_value(kind: int, **fields: Any) -> bytes:
    schema = _SCHEMA_BY_KEY[kind]
    encoded: bytes = schema.encode(schema.cls(**fields), 0)
    return pack_int16(0) + encoded


def decode_value(kind: int, data: bytes) -> Any:
    """The value's fields (attribute access, Kafka's names in snake_case). `Any`: the codec
    builds its message classes from the definitions above at import time, so their fields are
    not known to the type checker."""
    return _SCHEMA_BY_KEY[kind].decode(data, 0, pos=2)


def topic_partitions(kind: int, field: str, parts: dict[UUID, set[int]]) -> list[Any]:
    """{topic id: partitions} as the records' TopicPartitions structs."""
    schema = _SCHEMA_BY_KEY[kind]
    return [schema.make(field, topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(parts.items()) if ps]


def from_topic_partitions(items: Iterable[Any]) -> dict[UUID, set[int]]:
    return {tp.topic_id: set(tp.partitions) for tp in items if tp.partitions}


def classic_metadata(classic: "ClassicMetadata | None") -> Any:
    """A member's ClassicMetadata as the record's `classic_member_metadata` (None: it speaks
    the consumer protocol)."""
    if classic is None:
        return None
    schema = _SCHEMA_BY_KEY[MEMBER]
    return schema.make("classic_member_metadata", session_timeout_ms=classic.session_timeout_ms,
                       supported_protocols=[
                           schema.make("classic_member_metadata", "supported_protocols",
                                       name=name, metadata=metadata)
                           for name, metadata in classic.protocols])


def from_classic_metadata(value: Any) -> tuple[int, list[tuple[str, bytes]]] | None:
    """The record's `classic_member_metadata` as (session timeout, [(protocol, metadata)])."""
    if value is None:
        return None
    return value.session_timeout_ms, [(p.name, bytes(p.metadata)) for p in value.supported_protocols]
