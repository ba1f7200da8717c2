"""SCRAM credentials (RFC 5802, RFC 7677) as a broker keeps them: salted, never the password.

For each user and mechanism (SCRAM-SHA-256, SCRAM-SHA-512): the salt, the iteration count and
the StoredKey and ServerKey derived from the salted password, which is what a SCRAM server
needs to check a client's proof and sign its own (`scramp` does the exchange itself). Kafka's
AlterUserScramCredentials sends the salted password (KIP-554), so the keys are derived here.
This module knows neither where credentials are persisted nor who may change them.
"""
import base64
import hashlib
import hmac
from dataclasses import dataclass

from scramp import ScramMechanism

# Kafka's ScramMechanism type codes on the wire (DescribeUserScramCredentials...).
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}
_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_json(self) -> dict:
        b64 = base64.b64encode
        return {"salt": b64(self.salt).decode(), "stored_key": b64(self.stored_key).decode(),
                "server_key": b64(self.server_key).decode(), "iterations": self.iterations}

    @classmethod
    def from_json(cls, d: dict) -> "ScramCredential":
        b64 = base64.b64decode
        return cls(b64(d["salt"]), b64(d["stored_key"]), b64(d["server_key"]), d["iterations"])


def from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                         iterations: int) -> ScramCredential:
    """RFC 5802's keys: StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
    HMAC(SaltedPassword, "Server Key")."""
    digest = _HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return ScramCredential(salt, digest(client_key).digest(), server_key, iterations)


def from_password(mechanism: str, password: str, iterations: int = 4096) -> ScramCredential:
    salt, stored_key, server_key, i = ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations)
    return ScramCredential(salt, stored_key, server_key, i)


class ScramCredentials:
    """{user: {mechanism: ScramCredential}}, and which credentials were deleted (so that a
    `sasl.scram` seed does not bring one back: seeds create only what was never set, as
    Kafka's `--add-scram` applies once, at format time); `changed` is called after every
    change."""

    _FORMAT = 2  # to_json's: {"format": 2, "users": ..., "deleted": [[user, mechanism]...]}

    def __init__(self, changed=None):
        self._users: dict = {}
        self._deleted: set[tuple[str, str]] = set()
        self._changed = changed

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict:
        return {u: dict(m) for u, m in self._users.items()}

    def was_deleted(self, user: str, mechanism: str) -> bool:
        return (user, mechanism) in self._deleted

    def ever_set(self, user: str, mechanism: str) -> bool:
        """Whether the credential exists or existed (then was deleted)."""
        return self.get(user, mechanism) is not None or self.was_deleted(user, mechanism)

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self._users.setdefault(user, {})[mechanism] = credential
        self._deleted.discard((user, mechanism))
        self._notify()

    def delete(self, user: str, mechanism: str) -> bool:
        """Remove a credential, and remember it was removed; whether it existed here."""
        self._deleted.add((user, mechanism))
        mechanisms = self._users.get(user, {})
        existed = mechanisms.pop(mechanism, None) is not None
        if existed and not mechanisms:
            del self._users[user]
        self._notify()
        return existed

    def on_change(self, changed) -> None:
        self._changed = changed

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed(self)

    def to_json(self) -> dict:
        return {"format": self._FORMAT,
                "users": {u: {m: c.to_json() for m, c in ms.items()}
                          for u, ms in self._users.items()},
                "deleted": sorted(map(list, self._deleted))}

    def load_json(self, d: dict) -> None:
        """Either format: this one's, or the first, {user: {mechanism: credential}} alone."""
        users = d.get("users", {}) if d.get("format") == self._FORMAT else d
        self._users = {u: {m: ScramCredential.from_json(c) for m, c in ms.items()}
                       for u, ms in users.items()}
        self._deleted = {(u, m) for u, m in d.get("deleted", [])} \
            if d.get("format") == self._FORMAT else set()
