"""A broker's listeners as Kafka names them: `listeners`, `listener.security.protocol.map`,
`advertised.listeners`, and the per-listener settings `listener.name.<name>.<key>`.

A listener is a name (PLAINTEXT, SASL_SSL, INTERNAL, CONTROLLER...), the security protocol it
speaks (the name itself when it is one of Kafka's four protocols, else the map says) and where
it listens and is advertised. This module only parses and checks; the server decides what each
protocol costs a connection (`broker/server/secure_connection.py`), so a PLAINTEXT listener is
served exactly as before.
"""
from dataclasses import dataclass
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Broker settings of the security feature, with Kafka's names: (type, default).
SECURITY_KEYS: dict[str, tuple[type, Any]] = {
    "listener.security.protocol.map": (str, None),
    "inter.broker.listener.name": (str, None),
    "security.inter.broker.protocol": (str, None),
    "sasl.enabled.mechanisms": (str, "GSSAPI"),
    "sasl.mechanism.inter.broker.protocol": (str, "GSSAPI"),
    "sasl.mechanism.controller.protocol": (str, "GSSAPI"),
    "sasl.jaas.config": (str, None),
    "sasl.scram": (str, None),  # minilog: bootstrap SCRAM users, user:password[,user:password]
    # minilog: a connection must finish its TLS and SASL handshakes within this time.
    "connections.authentication.timeout.ms": (int, 10000),
    "connection.failed.authentication.delay.ms": (int, 100),
    # the largest frame a connection may send before it has authenticated (CVE-2022-34917)
    "sasl.server.max.receive.size": (int, 524288),
    # KIP-368: a SASL session lasts this long, then the client re-authenticates on the same
    # connection or is disconnected at its next request (0: sessions never expire)
    "connections.max.reauth.ms": (int, 0),
    "ssl.keystore.type": (str, "PEM"),
    "ssl.keystore.location": (str, None),
    "ssl.keystore.password": (str, None),
    "ssl.key.password": (str, None),
    "ssl.keystore.certificate.chain": (str, None),
    "ssl.keystore.key": (str, None),
    "ssl.truststore.type": (str, "PEM"),
    "ssl.truststore.location": (str, None),
    "ssl.truststore.password": (str, None),
    "ssl.truststore.certificates": (str, None),
    "ssl.client.auth": (str, "none"),
    "ssl.enabled.protocols": (str, "TLSv1.2,TLSv1.3"),
    "ssl.protocol": (str, "TLSv1.3"),
    "ssl.cipher.suites": (str, None),
    "ssl.endpoint.identification.algorithm": (str, "https"),
    "ssl.principal.mapping.rules": (str, "DEFAULT"),
}

# What `listener.name.<listener>.` may prefix: the SSL settings and, after a mechanism name,
# the SASL ones (Kafka's `listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config`, and
# `...scram-sha-256.connections.max.reauth.ms`).
_OVERRIDABLE = {k for k in SECURITY_KEYS if k.startswith(("ssl.", "sasl."))} | {
    "connections.max.reauth.ms"}


def overridden_key(key: str) -> str | None:
    """The setting a per-listener key overrides: `sasl.jaas.config` for
    `listener.name.sasl_ssl.plain.sasl.jaas.config`; None when `key` is not of that form."""
    if not key.startswith("listener.name."):
        return None
    parts = key.split(".", 3)
    if len(parts) < 4:
        return None
    rest = parts[3]
    if rest in _OVERRIDABLE:
        return rest
    mechanism, _, sasl_key = rest.partition(".")
    return sasl_key if mechanism and sasl_key else None


def is_listener_setting(key: str) -> bool:
    """True for `listener.name.<listener>.<ssl or sasl key>`, Kafka's per-listener form."""
    return overridden_key(key) in _OVERRIDABLE


@dataclass(frozen=True)
class Listener:
    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def secure(self) -> bool:
        return self.protocol != "PLAINTEXT"


class ListenerError(ValueError):
    pass


def security_protocols(spec: str | None) -> dict[str, str]:
    """{listener name: security protocol} of `listener.security.protocol.map` (Kafka's
    identity map of the four protocols when unset)."""
    if not spec:
        return {p: p for p in PROTOCOLS}
    out: dict[str, str] = {}
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        name, sep, proto = item.partition(":")
        if not sep or proto.strip().upper() not in PROTOCOLS:
            raise ListenerError(f"listener.security.protocol.map: expected NAME:PROTOCOL with a "
                                f"protocol among {', '.join(PROTOCOLS)}, got {item!r}")
        out[name.strip().upper()] = proto.strip().upper()
    return out


def _endpoints(spec: str, key: str) -> list[tuple[str, str, int]]:
    """[(NAME, host, port)] of a `listeners`-style value, in order."""
    out: list[tuple[str, str, int]] = []
    for item in (s.strip() for s in spec.split(",") if s.strip()):
        name, sep, address = item.partition("://")
        if not sep:
            name, address = "PLAINTEXT", item
        host, _, port_text = address.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            port = int(port_text)
        except ValueError:
            raise ListenerError(f"{key} must look like NAME://host:port, got {item!r}") from None
        out.append((name.strip().upper(), host, port))
    if not out:
        raise ListenerError(f"{key} names no listener")
    names = [n for n, _, _ in out]
    if len(set(names)) != len(names):
        raise ListenerError(f"{key} names a listener twice: {spec}")
    return out


def parse_listeners(listeners: str, advertised: str | None, protocol_map: str | None,
                    controller_names: set[str]) -> list[Listener]:
    """The listeners, in the order `listeners` gives them, each with its protocol and
    advertised address (advertised.listeners by name, else the bound address)."""
    protocols = security_protocols(protocol_map)
    adv = {n: (h, p) for n, h, p in _endpoints(advertised, "advertised.listeners")} \
        if advertised else {}
    out: list[Listener] = []
    for name, host, port in _endpoints(listeners, "listeners"):
        protocol = protocols.get(name)
        if protocol is None:
            if name in controller_names:
                protocol = "PLAINTEXT"
            else:
                raise ListenerError(f"listener {name} has no security protocol: name it in "
                                    f"listener.security.protocol.map or use one of "
                                    f"{', '.join(PROTOCOLS)}")
        adv_host, adv_port = adv.get(name, (host, port))
        if adv_host in ("", "0.0.0.0", "::"):
            adv_host = "127.0.0.1"
        out.append(Listener(name, protocol, host or "0.0.0.0", port, adv_host, adv_port))
    unknown = set(adv) - {lst.name for lst in out}
    if unknown:
        raise ListenerError(f"advertised.listeners names {', '.join(sorted(unknown))}, which "
                            f"listeners does not")
    return out


def listener_setting(values: dict[str, Any], listener: str, key: str,
                     mechanism: str | None = None) -> Any:
    """A setting for one listener: `listener.name.<l>[.<mechanism>].<key>` over the global key,
    as Kafka resolves them."""
    prefix = f"listener.name.{listener.lower()}."
    if mechanism is not None:
        value = values.get(f"{prefix}{mechanism.lower()}.{key}")
        if value is not None:
            return value
    value = values.get(prefix + key)
    return value if value is not None else values.get(key)
