"""One consumer group of Kafka's classic protocol: its members, generation and committed offsets.

This is the state and the rules that need no clock or I/O (Kafka's GroupMetadata and
MemberMetadata): state transitions, protocol selection by vote, leader choice, static member
bookkeeping, which members have rejoined, and which offsets have expired. Timers, futures
resolution order and persistence live in `classic_group_protocol.py`.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from minilog.connector.protocol import ErrorCode

from .group_records import subscription_topics

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"
STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)
CONSUMER_PROTOCOL_TYPE = "consumer"

FENCED_INSTANCE_ID = ErrorCode.FENCED_INSTANCE_ID
GROUP_SUBSCRIBED_TO_TOPIC = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC

_VALID_PREVIOUS = {
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    EMPTY: {PREPARING_REBALANCE},
}


class JoinResult(NamedTuple):
    error: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (id, instance id, metadata): leader's
    skip_assignment: bool = False


class SyncResult(NamedTuple):
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinFuture = asyncio.Future[JoinResult]  # a parked JoinGroup
# A JoinGroup's member fields: client id, client host, rebalance and session timeouts (ms),
# protocol type, protocols [(name, metadata)].
JoinArgs = tuple[str, str, int, int, str, list[tuple[str, bytes]]]


class Member:
    """A member as the coordinator sees it; `join_future`/`sync_future` are its parked requests."""

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str,
                 client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                 protocol_type: str | None, protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id, self.client_host = client_id, client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols            # [(name, metadata bytes)], in preference order
        self.assignment = b""
        self.join_future: asyncio.Future[JoinResult] | None = None
        self.sync_future: asyncio.Future[SyncResult] | None = None
        self.heartbeat_timer: asyncio.TimerHandle | None = None
        self.is_new = False

    def __repr__(self) -> str:
        return f"Member({self.member_id!r}, instance={self.group_instance_id!r})"

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def metadata(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def vote(self, candidates: list[str]) -> str:
        """This member's most preferred protocol among those every member supports."""
        return next(name for name, _ in self.protocols if name in candidates)


class Group:
    def __init__(self, group_id: str, now_ms: int, state: str = EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}   # in join order
        self.pending_members: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_sync: set[str] = set()  # members of this generation not synced yet
        self.offsets: dict[tuple[str, int], Any] = {}  # -> OffsetAndMetadata
        self.offsets_written_at: dict[tuple[str, int], int] = {}
        self.subscribed: set[str] | None = None  # topics the members consume, None if unknown
        self.new_member_added = False    # a member joined during the initial rebalance delay
        self.initial_join = False        # the pending join completes on the initial-delay timer
        self.persisted = False           # a metadata record for this group may be in the log
        self.join_timer: asyncio.TimerHandle | None = None
        self.sync_timer: asyncio.TimerHandle | None = None
        self.pending_timers: dict[str, asyncio.TimerHandle] = {}  # pending member id -> timer

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state}, generation={self.generation_id})"

    # -- state ----------------------------------------------------------------------------------
    def transition(self, state: str, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: cannot go from {self.state} to {state}")
        self.state = state
        self.state_timestamp = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[PREPARING_REBALANCE]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- membership -----------------------------------------------------------------------------
    def add(self, member: Member, join_future: asyncio.Future[JoinResult] | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        member.join_future = join_future
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member its new member id; requests parked under the old id are fenced."""
        member = self.members.pop(old_id)
        invoke_join(member, JoinResult(FENCED_INSTANCE_ID, old_id))
        invoke_sync(member, SyncResult(FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return member

    def validate_member(self, member_id: str, instance_id: str | None) -> int:
        """Kafka's validateCurrentMember: an error code, or 0 for a current member."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return int(ErrorCode.UNKNOWN_MEMBER_ID)
            if current != member_id:
                return int(FENCED_INSTANCE_ID)
        return 0 if member_id in self.members else int(ErrorCode.UNKNOWN_MEMBER_ID)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_future is not None
                                                for m in self.members.values())

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False when none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].join_future is not None:
            return True
        for member_id, member in self.members.items():
            if member.join_future is not None:
                self.leader_id = member_id
                return True
        return False

    # -- protocols ------------------------------------------------------------------------------
    def supports_protocols(self, protocol_type: str | None, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        return any(all(any(n == name for n, _ in m.protocols) for m in self.members.values())
                   for name in names)

    def select_protocol(self) -> str:
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        members = list(self.members.values())
        candidates = [name for name, _ in members[0].protocols
                      if all(any(n == name for n, _ in m.protocols) for m in members[1:])]
        votes: dict[str, int] = {}
        for m in members:
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name])

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition(EMPTY, now_ms)
        self.subscribed = self.subscribed_topics()
        self.pending_sync.clear()

    def current_member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        return tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only; None when unknown)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            data = m.metadata(self.protocol_name)
            found = subscription_topics(data) if data else set()
            if found is None:
                return None
            topics |= found
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed is not None and topic in self.subscribed

    # -- offsets --------------------------------------------------------------------------------
    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Offsets past retention, as Kafka decides (GroupMetadata.removeExpiredOffsets).

        Empty group: retention counts from when it became empty (or the commit, for groups
        loaded without a state timestamp). Stable consumer group with known subscriptions: offsets
        of topics no member subscribes to count from their commit. Groups without a protocol
        (offset storage only) count from each commit. Explicit expire timestamps (OffsetCommit
        v2-4) win over all of these.
        """
        if self.protocol_type is not None and self.state == EMPTY:
            def base(om: Any) -> int:
                return self.state_timestamp if self.state_timestamp >= 0 else om.commit_timestamp
            keep_topics: set[str] = set()
        elif (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed is not None
              and self.state == STABLE):
            def base(om: Any) -> int:
                return int(om.commit_timestamp)
            keep_topics = self.subscribed
        elif self.protocol_type is None:
            def base(om: Any) -> int:
                return int(om.commit_timestamp)
            keep_topics = set()
        else:
            return []
        return offsets_past_retention(self.offsets, keep_topics, base, now_ms, retention_ms)


def offsets_past_retention(offsets: Mapping[tuple[str, int], Any], keep_topics: set[str],
                           base: Callable[[Any], int], now_ms: int,
                           retention_ms: int) -> list[tuple[str, int]]:
    """The (topic, partition)s of `offsets` to expire: not of `keep_topics`, and past their
    explicit expire timestamp or `retention_ms` after `base(offset)`."""
    expired = []
    for tp, om in offsets.items():
        if tp[0] in keep_topics:
            continue
        if om.expire_timestamp is not None:
            if now_ms >= om.expire_timestamp:
                expired.append(tp)
        elif now_ms - base(om) >= retention_ms:
            expired.append(tp)
    return expired


def invoke_join(member: Member, result: JoinResult) -> bool:
    """Answer the member's parked JoinGroup, if any; True if there was one."""
    fut, member.join_future = member.join_future, None
    if fut is not None and not fut.done():
        fut.set_result(result)
        return True
    return fut is not None


def invoke_sync(member: Member, result: SyncResult) -> bool:
    fut, member.sync_future = member.sync_future, None
    if fut is not None and not fut.done():
        fut.set_result(result)
        return True
    return fut is not None


def stop_classic(group: Group, error: int) -> None:
    """The classic group is no longer served here (unloaded, or now a consumer group): its
    timers stop and parked requests are answered with `error`."""
    for timer in (group.join_timer, group.sync_timer, *group.pending_timers.values()):
        if timer:
            timer.cancel()
    group.state = DEAD
    for member in group.members.values():
        invoke_join(member, JoinResult(error, member.member_id))
        invoke_sync(member, SyncResult(error))
        if member.heartbeat_timer:
            member.heartbeat_timer.cancel()
