"""Reads that find nothing: an empty topic, a topic with some empty partitions, a pattern that
matches no topic, and a topic that does not exist, batch and streaming, as Spark's Kafka source
treats them (0 rows; a missing subscribed or assigned topic named in a batch read's error)."""
import pytest
from sparktools import create_topic, produce, run_available_now, unique, wait_for


def batch(spark, bootstrap, **options):
    reader = spark.read.format("minilog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def stream(spark, bootstrap, **options):
    reader = (spark.readStream.format("minilog").option("kafka.bootstrap.servers", bootstrap)
              .option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.fixture(scope="module")
def empty(broker):
    """Three partitions, no record."""
    return create_topic(broker.bootstrap, unique("empty"), 3)


@pytest.fixture(scope="module")
def partly_empty(broker):
    """Three partitions, records in partition 1 only."""
    name = create_topic(broker.bootstrap, unique("partly"), 3)
    produce(broker.bootstrap, name, [(1, None, f"v{i}".encode(), None) for i in range(5)])
    return name


def test_batch_read_of_an_empty_topic_has_no_rows(spark, broker, empty):
    assert batch(spark, broker.bootstrap, subscribe=empty).count() == 0


def test_batch_read_of_a_topic_with_empty_partitions_reads_the_others(spark, broker,
                                                                       partly_empty):
    rows = batch(spark, broker.bootstrap, subscribe=partly_empty).select("partition",
                                                                         "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(1, i) for i in range(5)]


def test_batch_read_of_an_assigned_empty_partition_has_no_rows(spark, broker, partly_empty):
    assert batch(spark, broker.bootstrap, assign=f'{{"{partly_empty}": [0, 2]}}').count() == 0


def test_batch_read_of_a_pattern_matching_nothing_has_no_rows(spark, broker, empty):
    assert batch(spark, broker.bootstrap, subscribePattern=unique("nothing")).count() == 0


@pytest.mark.parametrize("strategy", ["subscribe", "assign"])
def test_batch_read_of_a_missing_topic_names_it(spark, broker, empty, strategy):
    """Spark's batch read asks the cluster to describe the subscribed (or assigned) topics
    (ConsumerStrategy.retrieveAllPartitions: `admin.describeTopics(topics).allTopicNames()`),
    which fails for a topic that does not exist; ours says which one."""
    missing = unique("missing")
    value = f"{empty},{missing}" if strategy == "subscribe" else f'{{"{missing}": [0]}}'
    with pytest.raises(Exception, match=f"Topic '{missing}' does not exist") as failure:
        batch(spark, broker.bootstrap, **{strategy: value}).count()
    assert "AttributeError" not in str(failure.value)


@pytest.mark.parametrize("which", ["empty", "partly_empty", "pattern"])
def test_stream_of_empty_partitions_ends_with_what_there_is(spark, broker, tmp_path, request,
                                                            which):
    topic = request.getfixturevalue("partly_empty" if which == "partly_empty" else "empty")
    options = ({"subscribePattern": unique("nothing")} if which == "pattern"
               else {"subscribe": topic})
    name = unique("empty_stream").replace("-", "_")
    run_available_now(stream(spark, broker.bootstrap, **options).select("partition", "offset"),
                      tmp_path / "cp", name=name)
    got = spark.sql(f"select partition, offset from `{name}`").collect()
    expected = [(1, i) for i in range(5)] if which == "partly_empty" else []
    assert sorted((r.partition, r.offset) for r in got) == expected


def test_stream_of_a_missing_topic_waits_for_it(spark, broker, tmp_path):
    """A stream subscribed to a topic that does not exist yet reads nothing until the topic is
    created, then reads it (jobs may start before their input topic exists)."""
    topic = unique("later")
    name = unique("later_stream").replace("-", "_")
    q = (stream(spark, broker.bootstrap, subscribe=topic).select("offset").writeStream
         .format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / "cp")).start())
    try:
        q.processAllAvailable()
        assert q.exception() is None
        create_topic(broker.bootstrap, topic, 1)
        produce(broker.bootstrap, topic, [(0, None, b"x", None), (0, None, b"y", None)])
        wait_for(lambda: spark.sql(f"select * from `{name}`").count() == 2,
                 "the created topic's records", deadline=180)
    finally:
        q.stop()
