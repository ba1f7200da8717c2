"""SCRAM credentials in a cluster: records of the `__cluster_metadata` log, so every broker
knows every user (Kafka keeps them there too, as UserScramCredentialRecord).

A `scram_credential` record carries one user's credential for one mechanism (salt, keys,
iterations; never a password), or its removal. Applied records build a `ScramCredentials` on
the metadata image, and metadata snapshots carry them as their own section. Only the active
controller appends (AlterUserScramCredentials is forwarded there); every node reads.
"""
from ..metadata import records as metadata_records
from .scram_credentials import ScramCredential, ScramCredentials

RECORD_TYPE = "scram_credential"


def credential_record(user: str, mechanism: str, credential: ScramCredential | None) -> dict:
    return {"type": RECORD_TYPE, "user": user, "mechanism": mechanism,
            "credential": None if credential is None else credential.to_json()}


def image_credentials(image) -> ScramCredentials:
    """The credentials the image's records have built (an empty set at first)."""
    found = getattr(image, "scram_credentials", None)
    if found is None:
        found = image.scram_credentials = ScramCredentials()
    return found


def _apply(image, rec: dict) -> None:
    creds = image_credentials(image)
    if rec["credential"] is None:
        creds.delete(rec["user"], rec["mechanism"])
    else:
        creds.upsert(rec["user"], rec["mechanism"], ScramCredential.from_json(rec["credential"]))


def _dump(image) -> dict:
    return image_credentials(image).to_json()


def _load(image, data: dict | None) -> None:
    image_credentials(image).load_json(data or {})


metadata_records.EXTENSION_RECORDS[RECORD_TYPE] = _apply
metadata_records.IMAGE_SECTIONS["scram"] = (_dump, _load)


class QuorumScramCredentials:
    """What the broker's SASL and admin handlers use in a cluster: reads from the committed
    image (then from this node's `sasl.scram` bootstrap users, unless the image has set or
    deleted that credential since), writes as metadata records."""

    def __init__(self, store, bootstrap: ScramCredentials):
        self._store = store
        self._bootstrap = bootstrap
        store.listeners.append(self._applied)

    def _applied(self, rec, changed) -> None:
        if rec is None:  # the image was reset (the log truncated): records will be replayed
            image_credentials(self._store.image).load_json({})

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        image = image_credentials(self._store.image)
        if image.ever_set(user, mechanism):  # set or deleted through the cluster: that stands
            return image.get(user, mechanism)
        return self._bootstrap.get(user, mechanism)

    def users(self) -> dict:
        image = image_credentials(self._store.image)
        merged = {user: {m: c for m, c in mechanisms.items() if not image.was_deleted(user, m)}
                  for user, mechanisms in self._bootstrap.users().items()}
        for user, mechanisms in image.users().items():
            merged.setdefault(user, {}).update(mechanisms)
        return {user: mechanisms for user, mechanisms in merged.items() if mechanisms}

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._store.append([credential_record(user, mechanism, credential)])

    def delete(self, user: str, mechanism: str) -> bool:
        self._store.append([credential_record(user, mechanism, None)])
        return True
