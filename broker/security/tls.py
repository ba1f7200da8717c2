"""TLS for a broker listener from PEM files, with the standard library's `ssl`.

Kafka's settings, per listener (`listener.name.<l>.ssl.*`) or global: `ssl.keystore.type=PEM`
with `ssl.keystore.location` (certificate chain and private key in one file, the key
encrypted with `ssl.key.password` or not) or inline `ssl.keystore.certificate.chain` /
`ssl.keystore.key`; `ssl.truststore.location` (PEM CA certificates) or inline
`ssl.truststore.certificates`; `ssl.client.auth=required|requested|none` (mutual TLS);
`ssl.enabled.protocols`. Java keystores (JKS, PKCS12) are refused with a line saying to use
PEM. The principal of a client certificate is its subject, written as Kafka's DEFAULT
principal mapping writes it (`User:CN=alice,OU=eng,O=example`).
"""
import os
import ssl
import tempfile

from minilog.connector.pem_files import PemFileError, load_ca, load_key_and_chain

from ..config.broker_keys import ConfigError
from ..config.listeners import Listener, listener_setting

_VERSIONS = {"TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}
# RFC 2253 short names, as Java's X500Principal.getName() writes a subject.
_RDN_NAMES = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
              "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
              "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}


def server_context(values: dict, listener: Listener) -> ssl.SSLContext:
    """The SSLContext a TLS listener serves with; a ConfigError names what is missing."""
    def get(key):
        return listener_setting(values, listener.name, key)

    where = f"listener {listener.name}"
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = (get(key) or "PEM").upper()
        if kind != "PEM":
            raise ConfigError(f"{key}={kind} ({where}): minilog reads PEM only; convert with "
                              f"`openssl pkcs12 -in store.p12 -out store.pem` (for JKS first "
                              f"`keytool -importkeystore -deststoretype PKCS12`) and set "
                              f"{key}=PEM")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(ctx, get("ssl.enabled.protocols"), where)
    password = get("ssl.key.password") or get("ssl.keystore.password")
    location, chain, key = (get("ssl.keystore.location"), get("ssl.keystore.certificate.chain"),
                            get("ssl.keystore.key"))
    try:
        if location:
            load_key_and_chain(ctx, _named("ssl.keystore.location", listener, values), location,
                               password)
        elif chain and key:
            _load_inline_chain(ctx, chain, key, password)
        else:
            raise ConfigError(f"{where} speaks {listener.protocol} but has no certificate: set "
                              f"ssl.keystore.location (a PEM file with the certificate chain "
                              f"and the key) or ssl.keystore.certificate.chain and "
                              f"ssl.keystore.key")
        auth = (get("ssl.client.auth") or "none").lower()
        if auth not in _CLIENT_AUTH:
            raise ConfigError(f"ssl.client.auth must be required, requested or none, got {auth!r}")
        ctx.verify_mode = _CLIENT_AUTH[auth]
        trust, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
        if trust:
            load_ca(ctx, _named("ssl.truststore.location", listener, values), trust)
        elif inline:
            ctx.load_verify_locations(cadata=inline)
        elif auth != "none":
            raise ConfigError(f"ssl.client.auth={auth} ({where}) needs ssl.truststore.location "
                              f"to verify client certificates")
        ciphers = get("ssl.cipher.suites")
        if ciphers:
            ctx.set_ciphers(":".join(c.strip() for c in ciphers.split(",")))
    except PemFileError as e:
        raise ConfigError(str(e)) from None
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"TLS setup of {where} failed: {e}") from None
    return ctx


def _named(key: str, listener: Listener, values: dict) -> str:
    """The setting as the user wrote it: per listener (`listener.name.ssl.ssl.keystore...`)
    where that is where it came from, else the global name."""
    own = f"listener.name.{listener.name.lower()}.{key}"
    return own if values.get(own) is not None else key


def _set_versions(ctx: ssl.SSLContext, spec: str | None, where: str) -> None:
    wanted = [v.strip().upper() for v in (spec or "TLSv1.2,TLSv1.3").split(",") if v.strip()]
    unknown = [v for v in wanted if v not in _VERSIONS]
    if unknown or not wanted:
        raise ConfigError(f"ssl.enabled.protocols ({where}) may list TLSv1.2 and TLSv1.3, "
                          f"got {spec!r}")
    versions = sorted(_VERSIONS[v] for v in wanted)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """`ssl` loads certificates from files only: write the inline PEM to a private temporary
    file for the moment of loading."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(chain.strip() + "\n" + key.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def principal_of(ssl_object) -> str:
    """Kafka's principal for a TLS connection: `User:<subject>` of the client's certificate
    (ssl.principal.mapping.rules=DEFAULT), `User:ANONYMOUS` without one."""
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    if not cert or not cert.get("subject"):
        return "User:ANONYMOUS"
    rdns = []
    for rdn in reversed(cert["subject"]):  # X.509 order is root first; RFC 2253 is leaf first
        rdns.append("+".join(f"{_RDN_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return "User:" + ",".join(rdns)


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    return out[:-1] + "\\ " if out.endswith(" ") else out
