"""Frames and headers: the 4-byte size prefix, request header v0-2, response header v0-1.

Sans-IO: `FrameReader.feed(bytes)` returns complete frames; `encode_request` and
`encode_response` return the bytes to write; `decode_request` and `decode_response` take a frame.
"""
import struct

from . import primitives as p
from .errors import CorruptMessage
from .messages import REQUESTS, RESPONSES, ApiKey

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")


class FrameTooLarge(Exception):
    def __init__(self, size, limit):
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit}")
        self.size = size


class FrameReader:
    """Splits a byte stream into frames (without their size prefix).

    Frames that arrive whole inside one chunk are returned as memoryviews of that chunk, with
    no copy; a frame spread over several chunks is joined once when its last byte arrives.
    So a 1 MiB produce request costs one copy here, not one per socket read.
    """

    def __init__(self, max_size=100 * 1024 * 1024):
        self.max_size = max_size
        self._chunks = []   # pieces of an incomplete frame (size prefix included)
        self._have = 0      # bytes in _chunks
        self._need = 4      # bytes _chunks must reach before anything can be decided

    def feed(self, data):
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return []
            data = b"".join(self._chunks)
            self._chunks, self._have, self._need = [], 0, 4
        frames = []
        view = memoryview(data)
        pos, end = 0, len(data)
        while end - pos >= 4:
            size = _SIZE.unpack_from(data, pos)[0]
            if size < 0 or size > self.max_size:
                raise FrameTooLarge(size, self.max_size)
            if end - pos - 4 < size:
                self._need = 4 + size
                break
            frames.append(view[pos + 4:pos + 4 + size])
            pos += 4 + size
        if pos < end:
            rest = bytes(view[pos:])
            self._chunks, self._have = [rest], len(rest)
        return frames

    def pending(self):
        """Bytes received that do not yet form a whole frame."""
        return self._have


class RequestHeader:
    """The request header; `client_host`, `closed`, `session` and `forwarded` are not on the
    wire: a server sets them to the peer's address, so handlers can report where a request came
    from (e.g. group members' hosts), to a future done when the request's connection closes,
    on a secured listener to the connection's listener and authenticated principal, and to
    True for a request that another broker forwarded in an Envelope."""

    __slots__ = ("api_key", "api_version", "client_host", "client_id", "closed", "correlation_id",
                 "forwarded", "session")

    def __init__(self, api_key, api_version, correlation_id, client_id=None, client_host=None):
        self.api_key, self.api_version = api_key, api_version
        self.correlation_id, self.client_id = correlation_id, client_id
        self.client_host = client_host
        self.closed = self.session = None
        self.forwarded = False

    def __repr__(self):
        return (f"RequestHeader({self.api_key}, v{self.api_version}, "
                f"corr={self.correlation_id}, client={self.client_id!r})")


def _flexible(schemas, api_key, version):
    schema = schemas.get(api_key)
    return schema is not None and schema.is_flexible(version)


def decode_request_header(frame):
    """Header and the reader positioned at the body. Works for APIs we do not know, too."""
    r = p.Reader(frame)
    api_key, api_version, corr = r.int16(), r.int16(), r.int32()
    client_id = r.string(False, True)
    header = RequestHeader(api_key, api_version, corr, client_id)
    schema = REQUESTS.get(api_key)
    if schema is not None and api_version > schema.versions[1]:
        return header, r  # a version we don't know: its header layout is unknown too
    if _flexible(REQUESTS, api_key, api_version):
        for _ in range(r.uvarint()):
            r.uvarint()
            r.raw(r.uvarint())
    return header, r


def decode_request(frame):
    """(header, request object). Raises KeyError for unknown APIs, CorruptMessage for bad bytes."""
    header, r = decode_request_header(frame)
    schema = REQUESTS[header.api_key]
    lo, hi = schema.versions
    if not lo <= header.api_version <= hi:
        raise KeyError(header.api_version)
    body = schema.decode(r, header.api_version)
    return header, body


def encode_request(header, body):
    """A whole frame, size prefix included."""
    schema = REQUESTS[header.api_key]
    out = [b"", _HEAD.pack(header.api_key, header.api_version, header.correlation_id),
           p.pack_string(header.client_id)]
    if schema.is_flexible(header.api_version):
        out.append(b"\x00")
    schema.encode_into(body, header.api_version, out)
    size = sum(len(c) for c in out)
    out[0] = _SIZE.pack(size)
    return out


def response_header_is_flexible(api_key, version):
    # ApiVersions responses always use header v0 so that any client can read them.
    return api_key != ApiKey.API_VERSIONS and _flexible(RESPONSES, api_key, version)


def encode_response(api_key, version, correlation_id, body):
    """A list of chunks forming one frame (size prefix included), ready for writelines."""
    out = [b"", _SIZE.pack(correlation_id)]
    if response_header_is_flexible(api_key, version):
        out.append(b"\x00")
    RESPONSES[api_key].encode_into(body, version, out)
    size = sum(len(c) for c in out)
    out[0] = _SIZE.pack(size)
    return out


def decode_response_correlation(frame):
    return _SIZE.unpack_from(frame, 0)[0]


def decode_response(api_key, version, frame):
    r = p.Reader(frame, 4)
    if response_header_is_flexible(api_key, version):
        for _ in range(r.uvarint()):
            r.uvarint()
            r.raw(r.uvarint())
    return RESPONSES[api_key].decode(r, version)


__all__ = [
    "CorruptMessage",
    "FrameReader",
    "FrameTooLarge",
    "RequestHeader",
    "decode_request",
    "decode_response",
    "decode_response_correlation",
    "encode_request",
    "encode_response",
]
