"""Classic members in consumer groups: KIP-848's online upgrade and downgrade.

In a rolling upgrade a consumer group holds members of both protocols (Kafka 4's
`group.consumer.migration.policy`). A ConsumerGroupHeartbeat joining a live classic group
converts it (`upgrade`), keeping its members; a classic JoinGroup to a live consumer group joins
it. Classic members keep speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup, which are mapped here
onto the consumer group's rules, as Kafka's GroupMetadataManager maps them: a JoinGroup is the
member's heartbeat (subscription and owned partitions from its ConsumerProtocolSubscription; the
answer's generation is its member epoch), SyncGroup hands it its current assignment as a
ConsumerProtocolAssignment, and Heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin. A
classic member gives partitions up only by rejoining, and the consumer group hands a partition
to its next owner only once nobody holds it, so no partition is ever owned twice. When the last
consumer-protocol member leaves, the group becomes classic again (`downgrade`) and rebalances.
"""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING
from uuid import UUID

from minilog.connector.protocol import ErrorCode
from minilog.connector.protocol.consumer_protocol import decode_subscription

from . import consumer_group_changes as changes
from . import group as g
from .consumer_group import M_UNREVOKED, ConsumerGroup, ConsumerMember
from .group import Group, JoinResult, SyncResult
from .group_migration import (
    MigrationPolicy,
    assignment_bytes,
    can_upgrade,
    classic_from_consumer,
    classic_member,
    consumer_from_classic,
    to_ids,
)
from .group_records import group_key, group_record
from ..partition_writer import now_ms
from ..runtime import Record

if TYPE_CHECKING:
    from .consumer_group_coordinator import ConsumerGroupProtocol
    from .group_coordinator import GroupCoordinator

log = logging.getLogger("minilog.broker.groups")


class ClassicMembers:
    """The classic protocol's requests on consumer groups, and the conversions between kinds
    (composed into `GroupCoordinator`, beside its `consumer` protocol)."""

    def __init__(self, coordinator: GroupCoordinator, policy: str) -> None:
        self.coordinator = coordinator
        self.policy = MigrationPolicy(policy)

    @property
    def _protocol(self) -> ConsumerGroupProtocol:
        return self.coordinator.consumer

    def _topic_ids(self) -> dict[str, UUID]:
        return {name: ts.topic_id for name, ts in self.coordinator.broker.metadata.topics.items()}

    def _topic_names(self) -> dict[UUID, str]:
        return {tid: ts.name for tid, ts in self.coordinator.broker.metadata.by_id.items()}

    # -- conversions ----------------------------------------------------------------------------
    def upgrade(self, group: Group) -> tuple[ConsumerGroup, list[Record]] | None:
        """Convert a live classic group for a joining consumer-protocol member: a scratch
        consumer group and the records that replace the classic one (their replay makes the
        live group), or None when not allowed."""
        if not self.policy.upgrade or not can_upgrade(group):
            return None
        try:
            converted = consumer_from_classic(group, self._topic_ids(), now_ms())
        except Exception as e:  # noqa: BLE001 - a member's malformed embedded protocol
            log.warning("cannot upgrade classic group %s: %s", group.group_id, e)
            return None
        # Parked JoinGroups and SyncGroups learn of the rebalance and rejoin the consumer group.
        self.coordinator.stop_classic(group, ErrorCode.REBALANCE_IN_PROGRESS)
        log.info("classic group %s (generation %d, %d member(s)) becomes a consumer group",
                 group.group_id, group.generation_id, len(converted.members))
        return converted, [(group_key(group.group_id), None)] + changes.full_records(converted)

    def maybe_downgrade(self, group: ConsumerGroup) -> list[Record] | None:
        """When only classic members remain in the scratch `group`: the records replacing the
        consumer group with a classic one (the caller starts its rebalance once they are
        written), or None."""
        if not self.policy.downgrade or not group.can_become_classic():
            return None
        classic = classic_from_consumer(group, self._topic_names(), now_ms())
        log.info("consumer group %s (epoch %d) has only classic members: it becomes classic",
                 group.group_id, group.group_epoch)
        return changes.all_tombstones(group) + [group_record(classic)]

    # -- the classic requests -------------------------------------------------------------------
    async def join(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                   client_id: str, client_host: str, rebalance_timeout_ms: int,
                   session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool) -> JoinResult:
        """Kafka's classicGroupJoinToConsumerGroup."""
        if not self.policy.mixed or protocol_type != g.CONSUMER_PROTOCOL_TYPE or \
                not group.supports_classic_protocols([name for name, _ in protocols]):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        unknown = member_id == ""
        try:
            joining = classic_member(member_id, instance_id, client_id, client_host,
                                     rebalance_timeout_ms, session_timeout_ms, protocols,
                                     protocols[0][1])
            owned = to_ids(decode_subscription(protocols[0][1]).owned_partitions,
                           self._topic_ids())
        except Exception:  # noqa: BLE001 - the member's embedded protocol does not parse
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if unknown:
            member_id = joining.member_id = uuid.uuid4().hex
            if instance_id is None and require_known_member_id:
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        live, group = group, group.copy()
        changed: set[str] = {member_id}
        epoch_before = group.group_epoch
        member = group.members.get(member_id)
        if member is not None and member.classic is None:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is not None and current != member_id:
                if not unknown:
                    return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id)
                group.remove_member(current)
                changed.add(current)
        if member is None:
            member = joining
            group.add_member(member)
            group.group_epoch = epoch_before + 1
        else:
            if (member.subscribed_topic_names, member.rack_id) != \
                    (joining.subscribed_topic_names, joining.rack_id):
                group.group_epoch = epoch_before + 1
            for name in ("client_id", "client_host", "rack_id", "rebalance_timeout_ms",
                         "subscribed_topic_names", "classic"):
                setattr(member, name, getattr(joining, name))
        entries, _ = self._protocol.advance(group, member, changed, epoch_before, owned)
        error = await self._protocol.write(group.group_id, entries)
        self._protocol.arm(group.group_id, member_id)
        if error:
            return JoinResult(error, member_id)
        joined = live.members.get(member_id)
        if joined is not None:
            self._deadline(live, joined, "did not sync in time")
        return JoinResult(0, member_id, member.member_epoch, g.CONSUMER_PROTOCOL_TYPE,
                          member.classic.protocol_name, "")

    def _member(self, group: ConsumerGroup, member_id: str,
                instance_id: str | None) -> tuple[ConsumerMember | None, int]:
        """Kafka's validateConsumerGroupMember for a classic request: (member, 0) or an error."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return None, ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return None, ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        return member, 0

    def sync(self, group: ConsumerGroup, generation_id: int, member_id: str,
             instance_id: str | None, protocol_type: str | None,
             protocol_name: str | None) -> SyncResult:
        """Kafka's classicGroupSyncToConsumerGroup: the member's current assignment."""
        member, error = self._member(group, member_id, instance_id)
        if error:
            return SyncResult(error)
        if generation_id != member.member_epoch:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if protocol_type not in (None, g.CONSUMER_PROTOCOL_TYPE) or \
                protocol_name not in (None, member.classic.protocol_name):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.state != M_UNREVOKED:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self._protocol.schedule_session(group, member)
        self._deadline(group, member, None)
        return SyncResult(0, assignment_bytes(member.assigned, self._topic_names(),
                                              member.classic.protocols[0][1]),
                          g.CONSUMER_PROTOCOL_TYPE, member.classic.protocol_name)

    def heartbeat(self, group: ConsumerGroup, generation_id: int, member_id: str,
                  instance_id: str | None) -> int:
        """Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS asks the member
        to rejoin (new epoch, partitions to revoke, or partitions it waited for are free)."""
        member, error = self._member(group, member_id, instance_id)
        if error:
            return error
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._protocol.schedule_session(group, member)
        if not group.must_rejoin(member):
            return 0
        if member.classic_timer is None:
            self._deadline(group, member, "did not rejoin in time")
        return ErrorCode.REBALANCE_IN_PROGRESS

    def _deadline(self, group: ConsumerGroup, member: ConsumerMember, reason: str | None) -> None:
        """Kafka's join and sync timeouts for a classic member: asked to rejoin, or answered
        its JoinGroup, it must rejoin or sync within its rebalance timeout (heartbeats alone
        do not keep it, since it may hold partitions others wait for) or be removed; None
        cancels the deadline."""
        if member.classic_timer:
            member.classic_timer.cancel()
            member.classic_timer = None
        if reason is not None:
            timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 300000
            member.classic_timer = self.coordinator.loop.call_later(
                timeout / 1000, self._protocol.expire, group, member, reason)

    async def leave(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> int:
        """LeaveGroup of a classic member: it leaves as a consumer member with epoch -1."""
        if member_id == "" and instance_id is not None:  # an admin removing a static member
            member_id = group.static_members.get(instance_id, "")
        member, error = self._member(group, member_id, instance_id)
        return error or await self._protocol.remove(group.group_id, member_id, "left the group")
