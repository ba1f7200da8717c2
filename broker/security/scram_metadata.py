"""SCRAM credentials: records of the metadata, so every broker of a cluster knows every user
(Kafka keeps them in `__cluster_metadata` too, as UserScramCredentialRecord); a single broker's
one-voter quorum commits them the same way.

A `scram_credential` record carries one user's credential for one mechanism (salt, keys,
iterations; never a password), or its removal; replayed, they make the image's credentials,
and snapshots carry them (`broker/metadata/delta.py`). Only the active controller appends
(AlterUserScramCredentials is forwarded there); every node reads the committed credentials,
which reach it as a metadata publisher (Kafka's ScramPublisher).
"""
from __future__ import annotations

from typing import Any

from ..metadata import records as metadata_records
from ..metadata.delta import MetadataDelta
from ..metadata.image import MetadataImage
from .scram_credentials import ScramCredential, ScramCredentials


def credential_record(user: str, mechanism: str,
                      credential: ScramCredential | None) -> dict[str, Any]:
    return metadata_records.scram_record(
        user, mechanism, None if credential is None else credential.to_json())


def image_credentials(image: MetadataImage) -> ScramCredentials:
    """The credentials the image's records have built."""
    found = ScramCredentials()
    found.load_json(metadata_records.scram_json(image.scram))
    return found


class MetadataScramCredentials:
    """What the broker's SASL and admin handlers use: reads from the committed image (then, in
    a cluster, from this node's `sasl.scram` bootstrap users, unless the image has set or
    deleted that credential since), writes as metadata records."""

    def __init__(self, store: Any, bootstrap: ScramCredentials) -> None:
        self._store = store
        self._bootstrap = bootstrap
        self._committed = image_credentials(store.image)

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if delta.scram_changed:
            self._committed = image_credentials(image)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        image = self._committed
        if image.ever_set(user, mechanism):  # set or deleted through the cluster: that stands
            return image.get(user, mechanism)
        return self._bootstrap.get(user, mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        image = self._committed
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
