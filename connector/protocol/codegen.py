"""Code generation for message schemas: one straight-line reader and writer per (message,
version), written as Python source and exec-ed once.

Decoding and encoding run for every request the broker serves. Walking the field list per
message (a closure and a Reader method call per field) cost ~25 us for a small produce request,
so each (message, version) gets its own straight-line functions, written as Python source and
exec-ed once, as `dataclasses` does: the buffer, position and end are locals, nested structs
are inlined, each run of fixed-width fields is read or written with one `struct` call (and one
bounds check), and only long varints and tagged fields call helpers. Each generated function
keeps its source in `__source__`, and tracebacks show its lines.

A field compiles to a list of ops, which `_render_reads`/`_render_writes` turn into lines:
  ("fixed", fmt, target)  a `struct` value: read into `target` / written from that expression
                          (an int: a constant)
  ("then", lines)         (reads) lines using values just unpacked; they do not touch the buffer
  ("before", lines)       (writes) lines computing locals for later ops; they write nothing
  ("piece", expr)         (writes) a bytes expression, appended to `small` (joined into one
                          chunk of `out` before a large value and at the end)
  ("large", var)          (writes) a records/bytes value (or None), appended to `out` as is
  ("code", lines)         anything else; it ends the current run of fixed-width values
"""
import itertools
import keyword
import linecache
import struct
import uuid

from . import primitives as p
from .errors import CorruptMessage
from .primitives import ZERO_UUID


def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


_FIXED = {"bool": "?", "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H",
          "float64": "d"}
_FRESH = object()  # constructor default of array fields: a new list per instance


class _ArrayStructs(dict):
    """`struct.Struct`s for arrays of one fixed-width type, by length (made on first use)."""

    def __init__(self, fmt):
        super().__init__()
        self.fmt = fmt

    def __missing__(self, n):
        st = struct.Struct(f">{n}{self.fmt}")
        if n < 256:
            self[n] = st
        return st


_ARRAYS = {fmt: _ArrayStructs(fmt) for fmt in _FIXED.values()}
_compiled = itertools.count()


def _unknown_fields(obj, kwargs):
    raise TypeError(f"{type(obj).__name__} has no fields {sorted(kwargs)}")


def _read_tags(obj, buf, pos, end, fields):
    """Read the tagged fields at `pos` into `obj` ({tag: (name, read)}); unknown tags are
    skipped, as the protocol requires. Generated readers call this only when there are some."""
    count, pos = p.read_uvarint(buf, pos, end)
    for _ in range(count):
        tag, pos = p.read_uvarint(buf, pos, end)
        size, pos = p.read_uvarint(buf, pos, end)
        stop = pos + size
        if stop > end:
            raise CorruptMessage(f"tagged field {tag} of {size} bytes overruns the message")
        field = fields.get(tag)
        if field is not None:
            setattr(obj, field[0], field[1](buf, pos, stop)[0])
        pos = stop
    return pos


def _put_tag(tags, tag, write, value):
    """Append one tagged field (tag, size, value) to `tags`."""
    chunks = []
    write(value, chunks)
    data = b"".join(chunks)
    tags.append(p.uvarint(tag) + p.uvarint(len(data)) + data)


_HELPERS = {"CorruptMessage": CorruptMessage, "_new": object.__new__, "_UUID": uuid.UUID,
            "_ZERO": ZERO_UUID, "_read_uvarint": p.read_uvarint, "_UV": p.SMALL_UVARINTS,
            "_uvarint": p.uvarint, "_uvarint_fast": p.uvarint_fast, "_join": b"".join,
            "_read_tags": _read_tags, "_put_tag": _put_tag, "_FRESH": _FRESH,
            "_unknown_fields": _unknown_fields}


class _Source:
    """The source of one generated function and the globals it refers to."""

    def __init__(self, title):
        self.title = title
        self.lines = []
        self.globals = dict(_HELPERS)
        self._names = itertools.count(1)

    def local(self, hint):
        """A fresh local variable name."""
        return f"{hint}{next(self._names)}"

    def bind(self, hint, value):
        """A fresh global name of the generated function, bound to `value`."""
        name = f"_{hint}{next(self._names)}"
        self.globals[name] = value
        return name

    def constant(self, value):
        """Source for an immutable constant: a literal when it has one, else a bound name."""
        if value is None or type(value) in (bool, int, str, bytes):
            return repr(value)
        return self.bind("const", value)

    def function(self, name):
        source = "\n".join(self.lines) + "\n"
        filename = f"<minilog {self.title} #{next(_compiled)}>"
        exec(compile(source, filename, "exec"), self.globals)  # noqa: S102 - our own source
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        fn = self.globals[name]
        fn.__source__ = source
        return fn


def _indent(lines, pad="    "):
    return [pad + line for line in lines]


def _default_source(src, f):
    """A field's default value as source: a fresh `[]` for arrays, else a constant."""
    value = f.default_value()
    return "[]" if isinstance(value, list) else src.constant(value)


def compile_init(schema):
    """`__init__(self, *, field=default, ...)` for the struct's class: defaults computed once,
    a fresh list per instance for arrays, TypeError for unknown names."""
    src = _Source(f"{schema.name}.__init__")
    params, body = [], ["if _unknown:", "    _unknown_fields(self, _unknown)"]
    for f in schema.fields:
        if not f.name.isidentifier() or keyword.iskeyword(f.name) or f.name[0] == "_" \
                or f.name == "self":
            raise ValueError(f"field name {f.name!r} of {schema.name} is not usable in Python")
        default = _default_source(src, f)
        if default == "[]":
            params.append(f"{f.name}=_FRESH")
            body.append(f"self.{f.name} = [] if {f.name} is _FRESH else {f.name}")
        else:
            params.append(f"{f.name}={default}")
            body.append(f"self.{f.name} = {f.name}")
    args = ", ".join(["self", *(["*", *params] if params else []), "**_unknown"])
    src.lines = [f"def __init__({args}):", *_indent(body)]
    init = src.function("__init__")
    init.__qualname__ = f"{schema.name}.__init__"
    return init


def _title(schema, version, flexible, what):
    return f"{what} {schema.name} v{version}{' flexible' if flexible else ''}"


# ---- readers --------------------------------------------------------------------------------
def compile_reader(schema, version, flexible, view):
    src = _Source(_title(schema, version, flexible, "read"))
    src.lines = ["def read(buf, pos, end):",
                 *_indent(_read_struct(src, schema, version, flexible, view, "obj")),
                 "    return obj, pos"]
    return src.function("read")


def _compile_tagged_reader(schema, f, version, compact, view):
    src = _Source(_title(schema, version, compact, f"read tagged {f.name} of"))
    src.lines = ["def read(buf, pos, end):",
                 *_indent(_render_reads(src, _read_field(src, f, version, compact, view, "value"))),
                 "    return value, pos"]
    return src.function("read")


def _read_struct(src, schema, version, flexible, view, obj):
    """Lines reading one struct into a new instance in the local `obj`."""
    lines = [f"{obj} = _new({src.bind('cls', schema.cls)})"]
    ops, tagged = [], {}
    for f in schema.fields:
        compact = flexible and not f.noflex
        if not _in(f.versions, version) or (flexible and _in(f.tagged, version)):
            lines.append(f"{obj}.{f.name} = {_default_source(src, f)}")
            if _in(f.versions, version):
                tagged[f.tag] = (f.name, _compile_tagged_reader(schema, f, version, compact, view))
        else:
            ops += _read_field(src, f, version, compact, view, f"{obj}.{f.name}")
    if flexible:  # no tagged fields (the usual case) is one zero byte
        tags = src.bind("tags", tagged)
        ops.append(("code", ["if pos < end and buf[pos] == 0:", "    pos += 1", "else:",
                             f"    pos = _read_tags({obj}, buf, pos, end, {tags})"]))
    return lines + _render_reads(src, ops)


def _render_reads(src, ops):
    """Lines for reading ops: a run of fixed-width values is one bounds check and one unpack."""
    lines, run, then = [], [], []

    def flush():
        if run:
            st = struct.Struct(">" + "".join(fmt for fmt, _ in run))
            targets = ", ".join(target for _, target in run)
            lines.extend([f"if pos + {st.size} > end:",
                          "    raise CorruptMessage(f'message truncated at byte {pos}')",
                          f"{targets}, = {src.bind('unpack', st.unpack_from)}(buf, pos)",
                          f"pos += {st.size}", *then])
            run.clear()
            then.clear()

    for kind, *args in ops:
        if kind == "fixed":
            run.append(args)
        elif kind == "then" and run:
            then.extend(args[0])
        else:
            flush()
            lines.extend(args[0])
    flush()
    return lines


def _read_field(src, f, version, compact, view, target):
    """Ops reading field `f` into `target` (an assignable expression)."""
    nullable = _in(f.nullable, version)
    if f.type == "{}":
        obj = src.local("obj")
        read = [*_read_struct(src, f.struct, version, compact, view, obj), f"{target} = {obj}"]
        if not nullable:
            return [("code", read)]
        flag = src.local("flag")
        return [("fixed", "b", flag),
                ("code", [f"if {flag} < 0:", f"    {target} = None", "else:", *_indent(read)])]
    if f.type.startswith("[]"):
        return _read_array(src, f, version, compact, view, nullable, target)
    return _read_value(src, f.type, compact, view, nullable, target)


def _read_length(src, compact, fmt, long=False):
    """(local, ops) reading a length or count: a uvarint minus one when compact, else `fmt`.
    Varints of one byte are read inline, and also of two when `long` (records, bytes)."""
    n = src.local("n")
    if not compact:
        return n, [("fixed", fmt, n)]
    two = ["elif pos + 1 < end and buf[pos + 1] < 128:",
           f"    {n} = ({n} + 1 & 127 | buf[pos + 1] << 7) - 1", "    pos += 2"] if long else []
    return n, [("code", ["if pos >= end:", "    raise CorruptMessage('varint truncated')",
                         f"{n} = buf[pos] - 1", f"if {n} < 127:", "    pos += 1", *two, "else:",
                         f"    {n}, pos = _read_uvarint(buf, pos, end)", f"    {n} -= 1"])]


def _if_null(n, target, nullable, error):
    """(lines, indent for the non-null case) handling a negative length `n`."""
    if nullable:
        return [f"if {n} < 0:", f"    {target} = None", "else:"], "    "
    return [f"if {n} < 0:", f"    raise CorruptMessage({error!r})"], ""


def _read_value(src, t, compact, view, nullable, target):
    """Ops reading one value of primitive type `t` into `target`."""
    if t in _FIXED:
        return [("fixed", _FIXED[t], target)]
    if t == "uuid":
        raw = src.local("raw")
        return [("fixed", "16s", raw), ("then", [f"{target} = _UUID(bytes={raw})"])]
    n, ops = _read_length(src, compact, "h" if t == "string" else "i", t != "string")
    if t == "records":  # a zero-copy view: record sets are the bulk of produce and fetch
        lines, pad = [f"if {n} < 0:", f"    {target} = None", "else:"], "    "
        overrun = f"records of {{{n}}} bytes overrun the message"
        value = [f"{target} = {'buf' if view else 'memoryview(buf)'}[pos:e]"]
    else:
        lines, pad = _if_null(n, target, nullable, "null in a non-nullable string"
                              if t == "string" else "null in non-nullable bytes")
        overrun = f"field of {{{n}}} bytes overruns the message"
        data = "buf[pos:e].tobytes()" if view else "buf[pos:e]"
        value = [f"{target} = {data}"]
        if t == "string":
            value = ["try:", f"    {target} = {data}.decode()",
                     "except UnicodeDecodeError as exc:",
                     "    raise CorruptMessage(f'string is not UTF-8: {exc}') from None"]
    lines += _indent([f"e = pos + {n}", "if e > end:", f"    raise CorruptMessage(f{overrun!r})",
                      *value, "pos = e"], pad)
    return [*ops, ("code", lines)]


def _read_array(src, f, version, compact, view, nullable, target):
    n, ops = _read_length(src, compact, "i")
    lines, pad = _if_null(n, target, nullable, f"null array {f.name}")
    elem = f.type[2:]
    # The count is checked against the bytes left before anything is allocated for it.
    fmt = _FIXED.get(elem)
    size = struct.calcsize(">" + fmt) if fmt else 1
    body = [f"if {n}{f' * {size}' if size > 1 else ''} > end - pos:",
            f"    raise CorruptMessage(f'array {f.name} of {{{n}}} items overruns the message')"]
    if fmt:
        structs = src.bind("structs", _ARRAYS[fmt])
        body += [f"{target} = list({structs}[{n}].unpack_from(buf, pos))",
                 f"pos += {n}{f' * {size}' if size > 1 else ''}"]
    else:
        items, item = src.local("items"), src.local("item")
        if elem:
            each = _render_reads(src, _read_value(src, elem, compact, view, False, item))
        else:
            each = _read_struct(src, f.struct, version, compact, view, item)
        # `while n:` rather than `for _ in range(n)`: a fifth of the cost for short arrays.
        body += [f"{items} = []", f"while {n}:", f"    {n} -= 1", *_indent(each),
                 f"    {items}.append({item})", f"{target} = {items}"]
    return [*ops, ("code", lines + _indent(body, pad))]


# ---- writers --------------------------------------------------------------------------------
def compile_writer(schema, version, flexible):
    src = _Source(_title(schema, version, flexible, "write"))
    return _writer_function(src, "obj", _write_struct(src, schema, version, flexible, "obj"))


def _compile_tagged_writer(schema, f, version, compact):
    src = _Source(_title(schema, version, compact, f"write tagged {f.name} of"))
    return _writer_function(src, "value", _write_field(src, f, version, compact, "value"))


def _writer_function(src, arg, ops):
    src.lines = [f"def write({arg}, out):", "    small = []", *_indent(_render_writes(src, ops)),
                 "    if small:", "        out.append(_join(small))"]
    return src.function("write")


def _write_struct(src, schema, version, flexible, obj):
    """Ops writing the struct in the local `obj`."""
    ops, tagged = [], []
    for f in schema.fields:
        if not _in(f.versions, version):
            continue
        compact = flexible and not f.noflex
        if flexible and _in(f.tagged, version):
            tagged.append((f, compact))
        else:
            ops += _write_field(src, f, version, compact, f"{obj}.{f.name}")
    if flexible:
        ops += _write_tags(src, schema, version, tagged, obj)
    return ops


def _write_tags(src, schema, version, tagged, obj):
    """Ops writing the tagged fields, sorted by tag; a field is left out when None, equal to its
    default or an empty list."""
    if not tagged:
        return [("fixed", "B", 0)]
    tags = src.local("tags")
    lines = [f"{tags} = []"]
    for f, compact in sorted(tagged, key=lambda t: t[0].tag):
        v, default = src.local("v"), src.bind("default", f.default_value())
        write = src.bind("write", _compile_tagged_writer(schema, f, version, compact))
        lines += [f"{v} = {obj}.{f.name}",
                  f"if not ({v} is None or {v} == {default} or (isinstance({v}, list) and not {v})):",
                  f"    _put_tag({tags}, {f.tag}, {write}, {v})"]
    lines += [f"small.append(_uvarint_fast(len({tags})))", f"small += {tags}"]
    return [("code", lines)]


def _render_writes(src, ops):
    """Lines for writing ops: a run of fixed-width values is one `pack`, consecutive pieces are
    appended together."""
    lines, pieces, run = [], [], []

    def end_run():
        if run:
            fmt = ">" + "".join(fmt for fmt, _ in run)
            if all(isinstance(value, int) for _, value in run):
                pieces.append(repr(struct.pack(fmt, *(value for _, value in run))))
            else:
                args = ", ".join(str(value) for _, value in run)
                pieces.append(f"{src.bind('pack', struct.Struct(fmt).pack)}({args})")
            run.clear()

    def flush():
        end_run()
        if len(pieces) == 1:
            lines.append(f"small.append({pieces[0]})")
        elif pieces:
            lines.append(f"small += ({', '.join(pieces)})")
        pieces.clear()

    for kind, *args in ops:
        if kind == "fixed":
            run.append(args)
        elif kind == "piece":
            end_run()
            pieces.append(args[0])
        elif kind == "before":
            lines.extend(args[0])
        elif kind == "large":
            flush()
            lines.extend([f"if {args[0]} is not None:", "    out.append(_join(small))",
                          "    small.clear()", f"    out.append({args[0]})"])
        else:
            flush()
            lines.extend(args[0])
    flush()
    return lines


def _compact_length(size):
    """Source for the compact (uvarint of n + 1) length prefix of a `size` expression."""
    return f"(_UV[k] if (k := {size} + 1) < 128 else _uvarint(k))"


def _write_field(src, f, version, compact, value):
    """Ops writing field `f`, whose value is the expression `value` (evaluated once)."""
    nullable = _in(f.nullable, version)
    if f.type == "{}":
        v = src.local("v")
        write = _write_struct(src, f.struct, version, compact, v)
        if nullable:
            return [("before", [f"{v} = {value}"]), ("fixed", "b", f"-1 if {v} is None else 1"),
                    ("code", [f"if {v} is not None:", *_indent(_render_writes(src, write))])]
        cls = src.bind("cls", f.struct.cls)
        return [("before", [f"{v} = {value}", f"if {v} is None:", f"    {v} = {cls}()"]), *write]
    if f.type.startswith("[]"):
        return _write_array(src, f, version, compact, value)
    return _write_value(src, f.type, compact, value)


def _write_value(src, t, compact, value):
    """Ops writing one value of primitive type `t` given by the expression `value`."""
    if t in _FIXED:
        return [("fixed", _FIXED[t], value)]
    if t == "uuid":
        return [("fixed", "16s", f"({value} or _ZERO).bytes")]
    v = src.local("v")
    if t == "string":
        data = src.local("data")
        before = [f"{v} = {value}", f"{data} = b'' if {v} is None else {v}.encode()"]
        last = ("piece", data)
    else:  # bytes and records: appended as they are
        data, before, last = v, [f"{v} = {value}"], ("large", v)
    if compact:
        head = ("piece", f"b'\\x00' if {v} is None else {_compact_length(f'len({data})')}")
    else:
        head = ("fixed", "h" if t == "string" else "i", f"-1 if {v} is None else len({data})")
    return [("before", before), head, last]


def _write_array(src, f, version, compact, value):
    v = src.local("v")
    ops = [("before", [f"{v} = {value}"])]
    if compact:
        ops.append(("piece", f"b'\\x00' if {v} is None else {_compact_length(f'len({v})')}"))
    else:
        ops.append(("fixed", "i", f"-1 if {v} is None else len({v})"))
    elem, item = f.type[2:], src.local("item")
    if elem in _FIXED:
        structs = src.bind("structs", _ARRAYS[_FIXED[elem]])
        return [*ops, ("piece", f"b'' if {v} is None else {structs}[len({v})].pack(*{v})")]
    if elem:
        each = _write_value(src, elem, compact, item)
    else:
        each = _write_struct(src, f.struct, version, compact, item)
    return [*ops, ("code", [f"if {v} is not None:", f"    for {item} in {v}:",
                            *_indent(_render_writes(src, each), " " * 8)])]
