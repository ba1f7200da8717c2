"""Log compaction: the cleaner keeps the latest record per key at its original offset, drops
tombstones after delete.retention.ms, and a crash in the middle of a segment swap loses nothing."""
import time
from types import SimpleNamespace

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from minilog.broker.storage.cleaner import LogCleaner
from minilog.broker.server.config import BrokerConfig
from minilog.broker.storage.log import Log, LogConfig
from minilog.connector.batch import iter_batches, split_batches
from minilog.connector.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    decode_batches,
    encode_batch,
    encode_control_batch,
)
from waiting import kafka_python_to_end, wait_until

NEVER_LAG, ALWAYS = 0, 0.0
T0 = 1_800_000_000_000  # the clock of the first cleaning in tests that pass their own now_ms


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


def _horizons(lg):
    """The delete horizons stamped in the log's batches, in offset order."""
    return [h.delete_horizon_ms for seg in lg.segments for h in seg.iter_headers()
            if h.delete_horizon_ms is not None]


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
    assert cleaner.clean_log(("t", 0), lg, lg.log_end_offset, (day, NEVER_LAG, ALWAYS),
                             now_ms=T0) > 0
    got = {k: (o, v) for o, k, v in _read_all(lg) if o < active_base}
    expected = {k: ov for k, ov in {**latest, **filler}.items() if ov[0] < active_base}
    assert got == expected  # one record per key, the latest, at the offset it was written at
    assert lg.log_end_offset == end and lg.log_start_offset == 0
    assert len(_read_all(lg)) == len({o for o, _, _ in _read_all(lg)})
    sparse = [h for seg in lg.segments for h in seg.iter_headers()
              if h.record_count < h.last_offset_delta + 1]
    assert sparse and any(h.record_count == 0 for h in sparse)  # offsets kept, records gone
    # The first cleaning that kept the tombstone stamped its batch with a delete horizon.
    assert _horizons(lg) == [T0 + day]
    assert (latest[b"key-0"][0], b"key-0", None) in _read_all(lg)
    # Reopening the cleaned log finds the same records.
    lg.close()
    lg = Log(tmp_path / "data" / "t-0", LogConfig(segment_bytes=600), clean_shutdown=True)
    assert {k: (o, v) for o, k, v in _read_all(lg) if o < active_base} == expected
    # Before the horizon the tombstone stays, however old its segment file is and whatever
    # delete.retention.ms says now.
    for i in range(6):
        _append(lg, [(b"more-%d" % i, b"y" * 200)])
    cleaner.clean_log(("t", 0), lg, lg.log_end_offset, (0, NEVER_LAG, ALWAYS),
                      now_ms=T0 + day - 1)
    assert (latest[b"key-0"][0], b"key-0", None) in _read_all(lg)
    # A cleaning past the horizon drops it, with nothing new written since the last one (and
    # by a cleaner started since, which finds the horizon in the batches): small segments merge.
    cleaner = _cleaner(tmp_path)
    assert cleaner.clean_log(("t", 0), lg, lg.log_end_offset, (0, NEVER_LAG, ALWAYS),
                             now_ms=T0 + day) > 0
    assert b"key-0" not in {k for _, k, _ in _read_all(lg)}
    assert _horizons(lg) == []
    assert len([s for s in lg.segments if s.base_offset < active_base]) < segments_below
    lg.close()


def test_a_stamped_batch_still_gives_each_record_its_own_timestamp(tmp_path):
    lg = Log(tmp_path / "data" / "t-0", LogConfig(segment_bytes=400))
    data = encode_batch([(5000, b"a", b"1", ()), (5001, b"b", None, ()), (5002, b"c", b"3", ())],
                        compression=1)  # gzip: the stamped batch is recompressed
    lg.append([(data, h) for _, h in split_batches(data)])

    def pad(n):
        for i in range(n):
            filler = encode_batch([(4000, b"pad-%d" % i, b"x" * 150, ())])
            lg.append([(filler, h) for _, h in split_batches(filler)])
    pad(4)
    cleaner, day = _cleaner(tmp_path), 24 * 3600 * 1000
    cleaner.clean_log(("t", 0), lg, lg.log_end_offset, (day, NEVER_LAG, ALWAYS), now_ms=T0)
    assert _horizons(lg) == [T0 + day]
    # A later cleaning keeps the first horizon: it is stamped once, not pushed back.
    pad(4)
    cleaned_to = cleaner.cleaned_up_to[("t", 0)]
    cleaner.clean_log(("t", 0), lg, lg.log_end_offset, (day, NEVER_LAG, ALWAYS),
                      now_ms=T0 + 1000)
    assert cleaner.cleaned_up_to[("t", 0)] > cleaned_to  # it did clean
    assert _horizons(lg) == [T0 + day]
    lg.close()
    lg = Log(tmp_path / "data" / "t-0", LogConfig(segment_bytes=400))  # indexes rebuilt
    records = decode_batches(lg.read(0, 1 << 20))
    assert [(r.offset, r.timestamp, r.key) for r in records[:3]] == [
        (0, 5000, b"a"), (1, 5001, b"b"), (2, 5002, b"c")]
    (stamped, *_) = lg.segments[0].iter_headers()
    assert stamped.max_timestamp == 5002
    # Time lookups see record times, never the horizon held in the base timestamp.
    assert lg.offset_for_timestamp(5001) == (0, 5002)
    assert lg.offset_for_timestamp(5003) is None
    assert lg.max_timestamp_entry() == (5002, 2)
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


def _read_from_start(consumer, topic):
    """(offset, key, value, timestamp) of every record of partition 0, read from offset 0 up
    to the partition's end."""
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = []

    def at_end():
        m = consumer.poll(0.2)
        if m is None:
            return False
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            return True
        seen.append((m.offset(), m.key(), m.value(), m.timestamp()[1]))
        return False
    wait_until(at_end, 60, f"the end of {topic}-0", interval=0)
    return seen


def test_a_lagging_consumer_of_an_idle_compacted_topic_sees_a_delete_until_its_horizon(
        make_broker):
    retention_ms = 6000
    b = make_broker(extra=["-o", "log.cleaner.backoff.ms=200"])
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("accounts", 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "4096",
        "delete.retention.ms": str(retention_ms), "min.cleanable.dirty.ratio": "0.01"})])[
        "accounts"].result(10)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 50})
    latest = {}

    def remember(err, msg):
        assert err is None
        latest[msg.key()] = (msg.offset(), msg.key(), msg.value(), msg.timestamp()[1])
    for r in range(3):
        for k in range(5):
            p.produce("accounts", key=b"acct-%d" % k, value=b"balance-%d" % r,
                      on_delivery=remember)
        if r < 2:
            p.flush(10)
    p.produce("accounts", key=b"acct-0", value=None, on_delivery=remember)  # in the last batch
    p.flush(10)
    # The topic stays idle for longer than delete.retention.ms, then a write rolls the
    # segment: the first cleaning sees a tombstone in a file older than delete.retention.ms.
    time.sleep(retention_ms / 1000 + 1)
    p.produce("accounts", key=b"filler", value=b"." * 4000, on_delivery=remember)
    p.flush(10)
    expected = sorted(latest.values())
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "lagging",
                  "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        def cleaned():
            seen = _read_from_start(c, "accounts")
            return seen if len(seen) == len({key for _, key, _, _ in seen}) else None
        # The first read of the cleaned log comes well within delete.retention.ms of the
        # cleaning: it has the delete, with every record's own timestamp.
        assert wait_until(cleaned, 60, "the first cleaning", interval=0.2) == expected
        kc = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False)
        try:
            kc.assign([KafkaTopicPartition("accounts", 0)])
            kc.seek_to_beginning()
            read = [(m.offset, m.key, m.value, m.timestamp) for m in kafka_python_to_end(kc)]
            assert read == expected  # kafka-python reads the stamped batch the same way
        finally:
            kc.close()

        def deleted():
            seen = _read_from_start(c, "accounts")
            return seen if b"acct-0" not in {key for _, key, _, _ in seen} else None
        # Once the horizon has passed, a cleaning drops it, though nothing new was written.
        gone = wait_until(deleted, 60, "the tombstone's removal", interval=0.2)
        assert gone == [r for r in expected if r[1] != b"acct-0"]
    finally:
        c.close()


def _append_txn(lg, records, pid, seq):
    data = encode_batch([(1000, k, v, ()) for k, v in records], producer_id=pid,
                        producer_epoch=0, base_sequence=seq, transactional=True)
    (_, h), = split_batches(data)
    lg.append([(data, h)])


def _end_txn(lg, pid, commit):
    data = encode_control_batch(CONTROL_COMMIT if commit else CONTROL_ABORT, pid, 0, 0)
    (_, h), = split_batches(data)
    lg.append([(data, h)])


def test_cleaning_removes_aborted_records_and_keeps_what_was_committed(tmp_path):
    lg = Log(tmp_path / "data" / "t-0", LogConfig(segment_bytes=600))
    _append_txn(lg, [(b"k", b"committed")], pid=7, seq=0)
    _end_txn(lg, 7, commit=True)
    _append_txn(lg, [(b"k", b"aborted")], pid=7, seq=1)  # later than the committed value
    _end_txn(lg, 7, commit=False)
    for i in range(6):
        _append(lg, [(b"filler-%d" % i, b"x" * 200)])
    cleaner = _cleaner(tmp_path)
    assert cleaner.clean_log(("t", 0), lg, lg.log_end_offset, (0, NEVER_LAG, ALWAYS),
                             now_ms=T0) > 0
    values = [v for _, k, v in _read_all(lg) if k == b"k"]
    assert values == [b"committed"]  # read_committed still finds it; the abort left nothing
    markers = [h for seg in lg.segments for h in seg.iter_headers() if h.is_control]
    assert len(markers) == 2
    lg.close()

