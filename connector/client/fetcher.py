"""Fetch requests and what comes back: the consumer's network half.

Split from `consumer.py` (positions, assignment, public API) the way the Java client splits
Fetcher from KafkaConsumer. This module builds Fetch requests for a set of (partition, offset)
at the highest version both sides speak (v13+ names topics by id, so it falls back to v12 when
the cluster has no topic ids), and turns each partition's answer into a `Chunk`: the raw record
bytes exactly as fetched, plus the offset to fetch next. Nothing here walks records: decoding
happens later, once per chunk, into Python records or straight into Arrow columns.

read_committed: the batches of aborted transactions are found here, per batch header, using the
aborted transaction list of the response (Kafka's algorithm, KIP-98), in the same walk that
finds the next offset; both decoding paths then skip them (`skip`, their base offsets), so the
fetched bytes are never copied to leave them out.
"""
import asyncio
import collections
import heapq
import time
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import Any, NamedTuple

from minilog.connector import batch as _batch
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request
from minilog.connector.protocol.primitives import ZERO_UUID
from minilog.connector.records import CorruptRecord, decode_batches

from .cluster import Cluster
from .config import Config
from .connection import BrokerConnection, message_class
from .types import KafkaConnectionError, KafkaTimeoutError, Message, TopicPartition

Epochs = tuple[tuple[int, int], ...]  # ((first offset, leader epoch), ...), see Chunk
Records = list[Any]  # ConsumerRecords (connector/records.py)

_FETCH = request(ApiKey.FETCH)
_Topic = message_class(_FETCH, "topics")
_Partition = message_class(_FETCH, "topics", "partitions")
_LAST_VERSION_WITHOUT_IDS = 12


class FetchPlan(NamedTuple):
    """One fetch's request, per partition: the offset, the state's seek counter (`epoch`) the
    answer must still match, and (current leader epoch, last fetched epoch)."""
    offsets: dict[TopicPartition, int]
    positions: dict[TopicPartition, int]
    leader_epochs: dict[TopicPartition, tuple[int, int]]


class Chunk:
    """One partition's fetched bytes, decoded at most once (lazily) into Python records.

    `start`: the first offset not yet handed out (the fetch offset, until `take_arrow` hands
    out part of it): a chunk's records are decoded from there, by whichever thread gets to it
    first (`predecode`). `epochs`: ((first offset, partition leader epoch), ...) from the
    batch headers, one entry per epoch change (almost always one): the epoch of any offset in
    the chunk without looking at its records."""
    __slots__ = ("bad_batch", "data", "epochs", "index", "next_offset", "records", "skip",
                 "start")

    def __init__(self, data: bytes, start: int, next_offset: int, epochs: Epochs = (),
                 skip: frozenset[int] = frozenset()) -> None:
        self.data, self.start, self.next_offset, self.index = data, start, next_offset, 0
        self.records: Records | None = None
        self.epochs, self.skip = epochs, skip
        self.bad_batch: int | None = None  # a corrupt batch's offset, after `records`

    def decoded(self, tp: TopicPartition, check_crc: bool) -> Records:
        """The chunk's records from `start` on (decoded now if no thread has yet). When a
        batch is corrupt, the records before it, and `bad_batch` says where it starts; with
        none before it, CorruptData is raised."""
        records = self.records
        if records is None:
            try:
                records = decode(self.data, tp, self.start, check_crc, self.skip)
            except CorruptData as e:
                if not e.before or e.at is None:
                    raise
                records, self.bad_batch = e.before, e.at
            self.index, self.records = 0, records
        return records

    def predecode(self, tp: TopicPartition, check_crc: bool) -> None:
        """Decode ahead, in the thread that will take the records (the sync consumer's
        caller), while the client's event-loop thread receives and decrypts the next fetch.
        An error is left for `take_records` to raise, in the order the records come out."""
        if self.records is None:
            try:
                self.decoded(tp, check_crc)
            except KafkaError:
                pass

    def epoch_before(self, offset: int) -> int:
        """The leader epoch of the batch holding `offset - 1` (-1 if unknown)."""
        epoch = -1
        for first, e in self.epochs:
            if first >= offset:
                break
            epoch = e
        return epoch


class PartitionState:
    """A consumer's view of one assigned partition.

    `position` is the next offset handed to the application; `fetch_offset` (>= position) the
    next one to fetch, ahead of it by the chunks buffered in between. `epoch` changes on every
    seek, so answers to fetches sent before it are recognised as stale and dropped.
    `out_of_range`: the fetch offset a broker called out of range while chunks before it were
    still buffered; the position is reset only once they are handed out (Java resets only
    for an out-of-range answer at the position).

    Log truncation detection (KIP-320): `offset_epoch` is the leader epoch of the record before
    the position (-1 unknown), `fetch_epoch` that of the record before the fetch offset (Fetch
    `last_fetched_epoch`), `leader_epoch` the partition leader epoch the position is known to
    be valid under (Fetch `current_leader_epoch`). `validating`: the position waits for an
    OffsetForLeaderEpoch check (a new leader, or a committed offset with an epoch) before
    anything is fetched at it (Java's AWAIT_VALIDATION).
    """
    __slots__ = ("chunks", "epoch", "error", "fetch_epoch", "fetch_offset", "high_watermark",
                 "in_fetch", "last_stable_offset", "leader_epoch", "log_start_offset",
                 "offset_epoch", "out_of_range", "paused", "position", "reset", "validating")

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetch_offset: int | None = None
        self.reset: Any = None  # the offset spec to reset to (EARLIEST, LATEST), or a mark
        self.error: BaseException | None = None
        self.out_of_range: int | None = None
        self.chunks: collections.deque[Chunk] = collections.deque()
        self.epoch, self.paused, self.in_fetch, self.validating = 0, False, False, False
        self.high_watermark = self.last_stable_offset = self.log_start_offset = -1
        self.offset_epoch = self.fetch_epoch = self.leader_epoch = -1

    def set_position(self, offset: int | None, offset_epoch: int = -1) -> None:
        """Move to `offset` (None: unknown), whose preceding record has `offset_epoch`."""
        self.position = self.fetch_offset = offset
        self.offset_epoch = self.fetch_epoch = offset_epoch
        self.reset = self.out_of_range = None
        self.validating = False
        self.chunks.clear()
        self.epoch += 1

    def refetch(self) -> None:
        """Drop what was fetched past the position (answers in flight too): fetch from it."""
        self.fetch_offset, self.fetch_epoch = self.position, self.offset_epoch
        self.out_of_range = None
        self.chunks.clear()
        self.epoch += 1

    def await_validation(self) -> None:
        """Refetch from the position, once it is validated."""
        self.refetch()
        self.validating = True

    def take_records(self, tp: TopicPartition, limit: int, check_crc: bool = True) -> Records:
        """Up to `limit` buffered records from the position on, advancing it."""
        out: Records = []
        position = self.position
        assert position is not None  # chunks are buffered only at a known position
        while self.chunks and len(out) < limit:
            chunk = self.chunks[0]
            try:
                records = chunk.decoded(tp, check_crc)  # from `position`: chunk.start is that
            except KafkaError:
                if out:  # corrupt data after records: those first, the error next time
                    break
                raise
            if not out and chunk.index == 0 and len(records) <= limit:
                take = out = records  # the whole chunk: hand its list over, no copy
            else:
                take = records[chunk.index:chunk.index + limit - len(out)]
                out.extend(take)
            chunk.index += len(take)
            if take:
                position = take[-1].offset + 1
            if chunk.index >= len(records) and chunk.bad_batch is not None:
                # Up to a corrupt batch: stop at it; decoded again, it raises (Kafka's
                # consumer, too, hands out what precedes it and then fails at its offset).
                position = chunk.start = max(position, chunk.bad_batch)
                chunk.records, chunk.bad_batch = None, None
                self.position, self.offset_epoch = position, chunk.epoch_before(position)
                break
            if chunk.index >= len(records):
                self.chunks.popleft()  # its list may be `out` now: nothing else uses it
                position = max(position, chunk.next_offset)
            self.position = position
            self.offset_epoch = chunk.epoch_before(position)
        return out

    def take_arrow(self, tp: TopicPartition, limit: int | None, include_headers: bool = True,
                   check_crc: bool = True) -> list[Any]:
        """Buffered records (up to `limit` offsets; None: all) as RecordBatches, advancing."""
        out: list[Any] = []
        rows = 0
        position = self.position
        assert position is not None  # chunks are buffered only at a known position
        while self.chunks and (limit is None or rows < limit):
            chunk = self.chunks[0]
            end = None if limit is None else position + (limit - rows)
            try:
                batch = decode_arrow(chunk.data, tp, position, end, include_headers, check_crc,
                                     chunk.skip)
            except CorruptData as e:
                if e.at is not None and e.at > position:  # the records before the bad batch
                    end = e.at if end is None else min(end, e.at)
                    batch = decode_arrow(chunk.data, tp, position, end, include_headers,
                                         check_crc, chunk.skip)
                elif out:  # those first, the error next time
                    break
                else:
                    raise
            chunk.records = None  # a cached Python decoding no longer starts at the position
            if end is not None and end < chunk.next_offset:
                position = chunk.start = end
            else:
                self.chunks.popleft()
                position = max(position, chunk.next_offset)
            self.position = position
            self.offset_epoch = chunk.epoch_before(position)
            if batch.num_rows:
                out.append(batch)
                rows += batch.num_rows
        return out


class PartitionData(NamedTuple):
    """One partition's answer to a Fetch."""
    error: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes          # whole batches, as fetched
    next_offset: int | None  # the offset after the last whole batch, or None if none
    epochs: Epochs = ()      # ((first offset, leader epoch), ...), see Chunk
    # (epoch, end offset): the log diverged before the fetch offset
    diverging: tuple[int, int] | None = None
    skip: frozenset[int] = frozenset()  # base offsets of aborted batches (read_committed)


def fetch_version(conn: BrokerConnection, cluster: Cluster, topics: Iterable[str]) -> int:
    """Fetch version for `topics`: v13+ only when every topic has a topic id."""
    cap = None
    if any(cluster.topic_id(t) == ZERO_UUID for t in topics):
        cap = _LAST_VERSION_WITHOUT_IDS
    return conn.version_for(ApiKey.FETCH, cap)


def build_request(cluster: Cluster, offsets: Mapping[TopicPartition, int], version: int, *,
                  max_wait_ms: int, min_bytes: int, max_bytes: int, partition_max_bytes: int,
                  isolation_level: int, rack: str | None = "",
                  epochs: Mapping[TopicPartition, tuple[int, int]] | None = None) -> Message:
    """A full (session-less) Fetch for {TopicPartition: offset}; `epochs` {tp: (current leader
    epoch, last fetched epoch)} (default: the leader epoch of the metadata, none fetched)."""
    topics: dict[str, list[Any]] = {}
    for tp, offset in offsets.items():
        current, last = epochs[tp] if epochs else (cluster.leader_epoch(*tp), -1)
        topics.setdefault(tp.topic, []).append(_Partition(
            partition=tp.partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes,
            current_leader_epoch=current, last_fetched_epoch=last, log_start_offset=-1))
    return _FETCH.cls(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=isolation_level, session_id=0, session_epoch=-1, rack_id=rack,
        forgotten_topics_data=[],
        topics=[_Topic(topic=t, topic_id=cluster.topic_id(t), partitions=p)
                for t, p in topics.items()])


def parse_response(cluster: Cluster, resp: Message,
                   read_committed: bool) -> dict[TopicPartition, PartitionData]:
    """{TopicPartition: PartitionData}. A top-level error raises KafkaError."""
    if resp.error_code:
        raise KafkaError(resp.error_code, "Fetch")
    out = {}
    for t in resp.responses:
        name = t.topic or cluster.topic_name(t.topic_id)
        if name is None:
            continue
        for p in t.partitions:
            data = p.records or b""
            # the position moves past every batch fetched, markers and aborted ones included:
            # a fetch ending on them must not be fetched again
            aborted = p.aborted_transactions if read_committed else None
            next_offset, epochs, skip = scan_batches(data, aborted)
            diverging = getattr(p, "diverging_epoch", None)
            if diverging is not None and diverging.end_offset >= 0:
                diverging = (diverging.epoch, diverging.end_offset)
            else:
                diverging = None
            out[TopicPartition(name, p.partition_index)] = PartitionData(
                p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset,
                data, next_offset, epochs, diverging, skip)
    return out


def scan_batches(data: bytes, aborted: Iterable[Any] | None = None
                 ) -> tuple[int | None, Epochs, frozenset[int]]:
    """(offset after the last whole batch or None, ((first offset, leader epoch), ...) one
    entry per change of epoch, the base offsets of the batches of `aborted` transactions (a
    Fetch response's list; None or empty: none)): one walk over batch headers, never records.

    A producer's transaction is aborted from its first offset up to that producer's next
    control batch (its ABORT marker): producers run one transaction at a time, so the first
    marker after the first offset ends that very transaction.
    """
    last = None
    epochs: list[tuple[int, int]] = []
    skip: list[int] = []
    pending = sorted((a.first_offset, a.producer_id) for a in aborted) if aborted else None
    aborting: set[int] = set()
    for _, h in _batch.iter_batches(data):
        if not epochs or epochs[-1][1] != h.partition_leader_epoch:
            epochs.append((h.base_offset, h.partition_leader_epoch))
        last = h
        if pending is None:
            continue
        while pending and pending[0][0] <= h.last_offset:
            aborting.add(heapq.heappop(pending)[1])
        if h.is_control:
            aborting.discard(h.producer_id)
        elif h.is_transactional and h.producer_id in aborting:
            skip.append(h.base_offset)
    if last is None:
        return None, (), frozenset()
    return last.last_offset + 1, tuple(epochs), frozenset(skip)


async def fetch_once(conn: BrokerConnection, cluster: Cluster,
                     offsets: Mapping[TopicPartition, int], *, max_wait_ms: int,
                     min_bytes: int, max_bytes: int, partition_max_bytes: int,
                     isolation_level: int, rack: str | None = "", timeout: float | None = None,
                     epochs: Mapping[TopicPartition, tuple[int, int]] | None = None
                     ) -> dict[TopicPartition, PartitionData]:
    """One Fetch to `conn` for {tp: offset}; returns {tp: PartitionData}."""
    version = fetch_version(conn, cluster, {tp.topic for tp in offsets})
    body = build_request(cluster, offsets, version, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                         max_bytes=max_bytes, partition_max_bytes=partition_max_bytes,
                         isolation_level=isolation_level, rack=rack, epochs=epochs)
    wait = conn.request_timeout + max_wait_ms / 1000.0 if timeout is None else timeout
    resp = await conn.send(ApiKey.FETCH, body, version, timeout=wait)
    return parse_response(cluster, resp, isolation_level == 1)


RETRY_LATER = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.CORRUPT_MESSAGE,
})


class CorruptData(KafkaError):
    """CORRUPT_MESSAGE for fetched bytes: `at` is the bad batch's base offset (None when
    unknown), `before` the records decoded from the batches ahead of it."""

    def __init__(self, tp: TopicPartition, cause: CorruptRecord) -> None:
        super().__init__(ErrorCode.CORRUPT_MESSAGE, f"{tp}: {cause}")
        self.at, self.before = cause.at, cause.before


def decode(data: bytes, tp: TopicPartition, start: int, check_crc: bool = True,
           skip: frozenset[int] = frozenset()) -> Records:
    """Python records of `data` from offset `start`, without the batches based at `skip`;
    corrupt data raises KafkaError."""
    try:
        records: Records = decode_batches(data, tp.topic, tp.partition, start, check_crc, skip)
    except CorruptRecord as e:
        raise CorruptData(tp, e) from None
    return records


def decode_arrow(data: bytes, tp: TopicPartition, start: int, end: int | None,
                 include_headers: bool = True, check_crc: bool = True,
                 skip: frozenset[int] = frozenset()) -> Any:
    """An Arrow RecordBatch of `data`'s records in [start, end), without the batches based at
    `skip`; corrupt data raises KafkaError. Arrow (numpy, pyarrow: most of a second to import)
    is imported here, on first use, so brokers and the CLI, which import the client but never
    decode to Arrow, start without it."""
    from minilog.connector.arrow import decode_to_arrow
    try:
        return decode_to_arrow(data, tp.topic, tp.partition, start, end, include_headers,
                               check_crc, skip)
    except CorruptRecord as e:
        raise CorruptData(tp, e) from None


async def fetch_single(cluster: Cluster, cfg: Config, tp: TopicPartition, offset: int,
                       deadline: float, isolation_level: int = 0) -> PartitionData:
    """Fetch `tp` at `offset` from its leader, retrying stale leaders until `deadline`."""
    while True:
        try:
            await cluster.maybe_refresh([tp.topic])
            err = cluster.topic_error(tp.topic)
            if err is not None:
                raise err
            node = cluster.leader(*tp)
            if node is not None:
                pd = (await fetch_once(
                    await cluster.connection(node), cluster, {tp: offset},
                    max_wait_ms=cfg["fetch.max.wait.ms"], min_bytes=1,
                    max_bytes=cfg["fetch.max.bytes"],
                    partition_max_bytes=cfg["max.partition.fetch.bytes"],
                    isolation_level=isolation_level, rack=cfg["client.rack"])).get(tp)
                if pd is not None and not pd.error:
                    return pd
                if pd is not None and pd.error not in RETRY_LATER:
                    raise KafkaError(pd.error, f"fetching {tp} at offset {offset}")
            cluster.request_update()
        except KafkaError as e:
            fatal = not (e.retriable or isinstance(e, KafkaConnectionError)) or (
                e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and cluster.topic_error(tp.topic))
            if fatal:
                raise
            cluster.request_update()
        if time.monotonic() >= deadline:
            raise KafkaTimeoutError(f"fetching {tp} at offset {offset}: no answer in time")
        await asyncio.sleep(cfg.seconds("retry.backoff.ms"))


async def fetch_range(cluster: Cluster, cfg: Config, tp: TopicPartition, start: int, end: int,
                      timeout: float | None = None, isolation_level: int = 0
                      ) -> AsyncGenerator[tuple[PartitionData, int], None]:
    """Yield (PartitionData, the first offset wanted from it) until [start, end) of `tp` is
    covered: the fetched bytes, undecoded, so that the caller decodes them where it likes.

    The next fetch is in flight while the caller decodes. Raises KafkaError (e.g.
    OFFSET_OUT_OF_RANGE when retention removed part of the range) and KafkaTimeoutError when
    no progress is made for `timeout` seconds (default.api.timeout.ms by default).
    """
    span = cfg.seconds("default.api.timeout.ms") if timeout is None else timeout
    loop = asyncio.get_running_loop()
    pos, deadline = start, time.monotonic() + span

    def fetch(offset: int) -> asyncio.Task[PartitionData]:
        return loop.create_task(fetch_single(cluster, cfg, tp, offset, deadline, isolation_level))
    pending = fetch(start) if start < end else None
    try:
        while pending is not None:
            pd = await pending
            pending = None
            nxt = pd.next_offset
            if nxt is not None and nxt > pos:
                deadline = time.monotonic() + span
                if nxt < end:
                    pending = fetch(nxt)
                yield pd, pos
                pos = min(nxt, end)
            elif time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"offsets {pos}..{end} of {tp} not available "
                                        f"(high watermark {pd.high_watermark})")
            else:
                pending = fetch(pos)
    finally:
        if pending is not None:
            pending.cancel()


async def fetch_range_arrow(cluster: Cluster, cfg: Config, tp: TopicPartition, start: int,
                            end: int, timeout: float | None = None, include_headers: bool = True,
                            isolation_level: int = 0) -> AsyncGenerator[Any, None]:
    """Yield RecordBatches holding the records of `tp` with offsets in [start, end), decoded
    as `fetch_range` yields them (see there)."""
    ranges = fetch_range(cluster, cfg, tp, start, end, timeout, isolation_level)
    try:
        async for pd, pos in ranges:
            batch = decode_arrow(pd.records, tp, pos, end, include_headers, cfg["check.crcs"],
                                 pd.skip)
            if batch.num_rows:
                yield batch
    finally:
        await ranges.aclose()
