"""The transforms that rewrite fields of a record's key or value (`$Key` / `$Value`):
InsertField, ReplaceField, MaskField, TimestampConverter (Cast and Flatten: cast.py and
flatten.py), with Kafka's settings, semantics and error messages
(org.apache.kafka.connect.transforms).

They work on Connect data as the connector's converter decodes it (records.py: once per batch):
schemaless data (JsonConverter with `schemas.enable=false`: a JSON object is a Map) or data with
a schema (`schemas.enable=true`: a struct schema in JsonConverter's JSON form and its payload).
A key or value of any other shape fails the task with Connect's DataException message, as a
StringConverter value does in Kafka. Timestamps are JsonConverter's: a `Timestamp` is epoch
milliseconds, a `Date` days since the epoch, a `Time` milliseconds since midnight; schemaless
data holds all three as epoch milliseconds (the `java.util.Date` Kafka hands to the sink).
"""
from __future__ import annotations

import abc
from typing import Any

from .converters import ConnectData, java_class
from .java_dates import JavaDateFormat, PatternError
from .records import Records

LOGICAL = "org.apache.kafka.connect.data."
DAY_MS = 86_400_000


class DataException(ValueError):
    """A record a transform cannot handle (Connect's DataException): the task fails."""


class TransformConfigError(ValueError):
    """A setting the transform refuses when it is configured: the task fails to start."""


def require_map(payload: Any, purpose: str) -> dict:
    if not isinstance(payload, dict):
        raise DataException(f"Only Map objects supported in absence of schema for [{purpose}], "
                            f"found: {java_class(payload)}")
    return payload


def require_struct(schema: dict, payload: Any, purpose: str) -> dict:
    if schema.get("type") != "struct" or not isinstance(payload, dict):
        raise DataException(f"Only Struct objects supported for [{purpose}], found: "
                            f"{java_class(payload)}")
    return payload


def settings_list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


class FieldTransform(abc.ABC):
    """One transform of `side` ("key" or "value"), applied to the records a predicate selects."""

    purpose = ""

    def __init__(self, side: str) -> None:
        self.side = side

    def apply(self, records: Records, rows: list[bool] | None) -> None:
        data = records.connect_data(self.side)
        out = list(data)
        for i, (schema, payload) in enumerate(data):
            if rows is None or rows[i]:
                out[i] = self.one(records, i, schema, payload)
        records.set_connect_data(self.side, out)

    @abc.abstractmethod
    def one(self, records: Records, i: int, schema: dict | None, payload: Any) -> ConnectData:
        """The transformed (schema, payload) of record `i`."""


def _spec(spec: str | None) -> tuple[str, bool] | None:
    """InsertField's `name`, `name?` (optional, the default) or `name!` (required)."""
    if spec is None:
        return None
    if spec.endswith(("?", "!")):
        return spec[:-1], spec.endswith("?")
    return spec, True


class InsertField(FieldTransform):
    purpose = "field insertion"
    _SCHEMAS = {"topic": {"type": "string"}, "partition": {"type": "int32"},
                "offset": {"type": "int64"}, "static": {"type": "string"},
                "timestamp": {"type": "int64", "name": LOGICAL + "Timestamp", "version": 1}}

    def __init__(self, side: str, settings: dict[str, str]) -> None:
        super().__init__(side)
        self.specs = {k: s for k in self._SCHEMAS
                      if (s := _spec(settings.get(f"{k}.field"))) is not None}
        self.static_value = settings.get("static.value")
        if not self.specs:
            raise TransformConfigError("No field insertion configured")
        if "static" in self.specs and self.static_value is None:
            raise TransformConfigError("Invalid value null for configuration static.value: No "
                                       "value specified for static field: "
                                       + self.specs["static"][0])

    def _inserted(self, records: Records, i: int) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for what in self.specs:
            if what == "offset" and not records.sink:
                raise DataException(f"Only SinkRecord supported for [{self.purpose}], found: "
                                    f"org.apache.kafka.connect.source.SourceRecord")
            values[what] = self.static_value if what == "static" else records.meta(what)[i]
        return values

    def one(self, records: Records, i: int, schema: dict | None, payload: Any) -> ConnectData:
        if payload is None:
            return schema, payload
        values = self._inserted(records, i)
        if schema is None:
            updated = dict(require_map(payload, self.purpose))
            for what, value in values.items():
                # Kafka leaves out a partition or timestamp the record does not have
                if value is not None or what in ("topic", "offset"):
                    updated[self.specs[what][0]] = value
            return None, updated
        updated = dict(require_struct(schema, payload, self.purpose))
        fields = list(schema.get("fields", []))
        names = {f["field"] for f in fields}
        for what, (name, optional) in self.specs.items():
            if name in names:
                raise DataException(f"Cannot create field because of field name duplication "
                                    f"{name}")
            fields.append({**self._SCHEMAS[what], "optional": optional, "field": name})
            names.add(name)
            updated[name] = values[what]
        return {**schema, "fields": fields}, updated


class ReplaceField(FieldTransform):
    purpose = "field replacement"

    def __init__(self, side: str, settings: dict[str, str]) -> None:
        super().__init__(side)
        self.exclude = set(settings_list(settings.get("exclude")))
        self.include = set(settings_list(settings.get("include")))
        self.renames = parse_renames(settings_list(settings.get("renames")))

    def _keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def one(self, records: Records, i: int, schema: dict | None, payload: Any) -> ConnectData:
        if payload is None:
            return schema, payload
        if schema is None:
            value = require_map(payload, self.purpose)
            return None, {self.renames.get(k, k): v for k, v in value.items() if self._keep(k)}
        value = require_struct(schema, payload, self.purpose)
        kept = [f for f in schema.get("fields", []) if self._keep(f["field"])]
        fields = [{**f, "field": self.renames.get(f["field"], f["field"])} for f in kept]
        updated = {self.renames.get(f["field"], f["field"]): value.get(f["field"]) for f in kept}
        return {**schema, "fields": fields}, updated


def parse_renames(mappings: list[str]) -> dict[str, str]:
    out = {}
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) != 2:
            raise TransformConfigError(f"Invalid value [{', '.join(mappings)}] for "
                                       f"configuration renames: Invalid rename mapping: "
                                       f"{mapping}")
        out[parts[0]] = parts[1]
    return out


# the Java class of a field's value, by its schema (what MaskField's messages name)
_SCHEMA_CLASSES = {"int8": "java.lang.Byte", "int16": "java.lang.Short",
                   "int32": "java.lang.Integer", "int64": "java.lang.Long",
                   "float32": "java.lang.Float", "float64": "java.lang.Double",
                   "boolean": "java.lang.Boolean", "string": "java.lang.String", "bytes": "[B",
                   "array": "java.util.ArrayList", "map": "java.util.HashMap",
                   "struct": "org.apache.kafka.connect.data.Struct"}
_MASKS = {"java.lang.Boolean": False, "java.lang.Byte": 0, "java.lang.Short": 0,
          "java.lang.Integer": 0, "java.lang.Long": 0, "java.lang.Float": 0.0,
          "java.lang.Double": 0.0, "java.util.Date": 0, "java.lang.String": ""}
_NUMBERS = {"java.lang.Byte": int, "java.lang.Short": int, "java.lang.Integer": int,
            "java.lang.Long": int, "java.lang.Float": float, "java.lang.Double": float}


def _schema_class(schema: dict) -> str:
    if str(schema.get("name", "")).removeprefix(LOGICAL) in ("Timestamp", "Date", "Time"):
        return "java.util.Date"
    return _SCHEMA_CLASSES.get(schema.get("type", ""), "java.lang.Object")


class MaskField(FieldTransform):
    purpose = "mask fields"

    def __init__(self, side: str, settings: dict[str, str]) -> None:
        super().__init__(side)
        self.fields = settings_list(settings.get("fields"))
        self.replacement = settings.get("replacement")

    def masked(self, value: Any, cls: str) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            if cls in _MASKS:
                return _MASKS[cls]
            if cls in ("java.util.ArrayList", "java.util.HashMap"):
                return [] if cls == "java.util.ArrayList" else {}
            raise DataException(f"Cannot mask value of type: class {cls}")
        if cls == "java.lang.String":
            return self.replacement
        if cls not in _NUMBERS:
            raise DataException(f"Cannot mask value of type class {cls} with custom "
                                f"replacement.")
        try:
            return _NUMBERS[cls](self.replacement)
        except ValueError:
            raise DataException(f"Unable to convert {self.replacement} (class java.lang.String) "
                                f"to number") from None

    def one(self, records: Records, i: int, schema: dict | None, payload: Any) -> ConnectData:
        if schema is None:
            updated = dict(require_map(payload, self.purpose))
            for name in self.fields:
                value = updated.get(name)
                updated[name] = self.masked(value, java_class(value))
            return None, updated
        updated = dict(require_struct(schema, payload, self.purpose))
        for field in schema.get("fields", []):
            if field["field"] in self.fields:
                updated[field["field"]] = self.masked(updated.get(field["field"]),
                                                      _schema_class(field))
        return schema, updated


TIMESTAMP_TYPES = ("string", "unix", "Date", "Time", "Timestamp")
UNIX_PRECISIONS = ("nanoseconds", "microseconds", "milliseconds", "seconds")
_TO_MILLIS = {"seconds": (1000, 1), "milliseconds": (1, 1), "microseconds": (1, 1000),
              "nanoseconds": (1, 1_000_000)}


def _truncated(numerator: int, divisor: int) -> int:
    """Java's integer division (toward zero), as TimeUnit converts."""
    q = abs(numerator) // divisor
    return q if numerator >= 0 else -q


class TimestampConverter(FieldTransform):
    purpose = "converting timestamp formats"

    def __init__(self, side: str, settings: dict[str, str]) -> None:
        super().__init__(side)
        self.field = settings.get("field", "")
        self.target = settings["target.type"]
        self.precision = settings.get("unix.precision", "milliseconds")
        pattern = settings.get("format", "")
        if self.target == "string" and not pattern.strip():
            raise TransformConfigError("TimestampConverter requires format option to be "
                                       "specified when using string timestamps")
        try:
            self.format = JavaDateFormat(pattern) if pattern.strip() else None
        except PatternError:
            raise TransformConfigError(f"TimestampConverter requires a SimpleDateFormat-"
                                       f"compatible pattern for string timestamps: "
                                       f"{pattern}") from None

    def _to_millis(self, kind: str, value: Any) -> int:
        if kind == "string":
            if not isinstance(value, str):
                raise DataException(f"Expected string timestamp to be a String, but found "
                                    f"class {java_class(value)}")
            try:
                return self.format.parse(value) if self.format else int("x")
            except ValueError:
                raise DataException(f"Could not parse timestamp: value ({value}) does not match "
                                    f"pattern ({self.format.pattern if self.format else None})"
                                    ) from None
        if not isinstance(value, int) or isinstance(value, bool):
            expected = ("Unix timestamp to be a Long" if kind == "unix"
                        else f"{kind} to be a java.util.Date")
            raise DataException(f"Expected {expected}, but found class {java_class(value)}")
        if kind == "unix":
            times, divisor = _TO_MILLIS[self.precision]
            return _truncated(value * times, divisor)
        return value * DAY_MS if kind == "Date" else value

    def _from_millis(self, millis: int, with_schema: bool) -> Any:
        if self.target == "string":
            return self.format.format(millis)  # type: ignore[union-attr]
        if self.target == "unix":
            divisor, times = _TO_MILLIS[self.precision]
            return _truncated(millis * times, divisor)
        if self.target == "Date":
            return millis // DAY_MS if with_schema else millis - millis % DAY_MS
        return millis % DAY_MS if self.target == "Time" else millis

    def convert(self, value: Any, kind: str | None, with_schema: bool) -> Any:
        if value is None:
            return None
        if kind is None:  # schemaless: inferred from the value
            if isinstance(value, int) and not isinstance(value, bool):
                kind = "unix"
            elif isinstance(value, str):
                kind = "string"
            else:
                raise DataException(f"TimestampConverter does not support class "
                                    f"{java_class(value)} objects as timestamps")
        return self._from_millis(self._to_millis(kind, value), with_schema)

    def target_schema(self, optional: bool) -> dict:
        if self.target in ("string", "unix"):
            return {"type": "string" if self.target == "string" else "int64",
                    "optional": optional}
        return {"type": "int64" if self.target == "Timestamp" else "int32",
                "optional": optional, "name": LOGICAL + self.target, "version": 1}

    def one(self, records: Records, i: int, schema: dict | None, payload: Any) -> ConnectData:
        if schema is None:
            if payload is None or not self.field:
                return None, self.convert(payload, None, False)
            updated = dict(require_map(payload, self.purpose))
            updated[self.field] = self.convert(updated.get(self.field), None, False)
            return None, updated
        if not self.field:
            return (self.target_schema(bool(schema.get("optional"))),
                    self.convert(payload, timestamp_kind(schema), True))
        if payload is not None:
            require_struct(schema, payload, self.purpose)
        fields = [{**self.target_schema(bool(f.get("optional"))), "field": f["field"]}
                  if f["field"] == self.field else f for f in schema.get("fields", [])]
        if payload is None:
            return {**schema, "fields": fields}, None
        updated = dict(payload)
        for f in schema.get("fields", []):
            if f["field"] == self.field:
                updated[self.field] = self.convert(payload.get(self.field), timestamp_kind(f),
                                                   True)
        return {**schema, "fields": fields}, updated


def timestamp_kind(schema: dict) -> str:
    logical = str(schema.get("name", "")).removeprefix(LOGICAL)
    if logical in ("Timestamp", "Date", "Time"):
        return logical
    if schema.get("type") in ("string", "int64"):
        return "string" if schema["type"] == "string" else "unix"
    raise DataException(f"Schema {schema} does not correspond to a known timestamp type format")
