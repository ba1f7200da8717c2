"""`format("minilog")` on a replicated three-broker cluster: the sink's writes are acknowledged
by the in-sync replicas, and a streaming query carries on through the `kill -9` of a partition
leader, reading every record once (the tests of test_stream.py run on three brokers too)."""
from sparktools import consume_all, create_topic, produce, unique, wait_for

from minilog.jobs.pipeline import start_query

KILL_AFTER, TOTAL = 60, 160


def test_batch_write_to_replicated_topics_lands_on_every_replica(spark, three_brokers):
    c = three_brokers
    topic = create_topic(c.bootstrap, unique("sink-rf3"), 3)
    rows = [(f"k{i}", f"v{i}", i % 3) for i in range(60)]
    (spark.createDataFrame(rows, "key string, value string, partition int").write
     .format("minilog").option("kafka.bootstrap.servers", c.bootstrap).option("topic", topic)
     .option("kafka.acks", "all").mode("append").save())
    got = consume_all(c.bootstrap, topic, 3, 60)
    assert sorted((p, k, v) for p, _, k, v, _ in got) == sorted(
        (i % 3, f"k{i}".encode(), f"v{i}".encode()) for i in range(60))
    for p, (_, replicas, isr) in c.partitions(topic).items():
        assert sorted(replicas) == [1, 2, 3] and isr == [1, 2, 3], (p, replicas, isr)


def test_streaming_query_reads_through_the_kill_of_a_partition_leader(spark, own_three_brokers,
                                                                     tmp_path):
    c = own_three_brokers
    topic = create_topic(c.bootstrap, unique("failover"), 2)
    half = TOTAL // 2
    produce(c.bootstrap, topic, [(i % 2, None, f"{i}".encode(), None) for i in range(half)])
    out = tmp_path / "out"
    query = start_query(
        spark.readStream.format("minilog").option("kafka.bootstrap.servers", c.bootstrap)
        .option("subscribe", topic).option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20").load()
        .selectExpr("partition", "offset", "cast(value as string) as value")
        .writeStream.format("parquet").option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds"))
    try:
        wait_for(lambda: rows_read(query) >= KILL_AFTER or query.exception(),
                 "the query to read its first batches")
        leader = c.partitions(topic)[0][0]
        c.broker(leader).kill()  # kill -9, mid-query
        produce(c.bootstrap, topic, [(i % 2, None, f"{i}".encode(), None)
                                     for i in range(half, TOTAL)])
        wait_for(lambda: rows_read(query) >= TOTAL or query.exception(),
                 "the query to read every record after the failover", deadline=180)
        assert query.exception() is None, query.exception()
        assert c.partitions(topic)[0][0] != leader  # the leadership did move
    finally:
        query.stop()
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(int(r.value) for r in rows) == list(range(TOTAL))  # each once
    for p in (0, 1):  # in order, with dense offsets, per partition
        mine = sorted((r.offset, int(r.value)) for r in rows if r.partition == p)
        assert [o for o, _ in mine] == list(range(TOTAL // 2))
        assert [v for _, v in mine] == sorted(v for _, v in mine)


def rows_read(query):
    return sum(p["numInputRows"] for p in query.recentProgress)
