"""A connection closing with answers still queued behind an acks=all one cleans up quietly.

Answers behind a pending acks=all answer wait in the connection's queue: chunks already
encoded, and tasks. When the connection ends (here: the broker shutting down), the tasks are
cancelled and the chunks dropped, without an error and without a coroutine left unawaited.
"""
import pytest
from clustertools import wait_for
from minilog.connector.protocol import ApiKey, RequestHeader, encode_request, request
from minilog.connector.records import encode_batch
from txntools import list_offset
from wire import RawConnection

pytestmark = pytest.mark.timeout(300)


def _produce_frame(corr, topic, acks):
    req = request(ApiKey.PRODUCE)
    body = req.cls(transactional_id=None, acks=acks, timeout_ms=60000, topic_data=[req.make(
        "topic_data", name=topic, partition_data=[req.make(
            "topic_data", "partition_data", index=0,
            records=encode_batch([(1000, None, b"x", [])]))])])
    return b"".join(encode_request(RequestHeader(ApiKey.PRODUCE, 9, corr, "raw"), body))


def test_a_broker_stops_cleanly_with_answers_queued_behind_an_acks_all_one(make_cluster):
    c = make_cluster(3, **{"replica.lag.time.max.ms": 120000})
    c.create_topic("held", assignment=[[1, 2, 3]])
    c.create_topic("free", assignment=[[1]])
    c.pause(3)  # broker 1's acks=all answers for "held" wait for it
    conn = RawConnection(c.bootstrap_of(1))
    try:
        conn.send_raw(_produce_frame(1, "held", -1) + _produce_frame(2, "free", 1))
        # the second append is done (its answer queued behind the first): both handled
        wait_for(lambda: list_offset(c.bootstrap_of(1), "free", 0, 0) == 1,
                 "the acks=1 append behind the pending acks=all one")
    finally:
        conn.close()
    try:
        assert c.broker(1).stop() == 0
    finally:
        c.resume(3)
    log = c.broker(1).log()
    for trouble in ("AttributeError", "was never awaited", "Traceback"):
        assert trouble not in log, f"{trouble} in broker 1's log:\n{log[-3000:]}"
