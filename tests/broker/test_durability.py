"""Durability as an operator sees it: kill -9 mid-produce, torn or garbage segment tails,
retention moving the log start, and clients resetting when they fetch below it."""
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from waiting import wait_until


def _create(bootstrap, name, partitions=1, config=None):
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)


def _read_all(bootstrap, topic, partitions=1, timeout=20, reset="earliest", start=0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": reset, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, start) for p in range(partitions)])
    got, eof = [], set()
    deadline = time.monotonic() + timeout
    while len(eof) < partitions and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add(m.partition())
                continue
            raise AssertionError(m.error())
        got.append(m)
    c.close()
    return got


def test_kill_9_during_produce_loses_no_acknowledged_record(make_broker):
    b = make_broker()
    _create(b.bootstrap, "ledger", partitions=2)
    acked, stop = [], threading.Event()

    def produce_loop():
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 1,
                      "enable.idempotence": True, "message.timeout.ms": 3000})
        i = 0
        while not stop.is_set():
            p.produce("ledger", key=b"%d" % (i % 10), value=b"txn-%d" % i,
                      on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
            p.poll(0)
            i += 1
            if i % 200 == 0:
                time.sleep(0.005)
        p.flush(5)

    t = threading.Thread(target=produce_loop)
    t.start()
    deadline = time.monotonic() + 20
    while len(acked) < 3000 and time.monotonic() < deadline:
        time.sleep(0.05)
    b.kill()
    stop.set()
    t.join(15)
    assert len(acked) >= 3000
    b.start()
    got = _read_all(b.bootstrap, "ledger", 2)
    values = {m.value() for m in got}
    assert set(acked) <= values
    for p in range(2):
        offsets = [m.offset() for m in got if m.partition() == p]
        assert offsets == list(range(len(offsets)))


def _only_segment(data_dir, topic):
    logs = sorted((Path(data_dir) / "data" / f"{topic}-0").glob("*.log"))
    return logs[-1]


def _produce(bootstrap, topic, n, prefix=b"r", timestamp=0):
    """`n` records, one per batch, stamped now (or at `timestamp`, ms)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(n):
        p.produce(topic, value=prefix + b"%d" % i, timestamp=timestamp)
        assert p.flush(30) == 0


def test_truncated_tail_is_recovered_and_earlier_records_survive(make_broker):
    b = make_broker()
    _create(b.bootstrap, "torn")
    _produce(b.bootstrap, "torn", 20)
    b.kill()
    seg = _only_segment(b.data_dir, "torn")
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 7)  # cut the last batch in half
    b.start()
    got = _read_all(b.bootstrap, "torn")
    assert [m.value() for m in got] == [b"r%d" % i for i in range(19)]
    _produce(b.bootstrap, "torn", 1, prefix=b"after")
    got = _read_all(b.bootstrap, "torn")
    assert [m.offset() for m in got] == list(range(20)) and got[-1].value() == b"after0"


def test_garbage_over_the_tail_is_detected_and_truncated(make_broker):
    b = make_broker()
    _create(b.bootstrap, "garbled")
    _produce(b.bootstrap, "garbled", 20)
    b.kill()
    seg = _only_segment(b.data_dir, "garbled")
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.seek(size - 40)
        f.write(b"\xde\xad\xbe\xef" * 10)  # the last batch's records overwritten
        f.write(b"\x00" * 4096)  # and zeroed space after it, as after a crash mid-write
    b.start()
    got = _read_all(b.bootstrap, "garbled")
    assert [m.value() for m in got] == [b"r%d" % i for i in range(19)]


def test_retention_deletes_old_segments_and_clients_reset_to_log_start(make_broker):
    b = make_broker(extra=["-o", "log.retention.check.interval.ms=300"])
    _create(b.bootstrap, "short-lived", config={"segment.bytes": "1024", "retention.ms": "7200000"})
    an_hour_ago = int(time.time() * 1000) - 3600 * 1000
    _produce(b.bootstrap, "short-lived", 30, prefix=b"old-" + b"x" * 100, timestamp=an_hour_ago)
    part_dir = Path(b.data_dir) / "data" / "short-lived-0"
    assert len(list(part_dir.glob("*.log"))) > 3
    _produce(b.bootstrap, "short-lived", 3, prefix=b"new")
    # Retention shortened below the old records' age: they are past it at once, no sleeping.
    shorter = ConfigResource(ConfigResource.Type.TOPIC, "short-lived", incremental_configs=[
        ConfigEntry("retention.ms", "600000", incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.incremental_alter_configs([shorter])[shorter].result(15)
    admin_consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "x"})
    try:
        def trimmed():
            low, high = admin_consumer.get_watermark_offsets(TopicPartition("short-lived", 0), 15)
            return low >= 20 and (low, high)
        low, high = wait_until(trimmed, what="retention to move the log start")
    finally:
        admin_consumer.close()
    assert 20 <= low <= 30 and high == 33  # the new records' segment stays
    # A fetch from offset 0 is below the log start: the client gets OFFSET_OUT_OF_RANGE and resets.
    got = _read_all(b.bootstrap, "short-lived", reset="earliest", start=0)
    assert got[0].offset() == low
    assert got[-1].value() == b"new2"
