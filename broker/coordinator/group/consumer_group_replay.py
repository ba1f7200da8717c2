"""KIP-848's records applied to the groups of a `__consumer_offsets` shard (Kafka's
GroupMetadataManager.replay for the ConsumerGroup* records).

The only way a consumer group changes: the coordinator decides an operation on a scratch copy
(`ConsumerGroup.copy`), writes the records of the difference, and the runtime replays them here,
on write and on load alike. Each record is applied on its own, in any order the log may hold
them: a member's metadata creates the group and the member, tombstones remove them, and
ownership of partitions follows the current assignments. A group made here from a classic one
(or from offsets only) keeps its committed offsets; a group whose epoch is tombstoned leaves
its offsets behind as an offsets-only classic group.
"""
from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from . import consumer_group_records as rec
from .consumer_group import (
    STATIC_LEAVE_EPOCH,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerMember,
)
from .consumer_group_records import ConsumerKey
from .group import Group

Groups = MutableMapping[str, Any]  # group id -> Group or ConsumerGroup


def offsets_only(group_id: str, previous: Any) -> Group:
    """What stays of a group whose records were deleted: its committed offsets."""
    group = Group(group_id, -1)  # type: ignore[no-untyped-call]
    group.offsets, group.offsets_written_at = previous.offsets, previous.offsets_written_at
    return group


def _consumer_group(groups: Groups, group_id: str, now: int) -> ConsumerGroup:
    group = groups.get(group_id)
    if isinstance(group, ConsumerGroup):
        return group
    converted = ConsumerGroup(group_id, now)
    if group is not None:
        converted.offsets, converted.offsets_written_at = group.offsets, group.offsets_written_at
    groups[group_id] = converted
    return converted


def _member(group: ConsumerGroup, member_id: str) -> ConsumerMember:
    member = group.members.get(member_id)
    if member is None:
        member = ConsumerMember(member_id)
        group.add_member(member)
    return member


def replay(groups: Groups, key: ConsumerKey, value: bytes | None, now: int,
           on_removed: Callable[[ConsumerMember], None]) -> ConsumerGroup | None:
    """Apply one consumer group record; returns the group it changed (None if it is gone).
    `on_removed` is told of each member object that leaves (its timers stop)."""
    current: Any = groups.get(key.group)
    if value is None and not isinstance(current, ConsumerGroup):
        return None
    member_id = key.member_id or ""
    if key.kind == rec.GROUP_EPOCH and value is None:
        for member in list(current.members.values()):
            current.drop_member(member.member_id)
            on_removed(member)
        current.dead = True
        if current.offsets:
            groups[key.group] = offsets_only(key.group, current)
        else:
            del groups[key.group]
        return None
    group = current if value is None else _consumer_group(groups, key.group, now)
    group.persisted = True
    decoded: Any = None if value is None else rec.decode_value(key.kind, value)
    if key.kind == rec.GROUP_EPOCH:
        group.group_epoch = decoded.epoch
    elif key.kind == rec.TARGET_EPOCH:
        group.assignment_epoch = 0 if decoded is None else decoded.assignment_epoch
    elif key.kind == rec.TARGET_MEMBER:
        if decoded is None:
            group.target.pop(member_id, None)
        else:
            group.target[member_id] = rec.from_topic_partitions(decoded.topic_partitions)
    elif key.kind == rec.MEMBER:
        if decoded is None:
            removed = group.drop_member(member_id)
            if removed is not None:
                on_removed(removed)
        else:
            _member_metadata(group, member_id, decoded)
    elif key.kind == rec.CURRENT_ASSIGNMENT:
        member = group.members.get(member_id) if decoded is None else _member(group, member_id)
        if member is not None:
            _current_assignment(group, member, decoded)
    return group


def _member_metadata(group: ConsumerGroup, member_id: str, v: Any) -> None:
    member = group.members.get(member_id)
    if member is None:
        member = ConsumerMember(member_id, v.instance_id)
        group.add_member(member)
    elif member.instance_id != v.instance_id:
        if member.instance_id is not None and \
                group.static_members.get(member.instance_id) == member_id:
            del group.static_members[member.instance_id]
        member.instance_id = v.instance_id
        group.add_member(member)
    member.rack_id, member.client_id, member.client_host = v.rack_id, v.client_id, v.client_host
    member.subscribed_topic_names = list(v.subscribed_topic_names)
    member.subscribed_topic_regex = v.subscribed_topic_regex
    member.server_assignor = v.server_assignor
    member.rebalance_timeout_ms = v.rebalance_timeout_ms
    decoded = rec.from_classic_metadata(v.classic_member_metadata)
    member.classic = ClassicMetadata(*decoded) if decoded else None


def _current_assignment(group: ConsumerGroup, member: ConsumerMember, v: Any) -> None:
    group.release(member)
    if v is None:
        member.assigned, member.pending_revocation = {}, {}
        return
    member.member_epoch, member.previous_member_epoch = v.member_epoch, v.previous_member_epoch
    member.state = v.state
    member.assigned = rec.from_topic_partitions(v.assigned_partitions)
    member.pending_revocation = rec.from_topic_partitions(v.partitions_pending_revocation)
    if member.member_epoch == STATIC_LEAVE_EPOCH:
        member.epoch_before_leave = max(member.previous_member_epoch, 0)
    group.hold(member)
