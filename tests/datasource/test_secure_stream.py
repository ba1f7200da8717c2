"""A Spark streaming query reads and writes a SASL_SSL broker with SCRAM, configured with the
options of Spark's own Kafka connector (`kafka.security.protocol`, `kafka.sasl.mechanism`,
`kafka.sasl.jaas.config` as Spark users write it, `kafka.ssl.truststore.*` with PEM)."""
import pytest
from confluent_kafka import Producer as CKProducer
from security_tools import PASSWORD, USER, librdkafka_settings
from sparktools import run_available_now, unique, wait_for

from minilog.connector.client import Consumer, TopicPartition

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="{USER}" password="{PASSWORD}";')


def _spark_options(broker):
    return {"kafka.bootstrap.servers": broker.bootstrap_for("SASL_SSL"),
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": JAAS,
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(broker.certs.ca)}


def test_a_streaming_query_reads_and_writes_over_sasl_ssl_with_scram(spark, secure_broker,
                                                                       tmp_path):
    source, sink = unique("secure-in"), unique("secure-out")
    conf = librdkafka_settings(secure_broker, "SASL_SSL", "SCRAM-SHA-256")
    producer = CKProducer(conf)
    for i in range(50):
        producer.produce(source, str(i).encode(), key=b"k")
    assert producer.flush(60) == 0
    options = _spark_options(secure_broker)
    df = (spark.readStream.format("minilog").options(**options).option("subscribe", source)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 20).load()
          .selectExpr("key", "value"))
    run_available_now(df, tmp_path / "ck", sink="minilog", topic=sink, **options)
    with Consumer({**conf, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(sink, 0)])
        seen = []
        wait_for(lambda: seen.extend(r.value for r in consumer.poll(1.0)) or len(seen) >= 50,
                 "the query's output")
    assert sorted(int(v) for v in seen) == list(range(50))


def test_a_wrong_password_stops_the_query_with_the_brokers_answer(spark, secure_broker,
                                                                  tmp_path):
    options = {**_spark_options(secure_broker),
               "kafka.sasl.jaas.config": JAAS.replace(PASSWORD, "wrong")}
    df = (spark.readStream.format("minilog").options(**options)
          .option("subscribe", unique("nope")).load())
    with pytest.raises(Exception, match="SASL_AUTHENTICATION_FAILED"):
        run_available_now(df, tmp_path / "ck", name=unique("nope").replace("-", "_"))
