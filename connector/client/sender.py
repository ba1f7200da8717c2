"""The producer's engine: queued batches per partition, and the task that sends them.

Split from `producer.py` the way the Java client splits RecordAccumulator/Sender from
KafkaProducer: this module owns the state that changes as batches fill, leave, answer and
retry; `producer.py` holds the public faces (async and sync) that feed it.

Ordering with retries: with idempotence, each batch carries a producer id, epoch and
per-partition sequence number fixed when it is first sent, and its encoded bytes are kept so a
retry is byte-identical (the broker drops duplicates). When a batch of a partition fails
retriably, that partition sends nothing more until its in-flight batches have all answered; the
failed ones (and any rejected as out of order behind them) go back to the front of the queue in
sequence order, so records of a partition are written in the order they were sent.

As in the Java client's Sender, batches leave their queue only for a broker whose connection is
already open, and their request is written in the same pass that fixed their sequence numbers:
requests reach the broker in sequence order. (A batch that waited for a connection after its
sequence was fixed could be overtaken by a later one that found the connection open first.)
"""
import asyncio
import collections
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from operator import itemgetter
from typing import Any

from minilog.connector import records as _records
from minilog.connector.compression import CODECS
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request
from minilog.connector.value_column import ValueColumn

from .cluster import STALE_METADATA, Cluster
from .config import Config
from .connection import BrokerConnection, message_class, wait_set
from .delivery import Delivery, complete_futures, fail_futures
from .partitioner import Partitioner
from .producer_batch import Pending, ProducerBatch, Queued, Record, Waiting
from .sequences import MAX_EPOCH, SEQUENCE_ERRORS, PartitionState
from .transactions import Transactions
from .tasks import spawn
from .topic_wait import release_waiting
from .types import KafkaConnectionError, KafkaTimeoutError, Message, TopicPartition

log = logging.getLogger("minilog.client")

_PRODUCE = request(ApiKey.PRODUCE)
_TopicData = message_class(_PRODUCE, "topic_data")
_PartitionData = message_class(_PRODUCE, "topic_data", "partition_data")
_IDEMPOTENCE_WINDOW = 5  # the broker remembers the last five batches per producer/partition
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                     ErrorCode.PRODUCER_FENCED})

_first = itemgetter(0)
COLUMN_PARTITION = -1  # what a queued `ValueColumn` names: `_append_column` picks one


class ProducerCore:
    """Batches, sequence numbers, in-flight accounting and the sender task (loop thread only)."""

    def __init__(self, cfg: Config, idempotence_explicit: bool) -> None:
        self.config = cfg
        self._idempotent = cfg["enable.idempotence"]
        self._idempotence_explicit = idempotence_explicit
        self._cluster = Cluster(cfg, allow_auto_create=cfg["allow.auto.create.topics"])
        self._partitioner = Partitioner(cfg["partitioner"])
        self._codec = CODECS[cfg["compression.type"]]
        self._key_ser, self._value_ser = cfg["key.serializer"], cfg["value.serializer"]
        self._queues: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        self._parts: collections.defaultdict[TopicPartition, PartitionState] = \
            collections.defaultdict(PartitionState)
        self._waiting: collections.defaultdict[str, list[Waiting]] = \
            collections.defaultdict(list)  # by topic
        self._node_in_flight: collections.Counter[int] = collections.Counter()
        self._in_flight: set[ProducerBatch] = set()  # written to a broker, not yet answered
        self._connecting: set[int] = set()  # nodes the sender is opening a connection to
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._unfinished = 0
        self._flushing = 0
        self._pid, self._epoch, self._pid_reset = -1, -1, False
        self._granted_epoch = -1  # the epoch InitProducerId gave; above it, bumped here
        self._tasks: set[asyncio.Task[Any]] = set()
        self._meta_task: asyncio.Task[Any] | None = None
        self._pid_task: asyncio.Task[Any] | None = None
        self._sender: asyncio.Task[None] | None = None
        self._closed = False
        self._error_cb: Callable[[KafkaError], object] | None = cfg["error_cb"]
        self._told_unreachable = False
        # called with (records, bytes) when a batch completes
        self.on_release: Callable[[int, int], object] | None = None
        # read once: these are consulted for every record
        self._batch_size, self._max_request = cfg["batch.size"], cfg["max.request.size"]
        self._delivery_timeout = cfg.seconds("delivery.timeout.ms")
        self._max_block = cfg.seconds("max.block.ms")
        self._max_age = cfg.seconds("metadata.max.age.ms")  # then ask again: partitions added
        self._linger, self._backoff = cfg.seconds("linger.ms"), cfg.seconds("retry.backoff.ms")
        self._max_in_flight = cfg["max.in.flight.requests.per.connection"]
        # (topic, partition) -> its newest batch, open or not: enqueue_many's cache
        self._open: dict[tuple[str, int | None], ProducerBatch] = {}
        # keyless records follow the sticky partition, which enqueue_many reads directly
        self._sticky = self._partitioner.sticky_partitions()
        # keyless records all go to one partition at a time: a column of values may be queued
        self.keyless_sticky = self._sticky is not None  # as batches of rows (send_arrow)
        self._txn: Transactions | None = None  # with a transactional.id: AsyncProducer's

    def enqueue_many(self, pending: collections.deque[Pending]) -> None:
        """Hand over the records `Producer.send` queued: a deque of (topic, partition, record,
        size, future) tuples, consumed in order on the loop thread.

        The same as `enqueue` for each, with the common case inline (no per-record calls): a
        record for a known topic, to a partition given or sticky, that fits the partition's
        open batch. Anything else takes `enqueue`. Nothing this loop relies on changes during
        it except through `enqueue`, after which it checks everything again.
        """
        popleft, get_open, sticky = pending.popleft, self._open.get, self._sticky
        limit, max_request, cluster = self._batch_size, self._max_request, self._cluster
        known: dict[str, list[int] | None] = {}  # metadata cannot change during this call
        n = 0       # records appended inline, added to _unfinished before any other path runs
        # the previous record's partition and open batch
        last_topic: str | None = None
        last_p: int | None = None
        b: ProducerBatch | None = None
        usable = not self._closed and not self._waiting
        try:
            while pending:
                topic, partition, rec, size, fut = popleft()  # a ValueColumn: enqueue's
                p = partition
                if p is None and sticky is not None and rec[1] is None:  # type: ignore[index]
                    p = sticky.get(topic)
                if topic is last_topic and p == last_p:
                    pass  # same batch as the previous record: checked then
                elif usable:
                    b = get_open((topic, p))
                    parts = known.get(topic)
                    if parts is None:
                        parts = known[topic] = cluster.partitions_for(topic)
                    if b is None or b.parts is not parts:  # not checked against this metadata
                        b = None
                    last_topic, last_p = topic, p
                else:
                    b = None
                if b is not None and b.open and b.size + size <= limit and size <= max_request:
                    b.records.append(rec)  # type: ignore[union-attr, arg-type]
                    b.futures.append(fut)
                    b.size += size
                    n += 1
                    if b.size >= limit:
                        b.open = False
                        self._wakeup.set()
                    continue
                if n:
                    self._add_unfinished(n)
                    n = 0
                self.enqueue(topic, partition, rec, size, fut)
                last_topic = None  # enqueue may have changed any of it
                usable = not self._closed and not self._waiting
        finally:
            if n:
                self._add_unfinished(n)

    def enqueue(self, topic: str, partition: int | None, rec: Queued, size: int,
                fut: Delivery) -> None:
        """Hand a prepared record to the core (on the loop thread)."""
        self._add_unfinished(1)
        if size > self._max_request:
            return self._fail([fut], KafkaError(ErrorCode.MESSAGE_TOO_LARGE, (
                f"record of about {size} bytes exceeds max.request.size")), size)
        if self._closed:
            return self._fail([fut], KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                "producer is closed"), size)
        partitions = None if topic in self._waiting else self._cluster.partitions_for(topic)
        if partitions is None:
            deadline = time.monotonic() + self._max_block
            self._waiting[topic].append((partition, rec, fut, size, deadline))
            self._wakeup.set()
            return
        self._append(topic, partition, rec, fut, size, partitions)

    def _add_unfinished(self, n: int) -> None:
        self._unfinished += n
        if self._unfinished > 0:
            self._idle.clear()

    def _append(self, topic: str, partition: int | None, rec: Queued, fut: Delivery,
                size: int, partitions: list[int]) -> None:
        """Add the record to its partition's open batch; `partitions`: its topic's, known."""
        if isinstance(rec, ValueColumn):
            return self._append_column(topic, rec, fut, size, partitions)
        if partition is None:
            partition = self._partitioner.partition(
                topic, rec[1], partitions, self._cluster.available_partitions(topic))
        elif partition not in partitions:
            return self._fail([fut], KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (
                f"partition {partition} of {topic!r} does not exist "
                f"(it has {len(partitions)})")), size)
        b = self._open.get((topic, partition))
        limit = self._batch_size
        if b is None or not b.open or b.size + size > limit:
            b = self._new_batch(topic, partition, partitions)
        else:
            b.parts = partitions  # the partition is valid in this metadata too
        b.records.append(rec)  # type: ignore[union-attr]  # an open batch's are a list
        b.futures.append(fut)
        b.size += size
        if b.size >= limit:
            b.open = False
            self._wakeup.set()

    def _append_column(self, topic: str, rows: ValueColumn, share: Delivery, size: int,
                       partitions: list[int]) -> None:
        """A column's rows (send_arrow, ~batch.size) are a closed batch of their own."""
        b = self._new_batch(topic, self._partitioner.partition(
            topic, None, partitions, self._cluster.available_partitions(topic)), partitions)
        b.records, b.futures, b.size, b.open = rows, [share], size, False
        self._add_unfinished(len(rows) - 1)  # enqueue counted the rows as one

    def _new_batch(self, topic: str, partition: int, partitions: list[int]) -> ProducerBatch:
        """A new open batch for the partition, queued; the one open before is closed."""
        key = (topic, partition)
        b = self._open.get(key)
        if b is not None:
            b.open = False
        tp = TopicPartition(topic, partition)
        q = self._queues.get(tp)
        if q is None:
            q = self._queues[tp] = collections.deque()
        now = time.monotonic()
        b = self._open[key] = ProducerBatch(tp, now, now + self._delivery_timeout, partitions)
        q.append(b)
        self._wakeup.set()
        return b

    # ---- the sender ----------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._wakeup.clear()
            try:
                delay = self._drain(time.monotonic())
            except Exception:  # a bug here must not silently stop all deliveries
                log.exception("producer sender failed; retrying")
                delay = self._backoff
            if delay is not None and delay <= 0:
                await asyncio.sleep(0)
            else:
                await wait_set(self._wakeup, delay)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return spawn(coro, self._tasks)

    def _drain(self, now: float) -> float | None:
        """Send every ready batch we may send; return seconds until the next thing to do."""
        cluster, backoff = self._cluster, self._backoff
        wake: list[float] = []
        if self._waiting or cluster.needs_refresh or now - cluster.last_refresh > self._max_age:
            if self._meta_task is None:
                self._meta_task = self._spawn(self._refresh_metadata())
            wake.append(backoff)
        if self._idempotent and (self._pid < 0 or self._pid_reset):
            if self._txn is not None:  # init_transactions gets the id and epoch
                self._expire_queued(now)
                return backoff
            if self._pid_task is None and not any(self._node_in_flight.values()):
                self._pid_task = self._spawn(self._init_producer_id())
            self._expire_queued(now)
            return backoff if self._pid_task is None else None
        linger, max_in_flight, max_request = self._linger, self._max_in_flight, self._max_request
        # node -> (batches, its open connection), and the bytes of those batches
        by_node: dict[int, tuple[list[ProducerBatch], BrokerConnection]] = {}
        sizes: dict[int, int] = {}
        q: collections.deque[ProducerBatch] | None
        for tp, q in list(self._queues.items()):
            if not q:
                del self._queues[tp]
                continue
            b = q[0]
            if b.deadline <= now:
                self._expire_queued(now)
                q = self._queues.get(tp)
                if not q:
                    continue
                b = q[0]
            ready_at = b.created + linger
            if b.open and ready_at > now and not self._flushing and not self._closed:
                wake.append(ready_at - now)
                continue
            if b.retry_at > now:
                wake.append(b.retry_at - now)
                continue
            part = self._parts[tp]
            if part.retry or (self._idempotent and part.in_flight >= _IDEMPOTENCE_WINDOW):
                continue  # woken when in-flight batches answer
            if self._idempotent and not part.settle(b, self._epoch):
                if not (part.restart and not part.in_flight and self._bump_epoch(tp, part, q)):
                    continue  # woken when in-flight batches answer
            if self._txn is not None and not self._txn.ready(tp):
                continue  # woken once AddPartitionsToTxn answers
            node = cluster.leader(tp.topic, tp.partition)
            if node is None:
                cluster.request_update()
                wake.append(backoff)
                continue
            if self._node_in_flight[node] >= max_in_flight:
                continue
            request = by_node.get(node)
            if request is None:
                conn = self._ready_connection(node)
                if conn is None:  # woken when it is open (or failed to open)
                    wake.append(b.deadline - now)
                    continue
                request = by_node[node] = ([], conn)
                sizes[node] = 0
            elif sizes[node] + b.size > max_request:
                continue
            q.popleft()
            b.open = False
            self._seal(b, part)
            request[0].append(b)
            sizes[node] += len(b.data)
            self._partitioner.batch_sent(tp.topic, tp.partition,
                                         cluster.available_partitions(tp.topic))
        for node, (batches, conn) in by_node.items():
            self._node_in_flight[node] += 1
            for b in batches:
                self._parts[b.tp].in_flight += 1
            self._in_flight.update(batches)
            self._send(node, conn, batches)
        if by_node:
            return 0  # more batches of the same partitions may be ready: look again
        return min(wake) if wake else None

    def _seal(self, b: ProducerBatch, part: PartitionState) -> None:
        """Fix the batch's sequence and bytes at its first send; retries resend the same bytes
        (unless its partition started over: see `sequences.py`)."""
        if b.data is not None and b.pid == self._pid:
            return
        if self._idempotent:
            b.base_sequence = part.take(len(b.records))
        b.pid, b.epoch = self._pid, part.epoch if self._idempotent else -1
        b.data = _records.encode_batch(
            b.records, compression=self._codec, producer_id=self._pid,
            producer_epoch=b.epoch, base_sequence=b.base_sequence if self._idempotent else -1,
            transactional=self._txn is not None)

    def _bump_epoch(self, tp: TopicPartition, part: PartitionState,
                    queue: Iterable[ProducerBatch]) -> bool:
        """KIP-360: `tp` lost sequence numbers: a new epoch, its batches numbered from 0.
        True when it may send now; False when the epoch is exhausted (a new producer id)."""
        if self._txn is not None:  # only the coordinator may bump a transactional epoch
            self._txn.failed(KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                        f"sequence numbers of {tp} lost"))
            return False
        if self._epoch >= MAX_EPOCH:
            self._pid_reset = True
            return False
        self._epoch += 1
        log.info("producer %d: sequence numbers of %s lost (last acknowledged %d, next %d): "
                 "epoch bumped to %d, sequences restart at 0", self._pid, tp, part.last_acked,
                 part.next_sequence, self._epoch)
        part.start_over(self._epoch, queue)
        return True

    def _ready_connection(self, node: int) -> BrokerConnection | None:
        """The open connection to `node`, or None while the sender opens one."""
        conn = self._cluster.connected(node)
        if conn is None and node not in self._connecting:
            self._connecting.add(node)
            self._spawn(self._connect(node))
        return conn

    async def _connect(self, node: int) -> None:
        try:
            await self._cluster.connection(node)
        except KafkaError as e:
            log.debug("connecting to broker %s failed: %s", node, e)
            self._unreachable(e)
            for tp, q in self._queues.items():  # what delivery.timeout.ms expiry will report
                if self._cluster.leader(tp.topic, tp.partition) == node:
                    for b in q:
                        b.last_error = e
            await asyncio.sleep(self._backoff)
        finally:
            self._connecting.discard(node)
            self._wakeup.set()

    def _send(self, node: int, conn: BrokerConnection, batches: list[ProducerBatch]) -> None:
        """Write one Produce request now, then await its answer in a task."""
        cfg = self.config
        acks = cfg["acks"]
        by_topic: dict[str, list[Message]] = {}
        for b in batches:
            by_topic.setdefault(b.tp.topic, []).append(
                _PartitionData(index=b.tp.partition, records=b.data))
        body = _PRODUCE.cls(transactional_id=self._txn and self._txn.transactional_id, acks=acks, timeout_ms=cfg["request.timeout.ms"],
                            topic_data=[_TopicData(name=t, partition_data=p)
                                        for t, p in by_topic.items()])
        corr, fut, err = 0, None, None  # no request, no future: err says why
        try:
            corr, fut = conn.write_request(ApiKey.PRODUCE, body, expect_response=acks != 0)
            for b in batches:
                b.attempts += 1
        except KafkaError as e:
            err = e
        self._spawn(self._produce(node, conn, batches, corr, fut, err))

    async def _produce(self, node: int, conn: BrokerConnection, batches: list[ProducerBatch],
                       corr: int, fut: "asyncio.Future[Message] | None",
                       err: KafkaError | None) -> None:
        resp = None
        try:
            if fut is not None:
                resp = await conn.wait_response(corr, fut, ApiKey.PRODUCE)
        except KafkaError as e:
            err = e
            self._unreachable(e)
        finally:
            self._node_in_flight[node] -= 1
        results: dict[tuple[str, int], Message] = {}
        if resp is not None:
            for t in resp.responses:
                for p in t.partition_responses:
                    results[(t.name, p.index)] = p
        for b in batches:
            if b not in self._in_flight:
                continue  # already failed by close
            self._in_flight.discard(b)
            self._parts[b.tp].in_flight -= 1
            if err is not None:
                self._on_error(b, err.code, str(err), err)
            elif resp is None:  # acks=0: written is all we will ever know
                self._complete(b, -1, -1)
            else:
                p = results.get(b.tp)
                if p is None:
                    self._on_error(b, ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for partition")
                elif p.error_code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    self._complete(b, p.base_offset if not p.error_code else -1,
                                   p.log_append_time_ms)
                else:
                    msg = p.error_message or "; ".join(
                        e.batch_index_error_message or "" for e in p.record_errors or ())
                    self._on_error(b, p.error_code, msg)
            self._requeue_retries(b.tp)
        self._wakeup.set()

    def _on_error(self, b: ProducerBatch, code: int, message: str,
                  exc: KafkaError | None = None) -> None:
        part = self._parts[b.tp]
        code = ErrorCode(code)
        exc = exc if exc is not None else KafkaError(code, f"{b.tp}: {message}" if message else str(b.tp))
        b.last_error = exc
        if code in STALE_METADATA or isinstance(exc, KafkaConnectionError):
            self._cluster.request_update()
        if self._idempotent and code in SEQUENCE_ERRORS:
            retriable = part.retry_sequence_error(code, b) or (
                code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and part.retry)
        elif self._idempotent and code in _FENCED and b.pid == self._pid and \
                b.epoch is not None and b.epoch > self._granted_epoch:
            # a broker that does not take an epoch bumped by the client (no KIP-360): the
            # batch was refused, so it is safe to send again under a new producer id
            self._pid_reset = retriable = True
        else:
            retriable = exc.retriable or isinstance(exc, KafkaConnectionError)
        if retriable and b.attempts <= self.config["retries"] and time.monotonic() < b.deadline:
            part.retry.append(b)
            return
        if self._idempotent:
            if code in _FENCED:
                self._pid_reset = True  # fenced: a new producer id, sequences from 0
            part.lost(b)
        self._fail(b.futures, exc, b.size, len(b.records))

    def _requeue_retries(self, tp: TopicPartition) -> None:
        part = self._parts[tp]
        if part.retry and part.in_flight == 0:
            retry = sorted(part.retry, key=lambda x: (x.base_sequence or 0, x.created))
            part.retry = []
            at = time.monotonic() + self._backoff
            q = self._queues.setdefault(tp, collections.deque())
            for b in reversed(retry):
                b.retry_at = at
                q.appendleft(b)

    def _expire_queued(self, now: float) -> None:
        for tp, q in self._queues.items():
            while q and q[0].deadline <= now:
                b = q.popleft()
                b.open = False  # no longer queued: enqueue_many must not append to it
                if b.data is not None and self._idempotent:
                    self._parts[tp].lost(b)  # sent before: its sequences may be a gap now
                why = f"; last error: {b.last_error}" if b.last_error else ""
                self._fail(b.futures, KafkaTimeoutError(
                    f"{len(b.records)} record(s) for {tp} expired after "
                    f"{self.config['delivery.timeout.ms']} ms (delivery.timeout.ms){why}"),
                    b.size, len(b.records))

    async def _refresh_metadata(self) -> None:
        try:
            await self._cluster.maybe_refresh(list(self._waiting))
        except KafkaError as e:
            log.debug("metadata refresh failed: %s", e)
            self._unreachable(e)
        finally:
            self._meta_task = None
        ready, expired = release_waiting(self._waiting, self._cluster, time.monotonic(),
                                         self.config["max.block.ms"])
        for topic, partitions, records in ready:
            for partition, rec, fut, size, _ in records:
                self._append(topic, partition, rec, fut, size, partitions)
        for (_, _, fut, size, _), err in expired:
            self._fail([fut], err, size)
        self._wakeup.set()

    async def _init_producer_id(self) -> None:
        req = request(ApiKey.INIT_PRODUCER_ID).cls(transactional_id=None, transaction_timeout_ms=60000)
        try:
            conn = await self._cluster.any_connection()
            resp = await conn.send(ApiKey.INIT_PRODUCER_ID, req)
            if resp.error_code:
                raise KafkaError(resp.error_code, "InitProducerId")
            self._set_producer_id(resp.producer_id, resp.producer_epoch)
        except KafkaError as e:
            if e.code == ErrorCode.UNSUPPORTED_VERSION and not self._idempotence_explicit:
                log.warning("broker has no InitProducerId: sending without idempotence")
                self._idempotent = False
            elif not e.retriable and not isinstance(e, KafkaConnectionError):
                self._fail_everything(e)
            else:
                log.debug("InitProducerId failed, will retry: %s", e)
        finally:
            self._pid_task = None
            self._wakeup.set()

    def _set_producer_id(self, pid: int, epoch: int) -> None:
        self._pid, self._epoch, self._pid_reset = pid, epoch, False
        self._granted_epoch = self._epoch
        for part in self._parts.values():
            part.reset(self._epoch)  # nothing in flight: queued retries are renumbered
        self._wakeup.set()

    def _unreachable(self, exc: KafkaError) -> None:
        """Tell `error_cb` (confluent-kafka's setting) once per outage that a broker cannot be
        reached: the records wait and are retried until delivery.timeout.ms, and an
        application (the CLI, as kcat does) can say so at once rather than after it."""
        if self._error_cb is None or self._told_unreachable or \
                not isinstance(exc, KafkaConnectionError):
            return
        self._told_unreachable = True
        try:
            self._error_cb(exc)
        except Exception:  # noqa: BLE001 - the application's callback: never stops sending
            log.exception("error_cb failed")

    # ---- completion ----------------------------------------------------------------------
    def _complete(self, b: ProducerBatch, base_offset: int, log_append_time: int | None) -> None:
        """The batch is written: every record's future succeeds, all in one pass
        (`delivery.complete_futures`)."""
        records, futures = b.records, b.futures
        b.base_offset, b.log_append_time = base_offset, log_append_time
        self._told_unreachable = False  # delivered: the next outage is news again
        if self._idempotent:
            self._parts[b.tp].acked(b)
        if log_append_time is None or log_append_time < 0:
            b.timestamps = [records.timestamp] * len(records) \
                if isinstance(records, ValueColumn) else list(map(_first, records))
        # the futures may outlive the batch: keep only what RecordMetadata needs
        del b.records, b.futures
        b.data = None
        complete_futures(futures, b)
        self._finished(len(records), b.size)

    def _fail(self, futures: list[Delivery], exc: KafkaError, size: int, n: int = 1) -> None:
        if self._txn is not None:
            self._txn.failed(exc)
        fail_futures(futures, exc)
        self._finished(n, size)

    def _finished(self, n: int, size: int) -> None:
        self._unfinished -= n
        if self._unfinished <= 0:
            self._idle.set()
        if self.on_release is not None:
            self.on_release(n, size)

    def _fail_everything(self, exc: KafkaError) -> None:
        """Fail every record not yet acknowledged: queued, waiting for a retry, written and
        awaiting an answer, or waiting for metadata (the Java client's abortIncompleteBatches)."""
        retrying = [b for part in self._parts.values() for b in part.retry]
        for part in self._parts.values():
            part.retry, part.in_flight = [], 0
        in_flight, self._in_flight = self._in_flight, set()
        for b in [*(b for q in self._queues.values() for b in q), *retrying, *in_flight]:
            b.open = False
            self._fail(b.futures, exc, b.size, len(b.records))
        self._queues.clear()
        self._open.clear()
        for waits in self._waiting.values():
            for _, _, fut, size, _ in waits:
                self._fail([fut], exc, size)
        self._waiting.clear()
