"""Offsets by time over a log's segments: ListOffsets by timestamp and MAX_TIMESTAMP.

Apart from `log.py` because these are pure reads of the segment list (each segment keeps its
largest timestamp and time index): no state of the log changes, and the rules below, which
are Kafka's, are easier to check on their own. `Log` calls them under its lock.
"""
from collections.abc import Iterable, Sequence

from minilog.connector.batch import BatchHeader

from .segment import LogSegment


def _max_timestamp_of(headers: Iterable[BatchHeader]) -> tuple[int, int] | None:
    """(max timestamp, last offset of the first batch reaching it) over batch headers, or None."""
    best = None
    for h in headers:
        if h.max_timestamp >= 0 and (best is None or h.max_timestamp > best[0]):
            best = (h.max_timestamp, h.last_offset)
    return best


def offset_for_timestamp(segments: Sequence[LogSegment], log_start: int,
                         timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first batch with max timestamp >= `timestamp`, or None.

    Batch granularity (records are not decoded): the offset is that batch's base offset
    (or the log start offset), so a consumer seeking there misses no record with a
    timestamp >= the target; the timestamp is the batch's base timestamp if that
    qualifies, else its max timestamp. Decode that one batch for a record-exact answer.
    """
    for seg in segments:
        if seg.next_offset > log_start and seg.max_timestamp >= timestamp:
            found: tuple[int, int] | None = seg.find_offset_by_timestamp(timestamp, log_start)
            if found is not None:
                return found
    return None


def max_timestamp_entry(segments: Sequence[LogSegment],
                        log_start: int) -> tuple[int, int] | None:
    """(max timestamp, offset) for ListOffsets MAX_TIMESTAMP, or None without timestamps.

    The offset is the last offset of the first batch that reached the maximum (Kafka's
    shallow offset); `read(offset, 1)` returns that batch for a record-exact answer.
    Batches wholly below the log start offset (DeleteRecords) are not counted: their
    segment may still be on disk, but their records are gone for every reader.
    """
    best = None
    for seg in segments:
        if seg.next_offset <= log_start:
            continue
        if seg.base_offset < log_start:
            entry = _max_timestamp_of(seg.iter_headers(log_start))
        elif seg.max_timestamp >= 0:
            entry = (seg.max_timestamp, seg.offset_of_max_timestamp)
        else:
            entry = None
        if entry is not None and (best is None or entry[0] > best[0]):
            best = entry
    return best
