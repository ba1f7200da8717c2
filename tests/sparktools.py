"""Helpers for the connector tests: topics filled with known records, read back with
confluent-kafka (a client we did not write), streaming queries run to an end."""
import itertools
import json
import time

from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import KafkaError as CKError
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient as CKAdmin
from confluent_kafka.admin import NewPartitions, NewTopic

from minilog.jobs.pipeline import start_query

_names = itertools.count()


def unique(prefix):
    return f"{prefix}-{time.monotonic_ns()}-{next(_names)}"


def utc(hhmmss, day="2026-11-24"):
    """An event time as the jobs write it: utc("10:00:05") == "2026-11-24T10:00:05Z"."""
    return f"{day}T{hhmmss}Z"


def minute(hhmm):
    """The start and end of a 1-minute window, as the jobs write them."""
    h, m = map(int, hhmm.split(":"))
    return utc(f"{hhmm}:00"), utc(f"{h + (m + 1) // 60:02d}:{(m + 1) % 60:02d}:00")


def create_topic(bootstrap, name, partitions=1, config=None):
    admin = CKAdmin({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, config=config or {})]).values():
        f.result(60)
    wait_for(lambda: partitions_of(bootstrap, name) == partitions, f"topic {name} visible")
    return name


def partitions_of(bootstrap, topic):
    md = CKAdmin({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    t = md.topics.get(topic)
    return 0 if t is None or t.error is not None else len(t.partitions)


def add_partitions(bootstrap, topic, total):
    admin = CKAdmin({"bootstrap.servers": bootstrap})
    for f in admin.create_partitions([NewPartitions(topic, total)]).values():
        f.result(60)
    wait_for(lambda: partitions_of(bootstrap, topic) == total, f"{topic} has {total} partitions")


def produce(bootstrap, topic, records, one_per_batch=False):
    """records: [(partition, key, value, headers[, timestamp ms])]; every one acknowledged,
    else raise. `one_per_batch`: each record in a batch of its own (Tansu's ListOffsets
    answers the last batch's base offset + 1 for "latest", not the log end)."""
    p = CKProducer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                    **({"batch.num.messages": 1} if one_per_batch else {})})
    errors = []
    for part, key, value, headers, *stamp in records:
        p.produce(topic, value=value, key=key, partition=-1 if part is None else part,
                  headers=headers,
                  timestamp=stamp[0] if stamp else 0,
                  on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(60) == 0 and not errors, errors


def consume_all(bootstrap, topic, partitions, expect=None, deadline=60):
    """Every record of the topic's first `partitions` partitions read from the beginning, once
    `expect` records have arrived, or (`expect` None) once every partition is read to its end,
    for the output of a job that has finished: [(partition, offset, key, value, headers)]."""
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": unique("check"),
                    "enable.auto.commit": False, "auto.offset.reset": "earliest",
                    "enable.partition.eof": expect is None})
    c.assign([CKTopicPartition(topic, p, 0) for p in range(partitions)])
    out, at_end, end = [], set(), time.monotonic() + deadline
    try:
        while (len(out) < expect if expect is not None else len(at_end) < partitions) \
                and time.monotonic() < end:
            for m in c.consume(1000, 1.0):
                if m.error() is None:
                    out.append((m.partition(), m.offset(), m.key(), m.value(),
                                m.headers() or []))
                elif m.error().code() == CKError._PARTITION_EOF:
                    at_end.add(m.partition())
    finally:
        c.close()
    return sorted(out)


def latest_by_key(records):
    """{key: JSON value} of the last record of each key among consume_all's records."""
    out = {}
    for _, _, key, value, _ in records:  # sorted by partition, offset: the last one wins
        out[key.decode()] = json.loads(value)
    return out


def committed(bootstrap, group, topic, partitions):
    """The group's committed offsets as confluent-kafka reads them: {partition: offset}."""
    c = CKConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                    "enable.auto.commit": False})
    try:
        got = c.committed([CKTopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got}


def wait_for(condition, what, deadline=90, step=0.2):
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step)


def run_available_now(df, checkpoint, sink="memory", name=None, **options):
    """Run a streaming query with the availableNow trigger to its end; its progress list.
    Started as the jobs start theirs (start_query: again if Spark's source worker was late).

    A memory sink gets no `checkpoint`: Spark never recovers such a query from a checkpoint
    ("This query does not support recovering from checkpoint location. Delete .../offsets"),
    so a start again after a late source worker failed on the offsets the first attempt had
    written. Without one each start makes a temporary checkpoint of its own."""
    w = df.writeStream.format(sink)
    if sink != "memory":
        w = w.option("checkpointLocation", str(checkpoint))
    if name:
        w = w.queryName(name)
    for k, v in options.items():
        w = w.option(k, v)
    q = start_query(w.trigger(availableNow=True))
    try:
        assert q.awaitTermination(240), "availableNow query did not finish"
    finally:
        q.stop()
    if q.exception() is not None:
        raise q.exception()
    return [p for p in q.recentProgress if p["numInputRows"] or p["batchId"] is not None]


def minilog_copy(session, bootstrap, source, sink, checkpoint, per_trigger):
    """The writer of an availableNow `format("minilog")` copy of `source` into `sink`, at most
    `per_trigger` records a micro-batch, on `session` (a local or a Spark Connect one)."""
    return (session.readStream.format("minilog").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", per_trigger).load()
            .selectExpr("key", "value")
            .writeStream.format("minilog").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink).option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True))
