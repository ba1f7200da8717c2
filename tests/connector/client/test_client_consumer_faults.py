"""The consumer when the log changes under it: what it already fetched is not thrown away.

The Java consumer resets a position only for an OFFSET_OUT_OF_RANGE answered at that position;
minilog's consumer fetches ahead of its position, so an out-of-range answer at the fetch
position waits until the records buffered before it are handed out.
"""
import struct
import time

import pytest
from clienttools import make_topic
from minilog.connector.client import AdminClient, Consumer, Producer, TopicPartition
from minilog.connector.protocol import ErrorCode, KafkaError

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


def _three_batches_the_second_corrupt(broker):
    """A topic of three batches of ten records (offsets 0-29) whose middle batch has one
    flipped byte in its records on the broker's disk: its CRC no longer matches."""
    topic = make_topic(broker.bootstrap, 1)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 60000}) as p:
        for batch in range(3):
            for i in range(10):
                p.send(topic, b"record-%02d" % (batch * 10 + i))
            assert p.flush(30) == 0
    segment = broker.log_dir / f"{topic}-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    second = 12 + struct.unpack_from(">i", data, 8)[0]  # after the first batch
    assert struct.unpack_from(">q", data, second)[0] == 10
    last = second + 12 + struct.unpack_from(">i", data, second + 8)[0] - 1
    with open(segment, "r+b") as f:  # the page cache the broker serves reads from
        f.seek(last)
        f.write(bytes([data[last] ^ 0xFF]))
    return TopicPartition(topic, 0)


@pytest.mark.parametrize("fetch_bytes", [1, 1 << 20], ids=["a-chunk-per-batch", "one-chunk"])
@pytest.mark.parametrize("arrow", [False, True], ids=["records", "arrow"])
def test_corrupt_batch_hands_out_what_precedes_it_then_fails_at_its_offset(broker, fetch_bytes,
                                                                          arrow):
    """As Kafka's consumer: the records before a corrupt batch come out, the next poll raises
    CORRUPT_MESSAGE at the batch's offset (again, until the application seeks past it), and
    seeking past it reads on. Nothing before the bad batch is lost, whether it arrived in the
    same fetch (one chunk) or an earlier one."""
    tp = _three_batches_the_second_corrupt(broker)
    with Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest",
                   "max.partition.fetch.bytes": fetch_bytes, "fetch.max.bytes": fetch_bytes}) as c:
        def poll():
            if arrow:
                return [v.as_py() for b in c.poll_arrow(0.5) for v in b.column("value")]
            return [r.value for r in c.poll(0.5)]

        c.assign([tp])
        c.seek(tp, 0)
        # Both the good and the bad batch buffered before the first poll (with a chunk per
        # batch, the consumer fetches two ahead): the poll meets the bad one after records.
        buffered = c._core._states[tp].chunks
        deadline = time.monotonic() + 30
        while len(buffered) < (2 if fetch_bytes == 1 else 1) and time.monotonic() < deadline:
            time.sleep(0.05)
        got, errors = [], []
        deadline = time.monotonic() + 30
        while len(errors) < 2 and time.monotonic() < deadline:
            try:
                got += poll()
            except KafkaError as e:
                errors.append(e)
        assert got == [b"record-%02d" % i for i in range(10)]
        assert len(errors) == 2 and all(e.code == ErrorCode.CORRUPT_MESSAGE for e in errors)
        assert "batch at offset 10" in str(errors[0])
        assert c.position(tp, timeout=10) == 10
        c.seek(tp, 20)
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += poll()
    assert got == [b"record-%02d" % i for i in list(range(10)) + list(range(20, 30))]
