"""Fetch at the edges of a shrinking log: below the log start a fetch is OFFSET_OUT_OF_RANGE,
and retention may delete the segments a consumer is reading, on the copy path (responses of at
most 64 KiB are read into memory) and on the sendfile path (larger ones go from the file).

What a client receives is checked by clients we did not write: confluent-kafka, kafka-python,
and kafka-python's own record-batch parser (which checks each batch's CRC) for raw fetches.
"""
import socket
from pathlib import Path

import kafka
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.record import MemoryRecords
from minilog.connector.protocol import (
    ApiKey,
    ErrorCode,
    FrameReader,
    RequestHeader,
    decode_response,
    encode_request,
    request,
)
from tcp import ends
from waiting import wait_until
from wire import RawConnection

pytestmark = pytest.mark.timeout(180)
FETCH_VERSION = 11  # topics by name
FAST_RETENTION = ["-o", "log.retention.check.interval.ms=100"]


def _create(bootstrap, topic, config):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(15)


def _value(offset, size):
    """The record at `offset` says which it is, so a record served from the wrong place shows."""
    return (b"%08d" % offset).ljust(size, b".")


def _produce(bootstrap, topic, count, size):
    """`count` records of `size` bytes, one per batch (so segments roll where expected)."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0,
                  "batch.size": size + 100})
    for i in range(count):
        p.produce(topic, _value(i, size))
    assert p.flush(60) == 0


def _set_topic_config(bootstrap, topic, **settings):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k.replace("_", "."), str(v), incremental_operation=AlterConfigOpType.SET)
        for k, v in settings.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.incremental_alter_configs([res])[res].result(15)


def _watermarks(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), 15)
    finally:
        c.close()


def _fetch_body(topic, offset, max_bytes=1 << 20):
    req = request(ApiKey.FETCH)
    return req.cls(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes,
                   isolation_level=0, topics=[req.make("topics", topic=topic, partitions=[
                       req.make("topics", "partitions", partition=0, fetch_offset=offset,
                                partition_max_bytes=max_bytes)])])


def _records(data):
    """(offset, value) of every record in `data`, each batch's CRC checked by kafka-python."""
    out, batches = [], MemoryRecords(bytes(data))
    while batches.has_next():
        batch = batches.next_batch()
        assert batch.validate_crc(), f"batch at {batch.base_offset}: bad CRC"
        out += [(r.offset, r.value) for r in batch]
    return out


# -- below the log start ------------------------------------------------------------------------
def test_fetch_below_the_log_start_is_offset_out_of_range(broker):
    """Not served from the log start instead: a client must learn that records are gone."""
    topic = "trimmed"
    _create(broker.bootstrap, topic, {})
    _produce(broker.bootstrap, topic, 10, 20)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_records([TopicPartition(topic, 0, 6)])[TopicPartition(topic, 0, 6)].result(15)

    conn = RawConnection(broker.bootstrap)
    try:
        for offset in (0, 5, 11):  # below the log start, and past the log end
            part = conn.call(ApiKey.FETCH, FETCH_VERSION, _fetch_body(topic, offset)
                             ).responses[0].partitions[0]
            assert (part.error_code, part.log_start_offset, part.high_watermark) == \
                (ErrorCode.OFFSET_OUT_OF_RANGE, 6, 10), offset
            assert not part.records, offset
        part = conn.call(ApiKey.FETCH, FETCH_VERSION, _fetch_body(topic, 6)).responses[0].partitions[0]
        assert part.error_code == 0  # whole batches: the one holding 6 may begin before it
        assert [o for o, _ in _records(part.records) if o >= 6] == [6, 7, 8, 9]
    finally:
        conn.close()

    strict = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "strict",
                       "auto.offset.reset": "error", "enable.auto.commit": False})
    try:
        strict.assign([TopicPartition(topic, 0, 2)])
        m = wait_until(lambda: strict.poll(0.5), what="confluent-kafka's answer")
        assert m.error() is not None and m.error().code() == KafkaError._AUTO_OFFSET_RESET, \
            (m.error(), m.offset(), m.value())
        assert "out of range" in m.error().str().lower()
    finally:
        strict.close()

    kp = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none",
                             enable_auto_commit=False)
    try:
        tp = kafka.TopicPartition(topic, 0)
        kp.assign([tp])
        kp.seek(tp, 3)
        with pytest.raises(kafka.errors.OffsetOutOfRangeError):
            wait_until(lambda: kp.poll(500), what="kafka-python's answer")
    finally:
        kp.close()


# -- retention while reading: the copy path -----------------------------------------------------
def test_retention_under_a_reading_consumer_small_fetches(make_broker):
    """kafka-python reads 1 KB records in fetches of at most 3 KB (copy path, and its next fetch
    already in flight) while retention deletes most of the log under it: every record it gets
    is the one stored at its offset, and once below the log start it resumes exactly there."""
    b = make_broker(extra=FAST_RETENTION)
    topic, count, size = "shrinking", 120, 1000
    _create(b.bootstrap, topic, {"segment.bytes": "10000"})
    _produce(b.bootstrap, topic, count, size)
    seg_dir = b.log_dir / f"{topic}-0"
    assert len(list(seg_dir.glob("*.log"))) >= 10

    kp = kafka.KafkaConsumer(bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, max_partition_fetch_bytes=3000,
                             fetch_max_bytes=3000)
    tp = kafka.TopicPartition(topic, 0)
    got = []

    def read_some():
        got.extend((m.offset, m.value) for ms in kp.poll(200).values() for m in ms)
        return got
    try:
        kp.assign([tp])
        kp.seek(tp, 0)
        wait_until(lambda: len(read_some()) >= 10, what="the first records")
        _set_topic_config(b.bootstrap, topic, retention_bytes=25000)
        low = wait_until(lambda: _watermarks(b.bootstrap, topic)[0] > 60 and
                         _watermarks(b.bootstrap, topic)[0], what="retention")
        wait_until(lambda: read_some() and kp.position(tp) >= count, what="the end of the log")
    finally:
        kp.close()
    assert not (seg_dir / "00000000000000000000.log").exists()
    offsets = [o for o, _ in got]
    assert all(v == _value(o, size) for o, v in got)
    assert offsets == sorted(set(offsets)), "offsets repeat or go back"
    before = [o for o in offsets if o < low]
    assert before == list(range(len(before))) and len(before) >= 10
    assert [o for o in offsets if o >= low] == list(range(low, count))


# -- retention while sending: the sendfile path --------------------------------------------------
def test_retention_deletes_a_segment_while_its_bytes_are_being_sent(make_broker):
    """A fetch answered from the file (more than 64 KiB) and larger than the socket buffers
    stalls while the client does not read; retention then deletes that very segment. The
    client must still receive every byte as stored."""
    send_buffer_max = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    size = 200 * 1024
    per_segment = (send_buffer_max + (1 << 20)) // size + 1  # far beyond what buffers hold
    segment_bytes = per_segment * (size + 100)
    b = make_broker(extra=FAST_RETENTION)
    topic = "sent-while-deleted"
    _create(b.bootstrap, topic, {"segment.bytes": str(segment_bytes)})
    _produce(b.bootstrap, topic, 2 * per_segment, size)
    first = b.log_dir / f"{topic}-0" / "00000000000000000000.log"
    assert first.stat().st_size > send_buffer_max + (1 << 20)

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.settimeout(60)
    sock.connect(("127.0.0.1", b.port))
    try:
        sock.sendall(b"".join(encode_request(RequestHeader(ApiKey.FETCH, FETCH_VERSION, 1, "raw"),
                                             _fetch_body(topic, 0, max_bytes=64 << 20))))
        # The answer has begun and the broker still has bytes it cannot hand to the kernel.
        wait_until(lambda: any(mine.unread and theirs and theirs.unsent
                               for mine, theirs in ends(b.port)), what="a stalled answer")
        _set_topic_config(b.bootstrap, topic, retention_bytes=1)
        wait_until(lambda: not first.exists(), what="retention to delete the first segment")
        frames, frame = FrameReader(), None
        while frame is None:
            data = sock.recv(1 << 20)
            assert data, "the broker closed the connection mid-answer"
            frame = (frames.feed(data) or [None])[0]
    finally:
        sock.close()
    part = decode_response(ApiKey.FETCH, FETCH_VERSION, frame).responses[0].partitions[0]
    assert part.error_code == 0
    records = _records(part.records)
    assert len(records) * size > send_buffer_max
    assert records == [(o, _value(o, size)) for o in range(len(records))]
    assert _watermarks(b.bootstrap, topic)[0] >= len(records)  # the segment was really gone
