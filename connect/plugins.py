"""The connector plugins a worker offers, by Kafka's class names, with their settings
(Connect's `ConfigDef`s): what `GET /connector-plugins` lists and what validation checks.

A plugin is found by its full class name, its simple name or its simple name without the
`Connector` suffix, as Connect's plugin aliases (`FileStreamSource` is
`org.apache.kafka.connect.file.FileStreamSourceConnector`).
"""
from __future__ import annotations

from .config_def import COMMON as _COMMON
from .config_def import VERSION, ConfigKey, Plugin
from .config_def import group as _group
from .mirror_plugins import MIRROR_PLUGINS

_SINK_COMMON = _group(
    "Common",
    ConfigKey("topics", "LIST", "List of topics to consume, separated by commas", default=""),
    ConfigKey("topics.regex", "STRING", "Regular expression giving topics to consume.",
              default=""),
)

FILE_SOURCE = Plugin("org.apache.kafka.connect.file.FileStreamSourceConnector", "source", (
    *_COMMON,
    ConfigKey("file", "STRING", "Source filename. minilog reads a file (not stdin)."),
    ConfigKey("topic", "LIST", "The topic to publish data to", required=True),
    ConfigKey("batch.size", "INT", "The maximum number of records the source task can read "
              "from the file each time it is polled", default="2000", importance="LOW"),
))
FILE_SINK = Plugin("org.apache.kafka.connect.file.FileStreamSinkConnector", "sink", (
    *_COMMON, *_SINK_COMMON,
    ConfigKey("file", "STRING", "Destination filename. minilog writes a file (not stdout)."),
))

JDBC_SINK = Plugin("io.confluent.connect.jdbc.JdbcSinkConnector", "sink", (
    *_COMMON, *_SINK_COMMON,
    *_group(
        "Connection",
        ConfigKey("connection.url", "STRING",
                  "JDBC connection URL: jdbc:postgresql://HOST:PORT/DB", required=True),
        ConfigKey("connection.user", "STRING", "JDBC connection user."),
        ConfigKey("connection.password", "PASSWORD", "JDBC connection password.")),
    *_group(
        "Writes",
        ConfigKey("table.name.format", "STRING", "A format string for the destination table "
                  "name, which may contain '${topic}'.", default="${topic}"),
        ConfigKey("insert.mode", "STRING", "The insertion mode to use: insert or upsert.",
                  default="insert"),
        ConfigKey("delete.enabled", "BOOLEAN", "Whether to treat null record values as "
                  "deletes. Requires pk.mode to be record_key.", default="false")),
    *_group(
        "Data Mapping",
        ConfigKey("pk.mode", "STRING",
                  "The primary key mode: none, record_key or record_value.", default="none"),
        ConfigKey("pk.fields", "LIST", "List of comma-separated primary key field names.",
                  default="")),
    *_group(
        "DDL Support",
        ConfigKey("auto.create", "BOOLEAN", "Whether to automatically create the destination "
                  "table based on record schema.", default="false")),
))

PLUGINS = (FILE_SINK, FILE_SOURCE, JDBC_SINK, *MIRROR_PLUGINS)


def find_plugin(name: str | None) -> Plugin | None:
    for plugin in PLUGINS:
        if name in plugin.aliases:
            return plugin
    return None


def plugin_listing() -> list[dict[str, str]]:
    """`GET /connector-plugins`: connectors only, as Connect answers without connectorsOnly=false."""
    return [{"class": p.class_name, "type": p.type, "version": VERSION} for p in PLUGINS]
