"""Log compaction: keep the latest record per key in topics whose cleanup.policy has `compact`.

Kafka's LogCleaner on one background thread. Every `log.cleaner.backoff.ms`, each compacted
log whose dirty part (written since its last cleaning) is at least `min.cleanable.dirty.ratio`
of its cleanable part is cleaned. Cleanable: the non-active segments below the high watermark
whose newest record is older than `min.compaction.lag.ms`. A cleaning maps each key of the
dirty part to its last offset, then rewrites the cleanable segments, in groups that fit
`segment.bytes`, keeping a record only when no later record has its key. Records without a
key go too (as in Kafka).

Tombstones (null values) follow Kafka's delete horizon (KIP-534): the first cleaning that keeps
a tombstone stamps its batch with a horizon, now + `delete.retention.ms`, stored as the batch's
base timestamp under attribute bit 0x40, the records' timestamp deltas re-based to it so every
client still reads each record's own timestamp. A later cleaning drops the tombstone once its
horizon has passed, so a consumer that starts reading within `delete.retention.ms` of the
first cleaning still sees the delete, however old the segment. A log whose next horizon has
passed is cleaned even when nothing new was written (Kafka waits for new dirty data; an idle
topic would then keep its tombstones for ever). A batch left with no tombstone loses its stamp.

Offsets never change: a rewritten batch keeps its base offset and last offset delta, so it may
hold fewer records than its offset span; a batch whose records all stay (and need no stamp) is
copied byte for byte, and the last batch of a group stays (possibly empty) so the new segment
ends where the old ones did. The swap itself is `Log.replace_segments`. How far each log has
been cleaned is kept in Kafka's `cleaner-offset-checkpoint` file in the data directory.

Transactions, as Kafka's cleaner: only segments below the last stable offset are cleanable (an
open transaction's records are not yet decided), records of aborted transactions count for no
key and are removed, and transaction markers stay.
"""
import asyncio
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from minilog.connector import batch as batch_format
from minilog.connector import compression as codecs
from minilog.connector.batch import COMPRESSION_MASK, DELETE_HORIZON, HEADER_SIZE, read_header
from minilog.connector.records import record_spans, with_timestamp_delta

from .log import Log
from .log_validator import batch_payload

CHECKPOINT = "cleaner-offset-checkpoint"
DEFAULT_DELETE_RETENTION_MS = 24 * 3600 * 1000  # Kafka's log.cleaner.delete.retention.ms
DEFAULT_MIN_CLEANABLE_RATIO = 0.5                # Kafka's log.cleaner.min.cleanable.ratio
_INT32_MAX = (1 << 31) - 1
_READ_BUFFER = 1 << 20
_UNKNOWN = object()  # a log's next delete horizon before its batch headers were looked at

log = logging.getLogger("minilog.broker.cleaner")


class _Stopped(Exception):
    pass


class LogCleaner:
    def __init__(self, broker):
        self.broker = broker
        self.backoff_s = broker.config["log.cleaner.backoff.ms"] / 1000
        self.checkpoint_path = broker.config.data_dir / CHECKPOINT
        self.cleaned_up_to = self._read_checkpoint()  # (topic, partition) -> first dirty offset
        # (topic, partition) -> earliest delete horizon of a kept tombstone (None: no tombstone);
        # a log missing here is scanned for stamped batches before its next cleaning decision.
        self._next_horizon = {}
        self._checkpoint_lock = threading.Lock()  # cleaning thread vs topic deletion
        self._stop = threading.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="log-cleaner")
        self._task = None

    def start(self):
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self):
        """Stop between two batches and wait, so no cleaning outlives the logs."""
        self._stop.set()
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.to_thread(self._executor.shutdown, True)

    async def _run(self):
        loop = asyncio.get_running_loop()
        while not self._stop.is_set():
            await asyncio.sleep(self.backoff_s)
            await loop.run_in_executor(self._executor, self.clean_all)

    def clean_all(self):
        """One pass over every compacted log; returns the bytes compaction removed."""
        saved = 0
        for (topic, index), partition in list(self.broker.partitions.items()):
            if self._stop.is_set():
                break
            lg = partition.log
            if "compact" not in lg.config.cleanup_policy.split(","):
                continue
            try:
                saved += self.clean_log((topic, index), lg, partition.last_stable_offset,
                                        self._topic_configs(topic))
            except _Stopped:
                break
            except Exception:
                log.exception("cleaning %s-%d failed", topic, index)
        return saved

    def _topic_configs(self, topic):
        configs = {k: v for k, (v, _) in self.broker.topics.effective_configs(topic).items()}
        return (int(configs.get("delete.retention.ms", DEFAULT_DELETE_RETENTION_MS)),
                int(configs.get("min.compaction.lag.ms", 0)),
                float(configs.get("min.cleanable.dirty.ratio", DEFAULT_MIN_CLEANABLE_RATIO)))

    def clean_log(self, key, lg, high_watermark, configs, now_ms=None):
        """Clean one log if its dirty ratio, or a passed delete horizon, asks for it; returns
        the bytes removed. `high_watermark`: the partition's last stable offset (segments
        reaching past it are not cleaned)."""
        delete_retention_ms, min_lag_ms, min_ratio = configs
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        cleanable = []
        for seg in lg.segments[:-1]:
            if seg.next_offset > high_watermark or (
                    min_lag_ms > 0 and seg.largest_timestamp > now - min_lag_ms):
                break
            cleanable.append(seg)
        if not cleanable:
            return 0
        end = cleanable[-1].next_offset
        first_dirty = self.cleaned_up_to.get(key, 0)
        if not lg.log_start_offset <= first_dirty <= lg.log_end_offset:
            first_dirty = lg.log_start_offset
        horizon = self._next_horizon.get(key, _UNKNOWN)
        if horizon is _UNKNOWN:
            horizon = self._next_horizon[key] = _earliest_horizon(cleanable)
        if horizon is None or now < horizon:  # no tombstone due: only dirty data is a reason
            if first_dirty >= end:
                return 0
            total = sum(s.size for s in cleanable)
            dirty = sum(s.size for s in cleanable if s.next_offset > first_dirty)
            if not total or dirty / total < min_ratio:
                return 0
        aborted = _aborted_batches(lg, cleanable[0].base_offset, end)
        keys = self._offset_map([s for s in cleanable if s.next_offset > first_dirty],
                                first_dirty, aborted)
        self._next_horizon.pop(key, None)  # until this cleaning has finished and knows it again
        saved, horizons = 0, []
        for group in _groups(cleanable, lg.config.segment_bytes):
            removed, group_horizon = self._clean_group(lg, group, keys, now, delete_retention_ms,
                                                       aborted)
            saved += removed
            if group_horizon is not None:
                horizons.append(group_horizon)
        with self._checkpoint_lock:
            if not lg.closed:  # not deleted meanwhile
                self.cleaned_up_to[key] = max(end, first_dirty)
                self._next_horizon[key] = min(horizons, default=None)
                self._write_checkpoint()
        if saved:
            log.info("cleaned %s-%d up to offset %d: %d bytes removed", *key, end, saved)
        return saved

    def _offset_map(self, segments, first_dirty, aborted):
        """key -> offset of its last record in the dirty segments (aborted ones left out)."""
        keys = {}
        for seg in segments:
            for raw, h in self._batches(seg):
                if h.is_control or h.last_offset < first_dirty or aborted(h):
                    continue
                for _, _, _, delta, key, _ in record_spans(batch_payload(raw, h), h.record_count):
                    if key is not None and h.base_offset + delta >= first_dirty:
                        keys[key] = h.base_offset + delta
        return keys

    def _clean_group(self, lg, group, keys, now, delete_retention_ms, aborted):
        """Rewrite one group of segments into one. Returns the bytes removed (0 if unchanged)
        and the earliest delete horizon of the tombstones kept (None if none is)."""
        base = group[0].base_offset
        out_path = lg.dir / f"{base:020d}.log{Log.CLEANED_SUFFIX}"
        mtimes = [os.stat(seg.log_path).st_mtime_ns for seg in group]
        changed, written, last, horizon = False, 0, None, None
        try:
            with open(out_path, "wb") as out:
                for seg in group:
                    for raw, h in self._batches(seg):
                        kept, kept_horizon = (None, None) if aborted(h) else \
                            _filter_batch(raw, h, keys, now, delete_retention_ms)
                        changed |= kept is not raw
                        last = (h, kept)
                        if kept_horizon is not None and (horizon is None or kept_horizon < horizon):
                            horizon = kept_horizon
                        if kept:
                            out.write(kept)
                            written += len(kept)
                if last is not None and last[1] is None:  # keep where the old segments ended
                    empty = _empty_batch(last[0])
                    out.write(empty)
                    written += len(empty)
                out.flush()
                os.fsync(out.fileno())
            if not changed:
                out_path.unlink()
                return 0, horizon
            os.utime(out_path, ns=(max(mtimes), max(mtimes)))  # as Kafka, keep the last mtime
        except BaseException:
            out_path.unlink(missing_ok=True)
            raise
        if not lg.replace_segments(group, out_path):
            return 0, horizon
        return sum(seg.size for seg in group) - written, horizon

    def _batches(self, seg):
        """(bytes, header) of each whole batch in a segment file, streamed."""
        with open(seg.log_path, "rb", buffering=_READ_BUFFER) as f:
            while True:
                if self._stop.is_set():
                    raise _Stopped()
                head = f.read(HEADER_SIZE)
                if len(head) < HEADER_SIZE:
                    return
                h = read_header(head)
                if h.batch_length <= 0:
                    return
                rest = f.read(h.size - HEADER_SIZE)
                if len(rest) < h.size - HEADER_SIZE:
                    return
                yield head + rest, h

    def forget(self, partitions):
        """Drop deleted partitions from the checkpoint (Kafka's LogCleaner.updateCheckpoints on
        deletion): a topic created again under the same name is dirty from its first offset."""
        with self._checkpoint_lock:
            for key in partitions:
                self._next_horizon.pop(key, None)
            if [key for key in partitions if self.cleaned_up_to.pop(key, None) is not None]:
                self._write_checkpoint()

    # -- checkpoint -----------------------------------------------------------------------------
    def _read_checkpoint(self):
        try:
            lines = self.checkpoint_path.read_text().splitlines()
            out = {}
            for line in lines[2:2 + int(lines[1])] if lines and lines[0] == "0" else ():
                topic, partition, offset = line.split()
                out[(topic, int(partition))] = int(offset)
            return out
        except (OSError, ValueError, IndexError):
            return {}

    def _write_checkpoint(self):
        entries = sorted(self.cleaned_up_to.items())
        text = f"0\n{len(entries)}\n" + "".join(f"{t} {p} {o}\n" for (t, p), o in entries)
        tmp = self.checkpoint_path.with_name(CHECKPOINT + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.checkpoint_path)


def _groups(segments, max_bytes):
    """Consecutive segments whose total size fits one segment (and int32 relative offsets)."""
    group, size = [], 0
    for seg in segments:
        if group and (size + seg.size > max_bytes or
                      seg.next_offset - 1 - group[0].base_offset > _INT32_MAX):
            yield group
            group, size = [], 0
        group.append(seg)
        size += seg.size
    if group:
        yield group


def _earliest_horizon(segments):
    """The earliest delete horizon stamped in the segments' batches (headers only), or None."""
    horizons = [h.delete_horizon_ms for seg in segments for h in seg.iter_headers()
                if h.delete_horizon_ms is not None]
    return min(horizons, default=None)


def _aborted_batches(lg, start, end):
    """A test of batch headers: whether the batch belongs to a transaction aborted in
    [start, end) (its producer's aborted transaction spans its offset)."""
    spans = {}
    for a in lg.aborted_transactions(start, end):
        spans.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
    if not spans:
        return lambda h: False

    def aborted(h):
        if not h.is_transactional or h.is_control:
            return False
        return any(first <= h.base_offset <= last for first, last in spans.get(h.producer_id, ()))
    return aborted


def _filter_batch(raw, h, keys, now, delete_retention_ms):
    """(the batch with only the records to keep, the delete horizon of its kept tombstones).

    The batch is `raw` itself if all records stay and none needs a horizon, None if none stay.
    As Kafka's `MemoryRecords.filterTo`: a tombstone stays until now reaches its batch's
    horizon; the first cleaning that keeps one stamps the horizon, now + delete_retention_ms.
    """
    if h.is_control:  # transaction markers: minilog has no transactions to expire them with
        return raw, None
    payload = batch_payload(raw, h)
    horizon = h.delete_horizon_ms
    drop_tombstones = horizon is not None and now >= horizon
    kept, tombstones = [], False
    for start, end, ts_delta, delta, key, tombstone in record_spans(payload, h.record_count):
        if key is None or h.base_offset + delta < keys.get(key, -1) or (
                tombstone and drop_tombstones):
            continue
        kept.append((payload[start:end], ts_delta))
        tombstones |= tombstone
    if not kept:
        return (raw if h.record_count == 0 else None), None  # an empty batch stays as it is
    if not tombstones:
        horizon = None
    elif horizon is None:
        horizon = now + delete_retention_ms
    if len(kept) == h.record_count and horizon == h.delete_horizon_ms:
        return raw, horizon
    if h.log_append_time:
        times = [h.max_timestamp] * len(kept)
    else:
        times = [h.base_timestamp + ts_delta for _, ts_delta in kept]
    attributes = h.attributes & ~DELETE_HORIZON
    if horizon is not None:
        attributes |= DELETE_HORIZON
        base_ts = horizon
    elif h.delete_horizon_ms is not None:  # the stamp goes: base on the first record again
        base_ts = times[0]
    else:
        base_ts = h.base_timestamp
    if base_ts == h.base_timestamp:
        body = b"".join(record for record, _ in kept)
    else:
        body = b"".join(with_timestamp_delta(record, t - base_ts)
                        for (record, _), t in zip(kept, times))
    return batch_format.build(
        codecs.compress(h.compression, body) if h.compression else body, len(kept),
        h.last_offset_delta, base_ts, max(times), base_offset=h.base_offset,
        attributes=attributes, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence, partition_leader_epoch=h.partition_leader_epoch), horizon


def _empty_batch(h):
    """A batch with no records spanning h's offsets: it keeps the log's offsets where they were.
    As Kafka's empty header, it carries no delete horizon: both timestamps are the max."""
    base_ts = h.base_timestamp if h.delete_horizon_ms is None else h.max_timestamp
    return batch_format.build(b"", 0, h.last_offset_delta, base_ts, h.max_timestamp,
                              base_offset=h.base_offset,
                              attributes=h.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON),
                              producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                              base_sequence=h.base_sequence,
                              partition_leader_epoch=h.partition_leader_epoch)
