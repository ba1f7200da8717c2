"""Delivery outcomes and the producer's hand-over, the per-record hot path.

A batch completes its futures in one pass (each gets the batch and its index; RecordMetadata
is built only when asked), and `Producer.send` hands records to the loop thread, which appends
the common ones inline. These tests pin down that nothing of the old per-record behaviour was
lost: every future ends once, callbacks run exactly once, waiters wake, order holds.
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
    TopicPartition,
)
from minilog.connector.client.config import Config
from minilog.connector.client.delivery import _SentFuture
from minilog.connector.client.sender import ProducerCore, _Batch
from minilog.connector.protocol import ErrorCode

pytestmark = pytest.mark.timeout(120)


def _core():
    return ProducerCore(Config("producer", {"bootstrap.servers": "127.0.0.1:1"}), False)


def _sent(on_delivery=None):
    fut = _SentFuture()  # as Producer.send makes them
    fut._watch = None if on_delivery is None else [on_delivery]
    return fut


def _batch(core, futures, t0=1000):
    tp = TopicPartition("t", 3)
    b = _Batch(tp, 0.0, 1e9, [tp.partition])
    for i, fut in enumerate(futures):
        b.records.append((t0 + i, None, b"v%d" % i, ()))
        b.futures.append(fut)
        b.size += 26
    core._unfinished += len(futures)
    return b


def test_batch_completes_every_future_with_lazy_metadata():
    core = _core()
    futs = [_sent() for _ in range(5)]
    b = _batch(core, futs)
    assert not any(f.done() for f in futs)
    core._complete(b, 42, None)
    assert all(f.done() and f.exception(0) is None for f in futs)
    assert [f.result(0) for f in futs] == [RecordMetadata("t", 3, 42 + i, 1000 + i)
                                          for i in range(5)]
    assert b.records is None and b.data is None  # what outlives the batch: timestamps only
    assert core._unfinished == 0


@pytest.mark.parametrize(("base_offset", "lat", "offsets", "timestamps"), [
    (7, 5555, [7, 8], [5555, 5555]),      # LogAppendTime: the broker's time for every record
    (-1, -1, [-1, -1], [1000, 1001]),     # acks=0: no offset, the records' own timestamps
])
def test_log_append_time_and_acks_0(base_offset, lat, offsets, timestamps):
    core = _core()
    futs = [_sent(), _sent()]
    core._complete(_batch(core, futs), base_offset, lat)
    assert [f.result(0).offset for f in futs] == offsets
    assert [f.result(0).timestamp for f in futs] == timestamps


def test_failure_reaches_future_and_callback():
    core = _core()
    seen = []
    futs = [_sent(lambda f: seen.append(f.exception(0))), _sent()]
    b = _batch(core, futs)
    err = KafkaError(ErrorCode.MESSAGE_TOO_LARGE, "too big")
    core._fail(b.futures, err, b.size, len(b.records))
    assert seen == [err]
    for f in futs:
        assert f.done() and f.exception(0) is err
        with pytest.raises(KafkaError, match="too big"):
            f.result(0)


def test_callbacks_run_once_in_order_and_their_errors_are_logged(caplog):
    core = _core()
    calls = []

    def bad(f):
        calls.append("bad")
        raise RuntimeError("callback bug")
    fut = _sent(lambda f: calls.append(("first", f.result(0).offset)))
    fut.add_done_callback(bad)
    fut.add_done_callback(lambda f: calls.append("third"))
    with caplog.at_level(logging.ERROR, "minilog.client"):
        core._complete(_batch(core, [fut]), 0, None)
    assert calls == [("first", 0), "bad", "third"]
    assert "delivery callback failed" in caplog.text
    fut.add_done_callback(lambda f: calls.append("late"))  # already done: runs at once
    assert calls[-1] == "late" and len(calls) == 4


def test_waiter_in_another_thread_wakes_and_pending_times_out():
    core = _core()
    fut = _sent()
    with pytest.raises(KafkaTimeoutError):
        fut.result(0.01)
    got = []
    t = threading.Thread(target=lambda: got.append(fut.result(10)))
    t.start()
    time.sleep(0.05)
    core._complete(_batch(core, [fut]), 100, None)
    t.join(10)
    assert got == [RecordMetadata("t", 3, 100, 1000)]


def test_callbacks_added_while_batches_complete_run_exactly_once():
    """add_done_callback from another thread racing the loop thread's completion."""
    core = _core()
    for _ in range(20):
        futs = [_sent() for _ in range(2000)]
        b = _batch(core, futs)
        counts = [0] * len(futs)

        def add(futs=futs, counts=counts):
            for i, f in enumerate(futs):
                f.add_done_callback(lambda _, i=i, c=counts: c.__setitem__(i, c[i] + 1))
        t = threading.Thread(target=add)
        t.start()
        core._complete(b, 0, None)
        t.join(10)
        assert counts == [1] * len(futs)


def test_public_delivery_future_still_works_standalone():
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
    # a future the producer did not make goes through the batch completion too
    core = _core()
    mine = DeliveryFuture()
    core._complete(_batch(core, [_sent(), mine]), 5, None)
    assert mine.result(0).offset == 6


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


def test_sends_block_on_buffer_memory_and_all_arrive(broker):
    topic = make_topic(broker.bootstrap, 1)
    released = []
    with Producer({"bootstrap.servers": broker.bootstrap, "buffer.memory": 20_000,
                   "batch.size": 5_000, "linger.ms": 1}) as p:
        real_release, real_wait = p._release, p._wait_for_space
        waits = []
        p._core.on_release = lambda n, size: (released.append(size), real_release(n, size))
        p._wait_for_space = lambda size: (waits.append(size), real_wait(size))
        futs = [p.send(topic, b"%04d" % i + b"x" * 996) for i in range(500)]
        assert p.flush(30) == 0
        assert p._reserved == p._released == sum(released) == 500 * 1024
        assert [f.result(0).offset for f in futs] == list(range(500))
    assert waits  # the buffer filled up: sends waited for deliveries to free it


def test_send_to_missing_topic_fails_after_max_block(broker):
    with Producer({"bootstrap.servers": broker.bootstrap, "allow.auto.create.topics": False,
                   "max.block.ms": 300}) as p:
        futs = [p.send(unique("missing"), b"x") for _ in range(3)]
        for f in futs:
            with pytest.raises(KafkaError) as e:
                f.result(10)
            assert e.value.name == "UNKNOWN_TOPIC_OR_PARTITION"
