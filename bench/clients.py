"""The clients under test, driven the same way: confluent-kafka (librdkafka) and minilog's own.

All get the same Kafka settings (`producer_config`), the same records (partitions taken
round-robin so every partition gets the same share: one `produce`/`send` call per record, or
one `send_arrow` batch for minilog's bulk path) and the same stop condition (`flush`
returned: every record acknowledged). Reads count rows until a target.
"""
import time

# One configuration for both producers: Kafka names that librdkafka and minilog both accept.
PRODUCER = {"acks": 1, "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none"}
CLIENTS = ("confluent", "minilog")
PRODUCE_CLIENTS = (*CLIENTS, "minilog-arrow")  # the produce benchmark adds our bulk path


def producer_config(bootstrap, **overrides):
    cfg = {"bootstrap.servers": bootstrap, **PRODUCER}
    cfg.update({k.replace("_", "."): v for k, v in overrides.items()})
    return cfg


class _Confluent:
    def __init__(self, cfg):
        import confluent_kafka
        self.p = confluent_kafka.Producer({**cfg, "log_level": 3,
                                           "queue.buffering.max.messages": 1_000_000})

    def produce(self, topic, value, n, partitions):
        produce, poll = self.p.produce, self.p.poll
        for i in range(n):
            try:
                produce(topic, value, partition=i % partitions)
            except BufferError:
                poll(0.005)
                produce(topic, value, partition=i % partitions)
        left = self.p.flush(60)
        if left:
            raise RuntimeError(f"confluent-kafka: {left} record(s) not delivered in 60 s")

    def close(self):
        self.p.flush(10)


class _Minilog:
    def __init__(self, cfg):
        from minilog.connector.client import Producer
        self.p = Producer(cfg)

    def produce(self, topic, value, n, partitions):
        send = self.p.send
        last = None
        for i in range(n):
            last = send(topic, value, partition=i % partitions)
        left = self.p.flush(60)
        if left:
            raise RuntimeError(f"minilog client: {left} record(s) not delivered in 60 s")
        if last is not None:
            last.result(0)  # raises the delivery error, if any

    def close(self):
        self.p.close(10)


class _MinilogArrow(_Minilog):
    """minilog's bulk path, `send_arrow`: the same records as one pyarrow batch (value and
    partition columns), as the Spark sink will hand them over. Building the batch is the
    caller's work (Spark gives it ready-made), so `prepare` does it before the clock starts."""

    _shape = _batch = None

    def prepare(self, topic, value, n, partitions):
        if self._shape != (value, n, partitions):
            import pyarrow as pa
            self._batch = pa.record_batch(
                [pa.array([value] * n, pa.binary()),
                 pa.array([i % partitions for i in range(n)], pa.int32())],
                names=["value", "partition"])
            self._shape = (value, n, partitions)

    def produce(self, topic, value, n, partitions):
        self.prepare(topic, value, n, partitions)
        fut = self.p.send_arrow(self._batch, topic=topic)
        left = self.p.flush(60)
        if left:
            raise RuntimeError(f"minilog client (send_arrow): {left} record(s) not delivered")
        fut.result(0)  # raises the first delivery error, if any


def producer(client, cfg):
    """A producer of `client` (one of PRODUCE_CLIENTS) with `produce(topic, value, n, parts)`."""
    return {"confluent": _Confluent, "minilog": _Minilog, "minilog-arrow": _MinilogArrow}[client](cfg)


def timed_produce(prod, topic, value, n, partitions):
    """Seconds to send `n` records of `value` and have them all acknowledged."""
    prepare = getattr(prod, "prepare", None)
    if prepare is not None:
        prepare(topic, value, n, partitions)
    t0 = time.perf_counter()
    prod.produce(topic, value, n, partitions)
    return time.perf_counter() - t0


def value_of(size):
    """A record value of `size` bytes (fixed, not all zeros)."""
    return (bytes(range(256)) * (size // 256 + 1))[:size]


# ---- reading ---------------------------------------------------------------------------------

def read_confluent(bootstrap, topic, partitions, total, timeout=60.0, settings=None):
    """Seconds for confluent-kafka's consumer (batch `consume`) to return `total` records;
    `settings`: more client settings (security.protocol and its ssl.*/sasl.*)."""
    import confluent_kafka
    c = confluent_kafka.Consumer({
        **(settings or {}),
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "log_level": 3, "enable.partition.eof": False,
        # librdkafka's defaults stop prefetching at 100k queued messages and back off for up
        # to 1 s (154k records/s of 100 B here); these make it 4x faster: the baseline at its best.
        "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 0})
    try:
        got, t0 = 0, time.perf_counter()
        c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = t0 + timeout
        while got < total:
            msgs = c.consume(num_messages=10_000, timeout=0.5)
            # No per-record Python work on either side: a bad read shows as a timeout.
            if msgs and msgs[-1].error() is not None:
                raise RuntimeError(f"confluent-kafka consumer: {msgs[-1].error()}")
            got += len(msgs)
            if time.perf_counter() > deadline:
                raise TimeoutError(f"confluent-kafka read {got} of {total} records")
        return time.perf_counter() - t0
    finally:
        c.close()


def _minilog_consumer(bootstrap, settings=None):
    from minilog.connector.client import Consumer
    return Consumer({**(settings or {}), "bootstrap.servers": bootstrap,
                     "auto.offset.reset": "earliest"})


def read_minilog(bootstrap, topic, partitions, total, arrow, timeout=60.0, settings=None):
    """Seconds for minilog's consumer to hand out `total` records: Python records from `poll`
    (`arrow` False) or pyarrow RecordBatches from `poll_arrow` (`arrow` True). `settings`:
    more client settings (isolation.level)."""
    from minilog.connector.client import TopicPartition
    c = _minilog_consumer(bootstrap, settings)
    try:
        got, t0 = 0, time.perf_counter()
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, 0)  # as confluent-kafka's assign at offset 0: no offset lookup
        deadline = t0 + timeout
        while got < total:
            if arrow:
                got += sum(b.num_rows for b in c.poll_arrow(0.5))
            else:
                got += len(c.poll(0.5, max_records=10_000))
            if time.perf_counter() > deadline:
                raise TimeoutError(f"minilog consumer read {got} of {total} records")
        return time.perf_counter() - t0
    finally:
        c.close()


def read_minilog_range(bootstrap, topic, partitions, total, timeout=60.0):
    """Seconds for `fetch_range_arrow` (the Spark executors' path) over [0, end) of each
    partition, partitions one after another; checks that `total` rows came back."""
    from minilog.connector.client import TopicPartition
    c = _minilog_consumer(bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = c.end_offsets(tps)
        got, t0 = 0, time.perf_counter()
        for tp in tps:
            for batch in c.fetch_range_arrow(tp, 0, ends[tp], timeout=timeout):
                got += batch.num_rows
        elapsed = time.perf_counter() - t0
        if got != total:
            raise RuntimeError(f"fetch_range_arrow returned {got} rows, expected {total}")
        return elapsed
    finally:
        c.close()
