"""MirrorMaker 2's record formats: offset syncs, checkpoints and heartbeats, byte for byte.

MM2 writes these with Kafka's protocol types (`Schema.write`): a STRING is an INT16 length
and UTF-8 bytes, integers are big-endian. Checkpoint and heartbeat values start with an INT16
version (0). Kafka's own readers (`RemoteClusterUtils.translateOffsets`, `MirrorClient`,
`kafka-console-consumer --formatter ...CheckpointFormatter`) read what this module writes:

- OffsetSync, topic `mm2-offset-syncs.<target>.internal` (on the source by default):
  key (topic STRING, partition INT32) of the *upstream* partition,
  value (upstreamOffset INT64, offset INT64).
- Checkpoint, topic `<source>.checkpoints.internal` on the target:
  key (group STRING, topic STRING, partition INT32) of the *downstream* (renamed) partition,
  value (version INT16 = 0, upstreamOffset INT64, offset INT64, metadata STRING).
- Heartbeat, topic `heartbeats`: key (sourceClusterAlias STRING, targetClusterAlias STRING),
  value (version INT16 = 0, timestamp INT64).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
VERSION = 0


class FormatError(ValueError):
    """Bytes that are not a record of MM2's formats (or of a version it does not write)."""


def _string(text: str) -> bytes:
    raw = text.encode()
    return _I16.pack(len(raw)) + raw


class _Reader:
    """Kafka protocol types off a buffer, failing with FormatError on short input."""

    def __init__(self, data: bytes, what: str):
        self.data, self.pos, self.what = data, 0, what

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise FormatError(f"{self.what}: {len(self.data)} bytes end before its fields do")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise FormatError(f"{self.what}: a null string where MM2 writes none")
        return self._take(n).decode()

    def version(self) -> None:
        version = self.int16()
        if version != VERSION:
            raise FormatError(f"{self.what}: version {version}, MM2 writes {VERSION}")


@dataclass(frozen=True)
class OffsetSync:
    """Upstream `upstream_offset` of `topic`-`partition` is `downstream_offset` downstream."""
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _string(self.topic) + _I32.pack(self.partition)

    def value(self) -> bytes:
        return _I64.pack(self.upstream_offset) + _I64.pack(self.downstream_offset)

    @classmethod
    def parse(cls, key: bytes, value: bytes) -> OffsetSync:
        k, v = _Reader(key, "offset sync key"), _Reader(value, "offset sync value")
        return cls(k.string(), k.int32(), v.int64(), v.int64())


@dataclass(frozen=True)
class Checkpoint:
    """Group `group`'s offset of upstream `upstream_offset` is `downstream_offset` on the
    downstream partition `topic`-`partition` (the renamed topic, as MM2 keys them)."""
    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + _I32.pack(self.partition)

    def value(self) -> bytes:
        return (_I16.pack(VERSION) + _I64.pack(self.upstream_offset)
                + _I64.pack(self.downstream_offset) + _string(self.metadata))

    @classmethod
    def parse(cls, key: bytes, value: bytes) -> Checkpoint:
        k, v = _Reader(key, "checkpoint key"), _Reader(value, "checkpoint value")
        group, topic, partition = k.string(), k.string(), k.int32()
        v.version()
        return cls(group, topic, partition, v.int64(), v.int64(), v.string())


@dataclass(frozen=True)
class Heartbeat:
    source: str
    target: str
    timestamp: int  # epoch milliseconds

    def key(self) -> bytes:
        return _string(self.source) + _string(self.target)

    def value(self) -> bytes:
        return _I16.pack(VERSION) + _I64.pack(self.timestamp)

    @classmethod
    def parse(cls, key: bytes, value: bytes) -> Heartbeat:
        k, v = _Reader(key, "heartbeat key"), _Reader(value, "heartbeat value")
        source, target = k.string(), k.string()
        v.version()
        return cls(source, target, v.int64())
