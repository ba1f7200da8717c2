"""LogSegment: appends with sparse indexing, whole-batch reads, timestamp lookup, recovery."""
import os

import pytest
from minilog.broker.storage.segment import LogSegment, segment_file
from minilog.connector.batch import build, iter_batches, read_header, stamp


def batch(offset, records=1, payload_size=100, ts=1000):
    raw = build(b"p" * payload_size, records, records - 1, ts, ts + records - 1)
    return stamp(raw, offset)


def fill(seg, n, payload_size=100, records=2, start=None, ts0=1000):
    """Append n batches of `records` records; return [(base_offset, bytes)]."""
    out, offset = [], seg.next_offset if start is None else start
    for i in range(n):
        b = batch(offset, records, payload_size, ts0 + 10 * i)
        seg.append(b)
        out.append((offset, b))
        offset += records
    return out


@pytest.fixture
def seg(tmp_path):
    s = LogSegment(tmp_path, 0, index_interval_bytes=512)
    yield s
    s.close()


def offsets_in(data):
    return [h.base_offset for _, h in iter_batches(data)]


def test_files_named_by_20_digit_base_offset(tmp_path):
    s = LogSegment(tmp_path, 42)
    s.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000042.index", "00000000000000000042.log", "00000000000000000042.timeindex"]


def test_append_tracks_size_offsets_and_adds_sparse_index_entries(seg):
    written = fill(seg, 100)           # 161-byte batches, index every > 512 bytes
    assert seg.size == sum(len(b) for _, b in written)
    assert seg.next_offset == 200
    assert 20 <= seg.offset_index.entries <= 30
    offset, pos = seg.offset_index.entry(0)
    assert read_header(os.pread(seg._fd, 61, pos)).base_offset == offset


def test_read_returns_the_batch_holding_the_offset_at_start_middle_end(seg):
    written = fill(seg, 100)
    for target in (0, 1, 77, 100, 101, 198, 199):
        data = seg.read(target, 10_000)
        first = read_header(data)
        assert first.base_offset <= target <= first.last_offset
        assert data.startswith(written[target // 2][1])
    assert seg.read(200, 10_000) == b""


def test_read_returns_only_whole_batches_within_max_bytes(seg):
    written = fill(seg, 10)
    size = len(written[0][1])
    data = seg.read(0, 3 * size + size // 2)
    assert offsets_in(data) == [0, 2, 4]
    assert len(data) == 3 * size


def test_min_one_returns_a_batch_larger_than_max_bytes(seg):
    big = batch(0, 1, payload_size=5000)
    seg.append(big)
    assert seg.read(0, 100) == big
    assert seg.read(0, 100, min_one=False) == b""


def test_max_position_stops_before_it(seg):
    fill(seg, 10)
    limit = seg.position_of(6)
    assert offsets_in(seg.read(0, 10_000, max_position=limit)) == [0, 2, 4]
    assert seg.read(6, 10_000, max_position=limit) == b""


def test_append_rejects_offsets_going_back(seg):
    fill(seg, 2)
    with pytest.raises(ValueError):
        seg.append(batch(2))


def test_find_offset_by_timestamp(seg):
    fill(seg, 100, ts0=1000)                     # batch i: timestamps 1000+10i .. +1
    assert seg.find_offset_by_timestamp(0) == (0, 1000)
    assert seg.find_offset_by_timestamp(1500) == (100, 1500)
    assert seg.find_offset_by_timestamp(1505) == (102, 1510)
    assert seg.find_offset_by_timestamp(1501) == (100, 1501)  # inside batch 50: its max ts
    assert seg.find_offset_by_timestamp(1991) == (198, 1991)
    assert seg.find_offset_by_timestamp(1992) is None
    assert seg.find_offset_by_timestamp(0, start_offset=51) == (51, 1251)


def test_reopen_restores_state_from_indexes(seg, tmp_path):
    fill(seg, 100)
    entries, max_ts = seg.offset_index.entries, seg.max_timestamp
    seg.close()
    again = LogSegment(tmp_path, 0, index_interval_bytes=512)
    assert again.problem is None
    assert (again.next_offset, again.max_timestamp, again.offset_index.entries) == (200, max_ts, entries)
    assert offsets_in(again.read(150, 200)) == [150]
    again.close()


def _damage_and_recover(tmp_path, seg, damage):
    written = fill(seg, 50)
    seg.close()
    expected_index = segment_file(tmp_path, 0, ".index").read_bytes()
    path = segment_file(tmp_path, 0)
    damage(path, written)
    again = LogSegment(tmp_path, 0, index_interval_bytes=512)
    truncated = again.recover()
    return again, written, truncated, expected_index


def test_recover_cuts_a_batch_torn_in_the_middle(seg, tmp_path):
    def cut(path, written):
        os.truncate(path, path.stat().st_size - len(written[-1][1]) // 2)
    again, written, truncated, _ = _damage_and_recover(tmp_path, seg, cut)
    assert truncated == len(written[-1][1]) // 2 + len(written[-1][1]) % 2
    assert again.next_offset == 98
    assert again.size == sum(len(b) for _, b in written[:-1])
    again.close()


def test_recover_cuts_garbage_overwriting_the_tail(seg, tmp_path):
    def scribble(path, written):
        with open(path, "r+b") as f:
            f.seek(path.stat().st_size - 100)
            f.write(os.urandom(100))
    again, _, _, _ = _damage_and_recover(tmp_path, seg, scribble)
    assert again.next_offset == 98          # the last batch fails its CRC
    assert offsets_in(again.read(96, 10_000)) == [96]
    again.close()


def test_recover_cuts_a_zero_filled_tail_and_rebuilds_the_same_index(seg, tmp_path):
    def zeros(path, written):
        with open(path, "ab") as f:
            f.write(b"\0" * 4096)
    again, _, truncated, expected_index = _damage_and_recover(tmp_path, seg, zeros)
    assert truncated == 4096 and again.next_offset == 100
    assert segment_file(tmp_path, 0, ".index").read_bytes() == expected_index
    again.close()


def test_open_flags_a_torn_tail_and_a_corrupt_index(seg, tmp_path):
    written = fill(seg, 50)
    seg.close()
    os.truncate(segment_file(tmp_path, 0), sum(len(b) for _, b in written) - 10)
    torn = LogSegment(tmp_path, 0, index_interval_bytes=512)
    assert "torn tail" in torn.problem
    torn.recover()
    torn.close()
    segment_file(tmp_path, 0, ".index").write_bytes(os.urandom(64))
    corrupt = LogSegment(tmp_path, 0, index_interval_bytes=512)
    assert corrupt.problem is not None
    corrupt.recover()
    assert corrupt.problem is None and corrupt.next_offset == 98
    assert offsets_in(corrupt.read(50, 200)) == [50]
    corrupt.close()


def test_truncate_to_drops_the_batch_holding_the_offset_and_after(seg):
    written = fill(seg, 100)
    removed = seg.truncate_to(101)     # batch 100..101 goes
    assert removed == sum(len(b) for _, b in written[50:])
    assert seg.next_offset == 100
    assert seg.read(100, 1000) == b""
    assert seg.offset_index.last_entry()[0] < 100
    fill(seg, 1)
    assert offsets_in(seg.read(100, 1000)) == [100]


def test_delete_removes_all_three_files(seg, tmp_path):
    fill(seg, 3)
    seg.delete()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("start, max_bytes", [(0, 10**6), (0, 1), (7, 1000), (31, 3000),
                                              (100, 200)])
def test_offset_after_is_the_offset_after_the_last_batch_read(seg, start, max_bytes):
    """What a read_committed fetch bounds its aborted transactions by: found from the index
    near the read's end, it equals the last batch's last offset + 1 of what `read` returned."""
    fill(seg, 60, payload_size=150, records=2)
    data = seg.read(start, max_bytes)
    last = [h for _, h in iter_batches(data)][-1]
    assert seg.offset_after(start, len(data)) == last.last_offset + 1
