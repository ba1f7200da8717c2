"""Replication and the controller quorum on listeners of their own, as Kafka's KRaft runs them.

Three combined nodes; clients use a PLAINTEXT first listener; brokers replicate and send
transaction markers on INTERNAL (SASL_SSL, SCRAM: `inter.broker.listener.name`), and the Raft
quorum, registrations, heartbeats, AlterPartition and forwarded requests run on CONTROLLER
(SASL_SSL, PLAIN: `controller.listener.names`, `sasl.mechanism.controller.protocol`). ACLs are
on with nothing allowed by default: the anonymous PLAINTEXT principal may use topics and groups
but not CLUSTER_ACTION, which every inter-broker request needs (Kafka's rule), so replication that
works is replication that did not come through the PLAINTEXT listener.
"""
import pytest
from clustertools import TestCluster, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from security_tools import make_certificates

from minilog.connector.local_cluster import free_port

pytestmark = pytest.mark.timeout(300)

PASSWORD, CONTROLLER_PASSWORD = "broker-secret", "controller-secret"
SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
         f'username="broker" password="{PASSWORD}";')
PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
         f'username="broker" password="{CONTROLLER_PASSWORD}" '
         f'user_broker="{CONTROLLER_PASSWORD}";')
RECORDS = 200


def _settings(certs) -> dict:
    return {
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "controller.listener.names": "CONTROLLER",
        "ssl.keystore.location": certs.server, "ssl.truststore.location": certs.ca,
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM,
        "listener.name.controller.plain.sasl.jaas.config": PLAIN,
        "sasl.scram": f"SCRAM-SHA-512=[name=broker,password={PASSWORD}]",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:broker",
        "min.insync.replicas": 2,
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split-listeners")
    certs = make_certificates(tmp / "certs")
    c = TestCluster(3, tmp / "cluster", _settings(certs))
    internal = {b.node_id: free_port() for b in c.brokers}
    controller = {b.node_id: free_port() for b in c.brokers}
    voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in controller.items())
    for b in c.brokers:
        b.more_listeners = (f"INTERNAL://127.0.0.1:{internal[b.node_id]},"
                            f"CONTROLLER://127.0.0.1:{controller[b.node_id]}")
        b.extra += ["-o", f"controller.quorum.voters={voters}"]
    c.internal_ports, c.controller_ports = internal, controller
    c.secured = {"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in internal.values()),
                 "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                 "sasl.username": "broker", "sasl.password": PASSWORD,
                 "ssl.ca.location": str(certs.ca)}
    try:
        c.start()
        yield c
    finally:
        c.destroy()


def _anonymous_may_use_topics_and_groups(admin):
    acls = [AclBinding(kind, "*", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW)
            for kind in (ResourceType.TOPIC, ResourceType.GROUP)]
    for future in admin.create_acls(acls).values():
        future.result(60)


def _read_all(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    try:
        wait_for(lambda: _poll_into(consumer, values) >= RECORDS, f"{RECORDS} records of {topic}")
    finally:
        consumer.close()
    return values


def _poll_into(consumer, values):
    for msg in consumer.consume(500, timeout=1):
        if msg.error() is None:
            values.append(msg.value())
    return len(values)


def test_replication_and_the_quorum_run_on_their_own_secured_listeners(cluster):
    admin = AdminClient(cluster.secured)
    _anonymous_may_use_topics_and_groups(admin)
    admin.create_topics([NewTopic("split", 1, 3)])["split"].result(60)
    placement = wait_for(lambda: cluster.partitions("split"), "a leader for split")
    leader = placement[0][0]
    cluster.wait_isr("split", 0, [1, 2, 3])

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "message.timeout.ms": 60000})
    failed = []
    for i in range(RECORDS):
        producer.produce("split", str(i).encode(),
                         on_delivery=lambda err, msg: err and failed.append(err))
    assert producer.flush(90) == 0 and not failed, failed

    # clients see only the listener they came through; the controller listener is nobody's
    plain = {b.node_id: b.port for b in cluster.brokers}
    assert {b.id: b.port for b in cluster.metadata().brokers.values()} == plain
    assert {b.id: b.port for b in admin.list_topics(timeout=30).brokers.values()} == \
        cluster.internal_ports

    cluster.broker(leader).kill()
    survivors = [n for n in (1, 2, 3) if n != leader]
    wait_for(lambda: (cluster.partitions("split", *survivors) or {0: (leader,)})[0][0]
             in survivors, "a new leader of split")
    values = _read_all(cluster.bootstrap_of(*survivors), "split")
    assert values[:RECORDS] == [str(i).encode() for i in range(RECORDS)]
