"""Log: offsets, rolling, reads across segments, retention, DeleteRecords, truncation, recovery."""
import os
import sys

import pytest
from minilog.broker.storage.log import LOG_START_CHECKPOINT, Log, LogConfig, OffsetOutOfRange
from minilog.broker.storage.producer_state import ProducerStateError
from minilog.connector.batch import (
    InvalidBatch,
    build,
    iter_batches,
    read_header,
    stamp,
)
from waiting import wait_until

DAY = 24 * 3600 * 1000


def batch(records=1, payload_size=100, ts=1000, pid=-1, epoch=-1, seq=-1):
    raw = build(b"p" * payload_size, records, records - 1, ts, ts + records - 1,
                producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    return raw, read_header(raw)


def append_n(log, n, records=1, payload_size=100, ts=1000, **kw):
    return [log.append([batch(records, payload_size, ts + i)], **kw) for i in range(n)]


def offsets_in(data):
    return [h.base_offset for _, h in iter_batches(data)]


def small(**kw):
    return LogConfig(**{"segment_bytes": 2000, "index_interval_bytes": 256, **kw})


@pytest.fixture
def log(tmp_path):
    lg = Log(tmp_path / "t-0", small())
    yield lg
    lg.close()


def test_append_assigns_consecutive_offsets_and_stamps_them(log):
    r1 = log.append([batch(3), batch(2)])
    r2 = log.append([batch(1)])
    assert (r1.first_offset, r1.last_offset, r2.first_offset) == (0, 4, 5)
    assert log.log_end_offset == 6
    assert offsets_in(log.read(0, 10_000)) == [0, 3, 5]
    assert r1.log_append_time == -1 and r1.max_timestamp == 1002


def test_log_append_time_stamps_batches(tmp_path):
    with Log(tmp_path / "t-0", small(message_timestamp_type="LogAppendTime")) as lg:
        r = lg.append([batch(2, ts=5)], now_ms=123_456)
        h = read_header(lg.read(0, 1000))
        assert r.log_append_time == 123_456 and h.log_append_time and h.max_timestamp == 123_456


def test_leader_epoch_is_stamped(log):
    log.append([batch()], leader_epoch=7)
    assert read_header(log.read(0, 1000)).partition_leader_epoch == 7


def test_rolls_by_size(log):
    append_n(log, 40)                          # 161-byte batches, 2000-byte segments
    sizes = [s.size for s in log.segments]
    assert len(sizes) > 3 and all(s <= 2000 for s in sizes)
    bases = [s.base_offset for s in log.segments]
    assert bases[0] == 0 and bases == sorted(bases)
    assert [read_header(log.read(o, 1)).base_offset for o in range(40)] == list(range(40))


def test_rolls_by_message_time(tmp_path):
    with Log(tmp_path / "t-0", LogConfig(segment_ms=1000)) as lg:
        lg.append([batch(ts=10_000)])
        lg.append([batch(ts=10_900)])
        assert len(lg.segments) == 1
        lg.append([batch(ts=11_001)])             # more than segment.ms after the first batch
        assert [s.base_offset for s in lg.segments] == [0, 2]


def test_rolls_by_wall_clock_without_timestamps(tmp_path):
    with Log(tmp_path / "t-0", LogConfig(segment_ms=1000), now_ms=0) as lg:
        lg.append([batch(ts=-1)], now_ms=10)
        lg.append([batch(ts=-1)], now_ms=900)
        assert len(lg.segments) == 1
        lg.append([batch(ts=-1)], now_ms=1001)
        assert len(lg.segments) == 2


def test_read_bounds(log):
    append_n(log, 10)
    with pytest.raises(OffsetOutOfRange):
        log.read(11, 100)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)
    assert log.read(10, 100) == b""


def test_read_whole_batches_and_min_one(log):
    append_n(log, 5)
    assert offsets_in(log.read(0, 400)) == [0, 1]
    assert offsets_in(log.read(2, 10)) == [2]
    assert log.read(2, 10, min_one=False) == b""


def test_read_stops_at_the_segment_end_and_continues_in_the_next(log):
    append_n(log, 40)
    second = log.segments[1].base_offset
    assert offsets_in(log.read(second - 1, 100_000))[-1] == second - 1
    assert offsets_in(log.read(second, 100_000))[0] == second


def test_upper_bound_hides_batches_at_or_after_it(log):
    append_n(log, 40)
    hw = log.segments[1].base_offset + 2
    data = log.read(log.segments[1].base_offset, 100_000, upper_bound=hw)
    assert offsets_in(data) == [hw - 2, hw - 1]
    assert log.read(hw, 100_000, upper_bound=hw) == b""
    assert offsets_in(log.read(0, 100_000, upper_bound=1)) == [0]


def _lines_run(fn):
    """How many Python lines fn() executes: its work, counted (a clock would count the load
    of the machine too)."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        count += event == "line"
        return trace
    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def test_read_cost_does_not_grow_with_log_size(tmp_path):
    lg = Log(tmp_path / "t-0", LogConfig(segment_bytes=256 * 1024))
    raw = build(b"v" * 40, 1, 0, 1000, 1000)
    h = read_header(raw)
    for _ in range(500):
        lg.append([(raw, h)] * 100)                 # 50k batches, ~25 segments
    assert lg.log_end_offset == 50_000 and len(lg.segments) > 10

    def cost(first):  # a window of offsets, so where they fall between index entries averages out
        return _lines_run(lambda: [lg.read(offset, 4096) for offset in range(first, first + 300)])
    head, middle, tail = cost(0), cost(25_000), cost(49_700)
    assert max(head, middle, tail) < 1.5 * min(head, middle, tail), (head, middle, tail)
    lg.close()


def test_offset_for_timestamp_and_max_timestamp(log):
    for i in range(40):
        log.append([batch(ts=1000 + 10 * i)])
    log.append([batch(ts=500)])                     # out of order: not the max
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1205) == (21, 1210)
    assert log.offset_for_timestamp(1390) == (39, 1390)
    assert log.offset_for_timestamp(1391) is None
    assert log.max_timestamp_entry() == (1390, 39)


def test_retention_by_time_deletes_old_segments_and_moves_log_start(tmp_path):
    now = 100 * DAY
    with Log(tmp_path / "t-0", small(retention_ms=DAY)) as lg:
        for _ in range(30):
            lg.append([batch(ts=now - 3 * DAY)])
        lg.roll()
        for _ in range(5):
            lg.append([batch(ts=now - 1000)])
        assert lg.apply_retention(now_ms=now) >= 2
        assert lg.log_start_offset == lg.segments[0].base_offset == 30
        with pytest.raises(OffsetOutOfRange):
            lg.read(0, 100)
        assert offsets_in(lg.read(30, 100)) == [30]


def test_retention_rolls_and_deletes_an_expired_active_segment(tmp_path):
    with Log(tmp_path / "t-0", small(retention_ms=DAY)) as lg:
        append_n(lg, 5, ts=0)
        assert lg.apply_retention(now_ms=10 * DAY) == 1
        assert [s.base_offset for s in lg.segments] == [5]
        assert lg.log_start_offset == lg.log_end_offset == 5
        assert lg.read(5, 100) == b""


def test_retention_respects_the_upper_bound(tmp_path):
    with Log(tmp_path / "t-0", small(retention_ms=DAY)) as lg:
        append_n(lg, 40, ts=0)
        bases = [s.base_offset for s in lg.segments]
        lg.apply_retention(now_ms=10 * DAY, upper_bound=bases[2])
        assert lg.log_start_offset == bases[2]


def test_retention_by_bytes(tmp_path):
    with Log(tmp_path / "t-0", small(retention_bytes=3000, retention_ms=-1)) as lg:
        append_n(lg, 60)
        lg.apply_retention()
        assert lg.size <= 3000 + 2000
        assert lg.size > 3000 - 2000
        assert lg.log_start_offset == lg.segments[0].base_offset > 0


def test_delete_records_persists_across_reopen(tmp_path):
    lg = Log(tmp_path / "t-0", small())
    append_n(lg, 40)
    third = lg.segments[2].base_offset
    assert lg.delete_records_before(third + 1) == third + 1
    assert lg.segments[0].base_offset == third      # whole segments below went
    with pytest.raises(OffsetOutOfRange):
        lg.read(third, 100)
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records_before(41)
    lg.close()
    assert (tmp_path / "t-0" / LOG_START_CHECKPOINT).exists()
    lg = Log(tmp_path / "t-0", small(), clean_shutdown=True)
    assert lg.log_start_offset == third + 1
    assert offsets_in(lg.read(third + 1, 100)) == [third + 1]
    lg.close()


def test_truncate_to(log):
    append_n(log, 40)
    assert log.truncate_to(15)
    assert log.log_end_offset == 15
    assert all(s.base_offset <= 15 for s in log.segments)
    assert log.append([batch()]).first_offset == 15
    assert not log.truncate_to(100)


def test_truncate_fully_and_start_at(log, tmp_path):
    append_n(log, 10)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert log.append([batch()]).first_offset == 500
    log.close()
    again = Log(tmp_path / "t-0", small(), clean_shutdown=True)
    assert (again.log_start_offset, again.log_end_offset) == (500, 501)
    again.close()


def test_too_large_batches_are_refused(tmp_path):
    with Log(tmp_path / "t-0", LogConfig(max_message_bytes=500)) as lg:
        with pytest.raises(InvalidBatch) as e:
            lg.append([batch(payload_size=1000)])
        assert e.value.code == 10
        assert lg.log_end_offset == 0


def test_append_as_follower_keeps_offsets(log):
    data = b"".join(stamp(batch(2)[0], o) for o in (0, 2, 10))  # a gap, as after compaction
    r = log.append_as_follower(data + b"\0" * 30)  # a partial tail is ignored
    assert (r.first_offset, r.last_offset, log.log_end_offset) == (0, 11, 12)
    assert offsets_in(log.read(5, 10_000)) == [10]
    with pytest.raises(ValueError):
        log.append_as_follower(stamp(batch()[0], 11))


def test_flush_messages_policy(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd) or real(fd))
    with Log(tmp_path / "t-0", LogConfig(flush_messages=3)) as lg:
        append_n(lg, 2)
        assert calls == []
        append_n(lg, 1)
        assert calls


def test_flush_ms_policy(tmp_path):
    with Log(tmp_path / "t-0", LogConfig(flush_ms=1000), now_ms=0) as lg:
        append_n(lg, 1, now_ms=10)
        assert not lg.flush_if_due(now_ms=500)
        assert lg.flush_if_due(now_ms=1000)
        assert not lg.flush_if_due(now_ms=5000)     # nothing new to flush


# -- recovery -----------------------------------------------------------------------------

def _crash_then(tmp_path, damage, n=40, clean=False):
    lg = Log(tmp_path / "t-0", small())
    append_n(lg, n)
    path = lg.active_segment.log_path
    del lg                       # no close: as if the process died
    damage(path)
    return Log(tmp_path / "t-0", small(), clean_shutdown=clean)


def test_recovers_a_tail_cut_mid_batch(tmp_path):
    lg = _crash_then(tmp_path, lambda p: os.truncate(p, p.stat().st_size - 70))
    assert lg.log_end_offset == 39 and lg.recovered_bytes == 91
    assert lg.append([batch()]).first_offset == 39
    lg.close()


def test_recovers_garbage_written_over_the_tail(tmp_path):
    def scribble(p):
        with open(p, "r+b") as f:
            f.seek(p.stat().st_size - 20)
            f.write(b"\xff" * 20)
    lg = _crash_then(tmp_path, scribble)
    assert lg.log_end_offset == 39
    lg.close()


def test_recovers_a_zeroed_tail(tmp_path):
    def zeros(p):
        with open(p, "ab") as f:
            f.write(b"\0" * 8192)
    lg = _crash_then(tmp_path, zeros)
    assert lg.log_end_offset == 40 and lg.recovered_bytes == 8192
    assert offsets_in(lg.read(39, 1000)) == [39]
    lg.close()


def test_recovers_the_segment_before_an_empty_active_one(tmp_path):
    lg = Log(tmp_path / "t-0", small())
    append_n(lg, 10)
    path = lg.active_segment.log_path
    lg.roll()                    # died right after rolling
    del lg
    os.truncate(path, path.stat().st_size - 70)
    lg = Log(tmp_path / "t-0", small())
    assert lg.log_end_offset == 9 and lg.recovered_bytes == 91
    assert lg.append([batch()]).first_offset == 9
    lg.close()


def test_torn_tail_is_fixed_even_when_told_the_shutdown_was_clean(tmp_path):
    lg = _crash_then(tmp_path, lambda p: os.truncate(p, p.stat().st_size - 70), clean=True)
    assert lg.log_end_offset == 39
    lg.close()


def test_corrupt_index_files_are_rebuilt(tmp_path):
    lg = Log(tmp_path / "t-0", small())
    append_n(lg, 40)
    lg.close()
    d = tmp_path / "t-0"
    for p in d.glob("*.index"):
        p.write_bytes(os.urandom(p.stat().st_size or 16))
    for p in d.glob("*.timeindex"):
        p.write_bytes(os.urandom(36))
    lg = Log(d, small(), clean_shutdown=True)
    assert lg.log_end_offset == 40
    assert [read_header(lg.read(o, 1)).base_offset for o in range(40)] == list(range(40))
    lg.close()


def test_an_index_that_lost_entries_is_rebuilt(tmp_path):
    lg = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=256))
    append_n(lg, 100)
    lg.close()
    index = lg.active_segment.offset_index.path
    os.truncate(index, 16)                  # two entries left, 15 KiB unindexed
    lg = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=256), clean_shutdown=True)
    assert lg.active_segment.offset_index.entries > 20
    lg.close()


def test_segments_below_a_checkpointed_log_start_are_deleted_by_retention(tmp_path):
    lg = Log(tmp_path / "t-0", small(retention_ms=-1))
    append_n(lg, 40)
    third = lg.segments[2].base_offset
    lg.close()
    (tmp_path / "t-0" / LOG_START_CHECKPOINT).write_text(f"0\n{third}\n")  # crash before deleting
    lg = Log(tmp_path / "t-0", small(retention_ms=-1), clean_shutdown=True)
    assert lg.log_start_offset == third and lg.segments[0].base_offset == 0
    assert lg.apply_retention() == 2 and lg.segments[0].base_offset == third
    lg.close()


def test_missing_index_files_are_rebuilt(tmp_path):
    lg = Log(tmp_path / "t-0", small())
    append_n(lg, 40)
    lg.close()
    for p in (tmp_path / "t-0").glob("*.index"):
        p.unlink()
    lg = Log(tmp_path / "t-0", small(), clean_shutdown=True)
    assert all(s.offset_index.entries for s in lg.segments[:-1])
    assert offsets_in(lg.read(25, 1)) == [25]
    lg.close()


# -- producer state through the log ------------------------------------------------------

def test_idempotent_retry_returns_the_original_offsets(log):
    log.append([batch()])
    first = log.append([batch(3, pid=7, epoch=0, seq=0)])
    end = log.log_end_offset
    again = log.append([batch(3, pid=7, epoch=0, seq=0)])
    assert again.duplicate and (again.first_offset, again.last_offset) == (1, 3) == (
        first.first_offset, first.last_offset)
    assert log.log_end_offset == end


def test_sequence_gap_and_old_epoch_are_refused_without_writing(log):
    log.append([batch(2, pid=7, epoch=1, seq=0)])
    with pytest.raises(ProducerStateError) as e:
        log.append([batch(pid=7, epoch=1, seq=5)])
    assert e.value.code == 45
    with pytest.raises(ProducerStateError) as e:
        log.append([batch(pid=7, epoch=0, seq=2)])
    assert e.value.code == 47
    assert log.log_end_offset == 2


def test_batches_of_one_append_are_checked_in_order(log):
    r = log.append([batch(2, pid=7, epoch=0, seq=0), batch(2, pid=7, epoch=0, seq=2)])
    assert (r.first_offset, r.last_offset) == (0, 3)
    with pytest.raises(ProducerStateError):
        log.append([batch(pid=7, epoch=0, seq=4), batch(pid=7, epoch=0, seq=9)])
    assert log.append([batch(pid=7, epoch=0, seq=4)]).first_offset == 4  # first did not stick


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_reopen(tmp_path, clean):
    d = tmp_path / "t-0"
    lg = Log(d, small())
    for i in range(30):                          # rolls several times: snapshots at rolls
        lg.append([batch(pid=9, epoch=2, seq=i)])
    if clean:
        lg.close()
    else:
        del lg
        for p in d.glob("*.snapshot"):           # no snapshot at all: full replay
            p.unlink()
    lg = Log(d, small(), clean_shutdown=clean)
    dup = lg.append([batch(pid=9, epoch=2, seq=29)])
    assert dup.duplicate and dup.first_offset == 29
    with pytest.raises(ProducerStateError):
        lg.append([batch(pid=9, epoch=2, seq=31)])
    assert lg.append([batch(pid=9, epoch=2, seq=30)]).first_offset == 30
    lg.close()


def test_truncation_rewinds_producer_state(log):
    for i in range(30):
        log.append([batch(pid=9, epoch=0, seq=i)])
    log.truncate_to(20)
    assert log.append([batch(pid=9, epoch=0, seq=20)]).first_offset == 20


# -- config -------------------------------------------------------------------------------

def test_config_defaults_are_kafkas():
    c = LogConfig()
    assert (c.segment_bytes, c.segment_ms, c.retention_ms, c.retention_bytes) == (
        1 << 30, 7 * DAY, 7 * DAY, -1)
    assert (c.flush_messages, c.flush_ms, c.index_interval_bytes, c.max_message_bytes) == (
        None, None, 4096, 1048588)
    assert (c.message_timestamp_type, c.cleanup_policy) == ("CreateTime", "delete")


def test_config_from_kafka_names():
    c = LogConfig.from_kafka({"segment.bytes": "1048576", "retention.ms": -1,
                              "cleanup.policy": "delete,compact", "flush.messages": str((1 << 63) - 1),
                              "message.timestamp.type": "LogAppendTime", "min.insync.replicas": "2",
                              "compression.type": "zstd"})
    assert (c.segment_bytes, c.retention_ms, c.cleanup_policy, c.flush_messages) == (
        1048576, -1, "compact,delete", None)
    assert c.message_timestamp_type == "LogAppendTime" and c.min_insync_replicas == 2
    assert LogConfig.from_kafka(c.to_kafka()) == c


@pytest.mark.parametrize("name,value,message", [
    ("segment.bytes", "10", "segment.bytes"),
    ("segment.bytes", "abc", "Invalid value abc for configuration segment.bytes: Not a number of "
                             "type INT"),
    ("retention.ms", "-2", "retention.ms"),
    ("message.timestamp.type", "Now", "CreateTime"),
    ("cleanup.policy", "forever", "cleanup.policy"),
    ("flush.messages", "0", "flush.messages"),
    ("segment.bytz", "1", "Unknown topic config name: segment.bytz"),
])
def test_config_bad_values_raise_clear_errors(name, value, message):
    with pytest.raises(ValueError, match=message):
        LogConfig.from_kafka({name: value})


def _recovery_point(path):
    return int((path / "recovery-point-offset.checkpoint").read_text().split()[1])


def test_rolled_segments_are_fsynced_in_the_background_and_move_the_recovery_point(tmp_path):
    lg = Log(tmp_path / "t-0", small())
    append_n(lg, 40)
    assert len(lg.segments) > 2
    wait_until((tmp_path / "t-0" / "recovery-point-offset.checkpoint").exists,
               what="the background fsync's checkpoint")
    assert 0 < _recovery_point(tmp_path / "t-0") <= lg.active_segment.base_offset
    lg.close()
    assert _recovery_point(tmp_path / "t-0") == 40


def test_unclean_restart_recovers_every_segment_above_the_recovery_point(tmp_path):
    lg = Log(tmp_path / "t-0", small())
    append_n(lg, 40)
    lg.close()
    lg = Log(tmp_path / "t-0", small(), clean_shutdown=True)
    (lg.dir / "recovery-point-offset.checkpoint").unlink()  # nothing known to be flushed
    first = lg.segments[0].log_path
    del lg
    with open(first, "r+b") as f:  # a torn write in an old, never fsynced segment
        f.seek(first.stat().st_size - 20)
        f.write(b"\xff" * 20)
    lg = Log(tmp_path / "t-0", small(), clean_shutdown=False)
    assert lg.recovered_bytes > 0
    assert len(lg.segments) == 1  # what followed the torn batch went with it: no hole
    assert offsets_in(lg.read(0, 1 << 20)) == list(range(lg.log_end_offset))
    lg.close()


def test_large_reads_come_as_file_regions_that_outlive_their_segment(tmp_path):
    lg = Log(tmp_path / "r-0", LogConfig(segment_bytes=10_000, index_interval_bytes=256))
    append_n(lg, 30, payload_size=1000)                    # ~1 KB batches, several segments
    whole = lg.read(0, 5000)
    region = lg.read(0, 5000, region_over=4000)            # same range, not read yet
    assert len(region) == len(whole) and offsets_in(whole) == [0, 1, 2, 3]
    small_read = lg.read(0, 3000, region_over=4000)        # under the threshold: bytes
    assert isinstance(small_read, bytes) and offsets_in(small_read) == [0, 1]
    lg.delete_records_before(lg.log_end_offset - 1)         # its segment is deleted and closed
    assert not (tmp_path / "r-0" / "00000000000000000000.log").exists()
    assert region.read() == whole                           # the region's own descriptor
    region.close()
    lg.close()
