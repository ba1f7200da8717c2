"""Value (and key) serializers: JSON, and Avro with the Confluent wire framing.

Plug them into a producer as `value.serializer` / `key.serializer` and into a consumer as
`value.deserializer` / `key.deserializer`; each is a callable `(obj, topic) -> bytes` or
`(bytes, topic) -> obj`, and None passes through both ways (tombstones stay tombstones).

Avro uses fastavro with a schema the user gives (no schema registry client here). With a
`schema_id`, values are framed as Confluent's serializers frame them, so registry-aware
consumers read them: magic byte 0, the 4-byte big-endian schema id, then the Avro binary body.
Without one, values are bare Avro binary.
"""
import io
import json
import struct
from typing import Any

import fastavro

_MAGIC = 0
_FRAME = struct.Struct(">bI")


class SerializationError(ValueError):
    """A value that cannot be (de)serialized with the given format or schema."""


class JSONSerializer:
    """Objects to UTF-8 JSON; `json.dumps` keyword arguments are passed through."""

    def __init__(self, **dumps_kwargs: Any) -> None:
        dumps_kwargs.setdefault("separators", (",", ":"))
        self._kwargs = dumps_kwargs

    def __call__(self, obj: Any, topic: str | None = None) -> bytes | None:
        if obj is None:
            return None
        try:
            return json.dumps(obj, **self._kwargs).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise SerializationError(f"cannot serialize to JSON: {e}") from None


class JSONDeserializer:
    def __init__(self, **loads_kwargs: Any) -> None:
        self._kwargs = loads_kwargs

    def __call__(self, data: bytes | None, topic: str | None = None) -> Any:
        if data is None:
            return None
        try:
            return json.loads(data, **self._kwargs)
        except ValueError as e:
            raise SerializationError(f"not JSON: {e}") from None


def _parse(schema: Any) -> Any:
    try:
        if isinstance(schema, str):
            schema = json.loads(schema)
        return fastavro.parse_schema(schema)
    except (ValueError, TypeError, fastavro.schema.SchemaParseException) as e:
        raise SerializationError(f"invalid Avro schema: {e}") from None


class AvroSerializer:
    """Records to Avro binary with `schema` (dict or JSON text).

    `schema_id` (the id a schema registry gave this schema) turns on the Confluent framing.
    """

    def __init__(self, schema: Any, schema_id: int | None = None) -> None:
        self.schema = _parse(schema)
        self.schema_id = schema_id
        self._prefix = b"" if schema_id is None else _FRAME.pack(_MAGIC, schema_id)

    def __call__(self, obj: Any, topic: str | None = None) -> bytes | None:
        if obj is None:
            return None
        out = io.BytesIO()
        out.write(self._prefix)
        try:
            fastavro.schemaless_writer(out, self.schema, obj)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise SerializationError(f"value does not match the Avro schema: {e!r}") from None
        return out.getvalue()


class AvroDeserializer:
    """Avro binary back to Python objects.

    `schema`: the writer schema for bare Avro (or the only schema of framed data);
    `schemas`: {schema_id: writer schema} for framed data written with several schemas;
    `framed`: whether values carry the Confluent framing (default: True when `schemas` is
    given, else False); `reader_schema`: optional schema to resolve into (schema evolution).
    """

    def __init__(self, schema: Any = None, schemas: dict[int, Any] | None = None,
                 framed: bool | None = None, reader_schema: Any = None) -> None:
        if schema is None and not schemas:
            raise SerializationError("AvroDeserializer needs a schema or {schema_id: schema}")
        self._schema = None if schema is None else _parse(schema)
        self._schemas = {int(k): _parse(v) for k, v in (schemas or {}).items()}
        self.framed = bool(schemas) if framed is None else framed
        self._reader = None if reader_schema is None else _parse(reader_schema)

    def __call__(self, data: bytes | None, topic: str | None = None) -> Any:
        if data is None:
            return None
        buf = io.BytesIO(data)
        writer = self._schema
        if self.framed:
            if len(data) < _FRAME.size or data[0] != _MAGIC:
                raise SerializationError("not Confluent-framed Avro (magic byte 0 missing)")
            _, schema_id = _FRAME.unpack_from(data)
            buf.seek(_FRAME.size)
            writer = self._schemas.get(schema_id, self._schema if not self._schemas else None)
            if writer is None:
                raise SerializationError(f"unknown Avro schema id {schema_id}")
        if writer is None:  # bare Avro with only {schema_id: schema}: no writer schema
            raise SerializationError("bare Avro (framed=False) needs `schema`, the writer schema")
        try:
            return fastavro.schemaless_reader(buf, writer, self._reader)
        except (ValueError, TypeError, EOFError, IndexError, KeyError) as e:
            raise SerializationError(f"value is not Avro of this schema: {e!r}") from None
