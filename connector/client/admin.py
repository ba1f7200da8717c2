"""The admin client: topics, partitions, configs, offsets, records and the cluster itself.

`AsyncAdminClient` speaks the admin APIs over the shared `Cluster`; `AdminClient` is its
synchronous face. Each call routes its request where Kafka wants it (topic changes to the
controller, offsets and record deletion to each partition's leader, broker configs to that
broker), retries what Kafka calls retriable (stale leader, not controller, lost connection)
until `default.api.timeout.ms` (or the call's `timeout`), and raises a KafkaError carrying the
broker's error name and message for everything else. Results are plain values, not futures.

Consumer-group administration (list/describe/delete groups, group offsets, reset offsets) is
the `GroupAdmin` mixin of `admin_groups.py`; it routes through each group's coordinator.

`list_offsets_by_leader` is shared with the consumer, which needs the same ListOffsets routing
for `auto.offset.reset`, `seek_to_end` and `offsets_for_times`.
"""
import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from minilog.connector.acl_types import AclBinding
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

from . import admin_acls, admin_users
from .admin_core import retriable
from .admin_groups import GroupAdmin
from .admin_transactions import TransactionAdmin
from .cluster import STALE_METADATA, Cluster
from .config import Config
from .connection import BrokerConnection, LoopThread, add_blocking_methods, message_class
from .types import (
    BrokerInfo,
    ClusterDescription,
    ConfigEntry,
    KafkaTimeoutError,
    NewTopic,
    OffsetAndTimestamp,
    Reassignment,
    TopicDescription,
    TopicPartition,
)

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
OFFSET_SPECS = {"earliest": EARLIEST, "beginning": EARLIEST, "latest": LATEST, "end": LATEST,
                "max-timestamp": MAX_TIMESTAMP}
RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker_logger": 8}
_SET, _DELETE = 0, 1
V = TypeVar("V")
# `by_leader`'s request to one leader: (connection, its partitions) -> {tp: (error code, value)}
LeaderSend = Callable[[BrokerConnection, list[TopicPartition]],
                      Awaitable[dict[TopicPartition, tuple[int, V]]]]


def _m(api_key: int, *path: str) -> Any:
    return message_class(request(api_key), *path)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """{topic: its partitions' indexes}, in the order given."""
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def _error(code: int, what: str, message: str | None = None) -> KafkaError:
    """`what` names the subject, unless the broker's message already does (Kafka's do)."""
    if message and what.lower() in message.lower():
        return KafkaError(code, message)
    return KafkaError(code, f"{what}: {message}" if message else what)


async def by_leader(cluster: Cluster, tps: Iterable[TopicPartition], send: LeaderSend[V],
                    deadline: float, what: str) -> dict[TopicPartition, V]:
    """Per-partition requests routed to each partition's leader, stale leaders retried.

    `send(conn, [tp...])` returns {tp: (error_code, value)}; the result is {tp: value}.
    """
    remaining = set(tps)
    results: dict[TopicPartition, V] = {}
    backoff = cluster.config.seconds("retry.backoff.ms")
    while remaining:
        await cluster.maybe_refresh({tp.topic for tp in remaining})
        groups: dict[int, list[TopicPartition]] = {}
        for tp in remaining:
            err = cluster.topic_error(tp.topic)
            if err is not None:
                raise err
            parts = cluster.partitions_for(tp.topic)
            if parts is not None and tp.partition not in parts:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"partition {tp.partition} of {tp.topic!r} does not exist")
            leader = cluster.leader(*tp)
            if leader is None:
                cluster.request_update()
            else:
                groups.setdefault(leader, []).append(tp)

        async def one(node: int,
                      group: list[TopicPartition]) -> dict[TopicPartition, tuple[int, V]]:
            conn = await cluster.connection(node)
            return await send(conn, group)
        answers = await asyncio.gather(*(one(n, g) for n, g in groups.items()),
                                       return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException):
                if not isinstance(answer, KafkaError) or not retriable(answer):
                    raise answer
                cluster.request_update()
                continue
            for tp, (code, value) in answer.items():
                if not code:
                    results[tp] = value
                    remaining.discard(tp)
                elif code in STALE_METADATA or KafkaError(code).retriable:
                    cluster.request_update()
                else:
                    raise _error(code, f"{what} {tp}")
        if remaining:
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"{what} for {', '.join(map(str, sorted(remaining)))} "
                                        "did not complete in time")
            await asyncio.sleep(backoff)
    return results


async def list_offsets_by_leader(
        cluster: Cluster, specs: Mapping[TopicPartition, int], deadline: float,
        isolation_level: int = 0) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """{tp: timestamp or -1 latest / -2 earliest / -3 max-timestamp} -> {tp: OffsetAndTimestamp}.

    A timestamp with no record at or after it maps to None (as Java's offsetsForTimes).
    """
    Req, Topic, Part = (_m(ApiKey.LIST_OFFSETS), _m(ApiKey.LIST_OFFSETS, "topics"),
                        _m(ApiKey.LIST_OFFSETS, "topics", "partitions"))

    async def send(conn: BrokerConnection, tps: list[TopicPartition]
                   ) -> dict[TopicPartition, tuple[int, OffsetAndTimestamp | None]]:
        version = conn.version_for(ApiKey.LIST_OFFSETS)
        if version < 7 and any(specs[tp] == MAX_TIMESTAMP for tp in tps):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "max-timestamp needs ListOffsets v7")
        topics: dict[str, list[Any]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(Part(
                partition_index=tp.partition, timestamp=specs[tp],
                current_leader_epoch=cluster.leader_epoch(*tp)))
        resp = await conn.send(ApiKey.LIST_OFFSETS, Req(
            replica_id=-1, isolation_level=isolation_level,
            topics=[Topic(name=t, partitions=p) for t, p in topics.items()]), version)
        out: dict[TopicPartition, tuple[int, OffsetAndTimestamp | None]] = {}
        for t in resp.topics:
            for p in t.partitions:
                found = p.offset >= 0
                out[TopicPartition(t.name, p.partition_index)] = (
                    p.error_code, OffsetAndTimestamp(p.offset, p.timestamp) if found else None)
        return out
    return await by_leader(cluster, specs, send, deadline, "ListOffsets")


class AsyncAdminClient(GroupAdmin, TransactionAdmin):
    """Admin operations for asyncio code; every method is a coroutine."""

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        self.config = Config("admin", config, **overrides)
        self._cluster = Cluster(self.config)
        self._group_coordinators = {}  # group id -> Coordinator (admin_groups.py)

    async def _controller(self) -> BrokerConnection:
        await self._cluster.ensure_bootstrapped()
        node = self._cluster.controller_id
        if node in self._cluster.brokers:
            return await self._cluster.connection(node)
        return await self._cluster.any_connection()

    # ---- topics --------------------------------------------------------------------------
    async def create_topics(self, topics: Iterable[NewTopic | str], validate_only: bool = False,
                            timeout: float | None = None) -> None:
        """Create topics (NewTopic, or names with the defaults); raise on the first failure.

        Waits until the new topics appear in the metadata, so they are usable on return.
        """
        new = [NewTopic(t) if isinstance(t, str) else t for t in topics]
        Req, T, C = (_m(ApiKey.CREATE_TOPICS), _m(ApiKey.CREATE_TOPICS, "topics"),
                     _m(ApiKey.CREATE_TOPICS, "topics", "configs"))
        ms = int(self.config["request.timeout.ms"])
        body = Req(timeout_ms=ms, validate_only=validate_only, topics=[T(
            name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
            assignments=[], configs=[C(name=k, value=None if v is None else str(v))
                                     for k, v in (t.config or {}).items()]) for t in new])

        async def attempt() -> None:
            resp = await (await self._controller()).send(ApiKey.CREATE_TOPICS, body)
            for r in resp.topics:
                if r.error_code:
                    raise _error(r.error_code, f"topic {r.name!r}", r.error_message)
        await self._retry(attempt, timeout, "CreateTopics")
        if not validate_only:
            await self._wait_for(lambda: all(self._cluster.partitions_for(t.name) for t in new),
                                 [t.name for t in new], timeout)

    async def create_topic(self, name: str, num_partitions: int = 1, replication_factor: int = -1,
                           config: dict[str, str] | None = None,
                           timeout: float | None = None) -> None:
        await self.create_topics([NewTopic(name, num_partitions, replication_factor, config)],
                                 timeout=timeout)

    async def _wait_for(self, done: Callable[[], bool], topics: list[str],
                        timeout: float | None) -> None:
        deadline = self._deadline(timeout)
        while True:
            await self._cluster.refresh(topics)
            if done():
                return
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"metadata for {', '.join(topics)} did not update in time")
            await asyncio.sleep(self.config.seconds("retry.backoff.ms"))

    async def delete_topics(self, names: str | Iterable[str], timeout: float | None = None) -> None:
        topics = [names] if isinstance(names, str) else list(names)
        Req, T = _m(ApiKey.DELETE_TOPICS), _m(ApiKey.DELETE_TOPICS, "topics")

        async def attempt() -> None:
            conn = await self._controller()
            version = conn.version_for(ApiKey.DELETE_TOPICS)
            body = Req(timeout_ms=int(self.config["request.timeout.ms"]), topic_names=topics,
                       topics=[T(name=n) for n in topics])
            resp = await conn.send(ApiKey.DELETE_TOPICS, body, version)
            for r in resp.responses:
                if r.error_code:
                    raise _error(r.error_code, f"topic {r.name!r}", r.error_message)
        await self._retry(attempt, timeout, "DeleteTopics")
        self._cluster.untrack(topics)

    async def delete_topic(self, name: str, timeout: float | None = None) -> None:
        await self.delete_topics([name], timeout)

    async def list_topics(self, internal: bool = False, timeout: float | None = None) -> list[str]:
        """Sorted names of the cluster's topics (internal ones such as __consumer_offsets too
        when `internal`)."""
        await self._retry(lambda: self._cluster.refresh(all_topics=True), timeout, "Metadata")
        return sorted(n for n, t in self._cluster.topics.items() if internal or not t.internal)

    async def describe_topics(self, names: str | Iterable[str] | None = None,
                              timeout: float | None = None) -> dict[str, TopicDescription]:
        """{name: TopicDescription} for `names` (all topics when None); unknown names raise."""
        if names is None:
            await self._retry(lambda: self._cluster.refresh(all_topics=True), timeout, "Metadata")
            return dict(sorted(self._cluster.topics.items()))
        wanted = [names] if isinstance(names, str) else list(names)
        await self._retry(lambda: self._cluster.refresh(wanted), timeout, "Metadata")
        for n in wanted:
            err = self._cluster.topic_error(n)
            if err is not None:
                raise err
        return {n: self._cluster.topics[n] for n in wanted}

    async def create_partitions(self, name: str, total_count: int, validate_only: bool = False,
                                timeout: float | None = None) -> None:
        """Grow topic `name` to `total_count` partitions."""
        Req, T = _m(ApiKey.CREATE_PARTITIONS), _m(ApiKey.CREATE_PARTITIONS, "topics")
        body = Req(topics=[T(name=name, count=total_count, assignments=None)],
                   timeout_ms=int(self.config["request.timeout.ms"]), validate_only=validate_only)

        async def attempt() -> None:
            resp = await (await self._controller()).send(ApiKey.CREATE_PARTITIONS, body)
            for r in resp.results:
                if r.error_code:
                    raise _error(r.error_code, f"topic {r.name!r}", r.error_message)
        await self._retry(attempt, timeout, "CreatePartitions")
        if not validate_only:
            await self._wait_for(lambda: len(self._cluster.partitions_for(name) or ()) >= total_count,
                                 [name], timeout)

    async def elect_leaders(self, election_type: str = "preferred",
                            partitions: Iterable[TopicPartition] | None = None,
                            timeout: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """ElectLeaders: "preferred" (each partition's first replica leads again) or "unclean"
        (a partition without a leader gets one); `partitions` None for every partition, when
        those needing no election are left out. {partition: None if elected, else its error}."""
        types = {"preferred": 0, "unclean": 1}
        if election_type.lower() not in types:
            raise ValueError(f"election type must be preferred or unclean, got {election_type!r}")
        Req, T = _m(ApiKey.ELECT_LEADERS), _m(ApiKey.ELECT_LEADERS, "topic_partitions")
        wanted = None if partitions is None else \
            [T(topic=t, partitions=ps) for t, ps in _by_topic(partitions).items()]
        body = Req(election_type=types[election_type.lower()], topic_partitions=wanted,
                   timeout_ms=int(self.config["request.timeout.ms"]))

        async def attempt() -> dict[TopicPartition, KafkaError | None]:
            resp = await (await self._controller()).send(ApiKey.ELECT_LEADERS, body)
            if resp.error_code:
                raise _error(resp.error_code, "ElectLeaders")
            return {TopicPartition(r.topic, p.partition_id):
                    _error(p.error_code, f"{r.topic}-{p.partition_id}", p.error_message)
                    if p.error_code else None
                    for r in resp.replica_election_results for p in r.partition_result}
        return await self._retry(attempt, timeout, "ElectLeaders")

    async def alter_partition_reassignments(
            self, targets: Mapping[TopicPartition, Iterable[int] | None],
            timeout: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """AlterPartitionReassignments (KIP-455): {partition: its new replicas, or None to
        cancel a reassignment under way}. {partition: None if started, else its error}."""
        Req, T = _m(ApiKey.ALTER_PARTITION_REASSIGNMENTS), \
            _m(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "topics")
        P = _m(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "topics", "partitions")
        by_topic: dict[str, list[Any]] = {}
        for tp, replicas in targets.items():
            by_topic.setdefault(tp.topic, []).append(P(
                partition_index=tp.partition, replicas=None if replicas is None else list(replicas)))
        body = Req(timeout_ms=int(self.config["request.timeout.ms"]),
                   topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])

        async def attempt() -> dict[TopicPartition, KafkaError | None]:
            resp = await (await self._controller()).send(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body)
            if resp.error_code:
                raise _error(resp.error_code, "AlterPartitionReassignments", resp.error_message)
            return {TopicPartition(r.name, p.partition_index):
                    _error(p.error_code, f"{r.name}-{p.partition_index}", p.error_message)
                    if p.error_code else None for r in resp.responses for p in r.partitions}
        return await self._retry(attempt, timeout, "AlterPartitionReassignments")

    async def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None,
            timeout: float | None = None) -> dict[TopicPartition, Reassignment]:
        """ListPartitionReassignments: the reassignments under way, of `partitions` (None:
        all), {partition: Reassignment(replicas, adding, removing)}."""
        Req, T = _m(ApiKey.LIST_PARTITION_REASSIGNMENTS), \
            _m(ApiKey.LIST_PARTITION_REASSIGNMENTS, "topics")
        wanted = None if partitions is None else \
            [T(name=t, partition_indexes=ps) for t, ps in _by_topic(partitions).items()]
        body = Req(timeout_ms=int(self.config["request.timeout.ms"]), topics=wanted)

        async def attempt() -> dict[TopicPartition, Reassignment]:
            resp = await (await self._controller()).send(ApiKey.LIST_PARTITION_REASSIGNMENTS, body)
            if resp.error_code:
                raise _error(resp.error_code, "ListPartitionReassignments", resp.error_message)
            return {TopicPartition(t.name, p.partition_index):
                    Reassignment(list(p.replicas), list(p.adding_replicas),
                                 list(p.removing_replicas))
                    for t in resp.topics for p in t.partitions}
        return await self._retry(attempt, timeout, "ListPartitionReassignments")

    # ---- configs -------------------------------------------------------------------------
    async def _config_connection(self, rtype: int, name: str) -> BrokerConnection:
        if rtype == RESOURCE_TYPES["broker"] and name not in ("", None):
            await self._cluster.ensure_bootstrapped()
            return await self._cluster.connection(int(name))
        return await self._cluster.any_connection()

    async def describe_configs(self, resource_type: str | int, name: str | int,
                               keys: Iterable[str] | None = None,
                               timeout: float | None = None) -> dict[str, ConfigEntry]:
        """{config name: ConfigEntry} of a topic or broker (`resource_type` "topic"/"broker")."""
        rtype = _resource_type(resource_type)
        Req, R = _m(ApiKey.DESCRIBE_CONFIGS), _m(ApiKey.DESCRIBE_CONFIGS, "resources")
        body = Req(resources=[R(resource_type=rtype, resource_name=str(name),
                                configuration_keys=None if keys is None else list(keys))],
                   include_synonyms=False, include_documentation=False)

        async def attempt() -> dict[str, ConfigEntry]:
            conn = await self._config_connection(rtype, str(name))
            resp = await conn.send(ApiKey.DESCRIBE_CONFIGS, body)
            r = resp.results[0]
            if r.error_code:
                raise _error(r.error_code, f"{resource_type} {name!r}", r.error_message)
            return {c.name: ConfigEntry(c.name, c.value, c.read_only, c.config_source,
                                        c.is_sensitive) for c in r.configs}
        return await self._retry(attempt, timeout, "DescribeConfigs")

    async def alter_configs(self, resource_type: str | int, name: str | int,
                            set: Mapping[str, Any] | None = None,  # noqa: A002 - Kafka's name
                            delete: Iterable[str] = (), validate_only: bool = False,
                            timeout: float | None = None) -> None:
        """IncrementalAlterConfigs: set the `set` dict's keys, reset `delete`'s to default."""
        rtype = _resource_type(resource_type)
        Req, R, C = (_m(ApiKey.INCREMENTAL_ALTER_CONFIGS),
                     _m(ApiKey.INCREMENTAL_ALTER_CONFIGS, "resources"),
                     _m(ApiKey.INCREMENTAL_ALTER_CONFIGS, "resources", "configs"))
        ops = [C(name=k, config_operation=_SET, value=str(v)) for k, v in (set or {}).items()]
        ops += [C(name=k, config_operation=_DELETE, value=None) for k in delete]
        body = Req(resources=[R(resource_type=rtype, resource_name=str(name), configs=ops)],
                   validate_only=validate_only)

        async def attempt() -> None:
            conn = await self._config_connection(rtype, str(name))
            resp = await conn.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
            for r in resp.responses:
                if r.error_code:
                    raise _error(r.error_code, f"{resource_type} {name!r}", r.error_message)
        await self._retry(attempt, timeout, "IncrementalAlterConfigs")

    incremental_alter_configs = alter_configs

    # ---- offsets and records -------------------------------------------------------------
    async def list_offsets(self, specs: Mapping[tuple[str, int], str | int],
                           isolation_level: str = "read_uncommitted", timeout: float | None = None
                           ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """{tp: "earliest" | "latest" | "max-timestamp" | timestamp_ms} -> {tp: OffsetAndTimestamp}

        A timestamp later than every record maps to None.
        """
        wanted = {TopicPartition(*tp): OFFSET_SPECS[s] if isinstance(s, str) else int(s)
                  for tp, s in specs.items()}
        level = 1 if isolation_level == "read_committed" else 0
        await self._cluster.ensure_bootstrapped()
        return await list_offsets_by_leader(self._cluster, wanted, self._deadline(timeout), level)

    async def delete_records(self, offsets: Mapping[tuple[str, int], int],
                             timeout: float | None = None) -> dict[TopicPartition, int]:
        """Delete records before {tp: offset} (-1: the high watermark); {tp: new low watermark}."""
        Req, T, P = (_m(ApiKey.DELETE_RECORDS), _m(ApiKey.DELETE_RECORDS, "topics"),
                     _m(ApiKey.DELETE_RECORDS, "topics", "partitions"))
        before = {TopicPartition(*tp): o for tp, o in offsets.items()}

        async def send(conn: BrokerConnection, tps: list[TopicPartition]
                       ) -> dict[TopicPartition, tuple[int, int]]:
            topics: dict[str, list[Any]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(P(partition_index=tp.partition,
                                                         offset=before[tp]))
            resp = await conn.send(ApiKey.DELETE_RECORDS, Req(
                topics=[T(name=t, partitions=p) for t, p in topics.items()],
                timeout_ms=int(self.config["request.timeout.ms"])))
            return {TopicPartition(t.name, p.partition_index): (p.error_code, p.low_watermark)
                    for t in resp.topics for p in t.partitions}
        await self._cluster.ensure_bootstrapped()
        return await by_leader(self._cluster, before, send, self._deadline(timeout),
                               "DeleteRecords")

    async def partition_sizes(self, tps: Iterable[tuple[str, int]],
                              timeout: float | None = None) -> dict[TopicPartition, int]:
        """{tp: bytes its leader's log segments hold}, from DescribeLogDirs (Kafka's
        `kafka-log-dirs.sh`): the broker answers from its segment lengths, reading no data."""
        Req, T = _m(ApiKey.DESCRIBE_LOG_DIRS), _m(ApiKey.DESCRIBE_LOG_DIRS, "topics")
        wanted = [TopicPartition(*tp) for tp in tps]

        async def send(conn: BrokerConnection, tps: list[TopicPartition]
                       ) -> dict[TopicPartition, tuple[int, int]]:
            if not conn.supports(ApiKey.DESCRIBE_LOG_DIRS):
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                                 "the broker does not answer DescribeLogDirs")
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            resp = await conn.send(ApiKey.DESCRIBE_LOG_DIRS, Req(
                topics=[T(topic=t, partitions=p) for t, p in topics.items()]))
            if getattr(resp, "error_code", 0):  # v3+: e.g. no DESCRIBE on the cluster
                raise _error(resp.error_code, "DescribeLogDirs")
            sizes: dict[TopicPartition, int] = {}
            for result in resp.results:
                if result.error_code:
                    raise _error(result.error_code, f"DescribeLogDirs {result.log_dir}")
                for t in result.topics:
                    for p in t.partitions:
                        if not p.is_future_key:
                            tp = TopicPartition(t.name, p.partition_index)
                            sizes[tp] = sizes.get(tp, 0) + p.partition_size
            # a partition the broker no longer holds moved: ask its new leader (by_leader reads
            # no value with an error code)
            return {tp: (0, sizes[tp]) if tp in sizes else
                    (ErrorCode.NOT_LEADER_OR_FOLLOWER, 0) for tp in tps}
        await self._cluster.ensure_bootstrapped()
        return await by_leader(self._cluster, wanted, send, self._deadline(timeout),
                               "DescribeLogDirs")

    # ---- the cluster ---------------------------------------------------------------------
    async def describe_cluster(self, timeout: float | None = None) -> ClusterDescription:
        async def attempt() -> ClusterDescription:
            conn = await self._cluster.any_connection()
            if conn.supports(ApiKey.DESCRIBE_CLUSTER):
                resp = await conn.send(ApiKey.DESCRIBE_CLUSTER, request(
                    ApiKey.DESCRIBE_CLUSTER).cls(include_cluster_authorized_operations=False))
                if resp.error_code:
                    raise _error(resp.error_code, "DescribeCluster", resp.error_message)
                return ClusterDescription(resp.cluster_id, resp.controller_id, tuple(
                    BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers))
            await self._cluster.refresh()
            c = self._cluster
            return ClusterDescription(c.cluster_id, c.controller_id, tuple(c.brokers.values()))
        return await self._retry(attempt, timeout, "DescribeCluster")

    # ---- SCRAM users (admin_users.py) ---------------------------------------------------------
    async def describe_user_scram_credentials(
            self, users: Iterable[str] | None = None, timeout: float | None = None
    ) -> dict[str, list[admin_users.ScramCredentialInfo]]:
        """{user: [ScramCredentialInfo(mechanism, iterations)]}, of every user by default."""
        async def attempt() -> dict[str, list[admin_users.ScramCredentialInfo]]:
            return await admin_users.describe(await self._controller(),
                                              None if users is None else list(users))
        return await self._retry(attempt, timeout, "DescribeUserScramCredentials")

    async def upsert_scram_credential(self, user: str, mechanism: str, password: str,
                                      iterations: int = admin_users.DEFAULT_ITERATIONS,
                                      timeout: float | None = None) -> None:
        """Create or replace `user`'s credential for `mechanism` (SCRAM-SHA-256/512)."""
        change = admin_users.upsertion(user, mechanism, password, iterations)

        async def attempt() -> None:
            await admin_users.alter(await self._controller(), [change], [])
        await self._retry(attempt, timeout, "AlterUserScramCredentials")

    async def delete_scram_credential(self, user: str, mechanism: str,
                                      timeout: float | None = None) -> None:
        change = admin_users.deletion(user, mechanism)

        async def attempt() -> None:
            await admin_users.alter(await self._controller(), [], [change])
        await self._retry(attempt, timeout, "AlterUserScramCredentials")

    # ---- ACLs (admin_acls.py) ------------------------------------------------------------
    async def create_acls(self, acls: Iterable[AclBinding], timeout: float | None = None) -> None:
        """Create `AclBinding`s (connector/acl_types.py); creating an existing one is no error."""
        async def attempt() -> None:
            await admin_acls.create(await self._controller(), list(acls))
        await self._retry(attempt, timeout, "CreateAcls")

    async def describe_acls(self, timeout: float | None = None,
                            **acl_filter: Any) -> list[AclBinding]:
        """The ACLs matching the filter (`admin_acls.acl_filter`'s keywords; all by default)."""
        fields = admin_acls.acl_filter(**acl_filter)

        async def attempt() -> list[AclBinding]:
            return await admin_acls.describe(await self._controller(), fields)
        return await self._retry(attempt, timeout, "DescribeAcls")

    async def delete_acls(self, timeout: float | None = None,
                          **acl_filter: Any) -> list[AclBinding]:
        """Delete the ACLs matching the filter; the ACLs deleted."""
        fields = admin_acls.acl_filter(**acl_filter)

        async def attempt() -> list[AclBinding]:
            return await admin_acls.delete(await self._controller(), fields)
        return await self._retry(attempt, timeout, "DeleteAcls")

    async def close(self) -> None:
        self._close_group_coordinators()
        self._cluster.close()


def _resource_type(name: str | int) -> int:
    try:
        return RESOURCE_TYPES[name] if isinstance(name, str) else int(name)
    except KeyError:
        raise ValueError(f"resource type must be one of {', '.join(RESOURCE_TYPES)}") from None


class AdminClient:
    """Synchronous admin client: the same methods as AsyncAdminClient, blocking."""

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        self._core = AsyncAdminClient(config, **overrides)
        self._loop = LoopThread("minilog-admin")

    @property
    def config(self) -> Config:
        return self._core.config

    def close(self) -> None:
        if not self._loop.loop.is_closed():
            self._loop.run(self._core.close())
            self._loop.stop()

    def __enter__(self) -> "AdminClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


add_blocking_methods(AdminClient, AsyncAdminClient, (
    "create_topics", "create_topic", "delete_topics", "delete_topic", "list_topics",
    "describe_topics", "create_partitions", "describe_configs", "alter_configs",
    "incremental_alter_configs", "list_offsets", "delete_records", "partition_sizes",
    "describe_cluster", "elect_leaders", "alter_partition_reassignments",
    "list_partition_reassignments",
    "list_groups", "describe_groups", "delete_groups", "list_group_offsets", "alter_group_offsets",
    "delete_group_offsets", "reset_group_offsets", "list_transactions", "describe_transactions",
    "complete_transaction", "complete_transactions", "describe_producers", "abort_transaction",
    "force_terminate_transaction",
    "describe_user_scram_credentials", "upsert_scram_credential", "delete_scram_credential",
    "create_acls", "describe_acls", "delete_acls"))
