"""A compacted topic read from its start and kept read to its end: Connect's `KafkaBasedLog`.

The worker's state (connector configs, target states, statuses, source offsets) is what these
records say, and nothing else: `send` writes a record and then reads the topic to its end, so
the caller's change is applied by the same replay (`on_record`) that rebuilt the state at start.
A worker killed with -9 loses nothing it has answered for: it answered after the broker
acknowledged the write (acks=all) and it had read it back.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from minilog.connector.client import (
    AdminClient,
    Consumer,
    ErrorCode,
    KafkaError,
    NewTopic,
    Producer,
    TopicPartition,
)

OnRecord = Callable[[bytes | None, bytes | None], None]
READ_TIMEOUT_S = 60.0


def ensure_compacted_topic(client: dict, topic: str, partitions: int,
                           replication_factor: int) -> None:
    """Create `topic` with cleanup.policy=compact unless it exists (Connect's TopicAdmin)."""
    admin = AdminClient(client)
    try:
        admin.create_topics([NewTopic(topic, partitions, replication_factor,
                                      {"cleanup.policy": "compact"})], timeout=READ_TIMEOUT_S)
    except KafkaError as e:
        if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise
    finally:
        admin.close()


class TopicLog:
    """One compacted topic: every record replayed through `on_record`, in offset order per
    partition. Thread-safe: REST handlers write from several threads."""

    def __init__(self, client: dict, topic: str, on_record: OnRecord) -> None:
        self.topic = topic
        self._on_record = on_record
        self._lock = threading.RLock()
        self._producer = Producer({**client, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 0})
        self._consumer = Consumer({**client, "enable.auto.commit": False})
        # the end offsets are asked on connections of their own: the consumer's connection to
        # the leader usually holds a fetch parked in its long poll (fetch.max.wait.ms), and a
        # broker answers one connection's requests in order, so asking there waits it out
        self._admin = AdminClient(client)
        self._tps = [TopicPartition(topic, p)
                     for p in sorted(self._consumer.partitions_for(topic))]
        self._consumer.assign(self._tps)
        self._consumer.seek_to_beginning(self._tps)

    def read_to_end(self, timeout: float = READ_TIMEOUT_S) -> None:
        """Replay every record up to the topic's end offsets as of now."""
        with self._lock:
            ends = {tp: found.offset for tp, found in self._admin.list_offsets(
                {(tp.topic, tp.partition): "latest" for tp in self._tps}, timeout=timeout
            ).items()}
            deadline = time.monotonic() + timeout
            while any(self._consumer.position(tp) < end for tp, end in ends.items()):
                if time.monotonic() > deadline:
                    raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                     f"reading {self.topic} to its end took over {timeout:g}s")
                for rec in self._consumer.poll(0.5):
                    self._on_record(rec.key, rec.value)

    def send(self, key: bytes, value: bytes | None) -> None:
        """Write one record (None: a tombstone), then replay the topic up to it."""
        self.send_all([(key, value)])

    def send_all(self, records: list[tuple[bytes, bytes | None]]) -> None:
        with self._lock:
            futures = [self._producer.send(self.topic, value=v, key=k) for k, v in records]
            for f in futures:
                f.result(READ_TIMEOUT_S)
            self.read_to_end()

    def close(self) -> None:
        self._producer.close(5)
        self._consumer.close(5)
        self._admin.close()
