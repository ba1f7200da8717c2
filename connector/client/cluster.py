"""What the client knows about the cluster: brokers, topics, partition leaders, connections.

One `Cluster` per client. It bootstraps from any server listed in `bootstrap.servers`, keeps one
connection per broker (reused by every request to that broker), answers "who leads this
partition" from the last Metadata response, and refreshes that picture when a caller reports a
stale leader (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE) or a
broken connection. Concurrent refreshes are coalesced: callers that asked while one was running
share its answer.

A client that never reached the cluster fails fast (`KafkaConnectionError` naming every server
it tried) so a wrong address is reported at once; after the first success, connection failures
are treated as transient and retried by the callers within their own deadlines.
"""
import asyncio
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request
from minilog.connector.protocol.primitives import ZERO_UUID

from .config import Config
from .connection import BrokerConnection
from .security import AuthenticationError, client_security
from .tasks import retrieve_exception
from .types import BrokerInfo, KafkaConnectionError, Message, PartitionInfo, TopicDescription

log = logging.getLogger("minilog.client")

# Partition errors after which the leader picture is stale.
STALE_METADATA = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_CONTROLLER,
})


# A connection's key: a broker's node id, or ("bootstrap", host, port) before its id is known.
ConnKey = int | tuple[str, str, int]


class Cluster:
    def __init__(self, config: Config, allow_auto_create: bool = False) -> None:
        self.config = config
        self.allow_auto_create = allow_auto_create
        self.brokers: dict[int, BrokerInfo] = {}         # by node id
        self.topics: dict[str, TopicDescription] = {}    # by name
        self.topic_errors: dict[str, ErrorCode] = {}     # unknown topic, authorization, ...
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.has_metadata = False
        self.last_refresh = 0.0
        self._leaders: dict[tuple[str, int], int] = {}  # (topic, partition) -> node_id
        # topic -> sorted partition ids (shared lists: do not mutate)
        self._ids: dict[str, list[int]] = {}
        self._available: dict[str, list[int]] = {}  # topic -> partition ids that have a leader
        self._names_by_id: dict[Any, str] = {}
        self._conns: dict[ConnKey, BrokerConnection] = {}
        self._connecting: dict[ConnKey, asyncio.Task[BrokerConnection]] = {}
        self._failed_at: dict[ConnKey, float] = {}  # monotonic time of the last failed connect
        self._wanted: set[str] = set()      # topics whose metadata we keep current
        self._lock = asyncio.Lock()
        self._generation = 0
        self._requested: set[str] | None = set()  # topics the last refresh asked for (None: all)
        self.needs_refresh = False
        self._security = client_security(config)  # None for plaintext

    # ---- connections -------------------------------------------------------------------
    def _new_connection(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        c = self.config
        return BrokerConnection(host, port, node_id=node_id, client_id=c["client.id"],
                                connect_timeout=c.seconds("socket.connection.setup.timeout.ms"),
                                request_timeout=c.seconds("request.timeout.ms"),
                                max_response_size=c["receive.message.max.bytes"],
                                security=self._security)

    async def _open(self, key: ConnKey, host: str, port: int,
                    node_id: int | None) -> BrokerConnection:
        backoff = self.config.seconds("reconnect.backoff.ms")
        wait = self._failed_at.get(key, -1e9) + backoff - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        try:
            conn = await self._new_connection(host, port, node_id).connect()
        except KafkaError:
            self._failed_at[key] = time.monotonic()
            if isinstance(node_id, int):
                self.needs_refresh = True
            raise
        existing = self._conns.get(key)
        if existing is not None and existing.connected:  # a bootstrap one adopted meanwhile
            conn.close()
            return existing
        self._conns[key] = conn
        return conn

    async def _connection_for(self, key: ConnKey, host: str, port: int,
                              node_id: int | None) -> BrokerConnection:
        conn = self._conns.get(key)
        if conn is not None and conn.connected:
            return conn
        task = self._connecting.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._open(key, host, port, node_id))
            self._connecting[key] = task
            task.add_done_callback(lambda t: self._connecting.pop(key, None))
            task.add_done_callback(retrieve_exception)
        return await asyncio.shield(task)

    def connected(self, node_id: int) -> BrokerConnection | None:
        """The open connection to broker `node_id`, or None (`connection` opens one)."""
        conn = self._conns.get(node_id)
        return conn if conn is not None and conn.connected else None

    async def connection(self, node_id: int) -> BrokerConnection:
        """The (single, reused) connection to broker `node_id`, opened if needed."""
        if node_id not in self.brokers:
            self.needs_refresh = True
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node_id} is not in the metadata")
        b = self.brokers[node_id]
        return await self._connection_for(node_id, b.host, b.port, node_id)

    async def connection_to(self, broker: BrokerInfo) -> BrokerConnection:
        """The (single, reused) connection to `broker` (a BrokerInfo, e.g. a coordinator that
        FindCoordinator named), whether or not the last metadata listed it."""
        return await self._connection_for(broker.node_id, broker.host, broker.port,
                                          broker.node_id)

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: an open one with the fewest requests in flight first."""
        await self.ensure_bootstrapped()
        live = [c for k, c in self._conns.items() if isinstance(k, int) and c.connected]
        if live:
            return min(live, key=lambda c: c.in_flight)
        last: KafkaError | None = None
        for node_id in random.sample(list(self.brokers), len(self.brokers)):
            try:
                return await self.connection(node_id)
            except KafkaError as e:
                last = e
        raise last or KafkaConnectionError("no broker known")

    async def send(self, node_id: int, api_key: int, body: Message, **kwargs: Any) -> Message:
        conn = await self.connection(node_id)
        return await conn.send(api_key, body, **kwargs)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        for task in self._connecting.values():
            task.cancel()

    # ---- metadata ----------------------------------------------------------------------
    async def ensure_bootstrapped(self) -> None:
        if not self.has_metadata:
            await self.refresh()

    async def refresh(self, topics: Iterable[str] = (), all_topics: bool = False) -> None:
        """Fetch Metadata for the tracked topics plus `topics` (every topic if `all_topics`)."""
        self._wanted.update(topics)
        gen = self._generation
        async with self._lock:
            if self._generation != gen and self._requested is not None and not all_topics \
                    and self._wanted <= self._requested:
                return  # a refresh that covered us finished while we waited
            await self._refresh_locked(None if all_topics else set(self._wanted))

    async def _refresh_locked(self, topics: set[str] | None) -> None:
        errors: list[str] = []
        for conn_getter, where in self._metadata_candidates():
            try:
                conn = await conn_getter()
                version = conn.version_for(ApiKey.METADATA)
                resp = await conn.send(ApiKey.METADATA, self._metadata_request(topics, version),
                                       version)
            except AuthenticationError:
                raise  # our credentials: asking another broker will not help
            except KafkaError as e:
                errors.append(getattr(e, "detail", None) or f"{where}: {e}")
                continue
            self._apply(resp, topics)
            return
        raise KafkaConnectionError("; ".join(dict.fromkeys(errors)) or "no broker to ask")

    def _metadata_candidates(
            self) -> list[tuple[Callable[[], Awaitable[BrokerConnection]], str]]:
        """Where to ask for metadata: connected brokers, then known brokers, then bootstrap."""
        out: list[tuple[Callable[[], Awaitable[BrokerConnection]], str]] = []
        for key, conn in list(self._conns.items()):
            if conn.connected:
                out.append((functools.partial(_ready, conn), conn.address))
        for node_id, b in self.brokers.items():
            out.append((functools.partial(self.connection, node_id), f"{b.host}:{b.port}"))
        for host, port in self.config["bootstrap.servers"]:
            key = ("bootstrap", host, port)
            out.append((functools.partial(self._connection_for, key, host, port, None),
                        f"{host}:{port}"))
        return out

    def _metadata_request(self, topics: set[str] | None, version: int) -> Message:
        Req = request(ApiKey.METADATA).cls
        Topic = request(ApiKey.METADATA).fields[0].struct.cls
        wanted: list[Message] | None
        if topics is None:
            wanted = [] if version == 0 else None
        else:
            wanted = [Topic(name=t, topic_id=ZERO_UUID) for t in sorted(topics)]
        return Req(topics=wanted, allow_auto_topic_creation=self.allow_auto_create,
                   include_topic_authorized_operations=False)

    def _apply(self, resp: Message, requested: set[str] | None) -> None:
        self._generation += 1
        self._requested = requested
        self.has_metadata = True
        self.needs_refresh = False
        self.last_refresh = time.monotonic()
        self.cluster_id = resp.cluster_id
        self.controller_id = resp.controller_id
        brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
        for node_id, old in self.brokers.items():
            new = brokers.get(node_id)
            if new is None or (new.host, new.port) != (old.host, old.port):
                conn = self._conns.pop(node_id, None)
                if conn is not None:
                    conn.close()
        self.brokers = brokers
        # Adopt a bootstrap connection as its broker's connection: one connection per broker.
        for key in [k for k in self._conns if isinstance(k, tuple)]:
            conn = self._conns[key]
            for b in brokers.values():
                if (b.host, b.port) == (key[1], key[2]) and b.node_id not in self._conns \
                        and conn.connected:
                    conn.node_id = b.node_id
                    self._conns[b.node_id] = self._conns.pop(key)
                    break
        if requested is None:
            self.topics.clear()
            self._leaders.clear()
            self._ids.clear()
            self._available.clear()
            self.topic_errors.clear()
        seen: set[str] = set()
        for t in resp.topics:
            name = t.name if t.name is not None else self._names_by_id.get(t.topic_id)
            if name is None:
                continue
            seen.add(name)
            self._drop_topic(name)
            if t.error_code and t.error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                self.topic_errors[name] = ErrorCode(t.error_code)
                continue
            self.topic_errors.pop(name, None)
            if t.error_code:  # LEADER_NOT_AVAILABLE: being created; ask again soon
                self.needs_refresh = True
                continue
            parts: list[PartitionInfo] = []
            for p in t.partitions:
                parts.append(PartitionInfo(p.partition_index, p.leader_id, p.leader_epoch,
                                           tuple(p.replica_nodes), tuple(p.isr_nodes),
                                           tuple(p.offline_replicas or ()),
                                           ErrorCode(p.error_code).name if p.error_code else None))
                if p.leader_id >= 0 and p.leader_id in brokers:
                    self._leaders[(name, p.partition_index)] = p.leader_id
                else:
                    self.needs_refresh = True
            parts.sort()
            self.topics[name] = TopicDescription(name, t.topic_id, t.is_internal, tuple(parts))
            self._ids[name] = [p.partition for p in parts]
            self._available[name] = [p.partition for p in parts
                                     if (name, p.partition) in self._leaders]
            if t.topic_id != ZERO_UUID:
                self._names_by_id[t.topic_id] = name
        for name in (requested or ()):
            if name not in seen:
                self._drop_topic(name)

    def _drop_topic(self, name: str) -> None:
        self._ids.pop(name, None)
        self._available.pop(name, None)
        old = self.topics.pop(name, None)
        if old is not None:
            for p in old.partitions:
                self._leaders.pop((name, p.partition), None)

    def request_update(self) -> None:
        """Mark the metadata stale; the next `maybe_refresh` asks the cluster again."""
        self.needs_refresh = True

    async def maybe_refresh(self, topics: Iterable[str] = ()) -> None:
        """Refresh when marked stale, older than metadata.max.age.ms, or missing `topics`.

        Backs off (retry.backoff.ms after the last refresh) only when asking again could not
        help yet: metadata marked stale, or topics the last refresh asked for and did not get.
        A topic never asked for is asked for at once.
        """
        age = time.monotonic() - self.last_refresh
        missing = [t for t in topics if t not in self.topics]
        asked = self._requested
        unanswered = missing and (asked is None or all(t in asked for t in missing))
        backoff = self.config.seconds("retry.backoff.ms")
        if (unanswered or self.needs_refresh) and age < backoff:
            await asyncio.sleep(backoff - age)
        if not self.has_metadata or missing or self.needs_refresh or \
                age > self.config.seconds("metadata.max.age.ms"):
            await self.refresh(topics)

    def track(self, topics: Iterable[str]) -> None:
        self._wanted.update(topics)

    def untrack(self, topics: Iterable[str]) -> None:
        self._wanted.difference_update(topics)

    # ---- questions ---------------------------------------------------------------------
    def leader(self, topic: str, partition: int) -> int | None:
        """Node id of the partition's leader, or None when unknown."""
        return self._leaders.get((topic, partition))

    def partitions_for(self, topic: str) -> list[int] | None:
        """Sorted partition ids of a known topic, or None (a shared list: do not mutate)."""
        return self._ids.get(topic)

    def available_partitions(self, topic: str) -> Sequence[int]:
        """Partition ids of `topic` with a known leader (a shared list: do not mutate)."""
        return self._available.get(topic, ())

    def partition_info(self, topic: str, partition: int) -> PartitionInfo | None:
        t = self.topics.get(topic)
        if t is not None:
            for p in t.partitions:
                if p.partition == partition:
                    return p
        return None

    def leader_epoch(self, topic: str, partition: int) -> int:
        p = self.partition_info(topic, partition)
        return -1 if p is None else p.leader_epoch

    def topic_id(self, topic: str) -> Any:
        t = self.topics.get(topic)
        return ZERO_UUID if t is None else t.topic_id

    def topic_name(self, topic_id: Any) -> str | None:
        return self._names_by_id.get(topic_id)

    def topic_error(self, topic: str) -> KafkaError | None:
        """A KafkaError saying why `topic` is not usable, or None when it is."""
        code = self.topic_errors.get(topic)
        if code is not None:
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                return KafkaError(code, f"topic {topic!r} does not exist")
            return KafkaError(code, f"topic {topic!r}")
        return None


async def _ready(conn: BrokerConnection) -> BrokerConnection:
    return conn
