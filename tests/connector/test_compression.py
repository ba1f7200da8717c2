"""Batch compression speaks what real Kafka clients write and read, codec by codec."""
import gzip
import os
import struct
import threading
import types

import cramjam
import kafka.codec
import lz4.frame
import pytest
import zstandard
from minilog.connector import compression
from minilog.connector.compression import (
    CODECS,
    CompressionError,
    UnsupportedCodec,
    available,
    compress,
    decompress,
)

CODEC_NAMES = ["none", "gzip", "snappy", "lz4", "zstd"]
PAYLOADS = {
    "empty": b"",
    "one byte": b"x",
    "text": b"".join(b"record %d with a value {\"i\": %d}\n" % (i, i) for i in range(2000)),
    "random 100k": os.urandom(100_000),
    "zeros 1M": bytes(1_000_000),
}


@pytest.fixture
def python_snappy(monkeypatch):
    """kafka-python's own snappy framing code, running on cramjam's raw snappy (python-snappy
    is not installed here), so its xerial reader and writer check ours independently."""
    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))))
    monkeypatch.setattr(kafka.codec, "snappy", shim)


def test_codec_ids_are_kafkas():
    assert (compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4,
            compression.ZSTD) == (0, 1, 2, 3, 4)
    assert CODECS == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def test_every_codec_is_available_here():
    assert available() == CODEC_NAMES


@pytest.mark.parametrize("codec", CODEC_NAMES)
@pytest.mark.parametrize("name", PAYLOADS)
def test_round_trip(codec, name):
    data = PAYLOADS[name]
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(CODECS[codec], compress(CODECS[codec], memoryview(data))) == data


@pytest.mark.parametrize("codec", [5, 7, -1, "brotli"])
def test_unknown_codec_is_refused_clearly(codec):
    with pytest.raises(UnsupportedCodec, match="unknown compression"):
        compress(codec, b"data")
    with pytest.raises(UnsupportedCodec):
        decompress(codec, b"data")


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_garbage_raises_compression_error(codec):
    with pytest.raises(CompressionError, match=codec):
        decompress(codec, b"\x00\x01definitely not compressed data\xff" * 3)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_truncated_data_raises_compression_error(codec):
    packed = compress(codec, PAYLOADS["random 100k"])
    with pytest.raises(CompressionError):
        decompress(codec, packed[:len(packed) // 2])


def test_levels_are_honoured():
    data = PAYLOADS["text"]
    # gzip records the level class in its header's XFL byte: 2 = slowest, 4 = fastest.
    assert compress("gzip", data, level=9)[8] == 2 and compress("gzip", data, level=1)[8] == 4
    for codec, fast, small in [("zstd", 1, 19), ("lz4", 0, 12)]:
        assert len(compress(codec, data, level=small)) < len(compress(codec, data, level=fast))
        assert decompress(codec, compress(codec, data, level=small)) == data


# -- gzip --------------------------------------------------------------------------------

def test_gzip_writes_the_gzip_format():
    packed = compress("gzip", PAYLOADS["text"])
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == PAYLOADS["text"]


def test_gzip_reads_concatenated_members():
    assert decompress("gzip", gzip.compress(b"one ") + gzip.compress(b"two")) == b"one two"


def test_gzip_interoperates_with_kafka_python():
    data = PAYLOADS["text"]
    assert kafka.codec.gzip_decode(compress("gzip", data)) == data
    assert decompress("gzip", kafka.codec.gzip_encode(data)) == data


# -- snappy ------------------------------------------------------------------------------

def test_snappy_writes_xerial_framing_like_the_java_client():
    data = PAYLOADS["random 100k"]
    packed = compress("snappy", data)
    assert packed[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", packed[8:16]) == (1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4:pos + 4 + n])))
        pos += 4 + n
    assert pos == len(packed)
    assert [len(b) for b in blocks] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(blocks) == data


def test_snappy_reads_raw_blocks_as_librdkafka_writes_them():
    data = PAYLOADS["text"]
    assert decompress("snappy", bytes(cramjam.snappy.compress_raw(data))) == data


def test_snappy_xerial_ignores_version_fields_written_little_endian():
    raw = bytes(cramjam.snappy.compress_raw(b"hello"))
    framed = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + struct.pack(">i", len(raw)) + raw
    assert decompress("snappy", framed) == b"hello"


def test_snappy_xerial_block_overrun_is_an_error():
    raw = bytes(cramjam.snappy.compress_raw(b"hello"))
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", 999) + raw
    with pytest.raises(CompressionError, match="overruns"):
        decompress("snappy", framed)


def test_snappy_interoperates_with_kafka_python(python_snappy):
    data = PAYLOADS["random 100k"] + PAYLOADS["text"]
    assert kafka.codec.snappy_decode(compress("snappy", data)) == data
    assert decompress("snappy", kafka.codec.snappy_encode(data)) == data
    assert decompress("snappy", kafka.codec.snappy_encode(data, xerial_compatible=False)) == data


# -- lz4 ---------------------------------------------------------------------------------

def test_lz4_frame_header_is_the_one_librdkafka_and_java_send():
    # Magic, FLG 0x60 (version 1, independent blocks, no content size, no checksums), BD 0x40
    # (64 KiB blocks) and its header checksum: the bytes in librdkafka's captured produce.
    packed = compress("lz4", PAYLOADS["text"])
    assert packed[:7] == b'\x04"M\x18\x60\x40\x82'


def test_lz4_reads_frames_with_content_size_checksums_and_linked_blocks():
    data = PAYLOADS["text"] * 10
    for kwargs in [{}, {"content_checksum": True}, {"block_linked": True},
                   {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "store_size": True}]:
        assert decompress("lz4", lz4.frame.compress(data, **kwargs)) == data


def test_lz4_interoperates_with_kafka_python():
    data = PAYLOADS["random 100k"] + PAYLOADS["text"]
    assert kafka.codec.lz4_decode(compress("lz4", data)) == data
    assert decompress("lz4", kafka.codec.lz4_encode(data)) == data


# -- zstd --------------------------------------------------------------------------------

def test_zstd_reads_frames_without_content_size():
    # The Java client writes through ZstdOutputStream: the frame does not state its size.
    data = PAYLOADS["text"]
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert zstandard.frame_content_size(packed) == -1
    assert decompress("zstd", packed) == data


def test_zstd_reads_several_frames():
    c = zstandard.ZstdCompressor()
    assert decompress("zstd", c.compress(b"first ") + c.compress(b"second")) == b"first second"


def test_zstd_interoperates_with_kafka_python():
    data = PAYLOADS["text"]
    assert kafka.codec.zstd_decode(compress("zstd", data)) == data
    assert decompress("zstd", kafka.codec.zstd_encode(data)) == data


def test_reused_contexts_are_safe_across_threads():
    inputs = [os.urandom(50) * (i + 1) for i in range(40)]
    errors = []

    def work():
        for _ in range(20):
            for data in inputs:
                for codec in ("zstd", "gzip", "lz4", "snappy"):
                    if decompress(codec, compress(codec, data)) != data:
                        errors.append(codec)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
