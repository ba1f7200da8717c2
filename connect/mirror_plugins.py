"""MirrorMaker 2's three connectors as this worker's plugins (KIP-382: MM2 run in a Connect
cluster), by Kafka's class names, with the settings their ConfigDefs take
(`MirrorConnectorConfig`, `MirrorSourceConfig`, `MirrorCheckpointConfig`,
`MirrorHeartbeatConfig`) and the two clusters' bootstrap servers, which a Connect user sets
under `source.cluster.` and `target.cluster.` (any other client setting goes there too:
`source.cluster.security.protocol`, `target.cluster.sasl.mechanism`).

What they run is `minilog mirror`'s flow: `mirror/connector_config.py` reads the JSON into it,
and validation asks the same parser, so a setting the properties file refuses is refused here,
on its own field, with Connect's wording.
"""
from __future__ import annotations

from minilog.mirror.config import FLOW_DEFAULTS, MirrorConfigError
from minilog.mirror.connector_config import (
    SOURCE_ALIAS,
    TARGET_ALIAS,
    TARGET_ALIAS_DEFAULT,
    aliases,
    connector_flow,
)
from minilog.mirror.policy import DEFAULT, IDENTITY

from .config_def import COMMON, ConfigKey, Plugin
from .smt_plugins import boolean, invalid, one_of

PACKAGE = "org.apache.kafka.connect.mirror."


def _policy(name: str, value: str) -> list[str]:
    short = (DEFAULT, IDENTITY, DEFAULT.rsplit(".", 1)[1], IDENTITY.rsplit(".", 1)[1])
    return [] if value.strip() in short else [
        f"Invalid value {value} for configuration {name}: Class {value} could not be found "
        f"(minilog implements {DEFAULT} and {IDENTITY})"]


def _key(name: str, type_: str, doc: str, importance: str = "LOW",
         required: bool = False) -> ConfigKey:
    """A key with MM2's default (the properties file's, FLOW_DEFAULTS) and its type's check."""
    check = {"BOOLEAN": boolean, "CLASS": _policy}.get(type_)
    if name == "offset-syncs.topic.location":
        check = one_of("source", "target")
    return ConfigKey(name, type_, doc, default=FLOW_DEFAULTS.get(name), required=required,
                     importance=importance, check=check)


_CLUSTERS = (
    # a connector runs unless told not to (a properties file's flow is off unless enabled)
    ConfigKey("enabled", "BOOLEAN", "Whether to replicate source->target.", default="true",
              importance="LOW", check=boolean),
    ConfigKey(SOURCE_ALIAS, "STRING", "Alias of the source cluster.", required=True),
    ConfigKey(TARGET_ALIAS, "STRING", "Alias of the target cluster.",
              default=TARGET_ALIAS_DEFAULT),
    ConfigKey("source.cluster.bootstrap.servers", "LIST", "The source cluster's bootstrap "
              "servers (its other client settings under the same prefix).", required=True),
    ConfigKey("target.cluster.bootstrap.servers", "LIST", "The target cluster's bootstrap "
              "servers (its other client settings under the same prefix); by default the "
              "worker's own cluster.", importance="MEDIUM"),
    _key("replication.policy.class", "CLASS", "Class which defines the remote topic naming "
         "convention."),
    _key("replication.policy.separator", "STRING", "Separator used in remote topic naming "
         "convention."),
)
_TOPICS = (
    _key("topics", "LIST", "Topics to replicate: comma-separated names and regexes.", "HIGH"),
    _key("topics.exclude", "LIST", "Topics not to replicate, over `topics`.", "HIGH"),
)
_OFFSET_SYNCS = (
    _key("offset-syncs.topic.location", "STRING", "The location (source/target) of the "
         "offset-syncs topic."),
    ConfigKey("emit.offset-syncs.enabled", "BOOLEAN", "Whether the source connector stores "
              "where replicated records landed (the checkpoints need it).", default="true",
              importance="LOW", check=boolean),
)
_SOURCE = (
    *_TOPICS,
    _key("config.properties.exclude", "LIST", "Topic configs not to replicate.", "HIGH"),
    _key("refresh.topics.enabled", "BOOLEAN", "Whether to look for new topics and partitions."),
    _key("refresh.topics.interval.seconds", "LONG", "Frequency of topic refresh."),
    _key("sync.topic.configs.enabled", "BOOLEAN", "Whether to keep the remote topics' configs "
         "as the source topics'."),
    _key("sync.topic.configs.interval.seconds", "LONG", "Frequency of topic config sync."),
    _key("replication.factor", "INT", "Replication factor of the remote topics created."),
    _key("offset-syncs.topic.replication.factor", "SHORT", "Replication factor of the "
         "offset-syncs topic."),
    *_OFFSET_SYNCS,
)
_CHECKPOINT = (
    *_TOPICS,
    _key("groups", "LIST", "Consumer groups to replicate: comma-separated ids and regexes.",
         "HIGH"),
    _key("groups.exclude", "LIST", "Consumer groups not to replicate, over `groups`.", "HIGH"),
    _key("emit.checkpoints.enabled", "BOOLEAN", "Whether to replicate consumer offsets to the "
         "target cluster."),
    _key("emit.checkpoints.interval.seconds", "LONG", "Frequency of checkpoints."),
    _key("sync.group.offsets.enabled", "BOOLEAN", "Whether to commit the translated offsets "
         "to the groups on the target while they have no active members there."),
    _key("sync.group.offsets.interval.seconds", "LONG", "Frequency of consumer group offset "
         "sync."),
    _key("refresh.groups.interval.seconds", "LONG", "Frequency of group refresh."),
    _key("checkpoints.topic.replication.factor", "SHORT", "Replication factor of the "
         "checkpoints topic."),
    *_OFFSET_SYNCS,
)
_HEARTBEAT = (
    _key("emit.heartbeats.enabled", "BOOLEAN", "Whether to emit heartbeats to the target "
         "cluster."),
    _key("emit.heartbeats.interval.seconds", "LONG", "Frequency of heartbeats."),
    _key("heartbeats.topic.replication.factor", "SHORT", "Replication factor of the "
         "heartbeats topic."),
)

MIRROR_SOURCE = Plugin(PACKAGE + "MirrorSourceConnector", "source",
                       (*COMMON, *_CLUSTERS, *_SOURCE))
MIRROR_CHECKPOINT = Plugin(PACKAGE + "MirrorCheckpointConnector", "source",
                           (*COMMON, *_CLUSTERS, *_CHECKPOINT))
MIRROR_HEARTBEAT = Plugin(PACKAGE + "MirrorHeartbeatConnector", "source",
                          (*COMMON, *_CLUSTERS, *_HEARTBEAT))
MIRROR_PLUGINS = (MIRROR_CHECKPOINT, MIRROR_HEARTBEAT, MIRROR_SOURCE)
# where validation finds the clusters: the worker's own cluster, for a target without servers
_WORKER_STAND_IN = {"bootstrap.servers": "127.0.0.1:9092"}


def mirror_errors(plugin: Plugin, config: dict[str, str],
                  fields_ok: bool) -> dict[str, list[str]]:
    """The checks on several settings at once (MirrorCheckpointConfig.validate's), then, when
    every field has the right type, the mirror's own reading of the config: its complaint goes
    to the field it names."""
    if config.get("enabled", "true").strip().lower() == "false":
        return {}  # MM2 checks nothing of a disabled connector
    out: dict[str, list[str]] = {}
    if plugin is MIRROR_CHECKPOINT:
        if config.get("emit.checkpoints.enabled") == "false":
            out["emit.checkpoints.enabled"] = ["MirrorCheckpointConnector can't run with "
                                               "emit.checkpoints.enabled set to false"]
        if config.get("emit.offset-syncs.enabled") == "false":
            out["emit.offset-syncs.enabled"] = ["MirrorCheckpointConnector can't run without "
                                                "offset syncs"]
    if out or not fields_ok:
        return out
    try:
        connector_flow(config, _WORKER_STAND_IN)
    except MirrorConfigError as e:
        name, message = _field_of(plugin, config, str(e))
        out[name] = [message]
    return out


def _field_of(plugin: Plugin, config: dict[str, str], message: str) -> tuple[str, str]:
    """(field, Connect's message) for one of the mirror's one-line complaints, which start
    with the setting's name in the properties file."""
    source, target = aliases(config)
    for alias, prefix in ((source, "source.cluster."), (target, "target.cluster.")):
        message = message.replace(f" {alias}.", f" {prefix}")
        if message.startswith(f"{alias}."):
            message = prefix + message[len(alias) + 1:]
    head = message.split(" ", 1)[0].rstrip(":")
    if head in config and any(k.name == head for k in plugin.keys):
        reason = message.split(" ", 1)[1] if " " in message else message
        return head, invalid(head, config[head], reason.removeprefix(": ").strip())
    if "->" in message:  # the two aliases: a flow needs two clusters
        return TARGET_ALIAS, message
    return SOURCE_ALIAS, message
