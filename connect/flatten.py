"""Flatten (`org.apache.kafka.connect.transforms.Flatten$Key` / `$Value`): a nested struct or
map becomes one level, each field named by its path joined with `delimiter` (default "."), as
Kafka's Flatten does: primitives, bytes and arrays are kept as they are, structs (maps, when
schemaless) are opened, a field inside an optional struct becomes optional, and a struct's
default reaches the fields it holds (a null struct's fields are their defaults, or null). A
null key or value goes through unchanged.

The flattened schema is built once for each new schema the batch brings, not per record.
"""
from __future__ import annotations

from typing import Any

from .converters import ConnectData, java_class
from .field_transforms import DataException, FieldTransform, require_map, require_struct
from .records import Records

_KEPT = ("int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string", "bytes",
         "array")
_BASICS = ("type", "name", "version", "doc", "parameters", "items")  # SchemaUtil.copySchemaBasics


class Flatten(FieldTransform):
    purpose = "flattening"

    def __init__(self, side: str, settings: dict[str, str]) -> None:
        super().__init__(side)
        self.delimiter = settings.get("delimiter", ".")
        self._schemas: tuple[dict, dict] | None = None  # the last schema seen, and its flat one

    def _name(self, prefix: str, name: str) -> str:
        return f"{prefix}{self.delimiter}{name}" if prefix else name

    # ---- schemaless: maps ---------------------------------------------------------------------
    def _flat_map(self, value: dict, prefix: str, out: dict[str, Any]) -> None:
        for key, item in value.items():
            name = self._name(prefix, key)
            if isinstance(item, dict):
                self._flat_map(item, name, out)
            elif item is None or isinstance(item, (bool, int, float, str, bytes, list)):
                out[name] = item
            else:
                raise DataException(f"Flatten transformation does not support class "
                                    f"{java_class(item)} for record without schemas (for field "
                                    f"{name}).")

    # ---- with a schema: structs ---------------------------------------------------------------
    def flat_schema(self, schema: dict) -> dict:
        if self._schemas is not None and self._schemas[0] == schema:
            return self._schemas[1]
        fields: list[dict] = []
        self._flat_fields(schema, "", bool(schema.get("optional")), schema.get("default"), fields)
        flat = {k: schema[k] for k in ("name", "version", "doc", "parameters") if k in schema}
        flat.update(type="struct", optional=bool(schema.get("optional")), fields=fields)
        self._schemas = (schema, flat)
        return flat

    def _flat_fields(self, schema: dict, prefix: str, optional: bool, parent_default: Any,
                     out: list[dict]) -> None:
        for field in schema.get("fields", []):
            name = self._name(prefix, field["field"])
            field_optional = optional or bool(field.get("optional"))
            default = field.get("default")
            if default is None and isinstance(parent_default, dict):
                default = parent_default.get(field["field"])
            kind = field.get("type")
            if kind == "struct":
                self._flat_fields(field, name, field_optional, default, out)
            elif kind in _KEPT:
                flat = {k: field[k] for k in _BASICS if k in field}
                flat["optional"] = field_optional
                if default is not None:
                    flat["default"] = default
                out.append({**flat, "field": name})
            else:
                raise DataException(f"Flatten transformation does not support "
                                    f"{str(kind).upper()} for record with schemas (for field "
                                    f"{name}).")

    def _flat_struct(self, schema: dict, value: dict | None, prefix: str,
                     out: dict[str, Any]) -> None:
        if value is None:
            return
        for field in schema.get("fields", []):
            name = self._name(prefix, field["field"])
            item = value.get(field["field"])
            if field.get("type") == "struct":
                self._flat_struct(field, item, name, out)
            else:
                out[name] = item if item is not None else field.get("default")

    def one(self, records: Records, i: int, schema: dict | None, payload: Any) -> ConnectData:
        if payload is None:
            return schema, payload
        out: dict[str, Any] = {}
        if schema is None:
            self._flat_map(require_map(payload, self.purpose), "", out)
            return None, out
        value = require_struct(schema, payload, self.purpose)
        flat = self.flat_schema(schema)
        self._flat_struct(schema, value, "", out)
        # the fields of a null struct are null, or their default (Struct.get)
        return flat, {f["field"]: out.get(f["field"], f.get("default")) for f in flat["fields"]}
