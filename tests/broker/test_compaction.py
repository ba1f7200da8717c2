"""Log compaction: the cleaner keeps the latest record per key at its original offset, drops
tombstones after delete.retention.ms, and a crash in the middle of a segment swap loses nothing."""
import time
from types import SimpleNamespace

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from minilog.broker.cleaner import LogCleaner
from minilog.broker.config import BrokerConfig
from minilog.broker.log import Log, LogConfig
from minilog.connector.batch import iter_batches, split_batches
from minilog.connector.records import decode_batches, encode_batch
from waiting import kafka_python_to_end

NEVER_LAG, ALWAYS = 0, 0.0


def _append(lg, records, compression=0):
    """Append one batch of (key, value) records; returns the offsets they got."""
    data = encode_batch([(1000 + i, k, v, ()) for i, (k, v) in enumerate(records)],
                        compression=compression)
    (_, h), = split_batches(data)
    result = lg.append([(data, h)])
    return list(range(result.first_offset, result.last_offset + 1))


def _read_all(lg):
    out, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 20)
        if not data:
            break
        out += decode_batches(data, start_offset=offset)
        offset = [h for _, h in iter_batches(data)][-1].last_offset + 1
    return [(r.offset, r.key, r.value) for r in out]


def _cleaner(tmp_path):
    config = BrokerConfig.from_props({"log.dirs": str(tmp_path / "data")})
    return LogCleaner(SimpleNamespace(config=config))


def _updates(lg, rounds=12, keys=6, compression=0):
    """Rounds of one batch updating every key; returns {key: (offset, value)} of the latest."""
    latest = {}
    for r in range(rounds):
        records = [(b"key-%d" % k, b"value-%d-%d" % (k, r)) for k in range(keys)]
        for offset, (k, v) in zip(_append(lg, records, compression), records):
            latest[k] = (offset, v)
    return latest


def test_cleaning_keeps_the_latest_record_per_key_at_its_offset(tmp_path):
    lg = Log(tmp_path / "data" / "t-0", LogConfig(segment_bytes=600))
    latest = _updates(lg, compression=3)  # lz4: rewritten batches are recompressed
    for offset in _append(lg, [(b"key-0", None)]):  # a tombstone, then filler to roll past it
        latest[b"key-0"] = (offset, None)
    filler = {}
    for i in range(6):
        (offset,) = _append(lg, [(b"filler-%d" % i, b"x" * 200)])
        filler[b"filler-%d" % i] = (offset, b"x" * 200)
    end, active_base = lg.log_end_offset, lg.active_segment.base_offset
    segments_below = len([s for s in lg.segments if s.base_offset < active_base])
    cleaner = _cleaner(tmp_path)
    day = 24 * 3600 * 1000
    assert cleaner.clean_log(("t", 0), lg, lg.log_end_offset, (day, NEVER_LAG, ALWAYS)) > 0
    got = {k: (o, v) for o, k, v in _read_all(lg) if o < active_base}
    expected = {k: ov for k, ov in {**latest, **filler}.items() if ov[0] < active_base}
    assert got == expected  # one record per key, the latest, at the offset it was written at
    assert lg.log_end_offset == end and lg.log_start_offset == 0
    assert len(_read_all(lg)) == len({o for o, _, _ in _read_all(lg)})
    sparse = [h for seg in lg.segments for h in seg.iter_headers()
              if h.record_count < h.last_offset_delta + 1]
    assert sparse and any(h.record_count == 0 for h in sparse)  # offsets kept, records gone
    # The tombstone is younger than delete.retention.ms: it stays for consumers to see.
    assert (latest[b"key-0"][0], b"key-0", None) in _read_all(lg)
    # Reopening the cleaned log finds the same records.
    lg.close()
    lg = Log(tmp_path / "data" / "t-0", LogConfig(segment_bytes=600), clean_shutdown=True)
    assert {k: (o, v) for o, k, v in _read_all(lg) if o < active_base} == expected
    # Once delete.retention.ms has passed the tombstone goes too, and small segments merge.
    for i in range(6):
        _append(lg, [(b"more-%d" % i, b"y" * 200)])
    cleaner.clean_log(("t", 0), lg, lg.log_end_offset, (0, NEVER_LAG, ALWAYS))
    assert b"key-0" not in {k for _, k, _ in _read_all(lg)}
    assert len([s for s in lg.segments if s.base_offset < active_base]) < segments_below
    lg.close()


def test_a_crash_mid_swap_completes_the_swap_on_open(tmp_path):
    path = tmp_path / "t-0"
    lg = Log(path, LogConfig(segment_bytes=600))
    for i in range(30):
        _append(lg, [(b"k%d" % (i % 3), b"v%d" % i + b"." * 60)])
    old = lg.segments[:2]
    before = _read_all(lg)
    # The cleaner's output for the first two segments: here, their last batch of each key.
    kept = [r for r in before if r[0] < old[1].next_offset]
    kept = {k: (o, k, v) for o, k, v in kept}
    data = b""
    for seg in old:
        data += seg.log_path.read_bytes()
    batches = [(pos, h) for pos, h in iter_batches(data)]
    survivors = {o for o, _, _ in kept.values()} | {batches[-1][1].base_offset}
    cleaned = b"".join(data[pos:pos + h.size] for pos, h in batches if h.base_offset in survivors)
    base = old[0].base_offset
    lg.close()
    # Crash after the rename to .swap and the deletion of the first old segment only.
    (path / f"{base:020d}.log.swap").write_bytes(cleaned)
    (path / f"{base:020d}.log").unlink()
    (path / f"{old[1].base_offset:020d}.log.cleaned").write_bytes(b"half-written")
    lg = Log(path, LogConfig(segment_bytes=600))
    after = _read_all(lg)
    expected = sorted(kept.values()) + [r for r in before if r[0] >= old[1].next_offset]
    expected = sorted(set(expected) | {r for r in before if r[0] == batches[-1][1].base_offset})
    assert after == expected
    assert not list(path.glob("*.swap")) and not list(path.glob("*.cleaned"))
    assert lg.segments[0].base_offset == base and lg.segments[1].base_offset == old[1].next_offset
    assert lg.log_end_offset == 30
    lg.close()


def test_replace_segments_refuses_segments_the_log_no_longer_has(tmp_path):
    lg = Log(tmp_path / "t-0", LogConfig(segment_bytes=600))
    for i in range(12):
        _append(lg, [(b"k", b"v" * 100)])
    stale = lg.segments[0]
    lg.truncate_to(0)  # gone under the cleaner's feet
    cleaned = tmp_path / "t-0" / f"{stale.base_offset:020d}.log.cleaned"
    cleaned.write_bytes(b"")
    assert lg.replace_segments([stale], cleaned) is False
    assert not cleaned.exists()
    lg.close()


def test_compacted_topic_on_a_broker_serves_latest_values_to_clients(make_broker):
    b = make_broker(extra=["-o", "log.cleaner.backoff.ms=200"])
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("table", 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "1024", "delete.retention.ms": "0",
        "min.cleanable.dirty.ratio": "0.01"})])[
        "table"].result(10)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "compression.type": "gzip"})
    latest = {}

    def remember(err, msg):
        assert err is None
        latest[msg.key()] = (msg.offset(), msg.value())
    for r in range(20):
        for k in range(8):
            p.produce("table", key=b"user-%d" % k, value=b"balance-%d" % r, on_delivery=remember)
        p.flush(10)
    p.produce("table", key=b"user-0", value=None, on_delivery=remember)  # deleted user
    for i in range(12):
        p.produce("table", key=b"pad-%d" % i, value=b"." * 100, on_delivery=remember)
        p.flush(10)

    def table():
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "reader",
                      "enable.partition.eof": True, "auto.offset.reset": "earliest"})
        c.assign([TopicPartition("table", 0, 0)])
        seen = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                break  # end of partition
            seen.append((m.key(), m.offset(), m.value()))
        c.close()
        return seen

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen = table()
        keys = [k for k, _, _ in seen]
        if len(keys) == len(set(keys)) and b"user-0" not in keys:
            break
        time.sleep(0.3)
    live = {k: ov for k, ov in latest.items() if ov[1] is not None}
    assert {k: (o, v) for k, o, v in seen} == live  # every key once, latest value, same offset
    kc = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False)
    try:
        kc.assign([KafkaTopicPartition("table", 0)])
        kc.seek_to_beginning()
        read = {m.key: (m.offset, m.value) for m in kafka_python_to_end(kc)}
        assert read == live  # kafka-python reads it too
    finally:
        kc.close()
