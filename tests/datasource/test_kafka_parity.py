"""Where `format("minilog")` once behaved differently from Spark's `format("kafka")`, each
compared with Spark's own source (KafkaSourceProvider, KafkaWriter, KafkaWriteTask) or docs,
in a real Spark session against a real broker."""
import logging

import pytest
from sparktools import (
    committed,
    consume_all,
    create_topic,
    produce,
    run_available_now,
    unique,
    wait_for,
)

from minilog.datasource.options import source_options
from minilog.jobs.pipeline import start_query


def sink(df, bootstrap, **options):
    writer = df.write.format("minilog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        writer = writer.option(k, v)
    return writer


def source(spark, bootstrap, **options):
    reader = spark.read.format("minilog").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader


@pytest.fixture(scope="module")
def ten(broker):
    """One partition of ten records."""
    name = create_topic(broker.bootstrap, unique("ten"), 1)
    produce(broker.bootstrap, name, [(0, None, f"v{i}".encode(), None) for i in range(10)])
    return name


# ---- null topics and sink options checked on the driver -----------------------------------

def test_a_row_with_a_null_topic_fails_with_sparks_message(spark, broker):
    """Spark's KafkaWriteTask: `if (topic == null) throw new NullPointerException(s"null topic
    present in the data. Use the ${TOPIC_OPTION_KEY} option for setting a topic.")`."""
    topic = create_topic(broker.bootstrap, unique("nulltopic"), 1)
    df = spark.createDataFrame([(topic, "a"), (None, "b")], "topic string, value string")
    with pytest.raises(Exception, match="null topic present in the data \\(the 'topic' column\\)"
                       "\\. Use the topic option for setting a topic\\.") as failure:
        sink(df.coalesce(1), broker.bootstrap).mode("append").save()
    assert "TypeError" not in str(failure.value)


def test_invalid_sink_options_fail_on_the_driver_before_any_task(spark, broker):
    """Spark validates the sink's options when it plans the write (KafkaSourceProvider
    .validateSinkOptions): no task runs. A task would print "Task ... failed"; a job that
    never started leaves Spark's job count unchanged."""
    df = spark.createDataFrame([("a",)], "value string")
    jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    for options, message in [({"kafka.transactional.id": "tx"}, "transactional.id' is not "
                                                                "supported"),
                             ({"kafka.acks": "most"}, "acks must be 0, 1 or all")]:
        with pytest.raises(Exception, match=message):
            sink(df, broker.bootstrap, topic="t", **options).mode("append").save()
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs_before


# ---- unknown kafka.* keys: a warning, near misses an error ---------------------------------

def test_unknown_kafka_keys_are_a_warning_and_near_misses_an_error(spark, broker, ten, caplog):
    """The Java client logs "These configurations '[x]' were supplied but are not used yet."
    for a key it does not know (AbstractConfig.logUnused) and goes on; Spark passes every
    `kafka.*` option to it. A near miss of a known key is a typo: an error naming the key."""
    unknown = {"kafka.my.company.tracing": "on"}
    assert source(spark, broker.bootstrap, subscribe=ten, **unknown).load().count() == 10
    # Spark checks the options in a Python process of its own: the warning, checked here
    with caplog.at_level(logging.WARNING, logger="minilog.datasource"):
        source_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": ten,
                        **unknown}, streaming=False)
    assert "'kafka.my.company.tracing' is not a known Kafka client setting" in caplog.text
    with pytest.raises(Exception, match="'kafka.fetch.max.byte' is unknown \\(did you mean "
                                        "'kafka.fetch.max.bytes'\\?\\)"):
        source(spark, broker.bootstrap, subscribe=ten,
               **{"kafka.fetch.max.byte": "1000"}).load().count()
    # Java-only keys stay accepted (with the client's one warning)
    assert source(spark, broker.bootstrap, subscribe=ten,
                  **{"kafka.ssl.endpoint.identification.algorithm": ""}).load().count() == 10


# ---- save modes ------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["overwrite", "ignore"])
def test_overwrite_and_ignore_save_modes_are_refused_as_spark_refuses_them(spark, broker, mode):
    """KafkaSourceProvider.createRelation: `case SaveMode.Overwrite | SaveMode.Ignore => throw
    ... "Save mode $mode not allowed for Kafka. Allowed save modes are Append and
    ErrorIfExists (default)."`. Nothing is written. (Spark itself refuses Ignore for Python
    data sources, with UNSUPPORTED_DATA_SOURCE_SAVE_MODE; Overwrite reaches the source.)"""
    topic = create_topic(broker.bootstrap, unique("modes"), 1)
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for minilog"
                       if mode == "overwrite" else "cannot be written in the \"Ignore\" mode"):
        sink(df, broker.bootstrap, topic=topic).mode(mode).save()
    assert consume_all(broker.bootstrap, topic, 1) == []


# ---- endingOffsets on a stream; ending offsets beyond the log end --------------------------

def test_ending_offsets_on_a_stream_fail_with_one_message(spark, broker, ten, tmp_path):
    """Spark's KafkaSourceProvider.validateStreamOptions: "ending offset not valid in
    streaming queries", raised when the stream is created. pyspark creates a Python stream
    reader only when the query starts, so that is where ours fails: with that message alone,
    not pyspark's UnboundLocalError from its source runner."""
    df = (spark.readStream.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", ten).option("endingOffsets", "latest").load())
    q = start_query(df.writeStream.format("noop")
                    .option("checkpointLocation", str(tmp_path / "cp")))
    try:
        with pytest.raises(Exception, match="Option 'endingOffsets' is not valid in streaming "
                                            "queries") as failure:
            q.awaitTermination(120)
    finally:
        q.stop()
    assert "UnboundLocalError" not in str(failure.value)


def test_ending_offsets_beyond_the_log_end_are_named_at_once(spark, broker, ten):
    """Ending offsets past the log end cannot be read: said when the read is planned, with
    the log end, instead of a "Data loss" after a poll timeout."""
    with pytest.raises(Exception, match=f"endingOffsets.*{ten}-0.*offset 50.*log end 10"):
        source(spark, broker.bootstrap, assign=f'{{"{ten}": [0]}}',
               startingOffsets=f'{{"{ten}": {{"0": 0}}}}',
               endingOffsets=f'{{"{ten}": {{"0": 50}}}}',
               **{"kafkaConsumer.pollTimeoutMs": "20000"}).load().count()


# ---- an ending timestamp with no record at or after it ---------------------------------------

def test_an_ending_timestamp_past_every_record_ends_at_the_latest_offset(spark, broker):
    """Spark's docs, endingOffsetsByTimestamp: "If Kafka doesn't return the matched offset, the
    offset will be set to latest." Only starting offsets follow
    startingOffsetsByTimestampStrategy ("error" by default)."""
    topic = create_topic(broker.bootstrap, unique("endts"), 2)
    produce(broker.bootstrap, topic, [(p, None, b"x", None, 1_700_000_000_000 + i)
                                      for p in range(2) for i in range(4)])
    later = 1_800_000_000_000
    assert source(spark, broker.bootstrap, subscribe=topic,
                  endingTimestamp=str(later)).load().count() == 8
    assert source(spark, broker.bootstrap, subscribe=topic, endingOffsetsByTimestamp=(
        f'{{"{topic}": {{"0": {later}, "1": 1700000000002}}}}')).load().count() == 4 + 2
    with pytest.raises(Exception, match="No offset of .* has a timestamp at or after"):
        source(spark, broker.bootstrap, subscribe=topic,
               startingTimestamp=str(later)).load().count()


# ---- subscribePattern: a search, as Spark's findFirstIn --------------------------------------

def test_subscribe_pattern_matches_anywhere_in_the_name(spark, broker):
    """Spark's SubscribePatternStrategy.assignedTopicPartitions (the Admin-based reader, Spark
    3.4 and later): `if (topicRegex.findFirstIn(name).isDefined)`: a search, not a full
    match, so `pat` selects `pat`, `pat-a` and `xpat`."""
    stem = unique("pat").replace("-", "")
    names = [stem, f"{stem}-a", f"x{stem}", f"other{unique('n')}"]
    for i, name in enumerate(names):
        create_topic(broker.bootstrap, name, 1)
        produce(broker.bootstrap, name, [(0, None, f"{i}".encode(), None)])
    got = source(spark, broker.bootstrap, subscribePattern=stem).load().select("topic").collect()
    assert sorted(r.topic for r in got) == sorted(names[:3])
    anchored = source(spark, broker.bootstrap, subscribePattern=f"^{stem}$").load()
    assert [r.topic for r in anchored.select("topic").collect()] == [stem]


# ---- the sink's timestamp column and kafka.partitioner.class --------------------------------

def test_the_timestamp_column_is_the_records_create_time(spark, broker):
    """SPARK-50160 (Spark 4.0): the Kafka sink writes a `timestamp` column as each record's
    timestamp; a null one (or none) leaves the producer's current time."""
    import datetime
    topic = create_topic(broker.bootstrap, unique("stamped"), 1)
    when = datetime.datetime(2021, 3, 4, 5, 6, 7, 123000)
    df = spark.createDataFrame([("a", when), ("b", None)], "value string, timestamp timestamp")
    sink(df.coalesce(1), broker.bootstrap, topic=topic).mode("append").save()
    got = {bytes(r.value).decode(): r for r in source(spark, broker.bootstrap, subscribe=topic)
           .load().select("value", "timestamp", "timestampType").collect()}
    assert got["a"].timestamp == when and got["a"].timestampType == 0
    assert abs((got["b"].timestamp - datetime.datetime.now()).total_seconds()) < 3600


@pytest.mark.parametrize("partitioner,keys,expected", [
    ("org.apache.kafka.clients.producer.RoundRobinPartitioner", ["k"] * 6, [0, 1, 2] * 2),
    ("org.apache.kafka.clients.producer.internals.DefaultPartitioner", ["k"] * 6,
     "one"),
    ("UniformStickyPartitioner", [f"k{i}" for i in range(6)], "one"),
])
def test_kafkas_partitioner_classes_are_honoured(spark, broker, partitioner, keys, expected):
    """Spark hands `kafka.partitioner.class` to its producer: RoundRobinPartitioner cycles
    through the partitions whatever the key, DefaultPartitioner hashes the key (murmur2),
    UniformStickyPartitioner ignores keys and fills one partition's batch."""
    topic = create_topic(broker.bootstrap, unique("parts"), 3)
    df = spark.createDataFrame([(k, str(i)) for i, k in enumerate(keys)], "key string, value string")
    sink(df.coalesce(1), broker.bootstrap, topic=topic,
         **{"kafka.partitioner.class": partitioner, "kafka.linger.ms": "1000"}
         ).mode("append").save()
    rows = consume_all(broker.bootstrap, topic, 3)
    by_value = [p for p, _, _, _, _ in sorted(rows, key=lambda r: int(r[3]))]
    if expected == "one":
        assert len(set(by_value)) == 1 and len(by_value) == 6, by_value
    else:
        assert by_value == expected


def test_another_partitioner_class_is_refused_on_the_driver(spark, broker):
    df = spark.createDataFrame([("a",)], "value string")
    with pytest.raises(Exception, match="'kafka.partitioner.class' must be one of the "
                                        "partitioners Kafka ships"):
        sink(df, broker.bootstrap, topic="t",
             **{"kafka.partitioner.class": "com.example.MyPartitioner"}).mode("append").save()


# ---- the query's progress in a consumer group: explicit, and never into a group in use -----

def stream_to_end(spark, bootstrap, topic, checkpoint, **options):
    df = (spark.readStream.format("minilog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        df = df.option(k, v)
    return run_available_now(df.load(), checkpoint, sink="noop")


def test_progress_is_committed_to_the_named_group_or_nowhere(spark, broker, ten, tmp_path):
    """Spark's connector never commits (its docs: "Kafka source doesn't commit any offset");
    ours commits to `commitOffsetsToGroup` (by default `kafka.group.id`), `false`: nowhere."""
    identity, progress = unique("identity"), unique("progress")
    stream_to_end(spark, broker.bootstrap, ten, tmp_path / "a", **{
        "kafka.group.id": identity, "commitOffsetsToGroup": progress})
    assert committed(broker.bootstrap, progress, ten, 1) == {0: 10}
    assert committed(broker.bootstrap, identity, ten, 1) == {0: -1001}  # no offset
    quiet = unique("quiet")
    stream_to_end(spark, broker.bootstrap, ten, tmp_path / "b", **{
        "kafka.group.id": quiet, "commitOffsetsToGroup": "false"})
    assert committed(broker.bootstrap, quiet, ten, 1) == {0: -1001}


def test_progress_is_never_committed_into_a_group_with_members(spark, broker, ten, tmp_path):
    """A group shared with running consumers would have its offsets moved by the query: the
    query refuses, naming the group and the option that avoids it."""
    from confluent_kafka import Consumer as CKConsumer
    group = unique("busy")
    member = CKConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    member.subscribe([ten])
    try:
        wait_for(lambda: member.poll(0.5) is not None or member.assignment(), "a member")
        with pytest.raises(Exception, match=f"Consumer group '{group}' has 1 active member"):
            stream_to_end(spark, broker.bootstrap, ten, tmp_path / "c",
                          **{"kafka.group.id": group})
    finally:
        member.close()


# ---- offsets behind latest, Spark's Kafka source metrics ------------------------------------

def test_offsets_behind_latest_follow_from_each_progress(spark, broker, tmp_path):
    """Spark's KafkaMicroBatchStream.metrics: per partition, latest available offset less the
    consumed one; min, max and avg over the partitions. pyspark 4.3's Python streams cannot
    report source metrics (`metrics` stays {}), so `offsets_behind_latest` derives them from
    the progress's endOffset and latestOffset, in a listener or from recentProgress."""
    from pyspark.sql.streaming import StreamingQueryListener

    from minilog.datasource import offsets_behind_latest
    topic = create_topic(broker.bootstrap, unique("behind"), 2)
    produce(broker.bootstrap, topic, [(p, None, b"x", None) for p in range(2) for _ in range(10)])
    heard = []

    class Lag(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            for source in event.progress.sources:
                heard.append(offsets_behind_latest(source))

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    listener = Lag()
    spark.streams.addListener(listener)
    try:
        progress = stream_to_end(spark, broker.bootstrap, topic, tmp_path / "cp",
                                 maxOffsetsPerTrigger="6")
        wait_for(lambda: len(heard) >= len(progress), "the listener's progress events")
    finally:
        spark.streams.removeListener(listener)
    first = offsets_behind_latest(progress[0]["sources"][0])
    # 6 of 20 records, 3 per partition: 7 behind in each
    assert first == {"minOffsetsBehindLatest": "7", "maxOffsetsBehindLatest": "7",
                     "avgOffsetsBehindLatest": "7.0"}
    last = offsets_behind_latest(progress[-1]["sources"][0])
    assert last["maxOffsetsBehindLatest"] == "0"
    assert first in heard


# ---- maxBytesPerTrigger, beyond Spark ---------------------------------------------------------

BIG, SMALL = 2000, 200


@pytest.fixture(scope="module")
def mixed(broker):
    """Partition 0: 40 records of 2000 bytes; partition 1: 40 of 200."""
    name = create_topic(broker.bootstrap, unique("mixed"), 2)
    produce(broker.bootstrap, name, [(p, None, b"v" * (BIG if p == 0 else SMALL), None)
                                     for p in range(2) for _ in range(40)])
    return name


def value_bytes_per_batch(progress):
    """(records, value bytes) each batch of a query over `mixed` read, from its offsets."""
    from minilog.datasource import offsets_read
    out = []
    for p in progress:
        n = {partition: count for (_, partition), count in offsets_read(p["sources"][0]).items()}
        if sum(n.values()):
            out.append((sum(n.values()), n.get(0, 0) * BIG + n.get(1, 0) * SMALL))
    return out


def test_max_bytes_per_trigger_bounds_each_batch_in_bytes(spark, broker, mixed, tmp_path):
    """Spark's Kafka source bounds a batch only in records (maxOffsetsPerTrigger); ours also
    in bytes, shared among partitions as Spark shares records (each the same fraction of what
    it has), as a soft bound like the file source's: about the bytes asked, never fewer than
    one record. 88 kB of values in 22 kB batches: four full batches."""
    progress = stream_to_end(spark, broker.bootstrap, mixed, tmp_path / "cp",
                             maxBytesPerTrigger="24k")
    batches = value_bytes_per_batch(progress)
    assert sum(n for n, _ in batches) == 80
    assert all(b <= 24 * 1024 for _, b in batches), batches
    assert all(b >= 0.7 * 24 * 1024 for _, b in batches[:-1]), batches
    assert len(batches) == 4, batches


@pytest.mark.parametrize("max_offsets, max_records, max_bytes", [
    ("8", 8, 8 * (BIG + SMALL) // 2),    # 8 records (8.8 kB) are fewer bytes than 24k
    ("30", 22, 24 * 1024)])              # 30 records (33 kB) are more
def test_the_tighter_of_max_offsets_and_max_bytes_wins(spark, broker, mixed, tmp_path,
                                                       max_offsets, max_records, max_bytes):
    progress = stream_to_end(spark, broker.bootstrap, mixed, tmp_path / "cp",
                             maxBytesPerTrigger="24k", maxOffsetsPerTrigger=max_offsets)
    batches = value_bytes_per_batch(progress)
    assert sum(n for n, _ in batches) == 80, batches
    assert all(n <= max_records and b <= max_bytes for n, b in batches), batches
