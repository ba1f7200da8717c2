"""Consumer-group administration: list, describe, delete groups; list, alter, delete, reset
their committed offsets (what `kafka-consumer-groups` does).

A mixin of `AsyncAdminClient` (it uses its `_cluster`, `_deadline`, `_retry`, `list_offsets`,
`describe_topics` and `_group_coordinators`). Group
requests go to each group's coordinator (FindCoordinator first, found again when it moves);
ListGroups goes to every broker, since each lists only the groups it coordinates. Offsets are
altered the way Kafka's tool does it, with an OffsetCommit outside any generation, which the
coordinator accepts only while the group has no members: resetting offsets under running
consumers would be overwritten by their next commit, so it is refused with a clear error.
"""
import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError
from minilog.connector.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    decode_assignment,
    decode_subscription,
)

from .admin_core import AdminCore, offset_of
from .connection import BrokerConnection
from .group_api import Coordinator, OffsetAndMetadata, _m, as_offsets, commit_offsets, fetch_offsets
from .types import BrokerInfo, Message, OffsetAndTimestamp, TopicDescription, TopicPartition

T = TypeVar("T")

INACTIVE_STATES = ("Empty", "Dead")
RESET_TARGETS = ("earliest", "latest", "timestamp", "offset", "shift")
MAX_KNOWN_COORDINATORS = 256


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str | None  # None from brokers older than ListGroups v4


_MEMBER_TYPES = {0: "classic", 1: "consumer"}  # ConsumerGroupDescribe v1's MemberType


class MemberDescription(NamedTuple):
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]  # consumer groups; () otherwise
    topics: tuple[str, ...] = ()  # the member's subscription (consumer groups)
    member_epoch: int | None = None  # KIP-848 groups only
    member_type: str | None = None   # KIP-848 groups: "classic" or "consumer" (None: unknown)


class GroupDescription(NamedTuple):
    group_id: str
    state: str           # Empty, PreparingRebalance, CompletingRebalance, Stable, Dead;
    #                      KIP-848 groups: Empty, Assigning, Reconciling, Stable, Dead
    protocol_type: str   # "consumer" for consumer groups
    protocol: str        # the assignor in use, e.g. "range" (the server's, for KIP-848)
    members: tuple[MemberDescription, ...]
    coordinator: BrokerInfo | None
    group_type: str = "classic"  # or "consumer": KIP-848's protocol
    group_epoch: int | None = None  # KIP-848 groups only


def _check(code: int, what: str) -> None:
    if code:
        raise KafkaError(code, what)


class GroupAdmin(AdminCore):
    """Group operations of the admin client (see the module docstring)."""
    _group_coordinators: dict[str, Coordinator]  # by group id, the most recently used last

    if TYPE_CHECKING:  # AsyncAdminClient's (admin.py), used here
        async def list_offsets(self, specs: Mapping[tuple[str, int], str | int],
                               isolation_level: str = "read_uncommitted",
                               timeout: float | None = None
                               ) -> dict[TopicPartition, OffsetAndTimestamp | None]: ...

        async def describe_topics(self, names: str | Iterable[str] | None = None,
                                  timeout: float | None = None
                                  ) -> dict[str, TopicDescription]: ...

    def _coordinator(self, group_id: str) -> Coordinator:
        """The group's Coordinator: it reaches the broker over the client's one connection
        to it, and only the last MAX_KNOWN_COORDINATORS groups' are remembered (a
        long-lived admin asked about any number of group ids holds neither a connection nor
        memory per id)."""
        coords = self._group_coordinators
        found = coords.pop(group_id, None) or Coordinator(self._cluster, group_id, shared=True)
        coords[group_id] = found  # the most recently used last
        while len(coords) > MAX_KNOWN_COORDINATORS:
            coords.pop(next(iter(coords))).close()
        return found

    def _close_group_coordinators(self) -> None:
        for c in self._group_coordinators.values():
            c.close()
        self._group_coordinators.clear()

    async def _on_coordinator(self, group_id: str, fn: Callable[[BrokerConnection], Awaitable[T]],
                              timeout: float | None, what: str) -> T:
        await self._cluster.ensure_bootstrapped()
        return await self._coordinator(group_id).call(fn, self._deadline(timeout), what, "admin")

    async def list_groups(self, states: Iterable[str] | None = None,
                          timeout: float | None = None) -> list[GroupListing]:
        """Every group of the cluster (optionally only those in `states`), sorted by id."""
        wanted = list(states or ())  # once: each broker's request, and the filter below
        await self._cluster.ensure_bootstrapped()
        await self._cluster.refresh()
        Req = _m(ApiKey.LIST_GROUPS)

        async def one(node: int) -> list[GroupListing]:
            async def attempt() -> list[GroupListing]:
                conn = await self._cluster.connection(node)
                resp = await conn.send(ApiKey.LIST_GROUPS, Req(
                    states_filter=wanted, types_filter=[]))
                _check(resp.error_code, f"ListGroups on broker {node}")
                return [GroupListing(g.group_id, g.protocol_type,
                                     g.group_state if conn.version_for(ApiKey.LIST_GROUPS) >= 4
                                     else None) for g in resp.groups]
            return await self._retry(attempt, timeout, "ListGroups")
        found = await asyncio.gather(*(one(n) for n in self._cluster.brokers))
        out = {g.group_id: g for listing in found for g in listing}
        return [out[k] for k in sorted(out)
                if not wanted or out[k].state is None or out[k].state in wanted]

    async def describe_groups(self, group_ids: str | Iterable[str], timeout: float | None = None
                              ) -> dict[str, GroupDescription]:
        """{group_id: GroupDescription}; consumer groups' member assignments decoded. As Kafka's
        admin client: ConsumerGroupDescribe first (KIP-848 groups), DescribeGroups for a group
        it does not know (classic groups) or from a broker without it."""
        ids = [group_ids] if isinstance(group_ids, str) else list(group_ids)
        out = {}
        for gid in ids:
            async def attempt(conn: BrokerConnection, gid: str = gid) -> tuple[str, Message]:
                if conn.supports(ApiKey.CONSUMER_GROUP_DESCRIBE):
                    resp = await conn.send(ApiKey.CONSUMER_GROUP_DESCRIBE,
                                           _m(ApiKey.CONSUMER_GROUP_DESCRIBE)(
                                               group_ids=[gid],
                                               include_authorized_operations=False))
                    g = resp.groups[0]
                    if g.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
                        _check(g.error_code, f"describing group {gid!r}")
                        return "consumer", g
                resp = await conn.send(ApiKey.DESCRIBE_GROUPS, _m(ApiKey.DESCRIBE_GROUPS)(
                    groups=[gid], include_authorized_operations=False))
                g = resp.groups[0]
                _check(g.error_code, f"describing group {gid!r}")
                return "classic", g
            kind, g = await self._on_coordinator(gid, attempt, timeout, "DescribeGroups")
            if kind == "consumer":
                out[gid] = self._consumer_group(gid, g)
                continue
            members = []
            for m in g.members:
                assignment: tuple[TopicPartition, ...] = ()
                topics: tuple[str, ...] = ()
                if g.protocol_type == CONSUMER_PROTOCOL_TYPE:
                    try:
                        assignment = decode_assignment(m.member_assignment).partitions
                        if m.member_metadata:
                            topics = decode_subscription(m.member_metadata).topics
                    except Exception:  # noqa: BLE001, S110 - a foreign member's bytes: show none
                        pass
                members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                                                 m.client_host, tuple(assignment), tuple(topics)))
            out[gid] = GroupDescription(gid, g.group_state, g.protocol_type, g.protocol_data,
                                        tuple(members), self._coordinator(gid).node)
        return out

    def _consumer_group(self, gid: str, g: Message) -> GroupDescription:
        """A ConsumerGroupDescribe answer as a GroupDescription."""
        members = tuple(MemberDescription(
            m.member_id, m.instance_id, m.client_id, m.client_host,
            tuple(TopicPartition(tp.topic_name, p) for tp in m.assignment.topic_partitions
                  for p in tp.partitions),
            tuple(m.subscribed_topic_names), m.member_epoch, _MEMBER_TYPES.get(m.member_type))
            for m in g.members)
        return GroupDescription(gid, g.group_state, CONSUMER_PROTOCOL_TYPE, g.assignor_name,
                                members, self._coordinator(gid).node, "consumer", g.group_epoch)

    async def delete_groups(self, group_ids: str | Iterable[str],
                            timeout: float | None = None) -> None:
        """Delete groups (and their offsets); each must be empty."""
        ids = [group_ids] if isinstance(group_ids, str) else list(group_ids)
        for gid in ids:
            async def attempt(conn: BrokerConnection, gid: str = gid) -> None:
                resp = await conn.send(ApiKey.DELETE_GROUPS,
                                       _m(ApiKey.DELETE_GROUPS)(groups_names=[gid]))
                code = resp.results[0].error_code
                if code == ErrorCode.NON_EMPTY_GROUP:
                    raise KafkaError(code, f"group {gid!r} still has members; stop them first")
                _check(code, f"deleting group {gid!r}")
            await self._on_coordinator(gid, attempt, timeout, "DeleteGroups")

    async def list_group_offsets(
            self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None,
            timeout: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """{tp: OffsetAndMetadata} committed by the group (all its partitions when None;
        requested partitions without a commit map to None)."""
        tps = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        got = await self._on_coordinator(
            group_id, lambda conn: fetch_offsets(conn, group_id, tps), timeout, "OffsetFetch")
        return dict(sorted((tp, om) for tp, om in got.items()
                           if om is not None or partitions is not None))

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[Any, Any],
                                  timeout: float | None = None
                                  ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Commit {tp: offset | OffsetAndMetadata} for an inactive group."""
        committed = as_offsets(offsets)

        async def attempt(conn: BrokerConnection) -> None:
            codes = await commit_offsets(conn, group_id, committed)
            for tp, code in codes.items():
                if code == ErrorCode.UNKNOWN_MEMBER_ID:
                    raise KafkaError(code, f"group {group_id!r} has active members: offsets "
                                     "can only be changed while it is empty")
                _check(code, f"committing {tp} for group {group_id!r}")
        await self._on_coordinator(group_id, attempt, timeout, "OffsetCommit")
        return committed

    async def delete_group_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]],
                                   timeout: float | None = None) -> None:
        """Remove the group's committed offsets of `partitions` (not of subscribed topics)."""
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        T, P = _m(ApiKey.OFFSET_DELETE, "topics"), _m(ApiKey.OFFSET_DELETE, "topics", "partitions")
        body = _m(ApiKey.OFFSET_DELETE)(group_id=group_id, topics=[
            T(name=t, partitions=[P(partition_index=p) for p in ps]) for t, ps in by_topic.items()])

        async def attempt(conn: BrokerConnection) -> None:
            resp = await conn.send(ApiKey.OFFSET_DELETE, body)
            _check(resp.error_code, f"deleting offsets of group {group_id!r}")
            for t in resp.topics:
                for p in t.partitions:
                    _check(p.error_code, f"deleting the offset of {t.name}-{p.partition_index} "
                           f"for group {group_id!r}")
        await self._on_coordinator(group_id, attempt, timeout, "OffsetDelete")

    async def reset_group_offsets(self, group_id: str, topic: str, to: str = "earliest",
                                  value: int | None = None,
                                  partitions: Iterable[int] | None = None, dry_run: bool = False,
                                  timeout: float | None = None) -> dict[TopicPartition, int]:
        """Move the group's offsets of `topic` (`partitions`, default all), as
        `kafka-consumer-groups --reset-offsets` does; {tp: new offset}, sorted.

        `to`: "earliest", "latest", "timestamp" (`value` ms: first offset at or after it,
        else the log end), "offset" (`value`, clamped to the log's range) or "shift" (`value`
        added to the committed offset, clamped). Refused while the group has members.
        `dry_run` computes without committing.
        """
        if to not in RESET_TARGETS:
            raise ValueError(f"reset target must be one of {', '.join(RESET_TARGETS)}")
        if to != "earliest" and to != "latest" and value is None:
            raise ValueError(f"reset to {to} needs a value")
        state = (await self.describe_groups([group_id], timeout))[group_id].state
        if state not in INACTIVE_STATES:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP,
                             f"offsets of group {group_id!r} can only be reset while it is "
                             f"inactive, but its state is {state}")
        known = [p.partition for p in (await self.describe_topics([topic], timeout))[topic].partitions]
        wanted = known if partitions is None else sorted(set(partitions))
        missing = sorted(set(wanted) - set(known))
        if missing:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {topic!r} has no partition {missing[0]}")
        tps = [TopicPartition(topic, p) for p in wanted]
        first = await self.list_offsets({tp: "earliest" for tp in tps}, timeout=timeout)
        last = await self.list_offsets({tp: "latest" for tp in tps}, timeout=timeout)
        lo = {tp: offset_of(first[tp], tp) for tp in tps}
        hi = {tp: offset_of(last[tp], tp) for tp in tps}
        amount = 0 if value is None else int(value)  # None only for earliest and latest
        if to in ("earliest", "latest"):
            target = lo if to == "earliest" else hi
        elif to == "timestamp":
            found = await self.list_offsets({tp: amount for tp in tps}, timeout=timeout)
            target = {tp: at.offset if (at := found.get(tp)) else hi[tp] for tp in tps}
        elif to == "offset":
            target = dict.fromkeys(tps, amount)
        else:
            current = await self.list_group_offsets(group_id, tps, timeout)
            committed = {tp: om for tp in tps if (om := current.get(tp)) is not None}
            none = [tp for tp in tps if tp not in committed]
            if none:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"cannot shift the offset of {none[0]}: group {group_id!r} "
                                 "has no committed offset for it")
            target = {tp: committed[tp].offset + amount for tp in tps}
        target = {tp: min(max(o, lo[tp]), hi[tp]) for tp, o in target.items()}
        if not dry_run:
            await self.alter_group_offsets(group_id, target, timeout)
        return dict(sorted(target.items()))
