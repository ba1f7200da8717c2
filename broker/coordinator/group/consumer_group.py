"""One consumer group of KIP-848's protocol: members, epochs, target and current assignments.

The state and the rules with no clock or I/O (Kafka's ConsumerGroup, ConsumerGroupMember and
CurrentAssignmentBuilder). The group epoch rises whenever membership, subscriptions or the
subscribed topics' partitions change; the target assignment is recomputed for that epoch;
each member is then reconciled towards its target one heartbeat at a time: partitions it must
give up are revoked first (it keeps its epoch until it stops reporting them), and a partition
is handed to a new owner only once nobody holds it, so no partition is ever owned by two
members. Timers and persistence live in `consumer_group_coordinator.py`.

A member may speak the classic protocol (KIP-848's online migration): it keeps its JoinGroup
protocols in `classic`, is reconciled only when it rejoins (it reports what it owns in its
subscription), and is told to rejoin by its Heartbeat (`must_rejoin`).
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any
from uuid import UUID

from minilog.connector.protocol import ErrorCode

from .consumer_assignors import ASSIGNORS
from .group import offsets_past_retention

# Group states, as Kafka names them.
EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"
# Member states (ConsumerGroupCurrentMemberAssignmentValue.State).
M_STABLE, M_UNREVOKED, M_UNRELEASED = 0, 1, 2
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2
CONSUMER_PROTOCOL_TYPE = "consumer"

Partitions = dict[UUID, set[int]]


class FencedError(Exception):
    """A heartbeat that must be answered with an error code (FENCED_MEMBER_EPOCH, ...)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class ClassicMetadata:
    """What a classic member of a consumer group sent in JoinGroup (Kafka's
    ClassicMemberMetadata): its session timeout and protocols [(name, metadata)] in order."""
    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]

    @property
    def protocol_name(self) -> str:
        """The protocol a classic member of a consumer group is answered with (its first)."""
        return self.protocols[0][0]


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: int = M_STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    epoch_before_leave: int = 0      # a static member that left with epoch -2 comes back here
    classic: ClassicMetadata | None = None  # set for a member speaking the classic protocol
    session_timer: asyncio.TimerHandle | None = None  # owned by the coordinator
    rebalance_timer: asyncio.TimerHandle | None = None
    classic_timer: asyncio.TimerHandle | None = None  # a classic member's join/sync deadline
    # Which topics its regex may resolve to: those its principal may DESCRIBE (Kafka 4
    # resolves a SubscribedTopicRegex with the heartbeat's principal and silently leaves out
    # the rest). Not persisted: the coordinator sets it on every heartbeat and on a reload;
    # None (groups built without a broker) leaves nothing out.
    describes: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)

    def regex_matches(self, names) -> list[str]:
        """The topics of `names` its regex subscription resolves to (none without a regex)."""
        if not self.subscribed_topic_regex:
            return []
        pattern = compile_regex(self.subscribed_topic_regex)
        visible = self.describes
        return [n for n in names if pattern.fullmatch(n) and (visible is None or visible(n))]

    def owns_any(self, partitions: Partitions) -> bool:
        return any(p in self.assigned.get(t, ()) or p in self.pending_revocation.get(t, ())
                   for t, ps in partitions.items() for p in ps)


def _copy(parts: Partitions) -> Partitions:
    return {t: set(ps) for t, ps in parts.items() if ps}


def to_partitions(topic_partitions: Any) -> Partitions | None:
    """The request's [(topic_id, partitions)] as {topic id: set}, None when not sent."""
    if topic_partitions is None:
        return None
    return {tp.topic_id: set(tp.partitions) for tp in topic_partitions if tp.partitions}


def _owns_revoked(owned: Partitions | None, revoked: Partitions) -> bool:
    if owned is None:
        return True
    return any(p in revoked.get(t, ()) for t, ps in owned.items() for p in ps)


class ConsumerGroup:
    """Duck-types the classic `Group` where offsets code needs it (state, offsets, members)."""
    protocol_type = CONSUMER_PROTOCOL_TYPE
    pending_members: frozenset[str] = frozenset()

    def __init__(self, group_id: str, now_ms: int):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}   # instance id -> member id
        self.target: dict[str, Partitions] = {}     # member id -> target partitions
        self.owners: dict[tuple[UUID, int], str] = {}  # partition -> member holding it
        self.topics: dict[str, tuple[UUID, int]] = {}  # subscribed topic -> (id, partitions)
        self.preferred_assignor: str | None = None
        self.offsets: dict[tuple[str, int], Any] = {}
        self.offsets_written_at: dict[tuple[str, int], int] = {}
        self.persisted = False
        self.dead = False
        self.state_timestamp = now_ms

    def __repr__(self) -> str:
        return f"ConsumerGroup({self.group_id!r}, {self.state}, epoch={self.group_epoch})"

    # -- state ----------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        if self.dead:
            return DEAD
        if not self.members:
            return EMPTY
        if self.assignment_epoch < self.group_epoch:
            return ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state != M_STABLE
               for m in self.members.values()):
            return RECONCILING
        return STABLE

    def transition(self, state: str, now_ms: int) -> None:
        """Only DEAD is set from outside (group deletion), as for classic groups."""
        self.dead = state == DEAD
        self.state_timestamp = now_ms

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.topics

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Kafka's rule for consumer groups: an empty group's offsets expire counting from
        their commit (or the group's emptiness); a live group keeps those it subscribes to."""
        keep = set(self.topics) if self.members else set()
        empty_since = -1 if self.members else self.state_timestamp
        return offsets_past_retention(self.offsets, keep,
                                      lambda om: max(om.commit_timestamp, empty_since),
                                      now_ms, retention_ms)

    # -- membership -----------------------------------------------------------------------------
    def add_member(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        """Drop a member and free its partitions; the group epoch rises."""
        member = self.drop_member(member_id)
        if member is not None:
            self.group_epoch += 1
        return member

    def drop_member(self, member_id: str) -> ConsumerMember | None:
        """Forget a member and free its partitions (its records were tombstoned)."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.release(member)
        self.target.pop(member_id, None)
        return member

    def copy(self) -> ConsumerGroup:
        """A scratch copy to decide an operation on: the caller derives records from it, and
        only their replay changes this group. Timers are not copied; offsets are shared (a
        heartbeat never changes them)."""
        other = ConsumerGroup(self.group_id, self.state_timestamp)
        other.group_epoch, other.assignment_epoch = self.group_epoch, self.assignment_epoch
        other.members = {mid: replace(
            m, subscribed_topic_names=list(m.subscribed_topic_names), assigned=_copy(m.assigned),
            pending_revocation=_copy(m.pending_revocation), session_timer=None,
            rebalance_timer=None, classic_timer=None) for mid, m in self.members.items()}
        other.static_members = dict(self.static_members)
        other.target = {mid: _copy(parts) for mid, parts in self.target.items()}
        other.owners = dict(self.owners)
        other.topics = dict(self.topics)
        other.preferred_assignor = self.preferred_assignor
        other.offsets, other.offsets_written_at = self.offsets, self.offsets_written_at
        other.persisted, other.dead = self.persisted, self.dead
        return other

    def replace_static_member(self, old: ConsumerMember, new_id: str) -> ConsumerMember:
        """A static member back under a new id takes over its predecessor's place and
        partitions (KIP-848: epoch -2 left them in place)."""
        self.members.pop(old.member_id)
        member = ConsumerMember(new_id, old.instance_id, assigned=_copy(old.assigned),
                                member_epoch=old.epoch_before_leave)
        self.release(old)
        self.target[new_id] = self.target.pop(old.member_id, {})
        self.add_member(member)
        self.hold(member)
        return member

    def release(self, member: ConsumerMember) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    if self.owners.get((t, p)) == member.member_id:
                        del self.owners[(t, p)]

    def hold(self, member: ConsumerMember) -> None:
        """Record `member` as the owner of its partitions (after a change or a reload)."""
        for parts in (member.assigned, member.pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    self.owners[(t, p)] = member.member_id

    # -- subscriptions and target assignment ---------------------------------------------------
    def subscribed_topics(self, topic_ids: dict[str, tuple[UUID, int]]) -> dict[str, tuple[UUID, int]]:
        """{topic: (id, partitions)} of the topics some member subscribes to and that exist;
        `topic_ids` is every non-internal topic of the cluster."""
        out = {}
        for m in self.members.values():
            for name in m.subscribed_topic_names:
                if name in topic_ids:
                    out[name] = topic_ids[name]
            out.update({n: topic_ids[n] for n in m.regex_matches(topic_ids)})
        return out

    def refresh_topics(self, topic_ids: dict[str, tuple[UUID, int]]) -> bool:
        """Re-resolve subscriptions against the cluster's topics; True when a subscribed topic
        appeared, vanished or gained partitions (the caller then raises the group epoch)."""
        topics = self.subscribed_topics(topic_ids)
        if topics == self.topics:
            return False
        self.topics = topics
        return True

    def member_topic_ids(self, member: ConsumerMember) -> frozenset[UUID]:
        ids = {self.topics[n][0] for n in member.subscribed_topic_names if n in self.topics}
        ids |= {self.topics[n][0] for n in member.regex_matches(self.topics)}
        return frozenset(ids)

    def assignor_name(self, configured: list[str]) -> str:
        """The assignor most members ask for (`group.remote.assignor`), else the first
        configured one (Kafka's rule)."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if votes:
            return max(sorted(votes), key=lambda name: votes[name])
        return configured[0]

    def compute_target(self, assignor: str) -> None:
        """The target assignment for the current group epoch."""
        subscriptions = {mid: self.member_topic_ids(m) for mid, m in self.members.items()}
        partitions = dict(self.topics.values())
        self.target = ASSIGNORS[assignor](subscriptions, partitions, self.target)
        self.preferred_assignor = assignor
        self.assignment_epoch = self.group_epoch

    # -- reconciliation -------------------------------------------------------------------------
    def reconcile(self, member: ConsumerMember, owned: Partitions | None) -> None:
        """Kafka's CurrentAssignmentBuilder: move `member` one step towards its target, given
        the partitions it reported owning (None when the heartbeat did not say)."""
        if member.state == M_STABLE:
            if member.member_epoch == self.assignment_epoch:
                return
            self._next_assignment(member, member.member_epoch, owned)
        elif member.state == M_UNREVOKED:
            if _owns_revoked(owned, member.pending_revocation):
                return
            self._next_assignment(member, member.member_epoch + 1, owned)
        else:
            self._next_assignment(member, member.member_epoch, owned)

    def _next_assignment(self, member: ConsumerMember, epoch: int, owned: Partitions | None) -> None:
        target = self.target.get(member.member_id, {})
        assigned, revoking, adding, unreleased = {}, {}, {}, False
        for t in set(target) | set(member.assigned):
            want, have = target.get(t, set()), member.assigned.get(t, set())
            keep, give, take = have & want, have - want, want - have
            free = {p for p in take if self.owners.get((t, p)) in (None, member.member_id)}
            unreleased = unreleased or free != take
            if keep:
                assigned[t] = keep
            if give:
                revoking[t] = give
            if free:
                adding[t] = free
        self.release(member)
        if revoking and _owns_revoked(owned, revoking):
            member.state, member.assigned, member.pending_revocation = M_UNREVOKED, assigned, revoking
            self._set_epoch(member, epoch)
        else:
            for t, ps in adding.items():
                assigned.setdefault(t, set()).update(ps)
            member.state = M_UNRELEASED if unreleased else M_STABLE
            member.assigned, member.pending_revocation = assigned, {}
            self._set_epoch(member, self.assignment_epoch)
        self.hold(member)

    @staticmethod
    def _set_epoch(member: ConsumerMember, epoch: int) -> None:
        if epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = epoch

    # -- validation -----------------------------------------------------------------------------
    @staticmethod
    def check_epoch(member: ConsumerMember, received: int, owned: Partitions | None) -> None:
        """Kafka's throwIfMemberEpochIsInvalid: a newer epoch than ours is a fenced zombie; an
        older one is accepted only as the previous epoch with no partition it may not own (a
        lost response)."""
        if received > member.member_epoch:
            raise FencedError(ErrorCode.FENCED_MEMBER_EPOCH,
                              f"epoch {received} is newer than the member's {member.member_epoch}")
        if received < member.member_epoch:
            if received != member.previous_member_epoch or (
                    owned is not None and not all(ps <= member.assigned.get(t, set())
                                                  for t, ps in owned.items())):
                raise FencedError(ErrorCode.FENCED_MEMBER_EPOCH,
                                  f"epoch {received} is older than the member's "
                                  f"{member.member_epoch}")

    # -- classic members ------------------------------------------------------------------------
    def can_become_classic(self) -> bool:
        """Every member (there is one at least) speaks the classic protocol, and they share a
        protocol a classic group can elect."""
        if not self.members or not all(m.classic for m in self.members.values()):
            return False
        first = next(iter(self.members.values())).classic
        return self.supports_classic_protocols([name for name, _ in first.protocols])

    def supports_classic_protocols(self, names: list[str]) -> bool:
        """Kafka's supportsClassicProtocols: a joining classic member shares a protocol with
        every classic member already in the group."""
        classic = [m.classic for m in self.members.values() if m.classic]
        return bool(names) and any(all(any(n == name for n, _ in c.protocols) for c in classic)
                                   for name in names)

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Kafka's waitingOnUnreleasedPartition: a target partition of `member` is still held
        by another member."""
        if member.state != M_UNRELEASED:
            return False
        return any(p not in member.assigned.get(t, ()) and self.owners.get((t, p)) not in
                   (None, member.member_id)
                   for t, ps in self.target.get(member.member_id, {}).items() for p in ps)

    def must_rejoin(self, member: ConsumerMember) -> bool:
        """A classic member's Heartbeat answers REBALANCE_IN_PROGRESS (Kafka's rule): the group
        moved on, it must revoke, or the partitions it waited for are free."""
        return (member.member_epoch < self.group_epoch or member.state == M_UNREVOKED
                or (member.state == M_UNRELEASED and not self.waiting_on_unreleased(member)))

    def check_commit_epoch(self, member_id: str, epoch: int) -> int:
        """OffsetCommit/OffsetFetch with member epochs (KIP-848): 0 or the error code."""
        member = self.members.get(member_id)
        if member is None:
            return int(ErrorCode.UNKNOWN_MEMBER_ID)
        if epoch != member.member_epoch:
            return int(ErrorCode.STALE_MEMBER_EPOCH)
        return 0


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def compile_regex(pattern: str) -> re.Pattern[str]:
    """A subscription regex. Kafka uses RE2/J; Python's `re` with `fullmatch` agrees on the
    common syntax (classes, alternation, quantifiers, anchors); RE2 refuses backreferences and
    lookaround, which `re` accepts."""
    compiled = _REGEX_CACHE.get(pattern)
    if compiled is None:
        compiled = _REGEX_CACHE[pattern] = re.compile(pattern)
    return compiled
