"""Typed values, beyond Spark's Kafka connector: `valueFormat` = `json` or `avro`.

With `valueFormat`, the source's `value` column is a struct of `valueSchema` (a Spark DDL
string such as `account STRING, amount BIGINT` for JSON; an Avro record schema for Avro),
decoded on the executors; the sink encodes a struct `value` column the same way. A value
that does not decode is a null struct, as Spark's `from_json` does in its default mode.
Avro values may carry Confluent's wire framing (`valueFraming=confluent`: a zero byte and a
4-byte schema id before the Avro body; the sink writes `valueSchemaId`).
"""
import io
import json
import re
import struct

from pyspark.sql import types as T

from .errors import OptionError

# DDL type: (Spark's type, the name of pyarrow's type function). pyarrow is imported where a
# batch is converted, not here: Spark's planning steps import this module without needing it,
# and its threads would not survive the fork of a daemon that imported it (worker_daemon.py).
_DDL_TYPES = {
    "string": (T.StringType(), "string"), "binary": (T.BinaryType(), "binary"),
    "boolean": (T.BooleanType(), "bool_"), "tinyint": (T.ByteType(), "int8"),
    "smallint": (T.ShortType(), "int16"), "int": (T.IntegerType(), "int32"),
    "integer": (T.IntegerType(), "int32"), "bigint": (T.LongType(), "int64"),
    "long": (T.LongType(), "int64"), "float": (T.FloatType(), "float32"),
    "double": (T.DoubleType(), "float64"), "date": (T.DateType(), "date32"),
    "timestamp": (T.TimestampType(), "timestamp"),
}


def _pa():
    import pyarrow
    return pyarrow


def _arrow_type(ddl_type):
    pa = _pa()
    name = _DDL_TYPES[ddl_type][1]
    return pa.timestamp("us", tz="UTC") if name == "timestamp" else getattr(pa, name)()


_AVRO_TYPES = {"string": "string", "bytes": "binary", "boolean": "boolean", "int": "int",
               "long": "bigint", "float": "float", "double": "double"}
_AVRO_LOGICAL = {"timestamp-millis": "timestamp", "timestamp-micros": "timestamp",
                 "date": "date"}
_FIELD = re.compile(r"^\s*`?([A-Za-z_][\w]*)`?\s*:?\s*([A-Za-z]+)\s*$")


def parse_ddl(ddl):
    """[(name, ddl type)] of a flat Spark DDL struct such as `a STRING, b BIGINT`."""
    fields = []
    for part in ddl.split(","):
        m = _FIELD.match(part)
        if not m or m.group(2).lower() not in _DDL_TYPES:
            raise OptionError(f"Option 'valueSchema': cannot read '{part.strip()}' (expected "
                         f"'name TYPE', TYPE one of {', '.join(sorted(_DDL_TYPES))})")
        fields.append((m.group(1), m.group(2).lower()))
    return fields


def avro_fields(schema):
    """[(name, ddl type)] of an Avro record schema with primitive (or nullable) fields."""
    if schema.get("type") != "record":
        raise OptionError("Option 'valueSchema' must be an Avro record schema for valueFormat avro")
    out = []
    for f in schema["fields"]:
        t = f["type"]
        if isinstance(t, list):
            t = [x for x in t if x != "null"]
            t = t[0] if len(t) == 1 else None
        if isinstance(t, dict):
            t = _AVRO_LOGICAL.get(t.get("logicalType")) or _AVRO_TYPES.get(t.get("type"))
        else:
            t = _AVRO_TYPES.get(t)
        if t is None:
            raise OptionError(f"Option 'valueSchema': Avro field '{f['name']}' has a type this "
                         "connector does not map (primitive types, nullable unions, "
                         "timestamp and date logical types)")
        out.append((f["name"], t))
    return out


class ValueFormat:
    def __init__(self, kind, fields, avro_schema=None, framing=None, schema_id=None):
        self.kind, self.fields, self.framing, self.schema_id = kind, fields, framing, schema_id
        self.spark_type = T.StructType([T.StructField(n, _DDL_TYPES[t][0]) for n, t in fields])
        self.avro_schema = avro_schema
        self._parsed = None

    @property
    def arrow_type(self):
        import pyarrow as pa
        return pa.struct([pa.field(n, _arrow_type(t)) for n, t in self.fields])

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_parsed"} | {"_parsed": None}

    @property
    def parsed_avro(self):
        if self._parsed is None:
            import fastavro
            self._parsed = fastavro.parse_schema(self.avro_schema)
        return self._parsed

    # ---- reading -------------------------------------------------------------------------
    def decode_batch(self, batch):
        import pyarrow as pa
        values = batch.column(1).to_pylist()
        rows = self._decode_json(values) if self.kind == "json" else self._decode_avro(values)
        arrow_type = self.arrow_type
        typed = pa.array(rows, type=arrow_type)
        return batch.set_column(1, pa.field("value", arrow_type), typed)

    def _decode_json(self, values):
        out = []
        for v in values:
            try:
                row = json.loads(v) if v is not None else None
            except ValueError:
                row = None
            out.append(self._conform(row) if isinstance(row, dict) else None)
        return out

    def _conform(self, row):
        """A decoded JSON object in the struct's field types (None where a field won't)."""
        out = {}
        for name, t in self.fields:
            v = row.get(name)
            try:
                if v is None:
                    pass
                elif t in ("timestamp", "date"):
                    v = _pa().scalar(v).cast(_arrow_type(t)).as_py() if isinstance(v, str) \
                        else v
                elif t in ("int", "integer", "bigint", "long", "smallint", "tinyint"):
                    v = int(v)
                elif t in ("float", "double"):
                    v = float(v)
                elif t == "string" and not isinstance(v, str):
                    v = json.dumps(v)
                elif t == "binary":
                    v = v.encode() if isinstance(v, str) else None
            except (TypeError, ValueError):  # pyarrow's ArrowInvalid is a ValueError
                v = None
            out[name] = v
        return out

    def _decode_avro(self, values):
        import fastavro
        out, skip = [], 5 if self.framing == "confluent" else 0
        for v in values:
            try:
                out.append(None if v is None else fastavro.schemaless_reader(
                    io.BytesIO(v[skip:]), self.parsed_avro, None))
            except Exception:  # noqa: BLE001 - an undecodable value is a null struct
                out.append(None)
        return out

    # ---- writing -------------------------------------------------------------------------
    def encode_batch(self, batch):
        import pyarrow as pa
        i = batch.schema.get_field_index("value")
        if i < 0 or not pa.types.is_struct(batch.schema.field(i).type):
            raise OptionError(f"valueFormat {self.kind}: the 'value' column must be a struct")
        rows = batch.column(i).to_pylist()
        if self.kind == "json":
            data = [None if r is None else json.dumps(r, default=str).encode() for r in rows]
        else:
            import fastavro
            head = struct.pack(">bI", 0, self.schema_id or 0) if self.framing == "confluent" \
                else b""
            data = []
            for r in rows:
                if r is None:
                    data.append(None)
                    continue
                buf = io.BytesIO()
                buf.write(head)
                fastavro.schemaless_writer(buf, self.parsed_avro, r)
                data.append(buf.getvalue())
        return batch.set_column(i, pa.field("value", pa.binary()), pa.array(data, pa.binary()))


def value_format(opts):
    """The ValueFormat the options ask for, or None for Spark's binary `value` column."""
    kind = opts.get("valueformat")
    if kind is None:
        return None
    kind = str(kind).strip().lower()
    if kind not in ("json", "avro"):
        raise OptionError(f"Option 'valueFormat' must be json or avro, got '{kind}'")
    schema = opts.get("valueschema")
    if not schema:
        raise OptionError(f"Option 'valueSchema' is required with valueFormat {kind}")
    framing = str(opts.get("valueframing", "none")).strip().lower()
    if framing not in ("none", "confluent"):
        raise OptionError(f"Option 'valueFraming' must be none or confluent, got '{framing}'")
    if kind == "json":
        return ValueFormat("json", parse_ddl(schema))
    try:
        avro = json.loads(schema)
    except ValueError:
        raise OptionError("Option 'valueSchema' must be an Avro schema in JSON for valueFormat "
                     "avro") from None
    schema_id = opts.get("valueschemaid")
    try:
        schema_id = None if schema_id is None else int(schema_id)
    except ValueError:
        raise OptionError(f"Option 'valueSchemaId' must be an integer, got '{schema_id}'") from None
    return ValueFormat("avro", avro_fields(avro), avro, framing, schema_id)
