"""The classic group protocol for classic groups: Kafka's JoinGroup / SyncGroup / Heartbeat /
LeaveGroup state machine (the classic half of Kafka's GroupMetadataManager).

A JoinGroup or SyncGroup that must wait for the rest of the group parks an asyncio future on
its member, and timers (`loop.call_later`) stand in for Kafka's purgatories: session timeouts
expire members, the rebalance timeout ends a join or sync phase, and
`group.initial.rebalance.delay.ms` lets a new group gather members before its first generation.
The group coordinator (`group_coordinator.py`) validates a request and routes it here when its
group is classic; a consumer (KIP-848) group's classic members go to `consumer_group_classic.py`
instead. A classic rebalance changes the group itself and then writes its metadata record
(Kafka's storeGroup), which is not replayed, as in Kafka.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from minilog.connector.protocol import ErrorCode

from . import group as g
from .group import (
    Group, JoinArgs, JoinFuture, JoinResult, Member, SyncResult, invoke_join, invoke_sync)
from .group_records import group_record
from ..partition_writer import now_ms

if TYPE_CHECKING:
    from .group_coordinator import GroupCoordinator

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's: bounds a new member's parked JoinGroup

log = logging.getLogger("minilog.broker.groups")


class ClassicGroupProtocol:
    """Membership, rebalances and sessions of classic groups (composed into `GroupCoordinator`,
    beside its `consumer` protocol and its `classic_members`)."""

    def __init__(self, coordinator: GroupCoordinator, initial_delay_ms: int) -> None:
        self.coordinator = coordinator
        self.initial_delay_ms = initial_delay_ms

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.coordinator.loop

    def adopt(self, group: Group, reason: str) -> None:
        """A classic group made from a consumer group: its members' sessions start and it
        rebalances (Kafka's convertToClassicGroup)."""
        for member in group.members.values():
            self.schedule_heartbeat(group, member)
        self._prepare_rebalance(group, reason)

    # -- JoinGroup ------------------------------------------------------------------------------
    async def join(self, group: Group | None, group_id: str, member_id: str,
                   instance_id: str | None, client_id: str, client_host: str,
                   rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], require_known_member_id: bool,
                   supports_skip_assignment: bool) -> JoinResult:
        """A JoinGroup of a classic group (`None`: no group `group_id` here yet), validated."""
        unknown = member_id == ""
        if group is None:
            if not unknown:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.coordinator.add_group(group_id)
        fut: JoinFuture = self.loop.create_future()
        names = [name for name, _ in protocols]
        args: JoinArgs = (client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                          protocol_type, protocols)
        if group.state == g.DEAD:
            fut.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
        elif not group.supports_protocols(protocol_type, names):
            fut.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
        elif unknown:
            new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
            if instance_id is not None and instance_id in group.static_members:
                self._rejoin_static_member(group, group.static_members[instance_id], new_id,
                                           instance_id, args, fut, supports_skip_assignment)
            elif instance_id is None and require_known_member_id:
                group.pending_members.add(new_id)
                group.pending_timers[new_id] = self.loop.call_later(
                    session_timeout_ms / 1000, self._expire_pending_member, group, new_id)
                fut.set_result(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
            else:
                self._add_member_and_rebalance(group, new_id, instance_id, args, fut)
        elif member_id in group.pending_members:
            if instance_id is not None:
                fut.set_result(JoinResult(ErrorCode.INVALID_REQUEST, member_id))
            else:
                self._add_member_and_rebalance(group, member_id, None, args, fut)
        else:
            self._current_member_join(group, member_id, instance_id, args, fut)
        if group.state == g.PREPARING_REBALANCE:
            self._try_complete_join(group)
        return await fut

    def _current_member_join(self, group: Group, member_id: str, instance_id: str | None,
                             args: JoinArgs, fut: JoinFuture) -> None:
        error = group.validate_member(member_id, instance_id)
        if error:
            fut.set_result(JoinResult(error, member_id))
            return
        member, protocols = group.members[member_id], args[-1]
        if group.state == g.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, args, fut)
        elif group.state == g.COMPLETING_REBALANCE:
            if member.matches(protocols):  # lost its JoinGroup response: answer again
                fut.set_result(self._generation_result(group, member_id,
                                                       with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, args, fut)
        elif group.state == g.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                self._update_member_and_rebalance(group, member, args, fut)
            else:
                fut.set_result(self._generation_result(group, member_id))
        else:
            fut.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _generation_result(self, group: Group, member_id: str, with_members: bool = False,
                           leader: str | None = None, skip_assignment: bool = False) -> JoinResult:
        return JoinResult(0, member_id, group.generation_id, group.protocol_type,
                          group.protocol_name,
                          (group.leader_id or "") if leader is None else leader,
                          group.current_member_metadata() if with_members else (),
                          skip_assignment)

    def _add_member_and_rebalance(self, group: Group, member_id: str, instance_id: str | None,
                                  args: JoinArgs, fut: JoinFuture) -> None:
        client_id, client_host, rebalance_ms, session_ms, protocol_type, protocols = args
        member = Member(member_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                        protocol_type, protocols)
        member.is_new = True
        if group.state == g.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        timer = group.pending_timers.pop(member_id, None)
        if timer:
            timer.cancel()
        group.add(member, fut)
        # A new member cannot heartbeat while its JoinGroup is parked; bound its wait instead.
        self.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding member {member_id}")

    def _update_member(self, member: Member, args: JoinArgs, fut: JoinFuture) -> None:
        _, _, member.rebalance_timeout_ms, member.session_timeout_ms, _, member.protocols = args
        if member.join_future is not None and member.join_future is not fut:
            invoke_join(member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_future = fut

    def _update_member_and_rebalance(self, group: Group, member: Member, args: JoinArgs,
                                     fut: JoinFuture) -> None:
        self._update_member(member, args, fut)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")

    def _rejoin_static_member(self, group: Group, old_id: str, new_id: str, instance_id: str,
                              args: JoinArgs, fut: JoinFuture, can_skip: bool) -> None:
        """A static member back under a new member id keeps its place (and its assignment)."""
        old_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.schedule_heartbeat(group, member)
        self._update_member(member, args, fut)
        if group.state == g.STABLE:
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance(group, f"static member {instance_id} changed protocols")
                return
            written = self._store_group(group)
            member.join_future = None
            asyncio.ensure_future(self._answer_static_rejoin(group, new_id, old_leader, can_skip,
                                                             fut, written))
        elif group.state == g.COMPLETING_REBALANCE:
            self._prepare_rebalance(group, f"static member {instance_id} rejoined while syncing")

    async def _answer_static_rejoin(self, group: Group, new_id: str, old_leader: str | None,
                                    can_skip: bool, fut: JoinFuture,
                                    written: Awaitable[int]) -> None:
        """The rejoined static member's JoinGroup answer, once its new id is replicated."""
        error = await written
        if fut.done():
            return
        if error:
            fut.set_result(JoinResult(error, ""))
        elif can_skip:  # v9+: the leader learns it leads but keeps the current assignment
            is_leader = group.is_leader(new_id)
            fut.set_result(self._generation_result(group, new_id, with_members=is_leader,
                                                   skip_assignment=is_leader))
        else:  # older clients: the old leader id stops this one from reassigning
            fut.set_result(self._generation_result(group, new_id, leader=old_leader or ""))

    def _expire_pending_member(self, group: Group, member_id: str) -> None:
        group.pending_timers.pop(member_id, None)
        if member_id in group.pending_members:
            group.remove(member_id)
            if group.state == g.PREPARING_REBALANCE:
                self._try_complete_join(group)

    # -- rebalance ------------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == g.COMPLETING_REBALANCE:
            self._propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.sync_timer:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync.clear()
        if group.join_timer:
            group.join_timer.cancel()
        initial = group.state == g.EMPTY
        group.transition(g.PREPARING_REBALANCE, now_ms())
        log.info("preparing to rebalance group %s (generation %d): %s", group.group_id,
                 group.generation_id, reason)
        group.initial_join = initial
        if initial:
            delay = self.initial_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            group.join_timer = self.loop.call_later(delay / 1000, self._initial_join_expired,
                                                     group, delay, remaining)
        else:
            group.join_timer = self.loop.call_later(group.rebalance_timeout_ms / 1000,
                                                     self._complete_join, group)
            self._try_complete_join(group)

    def _initial_join_expired(self, group: Group, delay: int, remaining: int) -> None:
        """Kafka's InitialDelayedJoin: wait again while new members keep arriving."""
        group.join_timer = None
        if group.new_member_added and remaining:
            group.new_member_added = False
            group.join_timer = self.loop.call_later(
                min(delay, remaining) / 1000, self._initial_join_expired, group, delay,
                max(remaining - delay, 0))
        else:
            self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (group.state == g.PREPARING_REBALANCE and not group.initial_join
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """End the join phase: drop dynamic members that did not rejoin, start a generation."""
        if group.join_timer:
            group.join_timer.cancel()
            group.join_timer = None
        if group.state != g.PREPARING_REBALANCE:
            return
        group.initial_join = False
        for member in list(group.members.values()):
            if member.join_future is None and member.group_instance_id is None:
                group.remove(member.member_id)
                self._cancel_heartbeat(member)
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that have not rejoined are left: wait for their sessions.
            group.join_timer = self.loop.call_later(group.rebalance_timeout_ms / 1000,
                                                     self._complete_join, group)
            return
        group.init_next_generation(now_ms())
        if group.state == g.EMPTY:
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            asyncio.ensure_future(self._store_group(group))  # appended now; nobody waits
            return
        log.info("group %s generation %d: %d member(s), protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        for member in group.members.values():
            invoke_join(member, self._generation_result(
                group, member.member_id, with_members=group.is_leader(member.member_id)))
            self.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_timer = self.loop.call_later(group.rebalance_timeout_ms / 1000,
                                                 self._sync_expired, group, group.generation_id)

    def _sync_expired(self, group: Group, generation: int) -> None:
        """Members that got their JoinGroup answer but never synced are removed."""
        group.sync_timer = None
        if generation != group.generation_id or not group.pending_sync or \
                group.state not in (g.COMPLETING_REBALANCE, g.STABLE):
            return
        missing = list(group.pending_sync)
        for member_id in missing:
            self._cancel_heartbeat(group.remove(member_id))
        self._prepare_rebalance(group, f"members {missing} did not sync")

    # -- SyncGroup ------------------------------------------------------------------------------
    async def sync(self, group: Group | None, generation_id: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes]) -> SyncResult:
        """A SyncGroup of a classic group (`None`: none here), validated."""
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state == g.DEAD:
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = group.validate_member(member_id, instance_id)
        if not error and generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if not error and ((protocol_type is not None and protocol_type != group.protocol_type) or
                          (protocol_name is not None and protocol_name != group.protocol_name)):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error:
            return SyncResult(error)
        if group.state == g.EMPTY:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state == g.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        self._remove_pending_sync(group, member_id)
        if group.state == g.STABLE:
            self.schedule_heartbeat(group, member)
            return SyncResult(0, member.assignment, group.protocol_type, group.protocol_name)
        fut: asyncio.Future[SyncResult] = self.loop.create_future()
        invoke_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # a stale parked one
        member.sync_future = fut
        if group.is_leader(member_id):
            full = {mid: assignments.get(mid, b"") for mid in group.members}
            error = await self._store_group(group, full)
            if group.state == g.COMPLETING_REBALANCE and group.generation_id == generation_id:
                if error:
                    self._propagate_assignment(group, error)
                    self._maybe_prepare_rebalance(group, f"storing the assignment failed: {error}")
                else:
                    for mid, m in group.members.items():
                        m.assignment = full[mid]
                    self._propagate_assignment(group, 0)
                    group.transition(g.STABLE, now_ms())
        return await fut

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _propagate_assignment(self, group: Group, error: int) -> None:
        """Answer parked SyncGroups: the assignment, or `error` with empty assignments."""
        for member in group.members.values():
            if error:
                member.assignment = b""
                result = SyncResult(error)
            else:
                result = SyncResult(0, member.assignment, group.protocol_type, group.protocol_name)
            if invoke_sync(member, result):
                self.schedule_heartbeat(group, member)

    # -- Heartbeat, LeaveGroup, session timeouts ------------------------------------------------
    def heartbeat(self, group: Group | None, generation_id: int, member_id: str,
                  instance_id: str | None) -> int:
        """A Heartbeat of a classic group (`None`: none here), validated."""
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state == g.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state == g.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.schedule_heartbeat(group, group.members[member_id])
        return ErrorCode.REBALANCE_IN_PROGRESS if group.state == g.PREPARING_REBALANCE else 0

    def leave(self, group: Group, member_id: str, instance_id: str | None) -> int:
        """One member of a LeaveGroup leaving a live classic group: its error code."""
        if member_id == "":  # an admin removing a static member by its instance id
            current = None if instance_id is None else group.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            member_id = current
        elif member_id in group.pending_members:
            group.remove(member_id)
            timer = group.pending_timers.pop(member_id, None)
            if timer:
                timer.cancel()
            if group.state == g.PREPARING_REBALANCE:
                self._try_complete_join(group)
            return 0
        else:
            error = group.validate_member(member_id, instance_id)
            if error:
                return error
        self._remove_member_and_update_group(group, group.members[member_id], "left the group")
        return 0

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        invoke_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, ""))
        invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._cancel_heartbeat(member)
        log.info("member %s of group %s %s", member.member_id, group.group_id, reason)
        if group.state in (g.STABLE, g.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"member {member.member_id} {reason}")
        elif group.state == g.PREPARING_REBALANCE:
            self._try_complete_join(group)

    def schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        self._cancel_heartbeat(member)
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self.loop.call_later(timeout / 1000, self._session_expired,
                                                       group, member)

    @staticmethod
    def _cancel_heartbeat(member: Member | None) -> None:
        if member is not None and member.heartbeat_timer:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _session_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if group.state == g.DEAD or group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.join_future is not None or member.sync_future is not None):
            return  # parked in a rebalance: the rebalance timeout governs it
        self._remove_member_and_update_group(group, member, "session timed out")

    # -- persistence ----------------------------------------------------------------------------
    def _store_group(self, group: Group,
                     assignment: dict[str, bytes] | None = None) -> Awaitable[int]:
        """Write the group's metadata record (Kafka's storeGroup): appended at once, then an
        awaitable of the error code, 0 once the in-sync replicas have it. The classic
        rebalance changed the group itself: the record is not replayed (nor in Kafka)."""
        group.persisted = True  # in the log now, whether or not the replicas get it
        return self.coordinator.write_records(group.group_id, [group_record(group, assignment)],
                                  replay=False)
