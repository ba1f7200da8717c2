"""Closing clients against a broker that does not answer: every record gets an outcome, and a
consumer leaves its group whatever state its join is in.

Kafka's behaviour is the reference: the Java producer's `close(timeout)` aborts every
unacknowledged batch (its callbacks run with an error); librdkafka's equivalent, run in the
same tests, is `flush(timeout)` then `purge()`, which reports every record too.
"""
import os
import signal
import threading
import time
from contextlib import contextmanager

import confluent_kafka
import pyarrow as pa
import pytest
from clienttools import make_topic
from minilog.connector.client import KafkaError, Producer

pytestmark = pytest.mark.timeout(120)


@contextmanager
def paused(broker):
    """The broker process frozen (SIGSTOP): connections stay open, nothing is answered."""
    os.kill(broker.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(broker.proc.pid, signal.SIGCONT)


class Outcomes:
    """Delivery callbacks, counted from whichever thread calls them."""

    def __init__(self):
        self.errors, self.successes = [], 0
        self._lock = threading.Lock()

    def __call__(self, err, _msg):
        with self._lock:
            if err is None:
                self.successes += 1
            else:
                self.errors.append(err)


@pytest.mark.parametrize("client", ["minilog", "confluent-kafka"])
def test_close_with_a_timeout_fails_every_unacknowledged_record(make_broker, client):
    b = make_broker()
    topic = make_topic(b.bootstrap, 1)
    seen = Outcomes()
    if client == "minilog":
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        p.send(topic, b"warm-up").result(30)  # connected, producer id known
        with paused(b):
            futures = [p.send(topic, b"%d" % i, on_delivery=seen) for i in range(20)]
            t0 = time.monotonic()
            p.close(timeout=1.0)
            closed_in = time.monotonic() - t0
        assert all(f.done() for f in futures)
        assert all(isinstance(f.exception(0), KafkaError) for f in futures)
        assert closed_in < 20  # the timeout bounds close (generous: a shared machine)
    else:
        p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        p.produce(topic, b"warm-up")
        assert p.flush(30) == 0
        with paused(b):
            for i in range(20):
                p.produce(topic, b"%d" % i, on_delivery=seen)
            assert p.flush(1.0) == 20
            p.purge()
            assert p.flush(30) == 0  # serves the purged records' callbacks
    assert seen.successes == 0
    assert len(seen.errors) == 20


def test_close_with_a_timeout_resolves_a_send_arrow_delivery(make_broker):
    b = make_broker()
    topic = make_topic(b.bootstrap, 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.size": 1024})
    p.send(topic, b"warm-up").result(30)
    rows = pa.record_batch({"value": pa.array([b"x" * 100] * 500, pa.binary())})
    with paused(b):
        delivery = p.send_arrow(rows, topic=topic)
        p.close(timeout=1.0)
    assert delivery.done()
    with pytest.raises(KafkaError, match="closed"):
        delivery.result(0)
