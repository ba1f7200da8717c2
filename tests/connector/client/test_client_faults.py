"""The idempotent producer under broker faults: what fails is what had to fail.

Kafka's behaviour is the reference (KIP-360, the Java client's TransactionManager): a record
that expires after being sent leaves a gap in its partition's sequence numbers, and a broker
that lost the producer's state answers OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID;
the client then bumps its producer epoch, restarts that partition's sequences at 0 and
retries, so only the records whose delivery timeout passed are lost. confluent-kafka runs the
same scenarios in the same tests.
"""
import os
import signal
import threading
import time

import confluent_kafka
import pytest
from clienttools import confluent_consume, make_topic
from minilog.connector.client import AdminClient, KafkaTimeoutError, Producer

pytestmark = pytest.mark.timeout(180)


class Outcomes:
    """Per-record outcomes from delivery callbacks: values written (and the log's length
    they prove), and errors by kind."""

    def __init__(self):
        self.written, self.timeouts, self.other, self.end = [], 0, [], 0
        self._lock = threading.Lock()

    def callback(self, value, expired):
        def call(err, msg):
            with self._lock:
                if err is None:
                    self.written.append(value)
                    offset = msg.offset() if callable(msg.offset) else msg.offset
                    self.end = max(self.end, offset + 1)
                elif expired(err):
                    self.timeouts += 1
                else:
                    self.other.append(str(err))
        return call


class _Minilog:
    def __init__(self, bootstrap, settings):
        self.p = Producer({"bootstrap.servers": bootstrap, **settings})

    def send(self, topic, value, cb):
        self.p.send(topic, value, on_delivery=cb)

    @staticmethod
    def expired(err):
        return isinstance(err, KafkaTimeoutError)

    def flush(self, timeout):
        return self.p.flush(timeout)

    def close(self):
        self.p.close(10)


class _Confluent:
    def __init__(self, bootstrap, settings):
        settings = {("message.timeout.ms" if k == "delivery.timeout.ms" else k): v
                    for k, v in settings.items()}
        self.p = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                           "enable.idempotence": True, **settings})

    def send(self, topic, value, cb):
        while True:
            try:
                self.p.produce(topic, value, on_delivery=cb)
                break
            except BufferError:
                self.p.poll(0.05)
        self.p.poll(0)

    @staticmethod
    def expired(err):
        return err.code() == confluent_kafka.KafkaError._MSG_TIMED_OUT

    def flush(self, timeout):
        return self.p.flush(timeout)

    def close(self):
        self.p.flush(10)


CLIENTS = {"minilog": _Minilog, "confluent-kafka": _Confluent}


@pytest.mark.parametrize(("kind", "client"), [("minilog", "minilog"),
                                              ("minilog", "confluent-kafka"),
                                              ("tansu", "minilog")])
def test_a_frozen_broker_loses_only_expired_records(request, make_broker, kind, client):
    """Records are sent while the broker is frozen for longer than delivery.timeout.ms, then
    it is killed and restarted (minilog) or let go on (Tansu, which keeps its state in
    memory): those in flight and queued expire, the ones sent afterwards are written, and
    nothing is written twice. (An expired record may still have been written: Tansu, let
    go on, writes what was waiting in its socket buffer.) The expired batches' sequences are
    a gap: minilog takes the bumped epoch at sequence 0; Tansu refuses an epoch bumped by the
    client, and the producer goes on under a new producer id. librdkafka bumps the epoch too
    and then fails every later record with PRODUCER_FENCED on Tansu: it is compared on
    minilog only."""
    b = make_broker() if kind == "minilog" else request.getfixturevalue("tansu")
    topic = make_topic(b.bootstrap, 1)
    outcomes = Outcomes()
    p = CLIENTS[client](b.bootstrap, {"delivery.timeout.ms": 2500, "linger.ms": 5,
                                      "request.timeout.ms": 2000})
    n = 0

    def send_for(seconds):
        nonlocal n
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            p.send(topic, b"%06d" % n, outcomes.callback(n, p.expired))
            n += 1
            if n % 50 == 0:
                time.sleep(0.01)
    try:
        send_for(0.5)
        assert p.flush(30) == 0
        os.kill(b.proc.pid, signal.SIGSTOP)
        try:
            send_for(1.0)  # in flight and queued while the broker is frozen
            time.sleep(2.5)  # every one of them is past delivery.timeout.ms
        finally:
            if kind == "minilog":
                b.kill()
                b.start()
            else:
                os.kill(b.proc.pid, signal.SIGCONT)
        send_for(1.0)
        assert p.flush(60) == 0
    finally:
        p.close()
    assert outcomes.other == []
    assert outcomes.timeouts > 0 and outcomes.written
    assert len(outcomes.written) + outcomes.timeouts == n
    assert_written_once_in_order(b.bootstrap, topic, outcomes)


def test_a_deleted_and_recreated_topic_takes_the_next_records(broker):
    """The new topic's partition has no state for the producer, which goes on where its
    sequence numbers were: the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER (or
    UNKNOWN_PRODUCER_ID), and the producer restarts the partition's sequences, as the Java
    client does. (librdkafka differs: it raises a fatal "sequence desynchronization" error
    and the producer is unusable, so confluent-kafka is not the reference here.)"""
    topic = make_topic(broker.bootstrap, 1)
    outcomes = Outcomes()
    p = _Minilog(broker.bootstrap, {"linger.ms": 0})
    try:
        for i in range(10):
            p.send(topic, b"%d" % i, outcomes.callback(i, p.expired))
        assert p.flush(30) == 0
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.delete_topics([topic], timeout=20)
        make_topic(broker.bootstrap, 1, name=topic)
        outcomes.end = 0  # the new topic's log
        for i in range(10, 20):
            p.send(topic, b"%d" % i, outcomes.callback(i, p.expired))
        assert p.flush(60) == 0
    finally:
        p.close()
    assert outcomes.other == [] and outcomes.timeouts == 0
    assert sorted(outcomes.written) == list(range(20))
    outcomes.written = list(range(10, 20))
    assert_written_once_in_order(broker.bootstrap, topic, outcomes)


def assert_written_once_in_order(bootstrap, topic, outcomes):
    """The log of partition 0, up to the last acknowledged record, holds every record written,
    once each, in sending order. (Not up to the end offset from ListOffsets: Tansu's can trail
    its log by a batch.)"""
    log = [int(m.value()) for m in confluent_consume(bootstrap, topic, [0], outcomes.end)]
    assert len(log) == outcomes.end
    assert log == sorted(set(log))  # in order, no duplicates
    assert set(outcomes.written) <= set(log)
