"""A cluster whose only listener is SASL_SSL: replication, the Raft quorum, registrations and
forwarded requests all run over TLS with SCRAM logins between brokers
(`sasl.mechanism.inter.broker.protocol`, the listener's JAAS username and password), and a
client that can only reach that listener produces to three replicas and reads back."""
import pytest
from clustertools import FAST, wait_for
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from security_tools import make_certificates

from minilog.broker.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(240)

SCRAM = "SCRAM-SHA-512"


def _settings(certs):
    login = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
             'username="admin" password="admin-secret";')
    return {**FAST,
            "ssl.keystore.location": certs.server, "ssl.truststore.location": certs.ca,
            "sasl.enabled.mechanisms": SCRAM, "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": SCRAM,
            f"listener.name.sasl_ssl.{SCRAM.lower()}.sasl.jaas.config": login,
            "sasl.scram": f"{SCRAM}=[name=admin,password=admin-secret];"
                          f"{SCRAM}=[name=alice,password=alice-secret]"}


@pytest.fixture
def secure_cluster(tmp_path):
    certs = make_certificates(tmp_path / "certs")
    extra = [x for k, v in _settings(certs).items() for x in ("-o", f"{k}={v}")]
    cluster = LocalCluster(3, tmp_path / "cluster", extra=extra, replicated=True)
    for b in cluster.brokers:
        b.listener = "SASL_SSL"
    cluster.start()
    yield cluster, {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SASL_SSL",
                    "ssl.ca.location": str(certs.ca), "sasl.mechanism": SCRAM,
                    "sasl.username": "alice", "sasl.password": "alice-secret"}
    cluster.stop()


def test_replication_and_the_quorum_run_over_sasl_ssl(secure_cluster):
    cluster, conf = secure_cluster
    admin = AdminClient(conf)
    wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 3, "three registered brokers")
    admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(60)
    wait_for(lambda: sorted(admin.list_topics("replicated", timeout=5).topics["replicated"]
                            .partitions[0].isrs) == [1, 2, 3], "three replicas in sync")
    producer = Producer({**conf, "acks": "all"})
    for i in range(100):
        producer.produce("replicated", str(i).encode())
    assert producer.flush(60) == 0
    consumer = Consumer({**conf, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([CKTopicPartition("replicated", 0, 0)])
        values = []
        wait_for(lambda: values.extend(m.value() for m in consumer.consume(100, 1.0)
                                       if not m.error()) or len(values) >= 100,
                 "the 100 records back")
        assert values == [str(i).encode() for i in range(100)]
    finally:
        consumer.close()
    assert all(b.proc.poll() is None for b in cluster.brokers)
