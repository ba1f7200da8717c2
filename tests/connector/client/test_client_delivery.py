"""Delivery outcomes and the producer's hand-over, the per-record hot path, against real brokers.

A batch completes its futures in one pass (each gets the batch and its index; RecordMetadata
is built only when asked), and `Producer.send` hands records to the loop thread, which appends
the common ones inline. These tests pin down that nothing of the per-record behaviour is lost:
every future ends once, callbacks run exactly once, waiters wake, order holds. Where a test
needs a delivery to be still pending, the broker is paused (SIGSTOP): it cannot answer.
"""
import logging
import threading
import time

import pytest
from clienttools import confluent_consume, make_topic, unique
from minilog.connector.client import (
    DeliveryFuture,
    KafkaError,
    KafkaTimeoutError,
    Producer,
    RecordMetadata,
)
from minilog.connector.protocol import ErrorCode
from waiting import blocked, wait_until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def ready(make_broker):
    """A broker of its own (tests pause it), a topic, and a producer that has delivered once
    (connected, metadata known), so a later send waits on the broker alone."""
    b = make_broker()
    topic = make_topic(b.bootstrap, 1)
    with Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0}) as p:
        assert p.send(topic, b"first").result(30).offset == 0
        yield b, topic, p


def test_batch_completes_every_future_with_its_metadata(broker):
    topic = make_topic(broker.bootstrap, 1)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50}) as p:
        futs = [p.send(topic, b"v%d" % i, timestamp=1000 + i) for i in range(5)]
        assert p.flush(30) == 0
    assert [f.result(0) for f in futs] == [RecordMetadata(topic, 0, i, 1000 + i) for i in range(5)]
    assert all(f.done() and f.exception(0) is None for f in futs)


def test_log_append_time_replaces_the_records_timestamps(broker):
    topic = make_topic(broker.bootstrap, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50}) as p:
        futs = [p.send(topic, b"a", timestamp=1000), p.send(topic, b"b", timestamp=1001)]
        assert p.flush(30) == 0
    mds = [f.result(0) for f in futs]
    assert [md.offset for md in mds] == [0, 1]
    assert all(md.timestamp >= before for md in mds)  # the broker's clock, not 1000 and 1001


def test_acks_0_reports_no_offset_and_the_records_own_timestamps(broker):
    topic = make_topic(broker.bootstrap, 1)
    with Producer({"bootstrap.servers": broker.bootstrap, "acks": 0, "linger.ms": 50}) as p:
        futs = [p.send(topic, b"a", timestamp=1000), p.send(topic, b"b", timestamp=1001)]
        assert p.flush(30) == 0
    assert [(f.result(0).offset, f.result(0).timestamp) for f in futs] == [(-1, 1000), (-1, 1001)]
    assert [m.value() for m in confluent_consume(broker.bootstrap, topic, [0], 2)] == [b"a", b"b"]


def test_failure_reaches_future_and_callback(broker):
    """The broker refuses the batch (the topic's max.message.bytes): both ways of hearing of
    it get the same error."""
    topic = make_topic(broker.bootstrap, 1, {"max.message.bytes": "1000"})
    seen = []
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as p:
        fut = p.send(topic, b"x" * 2000, on_delivery=lambda err, md: seen.append((err, md)))
        p.flush(30)
    err = fut.exception(0)
    assert isinstance(err, KafkaError) and err.name == "MESSAGE_TOO_LARGE"
    assert seen == [(err, None)]
    with pytest.raises(KafkaError, match="MESSAGE_TOO_LARGE"):
        fut.result(0)


def test_callbacks_run_once_in_order_and_their_errors_are_logged(ready, caplog):
    b, topic, p = ready
    calls = []

    def bad(f):
        calls.append("bad")
        raise RuntimeError("callback bug")
    with caplog.at_level(logging.ERROR, "minilog.client"):
        with b.paused():  # still pending while the callbacks are added: the loop thread runs them
            fut = p.send(topic, b"x", on_delivery=lambda err, md: calls.append(("first", md.offset)))
            fut.add_done_callback(bad)
            fut.add_done_callback(lambda f: calls.append("third"))
            assert not fut.done()
        assert p.flush(30) == 0
    assert calls == [("first", 1), "bad", "third"]
    assert "delivery callback failed" in caplog.text
    fut.add_done_callback(lambda f: calls.append("late"))  # already done: runs at once
    assert calls[-1] == "late" and len(calls) == 4


def test_waiter_in_another_thread_wakes_and_pending_times_out(ready):
    b, topic, p = ready
    got = []
    with b.paused():
        fut = p.send(topic, b"x", timestamp=1000)
        with pytest.raises(KafkaTimeoutError):
            fut.result(0.01)
        t = threading.Thread(target=lambda: got.append(fut.result(60)))
        t.start()
        wait_until(lambda: blocked(t), what="the waiter to block")
    t.join(60)
    assert got == [RecordMetadata(topic, 0, 1, 1000)]


def test_callbacks_added_while_batches_complete_run_exactly_once(ready):
    """add_done_callback from another thread racing the loop thread's completion: the broker
    is let go while the callbacks are being added."""
    b, topic, p = ready
    for _ in range(10):
        with b.paused():
            futs = [p.send(topic, b"r") for _ in range(2000)]
            counts = [0] * len(futs)

            def add(futs=futs, counts=counts):
                for i, f in enumerate(futs):
                    f.add_done_callback(lambda _, i=i, c=counts: c.__setitem__(i, c[i] + 1))
            t = threading.Thread(target=add)
            t.start()
        assert p.flush(30) == 0
        t.join(30)
        assert counts == [1] * len(futs)


def test_public_delivery_future_works_standalone():
    """DeliveryFuture is public for code that hands out futures of its own."""
    fut = DeliveryFuture()
    seen = []
    fut.add_done_callback(seen.append)
    assert not fut.done() and "pending" in repr(fut)
    md = RecordMetadata("t", 0, 1, 2)
    fut.set_result(md)
    assert fut.done() and fut.result(0) == md and seen == [fut] and "done" in repr(fut)
    bad = DeliveryFuture()
    bad.set_exception(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "x"))
    assert bad.done() and isinstance(bad.exception(0), KafkaError) and "failed" in repr(bad)


def test_hand_over_mixes_inline_and_slow_paths_in_order(broker):
    """Explicit and keyless (sticky) records take the inline path, keyed records, str values,
    headers, timestamps and bad partitions the full one; interleaved, per-partition order
    and every outcome must be exactly as sent."""
    topic = make_topic(broker.bootstrap, 3)
    expected = {p: [] for p in range(3)}
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                   "batch.size": 2000}) as p:
        futs = []
        for i in range(3000):
            kind = i % 6
            if kind == 0:
                futs.append((i, p.send(topic, b"e%d" % i, partition=i % 3)))
            elif kind == 1:
                futs.append((i, p.send(topic, b"n%d" % i)))
            elif kind == 2:
                futs.append((i, p.send(topic, b"k%d" % i, key=b"key%d" % (i % 10))))
            elif kind == 3:
                futs.append((i, p.send(topic, f"s{i}", partition=1, timestamp=5_000 + i)))
            elif kind == 4:
                futs.append((i, p.send(topic, b"h%d" % i, partition=2, headers={"h": b"x"})))
            else:
                futs.append((i, p.send(topic, b"bad", partition=3)))
        assert p.flush(30) == 0
        for i, fut in futs:
            if i % 6 == 5:
                with pytest.raises(KafkaError) as e:
                    fut.result(0)
                assert e.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
                continue
            md = fut.result(0)
            assert md.topic == topic and md.offset >= 0
            if i % 6 == 3:
                assert md.timestamp == 5_000 + i
            value = (b"enkshx"[i % 6:i % 6 + 1] + b"%d" % i)
            expected[md.partition].append((md.offset, value))
    for part, sent in expected.items():
        sent.sort()
        assert [o for o, _ in sent] == list(range(len(sent)))  # dense: nothing lost
        got = confluent_consume(broker.bootstrap, topic, [part], len(sent))
        assert [m.value() for m in got] == [v for _, v in sent]


def test_send_to_missing_topic_fails_after_max_block(broker):
    with Producer({"bootstrap.servers": broker.bootstrap, "allow.auto.create.topics": False,
                   "max.block.ms": 300}) as p:
        futs = [p.send(unique("missing"), b"x") for _ in range(3)]
        for f in futs:
            with pytest.raises(KafkaError) as e:
                f.result(10)
            assert e.value.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_sends_block_on_buffer_memory_until_deliveries_free_it(make_broker):
    """While the broker cannot answer, sends fill buffer.memory and then block: until
    max.block.ms (then fail), or until deliveries free space (then all arrive, in order)."""
    b = make_broker()
    topic = make_topic(b.bootstrap, 1)
    value = b"x" * 1000
    settings = {"bootstrap.servers": b.bootstrap, "buffer.memory": 20_000, "batch.size": 5_000,
                "linger.ms": 1}
    with Producer({**settings, "max.block.ms": 500}) as impatient, \
            Producer({**settings, "max.block.ms": 120_000}) as patient:
        impatient.send(topic, b"w").result(30)
        patient.send(topic, b"w").result(30)
        with b.paused():
            accepted = []
            with pytest.raises(KafkaTimeoutError, match="buffer.memory"):
                while len(accepted) < 100:
                    accepted.append(impatient.send(topic, value))
            assert 0 < len(accepted) <= 20  # no more than buffer.memory holds
            sent = []
            t = threading.Thread(target=lambda: sent.extend(
                patient.send(topic, b"%04d" % i + value) for i in range(200)))
            t.start()
            wait_until(lambda: blocked(t), what="a send to block on buffer.memory")
            assert not any(f.done() for f in accepted)
        t.join(60)
        assert impatient.flush(60) == 0 and patient.flush(60) == 0
        assert all(f.exception(0) is None for f in accepted + sent) and len(sent) == 200
        # Everything delivered was released: the buffer takes as much again without blocking.
        again = [impatient.send(topic, value) for _ in range(300)]
        assert impatient.flush(60) == 0 and all(f.exception(0) is None for f in again)
    offsets = [f.result(0).offset for f in sent]
    assert offsets == sorted(offsets)
    values = [m.value() for m in confluent_consume(b.bootstrap, topic, [0], 2 + len(accepted) + 500)]
    assert [v for v in values if v[:4].isdigit()] == [b"%04d" % i + value for i in range(200)]
