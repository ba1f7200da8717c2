"""The target's copies of the source's topics: created with the source's partition count,
grown when the source grows, their configs kept in step (MirrorSourceConnector's topic and
config sync).

Called by the flow's driver every `refresh.topics.interval.seconds`, and by a write task that
meets a topic or partition the target lacks (the query discovers a new source topic at its
next micro-batch, which can come before the driver's next refresh): the copy never reaches a
topic the broker would auto-create with its own defaults. Creating what exists is no error.
"""
from __future__ import annotations

import logging
import re

from minilog.connector.client import ErrorCode, KafkaError, NewTopic

from .config import Flow

log = logging.getLogger("minilog.mirror")

_TOPIC_OVERRIDE = 1  # Kafka's ConfigSource.DYNAMIC_TOPIC_CONFIG: set on the topic itself
_EXISTS = (ErrorCode.TOPIC_ALREADY_EXISTS,)
_PARTITIONS_OK = (ErrorCode.INVALID_PARTITIONS,)  # another task grew it first


def synced_configs(flow: Flow, entries: dict) -> dict[str, str]:
    """The source topic's own settings that the target copy takes (MM2's
    DefaultConfigPropertyFilter: not the excluded ones, not defaults, no secrets)."""
    if not flow.sync_topic_configs:
        return {}
    return {name: e.value for name, e in entries.items()
            if e.source == _TOPIC_OVERRIDE and not e.sensitive and not e.read_only
            and e.value is not None
            and not (flow.config_exclude and re.fullmatch(flow.config_exclude, name))}


def source_configs(flow: Flow, source_admin, topic: str) -> dict[str, str]:
    """`synced_configs` of a source topic; none from a cluster that cannot describe them
    (said once per topic), since the copy matters more than its settings."""
    if not flow.sync_topic_configs:
        return {}
    try:
        return synced_configs(flow, source_admin.describe_configs("topic", topic))
    except KafkaError as e:
        if topic not in _undescribed:
            _undescribed.add(topic)
            log.warning("%s: the configs of %s cannot be read on %s (%s): not synced",
                        flow.name, topic, flow.source, e)
        return {}


_undescribed: set[str] = set()


def ensure_remote(flow: Flow, source_admin, target_admin, topics: list[str],
                  known: dict[str, int] | None = None) -> dict[str, int]:
    """Make each of `topics` (source names) exist on the target under its remote name with at
    least the source's partitions; {remote topic: partitions} as now known. `known` skips the
    topics already seen with enough partitions."""
    known = {} if known is None else known
    if not topics:
        return known
    wanted = {t: len(d.partitions) for t, d in source_admin.describe_topics(topics).items()}
    existing = set(target_admin.list_topics())
    for topic, count in wanted.items():
        remote = flow.policy.remote_topic(flow.source, topic)
        if known.get(remote, 0) >= count:
            continue
        if remote not in existing:
            config = source_configs(flow, source_admin, topic)
            try:
                target_admin.create_topics([NewTopic(remote, count, flow.replication_factor,
                                                     config)])
                log.info("%s: created %s with %d partitions%s", flow.name, remote, count,
                         f" and {config}" if config else "")
            except KafkaError as e:
                if e.code not in _EXISTS:
                    raise
        have = len(target_admin.describe_topics([remote])[remote].partitions)
        if have < count:
            try:
                target_admin.create_partitions(remote, count)
                log.info("%s: %s grown from %d to %d partitions", flow.name, remote, have, count)
            except KafkaError as e:
                if e.code not in _PARTITIONS_OK:
                    raise
        known[remote] = count
    return known


def sync_configs(flow: Flow, source_admin, target_admin, topics: list[str]) -> None:
    """Set on each remote topic the source topic's synced settings that differ there."""
    if not flow.sync_topic_configs:
        return
    for topic in topics:
        remote = flow.policy.remote_topic(flow.source, topic)
        wanted = source_configs(flow, source_admin, topic)
        if not wanted:
            continue
        have = target_admin.describe_configs("topic", remote)
        changed = {k: v for k, v in wanted.items() if k not in have or have[k].value != v}
        if changed:
            target_admin.alter_configs("topic", remote, set=changed)
            log.info("%s: %s configs synced: %s", flow.name, remote, changed)


def ensure_internal(admin, name: str, replication_factor: int, compact: bool = True) -> None:
    """One of MM2's internal topics (one partition; compacted but for heartbeats)."""
    config = {"cleanup.policy": "compact"} if compact else None
    try:
        admin.create_topics([NewTopic(name, 1, replication_factor, config)])
    except KafkaError as e:
        if e.code not in _EXISTS:
            raise
