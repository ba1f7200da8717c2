"""Kafka's primitive wire types: fixed-width integers, varints, strings, bytes, uuids.

A `Reader` walks a bytes-like buffer; writers append encoded pieces to a list of chunks that
the caller joins once, so large `records` payloads are never copied piece by piece.
"""
import struct
import uuid

from .errors import CorruptMessage

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_U16, _U32, _F64 = struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">d")
ZERO_UUID = uuid.UUID(int=0)
_unpack_i16 = _I16.unpack_from


def _fixed_reader(st):
    """A Reader method reading one value of `st` (a closure: one call per value, not two)."""
    size, unpack_from = st.size, st.unpack_from

    def read(self):
        pos = self.pos
        if pos + size > self.end:
            raise CorruptMessage(f"message truncated at byte {pos}")
        self.pos = pos + size
        return unpack_from(self.buf, pos)[0]
    return read


def read_uvarint(buf, pos, end):
    """(value, position after it) of the unsigned varint at `pos`; the buffer ends at `end`."""
    if pos + 1 < end:  # one or two bytes: lengths below 16 KiB, without the loop
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        c = buf[pos + 1]
        if c < 0x80:
            return (b & 0x7F) | (c << 7), pos + 2
    result = shift = 0
    while True:
        if pos >= end:
            raise CorruptMessage("varint truncated")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise CorruptMessage("varint too long")


class Reader:
    """Sequential reader over one message; every read checks bounds and raises CorruptMessage."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf, pos=0, end=None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def remaining(self):
        return self.end - self.pos

    int8 = _fixed_reader(_I8)
    int16 = _fixed_reader(_I16)
    int32 = _fixed_reader(_I32)
    int64 = _fixed_reader(_I64)
    uint16 = _fixed_reader(_U16)
    uint32 = _fixed_reader(_U32)
    float64 = _fixed_reader(_F64)

    def bool(self):
        return self.int8() != 0

    def uvarint(self):
        pos = self.pos
        if pos < self.end:
            b = self.buf[pos]
            if b < 0x80:
                self.pos = pos + 1
                return b
        value, self.pos = read_uvarint(self.buf, pos, self.end)
        return value

    def varint(self):
        v = self.uvarint()
        return (v >> 1) ^ -(v & 1)

    def raw(self, n):
        if n < 0 or self.pos + n > self.end:
            raise CorruptMessage(f"field of {n} bytes overruns the message")
        pos = self.pos
        self.pos = pos + n
        return bytes(self.buf[pos:pos + n])

    def uuid(self):
        return uuid.UUID(bytes=self.raw(16))

    # Length-prefixed values. `compact` selects the flexible-version (uvarint length + 1) form.
    def length(self, compact):
        return self.uvarint() - 1 if compact else self.int32()

    def string(self, compact=False, nullable=False):
        buf, pos, end = self.buf, self.pos, self.end
        if compact:
            n, pos = read_uvarint(buf, pos, end)
            n -= 1
        else:
            if pos + 2 > end:
                raise CorruptMessage(f"message truncated at byte {pos}")
            n = _unpack_i16(buf, pos)[0]
            pos += 2
        self.pos = pos
        if n < 0:
            if nullable:
                return None
            raise CorruptMessage("null in a non-nullable string")
        if pos + n > end:
            raise CorruptMessage(f"field of {n} bytes overruns the message")
        self.pos = pos + n
        data = buf[pos:pos + n]
        try:  # the fastest decoding for each kind of buffer
            if type(data) is bytes:
                return data.decode()
            if type(data) is memoryview:
                return data.tobytes().decode()
            return str(data, "utf-8")
        except UnicodeDecodeError as e:
            raise CorruptMessage(f"string is not UTF-8: {e}") from None

    def bytes(self, compact=False, nullable=False):
        n = self.length(compact)
        if n < 0:
            if nullable:
                return None
            raise CorruptMessage("null in non-nullable bytes")
        return self.raw(n)

    def records(self, compact=False):
        """A `records` field as a zero-copy memoryview of the message (None when null):
        record sets are the bulk of produce requests and fetch responses."""
        n = self.length(compact)
        if n < 0:
            return None
        if self.pos + n > self.end:
            raise CorruptMessage(f"records of {n} bytes overrun the message")
        pos = self.pos
        self.pos = pos + n
        return memoryview(self.buf)[pos:pos + n]


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def varint(v):
    return uvarint((v << 1) ^ (v >> 63))


SMALL_UVARINTS = _SMALL_UVARINTS = tuple(uvarint(i) for i in range(128))


def uvarint_fast(v: int) -> bytes:
    return _SMALL_UVARINTS[v] if 0 <= v < 128 else uvarint(v)


def pack_int8(v: int) -> bytes:
    return _I8.pack(v)


def pack_int16(v: int) -> bytes:
    return _I16.pack(v)


def pack_int32(v: int) -> bytes:
    return _I32.pack(v)


def pack_int64(v: int) -> bytes:
    return _I64.pack(v)


def pack_uint16(v: int) -> bytes:
    return _U16.pack(v)


def pack_uint32(v: int) -> bytes:
    return _U32.pack(v)


def pack_float64(v: float) -> bytes:
    return _F64.pack(v)


def pack_length(n: int, compact: bool) -> bytes:
    """Length prefix for strings/bytes/arrays; n = -1 encodes null."""
    return uvarint_fast(n + 1) if compact else _I32.pack(n)


def pack_string(s: str | None, compact: bool = False) -> bytes:
    if s is None:
        return b"\x00" if compact else b"\xff\xff"
    data = s.encode("utf-8")
    head = uvarint_fast(len(data) + 1) if compact else _I16.pack(len(data))
    return head + data
