"""OffsetIndex and TimeIndex: Kafka's .index/.timeindex layouts, lookups, truncation, damage."""
import struct

import pytest
from minilog.broker.storage.index import CorruptIndexError, OffsetIndex, TimeIndex

BASE = 1000


@pytest.fixture
def oi(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000001000.index", BASE)
    for i in range(100):  # offsets 1010 .. 2000 at positions 0, 4096, ...
        idx.append(BASE + 10 + 10 * i, 4096 * i)
    yield idx
    idx.close()


def test_offset_index_file_has_kafka_layout(oi):
    raw = oi.path.read_bytes()
    assert len(raw) == 100 * 8
    assert struct.unpack_from(">ii", raw, 8) == (20, 4096)  # relative offset, position


def test_offset_lookup_at_start_middle_end(oi):
    assert oi.lookup(BASE) == (BASE, 0)            # before the first entry: segment start
    assert oi.lookup(BASE + 10) == (BASE + 10, 0)
    assert oi.lookup(BASE + 505) == (BASE + 500, 4096 * 49)
    assert oi.lookup(BASE + 510) == (BASE + 510, 4096 * 50)
    assert oi.lookup(BASE + 1000) == (BASE + 1000, 4096 * 99)
    assert oi.lookup(10 ** 9) == (BASE + 1000, 4096 * 99)


def test_offset_lookup_sees_entries_appended_after_a_lookup(oi):
    assert oi.lookup(BASE + 505) == (BASE + 500, 4096 * 49)  # maps the file
    for i in range(100, 200):
        oi.append(BASE + 10 + 10 * i, 4096 * i)
    assert oi.lookup(BASE + 1505) == (BASE + 1500, 4096 * 149)


def test_offset_index_rejects_non_increasing_offsets(oi):
    with pytest.raises(ValueError):
        oi.append(BASE + 1000, 10 ** 6)


def test_offset_index_truncate_to(oi):
    oi.truncate_to(BASE + 500)
    assert oi.entries == 49
    assert oi.last_entry() == (BASE + 490, 4096 * 48)
    oi.truncate_to(BASE + 495)  # nothing at/after it any more: unchanged
    assert oi.entries == 49
    oi.truncate_to(BASE)
    assert oi.entries == 0 and oi.lookup(BASE + 5) == (BASE, 0)


def test_reopen_keeps_entries_and_drops_a_torn_entry(oi, tmp_path):
    oi.close()
    with open(oi.path, "ab") as f:
        f.write(b"\x00\x00\x03")  # a crash in the middle of writing an entry
    again = OffsetIndex(oi.path, BASE)
    assert again.entries == 100
    assert again.path.stat().st_size == 800
    assert again.lookup(BASE + 999) == (BASE + 990, 4096 * 98)
    again.close()


def test_sanity_check_detects_garbage(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(struct.pack(">ii", 50, 100) + struct.pack(">ii", 7, 999999))
    idx = OffsetIndex(path, 0)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(log_size=10_000)
    idx.close()
    path.write_bytes(struct.pack(">ii", 5, 100) + struct.pack(">ii", 7, 999999))
    idx = OffsetIndex(path, 0)
    with pytest.raises(CorruptIndexError):
        idx.sanity_check(log_size=10_000)  # position past the end of the log
    idx.close()


def test_is_full_follows_index_bytes(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_bytes=16)
    idx.append(1, 0)
    assert not idx.is_full
    idx.append(2, 10)
    assert idx.is_full
    idx.close()


def test_time_index_layout_lookup_and_monotonic_appends(tmp_path):
    ti = TimeIndex(tmp_path / "00000000000000001000.timeindex", BASE)
    assert ti.lookup(5) == (-1, BASE)
    assert ti.maybe_append(100, BASE + 4)
    assert not ti.maybe_append(100, BASE + 9)   # timestamp did not grow: no entry
    assert not ti.maybe_append(90, BASE + 9)
    assert ti.maybe_append(200, BASE + 20)
    assert ti.maybe_append(300, BASE + 30)
    assert struct.unpack_from(">qi", ti.path.read_bytes(), 12) == (200, 20)
    assert ti.lookup(99) == (-1, BASE)
    assert ti.lookup(100) == (100, BASE + 4)
    assert ti.lookup(250) == (200, BASE + 20)
    assert ti.lookup(10 ** 12) == (300, BASE + 30)
    ti.truncate_to(BASE + 20)
    assert ti.last_entry() == (100, BASE + 4)
    ti.sanity_check(next_offset=BASE + 5)
    with pytest.raises(CorruptIndexError):
        ti.sanity_check(next_offset=BASE + 3)
    ti.close()


def test_time_index_reopen(tmp_path):
    path = tmp_path / "00000000000000000000.timeindex"
    ti = TimeIndex(path, 0)
    for i in range(1, 1000):
        ti.maybe_append(i * 10, i)
    ti.close()
    ti = TimeIndex(path, 0)
    assert ti.entries == 999
    assert ti.lookup(5005) == (5000, 500)
    ti.delete()
    assert not path.exists()
