"""Where ACLs live: records of the metadata (Kafka keeps them in `__cluster_metadata` as
AccessControlEntryRecord), so an ACL created through any broker of a cluster is enforced by
all (a single broker's one-voter quorum commits them the same way).

An `acl` record adds one ACL or removes it (`removed`); replayed, they make the image's ACLs,
and snapshots carry them (`broker/metadata/delta.py`). Only the active controller appends
(CreateAcls and DeleteAcls are forwarded there), and it decides against its working view, which
holds its own uncommitted records; every node enforces the committed ACLs, which reach it as a
metadata publisher (Kafka's AclPublisher).
"""
from __future__ import annotations

from typing import Any

from ..metadata import records as metadata_records
from ..metadata.delta import MetadataDelta
from ..metadata.image import MetadataImage
from .acls import AclBinding, AclSet

def acl_record(acl: AclBinding, removed: bool = False) -> dict[str, Any]:
    return metadata_records.acl_record(acl, removed)


def image_acls(image: MetadataImage) -> AclSet:
    """The ACLs the image's records have built, as a set to query."""
    return AclSet.of(image.acls)


class MetadataAcls:
    """The ACLs: the committed ones as published, written as metadata records."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._current = image_acls(store.image)

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if delta.acls_changed:
            self._current = image_acls(image)

    def current(self) -> AclSet:
        """What the authorizer enforces: the committed ACLs."""
        return self._current

    def working(self) -> AclSet:
        """What CreateAcls and DeleteAcls decide against (the controller's working view)."""
        return image_acls(self._store.working)

    def write(self, added: list[AclBinding], removed: list[AclBinding]) -> None:
        self._store.append([acl_record(a) for a in added] +
                           [acl_record(a, removed=True) for a in removed])


def open_acls(store: Any) -> MetadataAcls:
    return MetadataAcls(store)
