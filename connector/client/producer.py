"""The producer's public faces: `AsyncProducer` for asyncio code, `Producer` for scripts.

One asyncio core does the work (`sender.py`: batching per partition, idempotent pipelined
sends, retries that keep order); `Producer` runs it on a background event-loop thread and hands
records over in bulk, so a script's `send` costs a deque append, not a thread round trip.
Records wait in one open batch per partition until it is full (`batch.size`), `linger.ms`
passes, or a flush asks. Errors are never swallowed: every record's future ends with a
RecordMetadata or the KafkaError that stopped it.
"""
import asyncio
import collections
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import pairwise, repeat
from time import time_ns as _time_ns
from typing import Any, Protocol, Self, TypeVar

from minilog.connector.protocol import ErrorCode, KafkaError
from minilog.connector.records import _pause_gc
from minilog.connector.value_column import ValueColumn

from . import exit_flush
from .config import Config
from .connection import LoopThread, wait_set
from .delivery import BulkDelivery, BulkShare, DeliveryFuture, _SentFuture, fail_futures
from .producer_batch import Pending, Record
from .sender import COLUMN_PARTITION, ProducerCore
from .transactions import PreparedTxnState, Transactions
from .value_pieces import value_pieces
from .types import KafkaTimeoutError, RecordMetadata

T = TypeVar("T")
log = logging.getLogger("minilog.client")
# a record's headers when it has none (records are internal: any sequence)
_NO_HEADERS: tuple[tuple[str, bytes | None], ...] = ()
_BULK_CHUNK_BYTES = 1 << 20  # send_arrow hands records over in pieces of about this size
# columns that make `send_arrow` take the per-record path (a value column alone takes the other)
_COLUMN_EXTRAS = frozenset({"key", "partition", "headers", "timestamp"})

__all__ = ["AsyncProducer", "DeliveryFuture", "Producer"]

# Keys, values and headers are the application's: whatever its serializers take (bytes or str
# without one), so they are typed Any where they come in.
Headers = dict[str, Any] | Iterable[tuple[Any, Any]] | None
# pyarrow has no type information: its arrays, tables and batches are Any here.


class _Outcome(Protocol):
    """What a delivery callback reads of its future (an asyncio one or a DeliveryFuture)."""
    def exception(self) -> BaseException | None: ...
    def result(self) -> RecordMetadata: ...


# The application's `on_delivery(error, metadata)`
OnDelivery = Callable[[BaseException | None, RecordMetadata | None], object]


class _Positioned(Protocol):
    """A TopicPartition-like object with an offset (confluent-kafka's TopicPartition)."""
    topic: str
    partition: int
    offset: int


def _to_bytes(v: Any, what: str) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"{what} must be bytes, str or None (or set {what}.serializer), "
                    f"got {type(v).__name__}")


def _binary_column(column: Any) -> tuple[list[Any], Any]:
    """A pyarrow binary or string column: (a list of its values, None for nulls; their
    lengths, 0 for nulls, as an Arrow array).

    Values over 1 KB on average come as memoryviews of the column's own data buffer, not
    bytes copies: the batch encoder reads any buffer, and a fresh copy of megabytes of values
    costs more than the rest of the hand-over.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary() if pa.types.is_string(column.type) else pa.large_binary())
    elif not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        raise TypeError(f"key and value columns must be binary or string, not {column.type}")
    lengths = pc.fill_null(pc.binary_length(column), 0)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    if not n or column.nbytes < 1024 * n:
        return column.to_pylist(), lengths
    _, offsets, data = column.buffers()
    width = 8 if pa.types.is_large_binary(column.type) else 4
    ends = memoryview(offsets).cast("q" if width == 8 else "i")[column.offset:column.offset + n + 1]
    data = memoryview(data) if data is not None else memoryview(b"")
    out: list[memoryview | None] = [data[a:b] for a, b in pairwise(ends)]
    if column.null_count:
        for i, ok in enumerate(column.is_valid().to_pylist()):
            if not ok:
                out[i] = None
    return out, lengths


def _headers(headers: Headers) -> Sequence[tuple[str, bytes | None]]:
    if not headers:
        return _NO_HEADERS
    items = headers.items() if isinstance(headers, dict) else headers
    return [(str(k), _to_bytes(v, "header value")) for k, v in items]


class AsyncProducer(ProducerCore):
    """The asyncio producer. `await start()` (or `async with`), `await send(...)` returns an
    asyncio future of RecordMetadata, `await flush()`, `await close()`."""

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        explicit = "enable.idempotence" in (config or {}) or "enable.idempotence" in overrides
        super().__init__(cfg := Config("producer", config, **overrides), explicit)
        if cfg["transactional.id"] is not None:
            self._txn = Transactions(self, cfg["transactional.id"],
                                     cfg["transaction.timeout.ms"],
                                     cfg["transaction.two.phase.commit.enable"])

    async def start(self) -> Self:
        """Reach the cluster (fails fast when no bootstrap server answers) and start sending."""
        await self._cluster.refresh()
        self._sender = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- accepting records -------------------------------------------------------------
    def prepare(self, topic: str, value: Any, key: Any, partition: int | None,
                timestamp: float | None, headers: Headers) -> tuple[Record, int]:
        """Validate and serialize one record (in the caller's thread): (record, size)."""
        if not isinstance(topic, str) or not topic:
            raise TypeError("topic must be a non-empty string")
        if self._closed:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "producer is closed")
        if self._txn is not None:
            self._txn.check_send()
        if self._key_ser is None and self._value_ser is None and not headers and \
                timestamp is None and (value is None or value.__class__ is bytes) and \
                (key is None or key.__class__ is bytes):  # the common case: nothing to convert
            return (_time_ns() // 1_000_000, key, value, _NO_HEADERS), \
                24 + (len(key) if key else 0) + (len(value) if value else 0)
        key = _to_bytes(self._key_ser(key, topic) if self._key_ser else key, "key")
        value = _to_bytes(self._value_ser(value, topic) if self._value_ser else value, "value")
        hdrs = _headers(headers) if headers else _NO_HEADERS
        ts = _time_ns() // 1_000_000 if timestamp is None else int(timestamp)
        size = 24 + (len(key) if key else 0) + (len(value) if value else 0)
        for k, v in hdrs:
            size += len(k) + 8 + (len(v) if v else 0)
        return (ts, key, value, hdrs), size

    async def send(self, topic: str, value: Any = None, key: Any = None,
                   partition: int | None = None, timestamp: float | None = None,
                   headers: Headers = None, on_delivery: OnDelivery | None = None
                   ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; returns an asyncio future of its RecordMetadata.

        `on_delivery(error, metadata)` is called too, once, with error None on success.
        """
        rec, size = self.prepare(topic, value, key, partition, timestamp, headers)
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        if on_delivery is not None:
            fut.add_done_callback(_callback_adapter(on_delivery))
        self.enqueue(topic, partition, rec, size, fut)
        return fut

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None,
                            **kwargs: Any) -> RecordMetadata:
        return await (await self.send(topic, value, key, **kwargs))

    # ---- flush, close, introspection -----------------------------------------------------
    async def flush(self, timeout: float | None = None) -> int:
        """Send everything queued now, and wait until every record is acknowledged or failed.

        Returns the number of records still undelivered when `timeout` (seconds) ran out.
        """
        self._flushing += 1
        self._wakeup.set()
        try:
            await wait_set(self._idle, timeout)
        finally:
            self._flushing -= 1
        return max(self._unfinished, 0)

    async def close(self, timeout: float | None = None) -> None:
        """Flush (within `timeout`), then fail what is left and release connections."""
        if self._sender is None or self._closed:
            self._closed = True
            self._cluster.close()
            return
        remaining = await self.flush(timeout)
        self._closed = True
        self._fail_everything(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, (
            f"producer closed with {remaining} record(s) undelivered")))
        for task in [self._sender, *self._tasks]:
            task.cancel()
        await asyncio.gather(self._sender, *self._tasks, return_exceptions=True)
        self._cluster.close()

    # ---- transactions (transactional.id set): confluent-kafka's methods ---------------------
    def _transactions(self) -> Transactions:
        if self._txn is None:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE, "the producer has no transactional.id")
        return self._txn

    async def init_transactions(self, timeout: float | None = None,
                                keep_prepared_txn: bool = False) -> None:
        await self._transactions().init_transactions(self._api_timeout(timeout),
                                                     keep_prepared_txn)

    async def complete_transaction(self, prepared: PreparedTxnState,
                                   timeout: float | None = None) -> None:
        """KIP-939: commit the kept transaction if `prepared` names it, else abort it."""
        await self._transactions().complete_transaction(prepared, self._api_timeout(timeout))

    def begin_transaction(self) -> None:
        self._transactions().begin_transaction()

    async def send_offsets_to_transaction(
            self, offsets: Mapping[Any, Any] | Iterable[_Positioned], group_metadata: object,
            timeout: float | None = None) -> None:
        """`offsets`: {(topic, partition): next offset} or a list of TopicPartition-like
        objects with `.offset`; `group_metadata`: the consumer's `consumer_group_metadata()`
        (or a group id)."""
        await self._transactions().send_offsets_to_transaction(
            _offsets_dict(offsets), group_metadata, self._api_timeout(timeout))

    async def prepare_transaction(self, timeout: float | None = None) -> PreparedTxnState:
        """KIP-939: flush the transaction and leave it open; its PreparedTxnState."""
        return await self._transactions().prepare_transaction(self._api_timeout(timeout))

    async def commit_transaction(self, timeout: float | None = None) -> None:
        await self._transactions().commit_transaction(self._api_timeout(timeout))

    async def abort_transaction(self, timeout: float | None = None) -> None:
        await self._transactions().abort_transaction(self._api_timeout(timeout))

    def _api_timeout(self, timeout: float | None) -> float:
        return self.config.seconds("default.api.timeout.ms") if timeout is None else timeout

    async def partitions_for(self, topic: str) -> list[int] | None:
        await self._cluster.maybe_refresh([topic])
        err = self._cluster.topic_error(topic)
        if err is not None:
            raise err
        return self._cluster.partitions_for(topic)


async def _call(fn: Callable[[], T]) -> T:
    return fn()


def _offsets_dict(offsets: Mapping[Any, Any] | Iterable[_Positioned]) -> Mapping[Any, Any]:
    if isinstance(offsets, dict):
        return offsets
    return {(tp.topic, tp.partition): tp.offset for tp in offsets}


def _callback_adapter(on_delivery: OnDelivery) -> Callable[[_Outcome], None]:
    def call(fut: _Outcome) -> None:
        exc = fut.exception()
        on_delivery(exc, None if exc is not None else fut.result())
    return call


def _millis(column: Any, now: int) -> list[int]:
    """Epoch milliseconds of a timestamp (or integer milliseconds) column, `now` for nulls."""
    import pyarrow as pa
    import pyarrow.compute as pc
    if pa.types.is_timestamp(column.type):
        per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[column.type.unit]
        ints = column.cast(pa.int64())
        column = pc.multiply(ints, 1000) if per_ms is None else pc.divide(ints, per_ms)
    millis: list[int] = pc.fill_null(column.cast(pa.int64()), now).to_pylist()
    return millis


class Producer:
    """Synchronous producer for scripts: `send` queues and returns a DeliveryFuture at once.

    Delivery callbacks and futures complete on the producer's background thread.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **overrides: Any) -> None:
        self._core = AsyncProducer(config, **overrides)
        self._loop = LoopThread("minilog-producer")
        self._pending: collections.deque[Pending] = collections.deque()
        self._scheduled = False
        self._space = threading.Event()
        self._reserved = self._released = 0
        self._limit = self._core.config["buffer.memory"]
        self._core.on_release = self._release
        # send's inline path: no serializers, and open (close() clears it: then prepare raises)
        self._plain = self._core._key_ser is None and self._core._value_ser is None and \
            self._core._txn is None  # a transactional send checks the transaction first
        try:
            self._loop.run(self._core.start())
        except BaseException:
            self._loop.stop()
            raise
        self._pid = os.getpid()
        exit_flush.track(self)  # never closed by the script: flushed briefly at exit

    @property
    def config(self) -> Config:
        return self._core.config

    def close_at_exit(self, timeout: float) -> int:
        """The interpreter exits with this producer open (exit_flush): flush up to `timeout`,
        close; how many records were left undelivered. Nothing in a forked child, whose copy
        of the producer has no thread to run it."""
        if self._loop.loop.is_closed() or self._pid != os.getpid() or \
                not self._loop.running:
            return 0
        left = self.flush(timeout)
        self.close(0)
        return left

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             timestamp: float | None = None, headers: Headers = None,
             on_delivery: OnDelivery | None = None) -> DeliveryFuture:
        """Queue one record. Returns a DeliveryFuture (`.result(timeout)` -> RecordMetadata).

        `on_delivery(error, metadata)` runs on the producer thread when the outcome is known.
        Blocks up to max.block.ms while buffer.memory is exhausted.
        """
        if value.__class__ is bytes and key is None and timestamp is None and not headers and \
                self._plain and topic.__class__ is str and topic:
            # prepare's common case, inline: one call less per record
            rec: Record = (_time_ns() // 1_000_000, None, value, _NO_HEADERS)
            size = 24 + len(value)
        else:
            rec, size = self._core.prepare(topic, value, key, partition, timestamp, headers)
        fut: _SentFuture = _SentFuture()
        fut._watch = None if on_delivery is None else [_callback_adapter(on_delivery)]
        # Lock-free: this thread only adds to `_reserved`, the loop thread only to `_released`.
        if self._reserved - self._released + size > self._limit:
            self._wait_for_space(size)
        self._reserved += size
        self._pending.append((topic, partition, rec, size, fut))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._hand_over)
        return fut

    def send_arrow(self, batch: Any, topic: str | None = None) -> BulkDelivery:
        """Queue every row of a pyarrow RecordBatch or Table; returns a `BulkDelivery`
        (`.result(timeout)` -> the row count, or the first error).

        The columns are those of Spark's Kafka sink: `value` (binary or string, required),
        `key` (binary or string), `topic` (string; the `topic` argument, when given, overrides
        it, as Spark's `topic` option does), `partition` (int; null or absent: the
        partitioner decides), `headers` (list of struct<key string, value binary>), `timestamp`
        (a timestamp or epoch milliseconds: the record's CreateTime; null or absent: now,
        as Spark's Kafka sink, SPARK-50160). Strings are
        sent as UTF-8; the key and value serializers are not applied. One hand-over and one
        future for the whole batch: the per-record cost of `send` is mostly its future.
        """
        import pyarrow.compute as pc  # here, not at import: pyarrow costs a script using send
        names = batch.schema.names
        if "value" not in names:
            raise ValueError("send_arrow needs a 'value' column")
        n = batch.num_rows
        if topic is not None and not _COLUMN_EXTRAS.intersection(names) and \
                self._core.keyless_sticky:
            # values only, to one topic: queued as column slices, no tuple per record
            self._core.prepare(topic, None, None, None, None, None)  # checks the name once
            return self._send_values(batch.column("value"), topic)
        values, sizes = _binary_column(batch.column("value"))
        keys: Iterable[Any]
        topics: list[Any] | None
        hdrs: Iterable[Sequence[tuple[str, bytes | None]]]
        if "key" in names:
            keys, key_sizes = _binary_column(batch.column("key"))
            sizes = pc.add(sizes, key_sizes)
        else:
            keys = repeat(None, n)
        if topic is not None:
            topics = None
            self._core.prepare(topic, None, None, None, None, None)  # checks the name once
        elif "topic" in names:
            topics = batch.column("topic").to_pylist()
            for t in set(topics):
                self._core.prepare(t, None, None, None, None, None)
        else:
            raise ValueError("send_arrow needs a 'topic' column or the topic argument")
        partitions = batch.column("partition").to_pylist() if "partition" in names else None
        headers = batch.column("headers").to_pylist() if "headers" in names else None
        fut = BulkDelivery(n)
        sizes = pc.add(sizes, 24).to_pylist()  # as `prepare` counts: 24 + key + value (+ headers)
        hdrs = repeat(_NO_HEADERS, n)
        if headers is not None:
            hdrs = [[(h["key"], h["value"]) for h in row] if row else _NO_HEADERS
                    for row in headers]
            for i, row in enumerate(hdrs):
                for k, v in row:
                    sizes[i] += len(k) + 8 + (len(v) if v else 0)
        now = _time_ns() // 1_000_000
        stamps = _millis(batch.column("timestamp"), now) if "timestamp" in names else \
            repeat(now, n)
        recs = zip(stamps, keys, values, hdrs)
        paused = _pause_gc()  # 2n tuples that can free nothing: no collections meanwhile
        try:
            pending = list(zip(repeat(topic, n) if topics is None else topics,
                               repeat(None, n) if partitions is None else partitions,
                               recs, sizes, repeat(fut, n)))
        finally:
            if paused:
                gc.enable()
        # Handed over a megabyte at a time: the sender starts on the first while the rest
        # follows, and buffer.memory holds back a big batch as it does single sends.
        step = max(1, n * _BULK_CHUNK_BYTES // max(sum(sizes), 1))
        for i in range(0, n, step):
            self._queue_bulk(pending[i:i + step], sum(sizes[i:i + step]))
        return fut

    def _queue_bulk(self, entries: Sequence[Pending], size: int) -> None:
        """Queue a bulk send's entries (`size` bytes of buffer.memory, waited for) for the
        loop thread's next hand-over; `send` does the same inline for one record."""
        if self._reserved - self._released + size > self._limit:
            self._wait_for_space(size)
        self._reserved += size
        self._pending.extend(entries)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._hand_over)

    def _send_values(self, column: Any, topic: str) -> BulkDelivery:
        """`send_arrow` of a value column alone: its rows cut into pieces of about batch.size
        bytes (as `send` counts them), each a `ValueColumn` the loop thread makes one batch of."""
        fut = BulkDelivery(len(column))
        now = _time_ns() // 1_000_000
        for array, pieces in value_pieces(column, self._core.config["batch.size"]):
            for start, count, size in pieces:
                self._queue_bulk([(topic, COLUMN_PARTITION, ValueColumn(
                    array, start, count, now), size, BulkShare(fut, count))], size)
        return fut

    def _hand_over(self) -> None:
        self._scheduled = False  # before draining: a record appended later schedules again
        self._core.enqueue_many(self._pending)

    def _wait_for_space(self, size: int) -> None:
        """Block (up to max.block.ms) until `size` more bytes fit in buffer.memory; a record
        larger than all of it goes when nothing else is buffered."""
        if self._reserved - self._released + size > self._limit and \
                self._reserved > self._released:
            if self._loop.in_loop_thread:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 "buffer.memory full inside a delivery callback")
            wait = self._core.config.seconds("max.block.ms")
            deadline = time.monotonic() + wait
            while self._reserved - self._released + size > self._limit and \
                    self._reserved > self._released:
                self._space.clear()
                if self._reserved - self._released + size <= self._limit:
                    break
                left = deadline - time.monotonic()
                if left <= 0 or not self._space.wait(left):
                    raise KafkaTimeoutError(f"buffer.memory full for {wait * 1000:g} ms "
                                            "(max.block.ms): the brokers are not keeping up")

    def _release(self, n: int, size: int) -> None:
        self._released += size
        self._space.set()

    def flush(self, timeout: float | None = None) -> int:
        """Wait until every queued record is delivered or failed; return how many are left."""
        async def flush() -> int:
            self._hand_over()
            return await self._core.flush(timeout)
        return self._loop.run(flush())

    def partitions_for(self, topic: str) -> list[int] | None:
        return self._loop.run(self._core.partitions_for(topic))

    # ---- transactions: confluent-kafka's methods (see connector/client/transactions.py) ----
    def init_transactions(self, timeout: float | None = None,
                          keep_prepared_txn: bool = False) -> None:
        self._loop.run(self._core.init_transactions(timeout, keep_prepared_txn))

    def complete_transaction(self, prepared: PreparedTxnState,
                             timeout: float | None = None) -> None:
        self._loop.run(self._core.complete_transaction(prepared, timeout))

    def begin_transaction(self) -> None:
        self._loop.run(_call(self._core.begin_transaction))

    def send_offsets_to_transaction(
            self, offsets: Mapping[Any, Any] | Iterable[_Positioned], group_metadata: object,
            timeout: float | None = None) -> None:
        self._loop.run(self._core.send_offsets_to_transaction(offsets, group_metadata, timeout))

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTxnState:
        async def prepare() -> PreparedTxnState:
            self._hand_over()
            return await self._core.prepare_transaction(timeout)
        return self._loop.run(prepare())

    def commit_transaction(self, timeout: float | None = None) -> None:
        async def commit() -> None:
            self._hand_over()
            await self._core.commit_transaction(timeout)
        self._loop.run(commit())

    def abort_transaction(self, timeout: float | None = None) -> None:
        async def abort() -> None:
            self._hand_over()
            await self._core.abort_transaction(timeout)
        self._loop.run(abort())

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to `timeout` seconds), fail whatever is left, stop the thread."""
        if self._loop.loop.is_closed():
            return
        self._plain = False
        async def close() -> None:
            self._hand_over()
            await self._core.close(timeout)
        try:
            self._loop.run(close())
        finally:
            self._loop.stop()
            self._fail_unhanded()
            exit_flush.untrack(self)

    def _fail_unhanded(self) -> None:
        """Fail records a `send` in another thread queued after close's last hand-over."""
        exc = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "producer is closed")
        while self._pending:
            fail_futures([self._pending.popleft()[4]], exc)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
