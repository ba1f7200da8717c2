"""`format("minilog")`: the Python DataSource tying options, readers and writers together.

Spark calls `schema`, `reader`, `streamReader`, `writer` and `streamWriter` on the driver, so
every option is checked there, before a task runs (`options.py`).
"""
from pyspark.sql.datasource import DataSource
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .errors import OptionError
from .options import sink_options, source_options
from .reader import BatchReader
from .stream import RefusedStreamReader, StreamReader
from .writer import BatchWriter, StreamWriter, check_sink_schema

# Spark's KafkaSourceProvider.createRelation refuses Overwrite and Ignore with this message.
SAVE_MODES = ("Save mode {mode} not allowed for minilog, as for Kafka. Allowed save modes are "
              "Append and ErrorIfExists (Spark's default, which Spark refuses for Python data "
              "sources: use .mode(\"append\")).")
HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()),
                                     StructField("value", BinaryType())]))


def kafka_schema(include_headers=False, value_type=BinaryType()):
    """The schema of Spark's Kafka source (`value_type` differs only with valueFormat)."""
    fields = [StructField("key", BinaryType()), StructField("value", value_type),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class MinilogDataSource(DataSource):
    """Topics of a Kafka-compatible cluster (minilog or any other) as a Spark source and sink,
    with the options and schema of Spark's `format("kafka")`."""

    @classmethod
    def name(cls):
        return "minilog"

    def _source(self, streaming):
        return source_options(self.options, streaming)

    def schema(self):
        options = source_options(self.options, streaming=None)
        return kafka_schema(options.include_headers,
                            options.values.spark_type if options.values else BinaryType())

    def _check_schema(self, schema, options):
        expected = kafka_schema(options.include_headers,
                                options.values.spark_type if options.values else BinaryType())
        if schema.simpleString() != expected.simpleString():
            raise OptionError("The minilog source has a fixed schema and cannot be set with a "
                              f"custom one: {expected.simpleString()}")

    def reader(self, schema):
        options = self._source(streaming=False)
        self._check_schema(schema, options)
        return BatchReader(options)

    def streamReader(self, schema):
        try:
            options = self._source(streaming=True)
            self._check_schema(schema, options)
        except OptionError as e:
            # pyspark's source runner calls reader.stop() in a `finally` after streamReader:
            # raising here adds its UnboundLocalError to the message. Fail at the first call.
            return RefusedStreamReader(e)
        return StreamReader(options)

    def writer(self, schema, overwrite):
        if overwrite:
            raise OptionError(SAVE_MODES.format(mode="Overwrite"))
        options = sink_options(self.options)
        check_sink_schema(schema, options)
        return BatchWriter(options)

    def streamWriter(self, schema, overwrite):
        options = sink_options(self.options)
        check_sink_schema(schema, options)
        return StreamWriter(options)
