"""`df.write.format("minilog")` and `df.writeStream.format("minilog")`: rows land in the right
topics and partitions with keys and headers intact, read back with confluent-kafka."""
import pytest
from sparktools import consume_all, create_topic, produce, run_available_now, unique

from minilog.datasource import write_each_batch
from minilog.jobs.pipeline import start_query

ROWS_SCHEMA = ("key string, value binary, partition int, "
               "headers array<struct<key:string,value:binary>>")


def test_batch_write_lands_in_the_given_partitions_with_keys_and_headers(spark, broker):
    topic = create_topic(broker.bootstrap, unique("sink"), 3)
    rows = [(f"k{i}", f"v{i}".encode(), i % 3, [("n", str(i).encode()), ("s", b"spark")])
            for i in range(30)]
    (spark.createDataFrame(rows, ROWS_SCHEMA).write.format("minilog")
     .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
     .mode("append").save())
    got = consume_all(broker.bootstrap, topic, 3, 30)
    assert sorted((p, k, v, h) for p, _, k, v, h in got) == sorted(
        (i % 3, f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode()), ("s", b"spark")])
        for i in range(30))


def test_topic_column_routes_rows_and_keys_pick_partitions_like_kafka(spark, broker):
    a = create_topic(broker.bootstrap, unique("route-a"), 4)
    b = create_topic(broker.bootstrap, unique("route-b"), 1)
    rows = [(a if i % 2 else b, f"user-{i % 5}", f"{i}") for i in range(40)]
    (spark.createDataFrame(rows, "topic string, key string, value string").write
     .format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
     .mode("append").save())
    in_a = consume_all(broker.bootstrap, a, 4, 20)
    assert len(in_a) == 20 and len(consume_all(broker.bootstrap, b, 1, 20)) == 20
    partition_of = {}
    for p, _, k, _, _ in in_a:  # one key, one partition (the murmur2 partitioner)
        assert partition_of.setdefault(k, p) == p


def test_streaming_write_copies_a_topic(spark, broker, tmp_path):
    src = create_topic(broker.bootstrap, unique("copy-src"), 2)
    dst = create_topic(broker.bootstrap, unique("copy-dst"), 2)
    produce(broker.bootstrap, src, [(i % 2, f"k{i}".encode(), f"v{i}".encode(),
                                     [("h", str(i).encode())]) for i in range(50)])
    df = (spark.readStream.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", src).option("startingOffsets", "earliest")
          .option("includeHeaders", "true").option("maxOffsetsPerTrigger", "20").load()
          .selectExpr("key", "value", "headers", "partition"))
    run_available_now(df, tmp_path / "ck", sink="minilog", topic=dst,
                      **{"kafka.bootstrap.servers": broker.bootstrap})
    got = consume_all(broker.bootstrap, dst, 2, 50)
    assert sorted((p, k, v, h) for p, _, k, v, h in got) == sorted(
        (i % 2, f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode())])
        for i in range(50))


def test_update_mode_aggregation_writes_through_write_each_batch(spark, broker, tmp_path):
    src = create_topic(broker.bootstrap, unique("agg-src"), 2)
    dst = create_topic(broker.bootstrap, unique("agg-dst"), 1)
    produce(broker.bootstrap, src, [(i % 2, f"acct-{i % 3}".encode(), str(i).encode(), None)
                                    for i in range(30)])
    totals = (spark.readStream.format("minilog")
              .option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", src)
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "10").load()
              .selectExpr("CAST(key AS STRING) AS key", "CAST(CAST(value AS STRING) AS INT) AS n")
              .groupBy("key").sum("n")
              .selectExpr("key", "CAST(`sum(n)` AS STRING) AS value"))
    q = start_query(totals.writeStream.outputMode("update")
                    .foreachBatch(write_each_batch({"kafka.bootstrap.servers": broker.bootstrap,
                                                    "topic": dst}))
                    .option("checkpointLocation", str(tmp_path / "ck"))
                    .trigger(availableNow=True))
    assert q.awaitTermination(240)
    assert q.exception() is None
    got = consume_all(broker.bootstrap, dst, 1, 3)
    last = {}
    for _, _, k, v, _ in got:  # the newest update per key, as a compacted topic keeps it
        last[k.decode()] = int(v)
    assert last == {f"acct-{a}": sum(i for i in range(30) if i % 3 == a) for a in range(3)}
    assert len(got) > 3  # several micro-batches, each writing the keys it updated


def test_a_broker_error_fails_the_task_with_its_name(spark, broker):
    topic = create_topic(broker.bootstrap, unique("small"), 1, {"max.message.bytes": "2000"})
    df = spark.createDataFrame([("x" * 5000,)], "value string")
    with pytest.raises(Exception, match="MESSAGE_TOO_LARGE"):
        (df.write.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", topic).mode("append").save())
