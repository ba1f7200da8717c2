"""The Spark benchmark's baselines: code that runs in Spark's Python workers.

- `synthetic`: a Python DataSource yielding ready Arrow batches from memory, in the schema of
  Spark's Kafka source and with the batch sizes minilog's fetches give: the ceiling of any
  Python source on this Spark, the cost of Spark alone.
- `naive`: the source a user would write on confluent-kafka: `consume()` in each task,
  one tuple per record.
- `minilog_nopool`: `format("minilog")` under another name, which `bench.spark` registers with
  `MINILOG_CLIENT_POOL=0` in its workers' environment: the per-worker client pool turned off.
- `confluent_writer`: a `foreachPartition` writer on confluent-kafka's Producer, what
  a user writes by hand without a sink.

Spark pickles these by value (`register_pickle_by_value`), so the workers need not import the
`bench` package (their working directory is not the repository's).
"""
import datetime
import json
import time

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from minilog.connector.arrow import spark_kafka_schema
from minilog.datasource import MinilogDataSource, kafka_schema


class _OneBatchStream(DataSourceStreamReader):
    """All of the data in one micro-batch: offsets are {"read": 0} then {"read": 1}, the tasks
    are `parts`, read by `read_part`."""

    def __init__(self, parts, read_part):
        self.parts, self.read_part = parts, read_part

    def initialOffset(self):
        return {"read": 0}

    def latestOffset(self, start, limit):
        return {"read": 1}

    def partitions(self, start, end):
        return self.parts if start != end else []

    def read(self, partition):
        return self.read_part(partition)


class _Part(InputPartition):
    def __init__(self, topic, partition, end, sizes=()):
        self.topic, self.partition, self.end, self.sizes = topic, partition, end, tuple(sizes)


def _parts(options):
    """The tasks, from the option `parts`: JSON [[partition, end offset, [rows per batch]]]."""
    return [_Part(options["topic"], p, end, sizes)
            for p, end, sizes in json.loads(options["parts"])]


class _Baseline(DataSource):
    """A baseline source: Spark's Kafka schema, everything in one micro-batch, each task's
    rows from the function `read_part()` returns."""

    def schema(self):
        return kafka_schema()

    def streamReader(self, schema):
        return _OneBatchStream(_parts(self.options), self.read_part())


# ---- synthetic: Arrow batches from memory ------------------------------------------------------

_made = {}  # per worker: (topic, partition, sizes, value size) -> [RecordBatch]


def synthetic_batches(topic, partition, sizes, value_size):
    """The batches of one partition: offsets from 0, a `value_size`-byte value, null key; made
    once per worker process and kept, so a timed read only hands them over."""
    key = (topic, partition, tuple(sizes), value_size)
    if key not in _made:
        batches, offset = [], 0
        for n in sizes:
            batches.append(_batch(topic, partition, offset, n, value_size))
            offset += n
        _made[key] = batches
    return _made[key]


def _batch(topic, partition, offset, n, value_size):
    value = (bytes(range(256)) * (value_size // 256 + 1))[:value_size]
    text = topic.encode()
    return pa.RecordBatch.from_arrays([
        pa.nulls(n, pa.binary()),
        pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
            np.arange(n + 1, dtype=np.int32) * value_size), pa.py_buffer(value * n)]),
        pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(
            np.arange(n + 1, dtype=np.int32) * len(text)), pa.py_buffer(text * n)]),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(np.arange(offset, offset + n, dtype=np.int64)),
        pa.array(np.full(n, 1_700_000_000_000_000, np.int64)).cast(pa.timestamp("us", "UTC")),
        pa.array(np.zeros(n, np.int32)),
    ], schema=spark_kafka_schema(False))


class SyntheticSource(_Baseline):
    """Options `topic`, `parts` (see `_parts`), `valueSize`."""

    @classmethod
    def name(cls):
        return "bench_synthetic"

    def read_part(self):
        size = int(self.options["valueSize"])
        return lambda part: iter(synthetic_batches(part.topic, part.partition, part.sizes, size))


class MinilogWithoutPool(MinilogDataSource):
    @classmethod
    def name(cls):
        return "minilog_nopool"


# ---- naive: confluent-kafka consume(), one tuple per record -------------------------------------

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def naive_read(bootstrap, topic, partition, end):
    """Tuples of one partition's records [0, end), read with confluent-kafka's `consume()`."""
    import confluent_kafka
    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench-naive", "enable.auto.commit": False,
        "log_level": 3, "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 0})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, partition, 0)])
        pos, deadline = 0, time.monotonic() + 300
        while pos < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"naive source read {pos} of {end} records of {topic}")
            for m in c.consume(num_messages=10_000, timeout=1.0):
                if m.error() is not None:
                    raise RuntimeError(f"confluent-kafka consumer: {m.error()}")
                if m.offset() >= end:
                    return
                kind, ms = m.timestamp()
                yield (m.key(), m.value(), m.topic(), m.partition(), m.offset(),
                       _EPOCH + datetime.timedelta(milliseconds=ms), kind - 1)
                pos = m.offset() + 1
    finally:
        c.close()


class NaiveSource(_Baseline):
    """Options `bootstrap`, `topic`, `parts` (the rows per batch are not used)."""

    @classmethod
    def name(cls):
        return "bench_naive"

    def read_part(self):
        bootstrap = self.options["bootstrap"]
        return lambda part: naive_read(bootstrap, part.topic, part.partition, part.end)


# ---- writing by hand: foreachPartition on confluent-kafka's Producer ---------------------------

def confluent_writer(bootstrap, topic, config):
    """A `foreachPartition` function sending each row's `value` to `topic` (producer settings
    `config`), then flushing and failing the task on any delivery error."""

    def write_partition(rows):
        import confluent_kafka
        errors = []
        p = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "log_level": 3, **config,
            "queue.buffering.max.messages": 1_000_000,
            # delivery reports for failures only: checked, at no per-record cost
            "delivery.report.only.error": True, "on_delivery": lambda err, _m: errors.append(err)})
        for row in rows:
            try:
                p.produce(topic, row.value)
            except BufferError:
                p.poll(0.05)
                p.produce(topic, row.value)
        left = p.flush(60)
        if left or errors:
            raise RuntimeError(f"confluent-kafka: {left} undelivered, errors {errors[:3]}")
    return write_partition
