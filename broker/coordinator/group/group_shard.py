"""The groups of one `__consumer_offsets` partition: the group coordinator's shard kind.

Kafka's GroupCoordinatorShard: the state of the groups that hash to one partition (classic
groups, consumer groups, committed offsets, offsets pending in a transaction), changed only by
replaying the partition's records, on load and on write alike (`runtime.py`). Which record is
which is decided by its key (`group_records.parse_key`): offsets commits (key versions 0-1),
a classic group's metadata (2), KIP-848's consumer group records (3-8, `consumer_group_replay`).
Timers and parked requests are the coordinator's: they start once a partition is loaded and
stop when it is unloaded.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from . import consumer_group_replay
from . import group as g
from .consumer_group import ConsumerGroup
from .consumer_group_records import ConsumerKey
from .group import Group, Member
from .group_records import GroupRecord, OffsetKey, parse_group_value, parse_key, parse_offset_value
from ..partition_writer import now_ms
from ..runtime import Producer

if TYPE_CHECKING:
    from .group_coordinator import GroupCoordinator

log = logging.getLogger("minilog.broker.groups")


class GroupShard:
    def __init__(self, coordinator: GroupCoordinator, index: int) -> None:
        self.coordinator = coordinator
        self.index = index
        self.groups: dict[str, Any] = {}
        self.loading = True

    def _now(self) -> int:
        return -1 if self.loading else now_ms()

    def in_partition(self, group_id: str) -> bool:
        return self.coordinator.store.partition_for(group_id) == self.index

    # -- replay ---------------------------------------------------------------------------------
    def replay(self, key: bytes, value: bytes | None, producer: Producer | None) -> None:
        parsed = parse_key(key)
        if isinstance(parsed, OffsetKey):
            self._replay_offset(parsed, value, producer)
        elif isinstance(parsed, ConsumerKey):
            group = consumer_group_replay.replay(self.groups, parsed, value, self._now(),
                                                 self.coordinator.consumer.cancel_timers)
            if group is not None and not self.loading:
                group.topics = group.subscribed_topics(self.coordinator.consumer.cluster_topics())
        elif parsed is not None:
            self._replay_group(parsed.group, None if value is None else parse_group_value(value))

    def _replay_offset(self, key: OffsetKey, value: bytes | None,
                       producer: Producer | None) -> None:
        tp = (key.topic, key.partition)
        pending = self.coordinator.txn_offsets
        if producer is not None:
            if value is None:  # a TxnOffsetCommit reverted
                pending.discard(producer.producer_id, key.group, tp)
            else:
                pending.add(producer.producer_id, key.group, {tp: parse_offset_value(value)})
            return
        group = self.groups.get(key.group)
        if value is None:
            if group is not None:
                group.offsets.pop(tp, None)
                group.offsets_written_at.pop(tp, None)
                if _offsets_only(group) and not group.offsets:
                    del self.groups[key.group]  # nothing of it is left in the log
            return
        if group is None:
            group = self.groups[key.group] = Group(key.group, self._now())
        group.offsets[tp] = parse_offset_value(value)

    def _replay_group(self, group_id: str, record: GroupRecord | None) -> None:
        """A classic group's metadata record: the group as it was stored (its members must
        heartbeat to stay); a tombstone leaves its offsets behind."""
        current = self.groups.get(group_id)
        if record is None and not isinstance(current, Group):
            return
        if current is not None and not self.loading:
            self.coordinator.retire(current)
        if record is None:
            if isinstance(current, Group) and current.offsets:  # (a Group: checked above)
                self.groups[group_id] = consumer_group_replay.offsets_only(group_id, current)
            else:
                del self.groups[group_id]
            return
        group = self.groups[group_id] = _classic_group(group_id, record)
        if current is not None:
            group.offsets, group.offsets_written_at = current.offsets, current.offsets_written_at
        if not self.loading:
            for member in group.members.values():
                self.coordinator.classic.schedule_heartbeat(group, member)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """A transaction's marker: its offsets count now (commit) or never (abort)."""
        done = self.coordinator.txn_offsets.complete(producer_id, commit, self.in_partition)
        for group_id, offsets in done.items():
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = Group(group_id, self._now())
            group.offsets.update(offsets)

    # -- lifecycle ------------------------------------------------------------------------------
    def loaded(self) -> None:
        """Members loaded must heartbeat within their session timeouts to stay."""
        self.loading = False
        consumer = self.coordinator.consumer
        topics = consumer.cluster_topics()
        for group_id, group in list(self.groups.items()):
            if isinstance(group, ConsumerGroup):
                for member in group.members.values():  # the records do not say who it is
                    member.describes = consumer.describes_until_heartbeat
                group.topics = group.subscribed_topics(topics)
                for member in group.members.values():
                    consumer.schedule_session(group, member)
                    consumer.schedule_rebalance(group, member)
            else:
                for member in group.members.values():
                    self.coordinator.classic.schedule_heartbeat(group, member)
        if self.groups:
            log.debug("loaded %d group(s) from partition %d", len(self.groups), self.index)

    def unloaded(self) -> None:
        """Kafka's onResignation: parked requests get NOT_COORDINATOR and clients look again."""
        self.coordinator.txn_offsets.forget(self.in_partition)
        for group in self.groups.values():
            self.coordinator.retire(group)
        self.groups.clear()


def _offsets_only(group: Any) -> bool:
    """A group known only by its committed offsets (no record of its own, no members)."""
    return (isinstance(group, Group) and not group.persisted and not group.members
            and not group.pending_members and group.state == g.EMPTY)


def _classic_group(group_id: str, record: GroupRecord) -> Group:
    group = Group(group_id, record.current_state_timestamp,
                  g.STABLE if record.members else g.EMPTY)
    group.generation_id = record.generation
    group.protocol_type = record.protocol_type or None
    group.protocol_name = record.protocol
    group.leader_id = record.leader
    group.persisted = True
    for m in record.members:  # (Kafka writes members with the elected protocol only)
        member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                        m.rebalance_timeout_ms, m.session_timeout_ms, group.protocol_type,
                        [(record.protocol or "", m.subscription)])
        member.assignment = m.assignment
        group.members[m.member_id] = member
        if m.group_instance_id is not None:
            group.static_members[m.group_instance_id] = m.member_id
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members), None)
    group.subscribed = group.subscribed_topics()
    return group
