"""The partition assignors, as Kafka names them, over the consumer protocol's payloads.

The payloads (`ConsumerProtocolSubscription` in JoinGroup, `ConsumerProtocolAssignment` in
SyncGroup) are in `minilog.connector.protocol.consumer_protocol`, shared with the broker, whose
KIP-848 coordinator reads and writes them for classic members of a consumer group; they are
re-exported here for the client's modules.

Assignors are pure functions of (members' subscriptions, partitions per topic), so they are
tested without a broker. Names and algorithms follow Java's: `range` (per topic, consecutive
ranges to the members subscribed to it, sorted), `roundrobin` (all partitions dealt in turn),
and `cooperative-sticky` (balanced, keeps what members own, and never hands a partition from
one member straight to another in one rebalance: KIP-429's two phases).
"""
import abc
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, NamedTuple

from minilog.connector.protocol.consumer_protocol import (  # noqa: F401 - re-exported
    CONSUMER_PROTOCOL_TYPE,
    LATEST_VERSION,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

from .types import TopicPartition

EAGER, COOPERATIVE = "eager", "cooperative"
# {member id: the partitions it gets}
Assignments = dict[str, list[TopicPartition]]
_I32 = struct.Struct(">i")


class Member(NamedTuple):
    """A group member as the leader sees it in the JoinGroup response."""
    member_id: str
    instance_id: str | None
    subscription: Subscription


# ---- assignors -----------------------------------------------------------------------------
def member_order(member: Member) -> tuple[int, str]:
    """Java's MemberInfo order: static members (by instance id) first, then by member id."""
    return (0, member.instance_id) if member.instance_id else (1, member.member_id)


class Assignor(abc.ABC):
    """Base: subclasses set `name`, `protocols` and implement `assign`."""
    name: ClassVar[str | None] = None
    protocols: ClassVar[tuple[str, ...]] = (EAGER,)  # rebalance protocols it supports

    def subscription(self, topics: Iterable[str], owned: Iterable[TopicPartition] = (),
                     generation: int = -1, rack: str | None = None) -> Subscription:
        """The Subscription this member sends with this assignor's name."""
        return Subscription(tuple(topics), None, tuple(owned), generation, rack)

    @abc.abstractmethod
    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Sequence[Member]) -> Assignments:
        """{topic: partition count}, [Member] -> {member_id: [TopicPartition]} (every member)."""


class RangeAssignor(Assignor):
    """Per topic, sorted members subscribed to it get consecutive ranges, the first ones one
    more partition when the count does not divide (Java's RangeAssignor without racks)."""
    name = "range"

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Sequence[Member]) -> Assignments:
        out: Assignments = {m.member_id: [] for m in members}
        for topic in sorted(partitions_per_topic):
            subscribers = sorted((m for m in members if topic in m.subscription.topics),
                                 key=member_order)
            if not subscribers:
                continue
            n = partitions_per_topic[topic]
            per, extra = divmod(n, len(subscribers))
            for i, m in enumerate(subscribers):
                start = i * per + min(i, extra)
                out[m.member_id].extend(TopicPartition(topic, p)
                                        for p in range(start, start + per + (i < extra)))
        return out


class RoundRobinAssignor(Assignor):
    """All partitions sorted by (topic, partition), dealt to the sorted members in turn,
    skipping members not subscribed to the partition's topic (Java's RoundRobinAssignor)."""
    name = "roundrobin"

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Sequence[Member]) -> Assignments:
        out: Assignments = {m.member_id: [] for m in members}
        ring = sorted(members, key=member_order)
        if not ring:
            return out
        topics = sorted({t for m in members for t in m.subscription.topics
                         if t in partitions_per_topic})
        i = 0
        for topic in topics:
            for p in range(partitions_per_topic[topic]):
                while topic not in ring[i % len(ring)].subscription.topics:
                    i += 1
                out[ring[i % len(ring)].member_id].append(TopicPartition(topic, p))
                i += 1
        return out


class CooperativeStickyAssignor(Assignor):
    """Balanced and sticky, for incremental (cooperative) rebalancing.

    Members keep the partitions they own while the group stays balanced (partition counts
    differing by at most one among members that could take each other's partitions); free
    partitions go to the least loaded eligible member; then partitions move from the most to
    the least loaded until balanced. A partition that would move from its current owner to
    another member is left out of this round instead: the owner revokes it and rejoins, and
    the next rebalance hands it out, so no partition is ever consumed by two members at once.
    The generation travels in the v2+ field and, for older readers, as Java's user data.
    """
    name = "cooperative-sticky"
    protocols = (EAGER, COOPERATIVE)

    def subscription(self, topics: Iterable[str], owned: Iterable[TopicPartition] = (),
                     generation: int = -1, rack: str | None = None) -> Subscription:
        return Subscription(tuple(topics), _I32.pack(generation), tuple(owned), generation, rack)

    @staticmethod
    def generation(sub: Subscription) -> int:
        if sub.version >= 2:
            return int(sub.generation_id)
        if sub.user_data is not None and len(sub.user_data) == 4:
            return int(_I32.unpack(sub.user_data)[0])
        return -1

    def assign(self, partitions_per_topic: Mapping[str, int],
               members: Sequence[Member]) -> Assignments:
        members = sorted(members, key=member_order)
        ids = [m.member_id for m in members]
        subs = {m.member_id: {t for t in m.subscription.topics if t in partitions_per_topic}
                for m in members}
        rank = {mid: i for i, mid in enumerate(ids)}
        owner = self._owners(partitions_per_topic, members, subs)
        out: Assignments = {mid: [] for mid in ids}
        for tp, mid in sorted(owner.items()):
            out[mid].append(tp)
        free = [TopicPartition(t, p) for t in sorted({t for s in subs.values() for t in s})
                for p in range(partitions_per_topic[t]) if TopicPartition(t, p) not in owner]
        eligible = {tp: [mid for mid in ids if tp.topic in subs[mid]] for tp in free}
        for tp in sorted(free, key=lambda tp: (len(eligible[tp]), tp)):
            best = min(eligible[tp], key=lambda mid: (len(out[mid]), rank[mid]))
            out[best].append(tp)
        self._balance(out, subs, owner, rank)
        for mid, tps in out.items():  # KIP-429: no direct hand-over in one rebalance
            out[mid] = sorted(tp for tp in tps if owner.get(tp, mid) == mid)
        return out

    def _owners(self, partitions_per_topic: Mapping[str, int], members: Sequence[Member],
                subs: Mapping[str, set[str]]) -> dict[TopicPartition, str]:
        """{tp: member} from the members' claims: the highest generation wins; two claims of
        the same generation cancel out (neither keeps the partition)."""
        claims: dict[TopicPartition, tuple[int, str]] = {}
        contested: set[TopicPartition] = set()
        for m in members:
            gen = self.generation(m.subscription)
            for tp in m.subscription.owned_partitions:
                tp = TopicPartition(*tp)
                if tp.topic not in subs[m.member_id] or \
                        not 0 <= tp.partition < partitions_per_topic[tp.topic]:
                    continue
                prev = claims.get(tp)
                if prev is None or gen > prev[0]:
                    claims[tp] = (gen, m.member_id)
                    contested.discard(tp)
                elif gen == prev[0] and prev[1] != m.member_id:
                    contested.add(tp)
        return {tp: mid for tp, (_, mid) in claims.items() if tp not in contested}

    @staticmethod
    def _balance(out: Assignments, subs: Mapping[str, set[str]],
                 owner: Mapping[TopicPartition, str], rank: Mapping[str, int]) -> None:
        """Move partitions from the most to the least loaded member while some eligible pair
        differs by two or more. Each move lowers the sum of squared loads, so this ends."""
        while True:
            order = sorted(out, key=lambda mid: (len(out[mid]), rank[mid]))
            moved = False
            for a in reversed(order):
                for b in order:
                    if len(out[a]) <= len(out[b]) + 1:
                        break
                    movable = [tp for tp in out[a] if tp.topic in subs[b]]
                    if movable:  # rather what `a` was just given than what it already owned
                        tp = min(movable, key=lambda tp: (owner.get(tp) == a, tp))
                        out[a].remove(tp)
                        out[b].append(tp)
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                return


ASSIGNORS = {a.name: a for a in (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)}


def make_assignors(names: Iterable[str]) -> list[Assignor]:
    """Assignor instances for `partition.assignment.strategy` names, in preference order."""
    out: list[Assignor] = []
    for name in names:
        cls = ASSIGNORS.get(name.strip().lower())
        if cls is None:
            raise ValueError(f"unknown partition.assignment.strategy {name!r} "
                             f"(one of {', '.join(ASSIGNORS)})")
        out.append(cls())
    if not out:
        raise ValueError("partition.assignment.strategy names no assignor")
    return out


def rebalance_protocol(assignors: Iterable[Assignor]) -> str:
    """COOPERATIVE only when every configured assignor supports it (Java's rule), else EAGER."""
    return COOPERATIVE if all(COOPERATIVE in a.protocols for a in assignors) else EAGER
