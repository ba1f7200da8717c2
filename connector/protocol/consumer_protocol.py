"""Kafka's consumer protocol payloads: ConsumerProtocolSubscription and ConsumerProtocolAssignment.

A classic group's members send a subscription inside JoinGroup and the leader answers each with
an assignment inside SyncGroup; a KIP-848 coordinator with classic members reads and writes them
itself. These are the layouts of Kafka's ConsumerProtocolSubscription/Assignment.json (versions
0-3, not flexible), prefixed by an int16 version, exactly as the Java client writes them. A
reader meeting a newer version reads the fields it knows and ignores the rest, as Java does;
that is why fields are only appended.
"""
import struct
from typing import NamedTuple

from .errors import CorruptMessage
from .primitives import Reader, pack_int16, pack_int32, pack_string

CONSUMER_PROTOCOL_TYPE = "consumer"
LATEST_VERSION = 3


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self):
        return f"{self.topic}-{self.partition}"


class Subscription(NamedTuple):
    """What one member asks for: topics, plus (v1+) what it owns and (v2+) its generation."""
    topics: tuple
    user_data: bytes | None = None
    owned_partitions: tuple = ()  # of TopicPartition
    generation_id: int = -1
    rack_id: str | None = None
    version: int = LATEST_VERSION


class Assignment(NamedTuple):
    partitions: tuple  # of TopicPartition
    user_data: bytes | None = None
    version: int = LATEST_VERSION


# ---- encoding -----------------------------------------------------------------------------
def _bytes(b):
    return pack_int32(-1) if b is None else pack_int32(len(b)) + bytes(b)


def _topic_partitions(tps):
    """[TopicPartition] as Kafka's [(topic, [partition])] array, topics in first-seen order."""
    by_topic = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    out = [pack_int32(len(by_topic))]
    for topic, parts in by_topic.items():
        out.append(pack_string(topic))
        out.append(pack_int32(len(parts)))
        out.append(struct.pack(f">{len(parts)}i", *parts))
    return b"".join(out)


def _read_topic_partitions(r):
    out = []
    for _ in range(_count(r)):
        topic = r.string()
        out.extend(TopicPartition(topic, r.int32()) for _ in range(_count(r)))
    return tuple(out)


def _count(r):
    n = r.int32()
    if n < 0:
        raise CorruptMessage("null array in a consumer protocol message")
    return n


def _version(r, what):
    v = r.int16()
    if v < 0:
        raise CorruptMessage(f"{what} version {v} is negative")
    return v


def encode_subscription(sub: Subscription, version: int | None = None) -> bytes:
    """ConsumerProtocolSubscription bytes at `version` (default: the subscription's own)."""
    v = sub.version if version is None else version
    if not 0 <= v <= LATEST_VERSION:
        raise ValueError(f"subscription version {v} is not 0-{LATEST_VERSION}")
    out = [pack_int16(v), pack_int32(len(sub.topics))]
    out.extend(pack_string(t) for t in sub.topics)
    out.append(_bytes(sub.user_data))
    if v >= 1:
        out.append(_topic_partitions(sub.owned_partitions))
    if v >= 2:
        out.append(pack_int32(sub.generation_id))
    if v >= 3:
        out.append(pack_string(sub.rack_id))
    return b"".join(out)


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    r = Reader(memoryview(data))
    version = _version(r, "subscription")
    topics = tuple(r.string() for _ in range(_count(r)))
    user_data = r.bytes(nullable=True)
    owned, generation, rack = (), -1, None
    if version >= 1:
        owned = _read_topic_partitions(r)
    if version >= 2:
        generation = r.int32()
    if version >= 3:
        rack = r.string(nullable=True)
    return Subscription(topics, user_data, owned, generation, rack, version)


def encode_assignment(assignment: Assignment, version: int | None = None) -> bytes:
    v = assignment.version if version is None else version
    if not 0 <= v <= LATEST_VERSION:
        raise ValueError(f"assignment version {v} is not 0-{LATEST_VERSION}")
    return pack_int16(v) + _topic_partitions(assignment.partitions) + _bytes(assignment.user_data)


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """An Assignment; empty bytes (what the broker hands a member the leader left out) is none."""
    if not data:
        return Assignment(())
    r = Reader(memoryview(data))
    version = _version(r, "assignment")
    partitions = _read_topic_partitions(r)
    return Assignment(partitions, r.bytes(nullable=True), version)
