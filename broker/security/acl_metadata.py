"""Where a cluster's ACLs live: records of the `__cluster_metadata` log (Kafka keeps them there
as AccessControlEntryRecord), so an ACL created through any broker is enforced by all; a
single broker keeps them in a JSON file beside its metadata.

An `acl` record adds one ACL or removes it (`removed`); replayed, they make the image's ACLs,
and snapshots carry them (`broker/metadata/delta.py`). Only the active controller appends
(CreateAcls and DeleteAcls are forwarded there), and it decides against its working view, which
holds its own uncommitted records; every node enforces the committed ACLs, which reach it as a
metadata publisher (Kafka's AclPublisher).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..metadata import records as metadata_records
from ..metadata.delta import MetadataDelta
from ..metadata.image import MetadataImage
from .acls import AclBinding, AclSet

FILE_NAME = "__acls.json"


def acl_record(acl: AclBinding, removed: bool = False) -> dict[str, Any]:
    return metadata_records.acl_record(acl, removed)


def image_acls(image: MetadataImage) -> AclSet:
    """The ACLs the image's records have built, as a set to query."""
    return AclSet.of(image.acls)


class QuorumAcls:
    """A cluster's ACLs: the committed ones as published, written as metadata records."""

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


class FileAcls:
    """A single broker's ACLs, in one file replaced atomically on each change."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / FILE_NAME
        self._acls = AclSet()
        if self._path.exists():
            self._acls.load_json(json.loads(self._path.read_text()))

    def current(self) -> AclSet:
        return self._acls

    working = current

    def write(self, added: list, removed: list) -> None:
        for acl in added:
            self._acls.add(acl)
        for acl in removed:
            self._acls.remove(acl)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(self._acls.to_json(), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)


def open_acls(config: Any, quorum: Any = None) -> FileAcls | QuorumAcls:
    return FileAcls(config.data_dir) if quorum is None else QuorumAcls(quorum)
