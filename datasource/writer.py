"""Writing: Arrow batches from Spark into topics through `Producer.send_arrow`.

The columns are those of Spark's Kafka sink: `value` (string or binary, required), `key`
(string or binary), `topic` (string; the `topic` option overrides it), `partition` (int;
null or absent: the partitioner decides, `kafka.partitioner.class`), `headers`
(array<struct<key string, value binary>>), `timestamp` (the record's CreateTime, SPARK-50160);
other columns are ignored. Each task hands its batches to one producer (kept per worker, see
`clients`), flushes it and checks every record's outcome before it reports success, so a
committed Spark task means acknowledged records. Delivery is at-least-once by default: a task
retried by Spark writes its records again. With `deliveryGuarantee` = `exactly-once` each task
writes in a transaction that the driver commits (`transactional.py`).
"""
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

from minilog.connector.client import KafkaError

from . import clients
from .errors import OptionError
from .transactional import (
    Completer,
    completer_for,
    new_batch_prefix,
    new_run,
    write_id,
    write_prepared,
)

SINK_COLUMNS = ("key", "value", "topic", "partition", "headers", "timestamp")
# Spark's KafkaWriteTask, word for word, with the column named.
NULL_TOPIC = ("null topic present in the data (the 'topic' column). Use the topic option for "
              "setting a topic.")
_HEADERS = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


def check_sink_schema(schema, options):
    """Spark's Kafka sink checks, on the driver: one message naming the column at fault."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    text_or_binary = (StringType(), BinaryType())
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found")
    if options.values is None and fields["value"] not in text_or_binary:
        raise OptionError(f"value attribute type must be a string or binary, not "
                          f"{fields['value'].simpleString()}")
    if options.values is not None and not isinstance(fields["value"], StructType):
        raise OptionError(f"value attribute type must be a struct with valueFormat "
                          f"{options.values.kind}, not {fields['value'].simpleString()}")
    if "key" in fields and fields["key"] not in text_or_binary:
        raise OptionError(f"key attribute type must be a string or binary, not "
                          f"{fields['key'].simpleString()}")
    if options.topic is None:
        if "topic" not in fields:
            raise OptionError("topic option required when no 'topic' attribute is present. "
                              "Use the topic option for setting a topic.")
        if fields["topic"] != StringType():
            raise OptionError(f"topic attribute type must be a string, not "
                              f"{fields['topic'].simpleString()}")
    if "partition" in fields and fields["partition"] != IntegerType():
        raise OptionError(f"partition attribute type must be an int, not "
                          f"{fields['partition'].simpleString()}")
    if "timestamp" in fields and not isinstance(fields["timestamp"], TimestampType):
        raise OptionError(f"timestamp attribute type must be a timestamp, not "
                          f"{fields['timestamp'].simpleString()}")
    if "headers" in fields and fields["headers"].simpleString() != _HEADERS.simpleString():
        raise OptionError(f"headers attribute type must be {_HEADERS.simpleString()}, not "
                          f"{fields['headers'].simpleString()}")


class NullTopicError(ValueError):
    """A row has a null `topic` and no `topic` option is set."""


@dataclass
class Written(WriterCommitMessage):
    records: int


def send_rows(producer, batches, options):
    """Hand every row of `batches` to `producer`: (deliveries, rows, first topic written)."""
    deliveries, rows, topic = [], 0, options.topic
    for batch in batches:
        if options.values is not None:
            batch = options.values.encode_batch(batch)
        names = [n for n in batch.schema.names if n.lower() in SINK_COLUMNS]
        batch = batch.select(names).rename_columns([n.lower() for n in names])
        if options.topic is None and batch.column("topic").null_count:
            raise NullTopicError(NULL_TOPIC)
        if topic is None and batch.num_rows:
            topic = batch.column("topic")[0].as_py()
        deliveries.append(producer.send_arrow(batch, topic=options.topic))
        rows += batch.num_rows
    return deliveries, rows, topic


def write_batches(batches, options):
    """Send every row of `batches`; return how many once all are acknowledged, or raise the
    first broker error (its name and code in the message) and fail the task."""
    producer = clients.producer(options.client)
    try:
        deliveries, rows, _ = send_rows(producer, batches, options)
        producer.flush()
        for d in deliveries:
            d.result(0)
    except NullTopicError:
        clients.release(producer)  # the data is at fault, not the producer
        raise
    except KafkaError as e:
        clients.discard(producer)
        raise RuntimeError(f"minilog sink: {e}") from e
    clients.release(producer)
    return Written(rows)


def write(batches, options, batch_prefix=None, run=""):
    """A task's write, as `deliveryGuarantee` asks."""
    if not options.exactly_once:
        return write_batches(batches, options)
    try:
        return write_prepared(batches, options, lambda p, b: send_rows(p, b, options),
                              batch_prefix, run)
    except KafkaError as e:
        raise RuntimeError(f"minilog sink: {e}") from e


class BatchWriter(DataSourceArrowWriter):
    """`df.write`: with exactly-once, one transaction per task, all committed by the driver's
    `commit(messages)` once every task has succeeded (none, on `abort`), after the write's
    prepared set is recorded: the write is whole or absent, even if the driver dies."""

    def __init__(self, options):
        self.options = options
        self.batch_prefix = new_batch_prefix()
        self.run = new_run()

    def write(self, iterator):
        return write(iterator, self.options, self.batch_prefix, self.run)

    def commit(self, messages):
        prefix = self.options.transactional_id_prefix
        _complete(self.options, lambda c: c.commit_write(
            messages, write_id(prefix, self.batch_prefix, self.run), prefix))

    def abort(self, messages):
        _complete(self.options, lambda c: c.abort(messages))


def _complete(options, step):
    if options.exactly_once:
        completer = Completer(options.client)
        try:
            step(completer)
        finally:
            completer.close()


class StreamWriter(DataSourceStreamArrowWriter):
    """Append and Complete output modes (Complete rewrites every row, as Spark's Kafka sink
    does). Update mode: write each micro-batch with `write_each_batch`. Spark makes one
    instance when the query starts (the tasks' copy: `run` tags their transactional ids) and
    one more for every commit."""

    def __init__(self, options):
        self.options = options
        self.batch_prefix = new_batch_prefix()
        self.run = new_run()

    def write(self, iterator):
        return write(iterator, self.options, self.batch_prefix, self.run)

    def commit(self, messages, batchId):
        if self.options.exactly_once:
            completer_for(self.options.client, self.options.transactional_id_prefix).commit(
                messages, batchId)

    def abort(self, messages, batchId):
        if self.options.exactly_once:
            completer_for(self.options.client, self.options.transactional_id_prefix).abort(
                messages, batchId)
