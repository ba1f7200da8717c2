"""Message schemas declared as data, compiled into one reader and writer per (message, version).

Notation of `definitions.py`: a header line `Name api_key lo-hi [flexN]`, then one indented line
per field: `name type [vA-B|vA+] [nullA+] [tagN@A+] [=default] [noflex]`. `[]` and `{}` are
arrays and structs whose fields follow one level deeper; `[]int32` is an array of a primitive.

Decoded messages are instances of a small class per struct (attribute access with Kafka's field
names in snake_case); fields absent in a version keep their default.
"""
import uuid

from . import primitives as p
from .errors import CorruptMessage
from .primitives import ZERO_UUID

_PRIMITIVE_DEFAULTS = {"bool": False, "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0,
                       "float64": 0.0, "string": "", "bytes": b"", "records": None, "uuid": ZERO_UUID}


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


def _parse_range(spec):
    if spec.endswith("+"):
        return int(spec[:-1]), 1 << 15
    if "-" in spec:
        a, b = spec.split("-")
        return int(a), int(b)
    return int(spec), int(spec)


class Field:
    __slots__ = (
        "default",
        "name",
        "noflex",
        "nullable",
        "struct",
        "tag",
        "tagged",
        "type",
        "versions",
    )

    def __init__(self, name, ftype, versions):
        self.name, self.type, self.versions = name, ftype, versions
        self.nullable = None
        self.tag = None
        self.tagged = None
        self.default = None
        self.noflex = False
        self.struct = None  # StructSchema for [] and {} fields

    def default_value(self):
        if self.type == "[]" or self.type.startswith("[]"):
            return []
        if self.type == "{}":
            return None
        if self.default is not None:
            return self.default
        if self.nullable and self.type in ("string", "bytes"):
            return None
        return _PRIMITIVE_DEFAULTS[self.type]


class Message:
    """Base of generated message classes: kwargs constructor, defaults, readable repr, equality."""

    __slots__ = ()
    _fields = ()
    _schema = None

    def __init__(self, **kwargs):
        for f in self._schema.fields:
            if f.name in kwargs:
                setattr(self, f.name, kwargs.pop(f.name))
            else:
                setattr(self, f.name, f.default_value())
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no fields {sorted(kwargs)}")

    def __repr__(self):
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__name__}({inner})"

    def __eq__(self, other):
        return type(self) is type(other) and all(
            getattr(self, n) == getattr(other, n) for n in self._fields)

    def to_dict(self):
        def conv(v):
            if isinstance(v, Message):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v
        return {n: conv(getattr(self, n)) for n in self._fields}


class StructSchema:
    def __init__(self, name, fields):
        self.name = name
        self.fields = fields
        self.cls = type(name, (Message,), {"__slots__": tuple(f.name for f in fields),
                                           "_fields": tuple(f.name for f in fields)})
        self.cls._schema = self
        self._readers = {}
        self._writers = {}

    def child(self, *path):
        """The struct schema of a nested array/struct field: `schema.child("topics", "partitions")`."""
        node = self
        for name in path:
            node = next(f for f in node.fields if f.name == name).struct
        return node

    def make(self, *path, **fields):
        """Build an instance of this struct (or of a nested one given by `path`)."""
        return self.child(*path).cls(**fields)

    # ---- decoding -------------------------------------------------------------------------
    def reader(self, version, flexible):
        key = (version, flexible)
        fn = self._readers.get(key)
        if fn is None:
            fn = self._readers[key] = self._compile_reader(version, flexible)
        return fn

    def _compile_reader(self, version, flexible):
        cls = self.cls
        plain, tagged = [], {}
        absent = []
        for f in self.fields:
            if not _in(f.versions, version):
                absent.append(f)
                continue
            read = _field_reader(f, version, flexible and not f.noflex)
            if flexible and _in(f.tagged, version):
                tagged[f.tag] = (f.name, read)
                absent.append(f)
            else:
                plain.append((f.name, read))

        def read_struct(r):
            obj = cls.__new__(cls)
            for f in absent:
                setattr(obj, f.name, f.default_value())
            for name, read in plain:
                setattr(obj, name, read(r))
            if flexible:
                for _ in range(r.uvarint()):
                    tag, size = r.uvarint(), r.uvarint()
                    entry = tagged.get(tag)
                    if entry is None:
                        r.raw(size)  # unknown tags are skipped, as the protocol requires
                    else:
                        sub = Reader_sub(r, size)
                        setattr(obj, entry[0], entry[1](sub))
                        r.pos = sub.end
            return obj
        return read_struct

    # ---- encoding -------------------------------------------------------------------------
    def writer(self, version, flexible):
        key = (version, flexible)
        fn = self._writers.get(key)
        if fn is None:
            fn = self._writers[key] = self._compile_writer(version, flexible)
        return fn

    def _compile_writer(self, version, flexible):
        plain, tagged = [], []
        for f in self.fields:
            if not _in(f.versions, version):
                continue
            write = _field_writer(f, version, flexible and not f.noflex)
            if flexible and _in(f.tagged, version):
                tagged.append((f, write))
            else:
                plain.append((f.name, write))
        tagged.sort(key=lambda t: t[0].tag)

        def write_struct(obj, out):
            for name, write in plain:
                write(getattr(obj, name), out)
            if flexible:
                present = []
                for f, write in tagged:
                    v = getattr(obj, f.name)
                    if v is None or v == f.default_value() or (isinstance(v, list) and not v):
                        continue
                    chunk = []
                    write(v, chunk)
                    data = b"".join(chunk)
                    present.append(p.uvarint(f.tag) + p.uvarint(len(data)) + data)
                out.append(p.uvarint_fast(len(present)))
                out.extend(present)
        return write_struct


def Reader_sub(r, size):
    if r.pos + size > r.end:
        raise CorruptMessage("tagged field overruns the message")
    return p.Reader(r.buf, r.pos, r.pos + size)


def _field_reader(f, version, compact):
    nullable = _in(f.nullable, version)
    t = f.type
    if t == "[]" or t == "{}":
        sub = f.struct.reader(version, compact)
        if t == "{}":
            if nullable:
                def read_opt(r):
                    return None if r.int8() < 0 else sub(r)
                return read_opt
            return sub
        elem = sub
    elif t.startswith("[]"):
        elem = _primitive_reader(t[2:], compact, False)
    else:
        return _primitive_reader(t, compact, nullable)

    def read_array(r):
        n = r.uvarint() - 1 if compact else r.int32()
        if n < 0:
            if nullable:
                return None
            raise CorruptMessage(f"null array {f.name}")
        if n > r.remaining():
            raise CorruptMessage(f"array {f.name} of {n} items overruns the message")
        return [elem(r) for _ in range(n)]
    return read_array


def _primitive_reader(t, compact, nullable):
    if t in ("string",):
        return lambda r: r.string(compact, nullable)
    if t == "records":
        return lambda r: r.records(compact)
    if t == "bytes":
        return lambda r: r.bytes(compact, nullable)
    return {"bool": p.Reader.bool, "int8": p.Reader.int8, "int16": p.Reader.int16,
            "int32": p.Reader.int32, "int64": p.Reader.int64, "uint16": p.Reader.uint16,
            "float64": p.Reader.float64, "uuid": p.Reader.uuid}[t]


def _field_writer(f, version, compact):
    nullable = _in(f.nullable, version)
    t = f.type
    if t == "[]" or t == "{}":
        sub = f.struct.writer(version, compact)
        if t == "{}":
            cls = f.struct.cls
            if nullable:
                def write_opt(v, out):
                    if v is None:
                        out.append(b"\xff")
                    else:
                        out.append(b"\x01")
                        sub(v, out)
                return write_opt

            def write_struct(v, out):
                sub(cls() if v is None else v, out)
            return write_struct
        elem = sub
    elif t.startswith("[]"):
        elem = _primitive_writer(t[2:], compact)
    else:
        return _primitive_writer(t, compact)

    def write_array(v, out):
        if v is None:
            out.append(p.pack_length(-1, compact))
            return
        out.append(p.pack_length(len(v), compact))
        for item in v:
            elem(item, out)
    return write_array


def _primitive_writer(t, compact):
    if t == "string":
        return lambda v, out: out.append(p.pack_string(v, compact))
    if t in ("bytes", "records"):
        def write_bytes(v, out):
            if v is None:
                out.append(p.pack_length(-1, compact))
            else:
                out.append(p.pack_length(len(v), compact))
                out.append(v)
        return write_bytes
    if t == "uuid":
        return lambda v, out: out.append((v or ZERO_UUID).bytes)
    if t == "bool":
        return lambda v, out: out.append(b"\x01" if v else b"\x00")
    pack = {"int8": p.pack_int8, "int16": p.pack_int16, "int32": p.pack_int32,
            "int64": p.pack_int64, "uint16": p.pack_uint16, "float64": p.pack_float64}[t]
    return lambda v, out: out.append(pack(v))


def _parse_default(ftype, text):
    if ftype in ("int8", "int16", "int32", "int64", "uint16"):
        return int(text, 0)
    if ftype == "float64":
        return float(text)
    if ftype == "bool":
        return text == "true"
    return text


class MessageSchema(StructSchema):
    """A top-level request or response: its API key, versions and first flexible version."""

    def __init__(self, name, api_key, versions, flexible_from, fields):
        super().__init__(name, fields)
        self.api_key = api_key
        self.versions = versions
        self.flexible_from = flexible_from

    def is_flexible(self, version):
        return self.flexible_from is not None and version >= self.flexible_from

    def decode(self, buf, version, pos=0, end=None):
        r = buf if isinstance(buf, p.Reader) else p.Reader(buf, pos, end)
        return self.reader(version, self.is_flexible(version))(r)

    def encode_into(self, obj, version, out):
        self.writer(version, self.is_flexible(version))(obj, out)

    def encode(self, obj, version):
        out = []
        self.encode_into(obj, version, out)
        return b"".join(out)


def parse_definitions(text):
    """Parse the notation into {message name: MessageSchema}."""
    messages = {}
    lines = [ln for ln in text.splitlines() if ln.strip()]
    i = 0

    def parse_fields(depth, owner):
        nonlocal i
        fields = []
        while i < len(lines):
            line = lines[i]
            indent = (len(line) - len(line.lstrip())) // 2
            if indent < depth:
                break
            parts = line.split()
            name, ftype = parts[0], parts[1]
            f = Field(name, ftype, (0, 1 << 15))
            for opt in parts[2:]:
                if opt.startswith("v"):
                    f.versions = _parse_range(opt[1:])
                elif opt.startswith("null"):
                    f.nullable = _parse_range(opt[4:])
                elif opt.startswith("tag"):
                    tag, rng = opt[3:].split("@")
                    f.tag, f.tagged = int(tag), _parse_range(rng)
                elif opt.startswith("="):
                    f.default = _parse_default(ftype, opt[1:])
                elif opt == "noflex":
                    f.noflex = True
            i += 1
            if ftype in ("[]", "{}"):
                f.struct = StructSchema(owner + _camel(name), parse_fields(depth + 1, owner))
            fields.append(f)
        return fields

    while i < len(lines):
        head = lines[i].split()
        i += 1
        name, api_key, versions = head[0], int(head[1]), _parse_range(head[2])
        flex = int(head[3][4:]) if len(head) > 3 else None
        messages[name] = MessageSchema(name, api_key, versions, flex, parse_fields(1, name))
    return messages


def _camel(snake):
    return "".join(part.title() for part in snake.split("_"))


__all__ = ["Message", "MessageSchema", "StructSchema", "parse_definitions", "uuid"]
