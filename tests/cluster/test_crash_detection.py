"""A broker whose process dies is fenced within seconds, not after its whole session timeout.

The kernel closes a dead process's sockets, so the controller sees every connection the broker
had to it end (its heartbeats', its followers' fetches'), and a dead controller's address
refuses the voters' fetches (so they elect a successor at once, which takes the refusal as the
same sign). The timeouts here are a minute: only those signs can move
leadership within the deadlines below. A broker that is merely paused
keeps its connections, and its silence alone counts (`test_failover`'s paused follower).
"""
import time

import pytest
from confluent_kafka import Producer
from clustertools import active_controller, wait_for

pytestmark = pytest.mark.timeout(240)

SLOW_SESSION = {"broker.session.timeout.ms": 60000}
SOON = 30.0  # far below the session timeout, generous for a loaded machine


def _led_by(c, topic, node):
    return [p for p, (leader, _, _) in c.partitions(topic).items() if leader == node]


def _moved_from(c, topic, partitions, node, via):
    placement = c.partitions(topic, *via)
    return placement and all(placement[p][0] not in (node, -1) for p in partitions)


def test_a_killed_broker_loses_its_leaderships_long_before_its_session_timeout(make_cluster):
    c = make_cluster(3, **SLOW_SESSION)
    c.create_topic("crash", partitions=3, rf=3, config={"min.insync.replicas": "2"})
    controller = active_controller(c.bootstrap)
    victim = next(n for n in (1, 2, 3) if n != controller and _led_by(c, "crash", n))
    led = _led_by(c, "crash", victim)
    rest = [n for n in (1, 2, 3) if n != victim]
    killed = time.monotonic()
    c.broker(victim).kill()
    wait_for(lambda: _moved_from(c, "crash", led, victim, rest),
             f"partitions {led} to leave killed broker {victim}", timeout=SOON)
    assert time.monotonic() - killed < SOON
    # and the cluster serves acks=all writes to them, through a client we did not write
    p = Producer({"bootstrap.servers": c.bootstrap_of(*rest), "acks": "all"})
    errors = []
    for partition in led:
        p.produce("crash", b"after", partition=partition,
                  on_delivery=lambda e, _: errors.append(e) if e else None)
    assert p.flush(60) == 0 and not errors
    assert "closed every connection" in c.broker(controller).log()


def test_a_killed_controller_is_succeeded_and_fenced_without_waiting_out_timeouts(make_cluster):
    # the voters campaign as soon as the old controller's address refuses them, not after
    # their fetch timeout, and the new controller fences it without a session timeout, though
    # the old one never opened a connection to it that could close: it led every replicated
    # partition (so fetched from nobody) and heartbeated to itself; only the refusal tells
    c = make_cluster(3, **SLOW_SESSION, **{"controller.quorum.fetch.timeout.ms": 60000,
                                           "offsets.topic.replication.factor": 1})
    old = active_controller(c.bootstrap)
    rest = [n for n in (1, 2, 3) if n != old]
    c.create_topic("crash", assignment=[[old, *rest], [old, *reversed(rest)]])
    led = wait_for(lambda: _led_by(c, "crash", old), f"a partition led by controller {old}")
    assert led == [0, 1]
    c.broker(old).kill()
    wait_for(lambda: _moved_from(c, "crash", led, old, rest),
             f"partitions {led} to leave the killed controller {old}", timeout=SOON)
    new = active_controller(c.bootstrap_of(*rest))
    assert new in rest
    assert "closed every connection" in c.broker(new).log()
