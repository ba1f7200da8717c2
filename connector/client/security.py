"""The client's side of TLS and SASL: what `security.protocol` asks of each connection.

Settings are librdkafka's (`ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`,
`ssl.key.password`, `ssl.endpoint.identification.algorithm`, `sasl.mechanism`,
`sasl.username`, `sasl.password`) with the Java client's too (`ssl.truststore.location` of
type PEM, `sasl.jaas.config`), so a Spark job's `kafka.*` options work unchanged. TLS is the
standard library's `ssl`; SCRAM is `scramp`'s client; PLAIN is one token.

`authenticate` runs Kafka's handshake on a fresh connection, after ApiVersions: SaslHandshake
v1 (the mechanism), then one SaslAuthenticate per token of the exchange. It returns the session
lifetime the broker gave (KIP-368's `session_lifetime_ms`, 0 for none): the connection runs the
same exchange again before it ends (`connection.py`).
"""
from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scramp import ScramClient, ScramException

from minilog.connector.pem_files import PemFileError, load_ca, load_key_and_chain
from minilog.connector.protocol import ApiKey, ErrorCode, KafkaError, request

from .jaas import client_credentials
from .types import ConfigError, Message

if TYPE_CHECKING:
    from .config import Config
    from .connection import BrokerConnection

# How a request is sent during authentication: `BrokerConnection.send`'s shape.
Send = Callable[..., Awaitable[Message]]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class AuthenticationError(KafkaError):
    """The broker refused our credentials or mechanism; retrying will not help."""


@dataclass(frozen=True)
class ClientSecurity:
    tls: ssl.SSLContext | None
    check_hostname: bool
    mechanism: str | None
    username: str | None
    password: str | None

    @property
    def sasl(self) -> bool:
        return self.mechanism is not None


def client_security(config: Config) -> ClientSecurity | None:
    """What `config` asks of connections; None for plaintext (nothing to do per connection)."""
    protocol = config["security.protocol"]
    if protocol == "plaintext":
        return None
    tls, check = None, False
    if protocol in ("ssl", "sasl_ssl"):
        tls, check = _tls_context(config)
    mechanism = username = password = None
    if protocol.startswith("sasl"):
        mechanism = (config["sasl.mechanism"] or "").upper()
        if mechanism not in MECHANISMS:
            raise ConfigError(f"security.protocol={protocol} needs sasl.mechanism, one of "
                              f"{', '.join(MECHANISMS)} (got {config['sasl.mechanism']!r})")
        username, password = config["sasl.username"], config["sasl.password"]
        if config["sasl.jaas.config"]:
            username, password = client_credentials(config["sasl.jaas.config"])
        if username is None or password is None:
            raise ConfigError(f"sasl.mechanism={mechanism} needs sasl.username and "
                              f"sasl.password (or sasl.jaas.config)")
    return ClientSecurity(tls, check, mechanism, username, password)


def _tls_context(config: Config) -> tuple[ssl.SSLContext, bool]:
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = (config[key] or "PEM").upper()
        if kind != "PEM":
            raise ConfigError(f"{key}={kind}: the minilog client reads PEM files only; use "
                              f"ssl.ca.location / ssl.certificate.location / ssl.key.location "
                              f"(convert with `openssl pkcs12 -in store.p12 -out store.pem`)")
    ctx = ssl.create_default_context()
    try:
        ca = config["ssl.ca.location"]
        if ca:
            load_ca(ctx, "ssl.ca.location", ca)
        cert = config["ssl.certificate.location"]
        if cert:
            load_key_and_chain(ctx, "ssl.certificate.location", cert, config["ssl.key.password"],
                               config["ssl.key.location"], "ssl.key.location")
        elif config["ssl.key.location"]:
            raise ConfigError("ssl.key.location needs ssl.certificate.location")
    except PemFileError as e:
        raise ConfigError(str(e)) from None
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"TLS settings: {e}") from None
    check = config["ssl.endpoint.identification.algorithm"] == "https"
    ctx.check_hostname = check
    return ctx, check


async def authenticate(conn: BrokerConnection, security: ClientSecurity,
                       send: Send | None = None) -> int:
    """SaslHandshake then SaslAuthenticate rounds on `conn` (through `send`, `conn.send` by
    default); AuthenticationError on refusal. Returns the session lifetime in ms (0: none)."""
    send = send or conn.send
    hs = await send(ApiKey.SASL_HANDSHAKE,
                    request(ApiKey.SASL_HANDSHAKE).cls(mechanism=security.mechanism), 1)
    if hs.error_code:
        offered = ", ".join(hs.mechanisms or []) or "none"
        raise AuthenticationError(hs.error_code, f"{conn.address} does not accept SASL "
                                                 f"mechanism {security.mechanism} "
                                                 f"(it offers {offered})")
    username, password = security.username or "", security.password or ""
    if security.mechanism == "PLAIN":
        token = b"\0" + username.encode() + b"\0" + password.encode()
        lifetime: int = (await _round(conn, send, token)).session_lifetime_ms or 0
        return lifetime
    scram = ScramClient([security.mechanism], username, password)
    server_first = await _round(conn, send, scram.get_client_first().encode())
    try:
        scram.set_server_first(bytes(server_first.auth_bytes).decode())
        server_final = await _round(conn, send, scram.get_client_final().encode())
        scram.set_server_final(bytes(server_final.auth_bytes).decode())
    except ScramException as e:
        raise AuthenticationError(ErrorCode.SASL_AUTHENTICATION_FAILED,
                                  f"SCRAM exchange with {conn.address} failed: {e}") from None
    lifetime = server_final.session_lifetime_ms or 0
    return lifetime


async def _round(conn: BrokerConnection, send: Send, token: bytes) -> Message:
    """One SaslAuthenticate: the broker's response, AuthenticationError if it refused."""
    body = request(ApiKey.SASL_AUTHENTICATE).cls(auth_bytes=token)
    resp = await send(ApiKey.SASL_AUTHENTICATE, body)
    if resp.error_code:
        why = resp.error_message or "authentication failed"
        raise AuthenticationError(resp.error_code, f"{conn.address}: {why}")
    return resp
