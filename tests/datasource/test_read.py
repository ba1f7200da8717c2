"""`spark.read.format("minilog")`: batch reads of exactly the produced records, with Spark's
Kafka source options and schema, against a real broker and a real local Spark session."""
import datetime

import pytest
from chispa import assert_df_equality
from sparktools import create_topic, produce, unique

from minilog.datasource import MinilogDataSource, kafka_schema

ROWS = 30  # per partition


@pytest.fixture(scope="module")
def topic(broker):
    """Three partitions of known records: key k<p>-<i>, value v<p>-<i>, one header."""
    name = create_topic(broker.bootstrap, unique("read"), 3)
    produce(broker.bootstrap, name, [(p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode(),
                                      [("n", str(i).encode())])
                                     for p in range(3) for i in range(ROWS)])
    return name


def expected(spark, topic, include_headers, parts=range(3), offsets=range(ROWS)):
    rows = [(f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), topic, p, i)
            + (([(("n", str(i).encode()))],) if include_headers else ())
            for p in parts for i in offsets]
    cols = "key binary, value binary, topic string, partition int, offset long"
    if include_headers:
        cols += ", headers array<struct<key:string,value:binary>>"
    return spark.createDataFrame(rows, cols)


@pytest.mark.parametrize("bootstrap_option", ["kafka.bootstrap.servers", "bootstrap.servers"])
def test_batch_read_returns_exactly_the_produced_records(spark, broker, topic, bootstrap_option):
    df = (spark.read.format("minilog").option(bootstrap_option, broker.bootstrap)
          .option("subscribe", topic).option("includeHeaders", "true").load())
    assert df.schema == kafka_schema(include_headers=True)
    got = df.select("key", "value", "topic", "partition", "offset", "headers")
    assert_df_equality(got, expected(spark, topic, True), ignore_row_order=True,
                       ignore_nullable=True)
    stamps = df.select("timestamp", "timestampType").collect()
    now = datetime.datetime.now()
    assert all(abs((r.timestamp - now).total_seconds()) < 3600 and r.timestampType == 0
               for r in stamps)


def test_schema_without_headers_is_sparks(spark, broker, topic):
    df = (spark.read.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).load())
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert df.count() == 3 * ROWS


def test_offsets_json_and_assign_select_a_range(spark, broker, topic):
    df = (spark.read.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("assign", f'{{"{topic}": [1]}}')
          .option("startingOffsets", f'{{"{topic}": {{"1": 5}}}}')
          .option("endingOffsets", f'{{"{topic}": {{"1": 12}}}}').load())
    got = df.select("key", "value", "topic", "partition", "offset")
    assert_df_equality(got, expected(spark, topic, False, [1], range(5, 12)),
                       ignore_row_order=True, ignore_nullable=True)


def test_pattern_and_min_partitions_split_ranges(spark, broker, topic):
    df = (spark.read.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribePattern", topic.replace("-", ".")[:-3] + ".*")
          .option("minPartitions", "7").load())
    assert df.rdd.getNumPartitions() >= 7
    got = df.select("key", "value", "topic", "partition", "offset")
    assert_df_equality(got, expected(spark, topic, False), ignore_row_order=True,
                       ignore_nullable=True)


def test_starting_timestamp_reads_from_the_first_record_at_or_after_it(spark, broker):
    name = create_topic(broker.bootstrap, unique("ts"), 1)
    produce(broker.bootstrap, name, [(0, None, b"old", None, 1_700_000_000_000),
                                     (0, None, b"new", None, 1_700_000_002_000)])
    def reader():
        return (spark.read.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", name))
    df = reader().option("startingTimestamp", "1700000001000").load()
    assert [(r.value, r.timestamp.timestamp()) for r in df.collect()] == [
        (b"new", 1_700_000_002.0)]
    by_partition = reader().option("startingOffsetsByTimestamp",
                                 f'{{"{name}": {{"0": 1700000000000}}}}').load()
    assert [r.value for r in by_partition.collect()] == [b"old", b"new"]


def test_explicit_registration_still_works(spark, broker, topic):
    spark.dataSource.register(MinilogDataSource)
    df = (spark.read.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).load())
    assert df.count() == 3 * ROWS


def test_deleted_records_fail_the_read_or_are_skipped(spark, broker):
    from minilog.connector.client import AdminClient
    name = create_topic(broker.bootstrap, unique("lost"), 1)
    produce(broker.bootstrap, name, [(0, None, str(i).encode(), None) for i in range(20)])
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.delete_records({(name, 0): 8})
    def reader():
        return (spark.read.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
                .option("subscribe", name).option("startingOffsets", f'{{"{name}": {{"0": 2}}}}'))
    with pytest.raises(Exception, match=rf"{name}-0: offsets 2 to 7 were deleted"):
        reader().load().collect()
    rows = reader().option("failOnDataLoss", "false").load().collect()
    assert [r.offset for r in rows] == list(range(8, 20))
