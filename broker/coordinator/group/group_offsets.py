"""Committed offsets and group administration: the half of the coordinator that is not membership.

OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups, ListGroups and DescribeGroups, loading a
`__consumer_offsets` partition into groups and offsets, and the periodic expiry of offsets
after `offsets.retention.minutes` (Kafka's semantics: for an empty group the clock starts when
it became empty). Composed into `GroupCoordinator`, which owns the groups and their timers;
every change here is records written through the coordinator runtime and replayed into the
group shard (`group_shard.py`): offsets commits, their tombstones, and group tombstones.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from minilog.connector.protocol import ErrorCode

from . import consumer_group_changes as changes
from . import group as g
from .consumer_group import ConsumerGroup
from .group import Group
from .group_records import (
    OffsetKey,
    group_key,
    offset_key,
    offset_value,
    parse_key,
    parse_offset_value,
)
from .group_store import OFFSETS_TOPIC
from ..partition_writer import now_ms
from ..runtime import Producer, Record

if TYPE_CHECKING:
    from .group_coordinator import GroupCoordinator

OFFSET_METADATA_MAX_BYTES = 4096  # Kafka's offset.metadata.max.bytes
TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, Any]  # -> OffsetAndMetadata

log = logging.getLogger("minilog.broker.groups")




def _validate_consumer_commit(group: ConsumerGroup, member_id: str, member_epoch: int,
                              api_version: int | None) -> int:
    """Kafka 4's ConsumerGroup.validateOffsetCommit: anyone with epoch -1 while the group is
    empty (admin tools, `assign()` consumers); otherwise a current member at its epoch, with
    OffsetCommit v9+ (TxnOffsetCommit, `api_version` None, at any version). A classic member
    commits at any version with its generation, which is its member epoch."""
    if group.dead:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if member_epoch < 0 and not group.members:
        return 0
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member.classic is not None:
        return 0 if member_epoch == member.member_epoch else ErrorCode.ILLEGAL_GENERATION
    if api_version is not None and api_version < 9:
        return ErrorCode.UNSUPPORTED_VERSION
    if member_epoch > member.member_epoch:
        return ErrorCode.FENCED_MEMBER_EPOCH
    if member_epoch < member.member_epoch:
        return ErrorCode.STALE_MEMBER_EPOCH
    return 0


class MemberSummary(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupSummary(NamedTuple):
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]


DEAD_GROUP = GroupSummary(g.DEAD, "", "", [])


class GroupOffsets:
    """Offsets and administration for the groups of `coordinator` (composed into it, as
    Kafka's OffsetMetadataManager is beside its GroupMetadataManager)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    # -- OffsetCommit ---------------------------------------------------------------------------
    async def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None,
                             generation_id: int, offsets: Offsets,
                             api_version: int | None = 9) -> dict[TopicPartition, int]:
        """Store {(topic, partition): OffsetAndMetadata}; returns {(topic, partition): error}.
        For a consumer (KIP-848) group `generation_id` is the member epoch.

        The commit is replayed into the group at once, and answered once the in-sync replicas
        have it; OffsetFetch sees it only then (`_committed`), as in Kafka."""
        error = self.coordinator.validate(group_id, allow_empty=True, offsets=True)
        if error:
            return dict.fromkeys(offsets, error)
        group = self.coordinator.groups.get(group_id)
        if group is None:
            if generation_id >= 0:  # a member of a generation this coordinator never saw
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
            # A group using Kafka only to store offsets: its commit's replay creates it.
            group = Group(group_id, now_ms())
        if isinstance(group, ConsumerGroup):
            error = _validate_consumer_commit(group, member_id, generation_id, api_version)
        else:
            error = self._validate_commit(group, member_id, instance_id, generation_id)
        if error:
            return dict.fromkeys(offsets, error)
        member = group.members.get(member_id)
        if (member is not None and not isinstance(group, ConsumerGroup)
                and group.state in (g.STABLE, g.PREPARING_REBALANCE)):
            self.coordinator.classic.schedule_heartbeat(group, member)
        results, valid = self._checked_offsets(offsets)
        if valid:
            error = await self.coordinator.write_records(
                group_id,
                [(offset_key(group_id, t, p), offset_value(om)) for (t, p), om in valid.items()],
                for_commit=True)
            results.update(dict.fromkeys(valid, error))
        return results

    def _checked_offsets(self, offsets: Offsets) -> tuple[dict[TopicPartition, int], Offsets]:
        """({tp: error} for the offsets refused, {tp: offset} for those to write)."""
        results: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, Any] = {}
        topics = self.coordinator.broker.metadata.topics
        for tp, om in offsets.items():
            ts = topics.get(tp[0])
            if ts is None or tp[1] not in ts.partitions:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif om.metadata is not None and len(om.metadata) > OFFSET_METADATA_MAX_BYTES:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = om
        return results, valid

    @staticmethod
    def _validate_commit(group: Group, member_id: str, instance_id: str | None,
                         generation_id: int) -> int:
        """Kafka's validateOffsetCommit: members of the current generation, or anyone (admin
        tools, `assign()` consumers) with generation -1 while the group is empty."""
        if group.state == g.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state == g.EMPTY:
            return 0
        if generation_id >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)
            if error:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif group.state != g.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state == g.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return 0

    # -- OffsetFetch, OffsetDelete --------------------------------------------------------------
    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None = None,
                      member_id: str | None = None, member_epoch: int = -1,
                      ) -> tuple[int, list[tuple[TopicPartition, Any]]]:
        """(error, [((topic, partition), OffsetAndMetadata or None)]); all when `partitions` is None.

        Offsets waiting for their transaction are not among them (see `txn_offsets`). A member
        of a consumer (KIP-848) group fetching with its id and epoch (OffsetFetch v9) must be
        current: UNKNOWN_MEMBER_ID or STALE_MEMBER_EPOCH otherwise, as in Kafka 4.
        """
        error = self.coordinator.validate(group_id, allow_empty=True, offsets=True)
        if error:
            return error, []
        group = self.coordinator.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and (member_id is not None or member_epoch >= 0):
            error = group.check_commit_epoch(member_id or "", member_epoch)
            if error:
                return error, []
        offsets = self._committed(group_id, group.offsets if group is not None else {})
        if partitions is None:
            return 0, sorted(offsets.items())
        return 0, [(tp, offsets.get(tp)) for tp in partitions]

    def _committed(self, group_id: str, offsets: Offsets) -> Offsets:
        """`offsets` as of the last acknowledged write (Kafka reads at the last committed
        offset): the commits still waiting for their acknowledgement are not seen yet."""
        before = self.coordinator.runtime.committed_values(
            OFFSETS_TOPIC, self.coordinator.store.partition_for(group_id))
        if not before:
            return offsets
        seen = dict(offsets)
        for key, value in before.items():
            parsed = parse_key(key)
            if isinstance(parsed, OffsetKey) and parsed.group == group_id:
                tp = (parsed.topic, parsed.partition)
                if value is None:
                    seen.pop(tp, None)
                else:
                    seen[tp] = parse_offset_value(value)
        return seen

    # -- TxnOffsetCommit and markers ------------------------------------------------------------
    async def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 member_id: str, instance_id: str | None, generation_id: int,
                                 offsets: Offsets) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: write {(topic, partition): OffsetAndMetadata} in the producer's
        transaction; they count once its commit marker arrives. {(topic, partition): error}."""
        error = self.coordinator.validate(group_id, allow_empty=True)
        if error:
            return dict.fromkeys(offsets, error)
        group = self.coordinator.groups.get(group_id) or Group(group_id, now_ms())
        if isinstance(group, ConsumerGroup):
            error = _validate_consumer_commit(group, member_id, generation_id, None)
            if error:
                return dict.fromkeys(offsets, error)
        elif generation_id >= 0 or member_id:  # KIP-447: the consumer's generation is checked
            error = self._validate_commit(group, member_id, instance_id, generation_id)
            if error:
                return dict.fromkeys(offsets, error)
        results, valid = self._checked_offsets(offsets)
        if valid:
            error = await self.coordinator.write_records(
                group_id,
                [(offset_key(group_id, t, p), offset_value(om)) for (t, p), om in valid.items()],
                for_commit=True, producer=Producer(producer_id, producer_epoch))
            results.update(dict.fromkeys(valid, error))
        return results

    def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                       ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete: (group error, {(topic, partition): error})."""
        error = self.coordinator.validate(group_id)
        if error:
            return error, {}
        group = self.coordinator.groups.get(group_id)
        if group is None or group.state == g.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, int] = {}
        if group.state == g.EMPTY:
            eligible = list(partitions)
        elif group.protocol_type == g.CONSUMER_PROTOCOL_TYPE:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            results = {tp: g.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp not in eligible}
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            doomed = [tp for tp in eligible if tp in group.offsets]
            error = self.coordinator.write_now(group_id, [(offset_key(group_id, t, p), None)
                                                          for t, p in doomed]) if doomed else 0
            if error:
                return error, {}
            results.update(dict.fromkeys(eligible, 0))
        return 0, results

    # -- DeleteGroups, ListGroups, DescribeGroups -----------------------------------------------
    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """{group id: error}: only empty groups go, with tombstones for them and their offsets."""
        results = {}
        for group_id in group_ids:
            error = self.coordinator.validate(group_id, allow_empty=True)
            group = self.coordinator.groups.get(group_id)
            if error:
                results[group_id] = error
            elif group is None or group.state == g.DEAD:
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state != g.EMPTY:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                results[group_id] = self._remove_group(group, list(group.offsets))
        return results

    def _remove_group(self, group: Any, offsets: Iterable[TopicPartition]) -> int:
        """Write tombstones for `offsets` and the group: their replay forgets the group."""
        entries: list[Record] = [(offset_key(group.group_id, t, p), None) for t, p in offsets]
        entries += changes.group_tombstones(group) if isinstance(group, ConsumerGroup) \
            else [(group_key(group.group_id), None)]
        return self.coordinator.write_now(group.group_id, entries)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = (),
                    ) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(error, [(group id, protocol type, state, group type)]); filters are
        case-insensitive; the group type is "classic" or "consumer" (KIP-848)."""
        if not self.coordinator.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        wanted = {s.lower() for s in states}
        kinds = {t.lower() for t in types}
        found = []
        for gr in self.coordinator.groups.values():
            kind = "consumer" if isinstance(gr, ConsumerGroup) else "classic"
            if (not wanted or gr.state.lower() in wanted) and (not kinds or kind in kinds):
                found.append((gr.group_id, gr.protocol_type or "", gr.state, kind))
        return 0, found

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        """(error, GroupSummary): metadata and assignments only once the group is stable."""
        error = self.coordinator.validate(group_id, allow_empty=True)
        if error:
            return error, GroupSummary("", "", "", [])
        group = self.coordinator.groups.get(group_id)
        if group is None or isinstance(group, ConsumerGroup):
            return 0, DEAD_GROUP  # Kafka 4 before DescribeGroups v6: "not a classic group"
        stable = group.state == g.STABLE
        members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.metadata(group.protocol_name) if stable else b"",
                                 m.assignment if stable else b"")
                   for m in group.members.values()]
        return 0, GroupSummary(group.state, group.protocol_type or "",
                               (group.protocol_name or "") if stable else "", members)

    # -- expiry ---------------------------------------------------------------------------------
    async def expire_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.coordinator.retention_check_ms / 1000)
            try:
                self.expire_offsets()
            except Exception:
                log.exception("offset expiry failed")

    def expire_offsets(self, now: int | None = None) -> int:
        """Tombstone offsets past retention, and those of topics no longer in the metadata;
        empty groups left without offsets die. Returns the number of offsets removed."""
        now = now_ms() if now is None else now
        topics = self.coordinator.broker.metadata.topics
        removed = 0
        for group in list(self.coordinator.groups.values()):
            expired = set(group.expired_offsets(now, self.coordinator.retention_ms))
            expired |= {tp for tp in group.offsets if tp[0] not in topics}
            removed += self._drop_offsets(group, expired, now)
        if removed:
            log.info("expired %d committed offset(s)", removed)
        return removed

    def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> int:
        """Kafka's onPartitionsDeleted: every group forgets its offsets of deleted partitions
        at once, so a topic created again under the same name is read from its start."""
        doomed, now, removed = set(partitions), now_ms(), 0
        for group in list(self.coordinator.groups.values()):
            hit = doomed & group.offsets.keys()
            if hit:
                removed += self._drop_offsets(group, hit, now)
        if removed:
            log.info("removed %d committed offset(s) of deleted partitions", removed)
        return removed

    def _drop_offsets(self, group: Any, doomed: set[TopicPartition], now: int) -> int:
        """Tombstone `doomed` offsets of `group`, removing an empty group left with none;
        returns how many offsets went (0 when the write failed)."""
        dead = (group.state == g.EMPTY and not group.members and not group.pending_members
                and len(doomed) == len(group.offsets))
        if dead and (doomed or group.persisted):
            error = self._remove_group(group, doomed)
        elif dead:
            group.transition(g.DEAD, now)
            self.coordinator.groups.pop(group.group_id, None)
            error = 0
        elif doomed:
            error = self.coordinator.write_now(group.group_id, [
                (offset_key(group.group_id, t, p), None) for t, p in doomed])
        else:
            return 0
        return 0 if error else len(doomed)
