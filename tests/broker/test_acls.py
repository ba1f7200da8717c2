"""ACLs on one broker, as Kafka's StandardAuthorizer enforces them, over SASL_PLAINTEXT with
three users: `admin` (a super user) manages ACLs with confluent-kafka's AdminClient, `alice`
is allowed exactly what the ACLs below grant, `bob` is granted nothing. Each API family is
tried by both with confluent-kafka or kafka-python: alice's request works, bob's is refused
with Kafka's error code, and Metadata hides from each principal the topics it may not describe.
"""
import uuid

import kafka
import kafka.errors
import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka import KafkaError as CKError
from confluent_kafka import KafkaException
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka import TopicCollection
from clitools import FAILED, USAGE, ok, one_line_error, run
from security_tools import SecureBroker, kafka_python_settings, librdkafka_settings, \
    make_certificates
from waiting import wait_until
from wire import RawConnection

from minilog.connector.client import AdminClient as MinilogAdmin
from minilog.connector.client import KafkaError
from minilog.connector.protocol import ApiKey, request

pytestmark = pytest.mark.timeout(180)

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SHARED, SECRET, READONLY = "shared", "secret", "alice-readonly"
GROUP, TXN = "alice-group", "alice-txn"
OP, PERM, RT, PT = AclOperation, AclPermissionType, ResourceType, ResourcePatternType


def _allow(rtype, name, op, pattern=PT.LITERAL, principal="User:alice", perm=PERM.ALLOW):
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


ALICE_ACLS = [
    _allow(RT.TOPIC, SHARED, OP.WRITE), _allow(RT.TOPIC, SHARED, OP.READ),
    _allow(RT.TOPIC, "alice-", OP.ALL, PT.PREFIXED),
    _allow(RT.TOPIC, READONLY, OP.WRITE, perm=PERM.DENY),
    _allow(RT.GROUP, GROUP, OP.READ), _allow(RT.TRANSACTIONAL_ID, TXN, OP.WRITE),
    _allow(RT.BROKER, "kafka-cluster", OP.DESCRIBE),  # BROKER is the CLUSTER type (4)
    _allow(RT.TOPIC, SECRET, OP.DESCRIBE, principal="User:bob"),  # sees it, cannot read it
    _allow(RT.TRANSACTIONAL_ID, TXN, OP.DESCRIBE, principal="User:bob"),  # finds, cannot write
]


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    users = " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="admin" password="admin-secret" {users};')
    b = SecureBroker(make_certificates(tmp_path_factory.mktemp("certs")), extra=[
        "-o", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "-o", "super.users=User:admin",
        "-o", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}"]).start()
    admin = _admin(b, "admin")
    _done(admin.create_topics([NewTopic(t, 1, 1) for t in (SHARED, SECRET, READONLY)]))
    _done(admin.create_acls(ALICE_ACLS))
    yield b
    b.cleanup()


def _conf(broker, user):
    return librdkafka_settings(broker, "SASL_PLAINTEXT", "PLAIN", user, PASSWORDS[user])


def _admin(broker, user):
    return AdminClient(_conf(broker, user))


def _kp(broker, user):
    return kafka_python_settings(broker, "SASL_PLAINTEXT", "PLAIN", user=user,
                                 password=PASSWORDS[user])


def _done(futures):
    for f in futures.values():
        f.result(60)


def _error_of(future):
    """The KafkaError code a future failed with, or None when it succeeded."""
    try:
        future.result(60)
    except KafkaException as e:
        return e.args[0].code()
    return None


def _delivery(broker, user, topic, **extra):
    """The error code of producing one record as `user`, 0 when it was stored."""
    results = []
    producer = CKProducer({**_conf(broker, user), "message.timeout.ms": 30000, **extra})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    producer.flush(60)
    assert len(results) == 1
    return results[0].code() if results[0] else 0


# --- the admin ACL APIs ----------------------------------------------------------------------
def test_acls_created_with_confluent_kafka_are_described_by_filters_and_deleted(acl_broker):
    admin = _admin(acl_broker, "admin")
    extra = _allow(RT.TOPIC, "tmp-", OP.READ, PT.PREFIXED, principal="User:carol")
    _done(admin.create_acls([extra]))
    carol = AclBindingFilter(RT.ANY, None, PT.ANY, "User:carol", None, OP.ANY, PERM.ANY)
    assert admin.describe_acls(carol).result(60) == [extra]
    match = AclBindingFilter(RT.TOPIC, "tmp-1", PT.MATCH, None, None, OP.ANY, PERM.ANY)
    assert admin.describe_acls(match).result(60) == [extra]
    deleted = admin.delete_acls([carol])
    assert [r.result(60) for r in deleted.values()] == [[extra]]
    assert admin.describe_acls(carol).result(60) == []
    everything = AclBindingFilter(RT.ANY, None, PT.ANY, None, None, OP.ANY, PERM.ANY)
    assert sorted(map(str, admin.describe_acls(everything).result(60))) == \
        sorted(map(str, ALICE_ACLS))


def test_only_a_principal_allowed_on_the_cluster_creates_or_deletes_acls(acl_broker):
    acl = _allow(RT.TOPIC, SECRET, OP.READ, principal="User:bob")
    for user in ("alice", "bob"):
        admin = _admin(acl_broker, user)
        futures = admin.create_acls([acl])
        assert [_error_of(f) for f in futures.values()] == [CKError.CLUSTER_AUTHORIZATION_FAILED]
        flt = AclBindingFilter(RT.ANY, None, PT.ANY, None, None, OP.ANY, PERM.ANY)
        futures = admin.delete_acls([flt])
        assert [_error_of(f) for f in futures.values()] == [CKError.CLUSTER_AUTHORIZATION_FAILED]


def test_leader_elections_need_alter_on_the_cluster(acl_broker):
    """ElectLeaders (kafka-leader-election.sh): alice may describe the cluster, not alter it."""
    elections = {}
    for user in ("alice", "admin"):
        admin = _admin(acl_broker, user)
        answer = admin.elect_leaders(ElectionType.PREFERRED, [CKTopicPartition(SHARED, 0)])
        try:
            elections[user] = {tp.partition: e and e.code() for tp, e in answer.result(60).items()}
        except KafkaException as e:
            elections[user] = e.args[0].code()
    assert elections == {"alice": CKError.CLUSTER_AUTHORIZATION_FAILED,
                         "admin": {0: CKError.ELECTION_NOT_NEEDED}}


def test_describe_acls_needs_describe_on_the_cluster(acl_broker):
    flt = kafka.admin.ACLFilter(None, None, kafka.admin.ACLOperation.ANY,
                                kafka.admin.ACLPermissionType.ANY,
                                kafka.admin.ResourcePatternFilter(
                                    kafka.admin.ResourceType.ANY, None,
                                    kafka.admin.ACLResourcePatternType.ANY))
    alice = kafka.KafkaAdminClient(**_kp(acl_broker, "alice"))
    bob = kafka.KafkaAdminClient(**_kp(acl_broker, "bob"))
    try:
        acls, error = alice.describe_acls(flt)
        assert error is kafka.errors.NoError and len(acls) == len(ALICE_ACLS)
        with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
            bob.describe_acls(flt)
    finally:
        alice.close()
        bob.close()


# --- Produce, Fetch, Metadata ----------------------------------------------------------------
def test_produce_needs_write_on_the_topic(acl_broker):
    assert _delivery(acl_broker, "alice", SHARED) == 0
    assert _delivery(acl_broker, "bob", SECRET) == CKError.TOPIC_AUTHORIZATION_FAILED  # Produce
    assert _delivery(acl_broker, "bob", SHARED) == CKError.TOPIC_AUTHORIZATION_FAILED  # Metadata


def test_a_deny_overrides_the_prefixed_allow(acl_broker):
    assert _delivery(acl_broker, "alice", READONLY) == CKError.TOPIC_AUTHORIZATION_FAILED
    topics = CKProducer(_conf(acl_broker, "alice")).list_topics(timeout=30).topics
    assert READONLY in topics  # the ALL on alice-* still allows DESCRIBE


def test_kafka_python_produce_is_refused_without_write(acl_broker):
    producer = kafka.KafkaProducer(**_kp(acl_broker, "bob"), max_block_ms=20000,
                                   enable_idempotence=False)  # else InitProducerId is refused
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            producer.send(SECRET, b"v").get(30)
    finally:
        producer.close(0)


def test_metadata_lists_only_the_topics_a_principal_may_describe(acl_broker):
    def topics(user):
        return set(CKProducer(_conf(acl_broker, user)).list_topics(timeout=30).topics)
    assert topics("bob") == {SECRET}
    assert topics("alice") == {SHARED, READONLY}
    assert {SHARED, SECRET, READONLY} <= topics("admin")


def test_consuming_needs_read_on_the_group_and_the_topic(acl_broker):
    assert _delivery(acl_broker, "admin", SHARED) == 0
    values = []
    for user, group in (("alice", GROUP), ("bob", GROUP), ("bob", "bob-group")):
        consumer = CKConsumer({**_conf(acl_broker, user), "group.id": group,
                               "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([SHARED])
            msg = wait_until(lambda: consumer.poll(0.5), 60, f"{user}'s first message")
            values.append(msg.error().code() if msg.error() else 0)
        finally:
            consumer.close()
    assert values == [0, CKError.GROUP_AUTHORIZATION_FAILED, CKError.GROUP_AUTHORIZATION_FAILED]


def test_kafka_python_fetch_is_refused_without_read(acl_broker):
    consumer = kafka.KafkaConsumer(**_kp(acl_broker, "bob"), consumer_timeout_ms=20000)
    try:
        consumer.assign([kafka.TopicPartition(SECRET, 0)])
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            consumer.seek_to_beginning()
            for _ in range(50):
                consumer.poll(500)
    finally:
        consumer.close()


# --- topic and config administration ----------------------------------------------------------
def test_topic_creation_and_deletion_follow_the_prefixed_acl(acl_broker):
    alice, bob = _admin(acl_broker, "alice"), _admin(acl_broker, "bob")
    name = f"alice-{uuid.uuid4().hex[:6]}"
    assert [_error_of(f) for f in bob.create_topics([NewTopic(name, 1, 1)]).values()] == \
        [CKError.TOPIC_AUTHORIZATION_FAILED]
    mixed = alice.create_topics([NewTopic(name, 1, 1), NewTopic("not-alices", 1, 1)])
    assert {t: _error_of(f) for t, f in mixed.items()} == \
        {name: None, "not-alices": CKError.TOPIC_AUTHORIZATION_FAILED}
    assert [_error_of(f) for f in bob.delete_topics([name]).values()] == \
        [CKError.TOPIC_AUTHORIZATION_FAILED]
    assert [_error_of(f) for f in alice.delete_topics([name]).values()] == [None]


def test_describing_and_altering_configs_need_their_operations(acl_broker):
    alice, bob = _admin(acl_broker, "alice"), _admin(acl_broker, "bob")
    resource = ConfigResource("topic", READONLY)
    (future,) = alice.describe_configs([resource]).values()
    assert "retention.ms" in future.result(60)
    (future,) = bob.describe_configs([resource]).values()
    assert _error_of(future) == CKError.TOPIC_AUTHORIZATION_FAILED
    change = ConfigResource("topic", READONLY, incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    (future,) = bob.incremental_alter_configs([change]).values()
    assert _error_of(future) == CKError.TOPIC_AUTHORIZATION_FAILED
    (future,) = alice.incremental_alter_configs([change]).values()
    assert _error_of(future) is None


def test_describe_cluster_answers_anyone_as_kafka_does(acl_broker):
    """Kafka authorizes DescribeCluster only for its authorized-operations field (0 without
    DESCRIBE on the cluster), as it answers Metadata to anyone. With minilog's client:
    librdkafka's describe_cluster sends Metadata instead."""
    with MinilogAdmin(_conf(acl_broker, "bob")) as bob:
        assert len(bob.describe_cluster().brokers) == 1
    bob = _admin(acl_broker, "bob")  # kept alive until the answer arrives
    described = bob.describe_cluster(include_authorized_operations=True).result(60)
    assert not described.authorized_operations


# --- groups and transactions ------------------------------------------------------------------
def test_group_administration_shows_a_principal_only_its_groups(acl_broker):
    admin = _admin(acl_broker, "admin")
    assert _delivery(acl_broker, "admin", SHARED) == 0
    consumer = CKConsumer({**_conf(acl_broker, "admin"), "group.id": "admins-only",
                           "auto.offset.reset": "earliest"})
    consumer.subscribe([SHARED])
    try:
        wait_until(lambda: consumer.poll(0.5), 60, "the admin's group to consume")
        consumer.commit(asynchronous=False)
        listed = {g.group_id for g in admin.list_consumer_groups().result(60).valid}
        assert "admins-only" in listed
        bob = _admin(acl_broker, "bob")
        assert "admins-only" not in {g.group_id
                                     for g in bob.list_consumer_groups().result(60).valid}
        (future,) = bob.describe_consumer_groups(["admins-only"]).values()
        assert _error_of(future) == CKError.GROUP_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_transactions_need_write_on_the_transactional_id(acl_broker):
    alice = CKProducer({**_conf(acl_broker, "alice"), "transactional.id": TXN})
    alice.init_transactions(60)
    alice.begin_transaction()
    alice.produce(SHARED, b"in a transaction")
    alice.commit_transaction(60)
    bob = CKProducer({**_conf(acl_broker, "bob"), "transactional.id": TXN})
    with pytest.raises(KafkaException) as refused:
        bob.init_transactions(60)
    assert refused.value.args[0].code() == CKError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_an_idempotent_producer_needs_write_on_some_topic(acl_broker):
    assert _delivery(acl_broker, "alice", SHARED, **{"enable.idempotence": True}) == 0
    bob = CKProducer({**_conf(acl_broker, "bob"), "enable.idempotence": True})
    bob.produce(SECRET, b"v")
    with pytest.raises(KafkaException) as refused:  # librdkafka's fatal error, from poll
        wait_until(lambda: bob.poll(0.2) and False, 60, "bob's producer to fail")
    assert refused.value.args[0].code() == CKError.CLUSTER_AUTHORIZATION_FAILED


# --- authorized operations -------------------------------------------------------------------
TOPIC_OPS = {OP.READ, OP.WRITE, OP.CREATE, OP.DESCRIBE, OP.DELETE, OP.ALTER, OP.DESCRIBE_CONFIGS,
             OP.ALTER_CONFIGS}
CLUSTER_OPS = {OP.CREATE, OP.CLUSTER_ACTION, OP.DESCRIBE_CONFIGS, OP.ALTER_CONFIGS,
               OP.IDEMPOTENT_WRITE, OP.ALTER, OP.DESCRIBE}


def test_describe_topics_reports_the_operations_the_acls_allow(acl_broker):
    """Kafka's bits per topic: the prefixed ALL gives every topic operation, the DENY takes
    WRITE away, READ and WRITE imply DESCRIBE; a client that does not ask gets none."""
    own = "alice-ops-" + uuid.uuid4().hex[:6]
    admin, alice = _admin(acl_broker, "admin"), _admin(acl_broker, "alice")
    _done(admin.create_topics([NewTopic(own, 1, 1)]))
    names = TopicCollection([own, SHARED, READONLY])
    described = {n: f.result(60) for n, f in
                 alice.describe_topics(names, include_authorized_operations=True).items()}
    assert {n: set(d.authorized_operations) for n, d in described.items()} == {
        own: TOPIC_OPS, SHARED: {OP.READ, OP.WRITE, OP.DESCRIBE},
        READONLY: TOPIC_OPS - {OP.WRITE}}
    plain = alice.describe_topics(TopicCollection([SHARED]))[SHARED].result(60)
    assert plain.authorized_operations is None


def test_describe_cluster_reports_the_operations_the_acls_allow(acl_broker):
    alice, admin = _admin(acl_broker, "alice"), _admin(acl_broker, "admin")
    described = alice.describe_cluster(include_authorized_operations=True).result(60)
    assert set(described.authorized_operations) == {OP.DESCRIBE}
    described = admin.describe_cluster(include_authorized_operations=True).result(60)
    assert set(described.authorized_operations) == CLUSTER_OPS  # a super user
    assert admin.describe_cluster().result(60).authorized_operations is None


def test_describe_consumer_groups_reports_the_operations_the_acls_allow(acl_broker):
    alice = _admin(acl_broker, "alice")
    (future,) = alice.describe_consumer_groups([GROUP], include_authorized_operations=True).values()
    assert set(future.result(60).authorized_operations) == {OP.READ, OP.DESCRIBE}


def test_describe_cluster_over_the_wire_carries_kafkas_bit_field(acl_broker):
    """The raw field: bit 1 << code for each allowed operation, -2147483648 when not asked."""
    conn = RawConnection(acl_broker.bootstrap_for("SASL_PLAINTEXT"))
    try:
        conn.call(ApiKey.SASL_HANDSHAKE, 1, request(ApiKey.SASL_HANDSHAKE).cls(mechanism="PLAIN"))
        conn.call(ApiKey.SASL_AUTHENTICATE, 2, request(ApiKey.SASL_AUTHENTICATE).cls(
            auth_bytes=f"\0alice\0{PASSWORDS['alice']}".encode()))
        fields = [conn.call(ApiKey.DESCRIBE_CLUSTER, 1, request(ApiKey.DESCRIBE_CLUSTER).cls(
            include_cluster_authorized_operations=asked)).cluster_authorized_operations
            for asked in (True, False)]
    finally:
        conn.close()
    assert fields == [1 << 8, -2147483648]  # DESCRIBE is operation 8


def test_acls_survive_a_restart(acl_broker):
    acl_broker.restart()
    for port in acl_broker.ports.values():
        wait_until(lambda: _can_connect(port), 60, "the restarted broker's listeners")
    everything = AclBindingFilter(RT.ANY, None, PT.ANY, None, None, OP.ANY, PERM.ANY)
    assert len(_admin(acl_broker, "admin").describe_acls(everything).result(60)) == \
        len(ALICE_ACLS)
    assert _delivery(acl_broker, "bob", SHARED) == CKError.TOPIC_AUTHORIZATION_FAILED


# --- minilog acls -----------------------------------------------------------------------------
def _cli_settings(broker, user):
    return [a for k, v in _conf(broker, user).items() for a in ("-X", f"{k}={v}")]


def test_minilog_acls_add_list_remove_with_kafka_acls_options(acl_broker):
    admin = _cli_settings(acl_broker, "admin")
    out = ok("acls", "add", "--allow-principal", "User:dave", "--consumer", "--topic", "cli-",
             "--group", "cli-group", "--resource-pattern-type", "prefixed", *admin)
    assert out.startswith("Added 3 ACLs:")
    listed = ok("acls", "list", "--principal", "User:dave", *admin)
    assert listed.count("principal=User:dave") == 3
    assert "ResourcePattern(resourceType=TOPIC, name=cli-, patternType=PREFIXED)" in listed
    assert "operation=READ, permissionType=ALLOW" in listed
    matching = ok("acls", "list", "--topic", "cli-orders", "--resource-pattern-type", "match",
                  *admin)
    assert matching.count("principal=User:dave") == 2
    out = ok("acls", "remove", "--topic", "cli-", "--group", "cli-group",
             "--resource-pattern-type", "prefixed", "--force", *admin)
    assert out.startswith("Removed 3 ACLs:")
    assert "User:dave" not in ok("acls", "list", *admin)


def test_minilog_acls_errors_are_one_line(acl_broker):
    refused = run("acls", "add", "--allow-principal", "User:bob", "--operation", "Read",
                  "--topic", SECRET, *_cli_settings(acl_broker, "bob"))
    assert "CLUSTER_AUTHORIZATION_FAILED" in one_line_error(refused, FAILED)
    no_resource = run("acls", "add", "--allow-principal", "User:bob",
                      *_cli_settings(acl_broker, "admin"))
    assert "--topic" in one_line_error(no_resource, USAGE)
    bad_operation = run("acls", "add", "--allow-principal", "User:bob", "--operation", "Eat",
                        "--topic", SECRET, *_cli_settings(acl_broker, "admin"))
    assert bad_operation.returncode == USAGE and b"Traceback" not in bad_operation.stderr


def _can_connect(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_partition_reassignments_need_alter_to_change_and_describe_to_list(acl_broker):
    """kafka-reassign-partitions.sh's requests: alice may describe the cluster (list), not
    alter it (reassign); bob may do neither; admin may both."""
    tp = kafka.TopicPartition(SHARED, 0)
    clients = {u: kafka.KafkaAdminClient(**_kp(acl_broker, u)) for u in ("alice", "bob", "admin")}
    try:
        with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
            clients["alice"].alter_partition_reassignments({tp: [1]})
        assert clients["admin"].alter_partition_reassignments({tp: [1]}) == {tp: None}
        assert clients["alice"].list_partition_reassignments() == {}
        with pytest.raises(kafka.errors.ClusterAuthorizationFailedError):
            clients["bob"].list_partition_reassignments()
    finally:
        for c in clients.values():
            c.close()
