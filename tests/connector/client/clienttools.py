"""Helpers shared by the client tests (the `cluster` fixture lives in conftest.py)."""
import time
import uuid

import confluent_kafka
from minilog.connector.client import AdminClient, NewTopic


def unique(prefix="t"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_topic(bootstrap, partitions=1, config=None, name=None):
    name = name or unique()
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, config)], timeout=20)
    return name


def confluent_consume(bootstrap, topic, partitions, count, timeout=30.0):
    """`count` records read by confluent-kafka from the start of `partitions` of `topic`."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                  for p in partitions])
        out, deadline = [], time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise AssertionError(f"confluent-kafka consumer error: {m.error()}")
            out.append(m)
        return out
    finally:
        c.close()
