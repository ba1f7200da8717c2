"""A broker's `/metrics` (metrics.listener): Kafka's names, counted from whole batches.

The log stores batches exactly as received, so the bytes a topic's partitions hold on disk are
an independent measure of the bytes produced to it, and of the bytes a consumer reading them
once fetched."""
import subprocess
import sys

import pytest
from brokers import MinilogBroker, free_port
from confluent_kafka import Consumer, Producer
from prometheus import scrape
from waiting import wait_until

pytestmark = pytest.mark.timeout(120)

RECORDS = 3000


@pytest.fixture(scope="module")
def metered():
    port = free_port()
    b = MinilogBroker(extra=["-o", f"metrics.listener=http://127.0.0.1:{port}",
                             "-o", "group.initial.rebalance.delay.ms=0"]).start()
    b.metrics_port = port
    yield b
    b.cleanup()


def topic_sum(samples, name, topic):
    return sum(v for (n, labels), v in samples.items()
               if n == name and ("topic", topic) in labels)


def produce(broker, topic):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for i in range(RECORDS):
        producer.produce(topic, value=b"value-%d" % i, key=b"%d" % (i % 7))
    assert producer.flush(60) == 0


def test_bytes_and_messages_in_match_what_the_log_stored(metered):
    produce(metered, "metered-in")
    samples = scrape(metered)
    stored = topic_sum(samples, "kafka_log_log_size", "metered-in")
    assert stored > 0
    assert topic_sum(samples, "kafka_server_brokertopicmetrics_bytesin_total", "metered-in") \
        == stored
    assert topic_sum(samples, "kafka_server_brokertopicmetrics_messagesin_total", "metered-in") \
        == RECORDS
    assert topic_sum(samples, "kafka_topic_partition_current_offset", "metered-in") == RECORDS


def test_bytes_out_match_what_one_consumer_read(metered):
    produce(metered, "metered-out")
    consumer = Consumer({"bootstrap.servers": metered.bootstrap, "group.id": "metered-readers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["metered-out"])
    seen = []
    try:
        def read_all():
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg)
            return len(seen) >= RECORDS
        wait_until(read_all, 60, "the consumer to read every record", interval=0)
        consumer.commit(asynchronous=False)
        samples = scrape(metered)
    finally:
        consumer.close()
    assert topic_sum(samples, "kafka_server_brokertopicmetrics_bytesout_total", "metered-out") \
        == topic_sum(samples, "kafka_log_log_size", "metered-out")
    lag = {dict(labels)["partition"]: v for (n, labels), v in samples.items()
           if n == "kafka_consumergroup_lag" and ("consumergroup", "metered-readers") in labels}
    assert lag and set(lag.values()) == {0}


def test_every_request_type_is_timed_under_kafkas_request_label(metered):
    produce(metered, "metered-timed")
    samples = scrape(metered)
    count = {dict(labels)["request"]: v for (n, labels), v in samples.items()
             if n == "kafka_network_requestmetrics_totaltimems_count"}
    assert count["Produce"] >= 1 and count["Metadata"] >= 1 and count["ApiVersions"] >= 1


def test_a_single_broker_is_its_own_active_controller(metered):
    samples = scrape(metered)
    assert samples[("kafka_controller_kafkacontroller_activecontrollercount", frozenset())] == 1
    assert samples[("kafka_server_replicamanager_underreplicatedpartitions", frozenset())] == 0


def test_a_malformed_metrics_listener_is_refused_in_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "minilog.broker", "start", "--listen",
                          f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path),
                          "-o", "metrics.listener=127.0.0.1:9404"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "minilog broker: metrics.listener must look like http://127.0.0.1:9404, "
        "got '127.0.0.1:9404'"]


BEYOND = "serves /metrics beyond this machine"


def test_metrics_beyond_loopback_are_warned_about_in_one_line(make_broker, metered):
    port = free_port()
    b = make_broker(extra=["-o", f"metrics.listener=http://0.0.0.0:{port}"])
    b.metrics_port = port
    scrape(b)  # served (on every address, so on 127.0.0.1 too)
    lines = wait_until(lambda: [line for line in b.log_path.read_text().splitlines()
                                if BEYOND in line], 60, "the warning in the broker's log")
    assert len(lines) == 1 and "WARNING" in lines[0].upper(), lines
    scrape(metered)
    assert BEYOND not in metered.log_path.read_text()
