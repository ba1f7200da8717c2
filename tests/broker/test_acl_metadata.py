"""ACL records of the metadata log: applied in order they build the image's ACLs, a removal
undoes a creation, and a metadata snapshot carries them (a node loading it knows every ACL
without the records before it)."""
from minilog.broker.metadata import records
from minilog.broker.metadata.delta import replayed
from minilog.broker.security.acl_metadata import acl_record, image_acls
from minilog.broker.security.acls import AclOperation, PatternType, PermissionType, ResourceType
from minilog.broker.metadata.image import MetadataImage
from minilog.connector.acl_types import AclBinding

READ = AclBinding(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                  AclOperation.READ, PermissionType.ALLOW)
DENY = AclBinding(ResourceType.GROUP, "g-", PatternType.PREFIXED, "User:bob", "10.0.0.1",
                  AclOperation.ALL, PermissionType.DENY)


def _replayed(*recs):
    return replayed(MetadataImage("cluster"), [(offset, records.decode(records.encode(rec)))
                                               for offset, rec in enumerate(recs)])


def test_records_add_and_remove_acls_in_log_order():
    image = _replayed(acl_record(READ), acl_record(DENY), acl_record(READ, removed=True))
    assert set(image_acls(image)) == {DENY}


def test_a_snapshot_carries_the_acls():
    snapshot = records.image_record(_replayed(acl_record(READ), acl_record(DENY)))
    loaded = _replayed(acl_record(READ, removed=True), snapshot)
    assert set(image_acls(loaded)) == {READ, DENY}
