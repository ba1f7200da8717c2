"""The consumer when the log changes under it: what it already fetched is not thrown away.

The Java consumer resets a position only for an OFFSET_OUT_OF_RANGE answered at that position;
minilog's consumer fetches ahead of its position, so an out-of-range answer at the fetch
position waits until the records buffered before it are handed out.
"""
import time

import pytest
from clienttools import make_topic
from minilog.connector.client import AdminClient, Consumer, Producer, TopicPartition

pytestmark = pytest.mark.timeout(120)


def test_records_fetched_before_an_out_of_range_answer_are_still_handed_out(broker):
    topic = make_topic(broker.bootstrap, 1)
    tp = TopicPartition(topic, 0)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 60000}) as p:
        for batch in range(4):  # four batches of ten (sent by flush): one chunk per fetch
            for i in range(10):
                p.send(topic, b"%d" % (batch * 10 + i))
            assert p.flush(30) == 0
    with Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest",
                   "max.partition.fetch.bytes": 1, "fetch.max.bytes": 1}) as c:
        c.assign([tp])
        c.seek(tp, 0)
        got = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got += c.poll(0.5, max_records=1)
        # The consumer fetches two chunks ahead (records 0-19) from a local broker: three
        # seconds are ample. Then the log loses everything before offset 25.
        time.sleep(3.0)
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.delete_records({tp: 25}, timeout=20)
        got += c.poll(0.5, max_records=9)  # the rest of the first chunk: the next fetch, at
        time.sleep(3.0)                    # offset 20, is answered OFFSET_OUT_OF_RANGE
        deadline = time.monotonic() + 30
        while len(got) < 25 and time.monotonic() < deadline:
            got += c.poll(0.5, max_records=5)
    assert [int(r.value) for r in got] == list(range(20)) + list(range(25, 30))
