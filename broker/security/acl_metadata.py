"""Where a cluster's ACLs live: records of the `__cluster_metadata` log (Kafka keeps them there
as AccessControlEntryRecord), so an ACL created through any broker is enforced by all; a
single broker keeps them in a JSON file beside its metadata.

An `acl` record adds one ACL or removes it (`removed`). Applied records build an `AclSet` on
the metadata image, and snapshots carry the set as their own section. Only the active
controller appends (CreateAcls and DeleteAcls are forwarded there), and it decides against
its working view, which holds its own uncommitted records; every node reads the committed image.
"""
import json
import os

from ..metadata import records as metadata_records
from .acls import AclBinding, AclSet

RECORD_TYPE = "acl"
FILE_NAME = "__acls.json"


def acl_record(acl: AclBinding, removed: bool = False) -> dict:
    return {"type": RECORD_TYPE, "acl": acl.to_json(), "removed": removed}


def image_acls(image) -> AclSet:
    """The ACLs the image's records have built (an empty set at first)."""
    found = getattr(image, "acls", None)
    if found is None:
        found = image.acls = AclSet()
    return found


def _apply(image, rec: dict) -> None:
    acl = AclBinding.from_json(rec["acl"])
    if rec["removed"]:
        image_acls(image).remove(acl)
    else:
        image_acls(image).add(acl)


def _load(image, data: list | None) -> None:
    image_acls(image).load_json(data or [])


metadata_records.EXTENSION_RECORDS[RECORD_TYPE] = _apply
metadata_records.IMAGE_SECTIONS["acls"] = (lambda image: image_acls(image).to_json(), _load)


class QuorumAcls:
    """A cluster's ACLs: read from the committed image, written as metadata records."""

    def __init__(self, store):
        self._store = store
        store.listeners.append(self._applied)

    def _applied(self, rec, changed) -> None:
        if rec is None:  # the image was reset (the log truncated): records will be replayed
            image_acls(self._store.image).load_json([])

    def current(self) -> AclSet:
        """What the authorizer enforces: the committed ACLs."""
        return image_acls(self._store.image)

    def working(self) -> AclSet:
        """What CreateAcls and DeleteAcls decide against (the controller's working view)."""
        return image_acls(self._store.working)

    def write(self, added: list, removed: list) -> None:
        self._store.append([acl_record(a) for a in added] +
                           [acl_record(a, removed=True) for a in removed])


class FileAcls:
    """A single broker's ACLs, in one file replaced atomically on each change."""

    def __init__(self, data_dir):
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


def open_acls(config, quorum=None):
    return FileAcls(config.data_dir) if quorum is None else QuorumAcls(quorum)
