"""Security in a cluster. ACLs live in the metadata log: an ACL created through one broker
(forwarded to the controller) is enforced by every broker, and its removal too. The clients here are
anonymous (PLAINTEXT) and `allow.everyone.if.no.acl.found` lets brokers and clients do what
no ACL names, so one DENY ACL is what changes."""
import pytest
from clustertools import TestCluster, wait_for
from wire import RawConnection
from confluent_kafka import KafkaError as CKError
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from minilog.connector.local_cluster import free_port
from minilog.connector.protocol import ApiKey, request

pytestmark = pytest.mark.timeout(240)

SECURED = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "allow.everyone.if.no.acl.found": "true"}
DENY_HIDDEN = AclBinding(ResourceType.TOPIC, "hidden", ResourcePatternType.LITERAL,
                         "User:ANONYMOUS", "*", AclOperation.ALL, AclPermissionType.DENY)


def _visible(cluster, node):
    """The topics `node` itself lists (a Metadata request to it, not to any broker)."""
    conn = RawConnection(cluster.bootstrap_of(node))
    try:
        body = request(ApiKey.METADATA).cls(topics=None, allow_auto_topic_creation=False)
        return {t.name for t in conn.call(ApiKey.METADATA, 12, body).topics}
    finally:
        conn.sock.close()


def _delivery(cluster, node, topic):
    results = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_of(node), "acks": "all",
                         "message.timeout.ms": 30000})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    producer.flush(60)
    return results[0].code() if results[0] else 0


def test_an_acl_created_through_one_broker_is_enforced_by_all_and_so_is_its_removal(
        make_cluster):
    c = make_cluster(3, **SECURED)
    c.create_topic("public", rf=3)
    c.create_topic("hidden", rf=3)
    admin = c.admin(3)  # through a broker that is not the controller, most likely
    for future in admin.create_acls([DENY_HIDDEN]).values():
        future.result(60)
    for node in (1, 2, 3):
        wait_for(lambda: "hidden" not in _visible(c, node) and "public" in _visible(c, node),
                 f"node {node} to hide the denied topic")
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None,
                                  None, AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(everything).result(60) == [DENY_HIDDEN]
    assert _delivery(c, 1, "hidden") == CKError.TOPIC_AUTHORIZATION_FAILED
    assert _delivery(c, 1, "public") == 0  # followers still replicate: acks=all is answered
    admin = c.admin(2)  # kept alive until the answer arrives
    for future in admin.delete_acls([AclBindingFilter(
            ResourceType.TOPIC, "hidden", ResourcePatternType.LITERAL, None, None,
            AclOperation.ANY, AclPermissionType.ANY)]).values():
        assert future.result(60) == [DENY_HIDDEN]
    for node in (1, 2, 3):
        wait_for(lambda: "hidden" in _visible(c, node), f"node {node} to show it again")
    assert _delivery(c, 2, "hidden") == 0


def test_metadata_names_every_broker_on_the_listener_the_client_came_through(tmp_path):
    """Brokers register every listener; a client on the SASL_PLAINTEXT port is sent to the
    other brokers' SASL_PLAINTEXT ports, one on the PLAINTEXT port to their PLAINTEXT ones."""
    c = TestCluster(3, tmp_path, {
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_alice="alice-secret";',
        "sasl.enabled.mechanisms": "PLAIN"})
    sasl_ports = {b.node_id: free_port() for b in c.brokers}
    for b in c.brokers:
        b.more_listeners = f"SASL_PLAINTEXT://127.0.0.1:{sasl_ports[b.node_id]}"
    try:
        c.start()
        secured = Producer({"bootstrap.servers": f"127.0.0.1:{sasl_ports[2]}",
                            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                            "sasl.username": "alice", "sasl.password": "alice-secret"})
        assert wait_for(lambda: {b.id: b.port for b in
                                 secured.list_topics(timeout=10).brokers.values()} == sasl_ports,
                        "every broker's SASL_PLAINTEXT port")
        plain = {b.node_id: b.port for b in c.brokers}
        # waited for as well: a broker fenced for a moment on a loaded machine is left out
        assert wait_for(lambda: {b.id: b.port for b in c.metadata(2).brokers.values()} == plain,
                        "every broker's PLAINTEXT port")
    finally:
        c.destroy()
