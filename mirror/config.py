"""MirrorMaker 2's properties file (`connect-mirror-maker.properties`), read as MM2 reads it.

`clusters = A, B` names the clusters; `A.bootstrap.servers` and any other client setting
prefixed by a cluster's alias (`A.security.protocol`, `A.sasl.mechanism`, `A.consumer.*`,
`A.producer.*`, `A.admin.*`) configure the clients of that cluster; a client setting without a
prefix applies to every cluster. A flow `A->B` runs only with `A->B.enabled = true`. Each flow
setting (`topics`, `topics.exclude`, `groups`, `groups.exclude`, `replication.factor`,
`replication.policy.class`, `sync.topic.configs.enabled`, `sync.group.offsets.enabled`,
`emit.checkpoints.interval.seconds`, `refresh.topics.interval.seconds`, ...) is read from
`A->B.<setting>`, else `<setting>`, else MM2's default. Lists of regexes are comma-separated,
each matched against the whole name (Java's `matches()`).

A key that is neither MM2's, nor Connect's, nor a Kafka client's is an error naming the nearest
known key; MM2 and Connect settings that have no effect here (ACL sync, `tasks.max`, the
converters MM2 uses anyway) are accepted and named in one warning. `spark.*` settings go to the
mirror's Spark session (`spark.sql.streaming.checkpointLocation`: where each flow's query
keeps its checkpoint).
"""
from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import re
import tempfile
from dataclasses import dataclass, field

from minilog.connector.client import Config, ConfigError
from minilog.connector.client.config import is_known_key, nearest_key

from .policy import DEFAULT, ReplicationPolicy, policy_of

log = logging.getLogger("minilog.mirror")


class MirrorConfigError(ValueError):
    """A properties file MM2 would refuse, or one minilog cannot run; the message is one line."""


# MM2's flow settings and their defaults (MirrorSourceConfig, MirrorCheckpointConfig,
# MirrorHeartbeatConfig, DefaultTopicFilter, DefaultGroupFilter, DefaultConfigPropertyFilter).
FLOW_DEFAULTS = {
    "enabled": "false",
    "topics": ".*",
    "topics.exclude": r".*[\-\.]internal, .*\.replica, __.*",
    "groups": ".*",
    "groups.exclude": "console-consumer-.*, connect-.*, __.*",
    "replication.factor": "2",
    "replication.policy.class": DEFAULT,
    "replication.policy.separator": ".",
    "sync.topic.configs.enabled": "true",
    "sync.topic.configs.interval.seconds": "600",
    "config.properties.exclude": (r"follower\.replication\.throttled\.replicas, "
                                  r"leader\.replication\.throttled\.replicas, "
                                  r"message\.timestamp\.difference\.max\.ms, "
                                  r"message\.timestamp\.type, unclean\.leader\.election\.enable, "
                                  r"min\.insync\.replicas"),
    "sync.group.offsets.enabled": "false",
    "sync.group.offsets.interval.seconds": "60",
    "emit.checkpoints.enabled": "true",
    "emit.checkpoints.interval.seconds": "60",
    "emit.heartbeats.enabled": "true",
    "emit.heartbeats.interval.seconds": "1",
    "refresh.topics.enabled": "true",
    "refresh.topics.interval.seconds": "600",
    "refresh.groups.enabled": "true",
    "refresh.groups.interval.seconds": "600",
    "offset-syncs.topic.replication.factor": "3",
    "offset-syncs.topic.location": "source",
    "checkpoints.topic.replication.factor": "3",
    "heartbeats.topic.replication.factor": "3",
}
_LEGACY = {"topics.blacklist": "topics.exclude", "groups.blacklist": "groups.exclude",
           "config.properties.blacklist": "config.properties.exclude"}
# Accepted with no effect here (named in one warning).
NO_EFFECT = {
    "tasks.max", "offset.lag.max", "sync.topic.acls.enabled", "sync.topic.acls.interval.seconds",
    "emit.offset-syncs.enabled", "topic.filter.class", "group.filter.class",
    "config.property.filter.class", "admin.timeout.ms", "exactly.once.support",
    "key.converter", "value.converter", "header.converter",
    "config.storage.replication.factor", "offset.storage.replication.factor",
    "status.storage.replication.factor", "config.storage.topic", "offset.storage.topic",
    "status.storage.topic", "dedicated.mode.enable.internal.rest", "listeners",
    "offset.flush.timeout.ms", "offset.flush.interval.ms", "replication.policy.internal.topic.separator.enabled",
    "add.source.alias.to.metrics", "consumer.poll.timeout.ms", "checkpoints.topic.location",
    "sync.group.offsets.reset.disabled",
}
_CLIENT_ROLES = ("consumer.", "producer.", "admin.")
FLOW = re.compile(r"^([^.\s>-][^\s>]*?)->([^.\s>][^\s>]*?)\.(.+)$")


@dataclass(frozen=True)
class Flow:
    """One enabled replication flow `source`->`target` and its settings."""
    source: str
    target: str
    source_client: dict
    target_client: dict
    topics: str                 # one regex: the include list's alternatives
    topics_exclude: str
    groups: str
    groups_exclude: str
    replication_factor: int
    policy: ReplicationPolicy
    sync_topic_configs: bool
    config_exclude: str
    sync_group_offsets: bool
    sync_group_offsets_interval: float
    emit_checkpoints: bool
    emit_checkpoints_interval: float
    emit_heartbeats: bool
    emit_heartbeats_interval: float
    refresh_topics_interval: float
    refresh_groups_interval: float
    offset_syncs_rf: int
    checkpoints_rf: int
    heartbeats_rf: int
    offset_syncs_location: str = "source"  # KIP-716: the cluster holding MM2's offset syncs
    connector: str = ""  # the Connect connector running this flow; "" under `minilog mirror`

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def ident(self) -> str:
        """A name for files, groups and transactional ids (no `>`)."""
        return f"{self.source}-{self.target}"

    @property
    def offset_syncs_topic(self) -> str:
        """MM2's offset-syncs topic, named after the cluster it is not on (MirrorSourceConfig's
        `offsetSyncsTopic`): `mm2-offset-syncs.B.internal` on A, `mm2-offset-syncs.A.internal`
        on B with `offset-syncs.topic.location = target`."""
        other = self.target if self.offset_syncs_location == "source" else self.source
        return self.policy.offset_syncs_topic(other)

    def wants_group(self, group: str) -> bool:
        return bool(re.fullmatch(self.groups, group)) and not (
            self.groups_exclude and re.fullmatch(self.groups_exclude, group))


@dataclass(frozen=True)
class MirrorConfig:
    clusters: tuple
    flows: tuple
    spark: dict = field(default_factory=dict)

    @property
    def checkpoint_root(self) -> str:
        return self.spark.get("spark.sql.streaming.checkpointLocation") or os.path.join(
            tempfile.gettempdir(), "minilog-mirror")


def _pattern_list(key: str, raw: str) -> str:
    """MM2's comma-separated list of regexes as one alternation, each checked."""
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    for p in parts:
        try:
            re.compile(p)
        except re.error as e:
            raise MirrorConfigError(f"{key}: {p!r} is not a valid regex: {e}") from None
    return "|".join(f"(?:{p})" for p in parts)


def _bool(key: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise MirrorConfigError(f"{key} must be true or false, got {raw!r}")
    return text == "true"


def _int(key: str, raw: str, minimum: int | None = None) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise MirrorConfigError(f"{key} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise MirrorConfigError(f"{key} must be at least {minimum}, got {value}")
    return value


def _seconds(key: str, raw: str) -> float:
    """An interval; -1 turns the task off, as MM2 takes it."""
    value = _int(key, raw)
    if value == 0 or value < -1:
        raise MirrorConfigError(f"{key} must be positive (or -1: never), got {raw!r}")
    return float(value)


def _known_flow_key(name: str) -> bool:
    return name in FLOW_DEFAULTS or name in _LEGACY or name in NO_EFFECT


def _nearest(name: str, known) -> str | None:
    close = difflib.get_close_matches(name, list(known), n=1)
    return close[0] if close else None


class _Sorter:
    """Sorts a file's keys into flows, clusters, top-level settings; collects unknown keys."""

    def __init__(self, props: dict, clusters: tuple):
        self.clusters = clusters
        self.top: dict[str, str] = {}
        self.flow: dict[tuple, dict] = {}
        self.client: dict[str, dict] = {c: {} for c in clusters}
        self.shared_client: dict[str, str] = {}
        self.spark: dict[str, str] = {}
        self.unknown: list[str] = []
        self.no_effect: set[str] = set()
        for key, value in props.items():
            self._sort(key, value)

    def _sort(self, key: str, value: str) -> None:
        if key == "clusters":
            return
        if key.startswith("spark."):
            self.spark[key] = value
            return
        m = FLOW.match(key)
        if m:
            source, target, rest = m.groups()
            for alias in (source, target):
                if alias not in self.clusters:
                    raise MirrorConfigError(f"{key}: {alias!r} is not one of clusters "
                                            f"({', '.join(self.clusters)})")
            self._flow_key(key, rest, self.flow.setdefault((source, target), {}), value)
            return
        alias, _, rest = key.partition(".")
        if alias in self.clusters and rest:
            self._client_key(key, rest, self.client[alias], value)
            return
        if _known_flow_key(key):
            self._flow_key(key, key, self.top, value)
        elif is_known_key(key):
            self.shared_client[key] = value
        else:
            self.unknown.append(key)

    def _flow_key(self, key: str, name: str, into: dict, value: str) -> None:
        name = _LEGACY.get(name, name)
        if name in NO_EFFECT:
            self.no_effect.add(key)
        elif name in FLOW_DEFAULTS:
            into[name] = value
        else:
            self.unknown.append(key)

    def _client_key(self, key: str, rest: str, into: dict, value: str) -> None:
        for role in _CLIENT_ROLES:
            if rest.startswith(role) and is_known_key(rest[len(role):]):
                rest = rest[len(role):]  # one set of clients per cluster: roles share it
                break
        if is_known_key(rest):
            into[rest] = value
        elif rest in NO_EFFECT:
            self.no_effect.add(key)
        else:
            self.unknown.append(key)

    def hint(self, key: str) -> str:
        m = FLOW.match(key)
        alias, _, rest = key.partition(".")
        if m:
            close = _nearest(m.group(3), FLOW_DEFAULTS)
            return f"{m.group(1)}->{m.group(2)}.{close}" if close else ""
        if alias in self.clusters:
            close = nearest_key(rest)
            return f"{alias}.{close}" if close else ""
        return _nearest(key, [*FLOW_DEFAULTS, "clusters"]) or nearest_key(key) or ""


def _client(sorter: _Sorter, alias: str) -> dict:
    client = {**sorter.shared_client, **sorter.client[alias]}
    if not str(client.get("bootstrap.servers", "")).strip():
        raise MirrorConfigError(f"{alias}.bootstrap.servers is required for the cluster {alias}")
    try:
        Config("admin", client)
    except ConfigError as e:
        raise MirrorConfigError(f"cluster {alias}: {e}") from None
    return client


def _flow(sorter: _Sorter, source: str, target: str) -> Flow:
    own = sorter.flow.get((source, target), {})
    prefix = f"{source}->{target}."

    def get(name: str) -> tuple[str, str]:
        if name in own:
            return prefix + name, own[name]
        return name, sorter.top.get(name, FLOW_DEFAULTS[name])

    def text(name):
        return get(name)[1]

    def boolean(name):
        return _bool(*get(name))

    def seconds(name):
        return _seconds(*get(name))

    def rf(name):
        key, raw = get(name)
        value = _int(key, raw)
        if value == 0 or value < -1:
            raise MirrorConfigError(f"{key} must be -1 (the broker's default) or at least 1, "
                                    f"got {value}")
        return value

    try:
        policy = policy_of(text("replication.policy.class"), text("replication.policy.separator"))
    except ValueError as e:
        raise MirrorConfigError(str(e)) from None
    location_key, location = get("offset-syncs.topic.location")
    if location.strip() not in ("source", "target"):
        raise MirrorConfigError(f"{location_key} must be source or target, got {location!r}")
    return Flow(
        source=source, target=target,
        source_client=_client(sorter, source), target_client=_client(sorter, target),
        topics=_pattern_list(*get("topics")), topics_exclude=_pattern_list(*get("topics.exclude")),
        groups=_pattern_list(*get("groups")), groups_exclude=_pattern_list(*get("groups.exclude")),
        replication_factor=rf("replication.factor"), policy=policy,
        sync_topic_configs=boolean("sync.topic.configs.enabled"),
        config_exclude=_pattern_list(*get("config.properties.exclude")),
        sync_group_offsets=boolean("sync.group.offsets.enabled"),
        sync_group_offsets_interval=seconds("sync.group.offsets.interval.seconds"),
        emit_checkpoints=boolean("emit.checkpoints.enabled"),
        emit_checkpoints_interval=seconds("emit.checkpoints.interval.seconds"),
        emit_heartbeats=boolean("emit.heartbeats.enabled"),
        emit_heartbeats_interval=seconds("emit.heartbeats.interval.seconds"),
        refresh_topics_interval=seconds("refresh.topics.interval.seconds"),
        refresh_groups_interval=seconds("refresh.groups.interval.seconds"),
        offset_syncs_rf=rf("offset-syncs.topic.replication.factor"),
        checkpoints_rf=rf("checkpoints.topic.replication.factor"),
        heartbeats_rf=rf("heartbeats.topic.replication.factor"),
        offset_syncs_location=location.strip())


def mirror_config(props: dict) -> MirrorConfig:
    """The flows a properties file enables, or MirrorConfigError saying (in one line) what is
    wrong with it: every unknown key at once, each with the nearest known name."""
    raw = props.get("clusters", "").strip()
    if not raw:
        raise MirrorConfigError("clusters is required: the aliases of the clusters, as "
                                "'clusters = A, B'")
    clusters = tuple(c.strip() for c in raw.split(",") if c.strip())
    bad = [c for c in clusters if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_\-]*", c)]
    if bad:
        raise MirrorConfigError(f"clusters: {bad[0]!r} is not a cluster alias (letters, digits, "
                                f"'_' and '-')")
    sorter = _Sorter(props, clusters)
    if sorter.unknown:
        named = []
        for key in sorter.unknown:
            close = sorter.hint(key)
            named.append(f"{key}" + (f" (did you mean {close}?)" if close else ""))
        raise MirrorConfigError(f"unknown key{'s' if len(named) > 1 else ''}: {', '.join(named)}")
    if sorter.no_effect:
        log.warning("settings with no effect in minilog mirror: %s",
                    ", ".join(sorted(sorter.no_effect)))
    for (source, target), own in sorter.flow.items():
        if source == target:
            raise MirrorConfigError(f"{source}->{target}: a flow needs two different clusters")
    flows = []
    for (source, target) in sorter.flow:
        enabled_key, enabled = (f"{source}->{target}.enabled",
                                sorter.flow[(source, target)].get("enabled", "false"))
        if _bool(enabled_key, enabled):
            flows.append(_flow(sorter, source, target))
    if not flows:
        raise MirrorConfigError("no flow is enabled: set A->B.enabled = true for the clusters "
                                "to mirror from A to B")
    return MirrorConfig(clusters, tuple(flows), sorter.spark)


def targeting(config: MirrorConfig, clusters: list[str] | None) -> MirrorConfig:
    """Only the flows into `clusters` (MirrorMaker's `--clusters`: the target clusters this
    node serves, so that one MM2 process runs near each target); all flows without it."""
    if not clusters:
        return config
    for alias in clusters:
        if alias not in config.clusters:
            raise MirrorConfigError(f"--clusters: {alias!r} is not one of clusters "
                                    f"({', '.join(config.clusters)})")
    flows = tuple(f for f in config.flows if f.target in clusters)
    if not flows:
        raise MirrorConfigError(f"no enabled flow targets {', '.join(clusters)}: set "
                                f"X->{clusters[0]}.enabled = true")
    return dataclasses.replace(config, flows=flows)
