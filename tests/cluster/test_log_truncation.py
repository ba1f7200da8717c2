"""Log truncation detection (KIP-320) after an unclean leader election, against real brokers.

The scenario: a partition with two replicas; 10 records reach both, then the follower is paused
(SIGSTOP) until it is fenced and leaves the ISR, and 20 more records are committed on the leader
alone. Consumers read all 30. The leader is killed and the stale follower resumed: with
`unclean.leader.election.enable=true` it becomes leader with only the first 10 records, and 25
new records take offsets 10-34. A consumer at offset 30 that just fetched on would read offsets
30-34 and silently skip 20 of the new records; Kafka's consumers (Java's and librdkafka, here
through confluent-kafka) ask the new leader with OffsetForLeaderEpoch where their position's
epoch ended and continue there (offset 10), or report the truncation when there is no reset
policy (`auto.offset.reset=none`; librdkafka's `error`).
"""
import time

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as CTP
from minilog.connector.client import Consumer, LogTruncationError, TopicPartition
from test_cluster_basics import produce_all
from clustertools import wait_for

pytestmark = pytest.mark.timeout(300)
TOPIC = "diverging"
OLD = [b"old-%d" % i for i in range(30)]
NEW = [b"new-%d" % i for i in range(25)]


def _read(poll, count, what, timeout=60):
    """Poll until `count` records (as (offset, value)) arrived; fail on a consumer error."""
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += poll()
    assert len(got) >= count, f"{what}: {len(got)} of {count} records: {got[-3:]}"
    return got


def _ours(c):
    return lambda: [(r.offset, r.value) for r in c.poll(0.2)]


def _confluent(c):
    def poll():
        m = c.poll(0.2)
        if m is None:
            return []
        assert m.error() is None, m.error()
        return [(m.offset(), m.value())]
    return poll


def test_consumers_continue_at_the_divergence_point_after_an_unclean_election(make_cluster):
    c = make_cluster(3)
    (leader, replicas, _), = c.create_topic(
        TOPIC, partitions=1, rf=2, config={"unclean.leader.election.enable": "true"}).values()
    follower = next(r for r in replicas if r != leader)
    assert len(produce_all(c.bootstrap, TOPIC, OLD[:10])) == 10
    c.pause(follower)
    try:
        c.wait_isr(TOPIC, 0, [leader], "the paused follower fenced and out of the ISR")
        assert len(produce_all(c.broker(leader).bootstrap, TOPIC, OLD[10:])) == 20
        tp = TopicPartition(TOPIC, 0)
        resetting = Consumer({"bootstrap.servers": c.bootstrap, "auto.offset.reset": "earliest"})
        strict = Consumer({"bootstrap.servers": c.bootstrap, "auto.offset.reset": "none"})
        strict.assign([tp])
        strict.seek(tp, 0)
        theirs = ConfluentConsumer({"bootstrap.servers": c.bootstrap, "group.id": "cf",
                                    "auto.offset.reset": "earliest",
                                    "enable.auto.commit": False})
        resetting.assign([tp])
        theirs.assign([CTP(TOPIC, 0, 0)])
        theirs_strict = ConfluentConsumer({"bootstrap.servers": c.bootstrap, "group.id": "cf",
                                           "auto.offset.reset": "error"})
        theirs_strict.assign([CTP(TOPIC, 0, 0)])
        for name, poll in (("ours", _ours(resetting)), ("ours, none", _ours(strict)),
                           ("confluent-kafka", _confluent(theirs)),
                           ("confluent-kafka, error", _confluent(theirs_strict))):
            assert _read(poll, 30, name) == list(enumerate(OLD))
        prefetched = Consumer({"bootstrap.servers": c.bootstrap, "auto.offset.reset": "earliest"})
        prefetched.assign([tp])
        prefetched.seek(tp, 25)  # a position without an epoch, 25-29 fetched but not polled
        wait_for(lambda: prefetched.watermarks(tp) is not None, "a first fetch at offset 25")
        c.broker(leader).kill()
    finally:
        c.resume(follower)
    wait_for(lambda: (c.partitions(TOPIC) or {0: (leader,)})[0][0] == follower,
             "the stale follower elected leader (unclean)")
    assert sorted(o for _, o in produce_all(c.bootstrap_of(*c.alive()), TOPIC, NEW).values()) \
        == list(range(10, 35))
    expected = list(zip(range(10, 35), NEW))
    try:  # Kafka's behaviour: continue where the log diverged ...
        assert _read(_confluent(theirs), 25, "confluent-kafka") == expected
        assert _read(_ours(resetting), 25, "ours") == expected
        # Beyond Java (its Fetch sends no last fetched epoch): the new leader answers the fetch
        # at 30 with diverging_epoch (Kafka's broker does so for consumers too), and records
        # buffered from the old leader are dropped rather than handed out.
        assert _read(_ours(prefetched), 25, "ours, fetched ahead") == expected
        # ... or, without a reset policy, report it, naming the position and where it diverged
        theirs_error = wait_for(lambda: _error_of(theirs_strict), "librdkafka's truncation error")
        assert theirs_error.code() == KafkaError._AUTO_OFFSET_RESET
        assert "log truncation detected at offset 30" in theirs_error.str()
        assert "end offset is 10" in theirs_error.str()
        with pytest.raises(LogTruncationError) as raised:
            _read(_ours(strict), 1, "ours, none")
        e = raised.value
        assert (e.partition, e.offset) == (tp, 30)
        assert (e.divergent_offset.offset, e.divergent_offset.leader_epoch) == (10, 0)
        assert "log truncation detected for diverging-0 at offset 30" in str(e)
    finally:
        for consumer in (theirs, theirs_strict, resetting, strict, prefetched):
            consumer.close()


def _error_of(consumer):
    m = consumer.poll(0.2)
    assert m is None or m.error() is not None, f"a record at {m.offset()} past the truncation"
    return m.error() if m is not None else None


def test_a_clean_failover_validates_positions_without_a_false_truncation(make_cluster):
    """After a clean election the new leader has every committed record: validation finds the
    position on its log, so a consumer without a reset policy reads on, in order, no error."""
    c = make_cluster(3)
    (leader, _, _), = c.create_topic("clean", partitions=1, rf=3).values()
    assert len(produce_all(c.bootstrap, "clean", OLD[:20])) == 20
    tp = TopicPartition("clean", 0)
    with Consumer({"bootstrap.servers": c.bootstrap, "auto.offset.reset": "none"}) as ours:
        ours.assign([tp])
        ours.seek(tp, 0)
        assert _read(_ours(ours), 20, "before the failover") == list(enumerate(OLD[:20]))
        c.broker(leader).kill()
        wait_for(lambda: (c.partitions("clean") or {0: (leader,)})[0][0] != leader,
                 "a new leader")
        assert len(produce_all(c.bootstrap_of(*c.alive()), "clean", NEW[:20])) == 20
        assert _read(_ours(ours), 20, "after the failover") == list(zip(range(20, 40), NEW))
