"""Which partition a record goes to: the Java client's murmur2 for keys, sticky for null keys.

Keyed records must land where every other Kafka client puts them, or a topic written by mixed
clients loses per-key ordering; so `murmur2` reproduces the Java client's
`Utils.murmur2` bit for bit and the partition is `toPositive(murmur2(key)) % numPartitions`
(librdkafka calls this `murmur2_random`).

Null-key records stick to one partition until a batch for it is sent, then move to another
(Java's sticky partitioner, KIP-480): batches fill up instead of spreading a few records over
every partition, which is what makes linger/batching effective for keyless traffic.
"""
import random
import struct
from collections.abc import Callable, Sequence

# A user's partitioner: (topic, key, partitions, available) -> partition.
PartitionerFn = Callable[[str, bytes | memoryview | None, Sequence[int], Sequence[int]], int]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's murmur2 (Java `Utils.murmur2`) of `data`, as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length >> 2
    if n4:
        for k in struct.unpack_from(f"<{n4}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    return n & 0x7FFFFFFF


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class Partitioner:
    """Chooses partitions for a producer.

    `strategy` is "murmur2_random" (the default: murmur2 for keys, sticky for null keys),
    "murmur2" (null keys hash like empty keys, so they all share one partition), "random"
    (every record picks at random), "uniform_sticky" (keys ignored: every record follows the
    sticky partition, Java's UniformStickyPartitioner), "round_robin" (keys ignored: each
    record takes the next available partition, Java's RoundRobinPartitioner), or a callable
    `(topic, key, partitions, available) -> int`
    where `partitions` is the sorted list of partition ids and `available` those with a leader.
    """

    def __init__(self, strategy: str | PartitionerFn = "murmur2_random") -> None:
        self.strategy = strategy
        self._sticky: dict[str, int] = {}  # topic -> partition
        self._next: dict[str, int] = {}    # round_robin: how many records it has placed
        # by topic

    def partition(self, topic: str, key: bytes | memoryview | None, partitions: Sequence[int],
                  available: Sequence[int]) -> int:
        if callable(self.strategy):
            return self.strategy(topic, key, partitions, available)
        n = len(partitions)
        if self.strategy == "round_robin":
            choices = available or partitions
            i = self._next[topic] = self._next.get(topic, -1) + 1
            return choices[i % len(choices)]
        if self.strategy == "uniform_sticky":
            key = None
        if key is not None or self.strategy == "murmur2":
            return partitions[to_positive(murmur2(key or b"")) % n]
        if self.strategy == "random":
            return random.choice(available or partitions)
        p = self._sticky.get(topic)
        if p is None or p not in partitions:
            p = self._sticky[topic] = random.choice(available or partitions)
        return p

    def sticky_partitions(self) -> dict[str, int] | None:
        """The {topic: partition} that keyless records currently go to, or None when keyless
        records are not sticky (another strategy). The producer's hand-over reads it directly
        (valid only if that partition still exists: it checks); only this class writes it."""
        return self._sticky if self.strategy in ("murmur2_random", "uniform_sticky") else None

    def batch_sent(self, topic: str, partition: int, available: Sequence[int]) -> None:
        """A batch of `topic`/`partition` left the accumulator: keyless records move on."""
        if self._sticky.get(topic) != partition:
            return
        # Uniform over the other available partitions: a few random draws first, so that
        # the common case does not build a list of every partition for each batch sent.
        n = len(available)
        for _ in range(8 if n > 1 else 0):
            p = available[random.randrange(n)]
            if p != partition:
                self._sticky[topic] = p
                return
        choices = [p for p in available if p != partition]
        if choices:
            self._sticky[topic] = random.choice(choices)
        else:
            self._sticky.pop(topic, None)
