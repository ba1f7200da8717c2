"""One partition's log: the ordered segments of a `topic-N` directory and what spans them.

`Log` appends batches (assigning offsets, or keeping them for a follower), rolls segments by size
and time, reads whole batches from any offset at a cost independent of the log's length (binary
search over segment base offsets, then the segment's sparse index), truncates, applies retention
and DeleteRecords, recovers a torn tail on open, and owns the partition's idempotent-producer
state with its transactions (the first unstable offset, and the aborted-transaction index
`txn_index.py`, kept as markers are appended). It knows nothing of replication: high watermark,
ISR and leader epochs live above it and pass in what they decide (`upper_bound` for reads and
retention, `leader_epoch` for appends). Offsets by time (`log_timestamps.py`), the retention
rules (`log_retention.py`) and opening a directory (`log_loader.py`) are modules of their own.

A `Log` takes an internal lock around every public call, so handlers may call it from threads.
"""
from __future__ import annotations

import bisect
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from minilog.connector.batch import (
    BatchHeader,
    InvalidBatch,
    iter_batches,
    stamp,
    stamp_in_place,
    validate,
)

from .log_config import OTHER_TOPIC_CONFIGS, LogConfig  # noqa: F401 (re-exported)
from .log_loader import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    fsync_dir,
    load_segments,
    read_checkpoint,
    swap_in_cleaned,
    write_checkpoint,
)
from .log_retention import Rule, below, deletable_prefix, retention_rules
from .log_timestamps import max_timestamp_entry, offset_for_timestamp
from .log_transactions import ProducerBatches, end_transaction, rebuild
from .producer_state import NO_PRODUCER_ID, ProducerStateManager
from .txn_index import AbortedTxn, TxnIndex
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file,
)

if TYPE_CHECKING:
    from .file_region import FileRegion

LOG_START_CHECKPOINT = "log-start-offset.checkpoint"
# Offsets below the recovery point are in segments known to be fsynced: an unclean restart
# recovers only the segments at or above it.
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset.checkpoint"

# Rolled segments are fsynced here, off the caller's thread, as Kafka's scheduler does: an
# fsync of a 1 GiB segment would otherwise stall every connection of the broker.
_FLUSHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minilog-log-flusher")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class OffsetOutOfRange(Exception):
    """A read or DeleteRecords offset outside [log_start_offset, log_end_offset] (Kafka code 1)."""

    code = 1

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside the log range "
                         f"[{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class AppendResult(NamedTuple):
    """Offsets given to an append; `duplicate` when it repeated an idempotent batch."""

    first_offset: int
    last_offset: int
    log_append_time: int = -1
    max_timestamp: int = -1
    duplicate: bool = False


class Log:
    """The segments of one partition directory. See the module docstring."""

    def __init__(self, dir: str | os.PathLike[str], config: LogConfig | None = None,
                 clean_shutdown: bool = False, *, now_ms: int | None = None) -> None:
        """Open (or create) the log in `dir`.

        After an unclean shutdown the segments from the recovery point on (and at least the
        last non-empty one) are recovered (CRC-checked batch by batch, cut at the first invalid
        one, indexes rebuilt); earlier segments were fsynced after the log rolled past them. In both cases any segment whose
        indexes contradict its log, or whose tail is torn, is recovered too.
        `recovered_bytes` tells how many bytes recovery cut off.
        """
        self.dir = Path(dir)
        self.config = config or LogConfig()
        self._lock = threading.RLock()
        self._closed = False
        self.dir.mkdir(parents=True, exist_ok=True)
        now = _now_ms() if now_ms is None else now_ms
        self._pending_flushes = set()
        self._dir_dirty = False  # a segment file was created since the directory was fsynced
        self._recovery_point = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT) or 0
        self._segments, self.recovered_bytes = load_segments(
            self.dir, clean_shutdown, self._recovery_point, now,
            lambda base, existing: self._new_segment(base, now, existing),
            lambda: self._read_checkpoint() or 0)
        self._bases = [seg.base_offset for seg in self._segments]
        self._leo = self._segments[-1].next_offset
        checkpoint = self._read_checkpoint()
        start = self._bases[0] if checkpoint is None else max(checkpoint, self._bases[0])
        self._log_start = min(start, self._leo)
        self._unflushed, self._last_flush_ms = 0, now
        self.producer_state = ProducerStateManager(self.dir)
        self.txn_index = TxnIndex(self.dir, self._bases)
        self._reload_producer_state()

    # -- state ------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._leo

    @property
    def closed(self) -> bool:
        """True once closed or deleted (the topic may be gone)."""
        return self._closed

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    # -- appends ----------------------------------------------------------------------------

    def append(self, batches: Sequence[tuple[Any, BatchHeader]], *, now_ms: int | None = None,
               leader_epoch: int | None = None, in_place: bool = False) -> AppendResult:
        """Append validated client batches, assigning offsets from the log end.

        `batches` is a list of (batch bytes, BatchHeader) as `batch.split_batches` produced them.
        Each batch is stamped with its base offset (and the append time when the topic uses
        LogAppendTime, and `leader_epoch` when given); all go to one segment in one write.
        With `in_place`, batches that are writable buffers are stamped where they are (the
        caller gives up their contents: a produce request's own buffer) instead of copied.

        Idempotent batches (producer id >= 0) are checked against the producer state first:
        - a retry of one of the producer's last five batches returns the original offsets as
          AppendResult(duplicate=True) and writes nothing (Kafka answers such retries with
          success, so a producer never writes twice; as in Kafka, an append holding such a
          retry is answered as that retry);
        - a sequence gap or a stale epoch raises ProducerStateError (`code` 45 or 47), nothing
          is written; so does a marker of a stale producer or coordinator epoch (47 or 52).
        A batch over max.message.bytes raises InvalidBatch(code=10, MESSAGE_TOO_LARGE); an
        append larger than segment.bytes raises InvalidBatch(code=18, RECORD_LIST_TOO_LARGE).
        """
        if not batches:
            raise ValueError("nothing to append")
        cfg = self.config
        total = 0
        for data, _ in batches:
            if len(data) > cfg.max_message_bytes:
                raise InvalidBatch(f"batch of {len(data)} bytes exceeds max.message.bytes "
                                   f"{cfg.max_message_bytes}", code=10)
            total += len(data)
        if total > cfg.segment_bytes:
            raise InvalidBatch(f"append of {total} bytes exceeds segment.bytes {cfg.segment_bytes}",
                               code=18)
        with self._lock:
            now = _now_ms() if now_ms is None else now_ms
            append_time = now if cfg.message_timestamp_type == "LogAppendTime" else None
            producer = ProducerBatches(self.producer_state)
            first = offset = self._leo
            stamped, parsed, max_ts, records = [], [], -1, 0
            for data, h in batches:
                last = offset + h.last_offset_delta
                ts = h.max_timestamp if append_time is None else append_time
                if h.producer_id != NO_PRODUCER_ID:
                    dup = producer.check(h, data, offset, last, ts)
                    if dup is not None:
                        return AppendResult(*dup, duplicate=True)
                if in_place and isinstance(data, memoryview) and not data.readonly:
                    stamp_in_place(data, offset, append_time, leader_epoch)
                    stamped.append(data)
                else:
                    stamped.append(stamp(data, offset, append_time, leader_epoch))
                parsed.append((h.size, offset, last, ts))
                max_ts = max(max_ts, ts)
                records += h.record_count
                offset = last + 1
            self._roll_if_needed(total, max_ts, first, offset - 1, now).append(
                stamped, batches=parsed)
            producer.apply(self._end_transaction)
            self._leo = offset
            self._after_write(records, now)
            return AppendResult(first, offset - 1, -1 if append_time is None else append_time, max_ts)

    def append_as_follower(self, data: bytes | memoryview, *,
                           now_ms: int | None = None) -> AppendResult | None:
        """Append batches fetched from the leader, keeping their offsets; None if no whole batch.

        Every batch is CRC-checked (InvalidBatch otherwise); a partial trailing batch, as Kafka
        leaders may send, is ignored. Offsets must start at or after the log end and increase
        (gaps are allowed: compacted leaders have them); ValueError otherwise. Producer state is
        updated without sequence checks, as the leader already did them.
        """
        headers = [(pos, validate(data, pos, len(data), strict=False))
                   for pos, _ in iter_batches(data)]
        if not headers:
            return None
        with self._lock:
            now = _now_ms() if now_ms is None else now_ms
            prev = self._leo - 1
            for _, h in headers:
                if h.base_offset <= prev:
                    raise ValueError(f"follower append at offset {h.base_offset} does not follow "
                                     f"{prev} (log end {self._leo})")
                prev = h.last_offset
            end = headers[-1][0] + headers[-1][1].size
            payload = data if end == len(data) else data[:end]
            first, last = headers[0][1].base_offset, headers[-1][1].last_offset
            max_ts = max(h.max_timestamp for _, h in headers)
            self._roll_if_needed(len(payload), max_ts, first, last, now).append(payload)
            for pos, h in headers:
                if h.is_control and h.producer_id != NO_PRODUCER_ID:
                    self._end_transaction(h, h.base_offset, payload[pos:pos + h.size],
                                          h.max_timestamp)
                else:
                    self.producer_state.update_from_header(h)
            self._leo = last + 1
            self._after_write(sum(h.record_count for _, h in headers), now)
            return AppendResult(first, last, -1, max_ts)

    def roll(self, base_offset: int | None = None, *, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at `base_offset` (default: the log end); return it.

        The old one is sealed, and a producer state snapshot is written, so an unclean restart
        only has to recover and replay the new segment; both are fsynced in the background.
        """
        with self._lock:
            base = self._leo if base_offset is None else base_offset
            if base < self._leo:
                raise ValueError(f"cannot roll at {base}, below the log end {self._leo}")
            active = self._segments[-1]
            if active.size == 0:
                if active.base_offset == base:
                    return active
                self._segments.pop().delete()
                self._bases.pop()
                snapshot = None
            else:
                active.seal()
                snapshot = self.producer_state.snapshot(self._leo, sync=False)
                self._flush_in_background(active, base, snapshot)
            seg = self._new_segment(base, now_ms)
            self._segments.append(seg)
            self._bases.append(base)
            if snapshot is None:
                self.producer_state.snapshot(self._leo)
            return seg

    def _flush_in_background(self, segment, recovery_point, snapshot):
        def flush():
            try:
                segment.flush()
                fsync_dir(self.dir)  # the segment's own name, created when it became active
                self.producer_state.sync_snapshot(snapshot)
            except (OSError, ValueError, TypeError):
                return  # deleted or closed meanwhile (retention, truncation): nothing to keep
            with self._lock:
                if not self._closed and recovery_point > self._recovery_point:
                    self._recovery_point = recovery_point
                    self._write_checkpoint(recovery_point, RECOVERY_POINT_CHECKPOINT)
        future = _FLUSHER.submit(flush)
        self._pending_flushes.add(future)
        future.add_done_callback(self._pending_flushes.discard)

    # -- reads ------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, upper_bound: int | None = None,
             min_one: bool = True, region_over: int | None = None) -> bytes | FileRegion:
        """Whole batches starting with the one holding `offset`, from a single segment.

        At most `max_bytes` unless `min_one` and the first batch alone is larger. Batches whose
        base offset is >= `upper_bound` (e.g. the high watermark) are left out. Returns b"" at
        the log end; raises OffsetOutOfRange outside [log_start_offset, log_end_offset].
        More than `region_over` bytes come back as a `FileRegion` to send without reading.
        """
        with self._lock:
            if offset < self._log_start or offset > self._leo:
                raise OffsetOutOfRange(offset, self._log_start, self._leo)
            if offset == self._leo or (upper_bound is not None and offset >= upper_bound):
                return b""
            i = bisect.bisect_right(self._bases, offset) - 1
            for k in range(max(i, 0), len(self._segments)):
                seg = self._segments[k]
                max_position = None
                if upper_bound is not None and (k + 1 == len(self._bases) or self._bases[k + 1] > upper_bound):
                    max_position = seg.position_of(upper_bound)
                data = seg.read(offset, max_bytes, max_position, min_one, region_over)
                if data or max_position is not None:
                    return data
            return b""

    def offset_after_read(self, offset: int, length: int) -> int:
        """The offset after the batches a `read(offset, ...)` of `length` bytes returned: where
        a read_committed fetch's list of aborted transactions ends (Kafka bounds it so)."""
        with self._lock:
            i = bisect.bisect_right(self._bases, offset) - 1
            for seg in self._segments[max(i, 0):]:
                end = seg.offset_after(offset, length)
                if end is not None:
                    return end
            return self._leo

    def iter_batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Headers of the stored batches holding offsets >= `from_offset` (for replays).

        Iterates a snapshot of the segment list: do not truncate or delete while iterating.
        """
        with self._lock:
            i = max(bisect.bisect_right(self._bases, from_offset) - 1, 0)
            segments = self._segments[i:]
        for seg in segments:
            yield from seg.iter_headers(from_offset)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first batch with max timestamp >= `timestamp`, or None
        (`log_timestamps.offset_for_timestamp`)."""
        with self._lock:
            return offset_for_timestamp(self._segments, self._log_start, timestamp)

    def max_timestamp_entry(self) -> tuple[int, int] | None:
        """(max timestamp, offset) for ListOffsets MAX_TIMESTAMP, or None without timestamps
        (`log_timestamps.max_timestamp_entry`)."""
        with self._lock:
            return max_timestamp_entry(self._segments, self._log_start)

    # -- truncation, retention --------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Drop every batch holding an offset >= `offset` (a follower after a leader change).

        A batch straddling `offset` is dropped whole, so the log end may end up below it.
        Returns whether anything was removed.
        """
        with self._lock:
            if offset >= self._leo:
                return False
            if offset < self._log_start:
                self.truncate_fully_and_start_at(offset)
                return True
            while len(self._segments) > 1 and self._bases[-1] > offset:
                self._bases.pop()
                self._segments.pop().delete()
            seg = self._segments[-1]
            seg.truncate_to(offset)
            self._leo = seg.next_offset
            self._log_start = min(self._log_start, self._leo)
            self._reload_producer_state()
            return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Delete everything and restart the log empty at `offset` (start = end = offset)."""
        with self._lock:
            for seg in self._segments:
                seg.delete()
            self._segments = [self._new_segment(offset, now_ms)]
            self._bases = [offset]
            self._leo = self._log_start = offset
            self._write_checkpoint(offset)
            self.producer_state.clear()
            self.txn_index.truncate_to(0)
            self.producer_state.delete_all_snapshots()

    def delete_records_before(self, offset: int) -> int:
        """Kafka DeleteRecords: move the log start offset up to `offset`; return the new start.

        Whole segments below it are deleted now; the start offset is checkpointed so a restart
        keeps it. The caller checks `offset` against the high watermark (Kafka's rule).
        """
        with self._lock:
            if offset < 0 or offset > self._leo:
                raise OffsetOutOfRange(offset, self._log_start, self._leo)
            if offset > self._log_start:
                self._log_start = offset
                self._write_checkpoint(offset)
                self._delete_segments(below(lambda: self._log_start), keep_active=True)
            return self._log_start

    def apply_retention(self, now_ms: int | None = None, upper_bound: int | None = None) -> int:
        """Delete the oldest whole segments breaching retention.ms or retention.bytes.

        As in Kafka: time retention compares each segment's largest timestamp with
        now - retention.ms, size retention drops the oldest segments while the log stays above
        retention.bytes; deletion stops at the first segment that must stay, and never passes
        `upper_bound` (the high watermark). If every segment goes, the active one is rolled
        first so the log keeps an (empty) active segment at its end offset. Returns the
        number of segments deleted. Time and size rules apply only when cleanup.policy
        includes "delete"; segments wholly below the log start offset always go.
        """
        with self._lock:
            deleted = self._delete_segments(below(lambda: self._log_start), keep_active=True)
            now = _now_ms() if now_ms is None else now_ms
            for rule in retention_rules(self.config, now, lambda: self.size):
                deleted += self._delete_segments(rule, upper_bound)
            return deleted

    # -- durability, lifecycle --------------------------------------------------------------

    def flush(self, *, now_ms: int | None = None) -> None:
        """fsync the active segment (older ones were fsynced when the log rolled past them),
        and the directory if a segment was created since, as Kafka's LocalLog.flush: the new
        file's name must be durable too, or a power loss takes the flushed segment along."""
        with self._lock:
            self._segments[-1].flush()
            if self._dir_dirty:
                fsync_dir(self.dir)
                self._dir_dirty = False
            self._unflushed = 0
            self._last_flush_ms = _now_ms() if now_ms is None else now_ms

    def flush_if_due(self, now_ms: int | None = None) -> bool:
        """flush.ms for a periodic task: flush if data waited longer than flush.ms."""
        with self._lock:
            now = _now_ms() if now_ms is None else now_ms
            if self.config.flush_ms is not None and self._unflushed and \
                    now - self._last_flush_ms >= self.config.flush_ms:
                self.flush(now_ms=now)
                return True
            return False

    def close(self) -> None:
        """Flush, snapshot producer state at the log end, and close every file."""
        with self._lock:
            if self._closed:
                return
            pending = list(self._pending_flushes)
        wait(pending)  # outside the lock: a flush takes it to move the recovery point
        with self._lock:
            if self._closed:
                return
            self._segments[-1].on_become_inactive()  # seals the time index, fsyncs
            self._recovery_point = self._leo
            self._write_checkpoint(self._leo, RECOVERY_POINT_CHECKPOINT)
            self.producer_state.snapshot(self._leo)
            for seg in self._segments:
                seg.close()
            self._closed = True

    def delete(self) -> None:
        """Close and remove the partition directory."""
        with self._lock:
            for seg in self._segments:
                seg.close()
            self._closed = True
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Log({self.dir.name}, start={self._log_start}, end={self._leo}, segments={len(self._segments)})"

    # -- internals --------------------------------------------------------------------------

    def _new_segment(self, base, now_ms=None, existing=False):
        if not existing:  # a stale file of an untracked segment must not come back to life
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                segment_file(self.dir, base, suffix).unlink(missing_ok=True)
            self._dir_dirty = True
        return LogSegment(self.dir, base, index_interval_bytes=self.config.index_interval_bytes,
                          max_index_bytes=self.config.segment_index_bytes, now_ms=now_ms)

    def _roll_if_needed(self, size, max_ts, first_offset, last_offset, now):
        """The segment to write to, rolling as Kafka's LogSegment.shouldRoll decides."""
        seg, cfg = self._segments[-1], self.config
        if not seg.can_hold(last_offset):
            return self.roll(first_offset, now_ms=now)
        if seg.size == 0:
            return seg
        first_ts = seg.first_batch_timestamp
        waited = max_ts - first_ts if first_ts >= 0 else now - seg.created_ms
        if seg.size > cfg.segment_bytes - size or waited > cfg.segment_ms or seg.indexes_full:
            return self.roll(first_offset, now_ms=now)
        return seg

    def _after_write(self, records, now):
        self._unflushed += records
        cfg = self.config
        if cfg.flush_messages is not None and self._unflushed >= cfg.flush_messages:
            self.flush(now_ms=now)
        elif cfg.flush_ms is not None:
            self.flush_if_due(now)

    def _delete_segments(self, rule: Rule, upper_bound: int | None = None,
                         keep_active: bool = False) -> int:
        """Delete the longest prefix of segments `rule` allows (`deletable_prefix`)."""
        k = deletable_prefix(self._segments, self._bases, self._leo, rule, upper_bound, keep_active)
        if k == 0:
            return 0
        if k == len(self._segments):
            self.roll()
        doomed = self._segments[:k]
        del self._segments[:k], self._bases[:k]
        for seg in doomed:
            seg.delete()
        self._log_start = max(self._log_start, self._bases[0])
        self.producer_state.delete_snapshots_before(self._bases[0])
        self.txn_index.drop_before(self._bases[0])
        return k

    def _reload_producer_state(self) -> None:
        rebuild(self, self.producer_state, self.txn_index, self._leo, self._bases[0])

    def _end_transaction(self, h: BatchHeader, offset: int, data: Any, ts: int) -> None:
        end_transaction(self.producer_state, self.txn_index, h, offset, data, ts,
                        self._segments[-1].base_offset)

    # -- transactions -----------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or None (the last stable offset is
        the smaller of it and the high watermark)."""
        with self._lock:
            return self.producer_state.first_unstable_offset()

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """AbortedTxn entries with records in [start, end)."""
        with self._lock:
            return self.txn_index.overlapping(start, end)

    def _read_checkpoint(self, name=LOG_START_CHECKPOINT):
        return read_checkpoint(self.dir / name)

    def _write_checkpoint(self, offset, name=LOG_START_CHECKPOINT):
        write_checkpoint(self.dir / name, offset)

    # -- compaction hook (the cleaner is broker/storage/cleaner.py) --------------------------------

    CLEANED_SUFFIX = CLEANED_SUFFIX
    SWAP_SUFFIX = SWAP_SUFFIX

    def replace_segments(self, old_segments: Sequence[LogSegment],
                         cleaned_path: str | os.PathLike[str]) -> bool:

        """Swap contiguous non-active `old_segments` for one cleaned segment file.

        `cleaned_path` is `<base>.log.cleaned` in this directory (base: the first old segment's
        base offset) holding the retained batches at their original offsets and ending at the
        old segments' next offset (crash-safe: `log_loader.swap_in_cleaned`). Returns False,
        discarding the file, if the segments changed meanwhile (truncated, deleted by
        retention, or one became the active segment).
        """
        cleaned = Path(cleaned_path)
        with self._lock:
            n = len(old_segments)
            first = next((i for i, s in enumerate(self._segments) if s is old_segments[0]), -1)
            if first < 0 or first + n >= len(self._segments) or any(
                    a is not b for a, b in zip(self._segments[first:first + n], old_segments)):
                cleaned.unlink(missing_ok=True)
                return False
            base = swap_in_cleaned(self.dir, old_segments, cleaned)
            seg = self._new_segment(base, existing=True)
            seg.recover()  # builds the indexes of the new file
            self._segments[first:first + n] = [seg]
            self._bases[first:first + n] = [base]
            return True
