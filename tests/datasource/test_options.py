"""Invalid or conflicting options fail on the driver, before any task, with one message naming
the option, as Spark's Kafka source and sink do."""
import pytest

from minilog.jobs.pipeline import start_query

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9"}  # never contacted: the checks come first
SUB = {**BOOT, "subscribe": "t"}

BATCH_ERRORS = [
    (BOOT, "One of the following options must be specified"),
    ({**SUB, "subscribePattern": "t.*"}, "Only one of the following options"),
    ({**BOOT, "subscribe": " , "}, "No topics to subscribe to"),
    ({**BOOT, "subscribePattern": "("}, "'subscribePattern' is not a valid pattern"),
    ({**BOOT, "assign": "t:0"}, "No topicpartitions to assign"),
    ({**BOOT, "assign": '{"t": "0"}'}, "Option 'assign': topic 't' must map to a list"),
    ({"subscribe": "t"}, "Option 'kafka.bootstrap.servers' must be specified"),
    ({**SUB, "startingOffsets": "latest"}, "'startingOffsets' can't be latest for batch"),
    ({**SUB, "endingOffsets": "earliest"}, "'endingOffsets' can't be earliest for batch"),
    ({**SUB, "startingOffsets": "soon"}, "Option 'startingOffsets' must be earliest, latest"),
    ({**SUB, "startingOffsets": '{"t": {"0": "x"}}'}, "Option 'startingOffsets': partition '0'"),
    ({**SUB, "startingOffsets": '{"t": {"0": 5}}', "endingOffsets": '{"t": {"1": 9}}'},
     "must name the same topic partitions"),
    ({**SUB, "startingOffsets": '{"t": {"0": 9}}', "endingOffsets": '{"t": {"0": 5}}'},
     "'startingOffsets' \\(9\\) is after 'endingOffsets' \\(5\\)"),
    ({**SUB, "startingTimestamp": "yesterday"}, "Option 'startingTimestamp' expects a single"),
    ({**SUB, "failOnDataLoss": "maybe"}, "Option 'failOnDataLoss' must be true or false"),
    ({**SUB, "includeHeaders": "yes"}, "Option 'includeHeaders' must be true or false"),
    ({**SUB, "minPartitions": "0"}, "Option 'minPartitions' must be positive"),
    ({**SUB, "maxOffsetsPerTrigger": "ten"}, "Option 'maxOffsetsPerTrigger' must be an integer"),
    ({**SUB, "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
     "minOffsetsPerTrigger\\(10\\) is higher than maxOffsetsPerTrigger\\(5\\)"),
    ({**SUB, "maxTriggerDelay": "soon"}, "Option 'maxTriggerDelay' must be a duration"),
    ({**SUB, "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not "
                                                     "supported"),
    ({**SUB, "kafka.enable.auto.commit": "true"}, "Kafka option 'enable.auto.commit' is not"),
    ({**SUB, "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not"),
    ({**SUB, "startingOffsets": "group"}, "'startingOffsets' is 'group' but no 'kafka.group.id'"),
    ({**SUB, "startingOffsetsByTimestampStrategy": "closest"},
     "Option 'startingOffsetsByTimestampStrategy' must be"),
]


@pytest.mark.parametrize("options,message", BATCH_ERRORS, ids=[m for _, m in BATCH_ERRORS])
def test_batch_read_refuses(spark, options, message):
    with pytest.raises(Exception, match=message):
        spark.read.format("minilog").options(**options).load().collect()


STREAM_ERRORS = [
    ({**SUB, "endingOffsets": "latest"}, "Option 'endingOffsets' is not valid in streaming"),
    ({**SUB, "endingTimestamp": "5"}, "is not valid in streaming queries"),
]


@pytest.mark.parametrize("options,message", STREAM_ERRORS, ids=[m for _, m in STREAM_ERRORS])
def test_streaming_read_refuses(spark, tmp_path, options, message):
    """The query fails as it starts, in the driver, before planning a batch."""
    q = start_query(spark.readStream.format("minilog").options(**options).load().writeStream
                    .format("noop").option("checkpointLocation", str(tmp_path)))
    try:
        with pytest.raises(Exception, match=message):
            q.awaitTermination(120)
    finally:
        q.stop()


def test_fixed_schema_cannot_be_replaced(spark):
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("minilog").schema("value string").options(**SUB).load().collect()


SINK_ERRORS = [
    ("value string", {}, "topic option required when no 'topic' attribute is present"),
    ("key string", {"topic": "t"}, "Required attribute 'value' not found"),
    ("value int", {"topic": "t"}, "value attribute type must be a string or binary"),
    ("key int, value string", {"topic": "t"}, "key attribute type must be a string or binary"),
    ("topic int, value string", {}, "topic attribute type must be a string"),
    ("value string, partition string", {"topic": "t"}, "partition attribute type must be an int"),
    ("value string, headers string", {"topic": "t"}, "headers attribute type must be"),
    ("value string", {"topic": "t", "kafka.value.serializer": "x"},
     "Kafka option 'value.serializer' is not supported"),
    ("value string", {"topic": "t", "deliveryGuarantee": "twice"},
     "Option 'deliveryGuarantee' must be at-least-once or exactly-once, got 'twice'"),
    ("value string", {"topic": "t", "transactionalIdPrefix": "p"},
     "Option 'transactionalIdPrefix' needs deliveryGuarantee exactly-once"),
    ("value string", {"topic": "t", "deliveryGuarantee": "exactly-once",
                      "transactionalIdPrefix": " "}, "Option 'transactionalIdPrefix' is empty"),
    ("value string", {"topic": "t", "deliveryGuarantee": "exactly-once", "kafka.acks": "1"},
     "Invalid Kafka option: enable.idempotence=true requires acks=all"),
]


@pytest.mark.parametrize("schema,options,message", SINK_ERRORS, ids=[m for *_, m in SINK_ERRORS])
def test_write_refuses(spark, schema, options, message):
    df = spark.createDataFrame([], schema)
    with pytest.raises(Exception, match=message):
        df.write.format("minilog").options(**BOOT, **options).mode("append").save()
