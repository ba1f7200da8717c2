"""What the console's pages show, gathered through minilog's admin client: plain data, no HTML.

Each function asks the cluster what one page needs, with Kafka's own requests (Metadata,
DescribeCluster, ListOffsets, DescribeConfigs, ListGroups, DescribeGroups, OffsetFetch), so the
console works against any Kafka-compatible cluster. A group's lag is what `minilog groups
describe` and `kafka-consumer-groups --describe` print: log end offset minus committed offset.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from minilog.connector.client import AsyncAdminClient, ErrorCode, KafkaError, TopicPartition
from minilog.connector.internal_groups import is_sink_marker


@dataclass
class BrokerRow:
    node_id: int
    address: str
    up: bool
    controller: bool


@dataclass
class PartitionRow:
    topic: str
    partition: int
    leader: int
    replicas: tuple
    isr: tuple
    earliest: int | None = None
    high_watermark: int | None = None
    last_stable: int | None = None
    size: int | None = None  # bytes of the leader's log segments

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def under_replicated(self) -> bool:
        return not self.offline and len(self.isr) < len(self.replicas)


@dataclass
class LagRow:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    member: str
    host: str
    client_id: str
    metadata: str = ""

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return self.log_end - self.committed


@dataclass
class GroupView:
    group_id: str
    state: str
    protocol: str
    members: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    internal: bool = False  # the exactly-once sink's replay marker, not consumers

    @property
    def total_lag(self) -> int:
        return sum(r.lag or 0 for r in self.rows)

    @property
    def spark_query(self) -> dict | None:
        """The Spark query committing this group's offsets (`format("minilog")` commits with
        metadata naming it), else None."""
        for row in self.rows:
            found = spark_metadata(row.metadata)
            if found is not None:
                return found
        return None


def spark_metadata(metadata: str) -> dict | None:
    """{"queryId", "batchId"...} of commit metadata a Spark query wrote, else None."""
    if not metadata or not metadata.startswith("{"):
        return None
    try:
        parsed = json.loads(metadata)
    except ValueError:
        return None
    spark = parsed.get("spark") if isinstance(parsed, dict) else None
    return spark if isinstance(spark, dict) else None


def partition_rows(topics: dict[str, Any]) -> list[PartitionRow]:
    return [PartitionRow(name, p.partition, p.leader, tuple(p.replicas), tuple(p.isr))
            for name, t in topics.items() for p in t.partitions]


async def brokers(admin: AsyncAdminClient, seen: dict[int, str]) -> list[BrokerRow]:
    """Every broker the cluster has named since the console started: those DescribeCluster
    no longer lists are down (`seen` {node id: address} is the console's memory of them)."""
    cluster = await admin.describe_cluster()
    live = {b.node_id: f"{b.host}:{b.port}" for b in cluster.brokers}
    seen.update(live)
    return [BrokerRow(n, seen[n], n in live, n == cluster.controller_id) for n in sorted(seen)]


async def overview(admin: AsyncAdminClient, seen: dict[int, str]) -> dict[str, Any]:
    rows = await brokers(admin, seen)
    topics = await admin.describe_topics()
    parts = partition_rows(topics)
    groups = await admin.list_groups()
    controller = next((b.node_id for b in rows if b.controller), None)
    return {"brokers": rows, "controller": controller, "topics": len(topics),
            "partitions": len(parts), "groups": len(groups),
            "under_replicated": [p for p in parts if p.under_replicated],
            "offline": [p for p in parts if p.offline]}


async def _offsets(admin: AsyncAdminClient, tps: list[TopicPartition], spec: str,
                   isolation: str = "read_uncommitted") -> dict[TopicPartition, int]:
    """{tp: offset}; partitions without a leader (or that fail) are left out."""
    found: dict[TopicPartition, int] = {}
    for tp in tps:  # one by one: an offline partition must not hide the others
        try:
            got = await admin.list_offsets({tp: spec}, isolation_level=isolation, timeout=5)
        except KafkaError:
            continue
        if got.get(tp) is not None:
            found[tp] = got[tp].offset
    return found


async def topic(admin: AsyncAdminClient, name: str) -> dict[str, Any]:
    """A topic's partitions with their offsets, and its configs that are not defaults."""
    described = await admin.describe_topics([name])
    parts = partition_rows(described)
    tps = [TopicPartition(name, p.partition) for p in parts if not p.offline]
    earliest = await _offsets(admin, tps, "earliest")
    latest = await _offsets(admin, tps, "latest")
    stable = await _offsets(admin, tps, "latest", "read_committed")
    try:
        sizes = await admin.partition_sizes(tps, timeout=5)
    except KafkaError:  # a broker that does not answer DescribeLogDirs: no sizes
        sizes = {}
    for p in parts:
        tp = TopicPartition(name, p.partition)
        p.earliest, p.high_watermark, p.last_stable = earliest.get(tp), latest.get(tp), \
            stable.get(tp)
        p.size = sizes.get(tp)
    try:
        configs = await admin.describe_configs("topic", name)
        shown = {c.name: c.value for c in configs.values()
                 if c.source not in (5, -1) and not c.sensitive}
    except KafkaError:
        shown = {}
    return {"name": name, "partitions": parts, "configs": shown,
            "internal": described[name].internal}


async def topic_list(admin: AsyncAdminClient) -> list[dict[str, Any]]:
    topics = await admin.describe_topics()
    out = []
    for name, t in topics.items():
        parts = partition_rows({name: t})
        out.append({"name": name, "partitions": len(parts),
                    "replication": len(parts[0].replicas) if parts else 0,
                    "under_replicated": sum(p.under_replicated for p in parts),
                    "offline": sum(p.offline for p in parts), "internal": t.internal})
    return out


async def group(admin: AsyncAdminClient, group_id: str) -> GroupView:
    """A group's state, members and, per partition, committed offset, log end and lag (the
    rows of `kafka-consumer-groups --describe`). A group that is Dead (no members) and has
    no committed offsets does not exist: GROUP_ID_NOT_FOUND, as `kafka-consumer-groups`
    says of it."""
    desc = (await admin.describe_groups([group_id]))[group_id]
    committed = await admin.list_group_offsets(group_id)
    if desc.state == "Dead" and not committed:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"consumer group {group_id!r} does not exist")
    owners = {tp: m for m in desc.members for tp in m.assignment}
    tps = sorted(set(committed) | set(owners))
    ends = await _offsets(admin, tps, "latest")
    view = GroupView(group_id, desc.state, desc.protocol, list(desc.members),
                     internal=not desc.members and is_sink_marker(committed))
    for tp in tps:
        om, m = committed.get(tp), owners.get(tp)
        view.rows.append(LagRow(tp.topic, tp.partition, om.offset if om is not None else None,
                                ends.get(tp), m.member_id if m else "-", m.host if m else "-",
                                m.client_id if m else "-",
                                (om.metadata or "") if om is not None else ""))
    return view


async def group_list(admin: AsyncAdminClient) -> list[GroupView]:
    """Every listed group described; one gone meanwhile is left out."""
    views = []
    for listed in sorted(await admin.list_groups(), key=lambda g: g.group_id):
        try:
            views.append(await group(admin, listed.group_id))
        except KafkaError as e:
            if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
                raise
    return views
