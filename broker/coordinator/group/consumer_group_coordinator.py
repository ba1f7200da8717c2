"""KIP-848's consumer group protocol on the broker's event loop, beside the classic one.

ConsumerGroupHeartbeat is the whole protocol: a member joins with epoch 0, heartbeats with its
epoch and the partitions it owns, and learns its next assignment in the answer; it leaves with
epoch -1 (or -2, a static member that will come back). The group's rules are in
`consumer_group.py`; here are the request checks, the timers (session timeout: no heartbeat
for `group.consumer.session.timeout.ms` removes the member; rebalance timeout: a member that
does not revoke in time is fenced), and persistence: each heartbeat that changes the group
writes Kafka's records (`consumer_group_records.py`) as one batch to `__consumer_offsets` and
answers once the in-sync replicas have it, so a new coordinator resumes the group after a
failover. A group is classic or consumer in the coordinator's one `groups` map; a consumer group
may hold classic members (`consumer_group_classic.py`), and a live classic group converts when
a member of this protocol joins it.
"""
import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import NamedTuple

from minilog.connector.protocol import ErrorCode

from . import consumer_group_records as rec
from .consumer_group import (
    LEAVE_EPOCH,
    M_UNREVOKED,
    STATIC_LEAVE_EPOCH,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerMember,
    FencedError,
    Partitions,
    compile_regex,
)
from .group_store import now_ms

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

    def __init__(self, coordinator, config):
        self.coordinator = coordinator
        self.session_timeout_ms: int = config["group.consumer.session.timeout.ms"]
        self.heartbeat_interval_ms: int = config["group.consumer.heartbeat.interval.ms"]
        self.assignors: list[str] = [a.strip() for a in
                                     config["group.consumer.assignors"].split(",") if a.strip()]
        protocols = config["group.coordinator.rebalance.protocols"]
        self.enabled: bool = "consumer" in {p.strip() for p in protocols.split(",")}

    @property
    def _loop(self):
        return self.coordinator._loop

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

    def _group_for(self, req: HeartbeatRequest) -> tuple[ConsumerGroup, list]:
        """The consumer group, and the records of its creation if it was classic: created on a
        join; an empty classic group converts keeping its offsets, a live one keeping its
        members too where `group.consumer.migration.policy` allows (else GROUP_ID_NOT_FOUND)."""
        groups = self.coordinator.groups
        group = groups.get(req.group_id)
        if isinstance(group, ConsumerGroup):
            return group, []
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
            converted.persisted = group.persisted
        groups[req.group_id] = converted
        return converted, []

    async def _heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest,
                         created: list) -> HeartbeatResult:
        changed: set[str] = set()
        epoch_before = group.group_epoch
        member = self._member_for(group, req, changed)
        if member.member_id not in changed:
            group.check_epoch(member, req.member_epoch, req.owned)
        if self._update_member(member, req):
            changed.add(member.member_id)
        if member.member_id in changed:
            group.group_epoch = max(group.group_epoch, epoch_before + 1)
        error, assigned_changed = await self.advance(group, member, changed, epoch_before,
                                                     req.owned, created)
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

    async def advance(self, group: ConsumerGroup, member: ConsumerMember, changed: set[str],
                      epoch_before: int, owned: Partitions | None,
                      created: list = ()) -> tuple[int, bool]:
        """One step of the group for `member`'s heartbeat (or a classic member's JoinGroup):
        new topics raise the epoch, a new epoch gets a target assignment, the member is
        reconciled, and the records of it all are written after `created`. Returns (error,
        whether the member's assigned partitions changed)."""
        if group.refresh_topics(self._cluster_topics()):  # one new epoch for all of it
            group.group_epoch = max(group.group_epoch, epoch_before + 1)
        target_changed = group.assignment_epoch < group.group_epoch
        if target_changed:
            group.compute_target(group.assignor_name(self.assignors))
        before = (member.member_epoch, member.state, _frozen(member.assigned),
                  _frozen(member.pending_revocation))
        group.reconcile(member, owned)
        after = (member.member_epoch, member.state, _frozen(member.assigned),
                 _frozen(member.pending_revocation))
        self.schedule_session(group, member)
        self._schedule_rebalance(group, member)
        entries = self._records(group, changed, assignment_changed=before != after,
                                member=member, epoch_changed=group.group_epoch != epoch_before,
                                target_changed=target_changed)
        error = await self._write(group, list(created) + entries)
        return error, before[2] != after[2]

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

    def _cluster_topics(self) -> dict[str, tuple[uuid.UUID, int]]:
        return {name: (ts.topic_id, len(ts.partitions))
                for name, ts in self.coordinator.broker.metadata.topics.items() if not ts.internal}

    async def _leave(self, group: ConsumerGroup, req: HeartbeatRequest) -> HeartbeatResult:
        member = group.members.get(req.member_id)
        if member is None:
            raise FencedError(ErrorCode.UNKNOWN_MEMBER_ID,
                              f"Member {req.member_id} is not a member of group {group.group_id}.")
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # KIP-848: a static member leaving temporarily keeps its partitions until it comes
            # back under the same instance id or its session times out.
            member.epoch_before_leave = max(member.member_epoch, 0)
            member.previous_member_epoch, member.member_epoch = member.member_epoch, STATIC_LEAVE_EPOCH
            self.schedule_session(group, member)
            if member.rebalance_timer:
                member.rebalance_timer.cancel()
                member.rebalance_timer = None
            error = await self._write(group, [self._current_assignment(group, member)])
            return HeartbeatResult(error, None, member.member_id, STATIC_LEAVE_EPOCH)
        error = await self.remove(group, member, "left the group")
        return HeartbeatResult(error, None, member.member_id, LEAVE_EPOCH)

    # -- timers ---------------------------------------------------------------------------------
    def schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer:
            member.session_timer.cancel()
        timeout_ms = member.classic.session_timeout_ms if member.classic else self.session_timeout_ms
        member.session_timer = self._loop.call_later(
            timeout_ms / 1000, self.expire, group, member, "session timed out")

    def _schedule_rebalance(self, group: ConsumerGroup, member: ConsumerMember) -> None:
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
        asyncio.ensure_future(self.remove(group, member, reason))

    async def remove(self, group: ConsumerGroup, member: ConsumerMember, reason: str) -> int:
        """Remove a member (its partitions become free; the group epoch rises)."""
        self.cancel_timers(member)
        group.remove_member(member.member_id)
        log.info("member %s of consumer group %s %s (group epoch %d)", member.member_id,
                 group.group_id, reason, group.group_epoch)
        entries = self._member_tombstones(group, member.member_id)
        downgraded = self.coordinator.classic_members.maybe_downgrade(group)
        return await self._write(group, entries + (downgraded or [self._group_epoch(group)]))

    # -- persistence ----------------------------------------------------------------------------
    def _records(self, group: ConsumerGroup, changed: set[str], assignment_changed: bool,
                 member: ConsumerMember, epoch_changed: bool, target_changed: bool) -> list:
        """The records that bring `__consumer_offsets` up to the group's new state, in Kafka's
        order: members, group epoch, target assignment, then the current assignment."""
        entries = []
        for member_id in sorted(changed):
            m = group.members.get(member_id)
            entries += self._member_tombstones(group, member_id) if m is None \
                else [self._member_metadata(group, m)]
        if epoch_changed:
            entries.append(self._group_epoch(group))
        if target_changed:
            entries += self._target_records(group)
        if assignment_changed or member.member_id in changed:
            entries.append(self._current_assignment(group, member))
        return entries

    @staticmethod
    def _target_records(group: ConsumerGroup) -> list:
        """The target assignment of every member, then its epoch."""
        return [(rec.consumer_key(rec.TARGET_MEMBER, group.group_id, mid), rec.encode_value(
            rec.TARGET_MEMBER, topic_partitions=rec.topic_partitions(
                rec.TARGET_MEMBER, "topic_partitions", group.target.get(mid, {}))))
            for mid in sorted(group.members)] + [
            (rec.consumer_key(rec.TARGET_EPOCH, group.group_id),
             rec.encode_value(rec.TARGET_EPOCH, assignment_epoch=group.assignment_epoch))]

    @staticmethod
    def _group_epoch(group: ConsumerGroup):
        return (rec.consumer_key(rec.GROUP_EPOCH, group.group_id),
                rec.encode_value(rec.GROUP_EPOCH, epoch=group.group_epoch))

    @staticmethod
    def _member_metadata(group: ConsumerGroup, m: ConsumerMember):
        return (rec.consumer_key(rec.MEMBER, group.group_id, m.member_id), rec.encode_value(
            rec.MEMBER, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=m.subscribed_topic_names,
            subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            classic_member_metadata=rec.classic_metadata(m.classic)))

    def full_records(self, group: ConsumerGroup) -> list:
        """Every record of the group as it stands (a classic group just converted)."""
        target = self._target_records(group)
        return ([self._member_metadata(group, m) for m in group.members.values()]
                + [self._group_epoch(group)] + target
                + [self._current_assignment(group, m) for m in group.members.values()])

    def all_tombstones(self, group: ConsumerGroup) -> list:
        """Every record of the group and its members, deleted (it became classic)."""
        return [e for mid in group.members for e in self._member_tombstones(group, mid)] \
            + self.tombstones(group)

    @staticmethod
    def _current_assignment(group: ConsumerGroup, m: ConsumerMember):
        kind = rec.CURRENT_ASSIGNMENT
        return (rec.consumer_key(kind, group.group_id, m.member_id), rec.encode_value(
            kind, member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
            state=m.state,
            assigned_partitions=rec.topic_partitions(kind, "assigned_partitions", m.assigned),
            partitions_pending_revocation=rec.topic_partitions(
                kind, "partitions_pending_revocation", m.pending_revocation)))

    @staticmethod
    def _member_tombstones(group: ConsumerGroup, member_id: str) -> list:
        return [(rec.consumer_key(kind, group.group_id, member_id), None)
                for kind in (rec.CURRENT_ASSIGNMENT, rec.TARGET_MEMBER, rec.MEMBER)]

    async def _write(self, group: ConsumerGroup, entries: list) -> int:
        if not entries:
            return 0
        store = self.coordinator.store
        written = store.write(store.partition_for(group.group_id), entries)
        group.persisted = True
        return (await written)[0]

    def tombstones(self, group: ConsumerGroup) -> list:
        """Every record of the group, deleted (DeleteGroups of an empty group)."""
        return [(rec.consumer_key(kind, group.group_id), None)
                for kind in (rec.TARGET_EPOCH, rec.GROUP_EPOCH)]

    # -- loading --------------------------------------------------------------------------------
    def restore(self, group_id: str, records: list, offsets: dict) -> ConsumerGroup | None:
        """Rebuild a group from its records [(ConsumerKey, value or None)] in log order; its
        members must heartbeat within a session timeout to stay."""
        state: dict = {}
        for key, value in records:
            slot = (key.kind, key.member_id)
            if value is None:
                state.pop(slot, None)
            else:
                state[slot] = rec.decode_value(key.kind, value)
        if (rec.GROUP_EPOCH, None) not in state:
            return None
        group = ConsumerGroup(group_id, -1)
        group.group_epoch = state[(rec.GROUP_EPOCH, None)].epoch
        target = state.get((rec.TARGET_EPOCH, None))
        group.assignment_epoch = target.assignment_epoch if target else 0
        group.offsets, group.persisted = offsets, True
        for (kind, member_id), v in sorted(state.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            if kind == rec.MEMBER:
                group.add_member(ConsumerMember(
                    member_id, v.instance_id, v.rack_id, v.client_id, v.client_host,
                    list(v.subscribed_topic_names), v.subscribed_topic_regex, v.server_assignor,
                    v.rebalance_timeout_ms,
                    classic=_classic(v.classic_member_metadata)))
        for (kind, member_id), v in state.items():
            member = group.members.get(member_id)
            if member is None:
                continue
            if kind == rec.TARGET_MEMBER:
                group.target[member_id] = rec.from_topic_partitions(v.topic_partitions)
            elif kind == rec.CURRENT_ASSIGNMENT:
                member.member_epoch, member.previous_member_epoch = v.member_epoch, \
                    v.previous_member_epoch
                member.state = v.state
                member.assigned = rec.from_topic_partitions(v.assigned_partitions)
                member.pending_revocation = rec.from_topic_partitions(
                    v.partitions_pending_revocation)
                if member.member_epoch == STATIC_LEAVE_EPOCH:
                    member.epoch_before_leave = max(member.previous_member_epoch, 0)
        for member in group.members.values():
            group.hold(member)
            member.describes = self._describes_until_heartbeat
        group.topics = group.subscribed_topics(self._cluster_topics())
        for member in group.members.values():
            self.schedule_session(group, member)
            self._schedule_rebalance(group, member)
        return group

    def _describes_until_heartbeat(self, topic: str) -> bool:
        """A reloaded member's principal is not in the records: with ACLs on, its regex
        resolves to nothing until its next heartbeat says who it is (never to more)."""
        return self.coordinator.broker.authorizer is None

    def unload(self, group: ConsumerGroup) -> None:
        for member in group.members.values():
            self.cancel_timers(member)


def _classic(value) -> ClassicMetadata | None:
    decoded = rec.from_classic_metadata(value)
    return ClassicMetadata(*decoded) if decoded else None


def _frozen(parts: Partitions) -> frozenset:
    return frozenset((t, p) for t, ps in parts.items() for p in ps)
