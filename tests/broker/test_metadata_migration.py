"""A single broker's data directory written before its ACLs, SCRAM credentials and dynamic
broker configs became metadata records (each in a JSON file of its own; the fixture was written
by that code) is migrated once, at the first start: nothing is lost, the metadata file then
holds everything (mode 0600: credentials), and the old files are never read again, so a change
made after the migration stands across restarts. The `sasl.scram` seeds still create only
credentials that were never set."""
import json
import shutil
import stat
from pathlib import Path

from minilog.broker.metadata.local_store import LocalMetadataStore
from minilog.broker.metadata.records import acl_record, broker_config_record
from minilog.broker.security.acls import AclOperation, PatternType, PermissionType, ResourceType
from minilog.broker.security.scram_store import open_scram_credentials
from minilog.broker.server.config import BrokerConfig
from minilog.connector.acl_types import AclBinding

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "single-broker-json-stores"
READ = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                  AclOperation.READ, PermissionType.ALLOW)
DENY = AclBinding(ResourceType.GROUP, "g-", PatternType.PREFIXED, "User:bob", "*",
                  AclOperation.ALL, PermissionType.DENY)
SHA256, SHA512 = "SCRAM-SHA-256", "SCRAM-SHA-512"


def _old_directory(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(FIXTURE, data)
    return data


def test_the_json_stores_of_an_old_single_broker_become_records_once(tmp_path):
    data = _old_directory(tmp_path)
    image = LocalMetadataStore(data, 1).image
    assert image.cluster_id == "old-single-broker"
    assert sorted(image.topics) == ["audit", "orders"]
    assert image.topics["orders"].configs == {"retention.ms": "86400000"}
    assert len(image.topics["orders"].partitions) == 2 and image.next_producer_id == 2000
    assert image.acls == {READ, DENY}
    assert {key for key, cred in image.scram.items() if cred} == {
        ("alice", SHA256), ("alice", SHA512)}
    assert image.scram[("carol", SHA512)] is None  # deleted, and remembered as such
    assert image.broker_configs == {"": {"log.retention.ms": 3600000}}
    saved = data / "__cluster_metadata.json"
    assert set(json.loads(saved.read_text())["sections"]) >= {"acls", "scram", "broker_configs"}
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600

    # Changed after the migration: the old files (still there) do not bring anything back.
    store = LocalMetadataStore(data, 1)
    assert store.image.acls == image.acls and store.image.scram == image.scram
    store.append([acl_record(READ, removed=True), broker_config_record("", {})])
    again = LocalMetadataStore(data, 1).image
    assert again.acls == {DENY} and again.broker_configs == {}
    assert (data / "__acls.json").exists() and (data / "__broker_configs.json").exists()
    assert again.topics["orders"].configs == image.topics["orders"].configs


def test_seeds_create_only_credentials_never_set(tmp_path):
    data = _old_directory(tmp_path)
    config = BrokerConfig.from_props({"log.dirs": str(data), "sasl.scram": (
        "SCRAM-SHA-256=[name=alice,password=other];SCRAM-SHA-512=[name=carol,password=x];"
        "SCRAM-SHA-256=[name=dave,password=dave-secret]")})
    store = LocalMetadataStore(data, 1)
    alice = store.image.scram[("alice", SHA256)]
    creds = open_scram_credentials(config, store, quorum=False)
    assert creds.get("carol", SHA512) is None  # deleted with the old code: stays deleted
    assert creds.get("dave", SHA256) is not None  # a new seed
    assert store.image.scram[("alice", SHA256)] == alice  # the stored one stands
    assert LocalMetadataStore(data, 1).image.scram == store.image.scram
