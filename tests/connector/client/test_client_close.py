"""Closing clients against a broker that does not answer: every record gets an outcome, and a
consumer leaves its group whatever state its join is in.

Kafka's behaviour is the reference: the Java producer's `close(timeout)` aborts every
unacknowledged batch (its callbacks run with an error); librdkafka's equivalent, run in the
same tests, is `flush(timeout)` then `purge()`, which reports every record too.
"""
import asyncio
import os
import signal
import threading
import time
from contextlib import contextmanager

import confluent_kafka
import pyarrow as pa
import pytest
from clienttools import make_topic
from minilog.connector.client import (
    AdminClient,
    AsyncConsumer,
    Consumer,
    KafkaError,
    Producer,
    TopicPartition,
)

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


def _wait_for(what, check, timeout=45.0, step=None):
    """Call `check` (after `step`) until it returns something true; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if step is not None:
            step()
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{what}: not after {timeout:g}s")


@pytest.mark.parametrize("client", ["minilog", "confluent-kafka"])
def test_a_consumer_closed_during_its_first_join_leaves_the_group(broker, client):
    """A member that closes while its first JoinGroup waits (it has a member id, no
    generation) must send LeaveGroup; else the rebalance counts it in and the rest of the
    group gets only its share of the partitions until the closed member's session expires.

    The first member has an on_revoke callback, so it rejoins only when it polls: the new
    member's JoinGroup stays parked on the coordinator until then, and it is closed there.
    Its session timeout (60 s) is longer than the test waits, so only a LeaveGroup lets the
    first member have every partition again. Run on the minilog broker, which parks JoinGroup
    as Kafka does: on Tansu 0.6 a LeaveGroup sent while the member's JoinGroup is pending
    is answered but the member still ends up in the next generation.
    """
    topic = make_topic(broker.bootstrap, 4)
    group = f"g-{topic}"
    assigned = []
    first = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                      "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest"})
    try:
        first.subscribe([topic], on_assign=lambda _c, tps: assigned.append(sorted(tps)),
                        on_revoke=lambda _c, tps: None)
        _wait_for("the first member owns every partition",
                  lambda: assigned and len(assigned[-1]) == 4, step=lambda: first.poll(0.1))
        settings = {"bootstrap.servers": broker.bootstrap, "group.id": group,
                    "session.timeout.ms": 60000}
        if client == "minilog":
            second = Consumer(settings)
        else:
            second = confluent_kafka.Consumer(settings)
        second.subscribe([topic])
        member_id = _wait_for("the second member has a member id", second.memberid,
                              step=lambda: second.poll(0.05) if client != "minilog" else None)
        assert len(assigned) == 1  # still the first generation: the join waits for `first`
        second.close()
        _wait_for("the first member is assigned again", lambda: len(assigned) > 1,
                  step=lambda: first.poll(0.1))
        assert assigned[-1] == [TopicPartition(topic, p) for p in range(4)], member_id
    finally:
        first.close()


def test_consumer_close_is_bounded_by_its_timeout_when_the_coordinator_is_frozen(make_broker):
    """Java's close(timeout): a coordinator that answers nothing (frozen) cannot hold close
    for its commit and LeaveGroup timeouts (65 s with the defaults)."""
    b = make_broker()
    topic = make_topic(b.bootstrap, 1)
    assigned = []
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic}",
                  "enable.auto.commit": True})
    c.subscribe([topic], on_assign=lambda _c, tps: assigned.append(tps))
    _wait_for("assigned", lambda: assigned, step=lambda: c.poll(0.1))
    with paused(b):
        t0 = time.monotonic()
        c.close(timeout=1.0)
        closed_in = time.monotonic() - t0
    assert closed_in < 20  # generous for a shared machine; unbounded, it takes 65 s


@pytest.mark.parametrize("face", ["sync", "asyncio"])
def test_close_revokes_only_what_on_assign_announced(broker, face):
    """The join completes in the background while the application does not poll, so its
    on_assign waits for a poll; close may run it or cancel it, and on_revoke must not be
    called for partitions the application was never given. (In Java both run inside poll:
    a consumer is never told of revoking what it was not told it had.)"""
    topic = make_topic(broker.bootstrap, 2)
    group = f"g-{topic}"
    calls = []
    settings = {"bootstrap.servers": broker.bootstrap, "group.id": group}
    callbacks = {"on_assign": lambda _c, tps: calls.append(("assign", set(tps))),
                 "on_revoke": lambda _c, tps: calls.append(("revoke", set(tps)))}

    def stable():
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            _wait_for("the group is stable",
                      lambda: admin.describe_groups([group])[group].state == "Stable")

    if face == "sync":
        c = Consumer(settings)
        c.subscribe([topic], **callbacks)
        stable()
        c.close()
    else:
        async def main():
            c = await AsyncConsumer(settings).start()
            c.subscribe([topic], **callbacks)
            await asyncio.to_thread(stable)
            await c.close()
        asyncio.run(asyncio.wait_for(main(), 60))
    announced = set()
    for kind, tps in calls:
        if kind == "assign":
            announced |= tps
        else:
            assert tps <= announced, calls
            announced -= tps


# A script that never closes its producer, run as a user runs it: its own interpreter exits.
# It sends once told to (a line on stdin), so that a test can pause the broker in between.
NEVER_CLOSED = """
import sys
from minilog.connector.client import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "linger.ms": int(sys.argv[3])})
p.partitions_for(sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()
for i in range(10):
    p.send(sys.argv[2], value=b"%d" % i)
"""


def _exit_without_close(bootstrap, topic, linger=0, before_sending=lambda: None):
    """(returncode, stderr, seconds from the go to the exit) of NEVER_CLOSED."""
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-c", NEVER_CLOSED, bootstrap, topic, str(linger)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n", proc.stderr.read()
        before_sending()
        started = time.monotonic()
        _, err = proc.communicate("go\n", timeout=60)
        return proc.returncode, err, time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_a_producer_never_closed_delivers_at_exit_quietly(broker):
    topic = make_topic(broker.bootstrap)
    code, err, _ = _exit_without_close(broker.bootstrap, topic, linger=500)  # all still queued
    assert (code, err) == (0, ""), err
    tp = TopicPartition(topic, 0)
    with Consumer({"bootstrap.servers": broker.bootstrap}) as consumer:
        assert consumer.end_offsets([tp])[tp] == 10


def test_a_producer_never_closed_that_cannot_deliver_says_so_in_one_line(make_broker):
    b = make_broker()
    topic = make_topic(b.bootstrap)
    try:  # the broker frozen once the producer has its metadata: nothing gets delivered
        code, err, took = _exit_without_close(
            b.bootstrap, topic, before_sending=lambda: os.kill(b.proc.pid, signal.SIGSTOP))
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    assert code == 0, err
    assert err == ("10 records not delivered: a Producer was never flushed or closed before "
                   "the interpreter exited (call flush() or close())\n"), err
    assert took < 30  # a brief flush, not delivery.timeout.ms
