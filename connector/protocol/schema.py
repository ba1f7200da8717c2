"""Message schemas declared as data, compiled into one reader and writer per (message, version).

Notation of `definitions.py`: a header line `Name api_key lo-hi [flexN]`, then one indented line
per field: `name type [vA-B|vA+] [nullA+] [tagN@A+] [=default] [noflex]`. `[]` and `{}` are
arrays and structs whose fields follow one level deeper; `[]int32` is an array of a primitive.

Decoded messages are instances of a small class per struct (attribute access with Kafka's field
names in snake_case); fields absent in a version keep their default.
"""
import uuid

from . import primitives as p
from .codegen import compile_init, compile_reader, compile_writer
from .primitives import ZERO_UUID

_PRIMITIVE_DEFAULTS = {"bool": False, "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0,
                       "float64": 0.0, "string": "", "bytes": b"", "records": None, "uuid": ZERO_UUID}


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
        # The first construction of a class installs its generated constructor, then uses it.
        init = self._schema.cls.__init__ = compile_init(self._schema)
        init(self, **kwargs)

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
        self._readers = {}   # (version, flexible, view) -> generated decoder, see decoder()
        self._writers = {}   # (version, flexible) -> generated writer, see writer()
        self._children = {}  # path -> StructSchema, for make()

    def child(self, *path):
        """The struct schema of a nested array/struct field: `schema.child("topics", "partitions")`."""
        node = self
        for name in path:
            node = next(f for f in node.fields if f.name == name).struct
        return node

    def make(self, *path, **fields):
        """Build an instance of this struct (or of a nested one given by `path`)."""
        node = self._children.get(path)
        if node is None:
            node = self._children[path] = self.child(*path)
        return node.cls(**fields)

    # ---- decoding -------------------------------------------------------------------------
    def decoder(self, version, flexible, view=False):
        """The generated `read(buf, pos, end) -> (obj, position after it)`. `buf` must be a
        `bytes` object, or a memoryview when `view` is true (see `_decode`)."""
        key = (version, flexible, view)
        fn = self._readers.get(key)
        if fn is None:
            fn = self._readers[key] = compile_reader(self, version, flexible, view)
        return fn

    def reader(self, version, flexible):
        """`read(r)` for a `primitives.Reader`: the struct at `r.pos`, leaving `r` after it."""
        decoders = (self.decoder(version, flexible), self.decoder(version, flexible, True))

        def read(r):
            obj, r.pos = _decode(decoders, r.buf, r.pos, r.end)
            return obj
        return read

    # ---- encoding -------------------------------------------------------------------------
    def writer(self, version, flexible):
        """The generated `write(obj, out)`, appending the encoded struct to the chunk list `out`:
        `records` and `bytes` values as they are (they can be megabytes), everything between
        them joined into one chunk."""
        key = (version, flexible)
        fn = self._writers.get(key)
        if fn is None:
            fn = self._writers[key] = compile_writer(self, version, flexible)
        return fn


def _decode(decoders, buf, pos, end):
    """Run the decoder for this kind of buffer: `bytes` and memoryviews have their own (strings
    are decoded, and records sliced, differently), other buffers are read through a memoryview."""
    if type(buf) is bytes:
        return decoders[0](buf, pos, end)
    return decoders[1](buf if type(buf) is memoryview else memoryview(buf), pos, end)


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
        self._codecs = {}  # version -> (bytes decoder, memoryview decoder, writer)

    def _codec(self, version):
        codec = self._codecs.get(version)
        if codec is None:
            flexible = self.is_flexible(version)
            codec = self._codecs[version] = (self.decoder(version, flexible),
                                             self.decoder(version, flexible, True),
                                             self.writer(version, flexible))
        return codec

    def is_flexible(self, version):
        return self.flexible_from is not None and version >= self.flexible_from

    def decode(self, buf, version, pos=0, end=None):
        """The message in `buf` (bytes-like, from `pos` to `end`), or at a Reader's position,
        which is then left after the message."""
        codec = self._codecs.get(version) or self._codec(version)
        if isinstance(buf, p.Reader):  # (as _decode(), inlined: this runs for every request)
            r, buf = buf, buf.buf
            if type(buf) is bytes:
                obj, r.pos = codec[0](buf, r.pos, r.end)
            else:
                obj, r.pos = codec[1](buf if type(buf) is memoryview else memoryview(buf),
                                      r.pos, r.end)
            return obj
        return _decode(codec, buf, pos, len(buf) if end is None else end)[0]

    def encode_into(self, obj, version, out):
        """Append the encoded message to the chunk list `out`: its small pieces joined, and
        `records`/`bytes` values as they are."""
        (self._codecs.get(version) or self._codec(version))[2](obj, out)

    def encode(self, obj, version) -> bytes:
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
