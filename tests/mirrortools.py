"""`minilog mirror mm2.properties` as a test process, and what the tests read back: every
record of a topic partition by partition (confluent-kafka, read_committed, librdkafka's
default), MM2's internal topics decoded.

The mirror starts a Spark JVM and Python workers of its own; every process it starts carries a
marker in its environment (sparkprocs), so kill -9 and teardown reach all of them, and nothing
else.
"""
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from brokers import MinilogBroker
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError as CKError
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient as CKAdmin
from confluent_kafka.admin import NewTopic
from sparkprocs import MarkedProcess, environment
from waiting import wait_until

START_TIMEOUT_S = 240.0
FAST = {  # MM2's settings, with intervals short enough for a test
    "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
    "checkpoints.topic.replication.factor": "1", "heartbeats.topic.replication.factor": "1",
    "emit.checkpoints.interval.seconds": "1", "sync.group.offsets.interval.seconds": "1",
    "refresh.topics.interval.seconds": "2", "refresh.groups.interval.seconds": "2",
    "sync.group.offsets.enabled": "true",
}


def mm2_properties(source, target, **more):
    props = {"clusters": "A, B", "A.bootstrap.servers": source, "B.bootstrap.servers": target,
             "A->B.enabled": "true", **FAST, **more}
    return "".join(f"{k} = {v}\n" for k, v in props.items())


class MirrorProcess(MarkedProcess):
    """`minilog mirror` on a properties file in `directory`, restartable."""

    def __init__(self, directory, source, target, **more):
        self.dir = Path(directory)
        self.properties = self.dir / "mm2.properties"
        self.properties.write_text(mm2_properties(source, target, **{
            "spark.sql.streaming.checkpointLocation": str(self.dir / "checkpoints"), **more}))
        self.proc = None
        self.mark = None

    @property
    def log(self):
        return (self.dir / "mirror.log").read_text(errors="replace")

    def start(self, env=None, args=()):
        """Start it (`args`: more command-line arguments, such as `--clusters B`)."""
        self.mark = uuid.uuid4().hex
        log = self.dir / "mirror.log"
        self._from = log.stat().st_size if log.exists() else 0  # this start's lines only
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "minilog.connector.cli", "mirror", str(self.properties),
                 *args],
                env=environment(self.mark, **(env or {})), stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self._started, START_TIMEOUT_S,
                   f"the mirror to start (log: {self.dir / 'mirror.log'})", interval=0.5)
        return self

    def _started(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"the mirror exited with {self.proc.returncode}:\n{self.log}")
        return "mirroring " in self.log[self._from:]



@pytest.fixture(scope="module")
def clusters():
    """Two minilog brokers, the clusters A and B: (A's bootstrap servers, B's)."""
    a, b = MinilogBroker().start(), MinilogBroker().start()
    yield a.bootstrap, b.bootstrap
    a.cleanup()
    b.cleanup()


def create(bootstrap, name, partitions, config=None):
    admin = CKAdmin({"bootstrap.servers": bootstrap})  # alive until its futures are done
    for f in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        f.result(60)


def produce(bootstrap, topic, partitions, count, start=0):
    """`count` records spread over the partitions, each with a key, headers and its own
    timestamp; returns nothing until every one is acknowledged."""
    p = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, value=f"value-{i}".encode(), key=f"key-{i}".encode(),
                  partition=i % partitions, timestamp=1_700_000_000_000 + i,
                  headers=[("n", str(i).encode()), ("empty", b"")])
    assert p.flush(60) == 0


def partitions_of(bootstrap, topic):
    md = CKAdmin({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    t = md.topics.get(topic)
    return 0 if t is None or t.error is not None else len(t.partitions)


def topic_exists(bootstrap, topic):
    """Whether `topic` is listed, asked without naming it: a metadata request naming a topic
    lets the broker create it (auto.create.topics.enable)."""
    return topic in CKAdmin({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics


def read_all(bootstrap, topic, partitions, timeout=60.0, offsets=False):
    """{partition: [(key, value, headers, timestamp)]} of every record now in the topic, in
    offset order (read to each partition's end); `offsets`: {partition: {offset: key}}."""
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                    "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([CKTopicPartition(topic, p, 0) for p in range(partitions)])
    out = {p: [] for p in range(partitions)}
    at_end = set()
    try:
        def drained():
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    at_end.discard(m.partition())
                    out[m.partition()].append((m.offset(), m.key()) if offsets else (
                        m.key(), m.value(), m.headers() or [], m.timestamp()[1]))
                elif m.error().code() == CKError._PARTITION_EOF:
                    at_end.add(m.partition())
            return len(at_end) == partitions
        wait_until(drained, timeout, f"{topic} read to its end", interval=0)
    finally:
        c.close()
    return {p: dict(rows) for p, rows in out.items()} if offsets else out


def read_internal(bootstrap, topic, parse):
    """Every record of one of MM2's one-partition internal topics, parsed."""
    return [parse(k, v) for k, v, _, _ in read_all(bootstrap, topic, 1)[0]]
