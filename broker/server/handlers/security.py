"""SASL requests outside a handshake, and SCRAM credentials (KIP-554).

SaslHandshake and SaslAuthenticate are answered here only where no handshake is under way (a
PLAINTEXT or SSL listener, or a connection already authenticated): ILLEGAL_SASL_STATE, as
Kafka answers. The handshake itself is the connection's business (`secure_connection.py`).
"""
from minilog.connector.protocol import ApiKey, ErrorCode, response

from ...security.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_CODES,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    from_salted_password,
)
from . import handles

_HANDSHAKE = response(ApiKey.SASL_HANDSHAKE)
_AUTHENTICATE = response(ApiKey.SASL_AUTHENTICATE)
_DESCRIBE = response(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
_ALTER = response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)


@handles(ApiKey.SASL_HANDSHAKE, 0, 1)
async def sasl_handshake(broker, header, req):
    return _HANDSHAKE.cls(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


@handles(ApiKey.SASL_AUTHENTICATE, 0, 2)
async def sasl_authenticate(broker, header, req):
    return _AUTHENTICATE.cls(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                             error_message="SaslAuthenticate outside a SASL handshake",
                             auth_bytes=b"", session_lifetime_ms=0)


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
async def describe_user_scram_credentials(broker, header, req):
    users = broker.scram.users()
    if req.users is None or not req.users:
        wanted = sorted(users)
    else:
        wanted = [u.name for u in req.users]
    results, seen = [], set()
    for name in wanted:
        creds = users.get(name)
        if name in seen:
            results.append(_describe_failed(name, ErrorCode.DUPLICATE_RESOURCE,
                                            f"Cannot describe SCRAM credentials for the same "
                                            f"user twice: {name}"))
            continue
        seen.add(name)
        if not creds:
            results.append(_describe_failed(name, ErrorCode.RESOURCE_NOT_FOUND,
                                            f"Attempt to describe a user credential that does "
                                            f"not exist: {name}"))
            continue
        infos = [_DESCRIBE.make("results", "credential_infos", mechanism=MECHANISM_CODES[m],
                                iterations=c.iterations) for m, c in sorted(creds.items())]
        results.append(_DESCRIBE.make("results", user=name, error_code=0, error_message=None,
                                      credential_infos=infos))
    return _DESCRIBE.cls(throttle_time_ms=0, error_code=0, error_message=None, results=results)


def _describe_failed(name, code, message):
    return _DESCRIBE.make("results", user=name, error_code=code, error_message=message,
                          credential_infos=[])


def _alteration_error(name, mechanism, iterations=None):
    """Kafka's checks of one alteration: (error code, message) or None when it is valid."""
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None and not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    return None


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0)
async def alter_user_scram_credentials(broker, header, req):
    names = [d.name for d in req.deletions] + [u.name for u in req.upsertions]
    twice = {n for n in names if names.count(n) > 1}
    errors = {}
    for d in req.deletions:
        problem = _alteration_error(d.name, d.mechanism)
        if problem is None and broker.scram.get(d.name, MECHANISM_NAMES[d.mechanism]) is None:
            problem = (ErrorCode.RESOURCE_NOT_FOUND,
                       "Attempt to delete a user credential that does not exist")
        if problem:
            errors.setdefault(d.name, problem)
    for u in req.upsertions:
        problem = _alteration_error(u.name, u.mechanism, u.iterations)
        if problem:
            errors.setdefault(u.name, problem)
    for name in twice:
        errors[name] = (ErrorCode.DUPLICATE_RESOURCE,
                        "A user credential cannot be altered twice in the same request")
    for d in req.deletions:
        if d.name not in errors:
            broker.scram.delete(d.name, MECHANISM_NAMES[d.mechanism])
    for u in req.upsertions:
        if u.name not in errors:
            mechanism = MECHANISM_NAMES[u.mechanism]
            broker.scram.upsert(u.name, mechanism, from_salted_password(
                mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations))
    results = []
    for name in dict.fromkeys(names):
        code, message = errors.get(name, (0, None))
        results.append(_ALTER.make("results", user=name, error_code=code, error_message=message))
    return _ALTER.cls(throttle_time_ms=0, results=results)
