"""Positions carry leader epochs (KIP-320): commits store the epoch of the last consumed record,
and a position restored from a committed offset with an epoch is validated before fetching.

The failover case, where a new leader's log really diverged, is in
tests/cluster/test_log_truncation.py.
"""
import time

import pytest
from clienttools import make_topic, unique
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as CTP
from minilog.connector.client import (
    Consumer,
    LogTruncationError,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)

pytestmark = pytest.mark.timeout(120)


def _produce(bootstrap, topic, n):
    with Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(n):
            p.send(topic, b"%d" % i)
        assert p.flush(30) == 0


def _poll(consumer, count, timeout=30):
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(0.2)
    return got


def _stored(bootstrap, group, topic):
    """(offset, leader epoch) the group committed for partition 0, read by confluent-kafka."""
    c = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tp, = c.committed([CTP(topic, 0)], timeout=10)
        return tp.offset, tp.leader_epoch
    finally:
        c.close()


def test_commits_carry_the_leader_epoch_of_the_last_consumed_record(broker):
    topic = make_topic(broker.bootstrap, 1)
    _produce(broker.bootstrap, topic, 5)
    tp = TopicPartition(topic, 0)
    reference = unique("cf")  # librdkafka commits the epoch of the record it returned last
    theirs = ConfluentConsumer({"bootstrap.servers": broker.bootstrap, "group.id": reference,
                                "enable.auto.commit": False})
    theirs.assign([CTP(topic, 0, 0)])
    assert len(theirs.consume(5, timeout=30)) == 5
    theirs.commit(asynchronous=False)
    theirs.close()
    assert _stored(broker.bootstrap, reference, topic) == (5, 0)

    for how in ("sync", "async", "auto"):
        group = unique(how)
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": how == "auto",
                      "auto.commit.interval.ms": 100})
        try:
            c.subscribe([topic])
            assert len(_poll(c, 5)) == 5
            if how == "sync":
                assert c.commit() == {tp: OffsetAndMetadata(5, "", 0)}
            elif how == "async":
                c.commit(asynchronous=True)
            deadline = time.monotonic() + 30
            while _stored(broker.bootstrap, group, topic) != (5, 0) and \
                    time.monotonic() < deadline:
                c.poll(0.2)  # async commits complete, auto-commit runs, inside poll
        finally:
            c.close()
        assert _stored(broker.bootstrap, group, topic) == (5, 0), how


def _restoring(broker, produced, committed, policy):
    """(tp, consumer): a new topic with `produced` records; a group that committed offset
    `committed` in leader epoch 0 for it (as confluent-kafka commits it); a consumer of that
    group subscribed to it with auto.offset.reset=`policy`."""
    topic = make_topic(broker.bootstrap, 1)
    _produce(broker.bootstrap, topic, produced)
    group = unique("g")
    c = ConfluentConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        c.commit(offsets=[CTP(topic, 0, committed, leader_epoch=0)], asynchronous=False)
    finally:
        c.close()
    ours = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                     "auto.offset.reset": policy, "enable.auto.commit": False})
    ours.subscribe([topic])
    return TopicPartition(topic, 0), ours


# A committed offset 100 whose epoch 0 ends earlier in the log: the log was truncated after
# the commit. Java validates a position restored from a committed offset before it fetches
# (ConsumerUtils.refreshCommittedOffsets: seekUnvalidated), so it continues where the epoch
# ends, or raises LogTruncationException without a reset policy. librdkafka 2.16 validates
# only after a leader change: it fetches at 100 and resets by auto.offset.reset (checked: to 0
# with earliest), so Java is the reference here.

def test_a_committed_position_past_the_end_of_its_epoch_continues_where_the_epoch_ends(broker):
    tp, c = _restoring(broker, 10, 100, "earliest")
    with c:
        got, deadline = [], time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            got += c.poll(0.2)
        assert c.position(tp, timeout=30) == 10  # where epoch 0 ends; not 0 (earliest)
        _produce(broker.bootstrap, tp.topic, 5)
        got += _poll(c, 5)
        assert [r.offset for r in got] == [10, 11, 12, 13, 14]


def test_a_committed_position_past_the_end_of_its_epoch_raises_without_a_reset_policy(broker):
    tp, c = _restoring(broker, 5, 100, "none")
    with c:
        with pytest.raises(LogTruncationError) as raised:
            _poll(c, 1)
        e = raised.value
        assert (e.partition, e.offset) == (tp, 100)
        assert e.divergent_offset == OffsetAndMetadata(5, "", 0)
        c.seek(tp, 2)  # a seek continues, as after any reset error
        assert [r.offset for r in _poll(c, 3)] == [2, 3, 4]


def test_a_committed_position_within_its_epoch_is_kept(broker):
    tp, c = _restoring(broker, 10, 7, "none")
    with c:
        assert [r.offset for r in _poll(c, 3)] == [7, 8, 9]
