"""Compression codecs of Kafka record batches (v2): one call per batch, bytes in, bytes out.

A batch's `attributes & 0x07` names the codec that compressed its records payload. What goes on
the wire is what the Java client and librdkafka write, so any Kafka consumer reads our batches
and we read theirs:

- gzip: a gzip stream (RFC 1952); several concatenated members are accepted on read.
- snappy: the Java client writes xerial framing (`\\x82SNAPPY\\x00`, version and compat int32s,
  then blocks of int32 length + raw snappy, 32 KiB of input per block); librdkafka writes one
  plain raw snappy block. We write xerial and read both, as librdkafka does.
- lz4: the LZ4 frame format with independent 64 KiB blocks, no content size and no checksums,
  byte for byte the frame header the Java client and librdkafka send. (The broken header
  checksum of Kafka's early LZ4 framing only ever applied to message format v0/v1.)
- zstd: one zstd frame; frames without a content size (Java's streaming writer) are read too.

Compressor and decompressor objects are reused per thread: building a zstd context costs more
than compressing a small batch, and those objects are not safe to share between threads.
"""
import struct
import threading
import zlib

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
NAMES = {v: k for k, v in CODECS.items()}

try:
    import zstandard as _zstd
except ImportError:  # pragma: no cover - zstandard is an install requirement
    _zstd = None
try:
    import lz4.frame as _lz4
except ImportError:  # pragma: no cover
    _lz4 = None
try:
    import cramjam as _cramjam
except ImportError:  # pragma: no cover
    _cramjam = None

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")

_DEFAULT_GZIP_LEVEL = 6   # java.util.zip's default, what the Java producer uses
_DEFAULT_ZSTD_LEVEL = 3   # zstd's and the Java producer's default


class UnsupportedCodec(ValueError):
    """A codec id Kafka does not define, or whose library is not installed here."""


class CompressionError(ValueError):
    """Compressed data that does not decompress: corrupt, truncated or not in that codec."""


def available():
    """Names of the codecs usable in this process, in codec-id order."""
    libs = {"none": True, "gzip": True, "snappy": _cramjam is not None,
            "lz4": _lz4 is not None, "zstd": _zstd is not None}
    return [name for name, ok in libs.items() if ok]


def codec_id(codec):
    """Accept a codec id or Kafka's name for it (`compression.type`), return the id."""
    if isinstance(codec, str):
        try:
            return CODECS[codec.lower()]
        except KeyError:
            raise UnsupportedCodec(
                f"unknown compression type {codec!r}; Kafka defines {', '.join(CODECS)}") from None
    if codec not in NAMES:
        raise UnsupportedCodec(f"unknown compression codec id {codec!r} (Kafka defines 0-4)")
    return codec


def compress(codec, data, level=None):
    """Compress one batch's records payload with `codec` (id or name)."""
    codec = codec_id(codec)
    if codec == NONE:
        return bytes(data)
    return _CODEC_FUNCS[codec][0](data, level)


def decompress(codec, data):
    """Decompress one batch's records payload; CompressionError when the data is bad."""
    codec = codec_id(codec)
    if codec == NONE:
        return bytes(data)
    try:
        return _CODEC_FUNCS[codec][1](data)
    except CompressionError:
        raise
    except Exception as e:  # each library has its own error types; answer with one
        raise CompressionError(f"{NAMES[codec]} payload does not decompress: {e}") from e


# -- per-thread reusable contexts ------------------------------------------------------------

class _Contexts(threading.local):
    def __init__(self):
        self.zstd_c = {}
        self.zstd_d = None


_ctx = _Contexts()


def _need(lib, name):
    if lib is None:
        raise UnsupportedCodec(f"{name} compression needs a library that is not installed")
    return lib


# -- gzip ------------------------------------------------------------------------------------

def _gzip_compress(data, level):
    return zlib.compress(data, _DEFAULT_GZIP_LEVEL if level is None else level, wbits=31)


def _concatenated(data, decompressobj, name):
    """Every frame of `data` decompressed, frame after frame: gzip members and zstd frames
    may follow each other in one payload, and each `decompressobj()` reads one."""
    out = []
    while True:
        d = decompressobj()
        out.append(d.decompress(data))
        if not d.eof:
            raise CompressionError(f"{name} payload is truncated")
        data = d.unused_data
        if not data:
            break
    return out[0] if len(out) == 1 else b"".join(out)


def _gzip_decompress(data):
    # wbits 47 = 32 + 15: gzip (or zlib) header, detected
    return _concatenated(memoryview(data), lambda: zlib.decompressobj(47), "gzip")


# -- snappy ----------------------------------------------------------------------------------

def _snappy_compress(data, level):
    snappy = _need(_cramjam, "snappy").snappy
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = snappy.compress_raw(view[start:start + _XERIAL_BLOCK])
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data):
    snappy = _need(_cramjam, "snappy").snappy
    view = memoryview(data)
    if len(view) < 16 or view[:8] != _XERIAL_MAGIC:
        return bytes(snappy.decompress_raw(view))
    # Version and compat ints are ignored as librdkafka does: some producers write them
    # little-endian, and there has only ever been one xerial block layout.
    parts, pos, end = [], 16, len(view)
    while pos < end:
        if end - pos < 4:
            raise CompressionError("snappy xerial block length is truncated")
        (n,) = _INT32.unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CompressionError(f"snappy xerial block of {n} bytes overruns the payload")
        parts.append(snappy.decompress_raw(view[pos:pos + n]))
        pos += n
    return b"".join(parts)


# -- lz4 -------------------------------------------------------------------------------------

def _lz4_compress(data, level):
    lz4 = _need(_lz4, "lz4")
    return lz4.compress(data, compression_level=level or 0, block_size=lz4.BLOCKSIZE_MAX64KB,
                        block_linked=False, content_checksum=False, store_size=False)


def _lz4_decompress(data):
    return _need(_lz4, "lz4").decompress(data)


# -- zstd ------------------------------------------------------------------------------------

def _zstd_compress(data, level):
    level = _DEFAULT_ZSTD_LEVEL if level is None else level
    c = _ctx.zstd_c.get(level)
    if c is None:
        c = _ctx.zstd_c[level] = _need(_zstd, "zstd").ZstdCompressor(level=level)
    return c.compress(data)


def _zstd_decompress(data):
    d = _ctx.zstd_d
    if d is None:
        d = _ctx.zstd_d = _need(_zstd, "zstd").ZstdDecompressor()
    # A decompressobj reads frames without a content size too (Java's streaming writer).
    return _concatenated(data, d.decompressobj, "zstd")


_CODEC_FUNCS = {
    GZIP: (_gzip_compress, _gzip_decompress),
    SNAPPY: (_snappy_compress, _snappy_decompress),
    LZ4: (_lz4_compress, _lz4_decompress),
    ZSTD: (_zstd_compress, _zstd_decompress),
}
