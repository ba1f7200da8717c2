"""Tools for tests of KIP-848's consumer group protocol: members that poll in their own thread,
and the coordinator's view of who owns what, sampled with ConsumerGroupDescribe."""
import threading
import time

from minilog.connector.protocol import ApiKey, request
from wire import RawConnection

_DESCRIBE = request(ApiKey.CONSUMER_GROUP_DESCRIBE)


def describe(conn: RawConnection, group: str):
    """The group as ConsumerGroupDescribe answers it (one group)."""
    resp = conn.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 0,
                     _DESCRIBE.cls(group_ids=[group], include_authorized_operations=False))
    return resp.groups[0]


def owned(described) -> dict[str, set[tuple[str, int]]]:
    """{member id: {(topic, partition)}} of the members' current assignments."""
    return {m.member_id: {(tp.topic_name, p) for tp in m.assignment.topic_partitions
                          for p in tp.partitions} for m in described.members}


def settled(conn: RawConnection, group: str, members: int, partitions: int):
    """The description once the group is Stable with `members` members owning `partitions`
    partitions between them, else None (for wait_until)."""
    d = describe(conn, group)
    if d.error_code or d.group_state != "Stable" or len(d.members) != members:
        return None
    return d if sum(len(ps) for ps in owned(d).values()) == partitions else None


class OwnershipSampler:
    """Describes the group again and again in a thread, recording every moment a partition
    appeared in two members' current assignments."""

    def __init__(self, bootstrap: str, group: str):
        self.conn = RawConnection(bootstrap)
        self.group = group
        self.samples = 0
        self.overlaps: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(30)
        self.conn.sock.close()

    def _run(self):
        while not self._stop.is_set():
            seen: dict = {}
            for member, parts in owned(describe(self.conn, self.group)).items():
                for tp in parts:
                    if tp in seen:
                        self.overlaps.append((tp, seen[tp], member))
                    seen[tp] = member
            self.samples += 1
            self._stop.wait(0.02)


def make_consumer(client: str, conf: dict):
    """A consumer of `client` ("confluent" or "minilog"), both taking Kafka's config names."""
    if client == "minilog":
        from minilog.connector.client import Consumer
    else:
        from confluent_kafka import Consumer
    return Consumer(conf)


class PollingMember:
    """A consumer (confluent-kafka's or minilog's) polled by its own thread (rebalances
    progress only inside poll), counting the records it reads; `close()` leaves the group."""

    def __init__(self, conf: dict, topics: list[str], client: str = "confluent"):
        self.client = client
        self.consumer = make_consumer(client, conf)
        self.consumer.subscribe(topics)
        self.records = 0
        self.last: dict = {}
        self.values: set = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            if self.client == "minilog":
                for r in self.consumer.poll(0.05):
                    self._read(r.topic, r.partition, r.offset, r.value)
                continue
            msg = self.consumer.poll(0.05)
            if msg is not None and not msg.error():
                self._read(msg.topic(), msg.partition(), msg.offset(), msg.value())

    def _read(self, topic, partition, offset, value):
        self.records += 1
        self.last[(topic, partition)] = offset
        self.values.add(value)

    def commit_read(self) -> None:
        """Commit the offsets after the records read (call after `stop_polling`)."""
        offsets = {tp: o + 1 for tp, o in self.last.items()}
        if self.client == "minilog":
            self.consumer.commit(offsets)
        else:
            from confluent_kafka import TopicPartition
            self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                 asynchronous=False)

    def committed(self, tps) -> dict:
        """{(topic, partition): committed offset or None}."""
        if self.client == "minilog":
            found = self.consumer.committed(tps)
            return {(tp.topic, tp.partition): om.offset if om else None
                    for tp, om in found.items()}
        from confluent_kafka import TopicPartition
        found = self.consumer.committed([TopicPartition(t, p) for t, p in tps], 30)
        return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in found}

    def close(self, timeout: float = 60.0):
        self._stop.set()
        self._thread.join(timeout)
        self.consumer.close()

    def stop_polling(self):
        self._stop.set()
        self._thread.join(60)


def elapsed(since: float) -> float:
    return time.monotonic() - since
