"""Connect's converters, by their class names, as Spark column expressions (no per-record
Python): `fromConnect` turns a string column (what the file connectors carry, Connect's STRING
schema) into a record's key or value, `toConnect` turns a record's bytes back into a string.

StringConverter: UTF-8 text. JsonConverter: JSON; with `schemas.enable` (its default, true) the
envelope `{"schema": {"type": "string", "optional": false}, "payload": ...}`, without it the bare
JSON value. ByteArrayConverter: bytes as they are (Connect refuses a STRING value there, and so
does this worker: the task fails with Connect's message).
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

_PKG = "org.apache.kafka.connect"
STRING = f"{_PKG}.storage.StringConverter"
JSON = f"{_PKG}.json.JsonConverter"
BYTES = f"{_PKG}.converters.ByteArrayConverter"
_ALIASES = {name.rsplit(".", 1)[1]: name for name in (STRING, JSON, BYTES)}


class ConverterError(ValueError):
    """A converter this worker does not have, or a value it cannot convert (Connect's
    DataException): the task fails with this message."""


@dataclass(frozen=True)
class Converter:
    class_name: str
    schemas_enable: bool = True

    def from_connect(self, text: Column) -> Column:
        """A STRING-schema column as the converter serializes it."""
        if self.class_name == STRING:
            return text
        if self.class_name == BYTES:
            raise ConverterError("ByteArrayConverter is not compatible with objects of type "
                                 "class java.lang.String")
        as_json = F.regexp_extract(F.to_json(F.struct(text.alias("p"))), r'^\{"p":(.*)\}$', 1)
        if not self.schemas_enable:
            return F.when(text.isNull(), F.lit(None)).otherwise(as_json)
        return F.concat(F.lit('{"schema":{"type":"string","optional":false},"payload":'),
                        F.when(text.isNull(), F.lit("null")).otherwise(as_json), F.lit("}"))

    def to_connect(self, raw: Column) -> Column:
        """A record's bytes as the string FileStreamSink writes for them (JSON objects as JSON
        text; a JSON string as its text)."""
        text = raw.cast("string")
        if self.class_name in (STRING, BYTES):
            return text
        if self.schemas_enable:
            return F.get_json_object(text, "$.payload")
        return F.get_json_object(F.concat(F.lit('{"p":'), text, F.lit("}")), "$.p")


def converter(settings: dict[str, str]) -> Converter:
    """`settings`: {"converter": class name, **its own settings} (`schemas.enable`)."""
    name = str(settings.get("converter", "")).strip()
    name = _ALIASES.get(name, name)
    if name not in (STRING, JSON, BYTES):
        raise ConverterError(f"Class {settings.get('converter')} could not be found: this "
                             f"worker has {', '.join(sorted(_ALIASES.values()))}")
    enable = str(settings.get("schemas.enable", "true")).strip().lower()
    if enable not in ("true", "false"):
        raise ConverterError(f"Invalid value {settings.get('schemas.enable')} for configuration "
                             f"schemas.enable: Expected value to be either true or false")
    return Converter(name, enable == "true")


def connector_converter(worker: dict[str, str], config: dict[str, str], which: str) -> Converter:
    """The converter of a connector: its own `value.converter` (with `value.converter.*`)
    when set, else the worker's."""
    if which in config:
        prefix = f"{which}."
        return converter({"converter": config[which],
                          **{k[len(prefix):]: v for k, v in config.items()
                             if k.startswith(prefix)}})
    return converter(worker)
