"""Connect's converters, by their class names, as Spark column expressions (no per-record
Python): `fromConnect` turns a string column (what the file connectors carry, Connect's STRING
schema) into a record's key or value, `toConnect` turns a record's bytes back into a string.

StringConverter: UTF-8 text. JsonConverter: JSON; with `schemas.enable` (its default, true) the
envelope `{"schema": {"type": "string", "optional": false}, "payload": ...}`, without it the bare
JSON value. ByteArrayConverter: bytes as they are (Connect refuses a STRING value there, and so
does this worker: the task fails with Connect's message).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

_PKG = "org.apache.kafka.connect"
STRING = f"{_PKG}.storage.StringConverter"
JSON = f"{_PKG}.json.JsonConverter"
BYTES = f"{_PKG}.converters.ByteArrayConverter"
_ALIASES = {name.rsplit(".", 1)[1]: name for name in (STRING, JSON, BYTES)}


# Connect data as Single Message Transforms see it: (schema in JsonConverter's JSON form, or
# None for schemaless data; the payload as JSON has it: dict, list, str, int, float, bool, None)
ConnectData = tuple[dict | None, Any]
OPTIONAL_STRING = {"type": "string", "optional": True}
OPTIONAL_BYTES = {"type": "bytes", "optional": True}
_NO_ENVELOPE = ("JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and "
                "may not contain additional fields. If you are trying to deserialize plain JSON "
                "data, set schemas.enable=false in your converter configuration.")


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

    def decode(self, raw: list[bytes | str | None]) -> list[ConnectData]:
        """A batch's serialized keys or values as the converter's `toConnectData` gives them
        (what transforms work on): one pass over the batch, once per batch."""
        if self.class_name == BYTES:
            return [(OPTIONAL_BYTES, r.encode() if isinstance(r, str) else r) for r in raw]
        texts = [r.decode("utf-8") if isinstance(r, bytes) else r for r in raw]
        if self.class_name == STRING:
            return [(OPTIONAL_STRING, t) for t in texts]
        return [self._from_json(t) for t in texts]

    def _from_json(self, text: str | None) -> ConnectData:
        if text is None:
            return None, None
        try:
            parsed = json.loads(text)
        except ValueError as e:
            raise ConverterError(f"Converting byte[] to Kafka Connect data failed due to "
                                 f"serialization error: {e}") from None
        if not self.schemas_enable:
            return None, parsed
        if not isinstance(parsed, dict) or set(parsed) != {"schema", "payload"}:
            raise ConverterError(_NO_ENVELOPE)
        return parsed["schema"], parsed["payload"]

    def encode(self, data: list[ConnectData]) -> list[bytes | str | None]:
        """Connect data back into the converter's serialized form (`fromConnectData`)."""
        if self.class_name == BYTES:
            return [_bytes(payload) for _, payload in data]
        if self.class_name == STRING:
            return [None if p is None else p if isinstance(p, str) else _java_text(p)
                    for _, p in data]
        dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
        if self.schemas_enable:
            return [None if s is None and p is None else dumps({"schema": s, "payload": p})
                    for s, p in data]
        return [None if p is None else dumps(p) for _, p in data]


def _bytes(payload: Any) -> bytes | None:
    if payload is None or isinstance(payload, bytes):
        return payload
    raise ConverterError(f"ByteArrayConverter is not compatible with objects of type "
                         f"{java_class(payload)}")


def _java_text(payload: Any) -> str:
    """What StringConverter writes for a non-string (Java's toString)."""
    return ("true" if payload else "false") if isinstance(payload, bool) else str(payload)


_JAVA_CLASSES = {bool: "java.lang.Boolean", int: "java.lang.Long", float: "java.lang.Double",
                 str: "java.lang.String", bytes: "[B", list: "java.util.ArrayList",
                 dict: "java.util.HashMap"}


def java_class(payload: Any) -> str:
    """The Java class Connect would hold `payload` as (named in Connect's error messages)."""
    return "null" if payload is None else _JAVA_CLASSES.get(type(payload), type(payload).__name__)


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
