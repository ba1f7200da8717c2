"""One log segment: a `.log` file of record batches plus its `.index` and `.timeindex`.

The segment stores batches exactly as the log hands them over (offsets already assigned) and
never looks inside a batch: every decision is made from the 61-byte batch headers. Reads locate
the batch holding an offset through the sparse offset index and a short forward scan of headers,
then return a byte range cut at a batch boundary. Files are named by the segment's base offset,
zero-padded to 20 digits, as in Kafka, so a reader finds a file's code by the file's name.
"""
import os
import struct
import time
from pathlib import Path

from minilog.connector.batch import HEADER_SIZE, InvalidBatch, read_header, validate

from .file_region import FileRegion
from .index import DEFAULT_MAX_INDEX_BYTES, CorruptIndexError, OffsetIndex, TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
INT32_MAX = 0x7FFFFFFF
# The header fields a scan needs: base offset, batch length, (epoch), magic, (crc, attributes),
# last offset delta. One unpack of 27 bytes is several times cheaper than a full BatchHeader.
_SCAN = struct.Struct(">qiibIhi")
_BATCH_LENGTH = struct.Struct(">i")  # at byte 8 of every batch (and the last offset delta's at 23)
_BASE_OFFSET = struct.Struct(">q")  # at byte 0
_SCAN_CHUNK = 8192                   # one pread covers the ~4 KiB between index entries
_RECOVER_CHUNK = 1 << 20
_IOV_MAX = 1024                      # writev takes at most this many buffers (Linux IOV_MAX)


def segment_file(dir, base_offset, suffix=LOG_SUFFIX):
    return Path(dir) / f"{base_offset:020d}{suffix}"


def _now_ms():
    return time.time_ns() // 1_000_000


class LogSegment:
    """A `.log` file and its two indexes, opened (or created) at `dir/<base_offset>.*`.

    Opening never raises on damaged files: `problem` says what looked wrong (torn tail, an
    index that contradicts the log, a missing index) and the owner decides to `recover()`.
    """

    def __init__(self, dir, base_offset, *, index_interval_bytes=4096,
                 max_index_bytes=DEFAULT_MAX_INDEX_BYTES, now_ms=None):
        self.dir = Path(dir)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = segment_file(dir, base_offset)
        index_path = segment_file(dir, base_offset, INDEX_SUFFIX)
        time_index_path = segment_file(dir, base_offset, TIME_INDEX_SUFFIX)
        missing_index = not (index_path.exists() and time_index_path.exists())
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size
        self.offset_index = OffsetIndex(index_path, base_offset, max_index_bytes)
        self.time_index = TimeIndex(time_index_path, base_offset, max_index_bytes)
        self.created_ms = _now_ms() if now_ms is None else now_ms
        self._first_batch_ts = None
        self._next_offset = base_offset
        self._max_ts, self._offset_of_max_ts = -1, base_offset
        self._bytes_since_index = 0
        self.problem = "index files missing" if missing_index and self._size else self._index_problem()
        if self.problem is None:
            end, unindexed = self._load_tail()
            if end != self._size:
                self.problem = f"torn tail: {self._size - end} bytes after the last whole batch"
            elif unindexed > 2 * max(index_interval_bytes, 4096):  # index lost entries
                self.problem = f"{unindexed} bytes after the last index entry"
            else:
                try:
                    self.time_index.sanity_check(self._next_offset)
                except CorruptIndexError as e:
                    self.problem = str(e)

    # -- state ------------------------------------------------------------------------------

    @property
    def size(self):
        return self._size

    @property
    def next_offset(self):
        """One past the last offset stored (the base offset when empty)."""
        return self._next_offset

    @property
    def max_timestamp(self):
        """Largest batch max_timestamp stored, -1 if none (Kafka's maxTimestampSoFar)."""
        return self._max_ts

    @property
    def offset_of_max_timestamp(self):
        """Last offset of the first batch that reached `max_timestamp` (Kafka's shallow offset)."""
        return self._offset_of_max_ts

    @property
    def largest_timestamp(self):
        """Timestamp retention.ms compares with: max timestamp, else the file's mtime."""
        if self._max_ts >= 0:
            return self._max_ts
        return self.last_modified_ms

    @property
    def last_modified_ms(self):
        """The `.log` file's mtime: what ListOffsets v0 answers by, as Kafka 3.9."""
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    @property
    def first_batch_timestamp(self):
        """max_timestamp of the first batch (-1 if empty): what segment.ms counts from."""
        if self._first_batch_ts is None:
            self._first_batch_ts = read_header(self._pread(0, HEADER_SIZE)).max_timestamp \
                if self._size >= HEADER_SIZE else -1
        return self._first_batch_ts

    def can_hold(self, last_offset):
        """Whether `last_offset` fits the indexes' int32 relative offsets."""
        return 0 <= last_offset - self.base_offset <= INT32_MAX

    @property
    def indexes_full(self):
        return self.offset_index.is_full or self.time_index.is_full

    # -- writes -----------------------------------------------------------------------------

    def append(self, data, largest_timestamp=None, offset_of_largest_timestamp=None,
               batches=None):
        """Append whole batches (offsets already assigned, ascending, after `next_offset`).

        `data` is one buffer of whole batches or a list of such buffers (written with one
        `writev`, never joined). Adds an index entry for a batch once more than
        `index_interval_bytes` were written since the previous one. The largest timestamp and
        its offset are taken from the batch headers; callers may pass them to override (Kafka's
        signature), e.g. when they already know them. A caller that parsed the batches already
        passes `batches`, (size, base offset, last offset, max timestamp) of each in order, and
        they are not parsed again.
        """
        chunks = data if isinstance(data, list) else [data]
        if batches is None:
            batches = [(h.size, h.base_offset, h.last_offset, h.max_timestamp)
                       for chunk in chunks for _, h in self._split(chunk)]
        if not batches:
            return
        first_base, last_offset = batches[0][1], batches[-1][2]
        if first_base < self._next_offset or not self.can_hold(last_offset):
            raise ValueError(f"batches {first_base}..{last_offset} cannot follow offset "
                             f"{self._next_offset} in segment {self.base_offset}")
        start = self._size
        self._write(chunks, start)
        if start == 0:
            self._first_batch_ts = batches[0][3]
        pos = start
        for size, base, last, max_ts in batches:
            self._index_batch(pos, size, base, last, max_ts)
            pos += size
        self._size = pos
        self._next_offset = last_offset + 1
        if largest_timestamp is not None and largest_timestamp > self._max_ts:
            self._max_ts = largest_timestamp
            self._offset_of_max_ts = (last_offset if offset_of_largest_timestamp is None
                                      else offset_of_largest_timestamp)

    def truncate_to(self, offset):
        """Drop the batch holding `offset` and everything after it; return bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos, h = found
        self.offset_index.truncate_to(h.base_offset)
        self.time_index.truncate_to(h.base_offset)
        removed = self._size - pos
        os.ftruncate(self._fd, pos)
        self._size = pos
        if pos == 0:
            self._first_batch_ts = None
        self._load_tail()
        return removed

    def recover(self):
        """Rebuild both indexes from the log, cutting it at the first invalid batch.

        A batch is valid when its header is sane, its CRC32C matches and its offsets follow the
        previous batch; a torn write, garbage or a zero-filled tail all fail one of these.
        Returns the number of bytes truncated.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self._max_ts, self._offset_of_max_ts = -1, self.base_offset
        self._bytes_since_index = 0
        size = os.fstat(self._fd).st_size
        pos, next_offset = 0, self.base_offset
        buf, buf_pos = b"", 0
        while size - pos >= HEADER_SIZE:
            off = pos - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf, buf_pos, off = self._pread(pos, min(_RECOVER_CHUNK, size - pos)), pos, 0
            h = read_header(buf, off)
            if h.batch_length > 0 and off + h.size > len(buf) and pos + h.size <= size:
                buf, buf_pos, off = self._pread(pos, max(h.size, min(_RECOVER_CHUNK, size - pos))), pos, 0
            try:
                h = validate(buf, off, len(buf), strict=False)
            except InvalidBatch:
                break
            if h.base_offset < next_offset or not self.can_hold(h.last_offset):
                break
            self._index_batch(pos, h.size, h.base_offset, h.last_offset, h.max_timestamp)
            next_offset = h.last_offset + 1
            pos += h.size
        truncated = size - pos
        if truncated:
            os.ftruncate(self._fd, pos)
        self._size, self._next_offset = pos, next_offset
        self._first_batch_ts = None
        # As after a clean close, the last time index entry holds the segment's max timestamp.
        self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
        self.problem = None
        return truncated

    def seal(self):
        """The log rolled past this segment: record its largest timestamp in the time index."""
        self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)

    def on_become_inactive(self):
        """Seal and fsync now (closing the log); a roll fsyncs in the background instead."""
        self.seal()
        self.flush()

    def flush(self):
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()

    def close(self):
        if self._fd is None:
            return
        self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
        self.offset_index.close()
        self.time_index.close()
        os.close(self._fd)
        self._fd = None

    def delete(self):
        """Remove the files; the .log goes first so a crash midway leaves only orphan indexes."""
        if self._fd is not None:
            self.offset_index.close()
            self.time_index.close()
            os.close(self._fd)
            self._fd = None
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.log_path.with_suffix(".txnindex").unlink(missing_ok=True)  # txn_index.py's

    # -- reads ------------------------------------------------------------------------------

    def read(self, start_offset, max_bytes, max_position=None, min_one=True, region_over=None):
        """Whole batches from the one holding `start_offset`, at most `max_bytes` of them.

        With `min_one`, the first batch is returned even when it alone exceeds `max_bytes` (as
        Kafka does, so a consumer can always make progress). Nothing at or past `max_position`
        is returned. Returns b"" when no batch holds an offset >= start_offset. A range longer
        than `region_over` bytes comes back as a `FileRegion` (to send with sendfile) instead
        of bytes.
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return b""
        pos, h = found
        limit = self._size if max_position is None else min(max_position, self._size)
        if pos >= limit:
            return b""
        if h.size > max_bytes:
            length = h.size if min_one else 0
        else:
            length = self._whole_batches(pos, min(max_bytes, limit - pos))
        if not length:
            return b""
        if region_over is not None and length > region_over:
            return FileRegion(self._fd, pos, length)
        return self._pread(pos, length)

    def _whole_batches(self, pos, n):
        """Bytes from `pos` (a batch start) up to the last batch that ends within `n` bytes.

        The index (positions ascend too) gives a batch start near the end of the range, so the
        walk reads a few 12-byte headers whatever `n` is.
        """
        p = max(pos, self.offset_index.lookup_position(pos + n)[1])
        end = pos + n
        while end - p >= 12:
            head = self._pread(p, 12)
            size = _BATCH_LENGTH.unpack_from(head, 8)[0] + 12 if len(head) == 12 else 0
            if size <= 12 or p + size > end:
                break
            p += size
        return p - pos

    def offset_after(self, start_offset, length):
        """The offset after the last batch of a read of `length` bytes from the batch holding
        `start_offset` (what `read` returned), or None when no batch holds it. The index gives a
        batch start near the read's end, so a few headers are read whatever the length."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        pos, _ = found
        end = pos + length
        p = last = max(pos, self.offset_index.lookup_position(end - 1)[1])  # a start before end
        while end - p >= 12:
            size = _BATCH_LENGTH.unpack_from(self._pread(p, 12), 8)[0] + 12
            last, p = p, p + size
        head = self._pread(last, 27)
        return _BASE_OFFSET.unpack_from(head)[0] + _BATCH_LENGTH.unpack_from(head, 23)[0] + 1

    def translate_offset(self, offset):
        """(position, header) of the first batch whose last offset is >= `offset`, or None."""
        _, pos = self.offset_index.lookup(offset)
        end, unpack = self._size, _SCAN.unpack_from
        buf, buf_pos = b"", pos
        while end - pos >= HEADER_SIZE:  # the hot loop of every read: kept flat on purpose
            off = pos - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf, buf_pos, off = self._pread(pos, min(_SCAN_CHUNK, end - pos)), pos, 0
            base, length, _, magic, _, _, delta = unpack(buf, off)
            if length <= 0 or magic != 2 or pos + length + 12 > end:
                return None
            if base + delta >= offset:
                return pos, read_header(buf, off)
            pos += length + 12
        return None

    def position_of(self, offset):
        """Position of the first batch whose base offset is >= `offset` (the size if none)."""
        found = self.translate_offset(offset)
        if found is None:
            return self._size
        pos, h = found
        return pos if h.base_offset >= offset else pos + h.size

    def find_offset_by_timestamp(self, timestamp, start_offset=None):
        """(offset, timestamp) of the first batch whose max_timestamp >= `timestamp`, or None.

        Batch-level answer (records are never decoded): the offset is the batch's base offset
        (or `start_offset` if later), so a consumer seeking there misses nothing. The timestamp
        is the batch's base timestamp when that already qualifies, else its max timestamp; a
        batch stamped with a delete horizon holds the horizon there, which is no record's time.
        """
        start = self.base_offset if start_offset is None else max(start_offset, self.base_offset)
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(ts_offset, start))
        for _, h in self._headers(pos):
            if h.max_timestamp >= timestamp and h.last_offset >= start:
                offset = max(h.base_offset, start)
                if (not h.log_append_time and h.delete_horizon_ms is None
                        and offset == h.base_offset and h.base_timestamp >= timestamp):
                    return offset, h.base_timestamp
                return offset, h.max_timestamp
        return None

    def iter_headers(self, start_offset=None):
        """Headers of the batches holding offsets >= `start_offset` (all when None)."""
        pos = 0
        if start_offset is not None:
            found = self.translate_offset(start_offset)
            if found is None:
                return
            pos = found[0]
        for _, h in self._headers(pos):
            yield h

    # -- internals --------------------------------------------------------------------------

    def _pread(self, pos, n):
        return os.pread(self._fd, n, pos)

    def _write(self, chunks, start):
        try:
            for i in range(0, len(chunks), _IOV_MAX):
                group = chunks[i:i + _IOV_MAX]
                written = os.writev(self._fd, group) if len(group) > 1 else os.write(self._fd, group[0])
                for chunk in group:  # a short write (rare): finish chunk by chunk
                    if written >= len(chunk):
                        written -= len(chunk)
                        continue
                    view = memoryview(chunk)[written:]
                    written = 0
                    while view:
                        view = view[os.write(self._fd, view):]
        except OSError:
            os.ftruncate(self._fd, start)  # never leave a partial batch behind an error
            raise

    def _scan(self, pos, end=None):
        """Yield (position, base offset, size, last offset, (buf, off)) of whole batches.

        Reads headers only, a chunk at a time; stops at the first batch that does not fit
        before `end` (default: the segment size) or does not look like a v2 batch header.
        """
        end = self._size if end is None else end
        buf, buf_pos, unpack = b"", pos, _SCAN.unpack_from
        while end - pos >= HEADER_SIZE:
            off = pos - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf, buf_pos, off = self._pread(pos, min(_SCAN_CHUNK, end - pos)), pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            base, length, _, magic, _, _, delta = unpack(buf, off)
            size = length + 12
            if length <= 0 or magic != 2 or pos + size > end:
                return
            yield pos, base, size, base + delta, (buf, off)
            pos += size

    def _headers(self, pos, end=None):
        """Yield (position, BatchHeader) of the whole batches from `pos`."""
        for p, _, _, _, view in self._scan(pos, end):
            yield p, read_header(*view)

    @staticmethod
    def _split(data):
        pos, end = 0, len(data)
        while pos < end:
            if end - pos < HEADER_SIZE:
                raise ValueError("partial batch at the end of appended data")
            h = read_header(data, pos)
            if h.batch_length <= 0 or pos + h.size > end:
                raise ValueError("partial batch at the end of appended data")
            yield pos, h
            pos += h.size

    def _index_batch(self, pos, size, base_offset, last_offset, max_timestamp):
        if max_timestamp > self._max_ts:
            self._max_ts, self._offset_of_max_ts = max_timestamp, last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            self.offset_index.append(base_offset, pos)
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def _index_problem(self):
        try:
            self.offset_index.sanity_check(self._size)
        except CorruptIndexError as e:
            return str(e)
        n = self.offset_index.entries
        for i in {0, n - 1} if n else ():
            offset, pos = self.offset_index.entry(i)
            raw = self._pread(pos, HEADER_SIZE)
            h = read_header(raw) if len(raw) == HEADER_SIZE else None
            if h is None or h.magic != 2 or not h.base_offset <= offset <= h.last_offset:
                return f"{self.offset_index.path.name}: entry {i} does not point at batch {offset}"
        return None

    def _load_tail(self):
        """Scan headers after the last index entry: sets next offset and max timestamp.

        Returns the position after the last whole batch (the file size when the tail is intact)
        and how many bytes before the last batch no index entry covers (a few KiB at most).
        """
        entry = self.offset_index.last_entry()
        pos = entry[1] if entry else 0
        ts_entry = self.time_index.last_entry()
        self._max_ts, self._offset_of_max_ts = ts_entry if ts_entry else (-1, self.base_offset)
        next_offset, end, last_start = self.base_offset, pos, pos
        for p, h in self._headers(pos):
            next_offset, end, last_start = h.last_offset + 1, p + h.size, p
            if h.max_timestamp > self._max_ts:
                self._max_ts, self._offset_of_max_ts = h.max_timestamp, h.last_offset
        self._next_offset = next_offset
        self._bytes_since_index = end - pos
        return end, last_start - pos

    def __repr__(self):
        return (f"LogSegment(base_offset={self.base_offset}, size={self._size}, "
                f"next_offset={self._next_offset})")
