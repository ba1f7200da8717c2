"""Writing: Arrow batches from Spark into topics through `Producer.send_arrow`.

The columns are those of Spark's Kafka sink: `value` (string or binary, required), `key`
(string or binary), `topic` (string; the `topic` option overrides it), `partition` (int;
null or absent: the partitioner decides, `kafka.partitioner.class`), `headers`
(array<struct<key string, value binary>>), `timestamp` (the record's CreateTime, SPARK-50160);
other columns are ignored. Each task hands its batches to one producer (kept per worker, see
`clients`), flushes it and checks every record's outcome before it reports success, so a
committed Spark task means acknowledged records. Delivery is at-least-once: a task retried by
Spark writes its records again.
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


def write_batches(batches, options):
    """Send every row of `batches`; return how many once all are acknowledged, or raise the
    first broker error (its name and code in the message) and fail the task."""
    producer = clients.producer(options.client)
    deliveries, rows = [], 0
    try:
        for batch in batches:
            if options.values is not None:
                batch = options.values.encode_batch(batch)
            names = [n for n in batch.schema.names if n.lower() in SINK_COLUMNS]
            batch = batch.select(names).rename_columns([n.lower() for n in names])
            if options.topic is None and batch.column("topic").null_count:
                raise NullTopicError(NULL_TOPIC)
            deliveries.append(producer.send_arrow(batch, topic=options.topic))
            rows += batch.num_rows
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


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options):
        self.options = options

    def write(self, iterator):
        return write_batches(iterator, self.options)


class StreamWriter(DataSourceStreamArrowWriter):
    """Append and Complete output modes (Complete rewrites every row, as Spark's Kafka sink
    does). Update mode: write each micro-batch with `write_each_batch`."""

    def __init__(self, options):
        self.options = options

    def write(self, iterator):
        return write_batches(iterator, self.options)

    def commit(self, messages, batchId):
        pass

    def abort(self, messages, batchId):
        pass
