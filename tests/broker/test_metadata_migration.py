"""A single broker's data directory written by the JSON metadata store (before a single broker
was a one-voter quorum) starts with the quorum and keeps everything: its metadata is imported
into the metadata log once, at the first start, and the old files are never read again, so a
change made after the import stands across restarts. Two directories that code wrote: one of
the JSON snapshot with real partition logs, group offsets and producer state
(`fixtures/single-broker-json-store`, made by `fixtures/make_single_broker_json_store.py`), and
an older one whose ACLs, SCRAM credentials and dynamic broker configs had a JSON file each
(`fixtures/single-broker-json-stores`). The `sasl.scram` seeds still create only credentials
that were never set."""
import shutil
from pathlib import Path

import pytest
from brokers import MinilogBroker
from confluent_kafka import Consumer, Producer, TopicPartition

from minilog.broker.metadata import records
from minilog.broker.metadata.delta import replayed
from minilog.broker.metadata.image import MetadataImage
from minilog.broker.metadata.json_import import IMPORTED, pending_import
from minilog.broker.security.acls import AclOperation, PatternType, PermissionType, ResourceType
from minilog.broker.security.scram_store import scram_seed_records
from minilog.broker.server.config import BrokerConfig
from minilog.connector.acl_types import AclBinding
from minilog.connector.client import AdminClient

pytestmark = pytest.mark.timeout(180)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
JSON_STORE, PER_FEATURE = FIXTURES / "single-broker-json-store", \
    FIXTURES / "single-broker-json-stores"
AUTHORIZER = ["-o", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "-o", "super.users=User:ANONYMOUS"]
READ = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                  AclOperation.READ, PermissionType.ALLOW)
DENY = AclBinding(ResourceType.GROUP, "g-", PatternType.PREFIXED, "User:bob", "*",
                  AclOperation.ALL, PermissionType.DENY)
ERIN_READS = AclBinding(ResourceType.TOPIC, "events", PatternType.LITERAL, "User:erin", "*",
                        AclOperation.READ, PermissionType.ALLOW)
SHA256, SHA512 = "SCRAM-SHA-256", "SCRAM-SHA-512"


@pytest.fixture
def old_broker(tmp_path, request):
    """A broker process on a copy of the fixture directory `request.param`."""
    node = MinilogBroker(tmp_path / "node", extra=AUTHORIZER)
    shutil.copytree(request.param, node.log_dir)
    try:
        yield node
    finally:
        node.cleanup()


def _admin(node):
    return AdminClient({"bootstrap.servers": node.bootstrap})


def _records(node, topic, partitions):
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = {}
    try:
        while len(got) < 20:
            msg = consumer.poll(30)
            assert msg is not None, f"only {sorted(got)} read back"
            assert not msg.error(), msg.error()
            got[msg.key().decode()] = (msg.partition(), msg.value().decode())
    finally:
        consumer.close()
    return got


def _committed(node, group, partitions):
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition("events", p) for p in range(partitions)], 30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


@pytest.mark.parametrize("old_broker", [JSON_STORE], indirect=True)
def test_a_json_store_directory_keeps_its_topics_records_offsets_and_security(old_broker):
    node = old_broker.start()
    assert (node.log_dir / IMPORTED).exists()
    with _admin(node) as admin:
        assert admin.describe_cluster(timeout=30).cluster_id == "json-store-broker"
        assert "events" in admin.list_topics(timeout=30)
        configs = admin.describe_configs("topic", "events", ["retention.ms"], timeout=30)
        assert configs["retention.ms"].value == "3600000"
        assert admin.describe_acls(timeout=30) == [ERIN_READS]
        assert {c.mechanism for c in
                admin.describe_user_scram_credentials(["erin"], timeout=30)["erin"]} == {SHA256}
    expected = {f"k{i}": (i % 2, f"v{i}") for i in range(20)}
    assert _records(node, "events", 2) == expected
    assert _committed(node, "g1", 2) == {0: 5, 1: 7}

    # Producer ids go on from the imported block: a new idempotent producer is not the old one.
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
    producer.produce("events", key="k20", value="v20", partition=0)
    assert producer.flush(30) == 0
    with _admin(node) as admin:
        states = admin.describe_producers([("events", 0)], timeout=30)
    pids = sorted(s.producer_id for s in next(iter(states.values())))
    assert len(pids) == 2 and pids[1] >= 2000, pids

    # Once imported, the metadata log is what counts: a change stands across a restart.
    with _admin(node) as admin:
        admin.delete_acls(timeout=30)
    node.restart()
    with _admin(node) as admin:
        assert admin.describe_acls(timeout=30) == []
        assert "events" in admin.list_topics(timeout=30)
    assert _committed(node, "g1", 2) == {0: 5, 1: 7}
    assert (node.log_dir / "__cluster_metadata.json").exists()  # left as it was


@pytest.mark.parametrize("old_broker", [PER_FEATURE], indirect=True)
def test_the_json_stores_of_an_old_single_broker_become_records_once(old_broker):
    node = old_broker.start()
    with _admin(node) as admin:
        assert admin.describe_cluster(timeout=30).cluster_id == "old-single-broker"
        assert sorted(t for t in admin.list_topics(timeout=30) if not t.startswith("__")) == \
            ["audit", "orders"]
        described = admin.describe_topics(["orders"], timeout=30)
        assert len(described["orders"].partitions) == 2
        assert admin.describe_configs("topic", "orders", ["retention.ms"],
                                      timeout=30)["retention.ms"].value == "86400000"
        assert set(admin.describe_acls(timeout=30)) == {READ, DENY}
        users = admin.describe_user_scram_credentials(timeout=30)
        assert {u: {c.mechanism for c in creds} for u, creds in users.items()} == {
            "alice": {SHA256, SHA512}}
        assert admin.describe_configs("broker", "", ["log.retention.ms"],
                                      timeout=30)["log.retention.ms"].value == "3600000"

        # Changed after the import: the old files (still there) do not bring anything back.
        admin.delete_acls(timeout=30, resource_type="TOPIC")
        admin.incremental_alter_configs("broker", "", delete=["log.retention.ms"], timeout=30)
    node.restart()
    with _admin(node) as admin:
        assert admin.describe_acls(timeout=30) == [DENY]
        assert "log.retention.ms" not in admin.describe_configs("broker", "", ["log.retention.ms"],
                                                                timeout=30)
        assert admin.describe_configs("topic", "orders", ["retention.ms"],
                                      timeout=30)["retention.ms"].value == "86400000"
    assert (node.log_dir / "__acls.json").exists() and \
        (node.log_dir / "__broker_configs.json").exists()


def test_seeds_create_only_credentials_never_set(tmp_path):
    imported = pending_import(PER_FEATURE)
    image = replayed(MetadataImage("old-single-broker"), [
        (offset, records.decode(records.encode(rec))) for offset, rec in enumerate(imported)])
    config = BrokerConfig.from_props({"log.dirs": str(tmp_path), "sasl.scram": (
        "SCRAM-SHA-256=[name=alice,password=other];SCRAM-SHA-512=[name=carol,password=x];"
        "SCRAM-SHA-256=[name=dave,password=dave-secret]")})
    seeded = {(rec["user"], rec["mechanism"]) for rec in scram_seed_records(config, image)}
    assert seeded == {("dave", SHA256)}  # alice's stands, carol's deletion too
