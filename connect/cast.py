"""Cast (`org.apache.kafka.connect.transforms.Cast$Key` / `$Value`): fields of a struct or map,
or the whole key or value, cast to int8, int16, int32, int64, float32, float64, boolean or
string, with Kafka's `spec` (`field:type,...`, or one type for the whole value), its
conversions and its messages.

The values are Connect data as JsonConverter decodes them (field_transforms.py), so the Java
class Kafka would see comes from the schema where there is one (an int8 field is a Byte; bytes
are base64 text, as JsonConverter carries them), from the value otherwise (an integer is a Long,
a fraction a Double, as schemaless JsonConverter reads them). Java's conversions are kept where
they differ from Python's: narrowing wraps (`(byte) 300` is 44), a double to an integer
truncates and saturates, strings parse as `Integer.parseInt` / `Double.parseDouble` do, and a
double prints as `Double.toString` (`1.0E10`). The schema a spec gives a struct schema is built
once for each new schema the batch brings, not per record.
"""
from __future__ import annotations

import base64
import math
import re
import struct
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from .converters import ConnectData
from .field_transforms import (
    DAY_MS,
    LOGICAL,
    DataException,
    FieldTransform,
    TransformConfigError,
    require_map,
    require_struct,
    settings_list,
)
from .records import Records

INPUT_TYPES = ("INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN", "STRING",
               "BYTES")
OUTPUT_TYPES = INPUT_TYPES[:-1]
_ALL_TYPES = (*INPUT_TYPES, "ARRAY", "MAP", "STRUCT")
_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_INTEGER = re.compile(r"[+-]?[0-9]+")
# what Double.parseDouble accepts (after trimming), hexadecimal floats aside
_JAVA_FLOAT = re.compile(r"[+-]?(NaN|Infinity|(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)"
                         r"[fFdD]?)")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def parse_spec(mappings: list[str]) -> dict[str | None, str]:
    """`spec` as Kafka parses it: field → Connect type (lower case), None → the whole value's
    type; ConfigException's messages as TransformConfigError."""
    if not mappings:
        raise TransformConfigError("Must specify at least one field to cast.")
    casts: dict[str | None, str] = {}
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) > 2:
            # Kafka names ReplaceField's setting here (its message, kept)
            raise TransformConfigError(f"Invalid value [{', '.join(mappings)}] for configuration "
                                       f"renames: Invalid rename mapping: {mapping}")
        field = None if len(parts) == 1 else parts[0].strip()
        casts[field] = _output_type(parts[-1].strip())
    if None in casts and len(mappings) > 1:
        raise TransformConfigError("Cast transformations that specify a type to cast the entire "
                                   "value to may ony specify a single cast in their spec")
    return casts


def _output_type(name: str) -> str:
    if name.upper() not in _ALL_TYPES:
        raise TransformConfigError(f"Invalid type found in casting spec: {name}")
    if name.upper() not in OUTPUT_TYPES:
        raise TransformConfigError(f"Cast transformation does not support casting to "
                                   f"{name.upper()}; supported types are "
                                   f"[{', '.join(OUTPUT_TYPES)}]")
    return name.lower()


def _inferred_type(value: Any) -> str:
    """ConnectSchema.schemaType of the class schemaless JsonConverter data has."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray)):
        return "bytes"
    return "array" if isinstance(value, list) else "map"


def _wrap(number: int, bits: int) -> int:
    """Java's narrowing of an integer to `bits` (two's complement)."""
    half = 1 << (bits - 1)
    return ((number + half) % (1 << bits)) - half


def _float32(number: float) -> float:
    try:
        return struct.unpack("<f", struct.pack("<f", number))[0]
    except OverflowError:
        return math.copysign(math.inf, number)


def _truncated(number: float, bits: int) -> int:
    """Java's double → int (bits 32) or long (64): toward zero, saturating, NaN is 0."""
    if math.isnan(number):
        return 0
    top = (1 << (bits - 1)) - 1
    return top if number >= top else -top - 1 if number <= -top - 1 else int(number)


def _java_float_text(number: float, single: bool) -> str:
    """Double.toString / Float.toString: plain between 10^-3 and 10^7, else `d.dddEn`."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "-0.0" if math.copysign(1, number) < 0 else "0.0"
    text = repr(number)
    if single:  # the shortest digits that read back as the same float32
        text = next(t for p in range(1, 10)
                    if _float32(float(t := f"{number:.{p}g}")) == number)
    sign, digit_tuple, exponent = Decimal(text).as_tuple()
    point = len(digit_tuple) + int(exponent)  # where the decimal point goes in the digits
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    minus = "-" if sign else ""
    if 1e-3 <= abs(number) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{digits}"
        return f"{minus}{digits[:point].ljust(point, '0')}.{digits[point:] or '0'}"
    return f"{minus}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _date_text(millis: int) -> str:
    """Values.dateFormatFor: a time of day, a date or a timestamp, in UTC."""
    moment = _EPOCH + timedelta(milliseconds=millis)
    if millis < DAY_MS:
        return moment.strftime("%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    if millis % DAY_MS == 0:
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _decimal(schema: dict, value: str) -> Decimal:
    """A Connect Decimal (JsonConverter's base64 of the unscaled two's complement integer)."""
    unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
    return Decimal(unscaled).scaleb(-int((schema.get("parameters") or {}).get("scale", 0)))


def cast_value(schema: dict | None, value: Any, target: str) -> Any:
    """Cast.castValueToType: `value` (of `schema`, or schemaless) as a `target` value."""
    if value is None:
        return None
    kind = schema.get("type") if schema is not None else _inferred_type(value)
    if str(kind).upper() not in INPUT_TYPES:
        raise DataException(f"Cast transformation does not support casting from "
                            f"{str(kind).upper()}; supported types are "
                            f"[{', '.join(INPUT_TYPES)}]")
    logical = str((schema or {}).get("name", "")).removeprefix(LOGICAL)
    if logical == "Decimal" and isinstance(value, str):
        value, kind = _decimal(schema, value), "decimal"  # type: ignore[arg-type]
    elif logical in ("Date", "Time", "Timestamp") and target == "string":
        return _date_text(value * DAY_MS if logical == "Date" else value)
    try:
        return _cast(value, kind, target)
    except DataException:
        raise
    except ValueError:  # NumberFormatException
        raise DataException(f"Value ({_java_text(value, kind)}) was out of range for requested "
                            f"data type") from None


def _java_text(value: Any, kind: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_float_text(value, kind == "float32")
    if kind == "bytes":
        return value if isinstance(value, str) else base64.b64encode(value).decode()
    return str(value)


def _cast(value: Any, kind: str, target: str) -> Any:
    if target == "string":
        return _java_text(value, kind)
    if kind == "bytes":
        raise DataException("Unexpected type in Cast transformation: class [B")
    if target == "boolean":
        if isinstance(value, str):
            return value.lower() == "true"
        return _truncated(float(value), 64) != 0 if not isinstance(value, (bool, int)) \
            else bool(value)
    if target in ("float32", "float64"):
        if isinstance(value, str):
            text = value.strip()
            if not _JAVA_FLOAT.fullmatch(text):
                raise ValueError(value)
            number = float(text.rstrip("fFdD"))
        else:
            number = float(value)
        return _float32(number) if target == "float32" else number
    bits = _BITS[target]
    if isinstance(value, str):
        if not _INTEGER.fullmatch(value) or _wrap(int(value), bits) != int(value):
            raise ValueError(value)
        return int(value)
    if isinstance(value, (bool, int)):
        return _wrap(int(value), bits)
    return _wrap(_truncated(float(value), 32 if bits < 64 else 64), bits)


class Cast(FieldTransform):
    purpose = "cast types"

    def __init__(self, side: str, settings: dict[str, str]) -> None:
        super().__init__(side)
        self.casts = parse_spec(settings_list(settings.get("spec")))
        self.whole = self.casts.get(None)
        self.replace_null = settings.get("replace.null.with.default", "true").strip().lower() \
            != "false"
        self._schemas: tuple[dict, dict] | None = None  # the last schema seen, and its cast

    def updated_schema(self, schema: dict) -> dict:
        if self._schemas is not None and self._schemas[0] == schema:
            return self._schemas[1]
        if self.whole is not None:
            updated = {k: schema[k] for k in ("name", "version", "doc", "parameters")
                       if k in schema}
            updated.update(type=self.whole, optional=bool(schema.get("optional")))
        else:
            updated = {**schema, "fields": [self._field(f) for f in schema.get("fields", [])]}
        self._schemas = (schema, updated)
        return updated

    def _field(self, field: dict) -> dict:
        target = self.casts.get(field["field"])
        if target is None:
            return field
        cast = {"type": target, "optional": bool(field.get("optional")), "field": field["field"]}
        if field.get("default") is not None:
            cast["default"] = cast_value(field, field["default"], target)
        return cast

    def one(self, records: Records, i: int, schema: dict | None, payload: Any) -> ConnectData:
        if payload is None:
            return schema, payload
        if schema is None:
            if self.whole is not None:
                return None, cast_value(None, payload, self.whole)
            updated = dict(require_map(payload, self.purpose))
            for field, target in self.casts.items():
                updated[field] = cast_value(None, updated.get(field), target)  # type: ignore
            return None, updated
        new_schema = self.updated_schema(schema)
        if self.whole is not None:
            return new_schema, cast_value(schema, payload, self.whole)
        value = require_struct(schema, payload, self.purpose)
        updated = {}
        for field in schema.get("fields", []):
            name = field["field"]
            current = value.get(name)
            if current is None and self.replace_null:
                current = field.get("default")
            target = self.casts.get(name)
            updated[name] = current if target is None else cast_value(field, current, target)
        return new_schema, updated
