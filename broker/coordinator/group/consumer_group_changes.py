"""The records that carry a consumer group from one state to the next (Kafka's
GroupCoordinatorRecordHelpers for KIP-848's records).

The coordinator decides an operation on a scratch copy of the group; these functions say which
records bring `__consumer_offsets` (and, once the runtime replays them, the live group) to the
copy's state, in Kafka's order: members, group epoch, target assignment, then the current
assignment.
"""
from __future__ import annotations

from collections.abc import Iterable

from . import consumer_group_records as rec
from .consumer_group import ConsumerGroup, ConsumerMember
from ..runtime import Record


def changes(group: ConsumerGroup, changed: Iterable[str], assignment_changed: bool,
            member: ConsumerMember, epoch_changed: bool, target_changed: bool) -> list[Record]:
    """The records of `member`'s step: `changed` members (metadata or tombstones), the group
    epoch, the target assignment, and `member`'s current assignment."""
    entries: list[Record] = []
    changed = set(changed)
    for member_id in sorted(changed):
        m = group.members.get(member_id)
        entries += member_tombstones(group, member_id) if m is None \
            else [member_metadata(group, m)]
    if epoch_changed:
        entries.append(group_epoch(group))
    if target_changed:
        entries += target_records(group)
    if assignment_changed or member.member_id in changed:
        entries.append(current_assignment(group, member))
    return entries


def target_records(group: ConsumerGroup) -> list[Record]:
    """The target assignment of every member, then its epoch."""
    records: list[Record] = [(rec.consumer_key(rec.TARGET_MEMBER, group.group_id, mid), rec.encode_value(
        rec.TARGET_MEMBER, topic_partitions=rec.topic_partitions(
            rec.TARGET_MEMBER, "topic_partitions", group.target.get(mid, {}))))
        for mid in sorted(group.members)]
    return records + [(rec.consumer_key(rec.TARGET_EPOCH, group.group_id),
                       rec.encode_value(rec.TARGET_EPOCH, assignment_epoch=group.assignment_epoch))]


def group_epoch(group: ConsumerGroup) -> Record:
    return (rec.consumer_key(rec.GROUP_EPOCH, group.group_id),
            rec.encode_value(rec.GROUP_EPOCH, epoch=group.group_epoch))


def member_metadata(group: ConsumerGroup, m: ConsumerMember) -> Record:
    return (rec.consumer_key(rec.MEMBER, group.group_id, m.member_id), rec.encode_value(
        rec.MEMBER, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
        client_host=m.client_host, subscribed_topic_names=m.subscribed_topic_names,
        subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        classic_member_metadata=rec.classic_metadata(m.classic)))


def current_assignment(group: ConsumerGroup, m: ConsumerMember) -> Record:
    kind = rec.CURRENT_ASSIGNMENT
    return (rec.consumer_key(kind, group.group_id, m.member_id), rec.encode_value(
        kind, member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
        state=m.state,
        assigned_partitions=rec.topic_partitions(kind, "assigned_partitions", m.assigned),
        partitions_pending_revocation=rec.topic_partitions(
            kind, "partitions_pending_revocation", m.pending_revocation)))


def member_tombstones(group: ConsumerGroup, member_id: str) -> list[Record]:
    return [(rec.consumer_key(kind, group.group_id, member_id), None)
            for kind in (rec.CURRENT_ASSIGNMENT, rec.TARGET_MEMBER, rec.MEMBER)]


def full_records(group: ConsumerGroup) -> list[Record]:
    """Every record of the group as it stands (a classic group just converted)."""
    return ([member_metadata(group, m) for m in group.members.values()]
            + [group_epoch(group)] + target_records(group)
            + [current_assignment(group, m) for m in group.members.values()])


def group_tombstones(group: ConsumerGroup) -> list[Record]:
    """The group's own records, deleted (DeleteGroups of an empty group)."""
    return [(rec.consumer_key(kind, group.group_id), None)
            for kind in (rec.TARGET_EPOCH, rec.GROUP_EPOCH)]


def all_tombstones(group: ConsumerGroup) -> list[Record]:
    """Every record of the group and its members, deleted (it became classic)."""
    return [e for mid in group.members for e in member_tombstones(group, mid)] \
        + group_tombstones(group)
