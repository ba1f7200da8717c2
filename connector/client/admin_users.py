"""SCRAM users through Kafka's admin APIs (KIP-554): DescribeUserScramCredentials and
AlterUserScramCredentials, as `kafka-configs.sh --entity-type users` uses them.

The password never leaves the client: it is salted here (a random salt, PBKDF2 with the
mechanism's hash, RFC 5802's Hi) and the broker stores keys derived from the salted password.
"""
import hashlib
import os
from typing import NamedTuple

from typing import Any

from minilog.connector.protocol import ApiKey, KafkaError, request

from .connection import BrokerConnection
from .types import Message

MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_NAMES = {code: name for name, code in MECHANISMS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
DEFAULT_ITERATIONS = 4096


class ScramCredentialInfo(NamedTuple):
    mechanism: str
    iterations: int


def _mechanism(name: str) -> int:
    try:
        return MECHANISMS[name.upper()]
    except KeyError:
        raise ValueError(f"SCRAM mechanism must be one of {', '.join(MECHANISMS)}, "
                         f"got {name!r}") from None


def upsertion(user: str, mechanism: str, password: str,
              iterations: int = DEFAULT_ITERATIONS) -> Message:
    """One AlterUserScramCredentials upsertion: the password salted here."""
    code = _mechanism(mechanism)
    salt = os.urandom(32)
    salted = hashlib.pbkdf2_hmac(_HASHES[_NAMES[code]], password.encode(), salt, iterations)
    return request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS).make(
        "upsertions", name=user, mechanism=code, iterations=iterations, salt=salt,
        salted_password=salted)


def deletion(user: str, mechanism: str) -> Message:
    return request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS).make(
        "deletions", name=user, mechanism=_mechanism(mechanism))


async def alter(conn: BrokerConnection, upsertions: list[Message],
                deletions: list[Message]) -> None:
    """Send the alterations; raise the first user's error (Kafka's code and message)."""
    body = request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS).cls(upsertions=upsertions,
                                                             deletions=deletions)
    resp = await conn.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)
    for r in resp.results:
        if r.error_code:
            raise KafkaError(r.error_code, f"user {r.user!r}: {r.error_message}")


async def describe(conn: BrokerConnection,
                   users: list[str] | None) -> dict[str, list["ScramCredentialInfo"]]:
    """{user: [ScramCredentialInfo]}; every user when `users` is None."""
    req = request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    wanted = None if users is None else [req.make("users", name=u) for u in users]
    resp = await conn.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, req.cls(users=wanted))
    if resp.error_code:
        raise KafkaError(resp.error_code, resp.error_message)
    out: dict[str, list[ScramCredentialInfo]] = {}
    for r in resp.results:
        if r.error_code:
            raise KafkaError(r.error_code, r.error_message or f"user {r.user!r}")
        out[r.user] = [ScramCredentialInfo(_NAMES.get(c.mechanism, str(c.mechanism)),
                                           c.iterations) for c in r.credential_infos]
    return out
