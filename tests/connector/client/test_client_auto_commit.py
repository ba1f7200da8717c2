"""Auto-commit commits only what the application has finished with, as the Java client does:
inside `poll` (and `close`), the positions reached by the records of the previous `poll`.

librdkafka differs (its timer commits offsets stored when records were handed out, whether
or not the application polls again), so the Java client is the reference here, not
confluent-kafka.
"""
import time

import pytest
from clienttools import make_topic
from minilog.connector.client import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.timeout(120)


def _committed(consumer, tp):
    got = consumer.committed([tp])[tp]
    return None if got is None else got.offset


def _subscribed_with_records(bootstrap, topic, n, settings):
    """A consumer of `topic` (which gets `n` records) whose polls have returned all of them."""
    with Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(n):
            p.send(topic, b"%d" % i)
        assert p.flush(30) == 0
    c = Consumer(settings)
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        got += c.poll(0.5)
    assert len(got) == n
    return c


def test_records_returned_by_poll_are_committed_by_the_next_poll(broker):
    topic = make_topic(broker.bootstrap, 1)
    tp = TopicPartition(topic, 0)
    c = _subscribed_with_records(broker.bootstrap, topic, 10, {
        "bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
        "enable.auto.commit": True, "auto.commit.interval.ms": 100,
        "auto.offset.reset": "earliest"})
    try:
        # The application is still processing them (or crashed): ten commit intervals pass
        # without a poll, and nothing it has not finished with may be committed.
        time.sleep(1.0)
        assert _committed(c, tp) != 10
        assert c.poll(0.2) == []  # done with the ten: this poll commits them
        deadline = time.monotonic() + 30
        while _committed(c, tp) != 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _committed(c, tp) == 10
    finally:
        c.close()


def test_close_commits_what_the_last_poll_returned(broker):
    topic = make_topic(broker.bootstrap, 1)
    tp = TopicPartition(topic, 0)
    settings = {"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                "enable.auto.commit": True, "auto.commit.interval.ms": 60000,
                "auto.offset.reset": "earliest"}
    _subscribed_with_records(broker.bootstrap, topic, 5, settings).close()
    with Consumer(settings) as other:
        assert _committed(other, tp) == 5
