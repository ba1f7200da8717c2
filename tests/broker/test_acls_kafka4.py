"""More of what Kafka's authorizer refuses, on test_acls' broker and principals (`alice` with
the ACLs there, DESCRIBE on the cluster among them; `bob` nearly nothing; `admin` a super user;
PLAINTEXT clients are `User:ANONYMOUS`, allowed nothing): DescribeLogDirs needs DESCRIBE on the
cluster, ListTransactions lists only the transactional ids the caller may describe, a KIP-848
heartbeat subscribing to a topic the member may not describe is refused (Kafka 4) and a regex
subscription leaves such topics out, WriteTxnMarkers needs CLUSTER_ACTION, and Metadata for a
missing topic the caller may describe but not create answers TOPIC_AUTHORIZATION_FAILED."""
import contextlib
import uuid

import pytest
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import AclOperation, ResourceType
from test_acls import (  # noqa: F401 - acl_broker is the fixture
    GROUP,
    PASSWORDS,
    SECRET,
    SHARED,
    TXN,
    _admin,
    _allow,
    _conf,
    _done,
    acl_broker,
)
from txntools import raw_write_marker
from waiting import wait_until
from wire import RawConnection

from minilog.connector.client import AdminClient as MinilogAdmin
from minilog.connector.client import KafkaError
from minilog.connector.protocol import ApiKey, ErrorCode, request

pytestmark = pytest.mark.timeout(180)


@contextlib.contextmanager
def _logged_in(broker, user):
    """A raw connection to the SASL_PLAINTEXT listener, logged in as `user` with PLAIN."""
    conn = RawConnection(broker.bootstrap_for("SASL_PLAINTEXT"))
    try:
        assert conn.call(ApiKey.SASL_HANDSHAKE, 1, request(ApiKey.SASL_HANDSHAKE).cls(
            mechanism="PLAIN")).error_code == 0
        token = f"\0{user}\0{PASSWORDS[user]}".encode()
        assert conn.call(ApiKey.SASL_AUTHENTICATE, 2, request(ApiKey.SASL_AUTHENTICATE).cls(
            auth_bytes=token)).error_code == 0
        yield conn
    finally:
        conn.close()


@pytest.mark.parametrize("version", [0, 1, 4])
def test_describe_log_dirs_needs_describe_on_the_cluster(acl_broker, version):
    with contextlib.closing(RawConnection(acl_broker.bootstrap)) as anonymous:
        answer = anonymous.call(ApiKey.DESCRIBE_LOG_DIRS, version,
                                request(ApiKey.DESCRIBE_LOG_DIRS).cls(topics=None))
    assert answer.results == []
    if version >= 3:
        assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_partition_sizes_answer_alice_and_refuse_bob(acl_broker):
    with MinilogAdmin(_conf(acl_broker, "alice")) as alice:
        assert alice.partition_sizes([(SHARED, 0)])[(SHARED, 0)] >= 0
    with MinilogAdmin(_conf(acl_broker, "bob")) as bob, pytest.raises(KafkaError) as refused:
        bob.partition_sizes([(SECRET, 0)], timeout=30)
    assert refused.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_list_transactions_shows_only_the_ids_the_caller_may_describe(acl_broker):
    """alice may describe the cluster, yet sees only her own transactional id."""
    for user, txn_id in (("admin", "admins-txn"), ("alice", TXN)):
        producer = CKProducer({**_conf(acl_broker, user), "transactional.id": txn_id})
        producer.init_transactions(60)
    with MinilogAdmin(_conf(acl_broker, "admin")) as admin:
        assert {"admins-txn", TXN} <= {t.transactional_id for t in admin.list_transactions()}
    with MinilogAdmin(_conf(acl_broker, "alice")) as alice:
        assert {t.transactional_id for t in alice.list_transactions()} == {TXN}


def _heartbeat(conn, topics):
    hb = request(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    return conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, hb.cls(
        group_id=GROUP, member_id="", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30000, subscribed_topic_names=topics, server_assignor=None,
        topic_partitions=[]))


def test_a_consumer_group_heartbeat_needs_describe_on_every_subscribed_topic(acl_broker):
    with _logged_in(acl_broker, "alice") as conn:
        refused = _heartbeat(conn, [SHARED, SECRET])
        assert refused.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert refused.assignment is None
        joined = _heartbeat(conn, [SHARED])
        assert joined.error_code == 0 and joined.member_id


def _topic_ids(broker, names):
    meta = request(ApiKey.METADATA)
    with _logged_in(broker, "admin") as conn:
        answer = conn.call(ApiKey.METADATA, 12, meta.cls(
            topics=[meta.make("topics", name=n) for n in names],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return {t.name: t.topic_id for t in answer.topics}


def _regex_heartbeat(conn, group, member_id, epoch):
    hb = request(ApiKey.CONSUMER_GROUP_HEARTBEAT)
    joining = epoch == 0
    return conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, hb.cls(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30000 if joining else -1, subscribed_topic_names=None,
        subscribed_topic_regex="s.*" if joining else None, server_assignor=None,
        topic_partitions=[] if joining else None))


def test_a_regex_subscription_leaves_out_the_topics_the_member_may_not_describe(acl_broker):
    """`s.*` matches shared and secret; alice may describe only shared: she is assigned shared
    alone, with no error (Kafka 4 resolves the regex with the member's principal)."""
    regex_group = "alice-regex-group"
    admin = _admin(acl_broker, "admin")
    _done(admin.create_acls([_allow(ResourceType.GROUP, regex_group, AclOperation.READ)]))
    ids = _topic_ids(acl_broker, [SHARED, SECRET])
    member = {"id": uuid.uuid4().hex, "epoch": 0}
    with _logged_in(acl_broker, "alice") as conn:
        def assignment(epoch=None):
            answer = _regex_heartbeat(conn, regex_group, member["id"],
                                      member["epoch"] if epoch is None else epoch)
            assert answer.error_code == 0, answer.error_message
            member["epoch"] = answer.member_epoch
            parts = answer.assignment.topic_partitions if answer.assignment else None
            return {t.topic_id: t.partitions for t in parts} if parts else None
        assigned = wait_until(assignment, 60, "alice's assignment")
        assignment(-1)  # leaves the group
    assert assigned == {ids[SHARED]: [0]}


def test_write_txn_markers_needs_cluster_action(acl_broker):
    """alice may write to shared and use her transactional id, but only a cluster member
    (CLUSTER_ACTION on the cluster) may write markers: nothing is appended for her."""
    with _logged_in(acl_broker, "alice") as conn:
        codes = raw_write_marker(conn, 4242, 0, 0, False, SHARED, [0])
    assert codes == {0: ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    with _logged_in(acl_broker, "admin") as conn:  # a super user passes the check (and
        # learns that the topic does not exist: no marker lands anywhere)
        assert raw_write_marker(conn, 4242, 0, 0, False, "no-such-topic", [0]) == \
            {0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_metadata_for_a_missing_topic_one_may_describe_but_not_create(acl_broker):
    admin = _admin(acl_broker, "admin")
    _done(admin.create_acls([
        _allow(ResourceType.TOPIC, "bob-missing", AclOperation.DESCRIBE, principal="User:bob")]))
    meta = request(ApiKey.METADATA)
    with _logged_in(acl_broker, "bob") as conn:
        answer = conn.call(ApiKey.METADATA, 12, meta.cls(
            topics=[meta.make("topics", name="bob-missing")], allow_auto_topic_creation=True,
            include_topic_authorized_operations=False))
    assert [(t.name, t.error_code) for t in answer.topics] == \
        [("bob-missing", ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    with MinilogAdmin(_conf(acl_broker, "admin")) as ours:
        assert "bob-missing" not in ours.list_topics()
