"""Clients notice cluster changes they were not told about: metadata older than
`metadata.max.age.ms` is asked for again, as the Java client and librdkafka do."""
import time

import confluent_kafka
import pytest
from clienttools import make_topic
from minilog.connector.client import AdminClient, Producer

pytestmark = pytest.mark.timeout(120)


class _Minilog:
    def __init__(self, bootstrap):
        self.p = Producer({"bootstrap.servers": bootstrap, "metadata.max.age.ms": 1000,
                           "linger.ms": 5})

    def send(self, topic, key):
        return self.p.send(topic, b"v", key=key)

    def partitions(self, sent):
        self.p.flush(30)
        return {f.result(30).partition for f in sent}

    def close(self):
        self.p.close(10)


class _Confluent:
    def __init__(self, bootstrap):
        self.p = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                           "metadata.max.age.ms": 1000, "linger.ms": 5})

    def send(self, topic, key):
        got = []
        self.p.produce(topic, b"v", key=key, on_delivery=lambda e, m: got.append(m.partition()))
        self.p.poll(0)
        return got

    def partitions(self, sent):
        assert self.p.flush(30) == 0
        return {p for got in sent for p in got}

    def close(self):
        self.p.flush(10)


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
@pytest.mark.parametrize("client", ["minilog", "confluent-kafka"])
def test_the_producer_sends_to_partitions_added_to_its_topic(broker, client, keyed):
    topic = make_topic(broker.bootstrap, 1)
    p = (_Minilog if client == "minilog" else _Confluent)(broker.bootstrap)
    try:
        assert p.partitions([p.send(topic, b"k" if keyed else None)]) == {0}
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_partitions(topic, 4, timeout=20)
        seen, n, deadline = set(), 0, time.monotonic() + 60
        while seen != {0, 1, 2, 3} and time.monotonic() < deadline:
            sent = [p.send(topic, b"key-%d" % (n + i) if keyed else None) for i in range(200)]
            n += 200
            seen |= p.partitions(sent)
            time.sleep(0.05)
        assert seen == {0, 1, 2, 3}
    finally:
        p.close()
