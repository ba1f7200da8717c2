"""KIP-848's consumer group protocol on the broker's event loop, beside the classic one.

ConsumerGroupHeartbeat is the whole protocol: a member joins with epoch 0, heartbeats with its
epoch and the partitions it owns, and learns its next assignment in the answer; it leaves with
epoch -1 (or -2, a static member that will come back). The group's rules are in
`consumer_group.py`; here are the request checks, the timers (session timeout: no heartbeat
for `group.consumer.session.timeout.ms` removes the member; rebalance timeout: a member that
does not revoke in time is fenced), and persistence: each heartbeat that changes the group
is decided on a scratch copy of the group (`ConsumerGroup.copy`); the records of the difference
(`consumer_group_changes.py`) go to the coordinator runtime, which replays them into the live
group (`consumer_group_replay.py`, the same replay that loads it), writes them as one batch to
`__consumer_offsets`, reverts them if the write fails, and answers once the in-sync replicas
have them, so a new coordinator resumes the group after a failover. A group is classic or consumer in the coordinator's one `groups` map; a consumer group
may hold classic members (`consumer_group_classic.py`), and a live classic group converts when
a member of this protocol joins it.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from minilog.connector.protocol import ErrorCode

from . import consumer_group_changes as changes
from .consumer_group import (
    LEAVE_EPOCH,
    M_UNREVOKED,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    FencedError,
    Partitions,
    compile_regex,
)
from ..partition_writer import now_ms
from ..runtime import Record

if TYPE_CHECKING:
    from .group_coordinator import GroupCoordinator

log = logging.getLogger("minilog.broker.groups")


class HeartbeatRequest(NamedTuple):
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Partitions | None
    client_id: str
    client_host: str
    version: int
    describes: Callable[[str], bool] | None = None  # may its principal DESCRIBE a topic?


class HeartbeatResult(NamedTuple):
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


class ConsumerGroupProtocol:
    """The KIP-848 half of the group coordinator (composed into `GroupCoordinator`)."""

    def __init__(self, coordinator: GroupCoordinator, config: Any) -> None:
        self.coordinator = coordinator
        self.session_timeout_ms: int = config["group.consumer.session.timeout.ms"]
        self.heartbeat_interval_ms: int = config["group.consumer.heartbeat.interval.ms"]
        self.assignors: list[str] = [a.strip() for a in
                                     config["group.consumer.assignors"].split(",") if a.strip()]
        protocols = config["group.coordinator.rebalance.protocols"]
        self.enabled: bool = "consumer" in {p.strip() for p in protocols.split(",")}

    @property
    def _loop(self) -> asyncio.AbstractEventLoop:
        assert self.coordinator.loop is not None, "the coordinator has started"
        return self.coordinator.loop

    def cluster_topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        """{topic: (id, partition count)} of the cluster's topics a group may subscribe to."""
        return {name: (ts.topic_id, len(ts.partitions))
                for name, ts in self.coordinator.broker.metadata.topics.items() if not ts.internal}

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------------
    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        error = self.coordinator.validate(req.group_id)
        if error:
            return HeartbeatResult(error)
        invalid = self._invalid(req)
        if invalid:
            log.debug("consumer group %s: heartbeat of %s refused: %s", req.group_id,
                      req.member_id, invalid[1])
            return HeartbeatResult(*invalid)
        try:
            group, created = self._group_for(req)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return await self._leave(group, req)
            return await self._heartbeat(group, req, created)
        except FencedError as e:
            log.debug("consumer group %s: heartbeat of %s at epoch %d: %s: %s", req.group_id,
                      req.member_id, req.member_epoch, ErrorCode(e.code).name, e)
            return HeartbeatResult(e.code, str(e))

    def _invalid(self, req: HeartbeatRequest) -> tuple[int, str] | None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        bad = ErrorCode.INVALID_REQUEST
        if not self.enabled:
            return ErrorCode.UNSUPPORTED_VERSION, "the consumer group protocol is disabled"
        if req.member_epoch != 0 and not req.member_id:
            return bad, "MemberId can't be empty."
        if req.version >= 1 and not req.member_id:
            return bad, "MemberId can't be empty."
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return bad, "RebalanceTimeoutMs must be provided in first request."
            if req.owned:
                return bad, "TopicPartitions must be empty when (re-)joining."
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return bad, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            return bad, "InstanceId can't be null."
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            return bad, f"MemberEpoch is invalid: {req.member_epoch}"
        if req.server_assignor is not None and req.server_assignor not in self.assignors:
            return ErrorCode.UNSUPPORTED_ASSIGNOR, \
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: " \
                f"{', '.join(self.assignors)}."
        if req.subscribed_topic_regex:
            try:
                compile_regex(req.subscribed_topic_regex)
            except Exception as e:  # noqa: BLE001 - re.error and friends: the client's input
                return ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex: {e}"
        return None

    def _group_for(self, req: HeartbeatRequest) -> tuple[ConsumerGroup, list[Record]]:
        """A scratch copy of the consumer group, and the records of its creation if it was
        classic: created on a join; an empty classic group converts keeping its offsets, a live
        one keeping its members too where `group.consumer.migration.policy` allows (else
        GROUP_ID_NOT_FOUND)."""
        group = self.coordinator.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup):
            return group.copy(), []
        if group is None and req.member_epoch != 0:
            raise FencedError(ErrorCode.UNKNOWN_MEMBER_ID,
                              f"Group {req.group_id} has no member {req.member_id}.")
        if group is not None and (group.members or group.pending_members):
            upgraded = self.coordinator.classic_members.upgrade(group) \
                if req.member_epoch == 0 else None
            if upgraded is None:
                raise FencedError(ErrorCode.GROUP_ID_NOT_FOUND,
                                  f"Group {req.group_id} is not a consumer group.")
            return upgraded
        converted = ConsumerGroup(req.group_id, now_ms())
        if group is not None:
            converted.offsets, converted.offsets_written_at = group.offsets, group.offsets_written_at
        return converted, []

    async def _heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest,
                         created: list[Record]) -> HeartbeatResult:
        live = self.coordinator.groups.get(req.group_id)
        changed: set[str] = set()
        epoch_before = group.group_epoch
        member = self._member_for(group, req, changed)
        if member.member_id not in changed:
            group.check_epoch(member, req.member_epoch, req.owned)
        if self._update_member(member, req):
            changed.add(member.member_id)
        if member.member_id in changed:
            group.group_epoch = max(group.group_epoch, epoch_before + 1)
        entries, assigned_changed = self.advance(group, member, changed, epoch_before, req.owned,
                                                 _metadata_changed(live, group, member))
        error = await self.write(group.group_id, list(created) + entries, scratch=group)
        self.arm(group.group_id, *(group.members if created else [member.member_id]))
        if error:
            return HeartbeatResult(error)
        # Kafka's "full request" (a client recovering from an error): the assignment is sent
        # again even if unchanged; a regex subscription counts as a subscription (Kafka 4)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1 and req.owned is not None
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None))
        return HeartbeatResult(0, None, member.member_id, member.member_epoch,
                               self.heartbeat_interval_ms,
                               member.assigned if full or assigned_changed else None)

    def advance(self, group: ConsumerGroup, member: ConsumerMember, changed: set[str],
                epoch_before: int, owned: Partitions | None,
                metadata: set[str] | frozenset[str] = frozenset()) -> tuple[list[Record], bool]:
        """One step of the scratch `group` for `member`'s heartbeat (or a classic member's
        JoinGroup): new topics raise the epoch, a new epoch gets a target assignment, the
        member is reconciled. Returns the records of it all (`changed` members and those whose
        `metadata` alone changed included) and whether the member's assigned partitions
        changed."""
        if group.refresh_topics(self.cluster_topics()):  # one new epoch for all of it
            group.group_epoch = max(group.group_epoch, epoch_before + 1)
        target_changed = group.assignment_epoch < group.group_epoch
        if target_changed:
            group.compute_target(group.assignor_name(self.assignors))
        before = (member.member_epoch, member.state, _frozen(member.assigned),
                  _frozen(member.pending_revocation))
        group.reconcile(member, owned)
        after = (member.member_epoch, member.state, _frozen(member.assigned),
                 _frozen(member.pending_revocation))
        entries = changes.changes(group, changed | set(metadata),
                                  assignment_changed=before != after, member=member,
                                  epoch_changed=group.group_epoch != epoch_before,
                                  target_changed=target_changed)
        return entries, before[2] != after[2]

    def arm(self, group_id: str, *member_ids: str) -> None:
        """Start the session (and, while revoking, rebalance) timers of live members."""
        group = self.coordinator.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return
        for member_id in member_ids:
            member = group.members.get(member_id)
            if member is not None:
                self.schedule_session(group, member)
                self.schedule_rebalance(group, member)

    def _member_for(self, group: ConsumerGroup, req: HeartbeatRequest,
                    changed: set[str]) -> ConsumerMember:
        """The heartbeating member; a join (epoch 0) adds it, or resets it if it lost its
        state, or takes over a static member's place."""
        member = group.members.get(req.member_id) if req.member_id else None
        if req.member_epoch != 0:
            if member is None:
                raise FencedError(ErrorCode.UNKNOWN_MEMBER_ID,
                                  f"Member {req.member_id} is not a member of group {group.group_id}.")
            return member
        member_id = req.member_id or uuid.uuid4().hex
        if req.instance_id is not None:
            current_id = group.static_members.get(req.instance_id)
            current = group.members.get(current_id) if current_id else None
            if current is not None and current.member_id != member_id:
                if current.member_epoch != STATIC_LEAVE_EPOCH:
                    raise FencedError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                      f"Static member {req.instance_id} is still in use by "
                                      f"{current.member_id}.")
                self.cancel_timers(current)
                replaced = group.replace_static_member(current, member_id)
                changed.update((member_id, current.member_id))
                return replaced
        if member is not None:  # rejoining with epoch 0: it owns nothing any more
            group.remove_member(member.member_id)
            self.cancel_timers(member)
        member = ConsumerMember(member_id, req.instance_id)
        group.add_member(member)
        changed.add(member_id)
        return member

    @staticmethod
    def _update_member(member: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Apply the fields the request sent (null means unchanged); True if the subscription
        changed, which needs a new target assignment."""
        member.client_id, member.client_host = req.client_id, req.client_host
        member.classic = None  # a classic member heartbeating this way has upgraded itself
        if req.describes is not None:
            member.describes = req.describes
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        before = (member.subscribed_topic_names, member.subscribed_topic_regex,
                  member.server_assignor)
        if req.subscribed_topic_names is not None:
            member.subscribed_topic_names = sorted(req.subscribed_topic_names)
        if req.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None:
            member.server_assignor = req.server_assignor
        return before != (member.subscribed_topic_names, member.subscribed_topic_regex,
                          member.server_assignor)

    async def _leave(self, group: ConsumerGroup, req: HeartbeatRequest) -> HeartbeatResult:
        member = group.members.get(req.member_id)
        if member is None:
            raise FencedError(ErrorCode.UNKNOWN_MEMBER_ID,
                              f"Member {req.member_id} is not a member of group {group.group_id}.")
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # KIP-848: a static member leaving temporarily keeps its partitions until it comes
            # back under the same instance id or its session times out.
            member.previous_member_epoch, member.member_epoch = member.member_epoch, STATIC_LEAVE_EPOCH
            error = await self.write(group.group_id, [changes.current_assignment(group, member)])
            live = self.coordinator.groups.get(group.group_id)
            left = live.members.get(member.member_id) if isinstance(live, ConsumerGroup) else None
            if isinstance(live, ConsumerGroup) and left is not None:
                self.schedule_session(live, left)
                if left.rebalance_timer:
                    left.rebalance_timer.cancel()
                    left.rebalance_timer = None
            return HeartbeatResult(error, None, member.member_id, STATIC_LEAVE_EPOCH)
        error = await self.remove(group.group_id, member.member_id, "left the group")
        return HeartbeatResult(error, None, member.member_id, LEAVE_EPOCH)

    # -- timers ---------------------------------------------------------------------------------
    def schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer:
            member.session_timer.cancel()
        timeout_ms = member.classic.session_timeout_ms if member.classic else self.session_timeout_ms
        member.session_timer = self._loop.call_later(
            timeout_ms / 1000, self.expire, group, member, "session timed out")

    def schedule_rebalance(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """Kafka's rebalance timeout: started when a member is asked to revoke, cancelled once
        it has; a member still holding revoked partitions when it fires is fenced."""
        if member.state != M_UNREVOKED:
            if member.rebalance_timer:
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
        elif member.rebalance_timer is None:
            timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 300000
            member.rebalance_timer = self._loop.call_later(
                timeout / 1000, self.expire, group, member, "did not revoke in time")

    @staticmethod
    def cancel_timers(member: ConsumerMember) -> None:
        for name in ("session_timer", "rebalance_timer", "classic_timer"):
            timer = getattr(member, name)
            if timer:
                timer.cancel()
                setattr(member, name, None)

    def expire(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> None:
        if group.members.get(member.member_id) is not member or group.dead:
            return
        asyncio.ensure_future(self.remove(group.group_id, member.member_id, reason))

    async def remove(self, group_id: str, member_id: str, reason: str) -> int:
        """Remove a member (its partitions become free; the group epoch rises); when only
        classic members remain the group becomes classic and rebalances."""
        live = self.coordinator.groups.get(group_id)
        if not isinstance(live, ConsumerGroup) or member_id not in live.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        group = live.copy()
        group.remove_member(member_id)
        log.info("member %s of consumer group %s %s (group epoch %d)", member_id, group_id,
                 reason, group.group_epoch)
        entries = changes.member_tombstones(group, member_id)
        downgraded = self.coordinator.classic_members.maybe_downgrade(group)
        error = await self.write(group_id, entries + (downgraded or [changes.group_epoch(group)]))
        classic = self.coordinator.groups.get(group_id)
        if downgraded and not error and classic is not None:
            self.coordinator.classic.adopt(classic, f"downgrade of group {group_id} to classic")
        return error

    async def write(self, group_id: str, entries: list[Record],
                    scratch: ConsumerGroup | None = None) -> int:
        """Replay `entries` into the live group and write them (acks=all): 0 or the error.
        What the records do not hold (which topics a member's principal may describe) is
        taken from the `scratch` copy the operation was decided on, as soon as the replay
        made its members live, so that no other member's operation copies them without it."""
        acked = self.coordinator.write_records(group_id, entries) if entries else None
        live = self.coordinator.groups.get(group_id)
        if scratch is not None and isinstance(live, ConsumerGroup):
            for member_id, member in scratch.members.items():
                if member.describes is not None and member_id in live.members:
                    live.members[member_id].describes = member.describes
        return 0 if acked is None else await acked

    def describes_until_heartbeat(self, topic: str) -> bool:
        """A reloaded member's principal is not in the records: with ACLs on, its regex
        resolves to nothing until its next heartbeat says who it is (never to more)."""
        return self.coordinator.broker.authorizer is None

    def unload(self, group: ConsumerGroup) -> None:
        for member in group.members.values():
            self.cancel_timers(member)


def _metadata_changed(live: Any, group: ConsumerGroup, member: ConsumerMember) -> set[str]:
    """{member id} when the member's stored metadata (client id and host, rack, rebalance
    timeout, protocol) changed without changing its subscription: a record, no new epoch."""
    before = live.members.get(member.member_id) if isinstance(live, ConsumerGroup) else None
    if before is None or changes.member_metadata(live, before) == \
            changes.member_metadata(group, member):
        return set()
    return {member.member_id}


def _frozen(parts: Partitions) -> frozenset[tuple[uuid.UUID, int]]:
    return frozenset((t, p) for t, ps in parts.items() for p in ps)
