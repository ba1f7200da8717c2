"""The connector plugins a worker offers, by Kafka's class names, with their settings
(Connect's `ConfigDef`s): what `GET /connector-plugins` lists and what validation checks.

A plugin is found by its full class name, its simple name or its simple name without the
`Connector` suffix, as Connect's plugin aliases (`FileStreamSource` is
`org.apache.kafka.connect.file.FileStreamSourceConnector`).
"""
from __future__ import annotations

from dataclasses import dataclass

VERSION = "3.9.0"  # the Kafka release whose Connect REST API this worker answers as


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str                  # Connect's type names: STRING, INT, LIST, CLASS, BOOLEAN
    documentation: str
    default: str | None = None
    required: bool = False     # no default: Connect calls it "required"
    importance: str = "HIGH"
    group: str | None = None


@dataclass(frozen=True)
class Plugin:
    class_name: str
    type: str                  # source | sink
    keys: tuple[ConfigKey, ...]

    @property
    def aliases(self) -> tuple[str, ...]:
        simple = self.class_name.rsplit(".", 1)[1]
        return (self.class_name, simple, simple.removesuffix("Connector"))


_COMMON = (
    ConfigKey("name", "STRING", "Globally unique name to use for this connector.",
              required=True, group="Common"),
    ConfigKey("connector.class", "STRING", "Name or alias of the class for this connector.",
              required=True, group="Common"),
    ConfigKey("tasks.max", "INT", "Maximum number of tasks to use for this connector.",
              default="1", group="Common"),
    ConfigKey("key.converter", "CLASS", "Converter class for keys (overrides the worker's).",
              importance="LOW", group="Common"),
    ConfigKey("value.converter", "CLASS", "Converter class for values (overrides the "
              "worker's).", importance="LOW", group="Common"),
)
_SINK_COMMON = (
    ConfigKey("topics", "LIST", "List of topics to consume, separated by commas",
              default="", group="Common"),
    ConfigKey("topics.regex", "STRING", "Regular expression giving topics to consume.",
              default="", group="Common"),
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
    ConfigKey("connection.url", "STRING", "JDBC connection URL: jdbc:postgresql://HOST:PORT/DB",
              required=True, group="Connection"),
    ConfigKey("connection.user", "STRING", "JDBC connection user.", group="Connection"),
    ConfigKey("connection.password", "PASSWORD", "JDBC connection password.",
              group="Connection"),
    ConfigKey("table.name.format", "STRING", "A format string for the destination table name, "
              "which may contain '${topic}'.", default="${topic}", group="Writes"),
    ConfigKey("insert.mode", "STRING", "The insertion mode to use: insert or upsert.",
              default="insert", group="Writes"),
    ConfigKey("delete.enabled", "BOOLEAN", "Whether to treat null record values as deletes. "
              "Requires pk.mode to be record_key.", default="false", group="Writes"),
    ConfigKey("pk.mode", "STRING", "The primary key mode: none, record_key or record_value.",
              default="none", group="Data Mapping"),
    ConfigKey("pk.fields", "LIST", "List of comma-separated primary key field names.",
              default="", group="Data Mapping"),
    ConfigKey("auto.create", "BOOLEAN", "Whether to automatically create the destination table "
              "based on record schema.", default="false", group="DDL Support"),
))

PLUGINS = (FILE_SINK, FILE_SOURCE, JDBC_SINK)


def find_plugin(name: str | None) -> Plugin | None:
    for plugin in PLUGINS:
        if name in plugin.aliases:
            return plugin
    return None


def plugin_listing() -> list[dict[str, str]]:
    """`GET /connector-plugins`: connectors only, as Connect answers without connectorsOnly=false."""
    return [{"class": p.class_name, "type": p.type, "version": VERSION} for p in PLUGINS]
