"""One consumer group of Kafka's classic protocol: its members, generation and committed offsets.

This is the state and the rules that need no clock or I/O (Kafka's GroupMetadata and
MemberMetadata): state transitions, protocol selection by vote, leader choice, static member
bookkeeping, which members have rejoined, and which offsets have expired. Timers, futures
resolution order and persistence live in `group_coordinator.py`.
"""
from typing import NamedTuple

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
    members: tuple = ()          # (member id, group instance id, metadata) for the leader
    skip_assignment: bool = False


class SyncResult(NamedTuple):
    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


class Member:
    """A member as the coordinator sees it; `join_future`/`sync_future` are its parked requests."""

    def __init__(self, member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                 session_timeout_ms, protocol_type, protocols):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id, self.client_host = client_id, client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols            # [(name, metadata bytes)], in preference order
        self.assignment = b""
        self.join_future = None
        self.sync_future = None
        self.heartbeat_timer = None
        self.is_new = False

    def __repr__(self):
        return f"Member({self.member_id!r}, instance={self.group_instance_id!r})"

    def matches(self, protocols):
        return self.protocols == protocols

    def metadata(self, protocol):
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def vote(self, candidates):
        """This member's most preferred protocol among those every member supports."""
        return next(name for name, _ in self.protocols if name in candidates)


class Group:
    def __init__(self, group_id, now_ms, state=EMPTY):
        self.group_id = group_id
        self.state = state
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type = None
        self.protocol_name = None
        self.leader_id = None
        self.members = {}                # member id -> Member, in join order
        self.pending_members = set()     # ids handed out with MEMBER_ID_REQUIRED, not joined yet
        self.static_members = {}         # group instance id -> member id
        self.pending_sync = set()        # members of this generation that have not synced yet
        self.offsets = {}                # (topic, partition) -> OffsetAndMetadata
        self.offsets_written_at = {}     # (topic, partition) -> offset of the batch it came in
        self.subscribed = None           # topics the members consume, None when unknown
        self.new_member_added = False    # a member joined during the initial rebalance delay
        self.initial_join = False        # the pending join completes on the initial-delay timer
        self.persisted = False           # a metadata record for this group may be in the log
        self.join_timer = self.sync_timer = None
        self.pending_timers = {}         # pending member id -> timer

    def __repr__(self):
        return f"Group({self.group_id!r}, {self.state}, generation={self.generation_id})"

    # -- state ----------------------------------------------------------------------------------
    def transition(self, state, now_ms):
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: cannot go from {self.state} to {state}")
        self.state = state
        self.state_timestamp = now_ms

    @property
    def can_rebalance(self):
        return self.state in _VALID_PREVIOUS[PREPARING_REBALANCE]

    def is_leader(self, member_id):
        return self.leader_id == member_id

    @property
    def rebalance_timeout_ms(self):
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- membership -----------------------------------------------------------------------------
    def add(self, member, join_future):
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        member.join_future = join_future
        self.pending_members.discard(member.member_id)

    def remove(self, member_id):
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id, old_id, new_id):
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

    def validate_member(self, member_id, instance_id):
        """Kafka's validateCurrentMember: an error code, or 0 for a current member."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return FENCED_INSTANCE_ID
        return 0 if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def has_all_members_joined(self):
        return not self.pending_members and all(m.join_future is not None
                                                for m in self.members.values())

    def maybe_elect_new_joined_leader(self):
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
    def supports_protocols(self, protocol_type, names):
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        return any(all(any(n == name for n, _ in m.protocols) for m in self.members.values())
                   for name in names)

    def select_protocol(self):
        """The protocol every member supports that most members prefer (Kafka's vote)."""
        members = list(self.members.values())
        candidates = [name for name, _ in members[0].protocols
                      if all(any(n == name for n, _ in m.protocols) for m in members[1:])]
        votes = {}
        for m in members:
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=votes.get)

    def init_next_generation(self, now_ms):
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition(EMPTY, now_ms)
        self.subscribed = self.subscribed_topics()
        self.pending_sync.clear()

    def current_member_metadata(self):
        return tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self.members.values())

    def subscribed_topics(self):
        """Topics the members subscribe to (consumer protocol only; None when unknown)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        topics = set()
        for m in self.members.values():
            data = m.metadata(self.protocol_name)
            found = subscription_topics(data) if data else set()
            if found is None:
                return None
            topics |= found
        return topics

    def is_subscribed_to_topic(self, topic):
        return self.subscribed is not None and topic in self.subscribed

    # -- offsets --------------------------------------------------------------------------------
    def expired_offsets(self, now_ms, retention_ms):
        """Offsets past retention, as Kafka decides (GroupMetadata.removeExpiredOffsets).

        Empty group: retention counts from when it became empty (or the commit, for groups
        loaded without a state timestamp). Stable consumer group with known subscriptions: offsets
        of topics no member subscribes to count from their commit. Groups without a protocol
        (offset storage only) count from each commit. Explicit expire timestamps (OffsetCommit
        v2-4) win over all of these.
        """
        if self.protocol_type is not None and self.state == EMPTY:
            def base(om):
                return self.state_timestamp if self.state_timestamp >= 0 else om.commit_timestamp
            keep_topics = set()
        elif (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed is not None
              and self.state == STABLE):
            def base(om):
                return om.commit_timestamp
            keep_topics = self.subscribed
        elif self.protocol_type is None:
            def base(om):
                return om.commit_timestamp
            keep_topics = set()
        else:
            return []
        return offsets_past_retention(self.offsets, keep_topics, base, now_ms, retention_ms)


def offsets_past_retention(offsets, keep_topics, base, now_ms, retention_ms):
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


def invoke_join(member, result):
    """Answer the member's parked JoinGroup, if any; True if there was one."""
    fut, member.join_future = member.join_future, None
    if fut is not None and not fut.done():
        fut.set_result(result)
        return True
    return fut is not None


def invoke_sync(member, result):
    fut, member.sync_future = member.sync_future, None
    if fut is not None and not fut.done():
        fut.set_result(result)
        return True
    return fut is not None
