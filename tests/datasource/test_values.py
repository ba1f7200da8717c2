"""Typed values (`valueFormat` json or avro): decoded into a struct `value` column on the
executors, encoded from one by the sink; checked against bytes written and read by other
libraries (confluent-kafka, fastavro, json)."""
import io
import json
import struct

import fastavro
import pytest
from sparktools import consume_all, create_topic, produce, unique

AVRO = {"type": "record", "name": "Txn", "fields": [
    {"name": "account", "type": "string"}, {"name": "amount", "type": "long"},
    {"name": "note", "type": ["null", "string"], "default": None}]}


def read(spark, broker, topic, **options):
    r = (spark.read.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic))
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_json_values_become_typed_columns_and_bad_ones_null(spark, broker):
    topic = create_topic(broker.bootstrap, unique("json"), 1)
    produce(broker.bootstrap, topic, [
        (0, b"a", json.dumps({"account": "a", "amount": 120, "extra": 1}).encode(), None),
        (0, b"b", b'{"account": "b", "amount": -5}', None),
        (0, b"c", b"not json", None)])
    df = read(spark, broker, topic, valueFormat="json", valueSchema="account STRING, amount BIGINT")
    assert df.schema["value"].dataType.simpleString() == "struct<account:string,amount:bigint>"
    rows = df.select("offset", "value.account", "value.amount").orderBy("offset").collect()
    assert [tuple(r) for r in rows] == [(0, "a", 120), (1, "b", -5), (2, None, None)]


def test_avro_with_confluent_framing_round_trips_through_sink_and_source(spark, broker):
    topic = create_topic(broker.bootstrap, unique("avro"), 1)
    options = {"kafka.bootstrap.servers": broker.bootstrap, "valueFormat": "avro",
               "valueSchema": json.dumps(AVRO), "valueFraming": "confluent",
               "valueSchemaId": "7"}
    rows = [("a", ("a", 100, None)), ("b", ("b", -20, "refund"))]
    df = spark.createDataFrame(rows, "key string, value struct<account:string,amount:bigint,"
                                     "note:string>")
    df.write.format("minilog").options(**options).option("topic", topic).mode("append").save()
    raw = {k: v for _, _, k, v, _ in consume_all(broker.bootstrap, topic, 1, 2)}
    first = raw[b"a"]  # two Spark tasks write the rows: either may land first
    assert first[:5] == struct.pack(">bI", 0, 7)  # Confluent's wire framing
    assert fastavro.schemaless_reader(io.BytesIO(first[5:]), fastavro.parse_schema(AVRO),
                                      None) == {"account": "a", "amount": 100, "note": None}
    back = (spark.read.format("minilog").options(**options).option("subscribe", topic).load()
            .select("value.*").orderBy("account").collect())
    assert [tuple(r) for r in back] == [("a", 100, None), ("b", -20, "refund")]


def test_json_sink_writes_a_struct_as_json(spark, broker):
    topic = create_topic(broker.bootstrap, unique("json-out"), 1)
    df = spark.createDataFrame([("x", ("x", 3))], "key string, value struct<account:string,"
                                                  "amount:bigint>")
    (df.write.format("minilog").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", topic).option("valueFormat", "json")
     .option("valueSchema", "account STRING, amount BIGINT").mode("append").save())
    [(_, _, key, value, _)] = consume_all(broker.bootstrap, topic, 1, 1)
    assert key == b"x" and json.loads(value) == {"account": "x", "amount": 3}


@pytest.mark.parametrize("options,message", [
    ({"valueFormat": "xml", "valueSchema": "a STRING"}, "Option 'valueFormat' must be json"),
    ({"valueFormat": "json"}, "Option 'valueSchema' is required"),
    ({"valueFormat": "json", "valueSchema": "a MAP"}, "Option 'valueSchema': cannot read"),
    ({"valueFormat": "avro", "valueSchema": "{oops"}, "must be an Avro schema in JSON"),
])
def test_bad_value_options_are_refused(spark, options, message):
    with pytest.raises(Exception, match=message):
        (spark.read.format("minilog").option("kafka.bootstrap.servers", "127.0.0.1:9")
         .option("subscribe", "t").options(**options).load().collect())
