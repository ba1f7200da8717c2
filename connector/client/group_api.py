"""Talking to a group's coordinator: finding it, and committing and fetching group offsets.

Shared by the consumer's group membership and the admin client. `Coordinator` finds the broker
that coordinates a group (FindCoordinator) and keeps dedicated connections to it, one per
*channel*: a JoinGroup may park on the broker for a whole rebalance, and the broker serves one
request per connection at a time, so the consumer keeps membership traffic apart from offset
commits (and both apart from fetches), as the Java client does with its coordinator node.
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and broken connections make it find the
coordinator again; `Coordinator.call` retries those until a deadline.
"""
import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

from .cluster import Cluster
from .connection import BrokerConnection, message_class
from .tasks import retrieve_exception
from .types import BrokerInfo, KafkaConnectionError, KafkaTimeoutError, TopicPartition

T = TypeVar("T")

log = logging.getLogger("minilog.client")

GROUP_KEY_TYPE, TXN_KEY_TYPE = 0, 1
# Errors meaning "ask someone else / later": the coordinator moved, is loading, or is gone.
COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
RETRY_LATER = COORDINATOR_MOVED | {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                   ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
                                   ErrorCode.UNSTABLE_OFFSET_COMMIT}


class OffsetAndMetadata(NamedTuple):
    """A committed position: the next offset to consume, with the commit's metadata string and
    the leader epoch of the last consumed record (-1 unknown)."""
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class GroupOwner(Protocol):
    """The consumer core as its group membership reaches it (the seam group.py describes)."""

    @property
    def group_face(self) -> object:
        """What rebalance callbacks get as their first argument (Consumer or AsyncConsumer)."""

    @property
    def group_defer_callbacks(self) -> bool:
        """True: close() too leaves callbacks to the poll thread (the sync Consumer's)."""

    def group_assign(self, tps: Sequence[TopicPartition]) -> None: ...
    def group_unassign(self, tps: Iterable[TopicPartition]) -> None: ...

    def group_positions(self, tps: Iterable[TopicPartition]
                        ) -> dict[TopicPartition, OffsetAndMetadata]: ...

    def group_notify(self) -> None: ...


def _m(api_key: int, *path: str) -> Any:
    return message_class(request(api_key), *path)


class Coordinator:
    """The coordinator of one group (or, with `key_type` TXN_KEY_TYPE, of one transactional
    id), found on demand, reached over dedicated connections; with `shared`, over the
    cluster's one connection to that broker instead (the admin client's way, as Kafka's: an
    admin asking about many groups must not hold a connection per group)."""

    def __init__(self, cluster: Cluster, group_id: str, key_type: int = GROUP_KEY_TYPE,
                 shared: bool = False) -> None:
        self.cluster, self.group_id, self.key_type = cluster, group_id, key_type
        self.shared = shared
        self.node: BrokerInfo | None = None  # once found
        self._conns: dict[str, BrokerConnection] = {}  # by channel
        self._finding: asyncio.Future[BrokerInfo] | None = None

    @property
    def known(self) -> bool:
        return self.node is not None

    def mark_unknown(self, why: str = "") -> None:
        if self.node is not None:
            log.info("group %s: coordinator %s lost%s", self.group_id, self.node.node_id,
                     f" ({why})" if why else "")
        self.node = None
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    async def find(self) -> BrokerInfo:
        """FindCoordinator through any broker; concurrent callers share one lookup."""
        finding = self._finding
        if finding is None:
            finding = self._finding = asyncio.ensure_future(self._find())
            finding.add_done_callback(lambda _: setattr(self, "_finding", None))
            finding.add_done_callback(retrieve_exception)
        return await asyncio.shield(finding)

    async def _find(self) -> BrokerInfo:
        conn = await self.cluster.any_connection()
        version = conn.version_for(ApiKey.FIND_COORDINATOR)
        Req = _m(ApiKey.FIND_COORDINATOR)
        if version >= 4:
            resp = await conn.send(ApiKey.FIND_COORDINATOR, Req(
                key_type=self.key_type, coordinator_keys=[self.group_id]), version)
            c = resp.coordinators[0]
            code, msg, node_id, host, port = c.error_code, c.error_message, c.node_id, c.host, c.port
        else:
            resp = await conn.send(ApiKey.FIND_COORDINATOR, Req(
                key=self.group_id, key_type=self.key_type), version)
            code, msg, node_id = resp.error_code, resp.error_message, resp.node_id
            host, port = resp.host, resp.port
        if code:
            raise KafkaError(code, f"finding the coordinator of group {self.group_id!r}"
                             + (f": {msg}" if msg else ""))
        self.node = BrokerInfo(node_id, host, port)
        return self.node

    async def connection(self, channel: str = "default") -> BrokerConnection:
        """The connection of `channel` to the coordinator (finding it first if needed)."""
        conn = self._conns.get(channel)
        if conn is not None and conn.connected:
            return conn
        node = self.node or await self.find()
        if self.shared:
            try:
                return await self.cluster.connection_to(node)
            except KafkaError:
                self.mark_unknown("cannot connect")
                raise
        conn = self.cluster._new_connection(node.host, node.port, node.node_id)
        try:
            await conn.connect()
        except KafkaError:
            self.mark_unknown("cannot connect")
            raise
        if self.node is None or self.node.node_id != node.node_id:
            conn.close()  # lost or moved while we connected
            raise KafkaConnectionError(f"coordinator of group {self.group_id!r} moved")
        old = self._conns.get(channel)
        if old is not None and old.connected:
            conn.close()  # a concurrent caller connected first: share its connection
            return old
        self._conns[channel] = conn
        return conn

    async def call(self, fn: Callable[[BrokerConnection], Awaitable[T]], deadline: float,
                   what: str, channel: str = "default") -> T:
        """`await fn(conn)` against the coordinator, retrying coordinator moves, loading,
        timeouts and lost connections until `deadline` (monotonic seconds)."""
        backoff = self.cluster.config.seconds("retry.backoff.ms")
        while True:
            try:
                await self.cluster.ensure_bootstrapped()
                return await fn(await self.connection(channel))
            except KafkaError as e:
                if isinstance(e, KafkaConnectionError) or e.code in COORDINATOR_MOVED:
                    self.mark_unknown(str(e))
                elif e.code not in RETRY_LATER and not isinstance(e, KafkaTimeoutError):
                    raise
                if time.monotonic() + backoff >= deadline:
                    if isinstance(e, KafkaTimeoutError):
                        raise
                    raise KafkaTimeoutError(f"{what} for group {self.group_id!r} did not "
                                            f"complete in time: {e}") from None
                log.debug("group %s: %s failed (%s), retrying", self.group_id, what, e)
                await asyncio.sleep(backoff)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


# ---- offsets ---------------------------------------------------------------------------------
def as_offsets(offsets: Mapping[Any, Any]) -> dict[TopicPartition, OffsetAndMetadata]:
    """{tp: offset | OffsetAndMetadata | (offset, metadata[, epoch])} -> {TopicPartition: OAM}."""
    out = {}
    for tp, o in offsets.items():
        if isinstance(o, OffsetAndMetadata):
            om = o
        elif isinstance(o, tuple):
            om = OffsetAndMetadata(*o)
        else:
            om = OffsetAndMetadata(int(o))
        if om.offset < 0:
            raise ValueError(f"cannot commit negative offset {om.offset} for {TopicPartition(*tp)}")
        out[TopicPartition(*tp)] = om
    return out


async def commit_offsets(conn: BrokerConnection, group_id: str,
                         offsets: Mapping[TopicPartition, OffsetAndMetadata],
                         generation: int = -1, member_id: str = "",
                         instance_id: str | None = None) -> dict[TopicPartition, int]:
    """One OffsetCommit; {tp: error code} (0 for committed)."""
    version = conn.version_for(ApiKey.OFFSET_COMMIT)
    Req, T, P = (_m(ApiKey.OFFSET_COMMIT), _m(ApiKey.OFFSET_COMMIT, "topics"),
                 _m(ApiKey.OFFSET_COMMIT, "topics", "partitions"))
    topics: dict[str, list[Any]] = {}
    for tp, om in offsets.items():
        topics.setdefault(tp.topic, []).append(P(
            partition_index=tp.partition, committed_offset=om.offset,
            committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata))
    resp = await conn.send(ApiKey.OFFSET_COMMIT, Req(
        group_id=group_id, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance_id,
        topics=[T(name=t, partitions=ps) for t, ps in topics.items()]), version)
    return {TopicPartition(t.name, p.partition_index): p.error_code
            for t in resp.topics for p in t.partitions}


async def fetch_offsets(conn: BrokerConnection, group_id: str,
                        partitions: Iterable[tuple[str, int]] | None = None,
                        require_stable: bool = False
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """One OffsetFetch: {tp: OffsetAndMetadata or None}; `partitions` None: every partition the
    group has offsets for. A group-level or partition error raises KafkaError."""
    version = conn.version_for(ApiKey.OFFSET_FETCH)
    wanted: dict[str, list[int]] | None = None
    if partitions is not None:
        partitions = list(partitions)  # read twice: for the request and for the answer
        wanted = {}
        for tp in partitions:
            wanted.setdefault(tp[0], []).append(tp[1])
    if version >= 8:
        G, T = _m(ApiKey.OFFSET_FETCH, "groups"), _m(ApiKey.OFFSET_FETCH, "groups", "topics")
        topics = None if wanted is None else [T(name=t, partition_indexes=p)
                                              for t, p in wanted.items()]
        body = _m(ApiKey.OFFSET_FETCH)(groups=[G(group_id=group_id, member_id=None,
                                                 topics=topics)],
                                       require_stable=require_stable)
    else:
        T = _m(ApiKey.OFFSET_FETCH, "topics")
        if wanted is None and version < 2:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "fetching all offsets needs OffsetFetch v2")
        body = _m(ApiKey.OFFSET_FETCH)(group_id=group_id, require_stable=require_stable,
                                       topics=None if wanted is None else [
                                           T(name=t, partition_indexes=p) for t, p in wanted.items()])
    resp = await conn.send(ApiKey.OFFSET_FETCH, body, version)
    if version >= 8:
        g = resp.groups[0]
        code, topics = g.error_code, g.topics
    else:
        code, topics = resp.error_code, resp.topics
    if code:
        raise KafkaError(code, f"fetching offsets of group {group_id!r}")
    out: dict[TopicPartition, OffsetAndMetadata | None] = {}
    for t in topics:
        for p in t.partitions:
            if p.error_code:
                raise KafkaError(p.error_code, f"fetching offset of {t.name}-{p.partition_index} "
                                 f"for group {group_id!r}")
            out[TopicPartition(t.name, p.partition_index)] = None if p.committed_offset < 0 else \
                OffsetAndMetadata(p.committed_offset, p.metadata or "", p.committed_leader_epoch)
    for tp in partitions or ():
        out.setdefault(TopicPartition(*tp), None)
    return out
