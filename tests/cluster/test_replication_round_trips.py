"""What an acks=all produce costs the replication: each follower one fetch round trip.

A follower long-polls the leader; an append answers its fetch with the new records, and its next
fetch (at the new log end) moves the high watermark, which completes the produce. As in Kafka,
that fetch then waits for the next records rather than being answered with nothing but the new
high watermark: answering it, and waking the other follower's waiting fetch to tell it the same,
doubled the fetches per produce, and the leader's and followers' work with them (issue 39: acks=all
latency on RF=3 tripled on a busy machine). Counted, not timed: the leader's own count of the
Fetch requests it answered (`/metrics`). The topic is led by a broker that is not the active
controller, so no metadata-quorum fetch reaches it, and followers long-poll for far longer than
the test runs, so no idle fetch is counted either: a produce that waited for a fetch to time out
would show as a run longer than that wait.
"""
import time

import pytest
from confluent_kafka import Producer
from clustertools import active_controller
from prometheus import scrape

pytestmark = pytest.mark.timeout(300)

PRODUCES = 30
FETCH_WAIT_MS = 60_000  # replica.fetch.wait.max.ms: longer than the whole test


def fetches_answered(broker):
    return scrape(broker).get(("kafka_network_requestmetrics_totaltimems_count",
                               frozenset({("request", "Fetch")})), 0)


def test_an_acks_all_produce_costs_each_follower_one_fetch_round_trip(make_cluster):
    c = make_cluster(3, metrics=True, **{"replica.fetch.wait.max.ms": FETCH_WAIT_MS,
                                         "replica.lag.time.max.ms": 2 * FETCH_WAIT_MS})
    controller = active_controller(c.bootstrap)
    leader = next(b.node_id for b in c.brokers if b.node_id != controller)
    followers = [b.node_id for b in c.brokers if b.node_id != leader]
    c.create_topic("acked", assignment=[[leader, *followers]],
                   config={"min.insync.replicas": "2"})
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0})
    producer.produce("acked", b"warm-up")  # the followers fetch from here on
    assert producer.flush(60) == 0
    assert active_controller(c.bootstrap) == controller
    before = fetches_answered(c.broker(leader))
    started = time.monotonic()
    for i in range(PRODUCES):  # one at a time: each acknowledged before the next is sent
        producer.produce("acked", b"%d" % i)
        assert producer.flush(60) == 0
    took = time.monotonic() - started
    fetches = fetches_answered(c.broker(leader)) - before
    assert active_controller(c.bootstrap) == controller, "the controller moved: recount"
    assert took < FETCH_WAIT_MS / 1000, f"{PRODUCES} produces took {took:.1f} s"
    # One answer per follower per produce (a little slack for a follower whose fetch crossed
    # the append); two each before.
    assert fetches <= 1.25 * len(followers) * PRODUCES, \
        f"the leader answered {fetches:.0f} fetches for {PRODUCES} acks=all produces " \
        f"({fetches / PRODUCES / len(followers):.2f} per follower per produce)"
